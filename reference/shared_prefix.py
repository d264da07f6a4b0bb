"""Exact shared-prefix attention in binary64 (seed 0x0BA-0x0BE, 0x0BI): the tree, the schedules, the ledgers.

Three schedules evaluate the same immutable tree (0x0BE): the monolithic row over each sequence's
concatenated path; the Hydragen coordinate (each chunk attended by all the queries it covers, emitting a
normalized output and its LSE, merged per sequence); and the ChunkAttention coordinate (shared chunks
materialize (u, m, l) partial rows chunk-first, private chunks are folded in sequence-first).
Invariant: every sequence's path covers its legal keys exactly once, so all three agree up to rounding;
an empty partition is a two-sided identity of the merge, never a state with m = -inf.

The seed does not give 0x0BE's Q/K/V values, so :func:`draw_fixture` draws them from a seeded generator
(docs/design.md, "Seed fixtures that the seed only summarizes"); the seed's tree and widths are fixtures in
:mod:`kvexact.reference.labs.shared_prefix`.
"""

from __future__ import annotations

import enum
import hashlib
import math
import random
from collections.abc import Sequence

import attrs

from kvexact.reference import formulas_seed as F
from kvexact.reference.rejections import Rejected
from kvexact.reference.traversal import partial_state_bytes


class SharedPrefixRejection(enum.Enum):
    BAD_COVERAGE = "a chunk's sequence range is empty or outside the batch"
    NOT_NESTED = "a chunk's range is not nested inside the range of every chunk before it that it overlaps"
    UNCOVERED_SEQUENCE = "a sequence is covered by no chunk"
    WIDTH_MISMATCH = "a query, key or value row has the wrong width"
    ROW_COUNT_MISMATCH = "a chunk's K or V rows differ from its declared row count"
    STALE_SNAPSHOT = "the tree or its K/V changed after the chunk-first metadata was built"
    SEQUENCE_ORDER_CHANGED = "sequences were reordered without rebuilding the coverage intervals"
    SCALE_MISMATCH = "a partition was scored with another scale than the snapshot's 1/sqrt(d_qk)"
    INVALID_STATE = "a state marked valid has no mass, no keys or an infinite maximum"
    STATE_WIDTH_MISMATCH = "two states of different output widths were merged"
    PARTIAL_ROW_OUT_OF_COVERAGE = "a partial row was read for a sequence its chunk does not cover"
    THRESHOLD_MISMATCH = "the partial buffer was built at another shared/private threshold"
    NEGATIVE_SIZE = "a length, width or byte size is negative"
    NON_POSITIVE_CHUNK = "the chunk size is not positive"
    EMPTY_BATCH = "the workload has no sequences"
    NON_FINITE_LSE = "an (LSE, O) pair of an empty partition reached the merge (branch on valid first)"


@attrs.frozen
class TreeChunk:
    """One chunk of the prefix tree: ``rows`` K/V rows covering sequences ``[seq_begin, seq_end)``."""

    name: str
    rows: int
    seq_begin: int
    seq_end: int

    @property
    def coverage(self) -> int:
        return self.seq_end - self.seq_begin


def check_tree(tree: Sequence[TreeChunk], num_seqs: int) -> None:
    """Rejects a range outside the batch, ranges that overlap without nesting, or an uncovered sequence."""
    for i, c in enumerate(tree):
        if not 0 <= c.seq_begin < c.seq_end <= num_seqs:
            raise Rejected(SharedPrefixRejection.BAD_COVERAGE, f"{c.name}: [{c.seq_begin}, {c.seq_end})")
        for p in tree[:i]:
            overlap = c.seq_begin < p.seq_end and p.seq_begin < c.seq_end
            if overlap and not (p.seq_begin <= c.seq_begin and c.seq_end <= p.seq_end):
                raise Rejected(SharedPrefixRejection.NOT_NESTED, f"{c.name} overlaps {p.name} without nesting")
    for s in range(num_seqs):
        if not path_of(tree, s):
            raise Rejected(SharedPrefixRejection.UNCOVERED_SEQUENCE, f"sequence {s}")


