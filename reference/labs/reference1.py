"""Failure labs of Reference I (0x01A, 0x03I, 0x0D, 0x0BN and key cases of 0x07B/0x07D).

Seed counts: 0x0D names 14 one-field failures; the seed states no count for identity (0x01A),
addressing (0x03I) or granularity (0x0BN), so those labs hold the distinct contracts their sections
motivate, not a quota. Every trigger builds a valid fixture, changes one thing, and must be rejected
with exactly the registered reason.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import attrs

from kvexact.reference.blockmap import BlockMapRejection, expand_block_table
from kvexact.reference.handles import BlockHandle
from kvexact.reference.keys import KeyInputs, KeyRejection, MultimodalFeature, partial_tail_key
from kvexact.reference.labs.ledgers import nested_prefix_cost, worked_fixture
from kvexact.reference.labs.translate import loop4_layout, loop4_snapshot, loop4_successor_snapshot
from kvexact.reference.ledgers import (
    LedgerFixture,
    LedgerRejection,
    RequestView,
    compute_ledger,
    reconcile,
)
from kvexact.reference.manifest import (
    CacheCompatibilityManifest,
    CacheGroupLayout,
    CompatibilityRejection,
    LayoutRejection,
    PhysicalMode,
    input_side_data_identity,
    semantic_cache_compatible,
)
from kvexact.reference.namespaces import (
    CacheIsolationNamespace,
    InvalidationReason,
    NamespaceRegistry,
    NamespaceRejection,
    authorize_lookup,
    authorize_publish,
    check_entry_scope,
    create_namespace,
    invalidate,
)
from kvexact.reference.rejections import NegativeCase, register_negative
from kvexact.reference.telemetry import GranularityCounters, TelemetryRejection
from kvexact.reference.translate import (
    FrozenAddress,
    GroupPool,
    KVSnapshot,
    PoolDescriptor,
    RequestSnapshot,
    TranslateRejection,
    check_frozen_address,
    consume_successor,
    resolve_kv_address,
    validate_snapshot,
)
from kvexact.reference.traversal import (
    PAD,
    TraversalRejection,
    chunk_ledger,
    decode_traversal,
    kernel_geometry,
    page_group_row,
    ragged_table_ledger,
    read_table_cell,
    require_launchable,
)

SECTIONS = ("0x01A", "0x03I", "0x0D", "0x0BN", "0x07B", "0x07D")
SEED_MINIMUM = {"0x0D": 14}


_CASES: list[NegativeCase] = []


def _case(section: str, reason: enum.Enum, description: str, trigger: Callable[[], Any]) -> None:
    _CASES.append(NegativeCase(section, reason, description, trigger))


def register() -> None:
    """Register every case of these labs (called once, by :func:`kvexact.reference.labs.register_all`)."""
    for case in _CASES:
        register_negative(case)


# ---------------------------------------------------------------- 0x01A identity and isolation


def producer_manifest(**changes: Any) -> CacheCompatibilityManifest:
    """A 16-token producer of the Loop 2 source-to-tensor trace (consumers differ in one field)."""
    base = CacheCompatibilityManifest(
        cache_abi_sha256="abi-loop2", cache_layout_sha256=loop4_layout().digest, model_generation=1,
        adapter_identity="none", weight_transform_identity="none", position_contract_sha256="rope-loop2",
        covered_token_ids=tuple(range(100, 116)), input_side_data_identity=input_side_data_identity(),
        cache_isolation_namespace=("prod/t1", 0), cache_salt="salt-a", publication_generation=3)
    return attrs.evolve(base, **changes)


def _compat(**changes: Any) -> Callable[[], Any]:
    return lambda: semantic_cache_compatible(producer_manifest(), producer_manifest(**changes))


def _layout_compat(**layout_changes: Any) -> Callable[[], Any]:
    def trigger() -> Any:
        a, b = loop4_layout(), loop4_layout(**layout_changes)
        return semantic_cache_compatible(producer_manifest(), producer_manifest(cache_layout_sha256=b.digest), a, b)
    return trigger


def _groups_with(group_id: int, **changes: Any) -> tuple[CacheGroupLayout, ...]:
    return tuple(attrs.evolve(g, **changes) if g.cache_group_id == group_id else g
                 for g in loop4_layout().cache_groups)


def _namespace_registry() -> NamespaceRegistry:
    ns = CacheIsolationNamespace("prod", "t1", "prod/t1", 0, "salt-a", 1)
    return create_namespace(NamespaceRegistry(), ns)


def _after_invalidation() -> tuple[NamespaceRegistry, CacheIsolationNamespace]:
    reg, receipt = invalidate(_namespace_registry(), "prod/t1", InvalidationReason.ADAPTER)
    return reg, receipt.successor


CR = CompatibilityRejection
for _reason, _field, _value, _what in (
    (CR.CACHE_ABI_MISMATCH, "cache_abi_sha256", "abi-other", "different logical cache ABI"),
    (CR.LAYOUT_MISMATCH, "cache_layout_sha256", "layout-other", "different physical layout digest"),
    (CR.MODEL_GENERATION_MISMATCH, "model_generation", 2, "weights updated (model generation 2)"),
    (CR.ADAPTER_MISMATCH, "adapter_identity", "lora-a", "adapter mismatch on equal 16 tokens"),
    (CR.WEIGHT_TRANSFORM_MISMATCH, "weight_transform_identity", "fused-qkv", "weight transform mismatch"),
    (CR.POSITION_CONTRACT_MISMATCH, "position_contract_sha256", "rope-scaled", "position-contract mismatch"),
    (CR.COVERED_TOKENS_MISMATCH, "covered_token_ids", tuple(range(100, 115)) + (999,), "one covered token differs"),
    (CR.NAMESPACE_MISMATCH, "cache_isolation_namespace", ("prod/t2", 0), "another tenant's namespace"),
    (CR.NAMESPACE_MISMATCH, "cache_isolation_namespace", ("prod/t1", 1), "successor namespace generation"),
    (CR.CACHE_SALT_MISMATCH, "cache_salt", "salt-b", "different cache salt"),
    (CR.PUBLICATION_GENERATION_MISMATCH, "publication_generation", 4, "different publication generation"),
):
    _case("0x01A", _reason, _what, _compat(**{_field: _value}))

_case("0x01A", CR.INPUT_SIDE_DATA_MISMATCH, "multimodal feature differs behind equal placeholder tokens",
      _compat(input_side_data_identity=input_side_data_identity([("img-2", 3, 8)])))
_case("0x01A", CR.INPUT_SIDE_DATA_MISMATCH, "prompt embeddings differ behind equal tokens",
      _compat(input_side_data_identity=input_side_data_identity(prompt_embeds_sha256="ab" * 32)))
_case("0x01A", CR.TP_RANK_MISMATCH, "same shape on another TP rank", _layout_compat(tp_rank=1))
_case("0x01A", CR.CACHE_GROUP_MISMATCH, "same bytes, different cache-group layer split",
      _layout_compat(cache_groups=(
          attrs.evolve(loop4_layout().cache_groups[0], layer_ids=tuple(range(0, 16))),
          attrs.evolve(loop4_layout().cache_groups[1], layer_ids=tuple(range(16, 32)), strides=None))))
_case("0x01A", CR.DTYPE_MISMATCH, "same scalar bytes, bf16 instead of fp16",
      _layout_compat(cache_groups=_groups_with(1, storage_dtype="bf16")))
_case("0x01A", CR.QUANTIZATION_SCHEMA_MISMATCH, "same raw bytes under a quantization schema",
      _layout_compat(quantization_schema="int8-per-head"))
_case("0x01A", CR.AXIS_STRIDE_MISMATCH, "same block size, different axis order",
      _layout_compat(cache_groups=_groups_with(
          1, axis_order=("physical_slot", "layer_local", "token_offset", "kv_head_local", "head_dim"), strides=None)))
_case("0x01A", NamespaceRejection.UNAUTHORIZED_TENANT, "lookup before authorization by another tenant",
      lambda: authorize_lookup(_namespace_registry(), "t2", "prod/t1", 0))
_case("0x01A", NamespaceRejection.RETIRED_GENERATION, "lookup in a retired namespace generation",
      lambda: authorize_lookup(_after_invalidation()[0], "t1", "prod/t1", 0))
_case("0x01A", NamespaceRejection.STALE_ENTRY_GENERATION, "old-generation entry offered to the successor",
      lambda: check_entry_scope(_after_invalidation()[1], ("prod/t1", 0)))
_case("0x01A", NamespaceRejection.CROSS_NAMESPACE_ENTRY, "entry of another namespace offered as a hit",
      lambda: check_entry_scope(_after_invalidation()[1], ("prod/t2", 1)))
_case("0x01A", NamespaceRejection.PUBLISH_TO_RETIRED_GENERATION, "publication into a frozen generation",
      lambda: authorize_publish(_after_invalidation()[0], ("prod/t1", 0)))
_case("0x01A", LayoutRejection.BAD_TP_RANK, "TP rank equal to the world size", lambda: loop4_layout(tp_rank=2))
_case("0x01A", LayoutRejection.HASH_BLOCK_NOT_DIVIDING, "hash block size 24 with 16-token blocks",
      lambda: loop4_layout(hash_block_size=24))
_case("0x01A", LayoutRejection.BLOCK_SIZE_FOR_MODE, "paged blocks without a token block size",
      lambda: loop4_layout(token_block_size=None))
_case("0x01A", LayoutRejection.DUPLICATE_GROUP_ID, "two cache groups with id 0",
      lambda: loop4_layout(cache_groups=_groups_with(1, cache_group_id=0)))

# ---------------------------------------------------------------- 0x07B / 0x07D keys (extra; the 0x07G lab is Reference II's)

_case("0x07B", KeyRejection.NON_POSITIVE_BLOCK_SIZE, "hash block size 0",
      lambda: partial_tail_key(KeyInputs(range(20)), 0, 0, "p"))
_case("0x07B", KeyRejection.FEATURE_OUT_OF_RANGE, "multimodal placeholder past the prompt",
      lambda: KeyInputs(range(8), mm_features=(MultimodalFeature("img", 4, 8),)))
_case("0x07B", KeyRejection.PROMPT_EMBEDS_LENGTH_MISMATCH, "prompt embeddings for fewer rows than tokens",
      lambda: KeyInputs(range(8), prompt_embed_rows=(b"x",) * 7))
_case("0x07D", KeyRejection.PARTIAL_TAIL_ROWS_DRIFT, "tail key claims 3 valid rows over 2 tokens",
      lambda: partial_tail_key(KeyInputs(range(18)), 16, 0, "p", valid_rows=3))
_case("0x07D", KeyRejection.PARTIAL_TAIL_EMPTY, "tail key at a block boundary",
      lambda: partial_tail_key(KeyInputs(range(32)), 16, 0, "p"))

# ---------------------------------------------------------------- 0x03I translator

A_K = dict(request_id="A", token=16, layer=24, kind="K", head=1, lane=5)  # 0x03F


def _with_request(s: KVSnapshot, request: RequestSnapshot) -> KVSnapshot:
    return attrs.evolve(s, requests=tuple(request if r.request_id == request.request_id else r for r in s.requests))


def _with_g1_entry(block: int, handle: BlockHandle) -> KVSnapshot:
    s = loop4_snapshot()
    a = s.request("A")
    g1 = tuple(handle if i == block else h for i, h in enumerate(a.table(1)))
    return _with_request(s, attrs.evolve(a, block_tables=((0, a.table(0)), (1, g1))))


def _with_descriptor(group_id: int, block_id: int, **changes: Any) -> KVSnapshot:
    s = loop4_snapshot()
    pools = []
    for p in s.pools:
        if p.cache_group_id == group_id:
            p = attrs.evolve(p, descriptors=tuple(attrs.evolve(d, **changes) if d.block_id == block_id else d
                                                  for d in p.descriptors))
        pools.append(p)
    return attrs.evolve(s, pools=tuple(pools))


def _without_group_table(s: KVSnapshot, request_id: str, group_id: int) -> KVSnapshot:
    requests = tuple(attrs.evolve(r, block_tables=tuple((g, t) for g, t in r.block_tables if g != group_id))
                     if r.request_id == request_id else r for r in s.requests)
    return attrs.evolve(s, requests=requests)


def _resolve(s: KVSnapshot, **overrides: Any) -> Any:
    args = {**A_K, **overrides}
    return resolve_kv_address(s, args["request_id"], args["token"], args["layer"], args["kind"], args["head"],
                              args["lane"])


TR = TranslateRejection
_case("0x03I", TR.TOKEN_NOT_VISIBLE, "B reads token 25 of a block A materialized",
      lambda: _resolve(loop4_snapshot(), request_id="B", token=25))
_case("0x03I", TR.UNKNOWN_REQUEST, "request not in the snapshot", lambda: _resolve(loop4_snapshot(), request_id="Z"))
_case("0x03I", TR.MISSING_GROUP_TABLE, "A's snapshot carries g0's table only (0x03B: one table per cache group)",
      lambda: _resolve(_without_group_table(loop4_snapshot(), "A", 1)))
_case("0x03I", LayoutRejection.LAYER_IN_NO_GROUP, "layer gap: layers 24..31 in no group",
      lambda: loop4_layout(cache_groups=loop4_layout().cache_groups[:1]))
_case("0x03I", LayoutRejection.LAYER_IN_TWO_GROUPS, "layer 23 in both groups",
      lambda: loop4_layout(cache_groups=_groups_with(1, layer_ids=tuple(range(23, 32)), strides=None)))
_case("0x03I", LayoutRejection.DUPLICATE_AXIS, "duplicate head axis",
      lambda: CacheGroupLayout(1, range(24, 32), 4, 128, "fp16", 2, 2, 16, 8,
                               ("layer_local", "physical_slot", "kv_head_local", "kv_head_local", "head_dim")))
_case("0x03I", LayoutRejection.STRIDE_SHAPE_MISMATCH, "declared stride disagrees with the shape",
      lambda: CacheGroupLayout(1, range(24, 32), 4, 128, "fp16", 2, 2, 16, 8,
                               ("layer_local", "physical_slot", "token_offset", "kv_head_local", "head_dim"),
                               strides=(65536, 8192, 512, 256, 1)))
_case("0x03I", LayoutRejection.NON_POSITIVE_SIZE, "zero block size in a group",
      lambda: loop4_layout(cache_groups=_groups_with(1, block_size_tokens=0, strides=None)))
_case("0x03I", TR.TABLE_LENGTH_DRIFT, "A's context says 3 blocks, its tables hold 2",
      lambda: validate_snapshot(_with_request(loop4_snapshot(), attrs.evolve(
          loop4_snapshot().request("A"), block_tables=loop4_snapshot().request("B").block_tables))))
_case("0x03I", TR.TABLE_INDEX_OUT_OF_RANGE, "read past the end of an unvalidated short table",
      lambda: _resolve(_with_request(loop4_snapshot(), attrs.evolve(
          loop4_snapshot().request("A"), block_tables=loop4_snapshot().request("C").block_tables))))
_case("0x03I", TR.UNKNOWN_PHYSICAL_ID, "table names block 2009, which has no descriptor",
      lambda: _resolve(_with_g1_entry(1, BlockHandle(1, 1, 2009, 7))))
_case("0x03I", TR.STALE_PHYSICAL_GENERATION, "table holds 2001@6 after the block moved to generation 7",
      lambda: _resolve(_with_g1_entry(1, BlockHandle(1, 1, 2001, 6))))
_case("0x03I", TR.WRONG_GROUP_HANDLE, "g1 table entry names a g0 block",
      lambda: _resolve(_with_g1_entry(1, BlockHandle(1, 0, 2001, 7))))
_case("0x03I", TR.WRONG_POOL, "g1 table entry names pool 5", lambda: _resolve(_with_g1_entry(1, BlockHandle(5, 1, 2001, 7))))
_case("0x03I", TR.SLOT_REUSED, "blocks 2001 and 2002 share slot 6",
      lambda: validate_snapshot(_with_descriptor(1, 2002, physical_slot=6)))
_case("0x03I", TR.SLOT_OUT_OF_RANGE, "slot 8 of an 8-slot pool", lambda: validate_snapshot(_with_descriptor(1, 2002, physical_slot=8)))
_case("0x03I", TR.VALID_ROWS_OUT_OF_RANGE, "17 valid rows in a 16-token block",
      lambda: validate_snapshot(_with_descriptor(1, 2001, valid_rows=17)))
_case("0x03I", TR.BUNDLE_MISMATCH, "bundle 102 has 2 rows in g0 but 1 in g1",
      lambda: validate_snapshot(_with_descriptor(0, 1002, valid_rows=2)))
_case("0x03I", TR.ROW_NOT_MATERIALIZED, "request sees row 33 that block 2002 has not committed",
      lambda: _resolve(_with_request(loop4_snapshot(), attrs.evolve(loop4_snapshot().request("A"),
                                                                    context_length_tokens=34)), token=33))
_case("0x03I", TR.HEAD_OUT_OF_RANGE, "K head 4 of 4 local heads", lambda: _resolve(loop4_snapshot(), head=4))
_case("0x03I", TR.LANE_OUT_OF_RANGE, "lane 128 of head width 128", lambda: _resolve(loop4_snapshot(), lane=128))
_case("0x03I", TR.BAD_KV_KIND, "tensor kind 'Q'", lambda: _resolve(loop4_snapshot(), kind="Q"))
_case("0x03I", TR.OVERLAPPING_TENSOR_RANGES, "g1 K tensor starts inside g0 V",
      lambda: validate_snapshot(attrs.evolve(loop4_snapshot(), pools=(
          loop4_snapshot().pools[0], attrs.evolve(loop4_snapshot().pools[1],
                                                  k_base_address=loop4_snapshot().pools[0].v_base_address)))))
_case("0x03I", TR.MISSING_GROUP_POOL, "g1 has no pool placement",
      lambda: validate_snapshot(attrs.evolve(loop4_snapshot(), pools=loop4_snapshot().pools[:1])))
_case("0x03I", TR.STALE_SUCCESSOR_VERSION, "C consumes version 2 after version 3",
      lambda: consume_successor(loop4_successor_snapshot(), loop4_snapshot(), "C"))
_case("0x03I", TR.REQUEST_GENERATION_DRIFT, "successor of another request generation",
      lambda: consume_successor(loop4_snapshot(), _with_request(loop4_successor_snapshot(), attrs.evolve(
          loop4_successor_snapshot().request("C"), request_generation=2)), "C"))
_case("0x03I", TR.FROZEN_ADDRESS_DRIFT, "block 2001 moved to slot 0 under a frozen address",
      lambda: check_frozen_address(_with_descriptor(1, 2001, physical_slot=0),
                                   FrozenAddress("A", 5, 16, 24, "K", 1, 5, 4_311_843_082)))
_case("0x03I", TR.NOT_PAGED, "translator over a rectangular layout",
      lambda: validate_snapshot(attrs.evolve(loop4_snapshot(), layout=loop4_layout(
          physical_mode=PhysicalMode.RECTANGULAR))))

# ---------------------------------------------------------------- 0x0D worked ledger (one field each)

LR = LedgerRejection


def _fixture(**changes: Any) -> LedgerFixture:
    return attrs.evolve(worked_fixture(), **changes)


def _request(i: int, **changes: Any) -> LedgerFixture:
    f = worked_fixture()
    requests = list(f.requests)
    requests[i] = attrs.evolve(requests[i], **changes)
    return attrs.evolve(f, requests=tuple(requests))


def _claim(**claimed: int) -> Callable[[], Any]:
    return lambda: reconcile(worked_fixture(), claimed)


_case("0x0D", LR.UNIQUE_BLOCKS_MISCOUNTED, "six request references counted as six unique blocks",
      _claim(unique_blocks=6))
_case("0x0D", LR.ROW_BYTES_MISMATCH, "model-wide 128 KiB row claimed for the TP-local ledger",
      _claim(row_bytes=128 * 1024))
_case("0x0D", LR.TAIL_MISATTRIBUTED, "22 request-view tail slots claimed as unique physical tail",
      _claim(unique_tail_slots=22))
_case("0x0D", LR.METADATA_MISMATCH, "metadata claimed without the fixed 128 bytes", _claim(metadata_bytes=354))
_case("0x0D", LR.LEDGER_FIGURE_MISMATCH, "idle pool bytes claimed as fragmentation-free 8 MiB",
      _claim(pool_idle_bytes=8 * 1024 * 1024))
_case("0x0D", LR.NON_POSITIVE_BLOCK_SIZE, "block size 0", lambda: compute_ledger(_fixture(block_tokens=0)))
_case("0x0D", LR.NON_POSITIVE_ROW_BYTES, "row bytes 0", lambda: compute_ledger(_fixture(row_bytes=0)))
_case("0x0D", LR.NEGATIVE_LENGTH, "C with -1 rows", lambda: compute_ledger(_request(2, rows_tokens=-1)))
_case("0x0D", LR.RESERVATION_BELOW_ROWS, "A reserves 32 rows for 33",
      lambda: compute_ledger(_request(0, reserved_rows_tokens=32)))
_case("0x0D", LR.TABLE_TOO_SHORT, "B has 25 rows and one block", lambda: compute_ledger(_request(1, block_ids=(100,))))
_case("0x0D", LR.TABLE_TOO_LONG, "C has 16 rows and two blocks",
      lambda: compute_ledger(_request(2, block_ids=(100, 101))))
_case("0x0D", LR.DUPLICATE_BLOCK_IN_TABLE, "B maps block 100 twice",
      lambda: compute_ledger(_request(1, block_ids=(100, 100))))
_case("0x0D", LR.DUPLICATE_REQUEST, "two views named A", lambda: compute_ledger(_request(1, request_id="A")))
_case("0x0D", LR.BLOCK_NOT_IN_POOL, "A maps block 99 outside the pool",
      lambda: compute_ledger(_request(0, block_ids=(100, 101, 99))))
_case("0x0D", LR.VALID_ROWS_OUT_OF_RANGE, "block 102 with 17 valid rows",
      lambda: compute_ledger(_fixture(valid_rows_by_block=((100, 16), (101, 16), (102, 17)))))
_case("0x0D", LR.MISSING_VALID_ROWS, "block 102 without a valid-row count",
      lambda: compute_ledger(_fixture(valid_rows_by_block=((100, 16), (101, 16)))))
_case("0x0D", LR.VISIBLE_ROW_NOT_MATERIALIZED, "block 101 with 8 valid rows under B's 9 visible",
      lambda: compute_ledger(_fixture(valid_rows_by_block=((100, 16), (101, 8), (102, 1)))))
_case("0x0D", LR.UNREACHABLE_BLOCK_COUNTED, "free block 103 counted with one valid row",
      lambda: compute_ledger(_fixture(valid_rows_by_block=((100, 16), (101, 16), (102, 1), (103, 1)))))
_case("0x0D", LR.FREE_QUEUE_MISMATCH, "live block 102 also in the free queue",
      lambda: compute_ledger(_fixture(free_queue_block_ids=tuple(range(102, 108)))))
_case("0x0D", LR.CACHED_HASH_NOT_FULL, "partial block 102 given a cached full-block hash",
      lambda: compute_ledger(_fixture(cached_hash_block_ids=(100, 101, 102))))
_case("0x0D", LR.NEGATIVE_RECORD_SIZE, "descriptor record of -32 bytes",
      lambda: compute_ledger(_fixture(record_sizes=attrs.evolve(worked_fixture().record_sizes, descriptor_bytes=-32))))

# ---------------------------------------------------------------- 0x0BN granularity and traversal

TV = TraversalRejection


def _b_with_context(context: int) -> Callable[[], Any]:
    return lambda: decode_traversal(loop4_snapshot(), "B", 1, context_tokens=context)


_case("0x0BN", BlockMapRejection.KERNEL_BLOCK_DOES_NOT_DIVIDE, "kernel block 32 over allocator block 16",
      lambda: expand_block_table([3, 7], 16, 32))
_case("0x0BN", BlockMapRejection.KERNEL_BLOCK_DOES_NOT_DIVIDE, "kernel block 24 over allocator block 32",
      lambda: expand_block_table([3, 7], 32, 24))
_case("0x0BN", BlockMapRejection.NON_POSITIVE_BLOCK_SIZE, "kernel block size 0", lambda: expand_block_table([3], 32, 0))
_case("0x0BN", BlockMapRejection.NEGATIVE_BLOCK_ID, "allocator block id -1", lambda: expand_block_table([-1], 32, 16))
_case("0x0BN", TV.PARTITION_NOT_MULTIPLE, "partition 512 with kernel block 48", lambda: kernel_geometry(2049, 48))
_case("0x0BN", TV.UNSUPPORTED_KERNEL_BLOCK, "kernel block 64 on the pinned V1 launcher", lambda: require_launchable(64))
_case("0x0BN", TV.NEGATIVE_LENGTH, "context of -1 tokens", lambda: kernel_geometry(-1, 16))
_case("0x0BN", TV.EMPTY_BATCH, "ragged ledger of no requests", lambda: ragged_table_ledger([], 16))
_case("0x0BN", TelemetryRejection.COUNTER_DECREASE, "0x0BL hit-token counter observed going down",
      lambda: GranularityCounters().observe_prefix_hit(-16, 0))
_case("0x0BN", TV.PADDING_CELL_READ, "padding cell of the 1-token row read as a block",
      lambda: read_table_cell([5, PAD, PAD, PAD], 1))
_case("0x0BN", TV.READ_PAST_VISIBLE, "kernel told 26 tokens for B's 25", _b_with_context(26))
_case("0x0BN", TV.READ_PAST_MATERIALIZED, "tile reads 9 rows of a block with 8 valid",
      lambda: decode_traversal(_with_descriptor(1, 2001, valid_rows=8), "B", 1))
_case("0x0BN", TR.STALE_PHYSICAL_GENERATION, "tile loads a stale handle",
      lambda: decode_traversal(_with_g1_entry(1, BlockHandle(1, 1, 2001, 6)), "A", 1))
_case("0x0BN", TV.SUFFIX_COUNT_MISMATCH, "seven suffixes for eight queries",
      lambda: chunk_ledger(16, suffix_tokens=(8, 8, 8, 8, 16, 16, 16)))
_case("0x0BN", TV.PAGE_GROUP_NOT_MULTIPLE, "page group of 3,000 bytes over 2,048-byte rows",
      lambda: page_group_row(3000, 1024))
_case("0x0BN", TV.NON_POSITIVE_SIZE, "page group of 0 bytes", lambda: page_group_row(0, 1024))
_case("0x0BN", LR.POOL_NOT_WHOLE_BLOCKS, "128 pool slots with 48-token blocks", lambda: nested_prefix_cost(48))
_case("0x0BN", LR.NEGATIVE_LENGTH, "empty prompt under the logits cap", lambda: nested_prefix_cost(16, (33, 25, 0)))

__all__ = ["SECTIONS", "SEED_MINIMUM", "producer_manifest", "GroupPool", "PoolDescriptor", "RequestView"]
