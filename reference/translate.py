"""Address translation: physical refs, per-group block tables, and the reference translator (0x03).

A read names ``(request snapshot, token, layer, K|V, head, lane)``. The translator resolves it in the
seed's order, rejecting by name at the first failing step:

    request visibility -> layer's group -> table bounds -> physical identity (group, pool, known id,
    current generation) -> physical validity (offset < valid rows) -> head, lane, kind -> tensor range

A physical block is named by the project's one handle type, :class:`BlockHandle`
``(pool_id, cache_group_id, block_id, generation)`` (the seed's ``PhysicalRef_g``); a pool resolves the
id through its descriptor table to a slot and valid rows, and never assumes slot == id. A slot id
(``slot * P + offset``) is not a byte address: the address needs the group's axis order and strides.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

import attrs

from kvexact.reference.formulas import formula
from kvexact.reference.handles import BlockHandle
from kvexact.reference.manifest import (
    CacheGroupLayout,
    CacheLayoutManifest,
    PhysicalMode,
)
from kvexact.reference.rejections import Rejected

PhysicalRef = BlockHandle  # the seed's PhysicalRef_g = (group, pool, generation, block): one handle type
KV_KINDS = ("K", "V")


def as_tuple(values: Iterable[Any]) -> tuple[Any, ...]:
    """attrs converter: any iterable to a tuple, so records stay immutable and hashable."""
    return tuple(values)


class TranslateRejection(enum.Enum):
    UNKNOWN_REQUEST = "the snapshot has no such request"
    TOKEN_NOT_VISIBLE = "the token is outside the request's logical context"
    TABLE_INDEX_OUT_OF_RANGE = "the logical block is beyond the request's group table"
    WRONG_GROUP_HANDLE = "the table entry names a block of another cache group"
    WRONG_POOL = "the table entry names a block of another pool"
    UNKNOWN_PHYSICAL_ID = "the pool has no descriptor for the block id"
    STALE_PHYSICAL_GENERATION = "the handle's generation is not the descriptor's current generation"
    ROW_NOT_MATERIALIZED = "the token offset is not below the block's valid rows"
    HEAD_OUT_OF_RANGE = "the K/V head is not a local head of the group"
    LANE_OUT_OF_RANGE = "the lane is outside the head dimension"
    BAD_KV_KIND = "the tensor kind must be K or V"
    ADDRESS_OUT_OF_TENSOR = "the byte address falls outside the tensor's range"
    TABLE_LENGTH_DRIFT = "a group table's length is not ceil(context / P_g)"
    SLOT_REUSED = "two live descriptors share one physical slot"
    SLOT_OUT_OF_RANGE = "a descriptor's slot is outside the group's slot axis"
    VALID_ROWS_OUT_OF_RANGE = "a descriptor's valid rows exceed the block size"
    BUNDLE_MISMATCH = "one logical block has different valid rows in different groups"
    MISSING_GROUP_POOL = "a cache group has no pool placement, or a pool names no group"
    MISSING_GROUP_TABLE = "a request lacks the table of a cache group"
    OVERLAPPING_TENSOR_RANGES = "two tensors' byte ranges overlap"
    STALE_SUCCESSOR_VERSION = "a successor snapshot must carry a newer table version"
    REQUEST_GENERATION_DRIFT = "a successor snapshot belongs to another request generation"
    FROZEN_ADDRESS_DRIFT = "a frozen address no longer resolves to the recorded byte address"
    NOT_PAGED = "the translator needs a paged_blocks layout"


# ---------------------------------------------------------------- formulas (0x03C-0x03F)


@formula("addr.logical_block", units="blocks", convention="per cache group, j_g = t // P_g", location="0x03C")
def logical_block(ops, token, block_tokens):
    return ops.floordiv(token, block_tokens)


@formula("addr.token_offset", units="token slots", convention="per cache group, o_g = t mod P_g",
         location="0x03C")
def token_offset(ops, token, block_tokens):
    return ops.mod(token, block_tokens)


@formula("addr.slot_id", units="token slots", convention="a token-row id within one group pool; not a byte "
         "address", location="0x03D")
def slot_id(ops, physical_slot, block_tokens, offset):
    return physical_slot * block_tokens + offset


@formula("addr.element_offset", units="elements", convention="dot product of the coordinate and strides in "
         "the declared axis order", location="0x03E")
def element_offset(ops, coordinate, strides):
    return ops.total(c * s for c, s in zip(coordinate, strides, strict=True))


@formula("addr.byte_address", units="bytes", convention="base of K or V plus scalar bytes x element offset",
         location="0x03E")
def byte_address(ops, base_address, scalar_bytes, element_offset):
    return base_address + scalar_bytes * element_offset


@formula("addr.tensor_bytes", units="bytes", convention="one K or V tensor of a group: product of its "
         "dimensions x scalar bytes", location="0x03E")
def tensor_bytes(ops, dims, scalar_bytes):
    out = scalar_bytes
    for d in dims:
        out = out * d
    return out


# ---------------------------------------------------------------- records


@attrs.frozen
class PoolDescriptor:
    """A block id's current generation, physical slot, and committed (valid) rows."""

    block_id: int
    generation: int
    physical_slot: int
    valid_rows: int


