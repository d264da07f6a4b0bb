"""Paged decode on drawn geometries (Hypothesis): lengths, splits, block sizes and tables beyond the edge set."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kvexact.kernels import differential as D
from kvexact.kernels import paged
from kvexact.kernels import reference as ref

_PROFILE = settings()
EXAMPLES = min(_PROFILE.max_examples, 300) if _PROFILE.max_examples > 100 else 6


@st.composite
def geometries(draw):
    block_size = draw(st.sampled_from([1, 2, 16, 32]))
    lengths = draw(st.lists(st.integers(0, 3 * block_size + 5), min_size=1, max_size=4))
    return {
        "dtype": draw(st.sampled_from(["fp32", "fp16"])),
        "block_size": block_size,
        "heads": draw(st.sampled_from([(1, 1), (2, 1), (4, 2), (6, 3)])),
        "dims": draw(st.sampled_from([(16, 16), (8, 24)])),
        "layout": draw(st.sampled_from(D.LAYOUTS)),
        "lengths": lengths,
        "splits": draw(st.integers(1, 6)),
    }


@settings(max_examples=EXAMPLES)
@given(case=geometries(), seed=st.integers(0, 2**16))
def test_decode_on_drawn_geometry_matches_float64(case, seed):
    inp = D.build_decode(case, seed, poison=float("nan"))
    out, lse = paged.paged_decode_attention(inp.query, inp.key_cache, inp.value_cache, inp.block_table,
                                            inp.seq_lens, num_splits=case["splits"], return_lse=True)
    refs = [ref.attention_f64(inp.query[b], inp.keys[b], inp.values[b]) for b in range(len(inp.keys))]
    want = torch.stack([o for o, _ in refs])
    atol, rtol = D.TOLERANCES[D.DTYPES[case["dtype"]]]
    assert torch.isfinite(out).all()
    assert torch.allclose(out.double(), want, atol=atol, rtol=rtol)
    want_lse = torch.stack([x for _, x in refs])
    assert torch.equal(torch.isneginf(lse), torch.isneginf(want_lse))
