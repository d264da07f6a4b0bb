"""0x01A: layout and compatibility manifests, digests, and the semantic reuse gate."""

import hashlib

import attrs
import pytest

from kvexact.reference.digests import canonical_bytes, sha256_hex
from kvexact.reference.labs.reference1 import producer_manifest
from kvexact.reference.labs.translate import loop4_layout
from kvexact.reference.manifest import (
    CacheCompatibilityManifest,
    CacheGroupLayout,
    CompatibilityRejection,
    LayoutRejection,
    Provenance,
    explain_layout_mismatch,
    row_major_strides,
    semantic_cache_compatible,
)
from kvexact.reference.rejections import Rejected

EQUALITY_FIELDS = [f.name for f in attrs.fields(CacheCompatibilityManifest) if f.name != "provenance"]


def test_digest_ignores_field_order():
    m = producer_manifest()
    fields = {k: v for k, v in attrs.asdict(m, recurse=False).items() if k != "provenance"}
    reversed_fields = dict(reversed(list(fields.items())))
    assert m.digest == sha256_hex(reversed_fields) == sha256_hex(fields)
    assert canonical_bytes({"b": 1, "a": 2}) == canonical_bytes({"a": 2, "b": 1})
    assert m.digest == hashlib.sha256(canonical_bytes(fields)).hexdigest()


@pytest.mark.parametrize("name", EQUALITY_FIELDS)
def test_every_equality_field_changes_the_digest_and_fails_the_gate(name):
    value = getattr(producer_manifest(), name)
    changed = {
        int: lambda v: v + 1, str: lambda v: v + "-x", tuple: lambda v: (*v, 0) if name != "cache_isolation_namespace"
        else (v[0], v[1] + 1),
    }[type(value)](value)
    other = producer_manifest(**{name: changed})
    assert other.digest != producer_manifest().digest
    verdict = semantic_cache_compatible(producer_manifest(), other)
    assert not verdict.compatible and verdict.failing_field == name
    assert verdict.rejection is CompatibilityRejection(name)


def test_provenance_is_recorded_but_not_equality_bearing():
    a = producer_manifest(provenance=Provenance("tok-1", "tpl-1", "req-1", "temperature=0"))
    b = producer_manifest(provenance=Provenance("tok-2", "tpl-9", "req-2", "temperature=1"))
    assert a.provenance != b.provenance and a.digest == b.digest
    assert semantic_cache_compatible(a, b).compatible


def test_first_failing_field_in_seed_order():
    consumer = producer_manifest(cache_salt="other", adapter_identity="lora-x", publication_generation=9)
    verdict = semantic_cache_compatible(producer_manifest(), consumer)
    assert verdict.failing_field == "adapter_identity"
    assert verdict.rejection is CompatibilityRejection.ADAPTER_MISMATCH


def test_source_to_tensor_trace_four_rejections():
    """Same 16 token ids; adapter, position contract, TP rank, dtype each make reuse illegal."""
    p = producer_manifest()
    assert len(p.covered_token_ids) == 16
    assert semantic_cache_compatible(p, producer_manifest(adapter_identity="lora-a")).rejection \
        is CompatibilityRejection.ADAPTER_MISMATCH
    assert semantic_cache_compatible(p, producer_manifest(position_contract_sha256="rope-ntk")).rejection \
        is CompatibilityRejection.POSITION_CONTRACT_MISMATCH
    base = loop4_layout()
    for layout, reason in (
        (loop4_layout(tp_rank=1), CompatibilityRejection.TP_RANK_MISMATCH),
        (loop4_layout(cache_groups=tuple(attrs.evolve(g, storage_dtype="fp8-e4m3") for g in base.cache_groups)),
         CompatibilityRejection.DTYPE_MISMATCH),
        (loop4_layout(quantization_schema="int8"), CompatibilityRejection.QUANTIZATION_SCHEMA_MISMATCH),
    ):
        consumer = producer_manifest(cache_layout_sha256=layout.digest)
        assert semantic_cache_compatible(p, consumer, base, layout).rejection is reason
        assert semantic_cache_compatible(p, consumer).rejection is CompatibilityRejection.LAYOUT_MISMATCH
    assert explain_layout_mismatch(base, loop4_layout()) is None
    assert explain_layout_mismatch(base, loop4_layout(allocator_revision="r2")) is CompatibilityRejection.LAYOUT_MISMATCH


def test_layout_row_bytes_and_groups():
    layout = loop4_layout()
    assert [g.row_bytes for g in layout.cache_groups] == [48 * 1024, 16 * 1024]
    assert layout.row_bytes_rank == 64 * 1024
    assert [16 * g.row_bytes for g in layout.cache_groups] == [768 * 1024, 256 * 1024]  # 1 MiB bundle
    assert layout.group_of_layer(24).cache_group_id == 1 and layout.group_of_layer(23).cache_group_id == 0
    assert layout.group(1).shape == (8, 8, 16, 4, 128)
    assert row_major_strides((8, 8, 16, 4, 128)) == (65536, 8192, 512, 128, 1)
    # any layout field is equality-bearing
    assert loop4_layout(allocator_revision="r2").digest != layout.digest