@attrs.frozen
class GroupPool:
    """One group's pool: identity, K and V base addresses, and the descriptor table."""

    cache_group_id: int
    pool_id: int
    k_base_address: int
    v_base_address: int
    descriptors: tuple[PoolDescriptor, ...] = attrs.field(converter=as_tuple)

    def descriptor(self, block_id: int) -> PoolDescriptor | None:
        for d in self.descriptors:
            if d.block_id == block_id:
                return d
        return None


@attrs.frozen
class RequestSnapshot:
    """A request at one table version: context length and one block table per cache group."""

    request_id: str
    request_generation: int
    table_version: int
    context_length_tokens: int
    block_tables: tuple[tuple[int, tuple[BlockHandle, ...]], ...] = attrs.field(
        converter=lambda tables: tuple((g, tuple(t)) for g, t in tables))

    def table(self, cache_group_id: int) -> tuple[BlockHandle, ...]:
        for g, t in self.block_tables:
            if g == cache_group_id:
                return t
        raise Rejected(TranslateRejection.MISSING_GROUP_TABLE, f"request {self.request_id}, group {cache_group_id}")


@attrs.frozen
class KVSnapshot:
    """An immutable, validated view: layout, one pool per group, and the live request snapshots."""

    layout: CacheLayoutManifest
    pools: tuple[GroupPool, ...] = attrs.field(converter=as_tuple)
    requests: tuple[RequestSnapshot, ...] = attrs.field(converter=as_tuple)

    def pool(self, cache_group_id: int) -> GroupPool:
        for p in self.pools:
            if p.cache_group_id == cache_group_id:
                return p
        raise Rejected(TranslateRejection.MISSING_GROUP_POOL, f"group {cache_group_id}")

    def request(self, request_id: str) -> RequestSnapshot:
        for r in self.requests:
            if r.request_id == request_id:
                return r
        raise Rejected(TranslateRejection.UNKNOWN_REQUEST, request_id)


@attrs.frozen
class ResolvedAddress:
    """The translator's receipt: the handle read, its slot id, and the byte address (distinct quantities)."""

    handle: BlockHandle
    cache_group_id: int
    layer_local: int
    logical_block: int
    token_offset: int
    slot_id: int
    coordinate: tuple[int, ...]
    element_offset: int
    byte_offset: int
    byte_address: int


def tensor_range(group: CacheGroupLayout, pool: GroupPool, kind: str) -> tuple[int, int]:
    """``[base, end)`` of the group's K or V tensor."""
    scalar = group.k_scalar_bytes if kind == "K" else group.v_scalar_bytes
    base = pool.k_base_address if kind == "K" else pool.v_base_address
    return base, base + tensor_bytes(dims=list(group.shape), scalar_bytes=scalar)


