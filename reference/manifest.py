"""Immutable cache identity: the layout manifest, the compatibility manifest, and the reuse gate (0x01A).

:class:`CacheLayoutManifest` freezes how bytes are addressed (groups, axes, strides, dtype, TP rank,
block sizes); :class:`CacheCompatibilityManifest` combines it with the semantic and administrative
facts that must be equal before old K/V may be exposed. Digests are SHA-256 over the canonical
encoding (sorted field names), so declaration order never changes a digest and every
equality-bearing field does. Provenance (tokenizer and chat-template revisions, request id, sampling
policy) is recorded but excluded from the compatibility digest and from the gate.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from kvexact.reference.digests import sha256_hex
from kvexact.reference.formulas import formula
from kvexact.reference.ledgers import group_row_bytes
from kvexact.reference.rejections import Rejected

AXES = ("layer_local", "physical_slot", "token_offset", "kv_head_local", "head_dim")


def as_tuple(values: Iterable[Any]) -> tuple[Any, ...]:
    """attrs converter: any iterable to a tuple, so records stay immutable and hashable."""
    return tuple(values)


class LayoutRejection(enum.Enum):
    NON_POSITIVE_SIZE = "a size (layers, heads, width, scalar bytes, block size, slots) is not positive"
    DUPLICATE_AXIS = "an axis appears twice in the axis order"
    MISSING_AXIS = "the axis order lacks a required axis"
    UNKNOWN_AXIS = "the axis order names an unknown axis"
    STRIDE_SHAPE_MISMATCH = "declared strides disagree with the row-major strides of the shape"
    NO_CACHE_GROUPS = "a layout needs at least one cache group"
    DUPLICATE_GROUP_ID = "two cache groups share an id"
    LAYER_IN_NO_GROUP = "a model layer belongs to no cache group"
    LAYER_IN_TWO_GROUPS = "a model layer belongs to two cache groups"
    LAYER_OUT_OF_MODEL = "a cache group names a layer outside the model"
    BAD_TP_RANK = "tensor-parallel rank must satisfy 0 <= rank < world size"
    BLOCK_SIZE_FOR_MODE = "paged blocks need a token block size, virtual pages need a page size"
    HASH_BLOCK_NOT_DIVIDING = "the hash block size must divide every group's block size"


class PhysicalMode(enum.Enum):
    RECTANGULAR = "rectangular"
    PAGED_BLOCKS = "paged_blocks"
    VIRTUAL_PAGES = "virtual_pages"


class CompatibilityRejection(enum.Enum):
    CACHE_ABI_MISMATCH = "cache_abi_sha256"
    LAYOUT_MISMATCH = "cache_layout_sha256"
    MODEL_GENERATION_MISMATCH = "model_generation"
    ADAPTER_MISMATCH = "adapter_identity"
    WEIGHT_TRANSFORM_MISMATCH = "weight_transform_identity"
    POSITION_CONTRACT_MISMATCH = "position_contract_sha256"
    COVERED_TOKENS_MISMATCH = "covered_token_ids"
    INPUT_SIDE_DATA_MISMATCH = "input_side_data_identity"
    NAMESPACE_MISMATCH = "cache_isolation_namespace"
    CACHE_SALT_MISMATCH = "cache_salt"
    PUBLICATION_GENERATION_MISMATCH = "publication_generation"
    # refinements of LAYOUT_MISMATCH when both layouts are at hand (source-to-tensor trace)
    TP_RANK_MISMATCH = "tp_world_size/tp_rank"
    CACHE_GROUP_MISMATCH = "cache_groups (ids, layers, heads, width)"
    DTYPE_MISMATCH = "storage dtype or scalar widths"
    QUANTIZATION_SCHEMA_MISMATCH = "quantization_schema"
    AXIS_STRIDE_MISMATCH = "axis order or strides"


def _positive(value: Any, where: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise Rejected(LayoutRejection.NON_POSITIVE_SIZE, f"{where}={value!r}")


@formula("addr.row_major_stride", units="elements", convention="row-major teaching layout over the declared "
         "axis order; product of the dimensions to the right", location="0x03E")
def row_major_stride(ops, dims, axis):
    out = 1
    for d in dims[axis + 1:]:
        out = out * d
    return out


def row_major_strides(dims: Sequence[int]) -> tuple[int, ...]:
    """S_a = product of the dimensions to the right of axis a (0x03E)."""
    return tuple(row_major_stride(dims=list(dims), axis=a) for a in range(len(dims)))


@attrs.frozen
class CacheGroupLayout:
    """One cache group's K (and identically shaped V) tensor: layers, heads, dtype, axes and strides."""

    cache_group_id: int
    layer_ids: tuple[int, ...] = attrs.field(converter=as_tuple)
    kv_heads_local: int
    head_dim: int
    storage_dtype: str
    k_scalar_bytes: int
    v_scalar_bytes: int
    block_size_tokens: int
    num_slots: int
    axis_order: tuple[str, ...] = attrs.field(converter=as_tuple)
    strides: tuple[int, ...] | None = attrs.field(default=None, converter=attrs.converters.optional(as_tuple))

    def __attrs_post_init__(self) -> None:
        where = f"group {self.cache_group_id}"
        if not isinstance(self.cache_group_id, int) or self.cache_group_id < 0:
            raise Rejected(LayoutRejection.NON_POSITIVE_SIZE, f"cache_group_id={self.cache_group_id!r}")
        if not self.layer_ids:
            raise Rejected(LayoutRejection.NON_POSITIVE_SIZE, f"{where}: no layers")
        for name in ("kv_heads_local", "head_dim", "k_scalar_bytes", "v_scalar_bytes", "block_size_tokens",
                     "num_slots"):
            _positive(getattr(self, name), f"{where}: {name}")
        seen: set[str] = set()
        for axis in self.axis_order:
            if axis not in AXES:
                raise Rejected(LayoutRejection.UNKNOWN_AXIS, f"{where}: {axis!r}")
            if axis in seen:
                raise Rejected(LayoutRejection.DUPLICATE_AXIS, f"{where}: {axis!r} in {self.axis_order}")
            seen.add(axis)
        missing = [a for a in AXES if a not in seen]
        if missing:
            raise Rejected(LayoutRejection.MISSING_AXIS, f"{where}: {missing}")
        if self.strides is not None and tuple(self.strides) != row_major_strides(self.shape):
            raise Rejected(LayoutRejection.STRIDE_SHAPE_MISMATCH,
                           f"{where}: strides {self.strides} for shape {self.shape} "
                           f"(row-major {row_major_strides(self.shape)})")

    @property
    def dims_by_axis(self) -> dict[str, int]:
        return {"layer_local": len(self.layer_ids), "physical_slot": self.num_slots,
                "token_offset": self.block_size_tokens, "kv_head_local": self.kv_heads_local,
                "head_dim": self.head_dim}

    @property
    def shape(self) -> tuple[int, ...]:
        """Dimensions in the declared axis order."""
        dims = self.dims_by_axis
        return tuple(dims[a] for a in self.axis_order)

    @property
    def element_strides(self) -> tuple[int, ...]:
        return row_major_strides(self.shape)

    @property
    def row_bytes(self) -> int:
        """B_row,g: bytes per token of this group on this rank (K plus V, all its layers)."""
        return group_row_bytes(layers=len(self.layer_ids), kv_heads_local=self.kv_heads_local,
                               head_dim=self.head_dim, k_scalar_bytes=self.k_scalar_bytes,
                               v_scalar_bytes=self.v_scalar_bytes)

    def layer_local(self, layer: int) -> int:
        return self.layer_ids.index(layer)