def path_of(tree: Sequence[TreeChunk], seq: int) -> list[int]:
    """Indices of the chunks on sequence ``seq``'s path, root first."""
    return [i for i, c in enumerate(tree) if c.seq_begin <= seq < c.seq_end]


@attrs.frozen
class Fixture:
    """Queries ``q[i]`` (width d_qk) of the sequences ``seq_ids`` in batch order, and each chunk's K rows
    (d_qk) and V rows (d_v), all binary64. Coverage intervals index batch positions, not sequence ids."""

    tree: tuple[TreeChunk, ...]
    q: tuple[tuple[float, ...], ...]
    k: tuple[tuple[tuple[float, ...], ...], ...]
    v: tuple[tuple[tuple[float, ...], ...], ...]
    d_qk: int
    d_v: int
    seq_ids: tuple[int, ...] = ()

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.d_qk)


def draw_fixture(tree: Sequence[TreeChunk], num_seqs: int, d_qk: int, d_v: int, seed: int) -> Fixture:
    """Standard-normal Q/K/V for ``tree`` from ``random.Random(seed)`` (the seed leaves them unstated)."""
    check_tree(tree, num_seqs)
    if d_qk < 0 or d_v < 0:
        raise Rejected(SharedPrefixRejection.NEGATIVE_SIZE, f"d_qk={d_qk}, d_v={d_v}")
    rng = random.Random(seed)

    def rows(n: int, width: int) -> tuple[tuple[float, ...], ...]:
        return tuple(tuple(rng.gauss(0.0, 1.0) for _ in range(width)) for _ in range(n))

    q = rows(num_seqs, d_qk)
    k = tuple(rows(c.rows, d_qk) for c in tree)
    v = tuple(rows(c.rows, d_v) for c in tree)
    return Fixture(tuple(tree), q, k, v, d_qk, d_v, tuple(range(num_seqs)))


def check_fixture(fx: Fixture) -> None:
    """Rejects a bad tree, a row of the wrong width, or a chunk whose K/V rows differ from its row count."""
    check_tree(fx.tree, len(fx.q))
    for s, q in enumerate(fx.q):
        if len(q) != fx.d_qk:
            raise Rejected(SharedPrefixRejection.WIDTH_MISMATCH, f"query {s} has width {len(q)}, d_qk={fx.d_qk}")
    for c, chunk in enumerate(fx.tree):
        if len(fx.k[c]) != chunk.rows or len(fx.v[c]) != chunk.rows:
            raise Rejected(SharedPrefixRejection.ROW_COUNT_MISMATCH,
                           f"{chunk.name}: {len(fx.k[c])} K and {len(fx.v[c])} V rows for {chunk.rows}")
        for what, rows, width in (("K", fx.k[c], fx.d_qk), ("V", fx.v[c], fx.d_v)):
            if any(len(r) != width for r in rows):
                raise Rejected(SharedPrefixRejection.WIDTH_MISMATCH, f"{chunk.name}: a {what} row is not {width} wide")


def snapshot_digest(fx: Fixture) -> str:
    """SHA-256 over the tree and its K/V rows (not the queries): what chunk-first metadata is bound to."""
    text = repr((fx.tree, fx.k, fx.v, fx.d_qk, fx.d_v))
    return hashlib.sha256(text.encode()).hexdigest()


@attrs.frozen
class PartitionState:
    """0x0BA's canonical state S_p = (valid, m, l, u, c): max score, mass, unnormalized output, key count."""

    valid: bool
    m: float
    l: float
    u: tuple[float, ...]
    c: int

    def lse_output(self) -> tuple[float, tuple[float, ...]]:
        """Hydragen's coordinates LSE = m + log l, O = u / l (valid states only)."""
        if not self.valid:
            raise ValueError("an empty partition has no LSE/output coordinates")
        return self.m + math.log(self.l), tuple(x / self.l for x in self.u)


def empty_state(d_v: int) -> PartitionState:
    return PartitionState(False, 0.0, 0.0, (0.0,) * d_v, 0)


