"""Kernel traversal ledgers (0x0A), the shared-prefix chunk-size ledger (0x0BI) and the vAttention
page-group staircase (0x0BJ).

Allocator blocks, kernel blocks and reduction partitions are three levels: a kernel table is the
allocator table expanded by ``q = P_a / P_k`` (:mod:`kvexact.reference.blockmap`), traversal counts
kernel-visible blocks, partitions count independent partial states. Invariant of
:func:`decode_traversal`: every step reads only request-visible rows, and never more rows than the
block's descriptor has materialized.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import attrs

from kvexact.reference.blockmap import expand_block_table, expansion_factor
from kvexact.reference.formulas import formula
from kvexact.reference.handles import BlockHandle
from kvexact.reference.rejections import Rejected
from kvexact.reference.translate import KVSnapshot, TranslateRejection

KIB = 1024
MIB = 1024 * 1024
PINNED_V1_KERNEL_BLOCK_SIZES = (8, 16, 32)  # 0x0AA: the pinned V1 launcher instantiates only these
LISTED_KERNEL_BLOCK_SIZES = (8, 16, 32, 64, 128)  # the five geometry rows (reconstruction, see below)


class TraversalRejection(enum.Enum):
    NON_POSITIVE_SIZE = "a block, partition, chunk, page-group, row or warp size is not positive"
    NEGATIVE_LENGTH = "a context, prefix or suffix length is negative"
    PARTITION_NOT_MULTIPLE = "the kernel block size must divide the partition size"
    UNSUPPORTED_KERNEL_BLOCK = "the pinned launcher does not instantiate this kernel block size"
    PAGE_GROUP_NOT_MULTIPLE = "the page-group size is not a multiple of the tensor row bytes"
    EMPTY_BATCH = "a ledger over a batch needs at least one request"
    SUFFIX_COUNT_MISMATCH = "one private suffix length per batch row is required"
    READ_PAST_VISIBLE = "a traversal step would read rows beyond the request's context"
    READ_PAST_MATERIALIZED = "a traversal step would read rows the block has not materialized"
    PADDING_CELL_READ = "a ragged table's padding cell was read as a block"


def _positive(value: Any, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise Rejected(TraversalRejection.NON_POSITIVE_SIZE, f"{what}={value!r}")


def _non_negative(value: Any, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise Rejected(TraversalRejection.NEGATIVE_LENGTH, f"{what}={value!r}")


# ---------------------------------------------------------------- formulas (0x0A)


@formula("kernel.seq_blocks", units="kernel blocks", convention="kernel-visible block-table traversal of one "
         "row", location="0x0A")
def seq_blocks(ops, context_tokens, kernel_block_tokens):
    return ops.ceildiv(context_tokens, kernel_block_tokens)


@formula("kernel.partitions", units="partitions", convention="long-context reduction partitions of one row",
         location="0x0A")
def partitions(ops, context_tokens, partition_tokens):
    return ops.ceildiv(context_tokens, partition_tokens)


@formula("kernel.blocks_per_partition", units="kernel blocks/partition", convention="P_k divides P_part",
         location="0x0A")
def blocks_per_partition(ops, partition_tokens, kernel_block_tokens):
    return ops.floordiv(partition_tokens, kernel_block_tokens)


@formula("kernel.thread_group_size", units="threads", convention="pinned vLLM template: max(warp / BLOCK_SIZE, "
         "1), integer division", location="0x0AA")
def thread_group_size(ops, warp_size, kernel_block_tokens):
    return ops.maximum(ops.floordiv(warp_size, kernel_block_tokens), 1)


@formula("kernel.tokens_per_thread_group", units="tokens", convention="pinned vLLM template: "
         "ceil(BLOCK_SIZE / warp)", location="0x0AA")
def tokens_per_thread_group(ops, kernel_block_tokens, warp_size):
    return ops.ceildiv(kernel_block_tokens, warp_size)


@formula("kernel.value_vector_width", units="scalars", convention="pinned vLLM template: min(16 / sizeof(scalar), "
         "BLOCK_SIZE)", location="0x0AA")
def value_vector_width(ops, scalar_bytes, kernel_block_tokens):
    return ops.minimum(ops.floordiv(16, scalar_bytes), kernel_block_tokens)


@formula("kernel.dense_table_cells", units="table cells", convention="dense staging table: B rows x n_max "
         "columns", location="0x0AB")
def dense_table_cells(ops, batch_rows, max_blocks):
    return batch_rows * max_blocks


@formula("kernel.used_table_cells", units="table cells", convention="sum of per-request kernel blocks",
         location="0x0AB")
def used_table_cells(ops, blocks_per_request):
    return ops.total(blocks_per_request)


@formula("kernel.padded_table_cells", units="table cells", convention="dense minus used", location="0x0AB")
def padded_table_cells(ops, batch_rows, max_blocks, blocks_per_request):
    return batch_rows * max_blocks - ops.total(blocks_per_request)


@formula("kernel.expanded_block_id", units="kernel block id", convention="P_a = q P_k; allocator id a -> "
         "a q + i for i < q", location="0x0AC")
def expanded_block_id(ops, allocator_block_id, q, i):
    return allocator_block_id * q + i


# ---------------------------------------------------------------- formulas (0x0BI, 0x0BJ)


@formula("chunk.logical_rows", units="K/V rows", convention="ordinary per-sequence execution: B S + sum U_r",
         location="0x0BI")
def chunk_logical_rows(ops, batch_rows, shared_tokens, suffix_tokens):
    return batch_rows * shared_tokens + ops.total(suffix_tokens)


@formula("chunk.unique_rows", units="K/V rows", convention="idealized shared-prefix schedule: S + sum U_r",
         location="0x0BI")
def chunk_unique_rows(ops, shared_tokens, suffix_tokens):
    return shared_tokens + ops.total(suffix_tokens)


@formula("chunk.saved_rows", units="K/V rows", convention="(B - 1) S; independent of chunk size",
         location="0x0BI")
def chunk_saved_rows(ops, batch_rows, shared_tokens):
    return (batch_rows - 1) * shared_tokens


@formula("chunk.ordinary_chunks", units="chunks", convention="sum over rows of ceil((S + U_r) / P_c)",
         location="0x0BI")
def ordinary_chunks(ops, shared_tokens, suffix_tokens, chunk_tokens):
    return ops.total(ops.ceildiv(shared_tokens + u, chunk_tokens) for u in suffix_tokens)


@formula("chunk.shared_chunks", units="chunks", convention="ceil(S / P_c) + sum ceil(U_r / P_c)",
         location="0x0BI")
def shared_chunks(ops, shared_tokens, suffix_tokens, chunk_tokens):
    return ops.ceildiv(shared_tokens, chunk_tokens) + ops.total(ops.ceildiv(u, chunk_tokens) for u in suffix_tokens)


@formula("chunk.partial_states", units="partial states", convention="every shared chunk covers all B queries "
         "and is materialized separately", location="0x0BI")
def partial_states(ops, batch_rows, shared_tokens, chunk_tokens):
    return batch_rows * ops.ceildiv(shared_tokens, chunk_tokens)


@formula("chunk.partial_state_bytes", units="bytes", convention="N_partial (d_v b_O + 2 b_state)",
         location="0x0BE, 0x0BI")
def partial_state_bytes(ops, partial_count, value_width, output_scalar_bytes, state_scalar_bytes):
    return partial_count * (value_width * output_scalar_bytes + 2 * state_scalar_bytes)


@formula("vmm.page_group_tokens", units="tokens/page group", convention="G / B_tensor-row (P_tokens of 0x06A, P_G of "
         "0x0BJ), when divisible", location="0x06A, 0x0BJ")
def page_group_tokens(ops, page_group_bytes, tensor_row_bytes):
    return ops.floordiv(page_group_bytes, tensor_row_bytes)


@formula("vmm.page_groups", units="page groups", convention="ceil(T / P_G) for one per-layer K or V tensor "
         "(N_r,pages of 0x06A)", location="0x06A, 0x0BJ")
def page_groups(ops, context_tokens, group_tokens):
    return ops.ceildiv(context_tokens, group_tokens)


@formula("vmm.page_group_waste_bytes", units="bytes", convention="N_G G - T B_tensor-row", location="0x0BJ")
def page_group_waste_bytes(ops, group_count, page_group_bytes, context_tokens, tensor_row_bytes):
    return group_count * page_group_bytes - context_tokens * tensor_row_bytes


# ---------------------------------------------------------------- 0x0A ledgers


@attrs.frozen
class KernelGeometry:
    """One row of the BLOCK_SIZE-derived geometry table (0x0AA)."""

    kernel_block_tokens: int
    seq_blocks: int
    partitions: int
    blocks_per_partition: int
    thread_group_size: int
    tokens_per_thread_group: int
    value_vector_width: int
    instantiated_by_pinned_v1: bool


def kernel_geometry(context_tokens: int, kernel_block_tokens: int, partition_tokens: int = 512,
                    warp_size: int = 32, scalar_bytes: int = 2) -> KernelGeometry:
    """The paged-attention template's derived geometry for one BLOCK_SIZE (vLLM pinned source, 0x0AA)."""
    _non_negative(context_tokens, "context_tokens")
    for value, what in ((kernel_block_tokens, "kernel_block_tokens"), (partition_tokens, "partition_tokens"),
                        (warp_size, "warp_size"), (scalar_bytes, "scalar_bytes")):
        _positive(value, what)
    if partition_tokens % kernel_block_tokens:
        raise Rejected(TraversalRejection.PARTITION_NOT_MULTIPLE,
                       f"P_k={kernel_block_tokens} does not divide P_part={partition_tokens}")
    return KernelGeometry(
        kernel_block_tokens=kernel_block_tokens,
        seq_blocks=seq_blocks(context_tokens=context_tokens, kernel_block_tokens=kernel_block_tokens),
        partitions=partitions(context_tokens=context_tokens, partition_tokens=partition_tokens),
        blocks_per_partition=blocks_per_partition(partition_tokens=partition_tokens,
                                                  kernel_block_tokens=kernel_block_tokens),
        thread_group_size=thread_group_size(warp_size=warp_size, kernel_block_tokens=kernel_block_tokens),
        tokens_per_thread_group=tokens_per_thread_group(kernel_block_tokens=kernel_block_tokens, warp_size=warp_size),
        value_vector_width=value_vector_width(scalar_bytes=scalar_bytes, kernel_block_tokens=kernel_block_tokens),
        instantiated_by_pinned_v1=kernel_block_tokens in PINNED_V1_KERNEL_BLOCK_SIZES,
    )


