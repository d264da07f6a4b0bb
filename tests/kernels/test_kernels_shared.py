"""Shared-prefix kernels (Hydragen-style, ChunkAttention-style) against float64, and on 0x0BE's tree."""

from __future__ import annotations

import os

import pytest
import torch

from kvexact.kernels import device as dev
from kvexact.kernels import differential as D
from kvexact.kernels import paged, shared
from kvexact.kernels import reference as ref
from kvexact.kernels.errors import KernelInputError, KernelRejection
from kvexact.reference import shared_prefix as sp
from kvexact.reference.labs import shared_prefix as sp_lab


def pytest_generate_tests(metafunc):
    """The full product under the fuzz profile (option or KVEXACT_PROFILE), else the pairwise set."""
    if "case" in metafunc.fixturenames:
        fuzz = getattr(metafunc.config, "stash_profile", os.environ.get("KVEXACT_PROFILE")) == "fuzz"
        cases = D.full_product(D.SHARED_FACTORS) if fuzz else D.pairwise_cases(D.SHARED_FACTORS)
        metafunc.parametrize("case", cases, ids=D.case_id)


def test_shared_prefix_schedules_match_float64(case):
    result = D.run_shared_case(case, seed=len(D.case_id(case)))
    assert result["passed"], result


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("block_size", [1, 16])
@pytest.mark.parametrize("threshold", [1, 0], ids=["chunkattention", "hydragen"])
def test_seed_tree_0x0BE_through_the_kernels(dtype, block_size, threshold):
    result = D.run_seed_tree(dtype, block_size, threshold)
    assert result["finite"] and result["within_tolerance"], result
    led = sp.ledger(sp_lab.SEED_TREE, 4, 2, 3, threshold=threshold)
    assert result["partial_rows"] == led.partial_rows == (8 if threshold == 1 else 4 + 2 + 2 + 1 + 1 + 1 + 1)


def test_seed_tree_fp32_kernel_agrees_with_the_binary64_reference_schedules():
    query, kc, vc, chunks, _ = D.seed_tree_inputs(torch.float32, 16)
    out = shared.chunked_shared_attention(query, kc, vc, chunks, threshold=1)
    mono = torch.tensor(sp.monolithic(sp_lab.seed_fixture()), dtype=torch.float64)
    assert torch.allclose(out[:, 0].double(), mono, atol=1e-5, rtol=1e-5)


def test_hydragen_with_empty_prefix_equals_paged_decode():
    gen = torch.Generator(dev.device()).manual_seed(1)
    kc = torch.randn(6, 4, 2, 16, generator=gen)
    vc = torch.randn(6, 4, 2, 16, generator=gen)
    q = torch.randn(2, 4, 16, generator=gen)
    bt = torch.tensor([[1, 2], [3, 0]], dtype=torch.int32)
    lens = torch.tensor([6, 3], dtype=torch.int32)
    out = shared.shared_prefix_attention(q, kc, vc, torch.zeros(0, dtype=torch.int32), 0, bt, lens)
    want, _ = ref.paged_decode_f64(q, kc, vc, bt, lens)
    assert torch.allclose(out.double(), want, atol=1e-5, rtol=1e-5)
    assert torch.allclose(out, paged.paged_decode_attention(q, kc, vc, bt, lens), atol=1e-6)


def test_hydragen_returns_merged_lse():
    gen = torch.Generator(dev.device()).manual_seed(2)
    kc = torch.randn(6, 4, 1, 16, generator=gen)
    vc = torch.randn(6, 4, 1, 16, generator=gen)
    q = torch.randn(2, 2, 16, generator=gen)
    prefix = torch.tensor([4, 5], dtype=torch.int32)
    bt = torch.tensor([[1], [2]], dtype=torch.int32)
    lens = torch.tensor([2, 0], dtype=torch.int32)
    _, lse = shared.shared_prefix_attention(q, kc, vc, prefix, 7, bt, lens, return_lse=True)
    for b in range(2):
        keys = torch.cat([ref.gather_history(kc, prefix, 7), ref.gather_history(kc, bt[b], int(lens[b]))])
        vals = torch.cat([ref.gather_history(vc, prefix, 7), ref.gather_history(vc, bt[b], int(lens[b]))])
        _, want = ref.attention_f64(q[b], keys, vals)
        assert torch.allclose(lse[b].double(), want, atol=1e-5)