def validate_snapshot(s: KVSnapshot) -> None:
    """Reject a snapshot whose tables, descriptors or tensor ranges break the address contract."""
    if s.layout.physical_mode is not PhysicalMode.PAGED_BLOCKS:
        raise Rejected(TranslateRejection.NOT_PAGED, s.layout.physical_mode.value)
    group_ids = {g.cache_group_id for g in s.layout.cache_groups}
    if {p.cache_group_id for p in s.pools} != group_ids or len(s.pools) != len(group_ids):
        raise Rejected(TranslateRejection.MISSING_GROUP_POOL,
                       f"pools for groups {sorted(p.cache_group_id for p in s.pools)}, layout has {sorted(group_ids)}")
    ranges: list[tuple[int, int, str]] = []
    for g in s.layout.cache_groups:
        pool = s.pool(g.cache_group_id)
        slots: dict[int, int] = {}
        for d in pool.descriptors:
            if not 0 <= d.physical_slot < g.num_slots:
                raise Rejected(TranslateRejection.SLOT_OUT_OF_RANGE, f"block {d.block_id}: slot {d.physical_slot}")
            if d.physical_slot in slots:
                raise Rejected(TranslateRejection.SLOT_REUSED,
                               f"blocks {slots[d.physical_slot]} and {d.block_id} share slot {d.physical_slot}")
            slots[d.physical_slot] = d.block_id
            if not 0 <= d.valid_rows <= g.block_size_tokens:
                raise Rejected(TranslateRejection.VALID_ROWS_OUT_OF_RANGE, f"block {d.block_id}: {d.valid_rows}")
        for kind in KV_KINDS:
            lo, hi = tensor_range(g, pool, kind)
            ranges.append((lo, hi, f"g{g.cache_group_id}.{kind}"))
    ranges.sort()
    for (_lo1, hi1, n1), (lo2, _hi2, n2) in zip(ranges, ranges[1:], strict=False):
        if lo2 < hi1:
            raise Rejected(TranslateRejection.OVERLAPPING_TENSOR_RANGES, f"{n1} overlaps {n2}")
    for r in s.requests:
        rows_by_block: dict[tuple[int, int], list[int]] = {}
        for g in s.layout.cache_groups:
            table = r.table(g.cache_group_id)
            need = -(-r.context_length_tokens // g.block_size_tokens)
            if len(table) != need:
                raise Rejected(TranslateRejection.TABLE_LENGTH_DRIFT,
                               f"request {r.request_id} group {g.cache_group_id}: {len(table)} entries, needs {need}")
            for j, h in enumerate(table):
                found = s.pool(g.cache_group_id).descriptor(h.block_id)
                if found is not None:
                    rows_by_block.setdefault((g.block_size_tokens, j), []).append(found.valid_rows)
        for (_p, j), rows in rows_by_block.items():
            if len(set(rows)) > 1:
                raise Rejected(TranslateRejection.BUNDLE_MISMATCH,
                               f"request {r.request_id} logical block {j}: valid rows {rows} across groups")


def resolve_kv_address(s: KVSnapshot, request_id: str, token: int, layer: int, kind: str, head: int,
                       lane: int) -> ResolvedAddress:
    """The reference translator of 0x03I: one scalar's slot id and byte address, checked in order."""
    request = s.request(request_id)
    if not 0 <= token < request.context_length_tokens:
        raise Rejected(TranslateRejection.TOKEN_NOT_VISIBLE,
                       f"token {token}, request {request_id} has context {request.context_length_tokens}")
    group = s.layout.group_of_layer(layer)
    P = group.block_size_tokens
    layer_local = group.layer_local(layer)
    j = logical_block(token=token, block_tokens=P)
    o = token_offset(token=token, block_tokens=P)
    table = request.table(group.cache_group_id)
    if j >= len(table):
        raise Rejected(TranslateRejection.TABLE_INDEX_OUT_OF_RANGE, f"logical block {j} of {len(table)}")
    handle = table[j]
    pool = s.pool(group.cache_group_id)
    if handle.cache_group_id != group.cache_group_id:
        raise Rejected(TranslateRejection.WRONG_GROUP_HANDLE, f"{handle} in group {group.cache_group_id}'s table")
    if handle.pool_id != pool.pool_id:
        raise Rejected(TranslateRejection.WRONG_POOL, f"{handle}, group pool is {pool.pool_id}")
    desc = pool.descriptor(handle.block_id)
    if desc is None:
        raise Rejected(TranslateRejection.UNKNOWN_PHYSICAL_ID, str(handle))
    if desc.generation != handle.generation:
        raise Rejected(TranslateRejection.STALE_PHYSICAL_GENERATION,
                       f"{handle}, descriptor generation {desc.generation}")
    if o >= desc.valid_rows:
        raise Rejected(TranslateRejection.ROW_NOT_MATERIALIZED, f"offset {o}, valid rows {desc.valid_rows}")
    if not 0 <= head < group.kv_heads_local:
        raise Rejected(TranslateRejection.HEAD_OUT_OF_RANGE, f"head {head} of {group.kv_heads_local}")
    if not 0 <= lane < group.head_dim:
        raise Rejected(TranslateRejection.LANE_OUT_OF_RANGE, f"lane {lane} of {group.head_dim}")
    if kind not in KV_KINDS:
        raise Rejected(TranslateRejection.BAD_KV_KIND, repr(kind))
    by_axis = {"physical_slot": desc.physical_slot, "layer_local": layer_local, "kv_head_local": head,
               "token_offset": o, "head_dim": lane}
    coordinate = tuple(by_axis[a] for a in group.axis_order)
    e = element_offset(coordinate=list(coordinate), strides=list(group.element_strides))
    scalar = group.k_scalar_bytes if kind == "K" else group.v_scalar_bytes
    base, end = tensor_range(group, pool, kind)
    address = byte_address(base_address=base, scalar_bytes=scalar, element_offset=e)
    if not base <= address < end:
        raise Rejected(TranslateRejection.ADDRESS_OUT_OF_TENSOR, f"{address} outside [{base}, {end})")
    return ResolvedAddress(handle=handle, cache_group_id=group.cache_group_id, layer_local=layer_local,
                           logical_block=j, token_offset=o,
                           slot_id=slot_id(physical_slot=desc.physical_slot, block_tokens=P, offset=o),
                           coordinate=coordinate, element_offset=e, byte_offset=scalar * e, byte_address=address)


def consume_successor(current: KVSnapshot, successor: KVSnapshot, request_id: str) -> KVSnapshot:
    """Adopt a published successor: same request generation, strictly newer table version, valid."""
    old, new = current.request(request_id), successor.request(request_id)
    if new.request_generation != old.request_generation:
        raise Rejected(TranslateRejection.REQUEST_GENERATION_DRIFT,
                       f"{request_id}: generation {old.request_generation} -> {new.request_generation}")
    if new.table_version <= old.table_version:
        raise Rejected(TranslateRejection.STALE_SUCCESSOR_VERSION,
                       f"{request_id}: version {old.table_version} -> {new.table_version}")
    validate_snapshot(successor)
    return successor


@attrs.frozen
class FrozenAddress:
    """An address recorded at one table version, to be re-checked against a later snapshot."""

    request_id: str
    table_version: int
    token: int
    layer: int
    kind: str
    head: int
    lane: int
    byte_address: int


def check_frozen_address(s: KVSnapshot, frozen: FrozenAddress) -> ResolvedAddress:
    """Re-resolve ``frozen``; the snapshot must be at its version and give the same byte address."""
    request = s.request(frozen.request_id)
    if request.table_version != frozen.table_version:
        raise Rejected(TranslateRejection.STALE_SUCCESSOR_VERSION,
                       f"frozen at version {frozen.table_version}, snapshot at {request.table_version}")
    got = resolve_kv_address(s, frozen.request_id, frozen.token, frozen.layer, frozen.kind, frozen.head, frozen.lane)
    if got.byte_address != frozen.byte_address:
        raise Rejected(TranslateRejection.FROZEN_ADDRESS_DRIFT, f"{frozen.byte_address} -> {got.byte_address}")
    return got