def geometry_table(context_tokens: int = 2049, sizes: Sequence[int] = LISTED_KERNEL_BLOCK_SIZES,
                   **kwargs: int) -> list[KernelGeometry]:
    """0x0AA's table for T = 2049, P_part = 512, warp 32, FP16.

    Reconstruction: the seed's rows were lost; its five rows are taken to be the listed sizes
    8, 16, 32, 64, 128 (the pinned V1 launcher instantiates only 8, 16 and 32).
    """
    return [kernel_geometry(context_tokens, p, **kwargs) for p in sizes]


def require_launchable(kernel_block_tokens: int) -> None:
    """Reject a kernel block size the pinned V1 launcher does not instantiate."""
    if kernel_block_tokens not in PINNED_V1_KERNEL_BLOCK_SIZES:
        raise Rejected(TraversalRejection.UNSUPPORTED_KERNEL_BLOCK,
                       f"{kernel_block_tokens} not in {PINNED_V1_KERNEL_BLOCK_SIZES}")


@attrs.frozen
class KernelDispatch:
    """One kernel-block dispatch decision for an allocator block size (0x0AC, 0x0BL)."""

    allocator_block_tokens: int
    outcome: str  # "selected", "fallback" or "rejected"
    reason: str  # a stable, low-cardinality reason name
    kernel_block_tokens: int | None  # None when rejected


