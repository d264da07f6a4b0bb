"""vAttention virtual mapping (seed 0x06): reservation, physical handles, map before use, slot generations.

Invariants every committed state keeps (re-derived by :func:`check_state`):

* a request slot's mapped pages form a contiguous frontier ``0 .. n-1``; each page is one complete
  K/V-layer bundle (one handle per tensor, ``2L`` handles); no handle is mapped twice and
  ``mapped + free = created`` (``M_phys,pool = M_mapped + M_free-handles``);
* ``ready_pages <= mapped_pages`` (the published frontier a kernel may cross) and an active slot's
  valid rows never exceed the ready frontier; ``M_mapped = M_active,valid + M_active,slack +
  M_inactive,retained``, and no term is ``M_VA`` (0x06A);
* a slot handed to a new request advances its generation and starts with zero valid rows: retained
  mappings reuse capacity, never prefix identity (0x06E);
* each public transition returns ``(successor, receipt)`` and advances ``version``; a rejected one
  raises :class:`~kvexact.reference.rejections.Rejected` and leaves its input unchanged. Each committed
  step is named after its action of ``spec/VirtualMapping.tla`` (snake_case) and reported to the
  callbacks registered with :func:`observe` (the state machine validates them step by step).
"""

from __future__ import annotations

import enum
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Literal

import attrs

from kvexact.reference import formulas_seed as F
from kvexact.reference.rejections import Rejected
from kvexact.reference.traversal import page_group_tokens, page_groups


class VmmRejection(enum.Enum):
    """Every way a mapping operation, state or use is refused (0x06I)."""

    NON_POSITIVE_GEOMETRY = "every geometry parameter must be a positive int"
    PAGE_NOT_DIVISIBLE = "the page-group size is not a multiple of one tensor row"
    VA_NOT_RESERVED = "the virtual K/V range is not reserved"
    VA_ALREADY_RESERVED = "the virtual K/V range is already reserved or released"
    VA_IN_USE = "virtual ranges cannot be freed while physical handles exist"
    HANDLES_NOT_CREATED = "no physical handles exist yet"
    HANDLES_ALREADY_CREATED = "the physical handle pool was already created"
    HANDLES_STILL_MAPPED = "physical handles cannot be released while mapped"
    NO_FREE_HANDLES = "no complete K/V-layer bundle of free handles is available"
    INCOMPLETE_BUNDLE = "a page bundle must hold exactly one handle per K/V-layer tensor"
    HANDLE_NOT_FREE = "a handle offered for mapping is already mapped"
    UNKNOWN_HANDLE = "no such physical handle"
    SLOT_OUT_OF_RANGE = "no such request slot"
    SLOT_ACTIVE = "the request slot is already bound to a live request"
    SLOT_INACTIVE = "the request slot is not bound to a live request"
    STALE_GENERATION = "the request generation is not the slot's current generation"
    NON_CONTIGUOUS_FRONTIER = "pages must be mapped at the contiguous frontier"
    PAGE_BEYOND_RESERVATION = "the page lies outside the request's virtual range"
    ROWS_BEYOND_TMAX = "the request would exceed T_max rows"
    NON_CONTIGUOUS_ROWS = "rows must be appended at the valid frontier"
    MAPPING_NOT_READY = "the rows lie beyond the published ready frontier"
    ROWS_NOT_VALID = "the rows were not produced by this request generation"
    UNMAP_LIVE_ROWS = "an unmap would remove backing of valid rows of a live request"
    RECLAIM_ACTIVE_SLOT = "only an inactive slot's retained page may be reclaimed"
    NOTHING_TO_RECLAIM = "the slot has no mapped page"
    NOTHING_PENDING = "no asynchronous mapping is pending for the slot"
    FRONTIER_NOT_COVERED = "the frontier receipt does not cover the requested generation and rows"
    COORDINATE_OUT_OF_RANGE = "an address coordinate lies outside the tensor"
    LEDGER_MISMATCH = "the handle and byte ledgers do not reconcile"


def _reject(reason: VmmRejection, detail: str) -> Rejected:
    return Rejected(reason, detail)


