"""0x02, 0x0D, 0x09B, 0x09C: every worked number, computed from the fixture (expected values from the seed)."""

from fractions import Fraction

import pytest

from kvexact.reference.labs.ledgers import nested_prefix_cost, worked_fixture, worked_layout_row_bytes
from kvexact.reference.ledgers import (
    KIB,
    MIB,
    NOT_APPLICABLE,
    LedgerRejection,
    block_pool_fit,
    compute_ledger,
    contiguous_fit,
    cow_cost,
    expected_tail_bytes,
    expected_tail_slots,
    external_fragmentation,
    full_hit_tokens,
    full_hit_tokens_capped,
    full_hit_tokens_gen,
    group_row_bytes,
    recompute_tokens,
    reconcile,
    request_blocks,
    row_bytes_group,
)
from kvexact.reference.rejections import Rejected


def test_0x02A_row_bytes():
    assert worked_layout_row_bytes() == 65_536 == 64 * KIB
    # two disjoint K/V-head shards: the model-wide conceptual row is 128 KiB
    assert 2 * worked_layout_row_bytes() == 128 * KIB
    # K and V may have different widths: the factor 2 appears only when they are equal
    assert group_row_bytes(32, 4, 128, 2, 1) == 32 * 4 * 128 * 3


def test_0x0D_worked_ledger():
    led = compute_ledger(worked_fixture())
    assert led.row_bytes == 64 * KIB and led.block_bytes == MIB
    assert led.logical_rows_tokens == 74 and led.logical_bytes * 1000 == 4625 * MIB  # 4.625 MiB
    assert led.reserved_rows_tokens == 144 and led.reserved_bytes == 9 * MIB
    assert led.rect_slack_bytes == 70 * 64 * KIB and led.rect_slack_bytes * 1000 == 4375 * MIB
    assert led.ref_blocks == 6 and led.request_view_slots == 96 and led.paged_ref_bytes == 6 * MIB
    assert led.request_view_tail_slots == 22 and led.request_view_tail_bytes * 1000 == 1375 * MIB
    # seven of B's non-visible slots hold A's valid rows: 22 view-tail slots = 15 unique tail + 7 shadowed
    assert led.request_view_tail_valid_slots == 7
    assert led.request_view_tail_slots == led.unique_tail_slots + led.request_view_tail_valid_slots
    assert led.unique_blocks == 3 and led.unique_materialized_rows == 33
    assert led.unique_materialized_bytes * 10000 == 20625 * MIB  # 2.0625 MiB
    assert led.unique_slots == 48 and led.unique_capacity_bytes == 3 * MIB
    assert led.unique_tail_slots == 15 and led.unique_tail_bytes * 10000 == 9375 * MIB
    assert led.sharing_avoided_bytes == 3 * MIB
    assert led.dedup_payload_bytes * 10000 == 25625 * MIB
    assert (led.pool_blocks, led.pool_bytes, led.live_unique_bytes, led.pool_idle_bytes) == (8, 8 * MIB, 3 * MIB, 5 * MIB)
    assert led.metadata_bytes == 24 + 256 + 48 + 6 + 20 + 128 == 482


def test_0x0D_identities_hold():
    identities = compute_ledger(worked_fixture()).identities()
    assert len(identities) == 6  # the five of 0x0D plus the pool split of 0x02C
    for name, (lhs, rhs) in identities.items():
        assert lhs == rhs, name


def test_0x0D_claims_reconcile_and_the_seed_failure():
    reconcile(worked_fixture(), {"unique_blocks": 3, "metadata_bytes": 482, "pool_idle_bytes": 5 * MIB})
    with pytest.raises(Rejected) as info:
        reconcile(worked_fixture(), {"unique_blocks": 6})
    assert info.value.reason is LedgerRejection.UNIQUE_BLOCKS_MISCOUNTED


def test_0x0D_model_wide_illustration():
    row = row_bytes_group(layers=32, kv_heads_local=8, head_dim=128, k_scalar_bytes=2, v_scalar_bytes=2)
    assert row == 131_072 == 128 * KIB
    assert 16 * row == 2 * MIB
    assert request_blocks(rows_tokens=4096, block_tokens=16) == 256
    assert 4096 * row == 512 * MIB
    assert request_blocks(rows_tokens=3072, block_tokens=16) == 192
    assert 1024 * row == 128 * MIB and 1023 * row * 1000 == 127_875 * MIB