@attrs.frozen
class CacheLayoutManifest:
    """How every later block-table or page-map entry is interpreted; immutable per cache generation."""

    schema_version: int
    manifest_id: str
    logical_cache_abi_sha256: str
    model_generation: int
    num_layers: int
    cache_groups: tuple[CacheGroupLayout, ...] = attrs.field(converter=as_tuple)
    physical_mode: PhysicalMode
    token_block_size: int | None
    physical_page_bytes: int | None
    scheduler_block_size: int
    hash_block_size: int
    tp_world_size: int
    tp_rank: int
    quantization_schema: str | None
    position_contract_id: str
    allocator_revision: str

    def __attrs_post_init__(self) -> None:
        _positive(self.num_layers, "num_layers")
        _positive(self.scheduler_block_size, "scheduler_block_size")
        _positive(self.hash_block_size, "hash_block_size")
        _positive(self.tp_world_size, "tp_world_size")
        if not isinstance(self.tp_rank, int) or not 0 <= self.tp_rank < self.tp_world_size:
            raise Rejected(LayoutRejection.BAD_TP_RANK, f"rank {self.tp_rank} of {self.tp_world_size}")
        if self.physical_mode is PhysicalMode.PAGED_BLOCKS and self.token_block_size is None:
            raise Rejected(LayoutRejection.BLOCK_SIZE_FOR_MODE, "paged_blocks without token_block_size")
        if self.physical_mode is PhysicalMode.VIRTUAL_PAGES and self.physical_page_bytes is None:
            raise Rejected(LayoutRejection.BLOCK_SIZE_FOR_MODE, "virtual_pages without physical_page_bytes")
        if self.token_block_size is not None:
            _positive(self.token_block_size, "token_block_size")
        if self.physical_page_bytes is not None:
            _positive(self.physical_page_bytes, "physical_page_bytes")
        if not self.cache_groups:
            raise Rejected(LayoutRejection.NO_CACHE_GROUPS, self.manifest_id)
        ids = [g.cache_group_id for g in self.cache_groups]
        if len(set(ids)) != len(ids):
            raise Rejected(LayoutRejection.DUPLICATE_GROUP_ID, f"group ids {ids}")
        owner: dict[int, int] = {}
        for g in self.cache_groups:
            if g.block_size_tokens % self.hash_block_size:
                raise Rejected(LayoutRejection.HASH_BLOCK_NOT_DIVIDING,
                               f"hash block {self.hash_block_size}, group {g.cache_group_id} block "
                               f"{g.block_size_tokens}")
            for layer in g.layer_ids:
                if not isinstance(layer, int) or not 0 <= layer < self.num_layers:
                    raise Rejected(LayoutRejection.LAYER_OUT_OF_MODEL, f"group {g.cache_group_id}: layer {layer}")
                if layer in owner:
                    raise Rejected(LayoutRejection.LAYER_IN_TWO_GROUPS,
                                   f"layer {layer} in groups {owner[layer]} and {g.cache_group_id}")
                owner[layer] = g.cache_group_id
        gaps = [layer for layer in range(self.num_layers) if layer not in owner]
        if gaps:
            raise Rejected(LayoutRejection.LAYER_IN_NO_GROUP, f"layers {gaps}")

    @property
    def digest(self) -> str:
        """cache_layout_sha256: every field is equality-bearing."""
        return sha256_hex(self)

    def group(self, cache_group_id: int) -> CacheGroupLayout:
        for g in self.cache_groups:
            if g.cache_group_id == cache_group_id:
                return g
        raise KeyError(f"no cache group {cache_group_id} in {self.manifest_id}")

    def group_of_layer(self, layer: int) -> CacheGroupLayout:
        """The unique group containing ``layer`` (validation guarantees exactly one)."""
        for g in self.cache_groups:
            if layer in g.layer_ids:
                return g
        raise Rejected(LayoutRejection.LAYER_IN_NO_GROUP, f"layer {layer}")

    @property
    def row_bytes_rank(self) -> int:
        from kvexact.reference.ledgers import row_bytes_rank

        return row_bytes_rank(group_row_bytes=[g.row_bytes for g in self.cache_groups])


