"""reference/shared_prefix.py against the seed's 0x0BE and 0x0BI numbers (binary64, no torch)."""

from __future__ import annotations

import pytest

from kvexact.reference import labs
from kvexact.reference import shared_prefix as S
from kvexact.reference.labs import shared_prefix as S_lab
from kvexact.reference.rejections import Rejected, rejection_of


def test_seed_tree_paths_and_coverage():
    assert [c.name for c in S_lab.SEED_TREE] == ["C0_global", "C1_left_shared", "C2_right_shared", "C3_private_S0",
                                             "C4_private_S1", "C5_private_S2", "C6_private_S3"]
    names = [[S_lab.SEED_TREE[c].name[:2] for c in S.path_of(S_lab.SEED_TREE, s)] for s in range(4)]
    assert names == [["C0", "C1", "C3"], ["C0", "C1", "C4"], ["C0", "C2", "C5"], ["C0", "C2", "C6"]]


def test_both_partitioned_schedules_equal_monolithic_within_seed_bound():
    fx = S_lab.seed_fixture()
    mono = S.monolithic(fx)
    hyd = S.hydragen(fx)
    chunk, partial = S.chunk_attention(fx, threshold=1)
    assert S.max_abs_difference(mono, hyd) <= 2.3e-16
    assert S.max_abs_difference(mono, chunk) <= 2.3e-16
    assert len(partial) == 8


@pytest.mark.parametrize("seed", range(40))
def test_schedules_agree_to_a_few_ulps_on_any_draw(seed):
    fx = S_lab.seed_fixture(seed)
    mono = S.monolithic(fx)
    bound = 4 * 2.220446049250313e-16 * max(1.0, max(abs(x) for row in mono for x in row))
    assert S.max_abs_difference(mono, S.hydragen(fx)) <= bound
    assert S.max_abs_difference(mono, S.chunk_attention(fx)[0]) <= bound


def test_an_average_of_normalized_outputs_is_not_the_row():
    fx = S_lab.seed_fixture()
    mono = S.monolithic(fx)
    s = 0
    parts = [S.partition_state(fx.q[s], fx.k[c], fx.v[c], fx.scale, fx.d_v).lse_output()[1]
             for c in S.path_of(fx.tree, s)]
    average = [sum(p[j] for p in parts) / len(parts) for j in range(fx.d_v)]
    assert max(abs(a - b) for a, b in zip(average, mono[s], strict=True)) > 1e-3


def test_empty_partition_is_a_two_sided_identity():
    fx = S_lab.seed_fixture()
    state = S.partition_state(fx.q[0], fx.k[0], fx.v[0], fx.scale, fx.d_v)
    empty = S.partition_state(fx.q[0], [], [], fx.scale, fx.d_v)
    assert not empty.valid
    assert S.merge_states(empty, state) == state
    assert S.merge_states(state, empty) == state
    assert S.finalize(S.merge_states(empty, empty)) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        empty.lse_output()


def test_seed_ledger_0x0BE():
    led = S.ledger(S_lab.SEED_TREE, 4, d_qk=2, d_v=3)
    assert (led.logical_pairs, led.unique_rows, led.saved_reads) == (19, 10, 9)
    assert (led.kv_row_bytes, led.baseline_kv_bytes, led.shared_kv_bytes) == (10, 190, 100)
    assert (led.partial_rows, led.partial_row_bytes, led.partial_buffer_bytes) == (8, 14, 112)


def test_chunk_first_metadata_of_seed_tree():
    meta = S.chunk_first_metadata(S_lab.SEED_TREE, threshold=1)
    assert meta.chunks == (0, 1, 2)
    assert (meta.begins, meta.ends, meta.offsets, meta.partial_rows) == ((0, 0, 2), (4, 2, 4), (0, 4, 6), 8)


