"""Allocator blocks split for the kernel (P_a = q P_k, seed 0x0AC) and slot mappings from block tables."""

from __future__ import annotations

import pytest
import torch

from kvexact.kernels import device as dev
from kvexact.kernels import paged
from kvexact.kernels import reference as ref
from kvexact.kernels.errors import KernelInputError, KernelRejection
from kvexact.reference.blockmap import BlockMapRejection
from kvexact.reference.rejections import Rejected


def test_seed_expansion_32_to_16():
    assert paged.kernel_block_table([[3, 7]], 32, 16).tolist() == [[6, 7, 14, 15]]
    assert paged.kernel_block_table([[1]], 64, 16, width=6, pad_id=-1).tolist() == [[4, 5, 6, 7, -1, -1]]


def test_decode_through_expanded_table_equals_decode_through_allocator_table():
    gen = torch.Generator(dev.device()).manual_seed(4)
    alloc_k = torch.randn(5, 32, 2, 16, generator=gen)  # allocator blocks of 32 tokens
    alloc_v = torch.randn(5, 32, 2, 16, generator=gen)
    kern_k, kern_v = alloc_k.view(10, 16, 2, 16), alloc_v.view(10, 16, 2, 16)  # the same bytes, P_k = 16
    tables = [[3, 1], [4], [0, 2]]
    lens = torch.tensor([45, 32, 33], dtype=torch.int32)
    q = torch.randn(3, 4, 16, generator=gen)
    alloc_table = torch.tensor([t + [0] * (2 - len(t)) for t in tables], dtype=torch.int32)
    kern_table = paged.kernel_block_table(tables, 32, 16)
    assert kern_table.shape == (3, 4)
    a = paged.paged_decode_attention(q, alloc_k, alloc_v, alloc_table, lens)
    b = paged.paged_decode_attention(q, kern_k, kern_v, kern_table, lens, num_splits=3)
    want, _ = ref.paged_decode_f64(q, alloc_k, alloc_v, alloc_table, lens)
    assert torch.allclose(a.double(), want, atol=1e-5) and torch.allclose(b.double(), want, atol=1e-5)


def test_kernel_block_larger_than_allocator_block_is_rejected_by_name():
    with pytest.raises(Rejected) as exc:
        paged.kernel_block_table([[1]], 16, 32)
    assert exc.value.reason is BlockMapRejection.KERNEL_BLOCK_DOES_NOT_DIVIDE


def test_slots_for_follows_the_table_and_reshape_and_cache_lands_there():
    assert paged.slots_for([6, 2], [0, 3, 4, 7], 4).tolist() == [24, 27, 8, 11]
    kc = torch.zeros(8, 4, 1, 16)
    vc = torch.zeros(8, 4, 1, 16)
    rows = torch.randn(4, 1, 16)
    paged.reshape_and_cache(rows, rows, kc, vc, paged.slots_for([6, 2], [0, 3, 4, 7], 4))
    got = ref.gather_history(kc, torch.tensor([6, 2]), 8)
    assert torch.equal(got[[0, 3, 4, 7]], rows)
    with pytest.raises(KernelInputError) as exc:
        paged.slots_for([6, 2], [8], 4)
    assert exc.value.reason is KernelRejection.BLOCK_TABLE_TOO_SHORT