def explain_layout_mismatch(a: CacheLayoutManifest, b: CacheLayoutManifest) -> CompatibilityRejection | None:
    """The first source-to-tensor reason two layouts differ, or None when their digests are equal."""
    if a.digest == b.digest:
        return None
    if (a.tp_world_size, a.tp_rank) != (b.tp_world_size, b.tp_rank):
        return CompatibilityRejection.TP_RANK_MISMATCH

    def shape_key(m: CacheLayoutManifest) -> list[tuple]:
        return [(g.cache_group_id, g.layer_ids, g.kv_heads_local, g.head_dim) for g in m.cache_groups]

    if shape_key(a) != shape_key(b):
        return CompatibilityRejection.CACHE_GROUP_MISMATCH
    if [(g.storage_dtype, g.k_scalar_bytes, g.v_scalar_bytes) for g in a.cache_groups] != \
            [(g.storage_dtype, g.k_scalar_bytes, g.v_scalar_bytes) for g in b.cache_groups]:
        return CompatibilityRejection.DTYPE_MISMATCH
    if a.quantization_schema != b.quantization_schema:
        return CompatibilityRejection.QUANTIZATION_SCHEMA_MISMATCH
    if [(g.axis_order, g.element_strides) for g in a.cache_groups] != \
            [(g.axis_order, g.element_strides) for g in b.cache_groups]:
        return CompatibilityRejection.AXIS_STRIDE_MISMATCH
    return CompatibilityRejection.LAYOUT_MISMATCH


