"""0x10A: the formula registry. Every formula has a golden seed value; the same code runs over z3."""

from fractions import Fraction

import pytest

from kvexact.reference import formulas
from kvexact.reference.formulas import INT_OPS, REGISTRY, Z3Ops, evaluate, exercised, formula, load_all

load_all()
KIB, MIB = 1024, 1024 * 1024
ROW = 64 * KIB

# id -> [(arguments, expected)], expected values from the seed text (section in the formula's location)
GOLDEN = {
    "row_bytes.group": [(dict(layers=32, kv_heads_local=4, head_dim=128, k_scalar_bytes=2, v_scalar_bytes=2), 65_536),
                        (dict(layers=24, kv_heads_local=4, head_dim=128, k_scalar_bytes=2, v_scalar_bytes=2), 48 * KIB)],
    "row_bytes.rank": [(dict(group_row_bytes=[48 * KIB, 16 * KIB]), 64 * KIB)],
    "ledger.logical_ref_bytes": [(dict(rows_tokens=[33, 25, 16], row_bytes=ROW), 74 * ROW)],
    "ledger.rect_reserved_bytes": [(dict(reserved_rows_tokens=[64, 48, 32], row_bytes=ROW), 9 * MIB)],
    "ledger.rect_slack_bytes": [(dict(reserved_bytes=9 * MIB, logical_bytes=74 * ROW), 70 * ROW)],
    "ledger.request_blocks": [(dict(rows_tokens=33, block_tokens=16), 3), (dict(rows_tokens=4096, block_tokens=16), 256)],
    "ledger.paged_ref_bytes": [(dict(ref_blocks=6, block_tokens=16, row_bytes=ROW), 6 * MIB)],
    "ledger.request_view_tail_bytes": [(dict(paged_bytes=6 * MIB, logical_bytes=74 * ROW), 22 * ROW)],
    "ledger.pool_bytes": [(dict(pool_blocks=8, block_tokens=16, row_bytes=ROW), 8 * MIB)],
    "ledger.pool_idle_bytes": [(dict(pool_blocks=8, live_blocks=3, block_tokens=16, row_bytes=ROW), 5 * MIB)],
    "ledger.unique_materialized_bytes": [(dict(valid_rows=[16, 16, 1], row_bytes=ROW), 33 * ROW)],
    "ledger.unique_capacity_bytes": [(dict(unique_blocks=3, block_tokens=16, row_bytes=ROW), 3 * MIB)],
    "ledger.unique_tail_bytes": [(dict(valid_rows=[16, 16, 1], block_tokens=16, row_bytes=ROW), 15 * ROW)],
    "ledger.dedup_payload_bytes": [(dict(logical_bytes=74 * ROW, materialized_bytes=33 * ROW), 41 * ROW)],
    "ledger.sharing_avoided_bytes": [(dict(paged_bytes=6 * MIB, unique_bytes=3 * MIB), 3 * MIB)],
    "ledger.metadata_bytes": [(dict(map_entry_bytes=4, ref_entries=6, descriptor_bytes=32, pool_blocks=8,
                                    hash_entry_bytes=24, cached_hashes=2, tail_record_bytes=2, live_requests=3,
                                    free_entry_bytes=4, free_blocks=5, fixed_bytes=128), 482)],
    "frag.external_ratio": [(dict(largest_free_bytes=2 * MIB, total_free_bytes=3 * MIB), Fraction(1, 3))],
    "frag.blocks_for_bytes": [(dict(candidate_bytes=5 * MIB // 2, block_bytes=MIB), 3)],
    "tail.expected_slots": [(dict(block_tokens=16), Fraction(15, 2))],
    "tail.max_unique_bytes": [(dict(block_tokens=16, row_bytes=ROW), 15 * ROW)],
    "tail.expected_bytes": [(dict(block_tokens=16, row_bytes=ROW), 480 * KIB)],
    "cost.request_tail_tokens": [(dict(rows_tokens=33, block_tokens=4), 3), (dict(rows_tokens=33, block_tokens=32), 31)],
    "cost.full_hit_tokens": [(dict(rows_tokens=25, block_tokens=16), 16), (dict(rows_tokens=16, block_tokens=16), 16)],
    "cost.full_hit_tokens_capped": [(dict(rows_tokens=48, block_tokens=16), 32), (dict(rows_tokens=50, block_tokens=16), 48),
                                    (dict(rows_tokens=16, block_tokens=16), 0)],
    "cost.partial_hit_tokens_capped": [(dict(rows_tokens=25), 24), (dict(rows_tokens=16), 15)],
    "cost.recompute_tokens": [(dict(prompt_tokens=48, hit_tokens=32), 16), (dict(prompt_tokens=50, hit_tokens=48), 2)],
    "cow.tail_rows": [(dict(shared_tokens=20, block_tokens=16), 4), (dict(shared_tokens=20, block_tokens=4), 0)],
    "cow.copy_traffic_bytes": [(dict(tail_rows=4, row_bytes=ROW), 512 * KIB)],
    "cow.destination_bytes": [(dict(block_tokens=16, row_bytes=ROW), MIB)],
    "cow.capacity_amplification": [(dict(block_tokens=16, tail_rows=4), 4)],
    "addr.row_major_stride": [(dict(dims=[8, 8, 16, 4, 128], axis=0), 65536), (dict(dims=[8, 8, 16, 4, 128], axis=1), 8192)],
    "addr.logical_block": [(dict(token=16, block_tokens=16), 1), (dict(token=24, block_tokens=16), 1)],
    "addr.token_offset": [(dict(token=16, block_tokens=16), 0), (dict(token=24, block_tokens=16), 8)],
    "addr.slot_id": [(dict(physical_slot=6, block_tokens=16, offset=0), 96), (dict(physical_slot=4, block_tokens=16, offset=0), 64)],
    "addr.element_offset": [(dict(coordinate=[0, 6, 0, 1, 5], strides=[65536, 8192, 512, 128, 1]), 49_285)],
    "addr.byte_address": [(dict(base_address=4_311_744_512, scalar_bytes=2, element_offset=49_285), 4_311_843_082)],
    "addr.tensor_bytes": [(dict(dims=[8, 8, 16, 4, 128], scalar_bytes=2), MIB)],
    "kernel.seq_blocks": [(dict(context_tokens=2049, kernel_block_tokens=16), 129)],
    "kernel.partitions": [(dict(context_tokens=2049, partition_tokens=512), 5)],
    "kernel.blocks_per_partition": [(dict(partition_tokens=512, kernel_block_tokens=16), 32)],
    "kernel.thread_group_size": [(dict(warp_size=32, kernel_block_tokens=8), 4), (dict(warp_size=32, kernel_block_tokens=64), 1)],
    "kernel.tokens_per_thread_group": [(dict(kernel_block_tokens=64, warp_size=32), 2)],
    "kernel.value_vector_width": [(dict(scalar_bytes=2, kernel_block_tokens=16), 8)],
    "kernel.dense_table_cells": [(dict(batch_rows=4, max_blocks=4), 16)],
    "kernel.used_table_cells": [(dict(blocks_per_request=[4, 4, 2, 1]), 11)],
    "kernel.padded_table_cells": [(dict(batch_rows=4, max_blocks=4, blocks_per_request=[4, 4, 2, 1]), 5)],
    "kernel.expanded_block_id": [(dict(allocator_block_id=7, q=2, i=1), 15), (dict(allocator_block_id=3, q=2, i=0), 6)],
    "chunk.logical_rows": [(dict(batch_rows=8, shared_tokens=64, suffix_tokens=[8] * 4 + [16] * 4), 608)],
    "chunk.unique_rows": [(dict(shared_tokens=64, suffix_tokens=[8] * 4 + [16] * 4), 160)],
    "chunk.saved_rows": [(dict(batch_rows=8, shared_tokens=64), 448)],
    "chunk.ordinary_chunks": [(dict(shared_tokens=64, suffix_tokens=[8] * 4 + [16] * 4, chunk_tokens=16), 40)],
    "chunk.shared_chunks": [(dict(shared_tokens=64, suffix_tokens=[8] * 4 + [16] * 4, chunk_tokens=16), 12)],
    "chunk.partial_states": [(dict(batch_rows=8, shared_tokens=64, chunk_tokens=16), 32)],
    "chunk.partial_state_bytes": [(dict(partial_count=1, value_width=128, output_scalar_bytes=2, state_scalar_bytes=4), 264)],
    "vmm.page_group_tokens": [(dict(page_group_bytes=2 * MIB, tensor_row_bytes=2048), 1024)],
    "vmm.page_groups": [(dict(context_tokens=1025, group_tokens=1024), 2)],
    "vmm.page_group_waste_bytes": [(dict(group_count=2, page_group_bytes=2 * MIB, context_tokens=1025,
                                         tensor_row_bytes=2048), 1023 * 2048)],
}


def test_every_registered_formula_has_a_golden_case():
    assert set(GOLDEN) == set(REGISTRY), (set(REGISTRY) ^ set(GOLDEN))


@pytest.mark.parametrize("fid", sorted(GOLDEN))
def test_golden(fid):
    for kwargs, expected in GOLDEN[fid]:
        assert evaluate(fid, INT_OPS, **kwargs) == expected, (fid, kwargs)


def test_every_formula_is_exercised():
    for fid, cases in GOLDEN.items():
        for kwargs, _ in cases:
            evaluate(fid, **kwargs)
    assert exercised() >= set(REGISTRY)


def test_registry_metadata():
    for f in REGISTRY.values():
        assert f.units.strip() and f.convention.strip() and f.location.strip(), f.id
        assert f.location.startswith("0x"), f.id


def test_duplicate_id_and_missing_units_are_refused():
    with pytest.raises(ValueError, match="twice"):
        formula("ledger.pool_bytes", units="bytes", convention="x", location="0x02C")(lambda ops: 0)
    with pytest.raises(ValueError, match="units"):
        formula("test.no_units", units="", convention="x", location="0x02C")(lambda ops: 0)
    with pytest.raises(ValueError, match="units"):
        formula("test.no_convention", units="bytes", convention=" ", location="0x02C")(lambda ops: 0)
    assert "test.no_units" not in REGISTRY and "test.no_convention" not in REGISTRY


def test_wrong_arguments_are_a_clear_error():
    with pytest.raises(TypeError, match="ledger.pool_bytes"):
        evaluate("ledger.pool_bytes", pool_blocks=8)
    with pytest.raises(ValueError, match="divisor"):
        evaluate("ledger.request_blocks", rows_tokens=3, block_tokens=0)


# ---------------------------------------------------------------- the same code over z3


def _prove(claim, ops, *assumptions):
    """True when ``assumptions and side constraints imply claim`` (negation unsat within 10 s)."""
    import z3

    solver = z3.Solver()
    solver.set("timeout", 10_000)
    solver.add(*assumptions, *ops.side, z3.Not(claim))
    return solver.check() == z3.unsat


def test_z3_tail_is_below_one_block():
    import z3

    ops = Z3Ops()
    T, P = z3.Ints("T P")
    tail = formulas.REGISTRY["cost.request_tail_tokens"](ops, rows_tokens=T, block_tokens=P)
    assert _prove(z3.And(tail >= 0, tail < P), ops, T >= 0, P > 0)


def test_z3_capped_hit_bounds():
    import z3

    ops = Z3Ops()
    T, P = z3.Ints("T P")
    hit = evaluate("cost.full_hit_tokens_capped", ops, rows_tokens=T, block_tokens=P)
    assert _prove(z3.And(hit <= T - 1, hit > T - 1 - P, hit >= 0), ops, T >= 1, P > 0)


def test_z3_ledger_identities():
    import z3

    ops = Z3Ops()
    B, P, n_ref, n_unique = z3.Ints("B P n_ref n_unique")
    rows = z3.Ints("t0 t1 t2")
    valid = z3.Ints("v0 v1 v2")
    logical = evaluate("ledger.logical_ref_bytes", ops, rows_tokens=rows, row_bytes=B)
    paged = evaluate("ledger.paged_ref_bytes", ops, ref_blocks=n_ref, block_tokens=P, row_bytes=B)
    tail = evaluate("ledger.request_view_tail_bytes", ops, paged_bytes=paged, logical_bytes=logical)
    cap = evaluate("ledger.unique_capacity_bytes", ops, unique_blocks=3, block_tokens=P, row_bytes=B)
    mat = evaluate("ledger.unique_materialized_bytes", ops, valid_rows=valid, row_bytes=B)
    utail = evaluate("ledger.unique_tail_bytes", ops, valid_rows=valid, block_tokens=P, row_bytes=B)
    assert _prove(paged == logical + tail, ops)
    assert _prove(cap == mat + utail, ops)


def test_z3_slot_id_injective_for_P16():
    import z3

    ops = Z3Ops()
    s1, s2, t1, t2 = z3.Ints("s1 s2 t1 t2")
    o1 = evaluate("addr.token_offset", ops, token=t1, block_tokens=16)
    o2 = evaluate("addr.token_offset", ops, token=t2, block_tokens=16)
    id1 = evaluate("addr.slot_id", ops, physical_slot=s1, block_tokens=16, offset=o1)
    id2 = evaluate("addr.slot_id", ops, physical_slot=s2, block_tokens=16, offset=o2)
    assert _prove(z3.Implies(id1 == id2, z3.And(s1 == s2, o1 == o2)), ops, s1 >= 0, s2 >= 0, t1 >= 0, t2 >= 0)


def test_z3_can_refute_a_false_claim():
    import z3

    ops = Z3Ops()
    T, P = z3.Ints("T P")
    hit = evaluate("cost.full_hit_tokens", ops, rows_tokens=T, block_tokens=P)
    assert not _prove(hit == T, ops, T >= 0, P > 0)  # only block-aligned lengths are fully hit
