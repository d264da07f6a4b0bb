"""reshape_and_cache, copy_blocks and merge_attn_states: exact results, sentinels untouched, named rejections."""

from __future__ import annotations

import math

import pytest
import torch

from kvexact.kernels import device as dev
from kvexact.kernels import paged
from kvexact.kernels import reference as ref
from kvexact.kernels.differential import TOLERANCES, make_caches
from kvexact.kernels.errors import KernelInputError, KernelRejection

SENTINEL = -7.25  # exactly representable in every dtype


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["separate", "combined_nb2", "combined_2nb"])
def test_reshape_and_cache_writes_only_addressed_slots(dtype, layout):
    nb, bs, hkv, d = 5, 4, 2, 8
    kc, vc = make_caches(nb, bs, hkv, d, d, dtype, layout, SENTINEL)
    key = torch.randn(6, hkv, d).to(dtype)
    value = torch.randn(6, hkv, d).to(dtype)
    slots = torch.tensor([17, -1, 0, 3, -1, 9], dtype=torch.int64)
    want_k, want_v = kc.clone(), vc.clone()
    for t, s in enumerate(slots.tolist()):
        if s >= 0:
            want_k[s // bs, s % bs] = key[t]
            want_v[s // bs, s % bs] = value[t]
    paged.reshape_and_cache(key, value, kc, vc, slots)
    assert torch.equal(kc, want_k) and torch.equal(vc, want_v)
    untouched = [(b, o) for b in range(nb) for o in range(bs) if b * bs + o not in {17, 0, 3, 9}]
    assert all(bool((kc[b, o] == SENTINEL).all() and (vc[b, o] == SENTINEL).all()) for b, o in untouched)


def test_reshape_and_cache_takes_non_contiguous_key_rows():
    kc, vc = make_caches(2, 2, 1, 4, 4, torch.float32, "separate", SENTINEL)
    big = torch.randn(3, 2, 1, 4)
    key, value = big[:, 0], big[:, 1]  # strided views
    paged.reshape_and_cache(key, value, kc, vc, torch.tensor([3, 0, 1], dtype=torch.int64))
    assert torch.equal(kc[1, 1], key[0]) and torch.equal(vc[0, 0], value[1]) and torch.equal(kc[0, 1], key[2])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("layout", ["separate", "combined_nb2"])
def test_copy_blocks_copies_whole_blocks_and_nothing_else(dtype, layout):
    nb, bs, hkv, d = 6, 3, 2, 8
    kc, vc = make_caches(nb, bs, hkv, d, d, dtype, layout, SENTINEL)
    kc[:] = torch.randn(nb, bs, hkv, d).to(dtype)
    vc[:] = torch.randn(nb, bs, hkv, d).to(dtype)
    kc[4] = SENTINEL
    vc[4] = SENTINEL
    mapping = torch.tensor([[0, 3], [0, 5], [2, 1]], dtype=torch.int64)
    want_k, want_v = kc.clone(), vc.clone()
    for src, dst in mapping.tolist():
        want_k[dst] = kc[src]
        want_v[dst] = vc[src]
    paged.copy_blocks(kc, vc, mapping)
    assert torch.equal(kc, want_k) and torch.equal(vc, want_v)
    assert bool((kc[4] == SENTINEL).all() and (vc[4] == SENTINEL).all())


@pytest.mark.parametrize("mapping, reason", [
    ([[0, 2], [1, 2]], KernelRejection.DUPLICATE_DESTINATION),
    ([[0, 2], [2, 3]], KernelRejection.DESTINATION_IS_SOURCE),
    ([[1, 1]], KernelRejection.DESTINATION_IS_SOURCE),
    ([[0, 9]], KernelRejection.BLOCK_ID_OUT_OF_RANGE),
    ([[-1, 2]], KernelRejection.BLOCK_ID_OUT_OF_RANGE),
])
def test_copy_blocks_rejects_racing_or_bad_mappings_before_launch(mapping, reason):
    kc, vc = make_caches(4, 2, 1, 4, 4, torch.float32, "separate", SENTINEL)
    with pytest.raises(KernelInputError) as exc:
        paged.copy_blocks(kc, vc, torch.tensor(mapping, dtype=torch.int64))
    assert exc.value.reason is reason
    assert bool((kc == SENTINEL).all())


@pytest.mark.parametrize("slots, reason", [
    ([0, 0], KernelRejection.DUPLICATE_SLOT),
    ([8, -1], KernelRejection.SLOT_OUT_OF_RANGE),
    ([-2, 1], KernelRejection.SLOT_OUT_OF_RANGE),
])
def test_reshape_and_cache_rejects_bad_slots(slots, reason):
    kc, vc = make_caches(4, 2, 1, 4, 4, torch.float32, "separate", SENTINEL)
    with pytest.raises(KernelInputError) as exc:
        paged.reshape_and_cache(torch.zeros(2, 1, 4), torch.zeros(2, 1, 4), kc, vc,
                                torch.tensor(slots, dtype=torch.int64))
    assert exc.value.reason is reason
    assert bool((kc == SENTINEL).all())


INF = math.inf


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_merge_attn_states_equals_float64_including_empty_sides(dtype):
    t, h, d = 6, 3, 16
    gen = torch.Generator(dev.device()).manual_seed(3)
    po = torch.randn(t, h, d, generator=gen).to(dtype)
    so = torch.randn(t, h, d, generator=gen).to(dtype)
    pl = torch.randn(t, h, generator=gen) * 3
    sl = torch.randn(t, h, generator=gen) * 3
    pl[0, :], sl[1, :] = -INF, -INF  # one side empty
    pl[2, :], sl[2, :] = -INF, -INF  # both empty
    pl[3, 0], sl[3, 1] = INF, INF  # FlashAttention 2's empty marker
    po[0], so[1] = float("nan"), float("nan")  # an empty side's output must never be read
    po[2], so[2] = float("nan"), float("nan")
    out, lse = paged.merge_attn_states(po, pl, so, sl, return_lse=True)
    want, want_lse = ref.merge_f64(torch.stack([po.double(), so.double()]), torch.stack([pl.double(), sl.double()]))
    atol, rtol = TOLERANCES[dtype]
    assert torch.isfinite(out).all()
    assert torch.allclose(out.double(), want, atol=atol, rtol=rtol)
    assert torch.equal(out[2], torch.zeros_like(out[2])) and torch.isneginf(lse[2]).all()
    assert torch.equal(torch.isneginf(lse), torch.isneginf(want_lse))
    fin = torch.isfinite(want_lse)
    assert torch.allclose(lse[fin].double(), want_lse[fin], atol=1e-5, rtol=1e-5)


def test_merge_of_split_attention_equals_whole_attention():
    gen = torch.Generator(dev.device()).manual_seed(5)
    q = torch.randn(4, 16, generator=gen)
    k = torch.randn(9, 2, 16, generator=gen)
    v = torch.randn(9, 2, 16, generator=gen)
    whole, whole_lse = ref.attention_f64(q, k, v)
    a, la = ref.attention_f64(q, k[:4], v[:4])
    b, lb = ref.attention_f64(q, k[4:], v[4:])
    out = paged.merge_attn_states(a[None].float(), la[None].float(), b[None].float(), lb[None].float())
    assert torch.allclose(out[0].double(), whole, atol=1e-6)


def _decode_args():
    kc = torch.zeros(4, 2, 2, 16)
    vc = torch.zeros(4, 2, 2, 16)
    return dict(query=torch.zeros(2, 4, 16), key_cache=kc, value_cache=vc,
                block_table=torch.zeros(2, 2, dtype=torch.int32), seq_lens=torch.tensor([3, 1], dtype=torch.int32))


@pytest.mark.parametrize("change, reason", [
    (dict(query=torch.zeros(2, 4, 16, dtype=torch.float64)), KernelRejection.WRONG_DTYPE),
    (dict(query=torch.zeros(2, 4, 16, dtype=torch.float16)), KernelRejection.WRONG_DTYPE),
    (dict(block_table=torch.zeros(2, 2, dtype=torch.int64)), KernelRejection.WRONG_DTYPE),
    (dict(seq_lens=torch.tensor([3, 1])), KernelRejection.WRONG_DTYPE),
    (dict(query=torch.zeros(2, 4, 8)), KernelRejection.WRONG_SHAPE),
    (dict(query=torch.zeros(2, 4)), KernelRejection.WRONG_SHAPE),
    (dict(value_cache=torch.zeros(4, 3, 2, 16)), KernelRejection.WRONG_SHAPE),
    (dict(block_table=torch.zeros(3, 2, dtype=torch.int32)), KernelRejection.WRONG_SHAPE),
    (dict(query=torch.zeros(2, 3, 16)), KernelRejection.HEAD_GROUP_MISMATCH),
    (dict(seq_lens=torch.tensor([-1, 1], dtype=torch.int32)), KernelRejection.NEGATIVE_LENGTH),
    (dict(seq_lens=torch.tensor([5, 1], dtype=torch.int32)), KernelRejection.BLOCK_TABLE_TOO_SHORT),
    (dict(block_table=torch.tensor([[0, 4], [0, 0]], dtype=torch.int32)), KernelRejection.BLOCK_ID_OUT_OF_RANGE),
    (dict(num_splits=0), KernelRejection.NON_POSITIVE_SPLITS),
])
def test_decode_rejects_bad_input_by_name_before_launch(change, reason):
    args = {**_decode_args(), **change}
    with pytest.raises(KernelInputError) as exc:
        paged.paged_decode_attention(**args)
    assert exc.value.reason is reason
    assert exc.value.detail  # says what and where


def test_decode_rejects_tensors_on_another_device():
    args = _decode_args()
    args["query"] = torch.zeros(2, 4, 16, device="meta")
    with pytest.raises(KernelInputError) as exc:
        paged.paged_decode_attention(**args)
    assert exc.value.reason is KernelRejection.WRONG_DEVICE


def test_kernel_input_error_is_a_project_rejection():
    from kvexact.reference.rejections import Rejected

    assert issubclass(KernelInputError, Rejected) and issubclass(KernelInputError, ValueError)
