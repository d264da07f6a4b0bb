"""vAttention's seed trace (0x06F, reconstructed: the seed gives only its facts) and its
failure lab (0x06I)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from kvexact.reference.rejections import NegativeCase, register_negative
from kvexact.reference.vmm import (
    VmmConfig,
    VmmRejection,
    VmmState,
    alloc_reqid,
    await_mapping,
    check_state,
    create_handles,
    free_reqid,
    frontier_receipt,
    map_bundle,
    reclaim_inactive,
    release_handles,
    release_virtual,
    require_covered,
    require_use,
    reserve_virtual,
    step_sync,
    unmap_bundle,
    virtual_address,
    write_rows,
)

SEED_CONFIG = VmmConfig(layers=2, request_slots=3, max_tokens=12, kv_heads=2, head_dim=4, elem_bytes=2,
                        page_bytes=64, handles=12)
"""The 0x06F geometry: the seed trace, the failure lab and the reference tests run on it."""


# the seed's 0x06F trace -------------------------------------------------------------------------
@attrs.frozen
class VmmTraceStep:
    label: str
    operation: str
    state: VmmState
    receipt: Any


def seed_trace_0x06F() -> list[VmmTraceStep]:
    """Reconstruction of the 24-operation trace of 0x06F (the seed gives only its facts).

    Fixed by the seed: the 0x06F geometry; 5 bundle maps and 5 unmaps; two new requests benefit from
    retained mappings (C@2 on A's slot 0, 0x06E; D@3 on slot 0); D grows asynchronously from 8 to 9
    tokens with no free handles, reclaims B's inactive bundle, maps it as page q=2, awaits, then
    commits row 8; the checked scalar D@3/V1/(t=8,h=1,d=3) lands on (slot 0, V1, q=2) -> H11.
    Handles are taken lowest id first, a bundle lists K0, V0, K1, V1. Reconstructed:

    ====  ============================================  ===============================================
    v01   reserve_virtual                               M_VA = 2304 B
    v02   create_handles                                12 handles, 768 B
    v03   alloc_reqid slot 0 <- A                       A@1
    v04   map_bundle slot 0 page 0                      map 1: H0-H3
    v05   map_bundle slot 0 page 1                      map 2: H4-H7
    v06   write_rows A [0, 6)
    v07   alloc_reqid slot 1 <- B                       B@1
    v08   map_bundle slot 1 page 0                      map 3: H8-H11, no free handle left
    v09   write_rows B [0, 4)
    v10   write_rows A [6, 7)
    v11   free_reqid slot 0 (retain)                    pages [0,1] stay mapped
    v12   alloc_reqid slot 0 <- C                       C@2: retained capacity, no map (benefit 1)
    v13   write_rows C [0, 3)                           needs only page 0
    v14   free_reqid slot 1 (retain)                    B's bundle retained
    v15   free_reqid slot 0 (retain)
    v16   reclaim_inactive slot 0                       unmap 1: page 1 (H4-H7) back to the pool
    v17   alloc_reqid slot 0 <- D                       D@3: page 0 retained (benefit 2)
    v18   map_bundle slot 0 page 1                      map 4: H4-H7, no free handle left
    v19   write_rows D [0, 8)
    v20   reclaim_inactive slot 1                       unmap 2: B's H8-H11 back to the pool
    v21   map_bundle slot 0 page 2 (asynchronous)       map 5: H8-H11, not yet ready
    v22   await_mapping slot 0                          frontier receipt covers 12 rows
    v23   write_rows D [8, 9)                           row 8 committed only after the await
    v24   free_reqid slot 0 (unmap)                     unmaps 3-5
    ====  ============================================  ===============================================
    """
    s = VmmState.initial(SEED_CONFIG)
    steps: list[VmmTraceStep] = []

    def run(label: str, op: Callable[..., tuple[VmmState, Any]], *args: Any, **kw: Any) -> None:
        nonlocal s
        s, receipt = op(s, *args, **kw)
        steps.append(VmmTraceStep(label, op.__name__, s, receipt))

    run("v01", reserve_virtual)
    run("v02", create_handles)
    run("v03", alloc_reqid, 0, "A")
    run("v04", map_bundle, 0, 0)
    run("v05", map_bundle, 0, 1)
    run("v06", write_rows, 0, 1, 0, 6)
    run("v07", alloc_reqid, 1, "B")
    run("v08", map_bundle, 1, 0)
    run("v09", write_rows, 1, 1, 0, 4)
    run("v10", write_rows, 0, 1, 6, 1)
    run("v11", free_reqid, 0)
    run("v12", alloc_reqid, 0, "C")
    run("v13", write_rows, 0, 2, 0, 3)
    run("v14", free_reqid, 1)
    run("v15", free_reqid, 0)
    run("v16", reclaim_inactive, 0)
    run("v17", alloc_reqid, 0, "D")
    run("v18", map_bundle, 0, 1)
    run("v19", write_rows, 0, 3, 0, 8)
    run("v20", reclaim_inactive, 1)
    run("v21", map_bundle, 0, 2, asynchronous=True)
    run("v22", await_mapping, 0)
    run("v23", write_rows, 0, 3, 8, 1)
    run("v24", free_reqid, 0, unmap=True)
    return steps


# the 0x06I failure lab ----------------------------------------------------------------------------
def _at(label: str) -> VmmState:
    return next(t.state for t in seed_trace_0x06F() if t.label == label)


def _pending() -> VmmState:
    """D@3 with page 2 mapped asynchronously but not yet awaited (the state after v21)."""
    return _at("v21")


def _cases() -> list[tuple[VmmRejection, str, Callable[[], Any]]]:
    R = VmmRejection
    def fresh() -> VmmState:
        return VmmState.initial(SEED_CONFIG)

    cfg = attrs.asdict(SEED_CONFIG)
    return [
        (R.NON_POSITIVE_GEOMETRY, "geometry with zero layers", lambda: VmmConfig(**{**cfg, "layers": 0})),
        (R.PAGE_NOT_DIVISIBLE, "page group not a multiple of one tensor row",
         lambda: VmmConfig(**{**cfg, "page_bytes": 40})),
        (R.VA_NOT_RESERVED, "create handles before reserving virtual ranges", lambda: create_handles(fresh())),
        (R.HANDLES_ALREADY_CREATED, "create the physical handle pool a second time",
         lambda: create_handles(create_handles(reserve_virtual(fresh())[0])[0])),
        (R.VA_ALREADY_RESERVED, "reserve the virtual range twice", lambda: reserve_virtual(_at("v01"))),
        (R.HANDLES_NOT_CREATED, "map before any physical handle exists",
         lambda: map_bundle(alloc_reqid(_at("v01"), 0, "A")[0], 0, 0)),
        (R.NO_FREE_HANDLES, "map with every handle already mapped",
         lambda: map_bundle(alloc_reqid(_at("v08"), 2, "E")[0], 2, 0)),
        (R.INCOMPLETE_BUNDLE, "map a bundle missing the V1 handle",
         lambda: map_bundle(_at("v07"), 1, 0, handles=[8, 9, 10])),
        (R.HANDLE_NOT_FREE, "map a handle that is already mapped",
         lambda: map_bundle(_at("v07"), 1, 0, handles=[0, 9, 10, 11])),
        (R.UNKNOWN_HANDLE, "map a handle that was never created",
         lambda: map_bundle(_at("v07"), 1, 0, handles=[8, 9, 10, 12])),
        (R.SLOT_OUT_OF_RANGE, "bind a request to a slot beyond B", lambda: alloc_reqid(_at("v02"), 3, "X")),
        (R.SLOT_ACTIVE, "bind a second request to a live slot", lambda: alloc_reqid(_at("v03"), 0, "X")),
        (R.SLOT_INACTIVE, "map into a slot with no live request", lambda: map_bundle(_at("v02"), 0, 0)),
        (R.STALE_GENERATION, "old generation A@1 writes into slot 0 after C@2 took it",
         lambda: write_rows(_at("v12"), 0, 1, 0, 1)),
        (R.NON_CONTIGUOUS_FRONTIER, "map page 1 before page 0", lambda: map_bundle(_at("v03"), 0, 1)),
        (R.PAGE_BEYOND_RESERVATION, "map a page beyond the request's range R",
         lambda: map_bundle(_at("v22"), 0, 3)),
        (R.ROWS_BEYOND_TMAX, "grow a request past T_max", lambda: step_sync(_at("v03"), 0, 13)),
        (R.NON_CONTIGUOUS_ROWS, "write rows with a hole after the valid frontier",
         lambda: write_rows(_at("v06"), 0, 1, 7, 1)),
        (R.MAPPING_NOT_READY, "commit row 8 before the asynchronous map is awaited",
         lambda: write_rows(_pending(), 0, 3, 8, 1)),
        (R.ROWS_NOT_VALID, "read a retained mapping as C's prefix (A's old rows)",
         lambda: require_use(_at("v12"), 0, 2, 6)),
        (R.UNMAP_LIVE_ROWS, "unmap the page backing a live request's rows", lambda: unmap_bundle(_at("v06"), 0)),
        (R.RECLAIM_ACTIVE_SLOT, "reclaim a page from an active slot", lambda: reclaim_inactive(_at("v13"), 0)),
        (R.NOTHING_TO_RECLAIM, "reclaim from a slot with no mapping", lambda: reclaim_inactive(_at("v02"), 2)),
        (R.NOTHING_PENDING, "await a slot with no pending map", lambda: await_mapping(_at("v06"), 0)),
        (R.HANDLES_STILL_MAPPED, "release handles while mapped", lambda: release_handles(_at("v05"))),
        (R.VA_IN_USE, "free the virtual range while handles exist", lambda: release_virtual(_at("v24"))),
        (R.FRONTIER_NOT_COVERED, "kernel crosses a frontier receipt of an older generation",
         lambda: require_covered(frontier_receipt(_at("v13"), 0), 1, 3)),
        (R.COORDINATE_OUT_OF_RANGE, "address a head beyond H_kv",
         lambda: virtual_address(SEED_CONFIG, "V", 1, 0, 8, 2, 3)),
        (R.LEDGER_MISMATCH, "state whose mapped handle is also listed free",
         lambda: check_state(attrs.evolve(_at("v05"), free_handles=_at("v05").free_handles | {0}))),
    ]


def register() -> None:
    """Register the lab's cases (called once, by :func:`kvexact.reference.labs.register_all`)."""
    for reason, description, trigger in _cases():
        register_negative(NegativeCase("0x06I", reason, description, trigger))


