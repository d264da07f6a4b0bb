"""vAttention virtual mapping (seed 0x06): fixture algebra, the 24-operation trace, the 0x06I lab."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvexact.reference import labs, vmm
from kvexact.reference.labs import vmm as vmm_lab
from kvexact.reference.rejections import Rejected, rejection_of

C = vmm_lab.SEED_CONFIG
TRACE = vmm_lab.seed_trace_0x06F()
AT = {t.label: t for t in TRACE}


def test_fixture_geometry_of_0x06F():
    # L=2, B=3, T_max=12, H_kv=2, d_h=4, b=2, G=64
    assert C.row_bytes == 2 * 4 * 2 == 16
    assert C.page_tokens == 64 // 16 == 4
    assert C.request_range_bytes == math.ceil(12 * 16 / 64) * 64 == 192
    assert C.virtual_bytes == 2 * 2 * 3 * 192 == 2304
    assert C.pool_bytes == 12 * 64 == 768
    assert C.bundle_bytes == 2 * 2 * 64 == 256


def test_virtual_address_of_0x06C():
    a = vmm.virtual_address(C, "V", 1, 0, 8, 1, 3)
    assert a.offset_in_request_bytes == 8 * 16 + 1 * 4 * 2 + 3 * 2 == 142
    assert (a.page, a.delta_bytes) == (2, 14)
    assert a.virtual_address == 3 * (3 * 192) + 0 * 192 + 142 == 1870


def test_d_at_3_scalar_translates_through_h11_after_the_await():
    s = AT["v23"].state
    assert s.slots[0].generation == 3 and s.slots[0].request_id == "D"
    assert vmm.translate(s, "V", 1, 0, 8, 1, 3) == (11, 14)
    with pytest.raises(Rejected) as exc:  # before the await the page is mapped but not published
        vmm.translate(AT["v21"].state, "V", 1, 0, 8, 1, 3)
    assert exc.value.reason is vmm.VmmRejection.MAPPING_NOT_READY


def test_trace_has_24_operations_5_maps_5_unmaps():
    assert len(TRACE) == 24 and [t.state.version for t in TRACE] == list(range(1, 25))
    maps = sum(getattr(t.receipt, "maps", 0) for t in TRACE)
    unmaps = sum(getattr(t.receipt, "unmaps", 0) for t in TRACE)
    assert (maps, unmaps) == (5, 5)


def test_every_state_reconciles_both_ledgers_without_m_va():
    for t in TRACE:
        led = vmm.check_state(t.state)
        assert led.mapped_bytes == led.active_valid_bytes + led.active_slack_bytes + led.inactive_retained_bytes
        if t.state.handles_created:
            assert led.pool_bytes == 768 == led.mapped_bytes + led.free_handle_bytes
        assert led.virtual_bytes in (0, 2304)


def test_two_new_requests_benefit_from_retained_mappings_but_not_old_rows():
    benefits = [t for t in TRACE if t.operation == "alloc_reqid" and t.receipt.detail["retained_pages"] > 0]
    assert [(t.state.slots[0].request_id, t.state.slots[0].generation) for t in benefits] == [("C", 2), ("D", 3)]
    c = AT["v12"].state.slots[0]
    assert c.valid_tokens == 0 and not c.old_kv_semantically_valid and len(c.pages) == 2
    assert AT["v13"].receipt.maps == 0 and len(AT["v13"].state.slots[0].pages) == 2  # no new mapping
    with pytest.raises(Rejected) as exc:
        vmm.require_use(AT["v12"].state, 0, 2, 1)
    assert exc.value.reason is vmm.VmmRejection.ROWS_NOT_VALID


def test_d_grows_from_8_to_9_by_reclaiming_bs_bundle():
    before = AT["v19"].state
    assert before.slots[0].valid_tokens == 8 and not before.free_handles  # no free handle
    assert not before.slots[1].active and before.slots[1].pages == ((8, 9, 10, 11),)  # B's retained bundle
    assert AT["v20"].operation == "reclaim_inactive" and AT["v20"].state.free_handles == {8, 9, 10, 11}
    assert AT["v21"].receipt.detail == {"slot": 0, "page": 2, "handles": (8, 9, 10, 11), "asynchronous": True}
    assert AT["v21"].state.slots[0].ready_pages == 2  # not yet ready
    receipt = AT["v22"].receipt
    assert receipt.covers(3, 9) and receipt.page_handles[2][3] == 11
    assert AT["v23"].state.slots[0].valid_tokens == 9


def test_step_async_reclaims_bs_bundle_like_the_trace():
    s, receipt = vmm.step_async(AT["v19"].state, 0, 9)
    assert s == AT["v21"].state  # reclaim B's inactive bundle, then map it asynchronously as page 2
    assert not receipt.covers(3, 9) and receipt.covers(3, 8)  # not usable for row 8 until awaited
    s, ready = vmm.await_mapping(s, 0)
    assert ready.covers(3, 9)


def test_step_sync_maps_complete_bundles_ready_before_use():
    s = AT["v02"].state
    s, _ = vmm.alloc_reqid(s, 2, "E")
    s, receipt = vmm.step_sync(s, 2, 5)
    assert receipt.ready_pages == 2 and receipt.ready_before_use and receipt.covers(1, 5)
    assert all(len(p) == 4 for p in receipt.page_handles)


def test_shutdown_releases_handles_then_virtual_ranges():
    s, _ = vmm.release_handles(AT["v24"].state)
    s, _ = vmm.release_virtual(s)
    assert s.phase == "VA_RELEASED" and vmm.ledgers(s).pool_bytes == 0


def test_failure_lab_has_at_least_20_named_cases_all_rejected_by_name():
    cases = labs.cases("0x06I")
    assert len(cases) >= 20 and len({c.reason for c in cases}) >= 20
    for case in cases:
        assert rejection_of(case.trigger) is case.reason, case.description

vmm_ops = st.lists(st.tuples(st.sampled_from(["alloc", "map", "amap", "await", "write", "free", "freeu", "reclaim",
                                              "use"]),
                             st.integers(0, 3), st.integers(0, 5)), max_size=40)


@given(vmm_ops)
def test_random_operations_reconcile_or_are_refused_by_name(stream):
    s = AT["v02"].state
    names = iter(f"R{i}" for i in range(100))
    for op, slot, n in stream:
        before = s
        try:
            if op == "alloc":
                s, _ = vmm.alloc_reqid(s, slot, next(names))
            elif op in ("map", "amap"):
                s, _ = vmm.map_bundle(s, slot, len(s.slot(slot).pages), asynchronous=op == "amap")
            elif op == "await":
                s, r = vmm.await_mapping(s, slot)
                assert r.ready_before_use
            elif op == "write":
                sl = s.slot(slot)
                s, _ = vmm.write_rows(s, slot, sl.generation, sl.valid_tokens, n + 1)
            elif op in ("free", "freeu"):
                s, _ = vmm.free_reqid(s, slot, unmap=op == "freeu")
            elif op == "reclaim":
                s, _ = vmm.reclaim_inactive(s, slot)
            else:
                sl = s.slot(slot)
                vmm.require_use(s, slot, sl.generation, min(n, sl.valid_tokens))
        except Rejected as exc:
            assert isinstance(exc.reason, vmm.VmmRejection)
            assert s == before
        led = vmm.check_state(s)
        assert led.pool_bytes == led.mapped_bytes + led.free_handle_bytes == 768
        for sl in s.slots:  # no valid row outside the published frontier; inactive slots hold none
            assert sl.valid_tokens <= sl.ready_pages * C.page_tokens and (sl.active or sl.valid_tokens == 0)