def dispatch_kernel_block(allocator_block_tokens: int,
                          instantiated: Sequence[int] = PINNED_V1_KERNEL_BLOCK_SIZES) -> KernelDispatch:
    """``selected`` when the launcher instantiates P_a itself; ``fallback`` to the largest instantiated P_k
    that divides P_a (the allocator block is split, P_a = q P_k); ``rejected`` when none divides it (a
    kernel block larger than the allocator block is never a free mapping)."""
    _positive(allocator_block_tokens, "allocator_block_tokens")
    if allocator_block_tokens in instantiated:
        return KernelDispatch(allocator_block_tokens, "selected", "allocator_block_instantiated",
                              allocator_block_tokens)
    divisors = [p for p in instantiated if allocator_block_tokens % p == 0]
    if divisors:
        return KernelDispatch(allocator_block_tokens, "fallback", "split_allocator_block", max(divisors))
    return KernelDispatch(allocator_block_tokens, "rejected", TraversalRejection.UNSUPPORTED_KERNEL_BLOCK.name.lower(),
                          None)


@attrs.frozen
class RaggedTableLedger:
    """Dense versus used versus padded block-table cells of a batch (0x0AB)."""

    kernel_block_tokens: int
    blocks_per_request: tuple[int, ...]
    max_blocks: int
    dense_cells: int
    used_cells: int
    padded_cells: int
    entry_bytes: int

    @property
    def dense_bytes(self) -> int:
        return self.dense_cells * self.entry_bytes

    @property
    def used_bytes(self) -> int:
        return self.used_cells * self.entry_bytes

    @property
    def padded_bytes(self) -> int:
        return self.padded_cells * self.entry_bytes