G1_AXES = ("layer_local", "physical_slot", "token_offset", "kv_head_local", "head_dim")


@pytest.mark.parametrize("make, reason", [
    (lambda: CacheGroupLayout(1, range(24, 32), 4, 128, "fp16", 2, 2, 16, 8, G1_AXES[:-1] + ("token_offset",)),
     LayoutRejection.DUPLICATE_AXIS),
    (lambda: CacheGroupLayout(1, range(24, 32), 4, 128, "fp16", 2, 2, 16, 8, G1_AXES[:-1]), LayoutRejection.MISSING_AXIS),
    (lambda: CacheGroupLayout(1, range(24, 32), 4, 128, "fp16", 2, 2, 16, 8, G1_AXES[:-1] + ("lane",)),
     LayoutRejection.UNKNOWN_AXIS),
    (lambda: CacheGroupLayout(1, range(24, 32), 4, 128, "fp16", 2, 2, 16, 8, G1_AXES, strides=(1, 1, 1, 1, 1)),
     LayoutRejection.STRIDE_SHAPE_MISMATCH),
    (lambda: CacheGroupLayout(1, range(24, 32), 4, 128, "fp16", 2, 2, 0, 8, G1_AXES), LayoutRejection.NON_POSITIVE_SIZE),
    (lambda: CacheGroupLayout(1, range(24, 32), -4, 128, "fp16", 2, 2, 16, 8, G1_AXES), LayoutRejection.NON_POSITIVE_SIZE),
    (lambda: CacheGroupLayout(1, (), 4, 128, "fp16", 2, 2, 16, 8, G1_AXES), LayoutRejection.NON_POSITIVE_SIZE),
    (lambda: loop4_layout(cache_groups=loop4_layout().cache_groups[1:]), LayoutRejection.LAYER_IN_NO_GROUP),
    (lambda: loop4_layout(cache_groups=()), LayoutRejection.NO_CACHE_GROUPS),
    (lambda: loop4_layout(num_layers=30), LayoutRejection.LAYER_OUT_OF_MODEL),
    (lambda: loop4_layout(tp_rank=-1), LayoutRejection.BAD_TP_RANK),
    (lambda: loop4_layout(token_block_size=0), LayoutRejection.NON_POSITIVE_SIZE),
])
def test_malformed_layouts(make, reason):
    with pytest.raises(Rejected) as info:
        make()
    assert info.value.reason is reason
    assert info.value.detail  # says what and where


LAYOUT_CHANGES = {
    "schema_version": 2, "manifest_id": "loop4b", "logical_cache_abi_sha256": "abi-x", "model_generation": 2,
    "physical_mode": None, "token_block_size": 32, "physical_page_bytes": 2 * 1024 * 1024,
    "scheduler_block_size": 32, "hash_block_size": 8, "tp_world_size": 4, "tp_rank": 1,
    "quantization_schema": "fp8", "position_contract_id": "rope-x", "allocator_revision": "r2",
}


@pytest.mark.parametrize("name", sorted(LAYOUT_CHANGES))
def test_every_layout_field_is_equality_bearing(name):
    from kvexact.reference.manifest import PhysicalMode

    value = LAYOUT_CHANGES[name]
    if name == "physical_mode":
        changed = loop4_layout(physical_mode=PhysicalMode.VIRTUAL_PAGES, physical_page_bytes=2 * 1024 * 1024)
    else:
        changed = loop4_layout(**{name: value})
    assert changed.digest != loop4_layout().digest


def test_group_fields_are_equality_bearing():
    base = loop4_layout()
    for change in ({"kv_heads_local": 2}, {"head_dim": 64}, {"storage_dtype": "bf16"}, {"num_slots": 16},
                   {"v_scalar_bytes": 1}):
        groups = (base.cache_groups[0], attrs.evolve(base.cache_groups[1], strides=None, **change))
        assert loop4_layout(cache_groups=groups).digest != base.digest, change


def test_multimodal_and_prompt_embedding_side_inputs():
    from kvexact.reference.manifest import input_side_data_identity

    p = producer_manifest()
    image = producer_manifest(input_side_data_identity=input_side_data_identity([("img-1", 3, 8)]))
    other_image = producer_manifest(input_side_data_identity=input_side_data_identity([("img-2", 3, 8)]))
    embeds = producer_manifest(input_side_data_identity=input_side_data_identity(prompt_embeds_sha256="00" * 32))
    assert p.covered_token_ids == image.covered_token_ids == other_image.covered_token_ids
    for a, b in ((p, image), (image, other_image), (p, embeds)):
        assert semantic_cache_compatible(a, b).rejection is CompatibilityRejection.INPUT_SIDE_DATA_MISMATCH
    assert semantic_cache_compatible(image, producer_manifest(
        input_side_data_identity=input_side_data_identity([("img-1", 3, 8)]))).compatible