@attrs.frozen
class Provenance:
    """Recorded for audit and replay; never equality-bearing."""

    tokenizer_revision: str = ""
    chat_template_revision: str = ""
    request_id: str = ""
    sampling_policy: str = ""


@attrs.frozen
class CacheCompatibilityManifest:
    """The semantic reuse gate's facts; ``provenance`` is excluded from :attr:`digest` and the gate."""

    cache_abi_sha256: str
    cache_layout_sha256: str
    model_generation: int
    adapter_identity: str
    weight_transform_identity: str
    position_contract_sha256: str
    covered_token_ids: tuple[int, ...] = attrs.field(converter=as_tuple)
    input_side_data_identity: str = ""
    cache_isolation_namespace: tuple[str, int] = ("", 0)
    cache_salt: str | None = None
    publication_generation: int = 0
    provenance: Provenance = Provenance()

    @property
    def digest(self) -> str:
        """SHA-256 over the equality-bearing fields only."""
        return sha256_hex({k: v for k, v in attrs.asdict(self, recurse=False).items() if k != "provenance"})


GATE_ORDER = (
    CompatibilityRejection.CACHE_ABI_MISMATCH, CompatibilityRejection.LAYOUT_MISMATCH,
    CompatibilityRejection.MODEL_GENERATION_MISMATCH, CompatibilityRejection.ADAPTER_MISMATCH,
    CompatibilityRejection.WEIGHT_TRANSFORM_MISMATCH, CompatibilityRejection.POSITION_CONTRACT_MISMATCH,
    CompatibilityRejection.COVERED_TOKENS_MISMATCH, CompatibilityRejection.INPUT_SIDE_DATA_MISMATCH,
    CompatibilityRejection.NAMESPACE_MISMATCH, CompatibilityRejection.CACHE_SALT_MISMATCH,
    CompatibilityRejection.PUBLICATION_GENERATION_MISMATCH,
)


@attrs.frozen
class CompatibilityVerdict:
    """The gate's answer: compatible, or the first failing field and its named rejection."""

    compatible: bool
    failing_field: str | None = None
    rejection: CompatibilityRejection | None = None


def semantic_cache_compatible(producer: CacheCompatibilityManifest, consumer: CacheCompatibilityManifest,
                              producer_layout: CacheLayoutManifest | None = None,
                              consumer_layout: CacheLayoutManifest | None = None) -> CompatibilityVerdict:
    """Compare equality-bearing fields in the seed's order; the first difference decides.

    When both layouts are given and the layout digests differ, the reason is refined to the first
    source-to-tensor difference (TP rank, cache group, dtype, quantization, axes/strides).
    """
    for reason in GATE_ORDER:
        name = reason.value
        if getattr(producer, name) != getattr(consumer, name):
            if reason is CompatibilityRejection.LAYOUT_MISMATCH and producer_layout and consumer_layout:
                reason = explain_layout_mismatch(producer_layout, consumer_layout) or reason
            return CompatibilityVerdict(False, name, reason)
    return CompatibilityVerdict(True)


def input_side_data_identity(mm_feature_ids: Sequence[tuple[str, int, int]] = (),
                             prompt_embeds_sha256: str | None = None) -> str:
    """Digest of the side inputs (multimodal ``(identifier, start, length)`` and prompt embeddings)."""
    return sha256_hex({"mm": sorted(tuple(f) for f in mm_feature_ids), "prompt_embeds": prompt_embeds_sha256})