def partition_state(q: Sequence[float], keys: Sequence[Sequence[float]], values: Sequence[Sequence[float]],
                    scale: float, d_v: int) -> PartitionState:
    """State of one query row over one key partition; no keys gives the empty (identity) state."""
    if not keys:
        return empty_state(d_v)
    scores = [scale * sum(a * b for a, b in zip(q, k, strict=True)) for k in keys]
    m = max(scores)
    w = [math.exp(s - m) for s in scores]
    u = tuple(sum(wi * v[j] for wi, v in zip(w, values, strict=True)) for j in range(d_v))
    return PartitionState(True, m, sum(w), u, len(keys))


def check_state(state: PartitionState) -> None:
    """A valid state has positive finite mass, at least one key and a finite maximum."""
    if state.valid and not (state.l > 0 and math.isfinite(state.l) and state.c > 0 and math.isfinite(state.m)):
        raise Rejected(SharedPrefixRejection.INVALID_STATE, f"valid state with m={state.m}, l={state.l}, c={state.c}")


def merge_states(a: PartitionState, b: PartitionState) -> PartitionState:
    """Merge of two disjoint partitions; the empty state is a two-sided identity (branch before any exp)."""
    check_state(a)
    check_state(b)
    if len(a.u) != len(b.u):
        raise Rejected(SharedPrefixRejection.STATE_WIDTH_MISMATCH, f"widths {len(a.u)} and {len(b.u)}")
    if not a.valid:
        return b
    if not b.valid:
        return a
    m = max(a.m, b.m)
    ea, eb = math.exp(a.m - m), math.exp(b.m - m)
    u = tuple(x * ea + y * eb for x, y in zip(a.u, b.u, strict=True))
    return PartitionState(True, m, a.l * ea + b.l * eb, u, a.c + b.c)


def finalize(state: PartitionState) -> tuple[float, ...]:
    """The attention row u / l; an empty row is all zeros."""
    return tuple(x / state.l for x in state.u) if state.valid else (0.0,) * len(state.u)


def merge_lse(parts: Sequence[tuple[float, Sequence[float]]]) -> tuple[float, ...]:
    """Hydragen's merge of (LSE, O) pairs: subtract the max LSE, exponentiate, weight the outputs.

    Only valid partitions have LSE coordinates (0x0BA): a non-finite LSE is refused by name, and a row with
    no partition at all is an uncovered sequence."""
    if not parts:
        raise Rejected(SharedPrefixRejection.UNCOVERED_SEQUENCE, "no (LSE, O) pair to merge")
    bad = [i for i, (lse, _) in enumerate(parts) if not math.isfinite(lse)]
    if bad:
        raise Rejected(SharedPrefixRejection.NON_FINITE_LSE, f"parts {bad}")
    top = max(lse for lse, _ in parts)
    w = [math.exp(lse - top) for lse, _ in parts]
    total = sum(w)
    width = len(parts[0][1])
    return tuple(sum(wi * o[j] for wi, (_, o) in zip(w, parts, strict=True)) / total for j in range(width))


def _scale(fx: Fixture, scale: float | None) -> float:
    check_fixture(fx)
    if scale is not None and scale != fx.scale:
        raise Rejected(SharedPrefixRejection.SCALE_MISMATCH, f"scale {scale} != 1/sqrt({fx.d_qk})")
    return fx.scale


def monolithic(fx: Fixture, scale: float | None = None) -> list[tuple[float, ...]]:
    """Reference schedule: one attention row per sequence over its concatenated path."""
    _scale(fx, scale)
    out = []
    for s, q in enumerate(fx.q):
        keys = [row for c in path_of(fx.tree, s) for row in fx.k[c]]
        values = [row for c in path_of(fx.tree, s) for row in fx.v[c]]
        out.append(finalize(partition_state(q, keys, values, fx.scale, fx.d_v)))
    return out


def hydragen(fx: Fixture, scale: float | None = None) -> list[tuple[float, ...]]:
    """Hydragen coordinate: each chunk attended by the queries it covers, (LSE, O) merged per sequence."""
    _scale(fx, scale)
    per_seq: list[list[tuple[float, tuple[float, ...]]]] = [[] for _ in fx.q]
    for c, chunk in enumerate(fx.tree):
        for s in range(chunk.seq_begin, chunk.seq_end):  # one batched problem: Q[begin:end] x chunk c
            state = partition_state(fx.q[s], fx.k[c], fx.v[c], fx.scale, fx.d_v)
            if state.valid:
                per_seq[s].append(state.lse_output())
    return [merge_lse(parts) for parts in per_seq]


