"""The Loop 4 two-group fixture of address translation (0x03B-0x03H, reconstructed: 0x03B lost its rows)."""

from __future__ import annotations

from collections.abc import Sequence

from kvexact.reference.handles import BlockHandle
from kvexact.reference.manifest import (
    CacheGroupLayout,
    CacheLayoutManifest,
    PhysicalMode,
)
from kvexact.reference.translate import (
    GroupPool,
    KVSnapshot,
    PoolDescriptor,
    RequestSnapshot,
)

# ---------------------------------------------------------------- the Loop 4 fixture (0x03B-0x03H)

GIB = 1024 ** 3
G1_K_BASE = 4_311_744_512  # 0x03F


def loop4_layout(**overrides) -> CacheLayoutManifest:
    """Two non-identical groups: g0 = layers [0,24) slot-major, g1 = layers [24,32) layer-major (0x03F shape).

    Reconstruction: 0x03B lost its rows; g0's axis order, slot count and base addresses are chosen so
    that every stated fact holds (48 + 16 KiB rows, 768 + 256 KiB bundles, g1's shape and strides).
    """
    g0 = CacheGroupLayout(0, range(0, 24), 4, 128, "fp16", 2, 2, 16, 8,
                          ("physical_slot", "layer_local", "token_offset", "kv_head_local", "head_dim"))
    g1 = CacheGroupLayout(1, range(24, 32), 4, 128, "fp16", 2, 2, 16, 8,
                          ("layer_local", "physical_slot", "token_offset", "kv_head_local", "head_dim"),
                          strides=(65536, 8192, 512, 128, 1))
    fields = dict(schema_version=1, manifest_id="loop4", logical_cache_abi_sha256="abi-loop2", model_generation=1,
                  num_layers=32, cache_groups=(g0, g1), physical_mode=PhysicalMode.PAGED_BLOCKS,
                  token_block_size=16, physical_page_bytes=None, scheduler_block_size=16, hash_block_size=16,
                  tp_world_size=2, tp_rank=0, quantization_schema=None, position_contract_id="rope-loop2",
                  allocator_revision="loop4")
    fields.update(overrides)
    return CacheLayoutManifest(**fields)


def _pools(with_successor: bool) -> tuple[GroupPool, GroupPool]:
    g0 = [PoolDescriptor(1000, 3, 2, 16), PoolDescriptor(1001, 3, 5, 16), PoolDescriptor(1002, 3, 7, 1)]
    g1 = [PoolDescriptor(2000, 7, 1, 16), PoolDescriptor(2001, 7, 6, 16), PoolDescriptor(2002, 7, 3, 1)]
    if with_successor:
        g0.append(PoolDescriptor(1003, 3, 0, 1))
        g1.append(PoolDescriptor(2003, 7, 4, 1))
    g0_k = 4 * GIB
    return (GroupPool(0, 0, g0_k, g0_k + 3 * 1024 * 1024, g0),
            GroupPool(1, 1, G1_K_BASE, G1_K_BASE + 1024 * 1024, g1))


def _tables(g0_ids: Sequence[int], g1_ids: Sequence[int]) -> tuple:
    return ((0, tuple(BlockHandle(0, 0, b, 3) for b in g0_ids)), (1, tuple(BlockHandle(1, 1, b, 7) for b in g1_ids)))


def loop4_snapshot() -> KVSnapshot:
    """A (33 tokens, v5), B (25, v4) share bundles 100/101 (g0 1000/1001, g1 2000/2001); C (16, v2)."""
    return KVSnapshot(loop4_layout(), _pools(False), (
        RequestSnapshot("A", 1, 5, 33, _tables((1000, 1001, 1002), (2000, 2001, 2002))),
        RequestSnapshot("B", 1, 4, 25, _tables((1000, 1001), (2000, 2001))),
        RequestSnapshot("C", 1, 2, 16, _tables((1000,), (2000,))),
    ))


def loop4_successor_snapshot() -> KVSnapshot:
    """0x03H: C's published successor at v3 with token 16 in g0 1003 (slot 0) and g1 2003 (slot 4)."""
    base = loop4_snapshot()
    c = RequestSnapshot("C", 1, 3, 17, _tables((1000, 1003), (2000, 2003)))
    return KVSnapshot(base.layout, _pools(True), (*base.requests[:2], c))
