"""A state machine for vAttention virtual mapping (seed 0x06): rows written and read back through the
reference's own address translation.

Each committed K/V scalar is stored in a simulated physical memory at ``(handle, delta)``, the address
:func:`kvexact.reference.vmm.translate` gives for its virtual coordinate; ``check_reads`` reads every
valid row of every live request back through translation and compares it with the value written for
that request's generation. Requests grow synchronously or asynchronously (an asynchronous map must be
awaited before rows cross the old frontier), are freed with their mappings retained or unmapped, and an
inactive slot's retained bundle is reclaimed under pressure. Retained mappings must never count as
valid K/V for a new generation (``require_use`` must refuse them), and the ledgers must reconcile after
every step (``check_state``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvexact.conformance.machines import ConformanceFailure
from kvexact.reference import vmm
from kvexact.reference.rejections import Rejected

CONFIG = vmm.VmmConfig(layers=1, request_slots=3, max_tokens=8, kv_heads=2, head_dim=2, elem_bytes=2,
                       page_bytes=16, handles=8)


def _value(request_id: str, generation: int, kind: str, t: int, h: int, d: int) -> int:
    return hash((request_id, generation, kind, t, h, d)) & 0xFFFF


class VmmMachine(RuleBasedStateMachine):
    stats: ClassVar[dict[str, int]] = {}

    def __init__(self) -> None:
        super().__init__()
        self.state = vmm.VmmState.initial(CONFIG)
        self.state, _ = vmm.reserve_virtual(self.state)
        self.state, _ = vmm.create_handles(self.state)
        self.memory: dict[tuple[int, int], int] = {}  # (handle, delta) -> scalar
        self.next_id = 0
        self.stats["examples"] = self.stats.get("examples", 0) + 1

    def _count(self, name: str) -> None:
        self.stats[name] = self.stats.get(name, 0) + 1

    def _try(self, name: str, op: Any, *args: Any, **kw: Any) -> Any:
        try:
            self.state, receipt = op(self.state, *args, **kw)
        except Rejected as exc:
            self._count(f"{name}:{exc.reason.name}")
            return None
        self._count(f"{name}:ok")
        return receipt

    def _inactive(self) -> list[int]:
        return [s.slot for s in self.state.slots if not s.active]

    def _active(self) -> list[int]:
        return [s.slot for s in self.state.slots if s.active]

    @precondition(lambda self: bool(self._inactive()))
    @rule(data=st.data())
    def alloc(self, data: st.DataObject) -> None:
        slot = data.draw(st.sampled_from(self._inactive()), label="slot")
        self._try("alloc_reqid", vmm.alloc_reqid, slot, f"req{self.next_id}")
        self.next_id += 1
        s = self.state.slot(slot)
        if s.pages:  # retained capacity is never valid K/V of the new generation (0x06E)
            try:
                vmm.require_use(self.state, slot, s.generation, 1)
            except Rejected:
                self._count("retained_pages_refused_as_kv")
            else:
                raise ConformanceFailure(f"slot {slot}: a retained page was accepted as valid K/V")

    @precondition(lambda self: bool(self._active()))
    @rule(data=st.data(), rows=st.integers(1, 3), asynchronous=st.booleans())
    def grow(self, data: st.DataObject, rows: int, asynchronous: bool) -> None:
        """Map before use, then write ``rows`` rows through translation (awaiting an async map first)."""
        self.grow_slot(data.draw(st.sampled_from(self._active()), label="slot"), rows, asynchronous)

    def grow_slot(self, slot: int, rows: int, asynchronous: bool) -> None:
        s = self.state.slot(slot)
        target = min(CONFIG.max_tokens, s.valid_tokens + rows)
        if target == s.valid_tokens:
            return
        step = vmm.step_async if asynchronous else vmm.step_sync
        if self._try("map", step, slot, target) is None:
            return
        s = self.state.slot(slot)
        start = s.valid_tokens
        if s.ready_pages < len(s.pages):
            if target > s.ready_pages * CONFIG.page_tokens and self._try(
                    "write_before_await", vmm.write_rows, slot, s.generation, start, target - start) is not None:
                raise ConformanceFailure("rows were written beyond the ready frontier before the await")
            self._try("await_mapping", vmm.await_mapping, slot)
        if self._try("write_rows", vmm.write_rows, slot, s.generation, start, target - start) is None:
            return
        for t in range(start, target):
            for kind in ("K", "V"):
                for h in range(CONFIG.kv_heads):
                    for d in range(CONFIG.head_dim):
                        where = vmm.translate(self.state, kind, 0, slot, t, h, d)
                        self.memory[where] = _value(str(s.request_id), s.generation, kind, t, h, d)

    @precondition(lambda self: bool(self._active()))
    @rule(data=st.data(), unmap=st.booleans())
    def free(self, data: st.DataObject, unmap: bool) -> None:
        slot = data.draw(st.sampled_from(self._active()), label="slot")
        self._try("free_reqid", vmm.free_reqid, slot, unmap=unmap)

    @precondition(lambda self: any(s.pages for s in self.state.slots if not s.active))
    @rule(data=st.data())
    def reclaim(self, data: st.DataObject) -> None:
        slot = data.draw(st.sampled_from([s.slot for s in self.state.slots if not s.active and s.pages]))
        self._try("reclaim_inactive", vmm.reclaim_inactive, slot)

    @rule()
    def check_reads(self) -> None:
        """Every valid row of every live request reads back, through translation, what was written."""
        for s in self.state.slots:
            if not s.active or not s.valid_tokens:
                continue
            vmm.require_use(self.state, s.slot, s.generation, s.valid_tokens)
            for t in range(s.valid_tokens):
                for kind in ("K", "V"):
                    for h in range(CONFIG.kv_heads):
                        for d in range(CONFIG.head_dim):
                            got = self.memory.get(vmm.translate(self.state, kind, 0, s.slot, t, h, d))
                            if got != _value(str(s.request_id), s.generation, kind, t, h, d):
                                raise ConformanceFailure(f"slot {s.slot} {kind}[t={t},h={h},d={d}] reads {got}: "
                                                         "another request's or an older generation's bytes")
        self._count("read_checks")

    @invariant()
    def ledgers_reconcile(self) -> None:
        self._count("steps")
        vmm.check_state(self.state)

    def teardown(self) -> None:
        self.check_reads()