TENSOR_KINDS = ("K", "V")


@attrs.frozen
class VmmConfig:
    """Worker geometry of 0x06A: L layers, B request slots, T_max rows, H_kv heads, d_h lanes,
    b bytes per element, G bytes per page group, and N_handle physical handles."""

    layers: int
    request_slots: int
    max_tokens: int
    kv_heads: int
    head_dim: int
    elem_bytes: int
    page_bytes: int
    handles: int

    def __attrs_post_init__(self) -> None:
        for f in attrs.fields(VmmConfig):
            v = getattr(self, f.name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise _reject(VmmRejection.NON_POSITIVE_GEOMETRY, f"{f.name}={v!r}")
        if self.page_bytes % self.row_bytes:
            raise _reject(VmmRejection.PAGE_NOT_DIVISIBLE, f"G={self.page_bytes} B, row={self.row_bytes} B")

    @property
    def tensors(self) -> int:
        return 2 * self.layers

    @property
    def row_bytes(self) -> int:
        """B_tensor,row = H_kv * d_h * b."""
        return F.tensor_row_bytes(kv_heads_local=self.kv_heads, head_dim=self.head_dim, scalar_bytes=self.elem_bytes)

    @property
    def page_tokens(self) -> int:
        return page_group_tokens(page_group_bytes=self.page_bytes, tensor_row_bytes=self.row_bytes)

    @property
    def request_range_bytes(self) -> int:
        """R = G * ceil(T_max * B_row / G)."""
        return F.reserved_extent_bytes(page_group_bytes=self.page_bytes, max_context_tokens=self.max_tokens,
                                       tensor_row_bytes=self.row_bytes)

    @property
    def pages_per_request(self) -> int:
        return self.request_range_bytes // self.page_bytes

    @property
    def virtual_bytes(self) -> int:
        """M_VA = 2 L B R."""
        return F.va_bytes(layers=self.layers, request_slots=self.request_slots, extent_bytes=self.request_range_bytes)

    @property
    def pool_bytes(self) -> int:
        return F.phys_pool_bytes(handles=self.handles, page_group_bytes=self.page_bytes)

    @property
    def bundle_bytes(self) -> int:
        return F.page_bundle_bytes(layers=self.layers, page_group_bytes=self.page_bytes)

    def pages_for(self, tokens: int) -> int:
        return page_groups(context_tokens=tokens, group_tokens=self.page_tokens)

    def tensor_index(self, kind: str, layer: int) -> int:
        """Tensors are laid out K0, V0, K1, V1, ...: index 2*layer + (0 for K, 1 for V)."""
        if kind not in TENSOR_KINDS or not 0 <= layer < self.layers:
            raise _reject(VmmRejection.COORDINATE_OUT_OF_RANGE, f"tensor {kind}{layer}")
        return 2 * layer + TENSOR_KINDS.index(kind)


@attrs.frozen
class Address:
    """A_VA and its page split: q = floor(u / G), delta = u mod G."""

    virtual_address: int
    offset_in_request_bytes: int
    page: int
    delta_bytes: int


def virtual_address(config: VmmConfig, kind: str, layer: int, slot: int, t: int, h: int, d: int) -> Address:
    """A_VA = base(X, l) + r R + (t H_kv d_h + h d_h + d) b, with base(X, l) = index(X, l) * B * R."""
    if not (0 <= slot < config.request_slots and 0 <= t < config.max_tokens and 0 <= h < config.kv_heads
            and 0 <= d < config.head_dim):
        raise _reject(VmmRejection.COORDINATE_OUT_OF_RANGE, f"slot={slot}, t={t}, h={h}, d={d}")
    base = config.tensor_index(kind, layer) * config.request_slots * config.request_range_bytes
    u = F.request_offset(token=t, kv_heads_local=config.kv_heads, head_dim=config.head_dim, head=h, lane=d,
                         scalar_bytes=config.elem_bytes)
    address = F.virtual_address(tensor_base=base, request_slot=slot, extent_bytes=config.request_range_bytes,
                                offset_bytes=u)
    return Address(address, u, F.page_index(offset_bytes=u, page_group_bytes=config.page_bytes),
                   F.page_delta(offset_bytes=u, page_group_bytes=config.page_bytes))


@attrs.frozen
class SlotState:
    """One request slot: its generation and owner, valid rows, mapped page bundles and ready frontier."""

    slot: int
    generation: int = 0
    request_id: str | None = None
    active: bool = False
    valid_tokens: int = 0
    pages: tuple[tuple[int, ...], ...] = ()  # pages[q] = handle per tensor (K0, V0, K1, V1, ...)
    ready_pages: int = 0
    old_kv_semantically_valid: bool = False


Phase = Literal["UNRESERVED", "VA_RESERVED", "VA_RELEASED"]


@attrs.frozen
class VmmState:
    config: VmmConfig
    phase: Phase = "UNRESERVED"
    handles_created: bool = False
    free_handles: frozenset[int] = frozenset()
    slots: tuple[SlotState, ...] = ()
    version: int = 0

    @classmethod
    def initial(cls, config: VmmConfig) -> VmmState:
        return cls(config, slots=tuple(SlotState(r) for r in range(config.request_slots)))

    def slot(self, r: int) -> SlotState:
        if not isinstance(r, int) or not 0 <= r < len(self.slots):
            raise _reject(VmmRejection.SLOT_OUT_OF_RANGE, f"slot {r!r}")
        return self.slots[r]


@attrs.frozen
class Ledgers:
    """The four ledgers of 0x06A in bytes, with the terms of both reconciliations."""

    virtual_bytes: int
    pool_bytes: int
    mapped_bytes: int
    free_handle_bytes: int
    active_valid_bytes: int
    active_slack_bytes: int
    inactive_retained_bytes: int


@attrs.frozen
class MappedFrontierReceipt:
    """What a kernel may use: every tensor's pages ``0 .. ready_pages-1`` for this slot generation."""

    slot: int
    generation: int
    ready_pages: int
    covered_tokens: int
    page_handles: tuple[tuple[int, ...], ...]
    ready_before_use: bool

    def covers(self, generation: int, target_tokens: int) -> bool:
        """Rows ``[0, target)`` of this generation lie inside the published (ready) frontier."""
        return generation == self.generation and target_tokens <= self.covered_tokens


@attrs.frozen
class VmmReceipt:
    operation: str
    version: int
    maps: int = 0
    unmaps: int = 0
    detail: Any = None


def ledgers(state: VmmState) -> Ledgers:
    """Derive the ledgers; mapped bytes split into active valid, active slack and inactive retained."""
    c = state.config
    mapped = sum(len(s.pages) for s in state.slots) * c.bundle_bytes
    valid = sum(s.valid_tokens for s in state.slots if s.active) * c.row_bytes * c.tensors
    active_mapped = sum(len(s.pages) for s in state.slots if s.active) * c.bundle_bytes
    retained = sum(len(s.pages) for s in state.slots if not s.active) * c.bundle_bytes
    created = c.pool_bytes if state.handles_created else 0
    return Ledgers(c.virtual_bytes if state.phase == "VA_RESERVED" else 0, created, mapped,
                   len(state.free_handles) * c.page_bytes, valid, active_mapped - valid, retained)


def check_state(state: VmmState) -> Ledgers:
    """Re-derive handle ownership, frontiers and both reconciliations; raise LEDGER_MISMATCH if broken."""
    c = state.config
    mapped = [h for s in state.slots for page in s.pages for h in page]
    for s in state.slots:
        if any(len(page) != c.tensors for page in s.pages):
            raise _reject(VmmRejection.INCOMPLETE_BUNDLE, f"slot {s.slot}")
        if not (0 <= s.ready_pages <= len(s.pages) <= c.pages_per_request):
            raise _reject(VmmRejection.LEDGER_MISMATCH, f"slot {s.slot}: ready {s.ready_pages}, mapped {len(s.pages)}")
        if s.active and s.valid_tokens > s.ready_pages * c.page_tokens:
            raise _reject(VmmRejection.LEDGER_MISMATCH, f"slot {s.slot}: {s.valid_tokens} rows beyond the frontier")
        if not s.active and s.valid_tokens:
            raise _reject(VmmRejection.LEDGER_MISMATCH, f"inactive slot {s.slot} claims valid rows")
    created = set(range(c.handles)) if state.handles_created else set()
    if (len(set(mapped)) != len(mapped) or set(mapped) & state.free_handles
            or set(mapped) | state.free_handles != created):
        raise _reject(VmmRejection.LEDGER_MISMATCH,
                      f"mapped {len(mapped)} + free {len(state.free_handles)} handles != created {len(created)}")
    led = ledgers(state)
    if led.mapped_bytes != led.active_valid_bytes + led.active_slack_bytes + led.inactive_retained_bytes:
        raise _reject(VmmRejection.LEDGER_MISMATCH, "mapped backing does not reconcile")
    if led.pool_bytes != led.mapped_bytes + led.free_handle_bytes:
        raise _reject(VmmRejection.LEDGER_MISMATCH, "physical pool does not reconcile")
    return led


Observer = Callable[[str, VmmState, VmmState, Any], None]
_OBSERVERS: list[weakref.WeakMethod] = []


def observe(callback: Observer) -> None:
    """Call the bound method ``callback(op, before, after, detail)`` on every committed step (and every
    accepted ``require_use``) until :func:`unobserve` or until its object is gone (held weakly)."""
    _OBSERVERS.append(weakref.WeakMethod(callback))  # type: ignore[arg-type]


def unobserve(callback: Observer) -> None:
    _OBSERVERS[:] = [w for w in _OBSERVERS if w() is not None and w() != callback]


def _report(op: str, before: VmmState, after: VmmState, detail: Any) -> None:
    for ref in list(_OBSERVERS):
        callback = ref()
        if callback is not None:
            callback(op, before, after, detail)


def _commit(op: str, state: VmmState, after: VmmState, **kw: Any) -> tuple[VmmState, VmmReceipt]:
    after = attrs.evolve(after, version=state.version + 1)
    check_state(after)
    _report(op, state, after, kw.get("detail"))
    return after, VmmReceipt(op, after.version, **kw)


def _with_slot(state: VmmState, slot: SlotState) -> VmmState:
    slots = list(state.slots)
    slots[slot.slot] = slot
    return attrs.evolve(state, slots=tuple(slots))


def _live(state: VmmState, r: int, generation: int | None = None) -> SlotState:
    s = state.slot(r)
    if not s.active:
        raise _reject(VmmRejection.SLOT_INACTIVE, f"slot {r}")
    if generation is not None and generation != s.generation:
        raise _reject(VmmRejection.STALE_GENERATION, f"slot {r} is at generation {s.generation}, not {generation}")
    return s


# lifecycle ---------------------------------------------------------------------------------------
def reserve_virtual(state: VmmState) -> tuple[VmmState, VmmReceipt]:
    """UNRESERVED -> VA_RESERVED: reserve 2LB ranges of R bytes (address space, not HBM)."""
    if state.phase != "UNRESERVED":
        raise _reject(VmmRejection.VA_ALREADY_RESERVED, state.phase)
    return _commit("reserve_virtual", state, attrs.evolve(state, phase="VA_RESERVED"),
                   detail=state.config.virtual_bytes)


def create_handles(state: VmmState) -> tuple[VmmState, VmmReceipt]:
    """Create N_handle physical handles of G bytes, all CREATED_FREE (unmapped)."""
    if state.phase != "VA_RESERVED":
        raise _reject(VmmRejection.VA_NOT_RESERVED, state.phase)
    if state.handles_created:
        raise _reject(VmmRejection.HANDLES_ALREADY_CREATED, f"{state.config.handles} handles")
    return _commit("create_handles", state, attrs.evolve(state, handles_created=True,
                                                         free_handles=frozenset(range(state.config.handles))),
                   detail=state.config.pool_bytes)


def alloc_reqid(state: VmmState, slot: int, request_id: str) -> tuple[VmmState, VmmReceipt]:
    """Bind an inactive slot to a new request: generation + 1, zero valid rows, retained pages kept
    as capacity only (``old_kv_semantically_valid`` is recorded False)."""
    if state.phase != "VA_RESERVED":
        raise _reject(VmmRejection.VA_NOT_RESERVED, state.phase)
    s = state.slot(slot)
    if s.active:
        raise _reject(VmmRejection.SLOT_ACTIVE, f"slot {slot} holds {s.request_id}@{s.generation}")
    new = attrs.evolve(s, generation=s.generation + 1, request_id=request_id, active=True, valid_tokens=0,
                       old_kv_semantically_valid=False)
    return _commit("alloc_reqid", state, _with_slot(state, new),
                   detail={"slot": slot, "generation": new.generation, "retained_pages": len(s.pages)})


def map_bundle(state: VmmState, slot: int, page: int, handles: Sequence[int] | None = None,
               asynchronous: bool = False) -> tuple[VmmState, VmmReceipt]:
    """Map one complete K/V-layer bundle at the slot's contiguous frontier. A synchronous map publishes
    the page ready at once; an asynchronous one stays behind the ready frontier until awaited."""
    if not state.handles_created:
        raise _reject(VmmRejection.HANDLES_NOT_CREATED, "map before create")
    s = _live(state, slot)
    c = state.config
    if page >= c.pages_per_request:
        raise _reject(VmmRejection.PAGE_BEYOND_RESERVATION, f"page {page} of {c.pages_per_request}")
    if page != len(s.pages):
        raise _reject(VmmRejection.NON_CONTIGUOUS_FRONTIER, f"page {page}, frontier {len(s.pages)}")
    if handles is None:
        if len(state.free_handles) < c.tensors:
            raise _reject(VmmRejection.NO_FREE_HANDLES, f"{len(state.free_handles)} free, {c.tensors} needed")
        bundle = tuple(sorted(state.free_handles)[: c.tensors])
    else:
        bundle = tuple(handles)
        if len(bundle) != c.tensors or len(set(bundle)) != len(bundle):
            raise _reject(VmmRejection.INCOMPLETE_BUNDLE, f"{bundle} for {c.tensors} tensors")
        for h in bundle:
            if not isinstance(h, int) or not 0 <= h < c.handles:
                raise _reject(VmmRejection.UNKNOWN_HANDLE, f"handle {h!r}")
            if h not in state.free_handles:
                raise _reject(VmmRejection.HANDLE_NOT_FREE, f"handle H{h}")
    if s.ready_pages < len(s.pages) and not asynchronous:
        raise _reject(VmmRejection.NON_CONTIGUOUS_FRONTIER, "a synchronous map behind a pending one")
    ready = s.ready_pages if asynchronous else len(s.pages) + 1
    new = attrs.evolve(s, pages=s.pages + (bundle,), ready_pages=ready)
    after = attrs.evolve(_with_slot(state, new), free_handles=state.free_handles - set(bundle))
    return _commit("map_bundle", state, after, maps=1, detail={"slot": slot, "page": page, "handles": bundle,
                                                               "asynchronous": asynchronous})


def await_mapping(state: VmmState, slot: int) -> tuple[VmmState, MappedFrontierReceipt]:
    """Publish every pending page of the slot as ready; returns the frontier receipt a kernel awaits."""
    s = _live(state, slot)
    if s.ready_pages == len(s.pages):
        raise _reject(VmmRejection.NOTHING_PENDING, f"slot {slot}")
    after, _ = _commit("await_mapping", state, _with_slot(state, attrs.evolve(s, ready_pages=len(s.pages))),
                       detail={"slot": slot})
    return after, frontier_receipt(after, slot)


def frontier_receipt(state: VmmState, slot: int) -> MappedFrontierReceipt:
    s = state.slot(slot)
    pages = s.pages[: s.ready_pages]
    return MappedFrontierReceipt(slot, s.generation, s.ready_pages, s.ready_pages * state.config.page_tokens,
                                 pages, s.ready_pages == len(s.pages))


def write_rows(state: VmmState, slot: int, generation: int, start_token: int, count_tokens: int
               ) -> tuple[VmmState, VmmReceipt]:
    """Commit K/V rows ``[start, start+count)`` of the live generation; they must lie inside the ready
    frontier and extend the valid rows contiguously."""
    s = _live(state, slot, generation)
    end = start_token + count_tokens
    if count_tokens <= 0 or start_token != s.valid_tokens:
        raise _reject(VmmRejection.NON_CONTIGUOUS_ROWS, f"rows [{start_token}, {end}) after {s.valid_tokens} valid")
    if end > state.config.max_tokens:
        raise _reject(VmmRejection.ROWS_BEYOND_TMAX, f"{end} > T_max {state.config.max_tokens}")
    if end > s.ready_pages * state.config.page_tokens:
        raise _reject(VmmRejection.MAPPING_NOT_READY,
                      f"row {end - 1} beyond ready frontier of {s.ready_pages} pages")
    return _commit("write_rows", state, _with_slot(state, attrs.evolve(s, valid_tokens=end)),
                   detail={"slot": slot, "rows": (start_token, end)})


def require_use(state: VmmState, slot: int, generation: int, tokens: int) -> MappedFrontierReceipt:
    """A kernel may attend over rows ``[0, tokens)`` only if this generation produced them and they are
    mapped and published (retained pages from an older generation are never valid K/V)."""
    s = _live(state, slot, generation)
    if tokens > s.valid_tokens:
        raise _reject(VmmRejection.ROWS_NOT_VALID, f"{tokens} rows requested, {s.valid_tokens} valid")
    receipt = frontier_receipt(state, slot)
    if not receipt.covers(generation, tokens):
        raise _reject(VmmRejection.FRONTIER_NOT_COVERED, f"slot {slot}")
    _report("require_use", state, state, {"slot": slot, "tokens": tokens})
    return receipt


def require_covered(receipt: MappedFrontierReceipt, generation: int, target_tokens: int) -> None:
    """A kernel checks the awaited receipt before crossing the frontier."""
    if not receipt.covers(generation, target_tokens):
        raise _reject(VmmRejection.FRONTIER_NOT_COVERED,
                      f"receipt {receipt.slot}@{receipt.generation} covers {receipt.covered_tokens} rows")


def free_reqid(state: VmmState, slot: int, unmap: bool = False) -> tuple[VmmState, VmmReceipt]:
    """Mark a slot inactive; its rows stop being valid. Mappings are retained, or unmapped if asked."""
    s = _live(state, slot)
    pages = () if unmap else s.pages
    new = attrs.evolve(s, active=False, request_id=None, valid_tokens=0, pages=pages,
                       ready_pages=len(pages) if not unmap else 0)
    freed = {h for p in s.pages for h in p} if unmap else set()
    after = attrs.evolve(_with_slot(state, new), free_handles=state.free_handles | freed)
    return _commit("free_reqid", state, after, unmaps=len(s.pages) if unmap else 0,
                   detail={"slot": slot, "retained_pages": len(pages), "unmap": unmap})


def unmap_bundle(state: VmmState, slot: int) -> tuple[VmmState, VmmReceipt]:
    """Unmap the slot's highest page; it must not back valid rows of a live request."""
    return _unmap_top(state, slot, "unmap_bundle")


def _unmap_top(state: VmmState, slot: int, op: str) -> tuple[VmmState, VmmReceipt]:
    s = state.slot(slot)
    if not s.pages:
        raise _reject(VmmRejection.NOTHING_TO_RECLAIM, f"slot {slot}")
    top = len(s.pages) - 1
    if s.active and s.valid_tokens > top * state.config.page_tokens:
        raise _reject(VmmRejection.UNMAP_LIVE_ROWS, f"slot {slot} page {top} backs row {s.valid_tokens - 1}")
    new = attrs.evolve(s, pages=s.pages[:top], ready_pages=min(s.ready_pages, top))
    after = attrs.evolve(_with_slot(state, new), free_handles=state.free_handles | set(s.pages[top]))
    return _commit(op, state, after, unmaps=1, detail={"slot": slot, "page": top, "handles": s.pages[top]})


def reclaim_inactive(state: VmmState, slot: int) -> tuple[VmmState, VmmReceipt]:
    """Under pressure: unmap an inactive slot's highest page and return its bundle to the pool."""
    s = state.slot(slot)
    if s.active:
        raise _reject(VmmRejection.RECLAIM_ACTIVE_SLOT, f"slot {slot} holds {s.request_id}@{s.generation}")
    return _unmap_top(state, slot, "reclaim_inactive")


def release_handles(state: VmmState) -> tuple[VmmState, VmmReceipt]:
    """Release every physical handle; all must be unmapped (CREATED_FREE -> RELEASED)."""
    if not state.handles_created:
        raise _reject(VmmRejection.HANDLES_NOT_CREATED, "nothing to release")
    if len(state.free_handles) != state.config.handles:
        raise _reject(VmmRejection.HANDLES_STILL_MAPPED,
                      f"{state.config.handles - len(state.free_handles)} handles mapped")
    return _commit("release_handles", state, attrs.evolve(state, handles_created=False, free_handles=frozenset()))


def release_virtual(state: VmmState) -> tuple[VmmState, VmmReceipt]:
    """VA_RESERVED -> VA_RELEASED, once no handle exists."""
    if state.phase != "VA_RESERVED":
        raise _reject(VmmRejection.VA_NOT_RESERVED, state.phase)
    if state.handles_created:
        raise _reject(VmmRejection.VA_IN_USE, "release the physical handles first")
    return _commit("release_virtual", state, attrs.evolve(state, phase="VA_RELEASED"))


def translate(state: VmmState, kind: str, layer: int, slot: int, t: int, h: int, d: int) -> tuple[int, int]:
    """(virtual tensor, slot, page q) -> (physical handle, delta): only through a published page."""
    addr = virtual_address(state.config, kind, layer, slot, t, h, d)
    s = state.slot(slot)
    if addr.page >= s.ready_pages:
        raise _reject(VmmRejection.MAPPING_NOT_READY, f"slot {slot} page {addr.page}")
    return s.pages[addr.page][state.config.tensor_index(kind, layer)], addr.delta_bytes


# composite steps of 0x06D -------------------------------------------------------------------------
def step_sync(state: VmmState, slot: int, target_tokens: int) -> tuple[VmmState, MappedFrontierReceipt]:
    """Map complete bundles until the slot's frontier covers ``target_tokens``; ready before use."""
    if target_tokens > state.config.max_tokens:
        raise _reject(VmmRejection.ROWS_BEYOND_TMAX, f"{target_tokens} > {state.config.max_tokens}")
    while len(_live(state, slot).pages) < state.config.pages_for(target_tokens):
        state, _ = map_bundle(state, slot, len(state.slots[slot].pages))
    return state, frontier_receipt(state, slot)


def step_async(state: VmmState, slot: int, target_tokens: int) -> tuple[VmmState, MappedFrontierReceipt]:
    """Start mapping the bundles ``target_tokens`` needs, reclaiming an inactive slot's retained bundle
    (lowest slot id first) when no free bundle is left; the returned receipt is not yet ready: a kernel
    must :func:`await_mapping` before crossing the old frontier."""
    if target_tokens > state.config.max_tokens:
        raise _reject(VmmRejection.ROWS_BEYOND_TMAX, f"{target_tokens} > {state.config.max_tokens}")
    while len(_live(state, slot).pages) < state.config.pages_for(target_tokens):
        if len(state.free_handles) < state.config.tensors:
            donors = [s.slot for s in state.slots if not s.active and s.pages]
            if not donors:
                raise _reject(VmmRejection.NO_FREE_HANDLES, f"no free bundle and no inactive retained page for {slot}")
            state, _ = reclaim_inactive(state, donors[0])
        state, _ = map_bundle(state, slot, len(state.slots[slot].pages), asynchronous=True)
    return state, frontier_receipt(state, slot)
