"""Paged decode attention against float64: a pairwise-covering set in CI, the full product under fuzz."""

from __future__ import annotations

import itertools
import os

import torch

from kvexact.kernels import differential as D
from kvexact.kernels import paged
from kvexact.kernels import reference as ref


def pytest_generate_tests(metafunc):
    """The full product under the fuzz profile (option or KVEXACT_PROFILE), else the pairwise set."""
    if "case" in metafunc.fixturenames:
        fuzz = getattr(metafunc.config, "stash_profile", os.environ.get("KVEXACT_PROFILE")) == "fuzz"
        cases = D.full_product(D.DECODE_FACTORS) if fuzz else D.pairwise_cases(D.DECODE_FACTORS)
        metafunc.parametrize("case", cases, ids=D.case_id)


def test_pairwise_set_covers_every_pair_of_levels():
    cases = D.pairwise_cases(D.DECODE_FACTORS)
    names = list(D.DECODE_FACTORS)
    for a, b in itertools.combinations(names, 2):
        seen = {(c[a], c[b]) for c in cases}
        want = set(itertools.product(D.DECODE_FACTORS[a], D.DECODE_FACTORS[b]))
        assert seen == want, (a, b, want - seen)
    assert len(cases) < len(D.full_product(D.DECODE_FACTORS)) // 20


def test_decode_matches_float64_on_poisoned_pool(case):
    result = D.run_decode_case(case, seed=len(D.case_id(case)))
    assert result["finite"], result
    assert result["poison_blind"], result
    assert result["within_tolerance"], result
    assert result["lse_ok"], result


def test_empty_sequence_gives_zero_output_and_minus_inf_lse():
    kc = torch.full((2, 4, 1, 16), float("nan"))
    vc = torch.full((2, 4, 1, 16), float("nan"))
    q = torch.randn(1, 2, 16)
    out, lse = paged.paged_decode_attention(q, kc, vc, torch.tensor([[5]], dtype=torch.int32),
                                            torch.tensor([0], dtype=torch.int32), num_splits=2, return_lse=True)
    assert torch.equal(out, torch.zeros_like(out))
    assert torch.isneginf(lse).all()


def test_explicit_scale_and_output_tensor_are_used():
    kc = torch.randn(3, 4, 1, 16)
    vc = torch.randn(3, 4, 1, 16)
    q = torch.randn(2, 1, 16)
    bt = torch.tensor([[2, 0], [1, 0]], dtype=torch.int32)
    lens = torch.tensor([7, 3], dtype=torch.int32)
    out = torch.empty(2, 1, 16)
    got = paged.paged_decode_attention(q, kc, vc, bt, lens, scale=0.5, output=out)
    assert got is out
    want, _ = ref.paged_decode_f64(q, kc, vc, bt, lens, scale=0.5)
    assert torch.allclose(out.double(), want, atol=1e-5, rtol=1e-5)
    other, _ = ref.paged_decode_f64(q, kc, vc, bt, lens)
    assert not torch.allclose(out.double(), other, atol=1e-3)


def test_flashinfer_lse_is_base_two():
    lse = torch.tensor([1.0, 0.0, float("-inf")])
    got = paged.to_flashinfer_lse(lse)
    assert torch.allclose(got[:2], torch.tensor([1.0 / 0.6931471805599453, 0.0]))
    assert torch.isneginf(got[2])


def test_unvalidated_launch_gives_the_same_output():
    inp = D.build_decode({"dtype": "fp32", "block_size": 16, "heads": (4, 2), "dims": (16, 16),
                          "layout": "separate"}, seed=9, poison=float("nan"))
    args = (inp.query, inp.key_cache, inp.value_cache, inp.block_table, inp.seq_lens)
    a = paged.paged_decode_attention(*args, num_splits=3)
    b = paged.paged_decode_attention(*args, num_splits=3, validate=False)
    c = paged.paged_decode_attention(*args, validate=False)
    assert torch.equal(a, b)
    assert torch.allclose(a, c, atol=1e-6)
