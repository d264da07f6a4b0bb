"""0x05B two-group COW trace, 0x04F rollback, 0x05E/0x05F ABA and the 0x05A accounting, through the reference."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kvexact.reference import lifecycle
from kvexact.reference.allocator import AllocRejection
from kvexact.reference.handles import BlockHandle
from kvexact.reference.labs import allocator as fixtures
from kvexact.reference.ledgers import NOT_APPLICABLE, cow_cost
from kvexact.reference.pool import BlockState, PoolRejection, QueuePolicy
from kvexact.reference.rejections import Rejected

KiB = 1024
MiB = 1024 * KiB


def H(group: int, block: int, gen: int) -> BlockHandle:
    return BlockHandle(group, group, block, gen)


def test_0x05b_private_append_then_fork():
    alloc = fixtures.fixture_0x05b()
    a = alloc.request("A")
    assert (a.context_tokens, a.table_version) == (33, 5)
    assert (a.tables[0][-1], a.tables[1][-1]) == (H(0, 1002, 9), H(1, 2002, 12))
    assert alloc.tail_rows(a, 0) == alloc.tail_rows(a, 1) == 1
    assert alloc.refcount(H(0, 1002, 9)) == alloc.refcount(H(1, 2002, 12)) == 1
    r = alloc.append("A", 133, expected_generation=1, expected_table_version=5)
    a = alloc.request("A")
    assert r.paths == ("unique", "unique") and r.new_physical_blocks == 0 and r.copied_rows == 0
    assert (a.context_tokens, a.table_version, alloc.tail_rows(a, 0), alloc.tail_rows(a, 1)) == (34, 6, 2, 2)
    assert alloc.epoch == 43  # no reservation, no epoch step
    lifecycle.fork(alloc, "A", "D", expected_generation=1, expected_table_version=6)
    d = alloc.request("D")
    assert d.tables == a.tables and d.context_tokens == 34
    assert alloc.refcount(H(0, 1002, 9)) == alloc.refcount(H(1, 2002, 12)) == 2


def test_0x05b_cow_append_of_d():
    alloc = fixtures.fixture_0x05b_forked()
    d = alloc.request("D")
    before_version = d.table_version
    r = lifecycle.cow_append(alloc, "D", 900, expected_generation=1, expected_table_version=before_version,
                       expected_tail=(H(0, 1002, 9), H(1, 2002, 12)))
    d = alloc.request("D")
    assert r.outcome == "PUBLISHED" and r.paths == ("cow", "cow")
    assert (d.tables[0][-1], d.tables[1][-1]) == (H(0, 1003, 12), H(1, 2003, 6))
    assert alloc.tail_rows(d, 0) == alloc.tail_rows(d, 1) == 3
    assert alloc.refcount(H(0, 1003, 12)) == alloc.refcount(H(1, 2003, 6)) == 1
    assert alloc.refcount(H(0, 1002, 9)) == alloc.refcount(H(1, 2002, 12)) == 1  # old tail 2 -> 1
    assert (d.context_tokens, d.table_version) == (35, 2)
    assert alloc.epoch == 44 and r.allocator_epoch_after == 44
    assert alloc.tokens_of("D") == (*fixtures.FIXTURE_TOKENS_A, 133, 900)
    assert alloc.tokens_of("A") == (*fixtures.FIXTURE_TOKENS_A, 133)
    # 0x05A: r = 2, bundle row 64 KiB
    assert r.copied_rows == 2
    assert r.copy_payload_bytes == 128 * KiB
    assert r.copy_traffic_bytes == 320 * KiB
    assert r.copy_traffic_bytes / r.append_write_bytes == 5
    assert r.new_capacity_bytes == 1 * MiB
    assert set(r.refcount_deltas) == {(H(0, 1003, 12), 1), (H(1, 2003, 6), 1), (H(0, 1002, 9), -1),
                                      (H(1, 2002, 12), -1)}
    assert r.predecessor_digest != r.successor_digest == alloc.digest()
    assert not alloc.leases.data and not alloc.txns.data


def test_0x05a_cost_formula_and_0x09c():
    c = cow_cost(16, shared_tokens=2, row_bytes=64 * KiB)  # r = 2 rows of a 64 KiB bundle row
    assert (c.copy_payload_bytes, c.copy_traffic_bytes, c.traffic_bytes) == (128 * KiB, 256 * KiB, 320 * KiB)
    assert c.amplification == 5 and c.destination_bytes == MiB
    # 0x09C: 20 shared tokens; r = 20 mod P_a
    for p, r in ((4, 0), (8, 4), (16, 4), (32, 20), (64, 20)):
        c = cow_cost(p, 20, 64 * KiB)
        assert c.tail_rows == r
        assert c.capacity_amplification == (Fraction(p, r) if r else NOT_APPLICABLE)


def test_0x04f_rollback_restores_predecessor_digest():
    alloc = fixtures.fixture_0x05b_forked()
    before = alloc.digest()
    version = alloc.request("D").table_version
    alloc.fault_after.add(("cow_reserve", 0))
    r = alloc.append("D", 900, expected_generation=1, expected_table_version=version)
    assert r.outcome == "ROLLED_BACK"
    assert alloc.epoch == 43 and r.allocator_epoch_after == 43
    assert alloc.digest() == before == r.successor_digest == r.predecessor_digest
    assert alloc.request("D").table_version == version
    assert alloc.block_state(H(0, 1003, 11)) is BlockState.FREE  # generation restored too
    # the same append then succeeds exactly as in 0x05B
    r = alloc.append("D", 900, expected_generation=1, expected_table_version=version)
    assert alloc.request("D").tables[0][-1] == H(0, 1003, 12) and alloc.epoch == 44


def test_0x05e_0x05f_truncate_reuse_and_aba():
    alloc = fixtures.fixture_0x05b_forked()
    lifecycle.cow_append(alloc, "D", 900, expected_generation=1, expected_table_version=1)
    res = lifecycle.truncate(alloc, "D", 32)
    assert set(res.freed_handles) == {H(0, 1003, 12), H(1, 2003, 6)}
    assert alloc.request("D").context_tokens == 32 and len(alloc.request("D").tables[0]) == 2
    f = alloc.allocate("F", list(range(500, 516)))
    ftab = alloc.request("F").tables
    assert (ftab[0], ftab[1]) == ((H(0, 1003, 13),), (H(1, 2003, 7),))
    assert f.allocator_epoch_after == 45
    for stale in (H(0, 1003, 12), H(1, 2003, 6)):
        before = alloc.digest()
        with pytest.raises(Rejected) as exc:
            lifecycle.delayed_write(alloc, stale, 3, 901)
        assert exc.value.reason is PoolRejection.STALE_BLOCK_GENERATION
        with pytest.raises(Rejected) as exc:
            lifecycle.retain_read(alloc, stale)
        assert exc.value.reason is PoolRejection.STALE_BLOCK_GENERATION
        assert alloc.digest() == before
    # cancel and release share mechanics, differ in the reason
    c = lifecycle.cancel(alloc, "D")
    assert c.reason == "cancel" and c.freed_handles == () and c.evictable_handles == ()
    lifecycle.cache_block(alloc, "A", 0, "k0")
    lifecycle.cache_block(alloc, "A", 1, "k1")
    rel = lifecycle.release(alloc, "A")
    assert rel.reason == "release"
    assert set(rel.evictable_handles) == {H(0, 1000, 3), H(0, 1001, 5), H(1, 2000, 7), H(1, 2001, 8)}
    assert set(rel.freed_handles) == {H(0, 1002, 9), H(1, 2002, 12)}
    assert alloc.block_state(H(0, 1000, 3)) is BlockState.EVICTABLE
    g = lifecycle.prefix_hit(alloc, "G", ["k0"])
    assert g.tables == ((H(0, 1000, 3),), (H(1, 2000, 7),))
    assert alloc.refcount(H(0, 1000, 3)) == 1 and 1000 not in alloc.pools[0].q_seq
    lifecycle.evict(alloc, "k1")
    assert alloc.block_state(H(0, 1001, 5)) is BlockState.FREE
    lifecycle.evict(alloc, "k0")  # does not revoke G's live mapping
    assert alloc.request("G").tables[0] == (H(0, 1000, 3),)
    assert alloc.block_state(H(0, 1000, 3)) is BlockState.REFERENCED
    with pytest.raises(Rejected) as exc:
        lifecycle.prefix_hit(alloc, "H", ["k0"])
    assert exc.value.reason is AllocRejection.CACHE_IDENTITY_MISSING


def test_interior_block_removal_rejected():
    alloc = fixtures.fixture_0x05b()
    with pytest.raises(Rejected) as exc:
        lifecycle.drop_logical_block(alloc, "A", 1)
    assert exc.value.reason is AllocRejection.INTERIOR_BLOCK_REMOVAL
    res = lifecycle.drop_logical_block(alloc, "A", 2)
    assert alloc.request("A").context_tokens == 32 and res.freed_handles


@pytest.mark.parametrize("policy", list(QueuePolicy))
def test_queue_policy_order(policy):
    alloc = fixtures.fixture_0x0d()
    # free queue after the fixture: 103..107 in id order
    assert alloc.pools[0].queue_order() == [103, 104, 105, 106, 107]
    alloc.pools[0].policy = policy
    r = alloc.allocate("X", [1])
    want = 107 if policy is QueuePolicy.MRU else 103
    assert r.published_tables[0][0].block_id == want


def test_lowest_id_policy_ignores_queue_order():
    alloc = fixtures.fixture_0x0d()
    alloc.pools[0].policy = QueuePolicy.LOWEST_ID
    lifecycle.release(alloc, "C")
    lifecycle.release(alloc, "B")
    lifecycle.release(alloc, "A")  # 102, 101, 100 join the queue tail after 103..107
    assert alloc.pools[0].queue_order() == [103, 104, 105, 106, 107, 102, 101, 100]
    r = alloc.allocate("X", [1])
    assert r.published_tables[0][0] == BlockHandle(0, 0, 100, 2)  # LRU would take 103
    assert lifecycle.lookup_all_groups(alloc, "A/0") is None  # reuse evicted the cached identity


def test_compensating_successor_keeps_history():
    alloc = fixtures.fixture_0x05b_forked()
    r = alloc.append("D", 900)
    v = alloc.request("D").table_version
    comp = lifecycle.compensate(alloc, r)
    assert comp.outcome == "COMPENSATED"
    d = alloc.request("D")
    assert d.context_tokens == 34 and d.table_version == v + 1  # a new successor, not a rewind
    assert alloc.epoch == 44


def test_0x0d_ledger_through_live_allocator():
    alloc = fixtures.fixture_0x0d()
    c = fixtures.ledger_counts(alloc)
    assert c.logical_rows == 74 and c.request_map_entries == 6 and c.unique_blocks == 3
    assert c.unique_materialized_rows == 33
    assert c.provisioned_blocks == 8 and c.free_queue_entries == 5
    assert c.cached_hash_entries == 2 and c.request_tail_records == 3
    row = c.row_bytes
    assert c.logical_rows * row == int(4.625 * MiB)
    assert c.request_map_entries * c.block_tokens * row == 6 * MiB
    assert (c.request_map_entries * c.block_tokens - c.logical_rows) * row == int(1.375 * MiB)
    assert c.unique_materialized_rows * row == int(2.0625 * MiB)
    assert (c.unique_blocks * c.block_tokens - c.unique_materialized_rows) * row == int(0.9375 * MiB)
    assert c.provisioned_blocks * c.block_tokens * row == 8 * MiB
    meta = (c.request_map_entries * 4 + c.provisioned_blocks * 32 + c.cached_hash_entries * 24
            + c.request_tail_records * 2 + c.free_queue_entries * 4 + 128)
    assert meta == 482
    assert {h.block_id for h in alloc.request("B").tables[0]} == {100, 101}
    assert alloc.tail_rows(alloc.request("B"), 0) == 9


def test_0x0d_ledger_module_through_live_allocator():
    from kvexact.reference import ledgers

    alloc = fixtures.fixture_0x0d()
    f = fixtures.ledger_fixture_from(alloc, {"A": 64, "B": 48, "C": 32})
    led = ledgers.compute_ledger(f)
    assert (led.logical_bytes, led.reserved_bytes, led.rect_slack_bytes) == (
        int(4.625 * MiB), 9 * MiB, int(4.375 * MiB))
    assert (led.paged_ref_bytes, led.request_view_tail_bytes) == (6 * MiB, int(1.375 * MiB))
    assert (led.unique_materialized_bytes, led.unique_capacity_bytes, led.unique_tail_bytes) == (
        int(2.0625 * MiB), 3 * MiB, int(0.9375 * MiB))
    assert (led.pool_bytes, led.live_unique_bytes, led.pool_idle_bytes) == (8 * MiB, 3 * MiB, 5 * MiB)
    assert led.metadata_bytes == 482
    assert led.request_view_tail_valid_slots == 7  # "seven of B's non-visible block positions"
    for name, (lhs, rhs) in led.identities().items():
        assert lhs == rhs, name