def ragged_table_ledger(lengths_tokens: Sequence[int], kernel_block_tokens: int, entry_bytes: int = 4
                        ) -> RaggedTableLedger:
    """n_r = ceil(T_r / P_k); dense = B n_max; used = sum n_r; padding = dense - used (int32 entries)."""
    _positive(kernel_block_tokens, "kernel_block_tokens")
    _positive(entry_bytes, "entry_bytes")
    if not lengths_tokens:
        raise Rejected(TraversalRejection.EMPTY_BATCH, "no requests")
    for t in lengths_tokens:
        _non_negative(t, "request length")
    n = tuple(seq_blocks(context_tokens=t, kernel_block_tokens=kernel_block_tokens) for t in lengths_tokens)
    n_max = max(n)
    return RaggedTableLedger(kernel_block_tokens, n, n_max,
                             dense_table_cells(batch_rows=len(n), max_blocks=n_max),
                             used_table_cells(blocks_per_request=list(n)),
                             padded_table_cells(batch_rows=len(n), max_blocks=n_max, blocks_per_request=list(n)),
                             entry_bytes)


PAD = -1  # padding cell of a dense staging table (never a block id)


def dense_staging_table(tables: Sequence[Sequence[int]]) -> list[list[int]]:
    """Rectangular staging table: each row padded with PAD up to the longest row."""
    width = max((len(t) for t in tables), default=0)
    return [list(t) + [PAD] * (width - len(t)) for t in tables]


def read_table_cell(table_row: Sequence[int], index: int) -> int:
    """A kernel read of one staging cell: padding is never a block."""
    cell = table_row[index]
    if cell == PAD:
        raise Rejected(TraversalRejection.PADDING_CELL_READ, f"cell {index}")
    return cell