def test_regular_prefix_ledger_0x0BI():
    led = S.regular_prefix_ledger(64, [8, 8, 8, 8, 16, 16, 16, 16], row_bytes=512, chunk_tokens=16, d_v=128)
    assert (led.logical_rows, led.unique_rows, led.saved_rows) == (608, 160, 448)
    assert (led.baseline_bytes, led.shared_bytes, led.saved_bytes) == (304 * 1024, 80 * 1024, 224 * 1024)
    for chunk in (8, 16, 32, 64):  # shared work is invariant, traversal is not
        other = S.regular_prefix_ledger(64, [8] * 4 + [16] * 4, 512, chunk, 128)
        assert other.saved_rows == 448
    small = S.regular_prefix_ledger(64, [8] * 4 + [16] * 4, 512, 8, 128)
    large = S.regular_prefix_ledger(64, [8] * 4 + [16] * 4, 512, 64, 128)
    assert small.partial_rows == 8 * 8 and large.partial_rows == 8
    assert small.partial_bytes > large.partial_bytes


@pytest.mark.parametrize("tree, reason", [
    ((S.TreeChunk("a", 1, 0, 5),), S.SharedPrefixRejection.BAD_COVERAGE),
    ((S.TreeChunk("a", 1, 2, 2), S.TreeChunk("b", 1, 0, 4)), S.SharedPrefixRejection.BAD_COVERAGE),
    ((S.TreeChunk("a", 1, 0, 3), S.TreeChunk("b", 1, 2, 4)), S.SharedPrefixRejection.NOT_NESTED),
    ((S.TreeChunk("a", 1, 0, 3),), S.SharedPrefixRejection.UNCOVERED_SEQUENCE),
])
def test_bad_trees_are_rejected_by_name(tree, reason):
    with pytest.raises(Rejected) as exc:
        S.draw_fixture(tree, num_seqs=4, d_qk=2, d_v=3, seed=1)
    assert exc.value.reason is reason


CASES_0x0BH = labs.cases("0x0BH")


def test_failure_lab_0x0BH_names_every_shared_prefix_rejection_once():
    """The seed gives 0x0BH no count: the lab holds each distinct contract (a repeat needs a listed variant)."""
    assert {c.reason for c in CASES_0x0BH} == set(S.SharedPrefixRejection)
    repeats = {reason for (section, reason) in labs.repeated_reasons() if section == "0x0BH"}
    assert repeats == {reason for (section, reason) in labs.DISTINCT_VARIANTS if section == "0x0BH"}


@pytest.mark.parametrize("case", CASES_0x0BH, ids=lambda c: c.description)
def test_failure_lab_0x0BH_case_is_rejected_by_name(case):
    assert rejection_of(case.trigger) is case.reason


def test_rebuilt_metadata_after_a_reorder_is_accepted():
    fx = S_lab.seed_fixture()
    moved = S_lab._reordered(fx)
    with pytest.raises(Rejected) as exc:
        S.chunk_attention(moved, 1, S.bind_chunk_first(fx, 1))
    assert exc.value.reason is S.SharedPrefixRejection.SEQUENCE_ORDER_CHANGED
    out, _ = S.chunk_attention(moved, 1, S.bind_chunk_first(moved, 1))
    assert out == S.chunk_attention(moved, 1)[0]


@pytest.mark.parametrize("depth", [3, 4, 6])
def test_deep_trees_all_schedules_equal_monolithic_at_every_threshold(depth):
    """Trees deeper than the seed's (any depth, chunks of any row count): ChunkAttention at every threshold
    and Hydragen agree with the monolithic row, and every sequence's path has ``depth`` chunks."""
    from kvexact.kernels.differential import random_chunk_tree

    tree = tuple(S.TreeChunk(f"c{i}", n, lo, hi) for i, (n, lo, hi) in enumerate(random_chunk_tree(depth, 6, depth, 3)))
    fx = S.draw_fixture(tree, num_seqs=6, d_qk=2, d_v=3, seed=depth)
    assert {len(S.path_of(tree, s)) for s in range(6)} == {depth}
    mono = S.monolithic(fx)
    assert S.max_abs_difference(S.hydragen(fx), mono) < 1e-14
    for threshold in range(7):
        out, _ = S.chunk_attention(fx, threshold=threshold)
        assert S.max_abs_difference(out, mono) < 1e-14