def test_0x02F_fragmentation():
    free = [1 * MIB, 2 * MIB]
    assert external_fragmentation(free) == Fraction(1, 3)
    assert not contiguous_fit(free, 5 * MIB // 2)  # 2.5 MiB contiguous: reject
    assert block_pool_fit(5, 5 * MIB // 2, MIB)  # 3 interchangeable blocks of 5 free: fits
    assert not block_pool_fit(2, 5 * MIB // 2, MIB)
    assert external_fragmentation([]) is NOT_APPLICABLE
    assert external_fragmentation([0, 0]) is NOT_APPLICABLE


def test_0x02G_expected_tail():
    assert expected_tail_slots(block_tokens=16) == Fraction(15, 2)  # 7.5 slots
    assert expected_tail_bytes(block_tokens=16, row_bytes=64 * KIB) == 480 * KIB
    assert compute_ledger(worked_fixture()).unique_tail_slots == 15  # the trace, not the expectation


@pytest.mark.parametrize("P, hit, recompute", [(4, 36, 5), (8, 32, 9), (16, 16, 25), (32, 0, 41), (64, 0, 41)])
def test_0x09B_capped_full_block_hits(P, hit, recompute):
    c = nested_prefix_cost(P)
    assert (c.full_hit_tokens_capped, c.recompute_tokens_capped) == (hit, recompute)
    assert c.partial_hit_tokens_capped == 39  # 24 for B, 15 for C


def test_0x09B_storage_and_metadata():
    p4, p16, p32 = nested_prefix_cost(4), nested_prefix_cost(16), nested_prefix_cost(32)
    assert p4.unique_tail_bytes == 3 * 64 * KIB == 192 * KIB
    assert p4.pool_descriptors == 32 and p4.map_entries == 20
    assert p32.unique_tail_bytes == 31 * 64 * KIB and p32.unique_tail_bytes * 10000 == 19375 * MIB
    assert p32.request_view_tail_bytes > p32.unique_tail_bytes
    assert p16.metadata_bytes == 482 and p32.metadata_bytes < p16.metadata_bytes < p4.metadata_bytes
    # uncapped staircase across B + C
    assert [nested_prefix_cost(p).full_hit_tokens for p in (4, 8, 16, 32, 64)] == [40, 40, 32, 0, 0]
    # C is the one-block edge at P = 16: cap 15 aligns down to 0
    assert full_hit_tokens_gen(rows_tokens=16, block_tokens=16) == 0
    assert full_hit_tokens(rows_tokens=16, block_tokens=16) == 16


def test_0x07E_complete_prompt_hit_edge():
    assert full_hit_tokens_capped(semantic_tokens=48, indexed_tokens=48, prompt_tokens=48, block_tokens=16) == 32
    assert recompute_tokens(prompt_tokens=48, hit_tokens=32) == 16
    # three cached full blocks of a 50-token prompt: the index holds 48 rows
    assert full_hit_tokens_capped(semantic_tokens=50, indexed_tokens=48, prompt_tokens=50, block_tokens=16) == 48
    assert request_blocks(rows_tokens=recompute_tokens(prompt_tokens=50, hit_tokens=48), block_tokens=16) == 1
    assert 2 * 64 * KIB == 128 * KIB  # useful recompute payload versus one 1 MiB bundle


@pytest.mark.parametrize("P, r, traffic, dst, amp", [
    (4, 0, 0, 256 * KIB, NOT_APPLICABLE),
    (8, 4, 512 * KIB, 512 * KIB, Fraction(2)),
    (16, 4, 512 * KIB, MIB, Fraction(4)),
    (32, 20, 2560 * KIB, 2 * MIB, Fraction(8, 5)),
    (64, 20, 2560 * KIB, 4 * MIB, Fraction(16, 5)),
])
def test_0x09C_cow_amplification(P, r, traffic, dst, amp):
    c = cow_cost(P)
    assert (c.tail_rows, c.copy_traffic_bytes, c.destination_bytes, c.capacity_amplification) == (r, traffic, dst, amp)


@pytest.mark.parametrize("call, reason", [
    (lambda: group_row_bytes(32, -4, 128, 2, 2), LedgerRejection.NEGATIVE_SIZE),
    (lambda: group_row_bytes(0, 4, 128, 2, 2), LedgerRejection.NEGATIVE_SIZE),
    (lambda: external_fragmentation([MIB, -1]), LedgerRejection.NEGATIVE_SIZE),
    (lambda: block_pool_fit(5, MIB, 0), LedgerRejection.NON_POSITIVE_BLOCK_SIZE),
])
def test_malformed_sizes(call, reason):
    with pytest.raises(Rejected) as info:
        call()
    assert info.value.reason is reason