@attrs.frozen
class ChunkFirstMetadata:
    """0x0BD's host metadata: begins, ends and partial-row offsets of the materialized chunks, and the
    snapshot it was built for (tree digest, sequence order, threshold)."""

    chunks: tuple[int, ...]
    begins: tuple[int, ...]
    ends: tuple[int, ...]
    offsets: tuple[int, ...]
    partial_rows: int
    threshold: int = 1
    digest: str = ""
    seq_ids: tuple[int, ...] = ()


def chunk_first_metadata(tree: Sequence[TreeChunk], threshold: int) -> ChunkFirstMetadata:
    """Chunks covering more than ``threshold`` sequences, with their partial-row offsets."""
    chosen, begins, ends, offsets = [], [], [], []
    rows = 0
    for i, c in enumerate(tree):
        if c.coverage <= threshold:
            continue
        chosen.append(i)
        begins.append(c.seq_begin)
        ends.append(c.seq_end)
        offsets.append(rows)
        rows += c.coverage
    return ChunkFirstMetadata(tuple(chosen), tuple(begins), tuple(ends), tuple(offsets), rows, threshold)


def bind_chunk_first(fx: Fixture, threshold: int = 1) -> ChunkFirstMetadata:
    """Chunk-first metadata bound to ``fx``'s snapshot digest and sequence order."""
    check_fixture(fx)
    meta = chunk_first_metadata(fx.tree, threshold)
    return attrs.evolve(meta, digest=snapshot_digest(fx), seq_ids=fx.seq_ids)


def partial_row(partial: Sequence[PartitionState], meta: ChunkFirstMetadata, chunk: int, seq: int) -> PartitionState:
    """The materialized state of ``chunk`` for batch position ``seq``; only covered positions have one."""
    i = meta.chunks.index(chunk)
    if not meta.begins[i] <= seq < meta.ends[i]:
        raise Rejected(SharedPrefixRejection.PARTIAL_ROW_OUT_OF_COVERAGE,
                       f"chunk {chunk} covers [{meta.begins[i]}, {meta.ends[i]}), not {seq}")
    return partial[meta.offsets[i] + seq - meta.begins[i]]


def chunk_attention(fx: Fixture, threshold: int = 1, meta: ChunkFirstMetadata | None = None,
                    scale: float | None = None) -> tuple[list[tuple[float, ...]], list[PartitionState]]:
    """ChunkAttention coordinate: materialize shared (u, m, l) rows chunk-first, fold sequence-first.

    ``meta`` (default: built now) must belong to this snapshot, sequence order and threshold. Returns the
    outputs and the partial buffer (one state per materialized (chunk, sequence) row).
    """
    _scale(fx, scale)
    meta = bind_chunk_first(fx, threshold) if meta is None else meta
    if meta.digest != snapshot_digest(fx):
        raise Rejected(SharedPrefixRejection.STALE_SNAPSHOT, "metadata digest differs from the tree's")
    if meta.seq_ids != fx.seq_ids:
        raise Rejected(SharedPrefixRejection.SEQUENCE_ORDER_CHANGED, f"{meta.seq_ids} became {fx.seq_ids}")
    if meta.threshold != threshold:
        raise Rejected(SharedPrefixRejection.THRESHOLD_MISMATCH, f"built at {meta.threshold}, used at {threshold}")
    partial: list[PartitionState] = []
    for c in meta.chunks:
        chunk = fx.tree[c]
        for s in range(chunk.seq_begin, chunk.seq_end):
            partial.append(partition_state(fx.q[s], fx.k[c], fx.v[c], fx.scale, fx.d_v))
    out = []
    for s, q in enumerate(fx.q):
        state = empty_state(fx.d_v)
        for c in path_of(fx.tree, s):
            if c in meta.chunks:
                part = partial_row(partial, meta, c, s)
            else:
                part = partition_state(q, fx.k[c], fx.v[c], fx.scale, fx.d_v)
            state = merge_states(state, part)
        out.append(finalize(state))
    return out, partial