def kernel_table(allocator_table: Sequence[int], allocator_block_tokens: int, kernel_block_tokens: int) -> list[int]:
    """Allocator table expanded for the kernel (0x0AC), each id through ``kernel.expanded_block_id``."""
    out = expand_block_table(allocator_table, allocator_block_tokens, kernel_block_tokens)
    q = expansion_factor(allocator_block_tokens, kernel_block_tokens)
    assert out == [expanded_block_id(allocator_block_id=a, q=q, i=i) for a in allocator_table for i in range(q)]
    return out


@attrs.frozen
class TraversalStep:
    """One kernel tile: logical block, the handle read, and rows read (request-visible, materialized)."""

    logical_block: int
    handle: BlockHandle
    physical_slot: int
    rows_read: int


def decode_traversal(s: KVSnapshot, request_id: str, cache_group_id: int,
                     context_tokens: int | None = None) -> list[TraversalStep]:
    """The block loop of 0x0A's ``paged_decode_one_row``: ceil(T/P) tiles, last one ``T mod P or P`` rows.

    ``context_tokens`` (default: the request's context) is what the kernel was told; a value beyond the
    request's visible context, or beyond a block's valid rows, is rejected rather than read.
    """
    request = s.request(request_id)
    T = request.context_length_tokens if context_tokens is None else context_tokens
    _non_negative(T, "context_tokens")
    if T > request.context_length_tokens:
        raise Rejected(TraversalRejection.READ_PAST_VISIBLE, f"T={T}, context {request.context_length_tokens}")
    group = s.layout.group(cache_group_id)
    pool = s.pool(cache_group_id)
    P = group.block_size_tokens
    table = request.table(cache_group_id)
    n = seq_blocks(context_tokens=T, kernel_block_tokens=P)
    steps = []
    for j in range(n):
        if j >= len(table):
            raise Rejected(TranslateRejection.TABLE_INDEX_OUT_OF_RANGE, f"logical block {j} of {len(table)}")
        handle = table[j]
        desc = pool.descriptor(handle.block_id)
        if desc is None:
            raise Rejected(TranslateRejection.UNKNOWN_PHYSICAL_ID, str(handle))
        if desc.generation != handle.generation:
            raise Rejected(TranslateRejection.STALE_PHYSICAL_GENERATION, str(handle))
        rows = P if j < n - 1 else (T % P or P)
        if rows > desc.valid_rows:
            raise Rejected(TraversalRejection.READ_PAST_MATERIALIZED,
                           f"block {handle}: reads {rows} rows, {desc.valid_rows} valid")
        steps.append(TraversalStep(j, handle, desc.physical_slot, rows))
    return steps


# ---------------------------------------------------------------- 0x0BI chunk-size ledger


@attrs.frozen
class ChunkLedger:
    """Shared-prefix work (invariant in P_c) and traversal / partial state (dependent on P_c)."""

    chunk_tokens: int
    logical_rows: int
    unique_rows: int
    saved_rows: int
    logical_bytes: int
    unique_bytes: int
    saved_bytes: int
    ordinary_chunks: int
    shared_chunks: int
    partial_states: int
    partial_state_bytes: int