def _tiny():
    kc = torch.zeros(4, 2, 1, 16)
    return torch.zeros(2, 1, 16), kc, torch.zeros(4, 2, 1, 16)


@pytest.mark.parametrize("chunks, reason", [
    ([shared.Chunk((0,), 1, 0, 3)], KernelRejection.BAD_COVERAGE),
    ([shared.Chunk((0,), 1, 1, 1)], KernelRejection.BAD_COVERAGE),
    ([shared.Chunk((0,), -1, 0, 2)], KernelRejection.NEGATIVE_LENGTH),
    ([shared.Chunk((0,), 3, 0, 2)], KernelRejection.BLOCK_TABLE_TOO_SHORT),
    ([shared.Chunk((9,), 1, 0, 2)], KernelRejection.BLOCK_ID_OUT_OF_RANGE),
    ([shared.Chunk((0,), 1, 0, 1), shared.Chunk((1,), 1, 1, 2), shared.Chunk((2,), 1, 0, 2)],
     KernelRejection.BAD_COVERAGE),
])
def test_chunked_rejects_bad_trees_by_name(chunks, reason):
    q, kc, vc = _tiny()
    with pytest.raises(KernelInputError) as exc:
        shared.chunked_shared_attention(q, kc, vc, chunks)
    assert exc.value.reason is reason


@pytest.mark.parametrize("depth, block_size, threshold", [(3, 4, 1), (4, 4, 2), (4, 1, 1), (5, 2, 0), (3, 4, 9)])
def test_chunk_trees_of_any_depth_with_partial_pages_match_float64(depth, block_size, threshold):
    """Deep trees whose private chunks end inside pages (threshold 9: every chunk private, sequence-first)."""
    for seed in range(2):
        result = D.run_tree_case(seed, depth, block_size, threshold)
        assert result["finite"] and result["within_tolerance"], result
    if block_size > 1 and threshold >= 2:
        assert result["private_levels"] > 1, result  # a private path was cut at a partial page


def test_a_three_level_path_of_partial_private_chunks_reads_each_chunk_once():
    """The tree once refused (PRIVATE_CHUNK_NOT_PAGE_ALIGNED): sequence 0 reads chunks 0 and 1, both one
    token in a two-token page; each must count once, and the other rows of their pages never."""
    gen = torch.Generator(dev.device()).manual_seed(3)
    kc = torch.full((4, 2, 1, 16), float("nan"))
    vc = torch.full((4, 2, 1, 16), float("nan"))
    for b in range(3):
        kc[b, 0], vc[b, 0] = torch.randn(1, 16, generator=gen), torch.randn(1, 16, generator=gen)
    q = torch.randn(2, 1, 16, generator=gen)
    chunks = [shared.Chunk((0,), 1, 0, 1), shared.Chunk((1,), 1, 0, 1), shared.Chunk((2,), 1, 1, 2)]
    plan = shared.plan_chunks(chunks, 2, 2, 4)
    assert plan.private_levels == ((((0,), 1), ((2,), 1)), (((1,), 1), ((), 0)))
    out = shared.chunked_shared_attention(q, kc, vc, chunks)
    for s, path in ((0, [0, 1]), (1, [2])):
        want, _ = ref.attention_f64(q[s], kc[path, 0], vc[path, 0])
        assert torch.allclose(out[s].double(), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kwargs, reason", [
    (dict(prefix_len=-1), KernelRejection.NEGATIVE_LENGTH),
    (dict(prefix_len=5), KernelRejection.BLOCK_TABLE_TOO_SHORT),
    (dict(prefix_splits=0), KernelRejection.NON_POSITIVE_SPLITS),
    (dict(prefix_block_ids=torch.tensor([0, 1])), KernelRejection.WRONG_DTYPE),
])
def test_shared_prefix_rejects_bad_input_by_name(kwargs, reason):
    q, kc, vc = _tiny()
    args = dict(prefix_block_ids=torch.tensor([0, 1], dtype=torch.int32), prefix_len=3,
                suffix_block_table=torch.zeros(2, 1, dtype=torch.int32),
                suffix_lens=torch.tensor([1, 0], dtype=torch.int32))
    args.update(kwargs)
    with pytest.raises(KernelInputError) as exc:
        shared.shared_prefix_attention(q, kc, vc, **args)
    assert exc.value.reason is reason
