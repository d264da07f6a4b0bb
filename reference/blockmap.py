"""Allocator-to-kernel block-table expansion, shared by the reference and the kernels (seed 0x0AC).

Invariant: with ``q = allocator_block_tokens / kernel_block_tokens`` (an integer, else rejected),
allocator block ``b`` becomes kernel blocks ``b*q .. b*q + q - 1`` in order, so token position ``t``
lands in the same physical bytes under both tables (P_a = q P_k).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from kvexact.reference.rejections import Rejected


class BlockMapRejection(enum.Enum):
    KERNEL_BLOCK_DOES_NOT_DIVIDE = "kernel block size does not divide the allocator block size"
    NON_POSITIVE_BLOCK_SIZE = "block sizes must be positive"
    NEGATIVE_BLOCK_ID = "block ids must be non-negative"


def expansion_factor(allocator_block_tokens: int, kernel_block_tokens: int) -> int:
    """q such that P_a = q * P_k; rejects non-positive sizes and a kernel block that does not divide."""
    if allocator_block_tokens <= 0 or kernel_block_tokens <= 0:
        raise Rejected(BlockMapRejection.NON_POSITIVE_BLOCK_SIZE,
                       f"P_a={allocator_block_tokens}, P_k={kernel_block_tokens}")
    if allocator_block_tokens % kernel_block_tokens:
        raise Rejected(BlockMapRejection.KERNEL_BLOCK_DOES_NOT_DIVIDE,
                       f"P_k={kernel_block_tokens} does not divide P_a={allocator_block_tokens}")
    return allocator_block_tokens // kernel_block_tokens


def expand_block_table(table: Sequence[int], allocator_block_tokens: int, kernel_block_tokens: int) -> list[int]:
    """Kernel block table for an allocator block table, e.g. [3, 7] with 32 -> 16 gives [6, 7, 14, 15]."""
    q = expansion_factor(allocator_block_tokens, kernel_block_tokens)
    out: list[int] = []
    for b in table:
        if b < 0:
            raise Rejected(BlockMapRejection.NEGATIVE_BLOCK_ID, f"block id {b}")
        out.extend(range(b * q, b * q + q))
    return out
