"""z3 proof obligations over the kernels' index arithmetic and the reference's formulas.

Each obligation states a claim over integers and is proved by asking z3 for a counterexample to it:
``unsat`` proves the claim, ``sat`` refutes it (with a model), ``unknown`` (a timeout included) is a
failure too. Claims phrased "exists" (for example "int32 products overflow, so int64 is needed") are
proved by a satisfying witness instead.

Kernel limits stated here (the largest pool the kernels accept): block tables are int32, so at most
``MAX_BLOCKS = 2**31 - 1`` blocks; a block holds at most ``MAX_BLOCK_ELEMENTS = 2**20`` elements
(block_size * num_kv_heads * head_dim); so every element index stays below 2**51.
"""

from __future__ import annotations

from collections.abc import Iterator

from kvexact.conformance.obligations import Obligation
from kvexact.conformance.proofs_formulas import formula_obligations

MAX_BLOCKS = 2**31 - 1
MAX_BLOCK_ELEMENTS = 2**20
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

# Every layout the kernels accept in tests and benches: (block_size, num_kv_heads, head_dim).
SUPPORTED_BLOCK_SIZES = (1, 16, 32)
SUPPORTED_KV_HEADS = (1, 2, 4, 8)
SUPPORTED_HEAD_DIMS = (16, 32, 64, 128)


# ---------------------------------------------------------------- kernel index arithmetic


def _flat_index(b, t, h, d, block_size: int, heads: int, head_dim: int):
    """Element index in a contiguous [num_blocks, block_size, num_kv_heads, head_dim] tensor."""
    return ((b * block_size + t) * heads + h) * head_dim + d


def _in_bounds(z3, b, t, h, d, num_blocks, block_size, heads, head_dim):
    return [b >= 0, b < num_blocks, t >= 0, t < block_size, h >= 0, h < heads, d >= 0, d < head_dim]


def layout_injective(block_size: int, heads: int, head_dim: int) -> Obligation:
    def build(z3):
        nb = z3.Int("num_blocks")
        b1, t1, h1, d1, b2, t2, h2, d2 = z3.Ints("b1 t1 h1 d1 b2 t2 h2 d2")
        cons = [nb >= 1, nb <= MAX_BLOCKS,
                *_in_bounds(z3, b1, t1, h1, d1, nb, block_size, heads, head_dim),
                *_in_bounds(z3, b2, t2, h2, d2, nb, block_size, heads, head_dim)]
        i1 = _flat_index(b1, t1, h1, d1, block_size, heads, head_dim)
        i2 = _flat_index(b2, t2, h2, d2, block_size, heads, head_dim)
        same = z3.And(b1 == b2, t1 == t2, h1 == h2, d1 == d2)
        bounded = z3.And(i1 >= 0, i1 < nb * (block_size * heads * head_dim), i1 <= INT64_MAX)
        return cons, z3.And(z3.Implies(i1 == i2, same), bounded), "forall"

    return Obligation(f"layout-injective[bs={block_size},h={heads},d={head_dim}]", "0x03E",
                      "(block, row, head, lane) -> element index is injective and inside the pool", build)


def blocks_disjoint(block_size: int, heads: int, head_dim: int) -> Obligation:
    def build(z3):
        b1, b2, o1, o2 = z3.Ints("b1 b2 o1 o2")
        per_block = block_size * heads * head_dim
        cons = [b1 >= 0, b2 >= 0, b1 < MAX_BLOCKS, b2 < MAX_BLOCKS, b1 != b2,
                o1 >= 0, o1 < per_block, o2 >= 0, o2 < per_block]
        return cons, b1 * per_block + o1 != b2 * per_block + o2, "forall"

    return Obligation(f"blocks-disjoint[bs={block_size},h={heads},d={head_dim}]", "0x03A",
                      "distinct block ids own disjoint element ranges", build)


def kv_views_disjoint(kv_axis_first: bool, per_block: int) -> Obligation:
    """K and V as views of one combined tensor ([2, NB, ...] or [NB, 2, ...]) never share an element
    (for a concrete elements-per-block, every supported layout enumerated; the block count is symbolic)."""

    def build(z3):
        nb, b1, b2, o1, o2 = z3.Ints("nb b1 b2 o1 o2")
        cons = [nb >= 1, nb <= MAX_BLOCKS,
                b1 >= 0, b1 < nb, b2 >= 0, b2 < nb, o1 >= 0, o1 < per_block, o2 >= 0, o2 < per_block]
        if kv_axis_first:  # [2, NB, BS, H, D]: K = [0], V = [1]
            k_index = b1 * per_block + o1
            v_index = nb * per_block + b2 * per_block + o2
        else:  # [NB, 2, BS, H, D]
            k_index = b1 * 2 * per_block + o1
            v_index = b2 * 2 * per_block + per_block + o2
        return cons, k_index != v_index, "forall"

    name = f"kv-views-disjoint[{'2,NB' if kv_axis_first else 'NB,2'},...;block={per_block}]"
    return Obligation(name, "0x03E", "K and V views of one combined tensor do not overlap", build)