def chunk_ledger(chunk_tokens: int, batch_rows: int = 8, shared_tokens: int = 64,
                 suffix_tokens: Sequence[int] = (8, 8, 8, 8, 16, 16, 16, 16), row_bytes: int = 512,
                 value_width: int = 128, output_scalar_bytes: int = 2, state_scalar_bytes: int = 4) -> ChunkLedger:
    """0x0BI: B = 8, S = 64, U = [8]*4 + [16]*4, 512-byte rows, FP16 outputs of width 128, FP32 state."""
    for value, what in ((chunk_tokens, "chunk_tokens"), (batch_rows, "batch_rows"), (row_bytes, "row_bytes"),
                        (value_width, "value_width"), (output_scalar_bytes, "output_scalar_bytes"),
                        (state_scalar_bytes, "state_scalar_bytes")):
        _positive(value, what)
    _non_negative(shared_tokens, "shared_tokens")
    for length in suffix_tokens:
        _non_negative(length, "suffix length")
    if len(suffix_tokens) != batch_rows:
        raise Rejected(TraversalRejection.SUFFIX_COUNT_MISMATCH, f"{len(suffix_tokens)} suffixes, B={batch_rows}")
    u = list(suffix_tokens)
    logical = chunk_logical_rows(batch_rows=batch_rows, shared_tokens=shared_tokens, suffix_tokens=u)
    unique = chunk_unique_rows(shared_tokens=shared_tokens, suffix_tokens=u)
    saved = chunk_saved_rows(batch_rows=batch_rows, shared_tokens=shared_tokens)
    n_partial = partial_states(batch_rows=batch_rows, shared_tokens=shared_tokens, chunk_tokens=chunk_tokens)
    return ChunkLedger(
        chunk_tokens=chunk_tokens, logical_rows=logical, unique_rows=unique, saved_rows=saved,
        logical_bytes=logical * row_bytes, unique_bytes=unique * row_bytes, saved_bytes=saved * row_bytes,
        ordinary_chunks=ordinary_chunks(shared_tokens=shared_tokens, suffix_tokens=u, chunk_tokens=chunk_tokens),
        shared_chunks=shared_chunks(shared_tokens=shared_tokens, suffix_tokens=u, chunk_tokens=chunk_tokens),
        partial_states=n_partial,
        partial_state_bytes=partial_state_bytes(partial_count=n_partial, value_width=value_width,
                                                output_scalar_bytes=output_scalar_bytes,
                                                state_scalar_bytes=state_scalar_bytes),
    )


# ---------------------------------------------------------------- 0x0BJ page-group staircase


@attrs.frozen
class PageGroupRow:
    """Tokens per page group, groups mapped, and tail bytes for one (G, T)."""

    page_group_bytes: int
    context_tokens: int
    tokens_per_group: int
    groups: int
    waste_bytes: int
    user_block_table_lookups: int = 0  # vAttention: no user-space K/V block-table lookups


def page_group_row(page_group_bytes: int, context_tokens: int, tensor_row_bytes: int = 2048) -> PageGroupRow:
    """P_G = G / B_row (divisibility required), N_G = ceil(T / P_G), W_G = N_G G - T B_row."""
    _positive(page_group_bytes, "page_group_bytes")
    _positive(tensor_row_bytes, "tensor_row_bytes")
    _non_negative(context_tokens, "context_tokens")
    if page_group_bytes % tensor_row_bytes:
        raise Rejected(TraversalRejection.PAGE_GROUP_NOT_MULTIPLE,
                       f"G={page_group_bytes} is not a multiple of {tensor_row_bytes}-byte rows")
    p_g = page_group_tokens(page_group_bytes=page_group_bytes, tensor_row_bytes=tensor_row_bytes)
    n_g = page_groups(context_tokens=context_tokens, group_tokens=p_g)
    return PageGroupRow(page_group_bytes, context_tokens, p_g, n_g,
                        page_group_waste_bytes(group_count=n_g, page_group_bytes=page_group_bytes,
                                               context_tokens=context_tokens, tensor_row_bytes=tensor_row_bytes))


VATTENTION_PAGE_GROUPS_BYTES = (64 * KIB, 128 * KIB, 256 * KIB, 2 * MIB)


def page_group_staircase(contexts_tokens: Sequence[int] = (1024, 1025),
                         page_groups_bytes: Sequence[int] = VATTENTION_PAGE_GROUPS_BYTES,
                         tensor_row_bytes: int = 2048) -> list[PageGroupRow]:
    """0x0BJ for Llama-3-8B TP-1 one-layer K or V rows of 2,048 bytes.

    Reconstruction: the seed's table was lost; its page groups are taken to be vAttention's 64 KiB,
    128 KiB, 256 KiB and 2 MiB, at T = 1,024 (on every boundary) and 1,025 (one past).
    """
    return [page_group_row(g, t, tensor_row_bytes) for g in page_groups_bytes for t in contexts_tokens]
