"""A real paged K/V pool driven through the kernels, mirroring what an allocator's tables say happened.

K/V rows are a deterministic function of the whole token prefix (``kv_row``), so a block that holds
the wrong request's rows, a copy that was skipped, or a write into a shared block shows up as a
numerical mismatch between paged decode (through the tables) and float64 attention over the request's
logical history (built from its tokens, never read back from the pool).

Invariant of :class:`DevicePool`: only ``reshape_and_cache`` and ``copy_blocks`` write the pool; every
slot that no table references holds NaN poison from the start, and the kernels must never read it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import attrs

from kvexact.kernels import device as policy

HEAD_DIM = 16
NUM_KV_HEADS = 2
NUM_Q_HEADS = 4


def _seed_of(tokens: Sequence[int], salt: str) -> int:
    digest = hashlib.sha256((salt + ":" + ",".join(map(str, tokens))).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def kv_row(tokens_prefix: Sequence[int], group: int):
    """(k, v) ``[Hkv, D]`` float32 for the last token of ``tokens_prefix`` in cache group ``group``."""
    gen = policy.generator(_seed_of(tokens_prefix, f"kv{group}"))
    both = policy.randn((2, NUM_KV_HEADS, HEAD_DIM), gen)
    return both[0], both[1]


def query_row(request_key: str, length: int):
    return policy.randn((NUM_Q_HEADS, HEAD_DIM), policy.generator(_seed_of([length], request_key)))


@attrs.define
class AttentionMismatch:
    request: str
    group: int
    max_abs_error: float
    detail: str


class DevicePool:
    """One K and one V cache per cache group, ``[num_blocks, block_tokens, Hkv, D]``, NaN-poisoned."""

    def __init__(self, block_ids: Sequence[Sequence[int]], block_tokens: int):
        import torch

        self.block_tokens = block_tokens
        self.slot_of = [{b: i for i, b in enumerate(sorted(ids))} for ids in block_ids]
        self.k = [policy.full((len(ids), block_tokens, NUM_KV_HEADS, HEAD_DIM), math.nan) for ids in block_ids]
        self.v = [torch.full_like(k, math.nan) for k in self.k]
        self.writes = 0
        self.copies = 0

    def write(self, group: int, block_id: int, row: int, tokens_prefix: Sequence[int]) -> None:
        import torch

        from kvexact.kernels.paged import reshape_and_cache

        k, v = kv_row(tokens_prefix, group)
        slot = self.slot_of[group][block_id] * self.block_tokens + row
        reshape_and_cache(k[None], v[None], self.k[group], self.v[group], policy.tensor([slot], torch.int64))
        self.writes += 1

    def copy(self, group: int, src_block: int, dst_block: int) -> None:
        import torch

        from kvexact.kernels.paged import copy_blocks

        pair = policy.tensor([[self.slot_of[group][src_block], self.slot_of[group][dst_block]]], torch.int64)
        copy_blocks(self.k[group], self.v[group], pair)
        self.copies += 1

    def check_attention(self, tables: dict[str, list[list[int]]], histories: dict[str, list[int]],
                        tolerance: float = 2e-4) -> list[AttentionMismatch]:
        """Paged decode for every request and group against float64 attention over its logical history."""
        import torch

        from kvexact.kernels.paged import paged_decode_attention
        from kvexact.kernels.reference import attention_f64

        mismatches: list[AttentionMismatch] = []
        names = sorted(r for r in tables if histories[r])
        if not names:
            return mismatches
        for g in range(len(self.k)):
            width = max(len(tables[r][g]) for r in names)
            bt = policy.zeros((len(names), max(width, 1)), torch.int32)
            for i, r in enumerate(names):
                for j, b in enumerate(tables[r][g]):
                    bt[i, j] = self.slot_of[g][b]
            lens = policy.tensor([len(histories[r]) for r in names], torch.int32)
            q = torch.stack([query_row(r, len(histories[r])) for r in names])
            out = paged_decode_attention(q, self.k[g], self.v[g], bt, lens, num_splits=2)
            for i, r in enumerate(names):
                toks = histories[r]
                rows = [kv_row(toks[: t + 1], g) for t in range(len(toks))]
                keys = torch.stack([kr for kr, _ in rows])
                values = torch.stack([vr for _, vr in rows])
                ref, _ = attention_f64(q[i], keys, values)
                err = float((out[i].double() - ref).abs().max())
                if not math.isfinite(err) or err > tolerance:
                    mismatches.append(AttentionMismatch(r, g, err, f"table {tables[r][g]}, length {len(toks)}"))
        return mismatches


def mirror_step(pool: DevicePool, group_tables_before: list[list[int]] | None, length_before: int,
                group_tables_after: list[list[int]], tokens_after: Sequence[int], first_written: int) -> None:
    """Mirror one accepted operation of one request onto the pool from its tables alone.

    Rows ``first_written .. len(tokens_after) - 1`` were written by the operation. When the block that held
    the old partial tail changed identity, the runtime copied it first (copy-on-write)."""
    p = pool.block_tokens
    for g, after in enumerate(group_tables_after):
        if group_tables_before is not None and length_before % p:
            tail_index = (length_before - 1) // p
            before = group_tables_before[g]
            if tail_index < len(before) and tail_index < len(after) and before[tail_index] != after[tail_index]:
                pool.copy(g, before[tail_index], after[tail_index])
        for pos in range(first_written, len(tokens_after)):
            pool.write(g, after[pos // p], pos % p, tokens_after[: pos + 1])
