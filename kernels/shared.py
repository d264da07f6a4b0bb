"""Exact shared-prefix attention over the paged pool: Hydragen-style and ChunkAttention-style schedules.

Both schedules partition each sequence's keys into disjoint ranges, compute one partial state (normalized
output, natural-log LSE) per range, and LSE-merge them (0x0BA); they equal monolithic attention up to
rounding. The chunk-first kernel batches every query row covered by one shared chunk (``seq_end -
seq_begin`` sequences x the query-head group) against that chunk's K/V as one matrix problem, so the
chunk's rows are read once per KV head instead of once per sequence.

Invariant of the metadata: a chunk covers the half-open sequence range ``[seq_begin, seq_end)``; along a
sequence's path coverage never grows (a tree of any depth given parents first), so the shared chunks
(coverage above the threshold) form a prefix of every path and sit at the same depth for every sequence
they cover. A sequence's private chunks are cut into segments that each start on a page boundary (a new
segment after every chunk that ends inside a page), one paged-decode level per segment, so a private chunk
need not fill whole pages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

# isort: off
from kvexact.kernels import device as _device
from kvexact.kernels import paged
from kvexact.kernels.errors import KernelInputError, KernelRejection

_device.settle()  # sets or clears TRITON_INTERPRET before triton is imported

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

# isort: on

MIN_ROWS = 16  # query rows per chunk-first program (a tl.dot M dimension)


@triton.jit
def _chunk_first_kernel(
    q_ptr, kc_ptr, vc_ptr, ctab_ptr, work_ptr, po_ptr, plse_ptr,
    scale, block_size,
    s_qb, s_qh, s_qd,
    s_kcb, s_kct, s_kch, s_kcd, s_vcb, s_vct, s_vch, s_vcd,
    s_ctc, s_ctp, s_pr, s_ph, s_pd, s_lr, s_lh,
    GROUP: tl.constexpr, DK: tl.constexpr, DV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_DK: tl.constexpr, BLOCK_DV: tl.constexpr, BLOCK_N: tl.constexpr,
    FP32_DOT: tl.constexpr, CAST_INT64: tl.constexpr,
):
    w = tl.program_id(0)
    tile = tl.program_id(1)
    kvh = tl.program_id(2)
    chunk = tl.load(work_ptr + 6 * w)
    tok_begin = tl.load(work_ptr + 6 * w + 1).to(tl.int32)  # token and sequence counts fit int32
    tok_end = tl.load(work_ptr + 6 * w + 2).to(tl.int32)
    seq_begin = tl.load(work_ptr + 6 * w + 3).to(tl.int32)
    seq_end = tl.load(work_ptr + 6 * w + 4).to(tl.int32)
    row_offset = tl.load(work_ptr + 6 * w + 5)
    r = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    seq = seq_begin + r // GROUP
    heads = kvh * GROUP + r % GROUP
    rmask = seq < seq_end
    hi = tl.where(tile * BLOCK_M < (seq_end - seq_begin) * GROUP, tok_end, tok_begin)

    dk = tl.arange(0, BLOCK_DK)
    dv = tl.arange(0, BLOCK_DV)
    q = tl.load(q_ptr + seq[:, None] * s_qb + heads[:, None] * s_qh + dk[None, :] * s_qd,
                mask=rmask[:, None] & (dk[None, :] < DK), other=0.0)
    if FP32_DOT:
        q = q.to(tl.float32)
    out, lse = paged._attend_tokens(q, ctab_ptr + chunk * s_ctc, s_ctp, tok_begin, hi, block_size, kc_ptr,
                                    vc_ptr, s_kcb, s_kct, s_kch, s_kcd, s_vcb, s_vct, s_vch, s_vcd, kvh, scale,
                                    dk, dv, BLOCK_M, BLOCK_DV, DK, DV, BLOCK_N, FP32_DOT, CAST_INT64)
    row = row_offset + seq - seq_begin
    tl.store(po_ptr + row[:, None] * s_pr + heads[:, None] * s_ph + dv[None, :] * s_pd, out,
             mask=rmask[:, None] & (dv[None, :] < DV))
    tl.store(plse_ptr + row * s_lr + heads * s_lh, lse, mask=rmask)


@dataclass(frozen=True)
class Chunk:
    """One node of a prefix tree of K/V chunks: its pool blocks, token count and covered sequences."""

    block_ids: tuple[int, ...]
    length_tokens: int
    seq_begin: int
    seq_end: int  # half-open


@dataclass(frozen=True)
class ChunkPlan:
    """Host metadata of one launch: chunk-first work items and each sequence's private (sequence-first) path.

    ``work`` rows are (chunk, token_begin, token_end, seq_begin, seq_end, row_offset) where the partial state
    of sequence s lands in row ``row_offset + s - seq_begin`` of a ``[slots * B, Hq, Dv]`` state buffer.
    ``partial_rows`` counts the partial states the chunk-first phase materializes. ``private_levels[i][s]``
    is sequence s's i-th private segment as (block ids, tokens); ``((), 0)`` where it has fewer segments.
    """

    work: tuple[tuple[int, int, int, int, int, int], ...]
    shared_slots: int
    partial_rows: int
    shared_chunks: tuple[int, ...]
    private_chunks: tuple[tuple[int, ...], ...]
    private_levels: tuple[tuple[tuple[tuple[int, ...], int], ...], ...] = field(default=())


def _reject(reason: KernelRejection, detail: str) -> None:
    raise KernelInputError(reason, detail)


def plan_chunks(chunks: Sequence[Chunk], num_seqs: int, block_size: int, num_blocks: int,
                threshold: int = 1, chunk_splits: int = 1) -> ChunkPlan:
    """Chunk-first work for chunks covering more than ``threshold`` sequences, the rest sequence-first.

    Invariant: every sequence's keys are the disjoint union of its shared partial ranges and its private
    rows; a shared chunk is cut into at most ``chunk_splits`` page-aligned token ranges.
    """
    if chunk_splits <= 0:
        _reject(KernelRejection.NON_POSITIVE_SPLITS, f"chunk_splits = {chunk_splits}")
    for c, ch in enumerate(chunks):
        if not 0 <= ch.seq_begin < ch.seq_end <= num_seqs:
            _reject(KernelRejection.BAD_COVERAGE, f"chunks[{c}] covers [{ch.seq_begin}, {ch.seq_end}) "
                                                  f"outside [0, {num_seqs})")
        if ch.length_tokens < 0:
            _reject(KernelRejection.NEGATIVE_LENGTH, f"chunks[{c}].length_tokens = {ch.length_tokens}")
        need = -(-ch.length_tokens // block_size)
        if len(ch.block_ids) < need:
            _reject(KernelRejection.BLOCK_TABLE_TOO_SHORT,
                    f"chunks[{c}] has {len(ch.block_ids)} blocks, {ch.length_tokens} tokens need {need}")
        for j, b in enumerate(ch.block_ids[:need]):
            if not 0 <= b < num_blocks:
                _reject(KernelRejection.BLOCK_ID_OUT_OF_RANGE, f"chunks[{c}].block_ids[{j}] = {b}")
    shared = [c for c, ch in enumerate(chunks) if ch.seq_end - ch.seq_begin > threshold]
    depth: dict[int, int] = {}
    private: list[tuple[int, ...]] = []
    for s in range(num_seqs):
        path = [c for c, ch in enumerate(chunks) if ch.seq_begin <= s < ch.seq_end]
        mine = [c for c in path if c in shared]
        if path[: len(mine)] != mine:
            _reject(KernelRejection.BAD_COVERAGE, f"sequence {s}: a private chunk precedes a shared one")
        for d, c in enumerate(mine):
            if depth.setdefault(c, d) != d:
                _reject(KernelRejection.BAD_COVERAGE, f"chunks[{c}] sits at different depths of its sequences")
        private.append(tuple(path[len(mine):]))
    work = []
    slots = 0
    partial_rows = 0
    for c in shared:
        ch = chunks[c]
        pages = -(-ch.length_tokens // block_size)
        per = max(1, -(-pages // chunk_splits)) * block_size
        ranges = [(b, min(b + per, ch.length_tokens)) for b in range(0, ch.length_tokens, per)] or [(0, 0)]
        for k, (lo, hi) in enumerate(ranges):
            slot = depth[c] * chunk_splits + k
            slots = max(slots, slot + 1)
            work.append((c, lo, hi, ch.seq_begin, ch.seq_end, slot * num_seqs + ch.seq_begin))
            partial_rows += ch.seq_end - ch.seq_begin
    segments = [_segments([chunks[c] for c in priv], block_size) for priv in private]
    levels = max([1, *(len(seg) for seg in segments)])
    empty: tuple[tuple[int, ...], int] = ((), 0)
    by_level = tuple(tuple(seg[i] if i < len(seg) else empty for seg in segments) for i in range(levels))
    return ChunkPlan(tuple(work), slots, partial_rows, tuple(shared), tuple(private), by_level)


def _segments(path: Sequence[Chunk], block_size: int) -> list[tuple[tuple[int, ...], int]]:
    """Consecutive chunks as (block ids, tokens) runs whose tokens are contiguous in their pages: a chunk
    that ends inside a page closes its run (the next chunk starts on a page of its own)."""
    out: list[tuple[tuple[int, ...], int]] = []
    ids: list[int] = []
    tokens = 0
    for ch in path:
        ids.extend(ch.block_ids[: -(-ch.length_tokens // block_size)])
        tokens += ch.length_tokens
        if ch.length_tokens % block_size:
            out.append((tuple(ids), tokens))
            ids, tokens = [], 0
    if tokens or not out:
        out.append((tuple(ids), tokens))
    return out


def chunk_first_partials(query, key_cache, value_cache, chunk_table, work, cover: int, scale: float, states_o,
                         states_lse, block_n: int | None = None) -> None:
    """Chunk-first phase: each work item writes the partial states of the rows it covers (no validation).
    ``cover`` is the most sequences one work item covers (known on the host: nothing is read back)."""
    if work.shape[0] == 0:
        return
    hq, dk = query.shape[1], query.shape[2]
    hkv, dv = key_cache.shape[2], value_cache.shape[3]
    group = hq // hkv
    row_bytes = paged._pow2(max(dk, dv), paged.MIN_DOT) * query.element_size()
    block_m = paged._pow2(min(cover * group, 64 if row_bytes <= 256 else 32), MIN_ROWS)
    grid = (work.shape[0], triton.cdiv(cover * group, block_m), hkv)
    _chunk_first_kernel[grid](
        query, key_cache, value_cache, chunk_table, work, states_o, states_lse,
        float(scale), key_cache.shape[1],
        *query.stride(), *key_cache.stride(), *value_cache.stride(), *chunk_table.stride(),
        *states_o.stride(), *states_lse.stride(),
        GROUP=group, DK=dk, DV=dv, BLOCK_M=block_m,
        BLOCK_DK=paged._pow2(dk, paged.MIN_DOT), BLOCK_DV=paged._pow2(dv, paged.MIN_DOT),
        BLOCK_N=block_n or paged.default_block_n(max(dk, dv), query.dtype), FP32_DOT=paged._fp32_dot(query.dtype),
        CAST_INT64=paged._INT64_ADDRESSING, num_stages=2,
    )


def _table(rows: Sequence[Sequence[int]], device) -> torch.Tensor:
    width = max([1, *(len(r) for r in rows)])
    return torch.tensor([list(r) + [0] * (width - len(r)) for r in rows] or [[0]], dtype=torch.int32,
                        device=device)


def _check_query(query, key_cache, value_cache):
    nb, bs, hkv, dk, dv = paged.check_cache_pair(key_cache, value_cache)
    paged._check_tensor("query", query, 3, (key_cache.dtype,), key_cache.device)
    paged._check_same("query", query.shape[2], dk, "head dim (must match key_cache)")
    if query.shape[1] % hkv:
        _reject(KernelRejection.HEAD_GROUP_MISMATCH, f"query has {query.shape[1]} heads, key_cache {hkv}")
    return nb, bs


def chunked_shared_attention(query, key_cache, value_cache, chunks: Sequence[Chunk], *, threshold: int = 1,
                             scale: float | None = None, chunk_splits: int = 1, private_splits: int = 1,
                             return_lse: bool = False, block_n: int | None = None):
    """ChunkAttention-style decode over a prefix tree of chunks (``chunks`` in tree order, parents first).

    Phase 1 (chunk-first): every chunk covering more than ``threshold`` sequences is attended by all of
    their query rows at once, writing one partial state per covered sequence. Phase 2 (sequence-first):
    each sequence's remaining private chunks go through paged decode, and its partial states are merged.
    ``threshold=0`` materializes every chunk (the Hydragen coordinate of 0x0BE). Returns ``out [B, Hq, Dv]``.
    """
    nb, bs = _check_query(query, key_cache, value_cache)
    if private_splits <= 0:
        _reject(KernelRejection.NON_POSITIVE_SPLITS, f"private_splits = {private_splits}")
    batch = query.shape[0]
    plan = plan_chunks(chunks, batch, bs, nb, threshold, chunk_splits)
    tables = [(_table([ids for ids, _ in level], query.device),
               torch.tensor([n for _, n in level], dtype=torch.int32, device=query.device))
              for level in plan.private_levels]
    (first_table, first_lens), *more = tables
    launch, output, lse = shared_launcher(query, key_cache, value_cache,
                                          _table([c.block_ids for c in chunks], query.device), list(plan.work),
                                          plan.shared_slots, first_table, first_lens, private_splits, scale,
                                          return_lse, block_n, more_suffixes=more)
    launch()
    return (output, lse) if return_lse else output


def shared_prefix_attention(query, key_cache, value_cache, prefix_block_ids, prefix_len: int,
                            suffix_block_table, suffix_lens, *, scale: float | None = None,
                            prefix_splits: int = 1, suffix_splits: int = 1, return_lse: bool = False,
                            validate: bool = True, block_n: int | None = None):
    """Hydragen-style decode: all B sequences share ``prefix_len`` tokens in ``prefix_block_ids`` (int32).

    The B x group query rows of each KV head attend to the prefix as one matrix problem (read once), each
    sequence's suffix goes through paged decode (``suffix_block_table``, ``suffix_lens``; 0 is allowed),
    and the two states are LSE-merged. Returns ``out [B, Hq, Dv]`` (and fp32 ``lse [B, Hq]``).
    """
    (nb, bs, _hkv, _dk, _dv, batch, _hq), _lens = paged.check_decode_inputs(
        query, key_cache, value_cache, suffix_block_table, suffix_lens, validate)
    paged._check_tensor("prefix_block_ids", prefix_block_ids, 1, (torch.int32,), key_cache.device)
    if prefix_len < 0:
        _reject(KernelRejection.NEGATIVE_LENGTH, f"prefix_len = {prefix_len}")
    if prefix_splits <= 0 or suffix_splits <= 0:
        _reject(KernelRejection.NON_POSITIVE_SPLITS, f"prefix_splits = {prefix_splits}, "
                                                     f"suffix_splits = {suffix_splits}")
    if validate:
        probe = Chunk(tuple(int(x) for x in prefix_block_ids.tolist()), prefix_len, 0, max(1, batch))
        plan_chunks([probe], max(1, batch), bs, nb, threshold=0)
    if batch == 0:
        empty = torch.empty((0, query.shape[1], value_cache.shape[3]), dtype=query.dtype, device=query.device)
        return (empty, torch.empty((0, query.shape[1]), device=query.device)) if return_lse else empty
    launch, output, lse = hydragen_launcher(query, key_cache, value_cache, prefix_block_ids, prefix_len,
                                            suffix_block_table, suffix_lens, prefix_splits=prefix_splits,
                                            suffix_splits=suffix_splits, scale=scale, return_lse=return_lse,
                                            block_n=block_n)
    launch()
    return (output, lse) if return_lse else output


def hydragen_launcher(query, key_cache, value_cache, prefix_block_ids, prefix_len: int, suffix_block_table,
                      suffix_lens, *, prefix_splits: int = 1, suffix_splits: int = 1, scale: float | None = None,
                      return_lse: bool = False, block_n: int | None = None):
    """:func:`shared_launcher` for the Hydragen schedule of :func:`shared_prefix_attention` (unchecked
    inputs, batch > 0): the prefix cut into ``prefix_splits`` page-aligned ranges, each one work item."""
    batch = query.shape[0]
    bs = key_cache.shape[1]
    pages = -(-prefix_len // bs)
    per = max(1, -(-pages // prefix_splits)) * bs
    work = [(0, lo, min(lo + per, prefix_len), 0, batch, k * batch) for k, lo in enumerate(range(0, prefix_len, per))]
    chunk_table = prefix_block_ids.reshape(1, -1) if prefix_block_ids.numel() else None
    return shared_launcher(query, key_cache, value_cache, chunk_table, work, prefix_splits, suffix_block_table,
                           suffix_lens, suffix_splits, scale, return_lse, block_n)


def shared_launcher(query, key_cache, value_cache, chunk_table, work_rows, shared_slots, suffix_table,
                    suffix_lens, suffix_splits, scale=None, return_lse=False, block_n=None, more_suffixes=()):
    """Allocate the partial states (unused slots empty: lse -inf), the work items and the output now; return
    ``(launch, output, lse)``. ``launch()`` runs the chunk-first partials into slots [0, shared_slots), paged
    decode of the private/suffix rows into the next ``suffix_splits`` slots (and of each further
    ``(table, lens)`` level of ``more_suffixes`` into ``suffix_splits`` slots more), and one LSE merge per
    (sequence, head): kernels only, no allocation, host copy or synchronization (timeable, graph-capturable).
    """
    batch, hq, dk = query.shape
    dv = value_cache.shape[3]
    dev = query.device
    suffixes = [(suffix_table, suffix_lens), *more_suffixes]
    slots = shared_slots + suffix_splits * len(suffixes)
    states_o = torch.zeros((slots, batch, hq, dv), dtype=torch.float32, device=dev)
    states_lse = torch.full((slots, batch, hq), -math.inf, dtype=torch.float32, device=dev)
    scale = 1.0 / math.sqrt(dk) if scale is None else float(scale)
    shared_o = states_o[:shared_slots].reshape(shared_slots * batch, hq, dv)
    shared_lse = states_lse[:shared_slots].reshape(shared_slots * batch, hq)
    has_shared = bool(work_rows) and chunk_table is not None
    work = torch.tensor(work_rows, dtype=torch.int64, device=dev) if has_shared else None
    cover = max((row[4] - row[3] for row in work_rows), default=0)
    output = torch.empty((batch, hq, dv), dtype=query.dtype, device=dev)
    lse = torch.empty((batch, hq), dtype=torch.float32, device=dev) if return_lse else None

    def launch() -> None:
        if work is not None:
            chunk_first_partials(query, key_cache, value_cache, chunk_table, work, cover, scale, shared_o,
                                 shared_lse, block_n)
        for i, (table, lens) in enumerate(suffixes):
            lo = shared_slots + i * suffix_splits
            paged.decode_partials(query, key_cache, value_cache, table, lens, scale, suffix_splits,
                                  states_o[lo:lo + suffix_splits], states_lse[lo:lo + suffix_splits], block_n)
        paged.merge_states(states_o, states_lse, output, lse)

    return launch, output, lse

