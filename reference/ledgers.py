"""Physical accounting: row bytes, reference / request-view / unique-physical ledgers, pool, metadata,
fragmentation, tail waste (0x02, 0x0D), the block-size cost vector (0x09B) and COW amplification (0x09C).

Every number here is computed through a registered formula (:mod:`kvexact.reference.formulas`).
Invariant of :func:`compute_ledger`: the five identities of 0x0D hold for every fixture that passes
:func:`validate_fixture`; a fixture or a claimed figure that breaks one is rejected by name.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import attrs

from kvexact.reference.formulas import formula
from kvexact.reference.formulas_seed import cow_amplification, cow_copy_bytes, cow_traffic_bytes
from kvexact.reference.rejections import Rejected

KIB = 1024
MIB = 1024 * 1024


def as_tuple(values: Iterable[Any]) -> tuple[Any, ...]:
    """attrs converter: any iterable to a tuple, so records stay immutable and hashable."""
    return tuple(values)


class LedgerRejection(enum.Enum):
    NON_POSITIVE_BLOCK_SIZE = "block size must be a positive number of tokens"
    NON_POSITIVE_ROW_BYTES = "row bytes must be positive"
    NEGATIVE_SIZE = "a layer, head, width or scalar size is negative or zero"
    NEGATIVE_LENGTH = "request rows must be non-negative"
    RESERVATION_BELOW_ROWS = "a rectangular reservation is smaller than the committed rows"
    TABLE_TOO_SHORT = "the block table cannot hold the request's rows"
    TABLE_TOO_LONG = "the block table holds blocks the request does not reach"
    DUPLICATE_BLOCK_IN_TABLE = "one table lists the same physical block twice"
    DUPLICATE_REQUEST = "two request views share one request id"
    BLOCK_NOT_IN_POOL = "a referenced block is not a provisioned pool block"
    MISSING_VALID_ROWS = "a reachable block has no valid-row count"
    UNREACHABLE_BLOCK_COUNTED = "a block no request reaches is counted as live"
    VALID_ROWS_OUT_OF_RANGE = "valid rows must be in 1..P for a live block"
    VISIBLE_ROW_NOT_MATERIALIZED = "a request sees a row its physical block has not materialized"
    FREE_QUEUE_MISMATCH = "the free queue is not exactly the provisioned blocks minus the live ones"
    CACHED_HASH_NOT_FULL = "a cached hash names a block that is not a live full block"
    NEGATIVE_RECORD_SIZE = "metadata record sizes must be non-negative"
    POOL_NOT_WHOLE_BLOCKS = "the provisioned token slots are not a whole number of blocks"
    UNIQUE_BLOCKS_MISCOUNTED = "unique blocks must be the union of block ids, not the reference count"
    ROW_BYTES_MISMATCH = "the claimed row bytes disagree with the layout"
    TAIL_MISATTRIBUTED = "request-view tail claimed as unique physical waste (or the reverse)"
    METADATA_MISMATCH = "the claimed metadata bytes disagree with the record counts and sizes"
    LEDGER_FIGURE_MISMATCH = "a claimed ledger figure disagrees with the computed one"


class NotApplicable(enum.Enum):
    """A ratio with no denominator: reported by name rather than as 0, 1 or a division error."""

    NOT_APPLICABLE = "not_applicable"


NOT_APPLICABLE = NotApplicable.NOT_APPLICABLE

# ---------------------------------------------------------------- formulas (0x02, 0x09)


@formula("row_bytes.group", units="bytes/token/local rank", convention="TP-local; one cache group; K and V "
         "scalars may differ in width", location="0x02A")
def row_bytes_group(ops, layers, kv_heads_local, head_dim, k_scalar_bytes, v_scalar_bytes):
    return layers * kv_heads_local * head_dim * (k_scalar_bytes + v_scalar_bytes)


@formula("row_bytes.rank", units="bytes/token/local rank", convention="TP-local; sum over cache groups",
         location="0x02A")
def row_bytes_rank(ops, group_row_bytes):
    return ops.total(group_row_bytes)


@formula("ledger.logical_ref_bytes", units="bytes", convention="request views; a shared prefix counts once "
         "per referencing request", location="0x02B")
def logical_ref_bytes(ops, rows_tokens, row_bytes):
    return ops.total(rows_tokens) * row_bytes


@formula("ledger.rect_reserved_bytes", units="bytes", convention="rectangular reservation of T_max rows per "
         "request", location="0x02B")
def rect_reserved_bytes(ops, reserved_rows_tokens, row_bytes):
    return ops.total(reserved_rows_tokens) * row_bytes


@formula("ledger.rect_slack_bytes", units="bytes", convention="reserved minus logical reference bytes; "
         "additive, unlike external fragmentation", location="0x02B")
def rect_slack_bytes(ops, reserved_bytes, logical_bytes):
    return reserved_bytes - logical_bytes


@formula("ledger.request_blocks", units="blocks", convention="block-table references of one request, "
         "counted independently", location="0x02C, 0x09B")
def request_blocks(ops, rows_tokens, block_tokens):
    return ops.ceildiv(rows_tokens, block_tokens)


@formula("ledger.paged_ref_bytes", units="bytes", convention="request-view capacity: every reference "
         "counts a whole block", location="0x02C")
def paged_ref_bytes(ops, ref_blocks, block_tokens, row_bytes):
    return ref_blocks * block_tokens * row_bytes


@formula("ledger.request_view_tail_bytes", units="bytes", convention="request-view capacity minus logical "
         "reference bytes; not unique physical waste under sharing", location="0x02C")
def request_view_tail_bytes(ops, paged_bytes, logical_bytes):
    return paged_bytes - logical_bytes


@formula("ledger.pool_bytes", units="bytes", convention="provisioned pool of equal blocks", location="0x02C")
def pool_bytes(ops, pool_blocks, block_tokens, row_bytes):
    return pool_blocks * block_tokens * row_bytes


@formula("ledger.pool_idle_bytes", units="bytes", convention="provisioned minus live unique; reusable, "
         "not fragmentation", location="0x02C")
def pool_idle_bytes(ops, pool_blocks, live_blocks, block_tokens, row_bytes):
    return (pool_blocks - live_blocks) * block_tokens * row_bytes


@formula("ledger.unique_materialized_bytes", units="bytes", convention="unique physical blocks; valid rows "
         "only", location="0x02D")
def unique_materialized_bytes(ops, valid_rows, row_bytes):
    return ops.total(valid_rows) * row_bytes


@formula("ledger.unique_capacity_bytes", units="bytes", convention="unique physical blocks; whole blocks",
         location="0x02D")
def unique_capacity_bytes(ops, unique_blocks, block_tokens, row_bytes):
    return unique_blocks * block_tokens * row_bytes


@formula("ledger.unique_tail_bytes", units="bytes", convention="unique physical blocks; slots not yet "
         "materialized", location="0x02D")
def unique_tail_bytes(ops, valid_rows, block_tokens, row_bytes):
    return ops.total(block_tokens - v for v in valid_rows) * row_bytes


@formula("tail.max_unique_bytes", units="bytes/reachable partial block", convention="upper bound for one "
         "unique partial block; summing it per request is valid only without sharing", location="0x03J")
def max_unique_tail_bytes(ops, block_tokens, row_bytes):
    return (block_tokens - 1) * row_bytes


@formula("ledger.dedup_payload_bytes", units="bytes", convention="logical reference payload minus unique "
         "materialized payload", location="0x02D")
def dedup_payload_bytes(ops, logical_bytes, materialized_bytes):
    return logical_bytes - materialized_bytes


@formula("ledger.sharing_avoided_bytes", units="bytes", convention="request-view capacity minus unique "
         "capacity", location="0x02D")
def sharing_avoided_bytes(ops, paged_bytes, unique_bytes):
    return paged_bytes - unique_bytes


@formula("ledger.metadata_bytes", units="bytes", convention="synthetic record sizes x record counts + fixed; "
         "placement unspecified", location="0x02E, 0x09B")
def metadata_bytes(ops, map_entry_bytes, ref_entries, descriptor_bytes, pool_blocks, hash_entry_bytes,
                   cached_hashes, tail_record_bytes, live_requests, free_entry_bytes, free_blocks, fixed_bytes):
    return (map_entry_bytes * ref_entries + descriptor_bytes * pool_blocks + hash_entry_bytes * cached_hashes
            + tail_record_bytes * live_requests + free_entry_bytes * free_blocks + fixed_bytes)


@formula("frag.external_ratio", units="dimensionless", convention="1 - largest free extent / total free; "
         "defined only when total free > 0", location="0x02F")
def external_ratio(ops, largest_free_bytes, total_free_bytes):
    return 1 - ops.ratio(largest_free_bytes, total_free_bytes)


@formula("frag.blocks_for_bytes", units="blocks", convention="interchangeable fixed-size blocks, no "
         "contiguity", location="0x02F")
def blocks_for_bytes(ops, candidate_bytes, block_bytes):
    return ops.ceildiv(candidate_bytes, block_bytes)


@formula("tail.expected_slots", units="token slots/terminal block", convention="terminal occupancy uniform "
         "on 1..P", location="0x02G")
def expected_tail_slots(ops, block_tokens):
    return ops.ratio(block_tokens - 1, 2)


@formula("tail.expected_bytes", units="bytes/terminal block", convention="terminal occupancy uniform on "
         "1..P; one independent terminal block", location="0x02G")
def expected_tail_bytes(ops, block_tokens, row_bytes):
    return ops.ratio((block_tokens - 1) * row_bytes, 2)


@formula("cost.request_tail_tokens", units="token slots", convention="request view of one request",
         location="0x09B")
def request_tail_tokens(ops, rows_tokens, block_tokens):
    return ops.ceildiv(rows_tokens, block_tokens) * block_tokens - rows_tokens


@formula("cost.full_hit_tokens", units="tokens", convention="full-block hits, uncapped (no logits)",
         location="0x09B")
def full_hit_tokens(ops, rows_tokens, block_tokens):
    return block_tokens * ops.floordiv(rows_tokens, block_tokens)


@formula("cost.full_hit_tokens_capped", units="tokens", convention="S_runtime^full: block-aligned runtime hit "
         "limited by the semantic prefix, the index and the logits cap S_prompt - 1 (S_prompt >= 1)",
         location="0x07A")
def full_hit_tokens_capped(ops, semantic_tokens, indexed_tokens, prompt_tokens, block_tokens):
    return block_tokens * ops.floordiv(ops.minimum(semantic_tokens, indexed_tokens, prompt_tokens - 1), block_tokens)


@formula("cost.full_hit_tokens_gen", units="tokens", convention="H_r^{full,gen}: a logits-producing request "
         "whose whole prompt is semantically exact and indexed (S_sem = S_indexed = T_r >= 1)", location="0x09B")
def full_hit_tokens_gen(ops, rows_tokens, block_tokens):
    return block_tokens * ops.floordiv(rows_tokens - 1, block_tokens)


@formula("cost.partial_hit_tokens_capped", units="tokens", convention="immutable partial tails after the "
         "logits cap (S_prompt >= 1)", location="0x09B, 0x07D")
def partial_hit_tokens_capped(ops, rows_tokens):
    return rows_tokens - 1


@formula("cost.recompute_tokens", units="tokens", convention="prompt rows not returned by the runtime",
         location="0x07A")
def recompute_tokens(ops, prompt_tokens, hit_tokens):
    return prompt_tokens - hit_tokens


@formula("cow.tail_rows", units="rows", convention="valid shared-tail rows at the divergence; 0 means a "
         "block boundary (no copy)", location="0x09C")
def cow_tail_rows(ops, shared_tokens, block_tokens):
    return ops.mod(shared_tokens, block_tokens)


@formula("cow.copy_traffic_bytes", units="bytes", convention="source read plus destination write of the "
         "valid rows", location="0x09C")
def cow_copy_traffic_bytes(ops, tail_rows, row_bytes):
    return 2 * tail_rows * row_bytes


@formula("cow.destination_bytes", units="bytes", convention="capacity of the newly owned private block",
         location="0x09C")
def cow_destination_bytes(ops, block_tokens, row_bytes):
    return block_tokens * row_bytes


@formula("cow.capacity_amplification", units="dimensionless", convention="P_a / r, defined for r > 0",
         location="0x09C")
def cow_capacity_amplification(ops, block_tokens, tail_rows):
    return ops.ratio(block_tokens, tail_rows)


# ---------------------------------------------------------------- records


def _check_positive(value: Any, what: str, reason: LedgerRejection) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise Rejected(reason, f"{what}={value!r}")


def group_row_bytes(layers: int, kv_heads_local: int, head_dim: int, k_scalar_bytes: int,
                    v_scalar_bytes: int) -> int:
    """B_row,g after checking every factor is a positive int."""
    for name, value in (("layers", layers), ("kv_heads_local", kv_heads_local), ("head_dim", head_dim),
                        ("k_scalar_bytes", k_scalar_bytes), ("v_scalar_bytes", v_scalar_bytes)):
        _check_positive(value, name, LedgerRejection.NEGATIVE_SIZE)
    return row_bytes_group(layers=layers, kv_heads_local=kv_heads_local, head_dim=head_dim,
                           k_scalar_bytes=k_scalar_bytes, v_scalar_bytes=v_scalar_bytes)


@attrs.frozen
class RequestView:
    """One live request: committed rows, rectangular reservation, and its (single-group) block table."""

    request_id: str
    rows_tokens: int
    reserved_rows_tokens: int
    block_ids: tuple[int, ...] = attrs.field(converter=as_tuple)


@attrs.frozen
class MetadataRecordSizes:
    """Synthetic bytes per record (test inputs, not measurements; 0x02E)."""

    map_entry_bytes: int
    descriptor_bytes: int
    hash_entry_bytes: int
    tail_record_bytes: int
    free_entry_bytes: int
    fixed_bytes: int


@attrs.frozen
class LedgerFixture:
    """Inputs of the physical ledger: row bytes, block size, request views, pool state, metadata sizes."""

    row_bytes: int
    block_tokens: int
    requests: tuple[RequestView, ...] = attrs.field(converter=as_tuple)
    valid_rows_by_block: tuple[tuple[int, int], ...] = attrs.field(converter=as_tuple)
    pool_block_ids: tuple[int, ...] = attrs.field(converter=as_tuple)
    cached_hash_block_ids: tuple[int, ...] = attrs.field(converter=as_tuple)
    free_queue_block_ids: tuple[int, ...] = attrs.field(converter=as_tuple)
    record_sizes: MetadataRecordSizes


@attrs.frozen
class Ledger:
    """Every figure of the 0x0D ledger, in bytes or counts (names carry units)."""

    row_bytes: int
    block_bytes: int
    logical_rows_tokens: int
    logical_bytes: int
    reserved_rows_tokens: int
    reserved_bytes: int
    rect_slack_bytes: int
    ref_blocks: int
    request_view_slots: int
    paged_ref_bytes: int
    request_view_tail_slots: int
    request_view_tail_bytes: int
    request_view_tail_valid_slots: int
    unique_blocks: int
    unique_materialized_rows: int
    unique_materialized_bytes: int
    unique_slots: int
    unique_capacity_bytes: int
    unique_tail_slots: int
    unique_tail_bytes: int
    dedup_payload_bytes: int
    sharing_avoided_bytes: int
    pool_blocks: int
    pool_bytes: int
    live_unique_bytes: int
    pool_idle_bytes: int
    metadata_bytes: int

    def identities(self) -> dict[str, tuple[int, int]]:
        """The checked identities of 0x0D as ``name -> (lhs, rhs)``; each must be equal."""
        return {
            "reserved = logical + slack": (self.reserved_bytes, self.logical_bytes + self.rect_slack_bytes),
            "request-view = logical + tail": (self.paged_ref_bytes,
                                              self.logical_bytes + self.request_view_tail_bytes),
            "unique capacity = materialized + tail": (self.unique_capacity_bytes,
                                                      self.unique_materialized_bytes + self.unique_tail_bytes),
            "request-view = unique + avoided": (self.paged_ref_bytes,
                                                self.unique_capacity_bytes + self.sharing_avoided_bytes),
            "logical = materialized + deduplicated": (self.logical_bytes,
                                                      self.unique_materialized_bytes + self.dedup_payload_bytes),
            "pool = live + idle": (self.pool_bytes, self.live_unique_bytes + self.pool_idle_bytes),
        }


def validate_fixture(f: LedgerFixture) -> None:
    """Reject a malformed fixture by name (first failing check wins)."""
    _check_positive(f.block_tokens, "block_tokens", LedgerRejection.NON_POSITIVE_BLOCK_SIZE)
    _check_positive(f.row_bytes, "row_bytes", LedgerRejection.NON_POSITIVE_ROW_BYTES)
    for name in ("map_entry_bytes", "descriptor_bytes", "hash_entry_bytes", "tail_record_bytes",
                 "free_entry_bytes", "fixed_bytes"):
        value = getattr(f.record_sizes, name)
        if not isinstance(value, int) or value < 0:
            raise Rejected(LedgerRejection.NEGATIVE_RECORD_SIZE, f"{name}={value!r}")
    pool = set(f.pool_block_ids)
    valid = dict(f.valid_rows_by_block)
    ids = [r.request_id for r in f.requests]
    if len(set(ids)) != len(ids):
        raise Rejected(LedgerRejection.DUPLICATE_REQUEST, f"request ids {ids}")
    reachable: set[int] = set()
    for r in f.requests:
        where = f"request {r.request_id}"
        if not isinstance(r.rows_tokens, int) or r.rows_tokens < 0:
            raise Rejected(LedgerRejection.NEGATIVE_LENGTH, f"{where}: rows_tokens={r.rows_tokens!r}")
        if r.reserved_rows_tokens < r.rows_tokens:
            raise Rejected(LedgerRejection.RESERVATION_BELOW_ROWS,
                           f"{where}: reserved {r.reserved_rows_tokens} < rows {r.rows_tokens}")
        need = request_blocks(rows_tokens=r.rows_tokens, block_tokens=f.block_tokens)
        if len(r.block_ids) < need:
            raise Rejected(LedgerRejection.TABLE_TOO_SHORT, f"{where}: {len(r.block_ids)} blocks, needs {need}")
        if len(r.block_ids) > need:
            raise Rejected(LedgerRejection.TABLE_TOO_LONG, f"{where}: {len(r.block_ids)} blocks, needs {need}")
        if len(set(r.block_ids)) != len(r.block_ids):
            raise Rejected(LedgerRejection.DUPLICATE_BLOCK_IN_TABLE, f"{where}: {r.block_ids}")
        for j, b in enumerate(r.block_ids):
            if b not in pool:
                raise Rejected(LedgerRejection.BLOCK_NOT_IN_POOL, f"{where}: block {b}")
            if b not in valid:
                raise Rejected(LedgerRejection.MISSING_VALID_ROWS, f"{where}: block {b}")
            v = valid[b]
            if not 1 <= v <= f.block_tokens:
                raise Rejected(LedgerRejection.VALID_ROWS_OUT_OF_RANGE, f"block {b}: valid_rows={v}")
            visible = min(f.block_tokens, r.rows_tokens - j * f.block_tokens)
            if visible > v:
                raise Rejected(LedgerRejection.VISIBLE_ROW_NOT_MATERIALIZED,
                               f"{where} sees {visible} rows of block {b}, which has {v} valid")
            reachable.add(b)
    stray = set(valid) - reachable
    if stray:
        raise Rejected(LedgerRejection.UNREACHABLE_BLOCK_COUNTED, f"blocks {sorted(stray)}")
    free = f.free_queue_block_ids
    if len(set(free)) != len(free) or set(free) != pool - reachable:
        raise Rejected(LedgerRejection.FREE_QUEUE_MISMATCH,
                       f"free queue {sorted(free)}, expected {sorted(pool - reachable)}")
    for b in f.cached_hash_block_ids:
        if valid.get(b) != f.block_tokens:
            raise Rejected(LedgerRejection.CACHED_HASH_NOT_FULL, f"block {b}")


def compute_ledger(f: LedgerFixture) -> Ledger:
    """All figures of the physical ledger, each through its registered formula."""
    validate_fixture(f)
    B, P = f.row_bytes, f.block_tokens
    rows = [r.rows_tokens for r in f.requests]
    reserved_rows = [r.reserved_rows_tokens for r in f.requests]
    logical = logical_ref_bytes(rows_tokens=rows, row_bytes=B)
    reserved = rect_reserved_bytes(reserved_rows_tokens=reserved_rows, row_bytes=B)
    ref_blocks = sum(len(r.block_ids) for r in f.requests)
    paged = paged_ref_bytes(ref_blocks=ref_blocks, block_tokens=P, row_bytes=B)
    unique_ids = sorted({b for r in f.requests for b in r.block_ids})
    valid = dict(f.valid_rows_by_block)
    unique_valid = [valid[b] for b in unique_ids]
    unique_cap = unique_capacity_bytes(unique_blocks=len(unique_ids), block_tokens=P, row_bytes=B)
    materialized = unique_materialized_bytes(valid_rows=unique_valid, row_bytes=B)
    n_pool = len(f.pool_block_ids)
    s = f.record_sizes
    meta = metadata_bytes(map_entry_bytes=s.map_entry_bytes, ref_entries=ref_blocks,
                          descriptor_bytes=s.descriptor_bytes, pool_blocks=n_pool,
                          hash_entry_bytes=s.hash_entry_bytes, cached_hashes=len(f.cached_hash_block_ids),
                          tail_record_bytes=s.tail_record_bytes, live_requests=len(f.requests),
                          free_entry_bytes=s.free_entry_bytes, free_blocks=len(f.free_queue_block_ids),
                          fixed_bytes=s.fixed_bytes)
    return Ledger(
        row_bytes=B, block_bytes=P * B,
        logical_rows_tokens=sum(rows), logical_bytes=logical,
        reserved_rows_tokens=sum(reserved_rows), reserved_bytes=reserved,
        rect_slack_bytes=rect_slack_bytes(reserved_bytes=reserved, logical_bytes=logical),
        ref_blocks=ref_blocks, request_view_slots=ref_blocks * P, paged_ref_bytes=paged,
        request_view_tail_slots=ref_blocks * P - sum(rows),
        request_view_tail_valid_slots=_tail_slots_holding_valid_rows(f),
        request_view_tail_bytes=request_view_tail_bytes(paged_bytes=paged, logical_bytes=logical),
        unique_blocks=len(unique_ids), unique_materialized_rows=sum(unique_valid),
        unique_materialized_bytes=materialized, unique_slots=len(unique_ids) * P,
        unique_capacity_bytes=unique_cap, unique_tail_slots=sum(P - v for v in unique_valid),
        unique_tail_bytes=unique_tail_bytes(valid_rows=unique_valid, block_tokens=P, row_bytes=B),
        dedup_payload_bytes=dedup_payload_bytes(logical_bytes=logical, materialized_bytes=materialized),
        sharing_avoided_bytes=sharing_avoided_bytes(paged_bytes=paged, unique_bytes=unique_cap),
        pool_blocks=n_pool, pool_bytes=pool_bytes(pool_blocks=n_pool, block_tokens=P, row_bytes=B),
        live_unique_bytes=unique_cap,
        pool_idle_bytes=pool_idle_bytes(pool_blocks=n_pool, live_blocks=len(unique_ids), block_tokens=P,
                                        row_bytes=B),
        metadata_bytes=meta,
    )


def _tail_slots_holding_valid_rows(f: LedgerFixture) -> int:
    """Request-view tail slots that hold rows another view materialized (not physical waste, 0x0D)."""
    valid = dict(f.valid_rows_by_block)
    out = 0
    for r in f.requests:
        if r.block_ids:
            visible_in_last = r.rows_tokens - (len(r.block_ids) - 1) * f.block_tokens
            out += valid[r.block_ids[-1]] - visible_in_last
    return out


_CLAIM_REASONS = {
    "unique_blocks": LedgerRejection.UNIQUE_BLOCKS_MISCOUNTED,
    "unique_slots": LedgerRejection.UNIQUE_BLOCKS_MISCOUNTED,
    "unique_capacity_bytes": LedgerRejection.UNIQUE_BLOCKS_MISCOUNTED,
    "row_bytes": LedgerRejection.ROW_BYTES_MISMATCH,
    "unique_tail_slots": LedgerRejection.TAIL_MISATTRIBUTED,
    "unique_tail_bytes": LedgerRejection.TAIL_MISATTRIBUTED,
    "request_view_tail_bytes": LedgerRejection.TAIL_MISATTRIBUTED,
    "metadata_bytes": LedgerRejection.METADATA_MISMATCH,
}


def reconcile(f: LedgerFixture, claimed: Mapping[str, int]) -> Ledger:
    """Compute the ledger and reject the first claimed figure that disagrees, by a named reason."""
    ledger = compute_ledger(f)
    for name, value in claimed.items():
        if not hasattr(ledger, name):
            raise KeyError(f"unknown ledger figure {name!r}")
        actual = getattr(ledger, name)
        if actual != value:
            reason = _CLAIM_REASONS.get(name, LedgerRejection.LEDGER_FIGURE_MISMATCH)
            raise Rejected(reason, f"{name}: claimed {value}, computed {actual}")
    return ledger


# ---------------------------------------------------------------- fragmentation and tail waste (0x02F, 0x02G)


def external_fragmentation(free_extents_bytes: Sequence[int]) -> Fraction | NotApplicable:
    """F_ext = 1 - largest / total over the free extents; NOT_APPLICABLE for a full arena."""
    for e in free_extents_bytes:
        if not isinstance(e, int) or e < 0:
            raise Rejected(LedgerRejection.NEGATIVE_SIZE, f"free extent {e!r}")
    total = sum(free_extents_bytes)
    if total == 0:
        return NOT_APPLICABLE
    return external_ratio(largest_free_bytes=max(free_extents_bytes), total_free_bytes=total)


def contiguous_fit(free_extents_bytes: Sequence[int], candidate_bytes: int) -> bool:
    """A contiguous candidate fits only inside one free extent."""
    return any(e >= candidate_bytes for e in free_extents_bytes)


def block_pool_fit(free_blocks: int, candidate_bytes: int, block_bytes: int) -> bool:
    """Interchangeable blocks: a candidate fits when enough blocks are free, wherever they lie."""
    _check_positive(block_bytes, "block_bytes", LedgerRejection.NON_POSITIVE_BLOCK_SIZE)
    return blocks_for_bytes(candidate_bytes=candidate_bytes, block_bytes=block_bytes) <= free_blocks


# ---------------------------------------------------------------- cost vector (0x09B) and COW (0x09C)


@attrs.frozen
class BlockSizeCost:
    """The structural components of C(P_a, ...) for one allocator block size (never collapsed)."""

    block_tokens: int
    request_view_tail_bytes: int
    unique_blocks: int
    unique_tail_bytes: int
    map_entries: int
    pool_descriptors: int
    cached_hashes: int
    free_blocks: int
    metadata_bytes: int
    full_hit_tokens: int
    full_hit_tokens_capped: int
    recompute_tokens_capped: int
    partial_hit_tokens_capped: int


def block_size_cost(block_tokens: int, lengths_tokens: Sequence[int], row_bytes: int, pool_slots: int,
                    record_sizes: MetadataRecordSizes) -> BlockSizeCost:
    """Cost vector of a nested exact-prefix workload (0x09B) at allocator block size ``block_tokens``.

    The longest request materializes the shared path first; hits count the other (consumer) requests.
    The seed's workload is :func:`kvexact.reference.labs.ledgers.nested_prefix_cost`.
    """
    _check_positive(block_tokens, "block_tokens", LedgerRejection.NON_POSITIVE_BLOCK_SIZE)
    for t in lengths_tokens:
        if not isinstance(t, int) or t < 1:
            raise Rejected(LedgerRejection.NEGATIVE_LENGTH, f"request length {t!r} (a prompt needs >= 1 row)")
    if pool_slots % block_tokens:
        raise Rejected(LedgerRejection.POOL_NOT_WHOLE_BLOCKS, f"{pool_slots} slots, P={block_tokens}")
    P = block_tokens
    longest = max(lengths_tokens)
    consumers = list(lengths_tokens)
    consumers.remove(longest)
    refs = sum(request_blocks(rows_tokens=t, block_tokens=P) for t in lengths_tokens)
    unique = request_blocks(rows_tokens=longest, block_tokens=P)
    pool = pool_slots // P
    hashes = full_hit_tokens(rows_tokens=longest, block_tokens=P) // P
    s = record_sizes
    meta = metadata_bytes(map_entry_bytes=s.map_entry_bytes, ref_entries=refs, descriptor_bytes=s.descriptor_bytes,
                          pool_blocks=pool, hash_entry_bytes=s.hash_entry_bytes, cached_hashes=hashes,
                          tail_record_bytes=s.tail_record_bytes, live_requests=len(lengths_tokens),
                          free_entry_bytes=s.free_entry_bytes, free_blocks=pool - unique, fixed_bytes=s.fixed_bytes)
    capped = sum(full_hit_tokens_gen(rows_tokens=t, block_tokens=P) for t in consumers)
    return BlockSizeCost(
        block_tokens=P,
        request_view_tail_bytes=sum(request_tail_tokens(rows_tokens=t, block_tokens=P)
                                    for t in lengths_tokens) * row_bytes,
        unique_blocks=unique,
        unique_tail_bytes=request_tail_tokens(rows_tokens=longest, block_tokens=P) * row_bytes,
        map_entries=refs, pool_descriptors=pool, cached_hashes=hashes, free_blocks=pool - unique,
        metadata_bytes=meta,
        full_hit_tokens=sum(full_hit_tokens(rows_tokens=t, block_tokens=P) for t in consumers),
        full_hit_tokens_capped=capped,
        recompute_tokens_capped=recompute_tokens(prompt_tokens=sum(consumers), hit_tokens=capped),
        partial_hit_tokens_capped=sum(partial_hit_tokens_capped(rows_tokens=t) for t in consumers),
    )


@attrs.frozen
class CowCost:
    """One COW append at a divergence after ``shared_tokens`` (0x05A, 0x09C): ``r = shared mod P`` rows are
    copied (0 at a block boundary: a fresh block, no copy); ``row_bytes`` is one row of every cache group."""

    block_tokens: int
    tail_rows: int
    row_bytes: int
    copy_traffic_bytes: int  # source read plus destination write of the r rows (0x09C)
    destination_bytes: int  # the new private block's capacity
    capacity_amplification: Fraction | NotApplicable  # P / r

    @property
    def copy_payload_bytes(self) -> int:
        return cow_copy_bytes(tail_rows=self.tail_rows, group_row_bytes=[self.row_bytes])

    @property
    def traffic_bytes(self) -> int:
        """Copy read + copy write + the appended row's write (0x05A)."""
        return cow_traffic_bytes(copy_bytes=self.copy_payload_bytes, group_row_bytes=[self.row_bytes])

    @property
    def amplification(self) -> int:
        """Traffic relative to a one-row append: 2r + 1."""
        return int(cow_amplification(traffic_bytes=self.traffic_bytes, group_row_bytes=[self.row_bytes]))


def cow_cost(block_tokens: int, shared_tokens: int = 20, row_bytes: int = 64 * KIB) -> CowCost:
    """0x09C: ``r = shared mod P``; r = 0 means a fresh block, no copy, amplification not applicable."""
    _check_positive(block_tokens, "block_tokens", LedgerRejection.NON_POSITIVE_BLOCK_SIZE)
    if not isinstance(shared_tokens, int) or shared_tokens < 0:
        raise Rejected(LedgerRejection.NEGATIVE_LENGTH, f"shared_tokens={shared_tokens!r}")
    r = cow_tail_rows(shared_tokens=shared_tokens, block_tokens=block_tokens)
    return CowCost(
        block_tokens=block_tokens, tail_rows=r, row_bytes=row_bytes,
        copy_traffic_bytes=cow_copy_traffic_bytes(tail_rows=r, row_bytes=row_bytes),
        destination_bytes=cow_destination_bytes(block_tokens=block_tokens, row_bytes=row_bytes),
        capacity_amplification=(cow_capacity_amplification(block_tokens=block_tokens, tail_rows=r)
                                if r else NOT_APPLICABLE),
    )
