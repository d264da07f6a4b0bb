"""The kernel mirror every state machine shares: a real paged K/V pool driven through the kernels,
mirroring what an allocator's (or an index's) tables and receipts say happened.

K/V rows are a deterministic function of the whole token prefix (``kv_row``), so a block that holds
the wrong request's rows, a copy that was skipped, or a write into a shared block shows up as a
numerical mismatch between paged decode (through the tables) and float64 attention over the request's
logical history (built from its tokens, never read back from the pool).

Invariant of :class:`DevicePool`: only ``reshape_and_cache`` and ``copy_blocks`` write the pool; every
slot that no table references holds NaN poison (from the start, or written back by :meth:`poison` when
a block is freed), and the kernels must never read it. A copy happens only when an operation's receipt
reports it; the mirror never infers one from the tables.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

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

    def slot(self, group: int, block_id: int) -> int:
        """The pool row of ``block_id``; a block outside the adapter's ``block_ids(group)`` is a conformance failure."""
        from kvexact.conformance.machines import ConformanceFailure

        slot = self.slot_of[group].get(block_id)
        if slot is None:
            raise ConformanceFailure(f"group {group}: block {block_id} is not among the adapter's block_ids({group}) "
                                     f"({len(self.slot_of[group])} blocks)")
        return slot

    def write(self, group: int, block_id: int, row: int, tokens_prefix: Sequence[int]) -> None:
        import torch

        from kvexact.kernels.paged import reshape_and_cache

        k, v = kv_row(tokens_prefix, group)
        slot = self.slot(group, block_id) * self.block_tokens + row
        reshape_and_cache(k[None], v[None], self.k[group], self.v[group], policy.tensor([slot], torch.int64))
        self.writes += 1

    def poison(self, group: int, block_ids: Sequence[int]) -> None:
        """Write NaN into every row of ``block_ids`` (blocks that went back to the free pool)."""
        import torch

        from kvexact.kernels.paged import reshape_and_cache

        slots = [self.slot(group, b) * self.block_tokens + row for b in block_ids for row in range(self.block_tokens)]
        nan = policy.full((len(slots), NUM_KV_HEADS, HEAD_DIM), math.nan)
        reshape_and_cache(nan, nan.clone(), self.k[group], self.v[group], policy.tensor(slots, torch.int64))

    def copy(self, group: int, src_block: int, dst_block: int) -> None:
        import torch

        from kvexact.kernels.paged import copy_blocks

        pair = policy.tensor([[self.slot(group, src_block), self.slot(group, dst_block)]], torch.int64)
        copy_blocks(self.k[group], self.v[group], pair)
        self.copies += 1

    def check_attention(self, tables: dict[str, list[list[int]]], histories: dict[str, list[int]],
                        tolerance: float = 2e-4) -> list[AttentionMismatch]:
        """Paged decode for every request and group against float64 attention over its logical history."""
        import torch

        from kvexact.kernels.paged import paged_decode_attention

        mismatches: list[AttentionMismatch] = []
        names = sorted(r for r in tables if histories[r])
        if not names:
            return mismatches
        for g in range(len(self.k)):
            width = max(len(tables[r][g]) for r in names)
            bt = policy.zeros((len(names), max(width, 1)), torch.int32)
            for i, r in enumerate(names):
                for j, b in enumerate(tables[r][g]):
                    bt[i, j] = self.slot(g, b)
            lens = policy.tensor([len(histories[r]) for r in names], torch.int32)
            q = torch.stack([query_row(r, len(histories[r])) for r in names])
            out = paged_decode_attention(q, self.k[g], self.v[g], bt, lens, num_splits=2)
            for i, r in enumerate(names):
                err = max_error(out[i], expected_attention(q[i], histories[r], g))
                if not math.isfinite(err) or err > tolerance:
                    mismatches.append(AttentionMismatch(r, g, err, f"table {tables[r][g]}, length {len(histories[r])}"))
        return mismatches


def expected_attention(query: Any, tokens: Sequence[int], group: int = 0) -> Any:
    """float64 attention of ``query`` over the K/V rows of ``tokens`` (built from the tokens, never read
    back from a pool)."""
    import torch

    from kvexact.kernels.reference import attention_f64

    rows = [kv_row(tokens[: t + 1], group) for t in range(len(tokens))]
    out, _ = attention_f64(query, torch.stack([k for k, _ in rows]), torch.stack([v for _, v in rows]))
    return out


def max_error(out: Any, expected: Any) -> float:
    return float((out.double() - expected).abs().max())


def mirror_step(pool: DevicePool, copies: Sequence[tuple[int, int, int]], group_tables_after: list[list[int]],
                tokens_after: Sequence[int], first_written: int) -> None:
    """Mirror one accepted operation of one request onto the pool: first the ``(group, source, destination)``
    copies its receipt reports (copy-on-write), then rows ``first_written .. len(tokens_after) - 1``, which
    the operation wrote, through the request's tables after it."""
    p = pool.block_tokens
    for g, src, dst in copies:
        pool.copy(g, src, dst)
    for g, after in enumerate(group_tables_after):
        for pos in range(first_written, len(tokens_after)):
            pool.write(g, after[pos // p], pos % p, tokens_after[: pos + 1])
