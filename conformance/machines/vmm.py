"""A state machine for vAttention virtual mapping (seed 0x06): K/V rows written through the reference's
own address translation into physical memory, read back element by element, and attended over through
the Triton decode kernel from the request's contiguous virtual buffer.

Physical memory is a float32 tensor ``[handles, page_bytes // elem_bytes]`` (one row per physical
handle; the configured ``elem_bytes`` only sets addresses), NaN at creation. Every request generation
has its own token list and a serial ``group``; row ``t`` of tensor ``kind`` holds
``kv_row(tokens[:t+1], group)`` (K or V), so another request's rows or an older generation's rows differ
even with equal tokens. Every element is written at the ``(handle, delta_bytes)`` that
:func:`kvexact.reference.vmm.translate` gives for its virtual coordinate. Every handle the reference
takes back (an unmap on free, ``reclaim_inactive``, a reclaim inside ``step_async``: any handle whose
owner changed or that became free) is poisoned with NaN at that step.

``check_reads`` reads every valid row of every live request back through translation and compares it
exactly. ``check_attention`` plays the MMU: for every live request it builds the contiguous virtual K and
V buffers ``[pages * page_tokens, kv_heads, head_dim]`` by reading physical memory through translation for
every ready page (rows of unready or unmapped pages are NaN; rows of ready pages past the valid rows keep
whatever is physically there, such as a retained older generation's rows), then runs one unmodified
``paged_decode_attention`` over all of them with an identity block table, and compares each request with
float64 attention over K/V rows built from its tokens (never read back from memory). The kernels take
one block table for K and V while a vAttention bundle puts K and V of one page in different handles, so
the virtual buffers, not the physical handles, are what the kernel sees.

Requests grow synchronously or asynchronously (an asynchronous map must be awaited before rows cross the
old frontier), are freed with their mappings retained or unmapped, and an inactive slot's retained
bundle is reclaimed under pressure. Slots a rule made travel in Hypothesis bundles: ``alloc`` returns the
slot of the new generation into ``live`` (``grow`` draws from it, ``free`` consumes it) and ``free`` returns a
slot whose pages it retained into ``retained`` (``reclaim`` consumes it; a slot given to a new generation
since is counted as ``reclaim:slot_reused`` and left alone). ``alloc`` takes an inactive slot by a drawn
integer modulo the inactive slots: no rule draws inside its body. Retained mappings must never count as
valid K/V for a new generation (``require_use`` must refuse them), and the ledgers must reconcile after
every step (``check_state``).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    multiple,
    precondition,
    rule,
)

from kvexact.conformance.machines import ConformanceFailure, counted_rule
from kvexact.conformance.machines.vmm_trace import VmmTraceRecorder
from kvexact.conformance.mirror import HEAD_DIM, NUM_KV_HEADS, NUM_Q_HEADS, kv_row, query_row
from kvexact.kernels import device as policy
from kvexact.reference import vmm
from kvexact.reference.rejections import Rejected

CONFIG = vmm.VmmConfig(layers=1, request_slots=3, max_tokens=8, kv_heads=2, head_dim=4, elem_bytes=2,
                       page_bytes=32, handles=8)  # 16-byte rows, 2 tokens per page, 4 pages per request
ALPHABET = (1, 2, 3)
TOLERANCE = 2e-4
KINDS = ("K", "V")
assert CONFIG.kv_heads == NUM_KV_HEADS and CONFIG.head_dim <= HEAD_DIM and NUM_Q_HEADS % CONFIG.kv_heads == 0


@functools.lru_cache(maxsize=4096)
def _rows(prefix: tuple[int, ...], group: int) -> tuple[Any, Any]:
    """(k, v) ``[kv_heads, head_dim]`` of the last token of ``prefix`` for request serial ``group``."""
    k, v = kv_row(prefix, group)
    return k[: CONFIG.kv_heads, : CONFIG.head_dim].clone(), v[: CONFIG.kv_heads, : CONFIG.head_dim].clone()


@attrs.define
class Request:
    """The logical history of one request generation: its id, its serial (the ``kv_row`` group) and tokens."""

    request_id: str
    group: int
    tokens: list[int] = attrs.Factory(list)

    def expected(self, t: int) -> tuple[Any, Any]:
        return _rows(tuple(self.tokens[: t + 1]), self.group)


class VmmMachine(RuleBasedStateMachine):
    live = Bundle("live")  # slots a request generation holds, from its alloc to its free
    retained = Bundle("retained")  # slots freed with their pages mapped, until reclaimed
    stats: ClassVar[dict[str, int]] = {}
    check_kernels: ClassVar[bool] = True  # False: read-back checks only, no attention through the kernel
    validate_trace: ClassVar[bool] = True  # every reference step validated against spec/VirtualMapping.tla

    def __init__(self) -> None:

        super().__init__()
        self.state = vmm.VmmState.initial(CONFIG)
        self.trace = VmmTraceRecorder(CONFIG) if self.validate_trace else None
        if self.trace is not None:
            self.trace.attach(self.state)
        self.state, _ = vmm.reserve_virtual(self.state)
        self.state, _ = vmm.create_handles(self.state)
        self.row_of = {h: i for i, h in enumerate(sorted(self.state.free_handles))}  # handle id -> memory row
        self.memory = policy.full((len(self.row_of), CONFIG.page_bytes // CONFIG.elem_bytes), math.nan)
        self.requests: dict[int, Request] = {}  # active slot -> its generation's history
        self.next_id = 0
        self._count("examples")

    def _count(self, name: str, n: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    def _owners(self) -> dict[int, tuple[int, int, int]]:
        return {h: (s.slot, q, i) for s in self.state.slots for q, page in enumerate(s.pages) for i, h in enumerate(page)}

    def _try(self, name: str, op: Any, *args: Any, **kw: Any) -> Any:
        """Apply a reference transition; poison every handle it took back (freed, or reclaimed and remapped)."""
        before = self._owners()
        mark = self.trace.mark() if self.trace is not None else None
        try:
            self.state, receipt = op(self.state, *args, **kw)
        except Rejected as exc:
            if self.trace is not None and mark is not None:
                self.trace.rollback(mark)  # the inner steps a rejected composite committed are void
            self._count(f"{name}:{exc.reason.name}")
            return None
        after = self._owners()
        taken_back = sorted(h for h, owner in before.items() if after.get(h) != owner)
        if taken_back:
            self.memory[[self.row_of[h] for h in taken_back]] = math.nan
            self._count(f"{name}:poisoned_handles", len(taken_back))
        self._count(f"{name}:ok")
        return receipt

    def _inactive(self) -> list[int]:
        return [s.slot for s in self.state.slots if not s.active]

    def _has_rows(self) -> bool:
        return any(s.active and s.valid_tokens for s in self.state.slots)

    def _element(self, kind: str, slot: int, t: int, h: int, d: int) -> tuple[int, int]:
        handle, delta_bytes = vmm.translate(self.state, kind, 0, slot, t, h, d)
        return self.row_of[handle], delta_bytes // CONFIG.elem_bytes

    @precondition(lambda self: bool(self._inactive()))
    @rule(target=live, pick=st.integers(0, CONFIG.request_slots - 1))
    @counted_rule
    def alloc(self, pick: int) -> Any:
        """A new request generation on an inactive slot (``pick`` chooses, modulo, among the inactive slots in
        slot order); the slot joins ``live`` when the reference takes it."""
        inactive = self._inactive()
        slot = inactive[pick % len(inactive)]
        self.alloc_slot(slot)
        return slot if self.state.slot(slot).active else multiple()

    def alloc_slot(self, slot: int) -> None:
        rid = f"req{self.next_id}"
        if self._try("alloc_reqid", vmm.alloc_reqid, slot, rid) is not None:
            self.requests[slot] = Request(rid, self.next_id)
        self.next_id += 1
        s = self.state.slot(slot)
        if s.pages:  # retained capacity is never valid K/V of the new generation (0x06E)
            try:
                vmm.require_use(self.state, slot, s.generation, 1)
            except Rejected:
                self._count("retained_pages_refused_as_kv")
            else:
                raise ConformanceFailure(f"slot {slot}: a retained page was accepted as valid K/V")

    @rule(slot=live, tokens=st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=3),
          asynchronous=st.sampled_from((True, False)))
    @counted_rule
    def grow(self, slot: int, tokens: list[int], asynchronous: bool) -> None:
        """Map before use, then write one row per drawn token through translation (awaiting an async map)."""
        self.grow_slot(slot, len(tokens), asynchronous, tokens)

    def grow_slot(self, slot: int, rows: int, asynchronous: bool, tokens: Sequence[int] | None = None) -> None:
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
        request = self.requests[slot]
        drawn = list(tokens) if tokens is not None else [ALPHABET[t % len(ALPHABET)] for t in range(start, target)]
        for t in range(start, target):
            request.tokens.append(drawn[t - start])
            for kind, row in zip(KINDS, request.expected(t), strict=True):
                for h in range(CONFIG.kv_heads):
                    for d in range(CONFIG.head_dim):
                        self.memory[self._element(kind, slot, t, h, d)] = row[h, d]

    @rule(target=retained, slot=consumes(live), unmap=st.booleans())
    @counted_rule
    def free(self, slot: int, unmap: bool) -> Any:
        """End the slot's generation (the reference never refuses a live slot); retained pages go to ``retained``."""
        self.free_slot(slot, unmap)
        return slot if self.state.slot(slot).pages else multiple()

    def free_slot(self, slot: int, unmap: bool) -> None:
        if self._try("free_reqid", vmm.free_reqid, slot, unmap=unmap) is not None:
            self.requests.pop(slot, None)

    @rule(slot=consumes(retained))
    @counted_rule
    def reclaim(self, slot: int) -> None:
        s = self.state.slot(slot)
        if s.active or not s.pages:
            self._count("reclaim:slot_reused")
            return
        self._try("reclaim_inactive", vmm.reclaim_inactive, slot)

    @precondition(lambda self: self._has_rows())
    @rule()
    @counted_rule
    def check_reads(self) -> None:
        self.verify_reads()

    def verify_reads(self) -> None:
        """Every valid row of every live request reads back, through translation, exactly what was written."""
        for s in self.state.slots:
            if not s.active or not s.valid_tokens:
                continue
            vmm.require_use(self.state, s.slot, s.generation, s.valid_tokens)
            request = self.requests[s.slot]
            for t in range(s.valid_tokens):
                for kind, row in zip(KINDS, request.expected(t), strict=True):
                    for h in range(CONFIG.kv_heads):
                        for d in range(CONFIG.head_dim):
                            got = float(self.memory[self._element(kind, s.slot, t, h, d)])
                            if got != float(row[h, d]):
                                raise ConformanceFailure(
                                    f"slot {s.slot} ({request.request_id}) {kind}[t={t},h={h},d={d}] reads {got}, "
                                    f"not {float(row[h, d])}: another request's or an older generation's bytes")
        self._count("read_checks")

    # the MMU and the kernel ----------------------------------------------------------------------------
    def mmu_translate(self, kind: str, slot: int, t: int, h: int, d: int) -> tuple[int, int]:
        """The MMU's page walk: virtual element -> (memory row, element index). Tests override it."""
        return self._element(kind, slot, t, h, d)

    def virtual_buffers(self, slot: int) -> tuple[Any, Any]:
        """The request's contiguous virtual K and V ``[pages * page_tokens, kv_heads, head_dim]`` as the MMU
        presents them: every ready page read from physical memory, everything else NaN."""

        span = CONFIG.pages_per_request * CONFIG.page_tokens
        buffers = {kind: policy.full((span, CONFIG.kv_heads, CONFIG.head_dim), math.nan) for kind in KINDS}
        ready_rows = min(self.state.slot(slot).ready_pages * CONFIG.page_tokens, CONFIG.max_tokens)
        for kind, buf in buffers.items():
            for t in range(ready_rows):
                for h in range(CONFIG.kv_heads):
                    for d in range(CONFIG.head_dim):
                        buf[t, h, d] = self.memory[self.mmu_translate(kind, slot, t, h, d)]
        return buffers["K"], buffers["V"]

    @precondition(lambda self: self._has_rows())
    @rule()
    @counted_rule
    def check_attention(self) -> None:
        self.verify_attention()

    def verify_attention(self) -> None:
        """One unmodified paged decode over every live request's virtual buffers against float64."""
        import torch

        from kvexact.kernels.paged import paged_decode_attention
        from kvexact.kernels.reference import attention_f64

        live = [s for s in self.state.slots if s.active and s.valid_tokens]
        if not live or not self.check_kernels:
            return
        pages = CONFIG.pages_per_request
        views = [self.virtual_buffers(s.slot) for s in live]
        shape = (len(live) * pages, CONFIG.page_tokens, CONFIG.kv_heads, CONFIG.head_dim)
        key_cache = torch.stack([k for k, _ in views]).reshape(shape)
        value_cache = torch.stack([v for _, v in views]).reshape(shape)
        table = (policy.arange(len(live))[:, None] * pages + policy.arange(pages)[None, :]).to(torch.int32)
        lens = policy.tensor([s.valid_tokens for s in live], torch.int32)
        requests = [self.requests[s.slot] for s in live]
        query = torch.stack([query_row(r.request_id, s.valid_tokens)[:, : CONFIG.head_dim]
                             for r, s in zip(requests, live, strict=True)])
        out = paged_decode_attention(query, key_cache, value_cache, table, lens, num_splits=2)
        for i, (s, r) in enumerate(zip(live, requests, strict=True)):
            rows = [r.expected(t) for t in range(s.valid_tokens)]
            expected, _ = attention_f64(query[i], torch.stack([k for k, _ in rows]), torch.stack([v for _, v in rows]))
            err = float((out[i].double() - expected).abs().max())
            if not math.isfinite(err) or err > TOLERANCE:
                raise ConformanceFailure(
                    f"slot {s.slot} ({r.request_id}@{s.generation}): attention over the virtual buffer differs "
                    f"from float64 (max error {err:.3g}); tokens {r.tokens}, pages {s.pages}")
        self._count("attention_checks")

    @invariant()
    def ledgers_reconcile(self) -> None:
        self._count("steps")
        vmm.check_state(self.state)

    def teardown(self) -> None:
        try:
            self.verify_reads()
            self.verify_attention()
        finally:
            self.validate_steps()

    def validate_steps(self) -> None:
        """Every reference step so far is a step of its VirtualMapping action (KVEXACT_TRACE_DIR: the trace
        is written there when it fails)."""
        if self.trace is None:
            return
        self.trace.detach()
        if self.trace.error is not None:
            raise ConformanceFailure(f"VirtualMapping projection: {self.trace.error}")
        out = os.environ.get("KVEXACT_TRACE_DIR")
        result = self.trace.validate()
        self._count("trace_steps", result.steps)
        if not result.ok:
            if out:
                self.trace.validate(Path(out))
            raise ConformanceFailure(f"VirtualMapping: {result.summary()}")
