"""A deliberately faulty prefix index (a mutant of the normative one) that the Radix machine must catch:
the prefix-index counterpart of the faulty allocators in :mod:`kvexact.conformance.simple_runtime`.

``--adapter kvexact.conformance.faulty_index:faulty_leaky_cancel`` is the normative radix index
(:class:`~kvexact.reference.index.RadixIndex`) except that ``cancel`` unlocks the request's prefix but
never returns its private slots to the free pool: they stay reserved for nobody, a leak. The step that
shows the bug is the ``cancel`` itself (the adapter's free slots lack what the reference freed).
"""

from __future__ import annotations

from kvexact.reference import radix
from kvexact.reference.index import IndexConfig, RadixIndex

LEAKED = "leaked"  # the request id that holds the slots a cancel leaked


class LeakyCancelIndex(RadixIndex):
    """Mutant: a cancelled request's private slots are kept (under :data:`LEAKED`), never freed."""

    name = "faulty-leaky-cancel"
    state: radix.RadixState

    def cancel(self, request_id: str) -> None:
        before = set(self.state.free_slot_ids)
        super().cancel(request_id)
        freed = sorted(set(self.state.free_slot_ids) - before)
        if freed:
            self.state, _ = radix.reserve(self.state, LEAKED, freed)


def faulty_leaky_cancel(config: IndexConfig) -> LeakyCancelIndex:
    """``--adapter kvexact.conformance.faulty_index:faulty_leaky_cancel`` (must be caught)."""
    return LeakyCancelIndex(config)


faulty_leaky_cancel.adapter_protocol = "prefix-index"  # type: ignore[attr-defined]
