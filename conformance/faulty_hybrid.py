"""Deliberately faulty hybrid-group caches (mutants of the normative one) that the Hybrid machine must catch
through the adapter path.

* ``faulty_one_group``: the hit trusts group 0's cached prefix alone (a prefix group 1 lost still counts),
  the bug 0x07C's convergence rule exists to prevent;
* ``faulty_unaligned``: the hit is the prefix every group serves, but not rounded down to the lcm of the
  block sizes (a hit that ends inside some group's block).

Both keep the normative cache's state; only the hit they report is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvexact.reference.hybrid_adapter import HybridCacheConfig, ReferenceHybridCache


class OneGroupHit(ReferenceHybridCache):
    """Mutant: the hit is group 0's longest cached prefix (capped, lcm-aligned); other groups are not asked."""

    name = "faulty-one-group"

    def _reported(self, prompt: Sequence[int]) -> int:
        r = self._hit("probe", prompt)
        hit = min(r.served_tokens[0], r.cap_tokens)
        return int(hit - hit % r.alignment_tokens)

    def admit(self, request_id: str, prompt: Sequence[int]) -> int | None:
        reported = self._reported(prompt)
        super().admit(request_id, prompt)
        return reported

    def lookup(self, prompt: Sequence[int]) -> int:
        return self._reported(prompt)


class UnalignedHit(OneGroupHit):
    """Mutant: the hit is the shortest group's cached prefix (capped), not rounded down to the lcm."""

    name = "faulty-unaligned"

    def _reported(self, prompt: Sequence[int]) -> int:
        r = self._hit("probe", prompt)
        return int(min(*r.served_tokens, r.cap_tokens))


def faulty_one_group(config: HybridCacheConfig) -> OneGroupHit:
    """``--adapter kvexact.conformance.faulty_hybrid:faulty_one_group`` (must be caught)."""
    return OneGroupHit(config)


def faulty_unaligned(config: HybridCacheConfig) -> UnalignedHit:
    """``--adapter kvexact.conformance.faulty_hybrid:faulty_unaligned`` (must be caught)."""
    return UnalignedHit(config)


faulty_one_group.adapter_protocol = "hybrid-cache"  # type: ignore[attr-defined]
faulty_unaligned.adapter_protocol = "hybrid-cache"  # type: ignore[attr-defined]