def int32_product_overflows() -> Obligation:
    """Some accepted (block id, block stride) has block_id * stride > INT32_MAX: the kernels need int64."""

    def build(z3):
        b, stride = z3.Ints("block_id block_stride_elements")
        cons = [b >= 0, b < MAX_BLOCKS, stride >= 1, stride <= MAX_BLOCK_ELEMENTS]
        return cons, b * stride > INT32_MAX, "exists"

    return Obligation("int32-headroom-insufficient", "0x0A", "block_id * block stride can exceed int32: "
                      "the kernels cast block ids and slots to int64 before multiplying", build)


def int64_headroom() -> Obligation:
    def build(z3):
        b, stride, off = z3.Ints("block_id block_stride_elements offset")
        cons = [b >= 0, b < MAX_BLOCKS, stride >= 1, stride <= MAX_BLOCK_ELEMENTS, off >= 0, off < stride]
        # x2 for a combined K/V tensor, x4 for the largest element size in bytes
        return cons, (2 * b * stride + stride + off) * 4 <= INT64_MAX, "forall"

    return Obligation("int64-headroom", "0x0A", "every element and byte offset the kernels form fits int64",
                      build)


def slot_mapping_roundtrip() -> Obligation:
    """slot = block * P + offset is inverted exactly by (slot // P, slot % P) for every positive P."""

    def build(z3):
        slot, p, blk, off = z3.Ints("slot block_size block offset")
        cons = [p >= 1, slot >= 0, blk >= 0, off >= 0, off < p, slot == blk * p + off]
        return cons, z3.And(slot / p == blk, slot % p == off), "forall"

    return Obligation("slot-mapping-roundtrip", "0x03D", "slot // P and slot % P recover (block, row)", build)


def kernel_tile_in_allocator_block() -> Obligation:
    """With P_a = q P_k, kernel block b*q + j covers tokens inside allocator block b (0x0AC)."""

    def build(z3):
        pk, q, b, j, t = z3.Ints("P_k q b j t")
        cons = [pk >= 1, q >= 1, b >= 0, j >= 0, j < q, t >= 0, t < pk]
        token = (b * q + j) * pk + t
        return cons, z3.And(token >= b * q * pk, token < (b + 1) * q * pk), "forall"

    return Obligation("kernel-tile-in-allocator-block", "0x0AC",
                      "a kernel block of size P_k = P_a / q never crosses an allocator block", build)


def vattention_offset_in_reservation() -> Obligation:
    """0x06C: u = (t H d_h + h d_h + d) b stays inside the request slot's subrange R = T_max H d_h b,
    and (q, delta) with u = q G + delta, 0 <= delta < G address it exactly."""

    def build(z3):
        t, h, d, tmax, heads, dh, eb, g, q, delta = z3.Ints("t h d T_max H_kv d_h b G q delta")
        u = (t * heads * dh + h * dh + d) * eb
        cons = [tmax >= 1, heads >= 1, dh >= 1, eb >= 1, g >= 1,
                t >= 0, t < tmax, h >= 0, h < heads, d >= 0, d < dh,
                u == q * g + delta, delta >= 0, delta < g]
        reservation = tmax * heads * dh * eb
        return cons, z3.And(u >= 0, u + eb <= reservation, q * g <= u, q >= 0), "forall"

    return Obligation("vattention-offset-in-reservation", "0x06C",
                      "virtual offsets stay inside their request reservation; page q and delta are exact", build)


def kernel_obligations() -> Iterator[Obligation]:
    for bs in SUPPORTED_BLOCK_SIZES:
        for heads in SUPPORTED_KV_HEADS:
            for dim in SUPPORTED_HEAD_DIMS:
                yield layout_injective(bs, heads, dim)
    yield blocks_disjoint(16, 8, 128)
    per_block_sizes = sorted({bs * h * d for bs in SUPPORTED_BLOCK_SIZES for h in SUPPORTED_KV_HEADS
                              for d in SUPPORTED_HEAD_DIMS})
    for per_block in per_block_sizes:
        yield kv_views_disjoint(True, per_block)
        yield kv_views_disjoint(False, per_block)
    yield int32_product_overflows()
    yield int64_headroom()
    yield slot_mapping_roundtrip()
    yield kernel_tile_in_allocator_block()
    yield vattention_offset_in_reservation()


def all_obligations() -> list[Obligation]:
    """Kernel obligations, then the formula-registry obligations of the reference."""
    return [*kernel_obligations(), *formula_obligations()]