def max_abs_difference(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> float:
    return max(abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True))


@attrs.frozen
class SharedPrefixLedger:
    """0x0BE's work and payload ledger (a conceptual K/V payload model, not a latency prediction)."""

    logical_pairs: int
    unique_rows: int
    saved_reads: int
    kv_row_bytes: int
    baseline_kv_bytes: int
    shared_kv_bytes: int
    partial_rows: int
    partial_row_bytes: int
    partial_buffer_bytes: int


def ledger(tree: Sequence[TreeChunk], num_seqs: int, d_qk: int, d_v: int, kv_elem_bytes: int = 2,
           out_elem_bytes: int = 2, state_bytes: int = 4, threshold: int = 1) -> SharedPrefixLedger:
    """N_logical = sum over paths of T_c; N_physical = sum of T_c; M_partial = N_partial (d_v b_O + 2 b_state)."""
    check_tree(tree, num_seqs)
    if min(d_qk, d_v, kv_elem_bytes, out_elem_bytes, state_bytes) < 0:
        raise Rejected(SharedPrefixRejection.NEGATIVE_SIZE, "a width or byte size is negative")
    logical = F.logical_pairs(path_rows=[[tree[c].rows for c in path_of(tree, s)] for s in range(num_seqs)])
    unique = F.physical_kv(chunk_rows=[c.rows for c in tree])
    row_bytes = (d_qk + d_v) * kv_elem_bytes
    partial_rows = chunk_first_metadata(tree, threshold).partial_rows
    partial_row_bytes = d_v * out_elem_bytes + 2 * state_bytes
    return SharedPrefixLedger(logical, unique, F.saved_reads(logical_pairs=logical, physical_kv=unique), row_bytes,
                              logical * row_bytes, unique * row_bytes, partial_rows, partial_row_bytes,
                              partial_state_bytes(partial_count=partial_rows, value_width=d_v,
                                                  output_scalar_bytes=out_elem_bytes, state_scalar_bytes=state_bytes))


@attrs.frozen
class RegularPrefixLedger:
    """0x0BI's ledger for one shared prefix of S tokens and private suffixes U_r, at chunk size P_c."""

    logical_rows: int
    unique_rows: int
    saved_rows: int
    baseline_bytes: int
    shared_bytes: int
    saved_bytes: int
    ordinary_chunks: int
    shared_chunks: int
    partial_rows: int
    partial_bytes: int


def regular_prefix_ledger(shared_tokens: int, suffix_tokens: Sequence[int], row_bytes: int, chunk_tokens: int,
                          d_v: int, out_elem_bytes: int = 2, state_bytes: int = 4) -> RegularPrefixLedger:
    """N_logical = B S + sum U_r, N_unique = S + sum U_r; chunk counts and partial rows at size P_c."""
    batch = len(suffix_tokens)
    if batch == 0:
        raise Rejected(SharedPrefixRejection.EMPTY_BATCH, "no suffixes given")
    if chunk_tokens <= 0:
        raise Rejected(SharedPrefixRejection.NON_POSITIVE_CHUNK, f"chunk size {chunk_tokens}")
    if min(shared_tokens, row_bytes, d_v, out_elem_bytes, state_bytes, *suffix_tokens) < 0:
        raise Rejected(SharedPrefixRejection.NEGATIVE_SIZE, "a length, width or byte size is negative")
    logical = batch * shared_tokens + sum(suffix_tokens)
    unique = shared_tokens + sum(suffix_tokens)

    def cdiv(a: int) -> int:
        return -(-a // chunk_tokens)

    partial_rows = batch * cdiv(shared_tokens)
    return RegularPrefixLedger(
        logical, unique, logical - unique, logical * row_bytes, unique * row_bytes, (logical - unique) * row_bytes,
        sum(cdiv(shared_tokens + u) for u in suffix_tokens), cdiv(shared_tokens) + sum(cdiv(u) for u in suffix_tokens),
        partial_rows, partial_rows * (d_v * out_elem_bytes + 2 * state_bytes))
