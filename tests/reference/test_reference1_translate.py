"""0x03: the reference translator on the Loop 4 two-group fixture."""

import attrs
import pytest

from kvexact.reference.handles import BlockHandle
from kvexact.reference.labs.translate import G1_K_BASE, loop4_snapshot, loop4_successor_snapshot
from kvexact.reference.rejections import Rejected
from kvexact.reference.translate import (
    FrozenAddress,
    PhysicalRef,
    TranslateRejection,
    check_frozen_address,
    consume_successor,
    resolve_kv_address,
    validate_snapshot,
)


def test_0x03F_one_complete_checked_address():
    s = loop4_snapshot()
    validate_snapshot(s)
    r = resolve_kv_address(s, "A", 16, 24, "K", 1, 5)
    assert r.cache_group_id == 1 and r.layer_local == 0
    assert (r.logical_block, r.token_offset) == (1, 0)
    assert r.handle == PhysicalRef(pool_id=1, cache_group_id=1, block_id=2001, generation=7)
    assert s.request("A").table_version == 5
    assert s.layout.group(1).element_strides == (65536, 8192, 512, 128, 1)
    assert r.coordinate == (0, 6, 0, 1, 5)
    assert r.slot_id == 96
    assert r.element_offset == 49_285 and r.byte_offset == 98_570
    assert G1_K_BASE == 4_311_744_512 and r.byte_address == 4_311_843_082
    assert r.slot_id != r.byte_address


def test_0x03G_visibility_dominates_shared_validity():
    s = loop4_snapshot()
    ok = resolve_kv_address(s, "B", 24, 24, "K", 0, 0)
    assert (ok.logical_block, ok.token_offset, ok.handle.block_id) == (1, 8, 2001)
    assert s.pool(1).descriptor(2001).valid_rows == 16  # A materialized 16..31
    with pytest.raises(Rejected) as info:
        resolve_kv_address(s, "B", 25, 24, "K", 0, 0)
    assert info.value.reason is TranslateRejection.TOKEN_NOT_VISIBLE
    assert resolve_kv_address(s, "A", 25, 24, "K", 0, 0).token_offset == 9  # A may read it


def test_0x03H_boundary_crossing_consumes_the_successor():
    s = loop4_snapshot()
    assert s.request("C").table_version == 2 and s.request("C").context_length_tokens == 16
    with pytest.raises(Rejected) as info:
        resolve_kv_address(s, "C", 16, 0, "K", 0, 0)
    assert info.value.reason is TranslateRejection.TOKEN_NOT_VISIBLE
    s2 = consume_successor(s, loop4_successor_snapshot(), "C")
    g0 = resolve_kv_address(s2, "C", 16, 0, "K", 0, 0)
    g1 = resolve_kv_address(s2, "C", 16, 24, "K", 0, 0)
    assert (g0.logical_block, g0.token_offset) == (1, 0)
    assert (g0.handle.block_id, s2.pool(0).descriptor(1003).physical_slot, g0.slot_id) == (1003, 0, 0)
    assert (g1.handle.block_id, s2.pool(1).descriptor(2003).physical_slot, g1.slot_id) == (2003, 4, 64)


def test_0x03I_rejection_order():
    """A read that breaks visibility, identity and lane bounds at once reports visibility first, etc."""
    s = loop4_snapshot()
    a = s.request("A")
    stale = attrs.evolve(a, block_tables=((0, a.table(0)), (1, (a.table(1)[0], BlockHandle(1, 1, 2001, 6),
                                                                  a.table(1)[2]))))
    s_stale = attrs.evolve(s, requests=(stale, *s.requests[1:]))

    def reason(**kw):
        args = dict(request_id="A", token=16, layer=24, kind="K", head=1, lane=5) | kw
        with pytest.raises(Rejected) as info:
            resolve_kv_address(s_stale, **args)
        return info.value.reason

    assert reason(token=40, lane=999) is TranslateRejection.TOKEN_NOT_VISIBLE       # visibility first
    assert reason(lane=999, head=9) is TranslateRejection.STALE_PHYSICAL_GENERATION  # identity before bounds
    short = attrs.evolve(a, context_length_tokens=50)  # claims 50 rows over 3 blocks (not validated)
    s_short = attrs.evolve(s, requests=(short, *s.requests[1:]))
    with pytest.raises(Rejected) as info:
        resolve_kv_address(s_short, "A", 35, 24, "K", 99, 999)
    assert info.value.reason is TranslateRejection.ROW_NOT_MATERIALIZED              # validity before head/lane
    with pytest.raises(Rejected) as info:
        resolve_kv_address(s_short, "A", 48, 24, "K", 0, 0)
    assert info.value.reason is TranslateRejection.TABLE_INDEX_OUT_OF_RANGE          # table bounds
    with pytest.raises(Rejected) as info:
        resolve_kv_address(s, "A", 0, 24, "K", 99, 999)
    assert info.value.reason is TranslateRejection.HEAD_OUT_OF_RANGE                 # head before lane


def test_frozen_address_round_trip():
    frozen = FrozenAddress("A", 5, 16, 24, "K", 1, 5, 4_311_843_082)
    assert check_frozen_address(loop4_snapshot(), frozen).slot_id == 96


def test_every_address_is_injective_and_inside_its_tensor():
    s = loop4_snapshot()
    seen = set()
    for t in range(33):
        for layer in (0, 23, 24, 31):
            for kind in ("K", "V"):
                for head in range(4):
                    for lane in (0, 127):
                        seen.add(resolve_kv_address(s, "A", t, layer, kind, head, lane).byte_address)
    assert len(seen) == 33 * 4 * 2 * 4 * 2
