"""Differential cases: kernels against float64 on freshly drawn, poisoned pools (used by tests and the gate).

A case fills the whole pool with a poison first (NaN, then a second run with huge finite garbage), writes
only the referenced slots, puts out-of-range ids in every unused block-table entry, and requires the
kernel output to be finite, within the dtype's tolerance of float64, and bit-identical under both poisons.
"""

from __future__ import annotations

import inspect
import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvexact.kernels import device as dev
from kvexact.kernels import paged, shared
from kvexact.kernels import reference as ref
from kvexact.kernels.errors import KernelInputError, KernelRejection

TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}
"""(atol, rtol) of a kernel output against float64 attention over the same (rounded) inputs.

bf16: a native kernel rounds its fp32 result to the nearest bf16 (error at most half an ulp, 2^-9 |x|), but
Triton's CPU interpreter stores bf16 by truncating toward zero (error up to one ulp, below 2^-8 |x|; 8
significant bits), so CPU and GPU outputs may differ by one ulp. rtol 1e-2 is above a whole ulp at every
magnitude, and atol covers outputs near zero, where the fp32 accumulation differences dominate."""

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
LAYOUTS = ("separate", "combined_nb2", "combined_2nb")

DECODE_FACTORS: dict[str, tuple] = {
    "dtype": ("fp32", "fp16", "bf16"),
    "block_size": (1, 16, 32),
    "splits": (1, 3, 8),  # 8 exceeds every case's block count (at most 5): empty splits
    "heads": ((2, 2), (4, 1), (4, 2)),  # (Hq, Hkv): group 1, 4, 2
    "dims": ((16, 16), (32, 32), (24, 8)),  # (Dk, Dv): padded, and Dv != Dk
    "layout": LAYOUTS,
}


def pairwise_cases(factors: dict[str, tuple]) -> list[dict]:
    """A deterministic greedy covering array: every pair of levels of every two factors occurs in a case."""
    names = list(factors)
    uncovered = {(a, x, b, y) for a, b in itertools.combinations(names, 2)
                 for x in range(len(factors[a])) for y in range(len(factors[b]))}
    rows: list[dict[str, int]] = []
    while uncovered:
        a, x, b, y = min(uncovered)
        row = {a: x, b: y}
        for n in names:
            if n in row:
                continue
            gains = [(sum((m, row[m], n, lvl) in uncovered or (n, lvl, m, row[m]) in uncovered for m in row), -lvl)
                     for lvl in range(len(factors[n]))]
            row[n] = gains.index(max(gains))
        uncovered -= {(p, row[p], q, row[q]) for p, q in itertools.combinations(names, 2)}
        rows.append(row)
    return [{n: factors[n][r[n]] for n in names} for r in rows]


def full_product(factors: dict[str, tuple]) -> list[dict]:
    names = list(factors)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*factors.values())]


def case_id(case: dict) -> str:
    return "-".join(f"{v}" if not isinstance(v, tuple) else "x".join(map(str, v)) for v in case.values())


def make_caches(num_blocks: int, block_size: int, hkv: int, dk: int, dv: int, dtype, layout: str, fill: float):
    """K/V caches filled with ``fill``: separate tensors, or non-contiguous views of one combined tensor."""
    if layout == "separate" or dk != dv:
        kc = dev.full((num_blocks, block_size, hkv, dk), fill, dtype)
        vc = dev.full((num_blocks, block_size, hkv, dv), fill, dtype)
        return kc, vc
    if layout == "combined_nb2":
        both = dev.full((num_blocks, 2, block_size, hkv, dk), fill, dtype)
        return both[:, 0], both[:, 1]
    both = dev.full((2, num_blocks, block_size, hkv, dk), fill, dtype)
    return both[0], both[1]


@dataclass
class DecodeInputs:
    query: torch.Tensor
    key_cache: torch.Tensor
    value_cache: torch.Tensor
    block_table: torch.Tensor
    seq_lens: torch.Tensor
    keys: list  # logical history per sequence, [L, Hkv, Dk] (the oracle's input, never read from the pool)
    values: list


def edge_lengths(block_size: int) -> list[int]:
    """1, P-1, P, P+1, 2P+3 (P-1 = 0 for P = 1: an empty sequence)."""
    p = block_size
    return [1, p - 1, p, p + 1, 2 * p + 3]


def build_decode(case: dict, seed: int, poison: float, alias: bool = True) -> DecodeInputs:
    """Random query and history, written into a poisoned pool through permuted block tables.

    With ``alias`` one more sequence reads the longest sequence's first block twice, then its second
    block's first row (aliased blocks, across and within sequences; reads only).
    """
    dtype = DTYPES[case["dtype"]]
    bs, (hq, hkv), (dk, dv) = case["block_size"], case["heads"], case["dims"]
    lengths = list(case.get("lengths") or edge_lengths(bs))
    gen = dev.generator(seed)
    rng = random.Random(seed)
    need = [-(-n // bs) for n in lengths]
    num_blocks = sum(need) + 3
    kc, vc = make_caches(num_blocks, bs, hkv, dk, dv, dtype, case["layout"], poison)
    ids = list(range(num_blocks))
    rng.shuffle(ids)
    width = max(need) + 2
    table = [[num_blocks + 7 if j % 2 else -1 for j in range(width)] for _ in lengths]
    keys, values = [], []
    for b, n in enumerate(lengths):
        table[b][: need[b]] = [ids.pop() for _ in range(need[b])]
        k = dev.randn((n, hkv, dk), gen, dtype)
        v = dev.randn((n, hkv, dv), gen, dtype)
        for t in range(n):
            kc[table[b][t // bs], t % bs] = k[t]
            vc[table[b][t // bs], t % bs] = v[t]
        keys.append(k)
        values.append(v)
    longest = max(range(len(lengths)), key=lambda i: lengths[i])
    if alias and need[longest] >= 2:
        first, second = table[longest][0], table[longest][1]
        row = [first, first, second] + [num_blocks + 7] * (width - 3)
        table.append(row)
        keys.append(torch.cat([kc[first], kc[first], kc[second, :1]]))
        values.append(torch.cat([vc[first], vc[first], vc[second, :1]]))
        lengths.append(2 * bs + 1)
    query = dev.randn((len(lengths), hq, dk), gen, dtype)
    return DecodeInputs(query, kc, vc, dev.tensor(table, torch.int32), dev.tensor(lengths, torch.int32), keys,
                        values)


def _errors(out, out_ref, dtype) -> tuple[float, bool]:
    atol, rtol = TOLERANCES[dtype]
    out_ref = out_ref.to("cpu")
    diff = (out.detach().to("cpu", torch.float64) - out_ref).abs()
    return float(diff.max()) if diff.numel() else 0.0, bool(torch.all(diff <= atol + rtol * out_ref.abs()))


def run_decode_case(case: dict, seed: int = 0) -> dict:
    """Run one decode case under two poisons; figures and a verdict (finite, in tolerance, poison-blind)."""
    dtype = DTYPES[case["dtype"]]
    outs = []
    for poison in (math.nan, 3.0e4 if dtype == torch.float16 else 1.0e30):
        inp = build_decode(case, seed, poison)
        out, lse = paged.paged_decode_attention(inp.query, inp.key_cache, inp.value_cache, inp.block_table,
                                                inp.seq_lens, num_splits=case["splits"], return_lse=True)
        outs.append((out.cpu(), lse.cpu()))  # compared on the host, where the float64 oracle lives
    refs = [ref.attention_f64(inp.query[b], inp.keys[b], inp.values[b]) for b in range(len(inp.keys))]
    out_ref = torch.stack([o for o, _ in refs]).cpu()
    lse_ref = torch.stack([lse for _, lse in refs]).cpu()
    err, ok = _errors(outs[0][0], out_ref, dtype)
    live = torch.isfinite(lse_ref)
    lse_err = float((outs[0][1].double()[live] - lse_ref[live]).abs().max()) if live.any() else 0.0
    lse_empty_ok = bool(torch.equal(torch.isneginf(outs[0][1]), torch.isneginf(lse_ref)))
    finite = bool(torch.isfinite(outs[0][0]).all())
    same = all(torch.equal(outs[0][i], outs[1][i]) for i in range(2))
    lse_ok = lse_empty_ok and bool(torch.allclose(outs[0][1].double()[live], lse_ref[live], atol=1e-4, rtol=1e-4))
    return {"max_abs_err": err, "max_lse_err": lse_err, "within_tolerance": ok, "finite": finite, "poison_blind": same,
            "lse_ok": lse_ok, "passed": ok and finite and same and lse_ok}


CACHE_SENTINEL = -7.25  # exactly representable in every dtype


def run_cache_write_case(dtype=torch.float16, seed: int = 0) -> dict:
    """``reshape_and_cache`` into a sentinel-filled pool (K and V views of one tensor) through slots that
    include -1 (skip): exactly the addressed slots hold the written rows, every other slot its sentinel."""
    nb, bs, hkv, d = 5, 4, 2, 8
    kc, vc = make_caches(nb, bs, hkv, d, d, dtype, "combined_nb2", CACHE_SENTINEL)
    gen = dev.generator(seed)
    key, value = dev.randn((6, hkv, d), gen, dtype), dev.randn((6, hkv, d), gen, dtype)
    slots = [17, -1, 0, 3, -1, 9]
    want_k, want_v = kc.clone(), vc.clone()
    for t, s in enumerate(slots):
        if s >= 0:
            want_k[s // bs, s % bs] = key[t]
            want_v[s // bs, s % bs] = value[t]
    paged.reshape_and_cache(key, value, kc, vc, dev.tensor(slots, torch.int64))
    exact = bool(torch.equal(kc, want_k) and torch.equal(vc, want_v))
    return {"exact": exact, "passed": exact}


def run_copy_case(dtype=torch.float16, seed: int = 0) -> dict:
    """``copy_blocks`` (the copy-on-write copy) on a pool of distinct random rows (K and V views of one tensor):
    each destination holds its source's rows afterwards, every other block is untouched."""
    nb, bs, hkv, d = 6, 4, 2, 8
    kc, vc = make_caches(nb, bs, hkv, d, d, dtype, "combined_nb2", CACHE_SENTINEL)
    gen = dev.generator(seed)
    kc.copy_(dev.randn((nb, bs, hkv, d), gen, dtype))
    vc.copy_(dev.randn((nb, bs, hkv, d), gen, dtype))
    want_k, want_v = kc.clone(), vc.clone()
    pairs = [(1, 4), (2, 0), (3, 5)]
    for src, dst in pairs:
        want_k[dst], want_v[dst] = kc[src], vc[src]
    paged.copy_blocks(kc, vc, dev.tensor(pairs, torch.int64))
    exact = bool(torch.equal(kc, want_k) and torch.equal(vc, want_v))
    return {"exact": exact, "passed": exact}


def run_blockmap_case() -> dict:
    """The host mappings from allocator tables to kernel inputs, against values worked by hand from their
    formulas: allocator blocks of P_a = 32 tokens over kernel blocks of P_k = 16 (q = 2: block b is kernel
    blocks 2b, 2b + 1), padded rows; slots ``table[t // P] * P + t % P``; natural-log LSE to base 2."""
    got = {
        "kernel_block_table": paged.kernel_block_table([[3, 7], [1]], 32, 16, pad_id=-1).tolist(),
        "slots_for": paged.slots_for([6, 2], [0, 3, 4, 7], 4).tolist(),
        "to_flashinfer_lse": paged.to_flashinfer_lse(dev.tensor([math.log(8.0), 0.0], torch.float64)).tolist(),
    }
    want: dict[str, list] = {"kernel_block_table": [[6, 7, 14, 15], [2, 3, -1, -1]], "slots_for": [24, 27, 8, 11],
                             "to_flashinfer_lse": [3.0, 0.0]}
    got["to_flashinfer_lse"] = [round(x, 12) for x in got["to_flashinfer_lse"]]  # 1 / ln 2 in binary64
    wrong = [f"{k}: {got[k]}, expected {want[k]}" for k in want if got[k] != want[k]]
    # position 9 of 4-token pages is token 1 of table entry 9 // 4 = 2: a 2-entry table is too short, by name
    # and naming the entry it lacks
    try:
        paged.slots_for([6, 2], [9], 4)
        wrong.append("slots_for([6, 2], [9], 4): accepted, expected BLOCK_TABLE_TOO_SHORT")
    except KernelInputError as exc:
        if exc.reason is not KernelRejection.BLOCK_TABLE_TOO_SHORT or "needs entry 2 of a 2-entry table" not in exc.detail:
            wrong.append(f"slots_for([6, 2], [9], 4): {exc.reason.name} {exc.detail!r}, expected "
                         "BLOCK_TABLE_TOO_SHORT naming entry 2 of a 2-entry table")
    return {"wrong": wrong, "passed": not wrong}


def run_merge_case(seed: int = 0) -> dict:
    """``merge_attn_states`` of two fp32 partial states against the float64 merge, with one side empty, both
    empty, and FlashAttention 2's +inf marker; an empty side's output is NaN and must never be read."""
    t, h, d = 6, 3, 16
    gen = dev.generator(seed)
    po, so = dev.randn((t, h, d), gen, torch.float32), dev.randn((t, h, d), gen, torch.float32)
    pl, sl = dev.randn((t, h), gen, torch.float32) * 3, dev.randn((t, h), gen, torch.float32) * 3
    pl[0, :], sl[1, :] = -math.inf, -math.inf
    pl[2, :], sl[2, :] = -math.inf, -math.inf
    pl[3, 0], sl[3, 1] = math.inf, math.inf
    po[0], so[1], po[2], so[2] = math.nan, math.nan, math.nan, math.nan
    out, lse = paged.merge_attn_states(po, pl, so, sl, return_lse=True)
    want, want_lse = ref.merge_f64(torch.stack([po.double(), so.double()]), torch.stack([pl.double(), sl.double()]))
    atol, rtol = TOLERANCES[torch.float32]
    finite = bool(torch.isfinite(out).all())
    close = finite and bool(torch.allclose(out.double().cpu(), want.cpu(), atol=atol, rtol=rtol))
    fin = torch.isfinite(want_lse)
    lse_ok = bool(torch.equal(torch.isneginf(lse).cpu(), torch.isneginf(want_lse).cpu())) and bool(
        torch.allclose(lse[fin].double().cpu(), want_lse[fin].cpu(), atol=1e-5, rtol=1e-5))
    return {"finite": finite, "within_tolerance": close, "lse_ok": lse_ok, "passed": finite and close and lse_ok}


def run_reject_case(seed: int = 0) -> dict:
    """Decode inputs that break the contract, given with the default ``validate=True``, must be refused by
    name before any launch: an out-of-range referenced block id, a table row too short for its length, a
    negative length (paged decode), an out-of-range suffix block id (shared-prefix decode), a slot past the
    pool (``reshape_and_cache``), a copy destination past the pool (``copy_blocks``) and a chunk of -1 tokens
    (``chunked_shared_attention``). The host wrappers' options must be keyword-only (:data:`WRAPPER_POSITIONALS`).

    The pool and the table are views of larger tensors (two spare blocks of zeros, spare table columns
    holding in-range ids), so a wrapper that launches anyway reads allocated memory and this case reports
    the missing refusal instead of crashing."""
    nb, bs, hkv, hq, d = 4, 4, 1, 2, 16
    kc_all = dev.full((nb + 2, bs, hkv, d), 0.0, torch.float32)
    vc_all = dev.full((nb + 2, bs, hkv, d), 0.0, torch.float32)
    kc, vc = kc_all[:nb], vc_all[:nb]
    query = dev.randn((1, hq, d), dev.generator(seed), torch.float32)

    def table(row: list[int]) -> torch.Tensor:
        return dev.tensor([row + [1, 2]], torch.int32)[:, : len(row)]

    k = KernelRejection
    cases = [
        ("block id out of range", k.BLOCK_ID_OUT_OF_RANGE,
         lambda: paged.paged_decode_attention(query, kc, vc, table([0, nb]), dev.tensor([bs + 1], torch.int32))),
        ("table too short", k.BLOCK_TABLE_TOO_SHORT,
         lambda: paged.paged_decode_attention(query, kc, vc, table([0, 3]), dev.tensor([2 * bs + 1], torch.int32))),
        ("negative length", k.NEGATIVE_LENGTH,
         lambda: paged.paged_decode_attention(query, kc, vc, table([0]), dev.tensor([-1], torch.int32))),
        ("suffix block id out of range", k.BLOCK_ID_OUT_OF_RANGE,
         lambda: shared.shared_prefix_attention(query, kc, vc, dev.tensor([2], torch.int32), bs, table([nb + 1]),
                                                dev.tensor([1], torch.int32))),
        ("slot out of range", k.SLOT_OUT_OF_RANGE,
         lambda: paged.reshape_and_cache(kc_all[:1, 0], vc_all[:1, 0], kc, vc, dev.tensor([nb * bs], torch.int64))),
        ("copy destination out of range", k.BLOCK_ID_OUT_OF_RANGE,
         lambda: paged.copy_blocks(kc, vc, dev.tensor([[0, nb]], torch.int64))),
        ("chunk length -1", k.NEGATIVE_LENGTH,
         lambda: shared.chunked_shared_attention(query, kc, vc, [shared.Chunk((0,), -1, 0, 1)])),
        ("decode splits 0", k.NON_POSITIVE_SPLITS,
         lambda: paged.paged_decode_attention(query, kc, vc, table([0]), dev.tensor([1], torch.int32), num_splits=0)),
        ("prefix splits 0", k.NON_POSITIVE_SPLITS,
         lambda: shared.shared_prefix_attention(query, kc, vc, dev.tensor([2], torch.int32), bs, table([0]),
                                                dev.tensor([1], torch.int32), prefix_splits=0)),
        ("suffix splits 0", k.NON_POSITIVE_SPLITS,
         lambda: shared.shared_prefix_attention(query, kc, vc, dev.tensor([2], torch.int32), bs, table([0]),
                                                dev.tensor([1], torch.int32), suffix_splits=0)),
        ("chunk splits 0", k.NON_POSITIVE_SPLITS,
         lambda: shared.chunked_shared_attention(query, kc, vc, [shared.Chunk((0,), 1, 0, 1)], chunk_splits=0)),
        ("key head dim 0", k.WRONG_SHAPE,
         lambda: paged.copy_blocks(kc_all[:nb, :, :, :0], vc, dev.tensor([[0, 1]], torch.int64))),
        ("copy mapping of one column", k.WRONG_SHAPE,
         lambda: paged.copy_blocks(kc, vc, dev.tensor([[0]], torch.int64))),
        ("copy destination twice", k.DUPLICATE_DESTINATION,
         lambda: paged.copy_blocks(kc, vc, dev.tensor([[0, 1], [2, 1]], torch.int64))),
        ("copy destination also a source", k.DESTINATION_IS_SOURCE,
         lambda: paged.copy_blocks(kc, vc, dev.tensor([[0, 1], [1, 2]], torch.int64))),
        ("private splits 0", k.NON_POSITIVE_SPLITS,
         lambda: shared.chunked_shared_attention(query, kc, vc, [shared.Chunk((0,), 1, 0, 1)], private_splits=0)),
    ]
    wrong = []
    for name, want, call in cases:
        try:
            call()
            got = "accepted"
        except KernelInputError as exc:
            got = exc.reason.name
        except Exception as exc:  # a launch on bad input: reported, not raised
            got = f"{type(exc).__name__}"
        if got != want.name:
            wrong.append(f"{name}: {got}, expected {want.name}")
    for module, fn, positional in WRAPPER_POSITIONALS:
        params = inspect.signature(getattr(module, fn)).parameters.values()
        got_pos = tuple(p.name for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY)
        if got_pos != positional:
            wrong.append(f"{fn}: positional parameters {got_pos}, expected {positional} (the rest keyword-only)")
    return {"cases": len(cases), "signatures": len(WRAPPER_POSITIONALS), "wrong": wrong, "passed": not wrong}


_KV = ("query", "key_cache", "value_cache")
WRAPPER_POSITIONALS = (
    (paged, "reshape_and_cache", ("key", "value", "key_cache", "value_cache", "slot_mapping")),
    (paged, "copy_blocks", ("key_cache", "value_cache", "block_mapping")),
    (paged, "merge_attn_states", ("prefix_output", "prefix_lse", "suffix_output", "suffix_lse")),
    (paged, "decode_launcher", (*_KV, "block_table", "seq_lens", "num_splits")),
    (paged, "paged_decode_attention", (*_KV, "block_table", "seq_lens")),
    (shared, "chunked_shared_attention", (*_KV, "chunks")),
    (shared, "shared_prefix_attention", (*_KV, "prefix_block_ids", "prefix_len", "suffix_block_table", "suffix_lens")),
    (shared, "hydragen_launcher", (*_KV, "prefix_block_ids", "prefix_len", "suffix_block_table", "suffix_lens")),
)
"""The public host wrappers (module, name) and their positional parameters, as documented (vLLM's op order); every option
after them is keyword-only, so a call cannot bind an option by position."""


WRAPPER_DEFAULTS: dict[str, dict[str, object]] = {
    "reshape_and_cache": {"validate": True},
    "copy_blocks": {"validate": True},
    "merge_attn_states": {"output": None, "return_lse": False},
    "decode_launcher": {"scale": None, "output": None, "return_lse": False, "block_n": None},
    "paged_decode_attention": {"scale": None, "num_splits": None, "output": None, "return_lse": False,
                               "validate": True, "block_n": None},
    "chunked_shared_attention": {"threshold": 1, "scale": None, "chunk_splits": 1, "private_splits": 1,
                                 "return_lse": False, "block_n": None},
    "shared_prefix_attention": {"scale": None, "prefix_splits": 1, "suffix_splits": 1, "return_lse": False,
                                "validate": True, "block_n": None},
    "hydragen_launcher": {"prefix_splits": 1, "suffix_splits": 1, "scale": None, "return_lse": False,
                          "block_n": None},
    "plan_chunks": {"threshold": 1, "chunk_splits": 1},
}
"""The documented defaults of the wrappers' options (docs/kernels.md): validation on, the scale 1/sqrt(Dk) when
None, the split count of the device when None, one split of each kind, ChunkAttention's threshold 1 (a chunk is
shared when it covers more than one sequence), no LSE returned, the block tile of the dtype when None. A caller
that leaves an option out relies on these; a changed default changes what every such call computes."""


def run_plan_case() -> dict:
    """``plan_chunks`` (the host planner of the ChunkAttention schedule) with its defaults and with chunk splits,
    against plans worked by hand from its contract, and every wrapper's option defaults (:data:`WRAPPER_DEFAULTS`).

    Two sequences over 4-token pages: chunk 0 (10 tokens, pages 0-2) covers both, chunks 1 (3 tokens; two ids, the
    second never read) and 2 one each.
    At the default threshold 1 only chunk 0 is shared. With one split it is one range, tokens [0, 10), slot 0;
    with ``chunk_splits=2`` its 3 pages are cut page-aligned into ceil(3 / 2) = 2 pages per range: tokens
    [0, 8) in slot 0 and [8, 10) in slot 1, whose two rows start at 1 x 2 sequences = 2. Both plans
    materialize 2 partial rows per range."""
    chunks = [shared.Chunk((0, 1, 2), 10, 0, 2), shared.Chunk((3, 5), 3, 0, 1), shared.Chunk((4,), 2, 1, 2)]
    want = {
        "default": {"shared_chunks": (0,), "private_chunks": ((1,), (2,)), "work": ((0, 0, 10, 0, 2, 0),),
                    "shared_slots": 1, "partial_rows": 2},
        "chunk_splits=2": {"shared_chunks": (0,), "private_chunks": ((1,), (2,)),
                           "work": ((0, 0, 8, 0, 2, 0), (0, 8, 10, 0, 2, 2)), "shared_slots": 2, "partial_rows": 4},
    }
    # at threshold 2 no chunk is shared: no work, no shared slot, every chunk on its sequence's private path
    want["threshold=2"] = {"shared_chunks": (), "private_chunks": ((0, 1), (0, 2)), "work": (), "shared_slots": 0,
                           "partial_rows": 0}
    # a chain of 300 empty chunks over both sequences (the tree may have any depth): chunk c sits at depth c of
    # both paths, in slot c, its rows from c x 2; deeper than CPython's cached small integers (up to 256)
    deep = [shared.Chunk((), 0, 0, 2) for _ in range(300)]
    want["300 deep"] = {"shared_chunks": tuple(range(300)), "private_chunks": ((), ()),
                        "work": tuple((c, 0, 0, 0, 2, 2 * c) for c in range(300)), "shared_slots": 300,
                        "partial_rows": 600}
    plans: dict[str, object] = {}
    for name, call in (("default", lambda: shared.plan_chunks(chunks, 2, 4, 8)),
                       ("chunk_splits=2", lambda: shared.plan_chunks(chunks, 2, 4, 8, chunk_splits=2)),
                       ("threshold=2", lambda: shared.plan_chunks(chunks, 2, 4, 8, threshold=2)),
                       ("300 deep", lambda: shared.plan_chunks(deep, 2, 4, 8))):
        try:
            plans[name] = call()
        except KernelInputError as exc:
            plans[name] = exc.reason.name
    wrong = [f"plan_chunks {name}: {plans[name]}, expected {fields}" for name, fields in want.items()
             if isinstance(plans[name], str)]
    wrong += [f"plan_chunks {name}: {field} {getattr(plans[name], field)}, expected {value}"
              for name, fields in want.items() if not isinstance(plans[name], str)
              for field, value in fields.items() if getattr(plans[name], field) != value]
    # a chunk's table may be longer than its tokens need (chunk 1's second id is never read), never shorter
    try:
        shared.plan_chunks([shared.Chunk((0,), 5, 0, 2)], 2, 4, 8)
        wrong.append("plan_chunks with 1 block id for 5 tokens of 4-token pages: accepted, expected BLOCK_TABLE_TOO_SHORT")
    except KernelInputError as exc:
        if exc.reason is not KernelRejection.BLOCK_TABLE_TOO_SHORT:
            wrong.append(f"plan_chunks with 1 block id for 5 tokens: {exc.reason.name}, expected BLOCK_TABLE_TOO_SHORT")
    # refusals by name: coverage [1, 0) runs backwards; an empty one [1, 1); one past the batch [1, 3)
    for begin, end in ((1, 0), (1, 1), (1, 3)):
        try:
            shared.plan_chunks([shared.Chunk((0,), 4, begin, end)], 2, 4, 8)
            wrong.append(f"plan_chunks with coverage [{begin}, {end}) of 2 sequences: accepted, expected BAD_COVERAGE")
        except KernelInputError as exc:
            if exc.reason is not KernelRejection.BAD_COVERAGE:
                wrong.append(f"plan_chunks with coverage [{begin}, {end}): {exc.reason.name}, expected BAD_COVERAGE")
    modules = {fn: module for module, fn, _ in WRAPPER_POSITIONALS} | {"plan_chunks": shared}
    for fn, defaults in WRAPPER_DEFAULTS.items():
        params = inspect.signature(getattr(modules[fn], fn)).parameters
        got = {name: params[name].default if name in params else "missing" for name in defaults}
        if got != defaults:
            wrong.append(f"{fn}: defaults {got}, expected {defaults}")
    return {"plans": len(plans), "defaults": len(WRAPPER_DEFAULTS), "wrong": wrong, "passed": not wrong}


# (multiprocessors, batch, KV heads, longest tokens, block size) -> splits, worked by hand from split_count's rule:
# want = ceil(2 sms / (batch x heads)), at least 1; pages = ceil(longest / block size); splits = max(1, min(want,
# ceil(pages / 4)))
SPLIT_COUNTS = (
    ((132, 4, 8, 1600, 16), 9),  # want ceil(264 / 32) = 9; 100 pages allow 25
    ((132, 4, 8, 161, 16), 3),  # 161 tokens are 11 pages: ceil(11 / 4) = 3 splits of at least 4 pages
    ((132, 4, 8, 160, 16), 3),  # 10 pages: ceil(10 / 4) = 3
    ((132, 64, 8, 4096, 16), 1),  # 512 pairs already give every SM its 2 programs
    ((132, 4, 8, 0, 16), 1),  # an empty batch still gets 1
    ((108, 1, 2, 1 << 20, 1), 108),  # want ceil(216 / 2) = 108 < 2^18 = 262144 four-page splits
)


# (head dim, dtype) -> key rows per tile of a compiled kernel, worked by hand: rows of pow2(head dim, >= 16) x
# itemsize bytes, 64 x 256 bytes a tile, at most 64 and at least 16 rows
NATIVE_BLOCK_N = (
    ((128, torch.bfloat16), 64),  # 256-byte rows
    ((128, torch.float32), 32),  # 512-byte rows
    ((256, torch.float32), 16),  # 1 KiB rows
    ((512, torch.float32), 16),  # 2 KiB rows: 8, raised to 16
    ((24, torch.float16), 64),  # padded to 32: 64-byte rows, 256 capped at 64
)


def run_splits_case(seed: int = 0) -> dict:
    """The default split count: :func:`paged.split_count` against :data:`SPLIT_COUNTS`, 1 on a CPU device, the
    compiled kernels' tile rows (:data:`NATIVE_BLOCK_N`), and a
    paged decode that leaves ``num_splits`` out (so takes the default) against float64 attention."""
    wrong = [f"split_count{args} = {paged.split_count(*args)}, expected {n}" for args, n in SPLIT_COUNTS
             if paged.split_count(*args) != n]
    wrong += [f"native_block_n{args} = {paged.native_block_n(*args)}, expected {n}" for args, n in NATIVE_BLOCK_N
              if paged.native_block_n(*args) != n]
    cpu = paged.default_num_splits(4, 8, 1600, 16, torch.device("cpu"))
    if cpu != 1:
        wrong.append(f"default_num_splits on a cpu device = {cpu}, expected 1")
    nb, bs, hkv, hq, d = 4, 4, 1, 2, 16
    gen = dev.generator(seed)
    kc, vc = dev.randn((nb, bs, hkv, d), gen), dev.randn((nb, bs, hkv, d), gen)
    query = dev.randn((2, hq, d), gen)
    rows, lens = [[2, 0], [3, 1]], [7, 5]
    out = paged.paged_decode_attention(query, kc, vc, dev.tensor(rows, torch.int32), dev.tensor(lens, torch.int32))
    for b, (row, n) in enumerate(zip(rows, lens, strict=True)):
        keys = torch.cat([kc[i] for i in row])[:n].double()
        values = torch.cat([vc[i] for i in row])[:n].double()
        want, _lse = ref.attention_f64(query[b].double(), keys, values, 1.0 / math.sqrt(d))
        if not torch.allclose(out[b].double().cpu(), want.cpu(), atol=1e-5, rtol=1e-5):
            wrong.append(f"paged decode with the default split count: sequence {b} differs from float64")
    return {"split_counts": len(SPLIT_COUNTS), "wrong": wrong, "passed": not wrong}


def run_policy_case() -> dict:
    """The device policy once settled: asking again for the settled device by a name read back from the
    environment (an equal string, not the same object) is accepted, asking for the other one is refused
    (ALREADY_SETTLED), and the refusal of a Triton built for the other mode names the mode the kernels need
    (the interpreter for the cpu, the compiler for cuda). The policy's choice and ``KVEXACT_DEVICE`` are restored."""
    import os

    from kvexact.kernels.errors import DeviceError, DeviceRejection

    settled = dev.settle()
    other = "cuda" if settled == "cpu" else "cpu"
    wrong = []
    saved_choice, saved_env = dev._chosen, os.environ.get(dev.ENV)
    try:
        try:
            dev.select(os.fsdecode(os.fsencode(settled)))
        except DeviceError as exc:
            wrong.append(f"select({settled!r}) after settling on {settled}: refused ({exc.reason.name})")
        try:
            dev.select(other)
            wrong.append(f"select({other!r}) after settling on {settled}: accepted")
        except DeviceError as exc:
            if exc.reason not in (DeviceRejection.ALREADY_SETTLED, DeviceRejection.NO_CUDA):
                wrong.append(f"select({other!r}) after settling on {settled}: {exc.reason.name}")
    finally:
        dev._chosen = saved_choice
        if saved_env is None:
            os.environ.pop(dev.ENV, None)
        else:
            os.environ[dev.ENV] = saved_env
    mode = {"cpu": "interpreter", "cuda": "compiler"}
    try:
        dev._refuse_triton_built_for_other_mode(other)
        wrong.append(f"a Triton built for the {mode[settled]} accepted for {other}")
    except DeviceError as exc:
        if exc.reason is not DeviceRejection.TRITON_IMPORTED_FIRST or f"not built for the {mode[other]}" not in exc.detail:
            wrong.append(f"Triton built for the {mode[settled]}, asked for {other}: {exc.reason.name}: {exc.detail}")
    try:
        dev._refuse_triton_built_for_other_mode(settled)
    except DeviceError as exc:
        wrong.append(f"the Triton this process built refused for {settled}: {exc.detail}")
    interpreted = {name: dev.runs_interpreted(name) for name in dev.NAMES}
    if interpreted != {"cpu": True, "cuda": False}:
        wrong.append(f"runs under the interpreter: {interpreted}, expected only on the cpu")
    # without torch there is no CUDA: ``import torch`` made to fail (a None entry in sys.modules), then restored
    import sys

    saved_torch = sys.modules["torch"]
    sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        without_torch = dev.cuda_available()
    finally:
        sys.modules["torch"] = saved_torch
    if without_torch is not False:
        wrong.append(f"cuda_available() without torch: {without_torch}, expected False")
    return {"wrong": wrong, "passed": not wrong}


SHARED_FACTORS: dict[str, tuple] = {
    "dtype": ("fp32", "fp16"),
    "block_size": (16, 1),
    "prefix": ("P", "3P", "3P+5"),
    "group": (1, 4),
}


def run_shared_case(case: dict, seed: int = 0, suffix_lens: Sequence[int] = (0, 1, 5, 17)) -> dict:
    """Hydragen-style prefix/suffix and ChunkAttention-style (prefix chunk + private suffix chunks) against
    float64 over each sequence's concatenated history, on a NaN-poisoned pool; and Hydragen with an empty
    prefix against float64 over each non-empty suffix alone."""
    dtype = DTYPES[case["dtype"]]
    bs, group = case["block_size"], case["group"]
    prefix_len = {"P": bs, "3P": 3 * bs, "3P+5": 3 * bs + 5}[case["prefix"]]
    hkv, dk, dv = 2, 16, 16
    hq = hkv * group
    gen = dev.generator(seed)
    batch = len(suffix_lens)
    need_p = -(-prefix_len // bs)
    need_s = [-(-n // bs) for n in suffix_lens]
    num_blocks = need_p + sum(need_s) + 2
    kc, vc = make_caches(num_blocks, bs, hkv, dk, dv, dtype, "separate", math.nan)
    ids = list(range(num_blocks))
    random.Random(seed).shuffle(ids)
    pk = dev.randn((prefix_len, hkv, dk), gen, dtype)
    pv = dev.randn((prefix_len, hkv, dv), gen, dtype)
    prefix_ids = [ids.pop() for _ in range(need_p)]
    for t in range(prefix_len):
        kc[prefix_ids[t // bs], t % bs] = pk[t]
        vc[prefix_ids[t // bs], t % bs] = pv[t]
    width = max(need_s) + 1
    table = [[num_blocks + 7] * width for _ in suffix_lens]
    keys, values = [], []
    for b, n in enumerate(suffix_lens):
        table[b][: need_s[b]] = [ids.pop() for _ in range(need_s[b])]
        sk = dev.randn((n, hkv, dk), gen, dtype)
        sv = dev.randn((n, hkv, dv), gen, dtype)
        for t in range(n):
            kc[table[b][t // bs], t % bs] = sk[t]
            vc[table[b][t // bs], t % bs] = sv[t]
        keys.append(torch.cat([pk, sk]))
        values.append(torch.cat([pv, sv]))
    query = dev.randn((batch, hq, dk), gen, dtype)
    out_ref = torch.stack([ref.attention_f64(query[b], keys[b], values[b])[0] for b in range(batch)])
    bt = dev.tensor(table, torch.int32)
    lens = dev.tensor(list(suffix_lens), torch.int32)
    hyd = shared.shared_prefix_attention(query, kc, vc, dev.tensor(prefix_ids, torch.int32), prefix_len,
                                         bt, lens, prefix_splits=2, suffix_splits=2)
    no_prefix = shared.shared_prefix_attention(query, kc, vc, dev.tensor([], torch.int32), 0, bt, lens,
                                               prefix_splits=2, suffix_splits=2)
    live = [b for b, n in enumerate(suffix_lens) if n]  # the suffix alone (an empty history has no attention)
    no_prefix_ref = torch.stack([ref.attention_f64(query[b], keys[b][prefix_len:], values[b][prefix_len:])[0]
                                 for b in live])
    chunks = [shared.Chunk(tuple(prefix_ids), prefix_len, 0, batch)]
    chunks += [shared.Chunk(tuple(table[b][: need_s[b]]), n, b, b + 1) for b, n in enumerate(suffix_lens)]
    chk = shared.chunked_shared_attention(query, kc, vc, chunks, threshold=1, chunk_splits=2, private_splits=2)
    figures: dict = {}
    passed = True
    for name, out, want in (("hydragen", hyd, out_ref), ("chunked", chk, out_ref),
                            ("hydragen_empty_prefix", no_prefix[live], no_prefix_ref)):
        err, ok = _errors(out, want, dtype)
        finite = bool(torch.isfinite(out).all())
        figures[f"{name}_max_abs_err"] = err
        passed = passed and ok and finite
    figures["passed"] = passed
    return figures


def seed_tree_inputs(dtype, block_size: int, seed: int | None = None):
    """0x0BE's tree in a NaN-poisoned pool: each chunk in its own blocks (shuffled), queries [4, 1, 2].

    Returns (query, key_cache, value_cache, kernel chunks, float64 monolithic rows over the rounded values).
    """
    from kvexact.reference import shared_prefix as sp
    from kvexact.reference.labs.shared_prefix import seed_fixture

    fx = seed_fixture() if seed is None else seed_fixture(seed)
    need = [-(-c.rows // block_size) for c in fx.tree]
    num_blocks = sum(need) + 2
    kc = dev.full((num_blocks, block_size, 1, fx.d_qk), math.nan, dtype)
    vc = dev.full((num_blocks, block_size, 1, fx.d_v), math.nan, dtype)
    ids = list(range(num_blocks))
    random.Random(7).shuffle(ids)
    chunks = []
    for c, node in enumerate(fx.tree):
        blocks = [ids.pop() for _ in range(need[c])]
        for t in range(node.rows):
            kc[blocks[t // block_size], t % block_size, 0] = dev.tensor(fx.k[c][t], torch.float64).to(dtype)
            vc[blocks[t // block_size], t % block_size, 0] = dev.tensor(fx.v[c][t], torch.float64).to(dtype)
        chunks.append(shared.Chunk(tuple(blocks), node.rows, node.seq_begin, node.seq_end))
    query = dev.tensor(fx.q, torch.float64).to(dtype).reshape(len(fx.q), 1, fx.d_qk)
    want = []
    for s in range(len(fx.q)):
        path = sp.path_of(fx.tree, s)
        keys = dev.tensor([row for c in path for row in fx.k[c]], torch.float64).to(dtype)
        values = dev.tensor([row for c in path for row in fx.v[c]], torch.float64).to(dtype)
        want.append(ref.attention_f64(query[s], keys[:, None, :], values[:, None, :])[0])
    return query, kc, vc, chunks, torch.stack(want)


def random_chunk_tree(seed: int, num_seqs: int, depth: int, max_len: int) -> list[tuple[int, int, int]]:
    """A random prefix tree of ``depth`` levels over sequences ``[0, num_seqs)``, parents first: each node is
    (tokens in 1..max_len, seq_begin, seq_end); a node's children cut its range into 1-3 runs."""
    rng = random.Random(seed)
    out: list[tuple[int, int, int]] = []

    def grow(lo: int, hi: int, level: int) -> None:
        out.append((rng.randint(1, max_len), lo, hi))
        if level + 1 < depth:
            cuts = sorted(rng.sample(range(lo + 1, hi), rng.randint(0, min(2, hi - lo - 1))))
            for a, b in zip([lo, *cuts], [*cuts, hi], strict=True):
                grow(a, b, level + 1)

    grow(0, num_seqs, 0)
    return out


def run_tree_case(seed: int, depth: int, block_size: int, threshold: int, dtype=torch.float32, group: int = 2,
                  num_seqs: int = 5) -> dict:
    """``chunked_shared_attention`` over a random tree of ``depth`` levels whose chunks fill pages only partly
    (each chunk in its own shuffled blocks of a NaN-poisoned pool) against float64 attention over each
    sequence's concatenated path."""
    tree = random_chunk_tree(seed, num_seqs, depth, 2 * block_size + 1)
    hkv, dk, dv = 2, 16, 16
    gen = dev.generator(seed)
    need = [-(-n // block_size) for n, _, _ in tree]
    num_blocks = sum(need) + 2
    kc, vc = make_caches(num_blocks, block_size, hkv, dk, dv, dtype, "separate", math.nan)
    ids = list(range(num_blocks))
    random.Random(seed + 1).shuffle(ids)
    chunks, rows = [], []
    for (n, lo, hi), m in zip(tree, need, strict=True):
        blocks = [ids.pop() for _ in range(m)]
        k, v = dev.randn((n, hkv, dk), gen, dtype), dev.randn((n, hkv, dv), gen, dtype)
        for t in range(n):
            kc[blocks[t // block_size], t % block_size] = k[t]
            vc[blocks[t // block_size], t % block_size] = v[t]
        chunks.append(shared.Chunk(tuple(blocks), n, lo, hi))
        rows.append((k, v))
    query = dev.randn((num_seqs, hkv * group, dk), gen, dtype)
    want = []
    for s in range(num_seqs):
        path = [c for c, (_, lo, hi) in enumerate(tree) if lo <= s < hi]
        keys = torch.cat([rows[c][0] for c in path])
        values = torch.cat([rows[c][1] for c in path])
        want.append(ref.attention_f64(query[s], keys, values)[0])
    out = shared.chunked_shared_attention(query, kc, vc, chunks, threshold=threshold, chunk_splits=2,
                                          private_splits=2)
    plan = shared.plan_chunks(chunks, num_seqs, block_size, num_blocks, threshold)
    err, ok = _errors(out, torch.stack(want), dtype)
    return {"max_abs_err": err, "within_tolerance": ok, "finite": bool(torch.isfinite(out).all()),
            "private_levels": len(plan.private_levels), "chunks": len(chunks)}


def run_seed_tree(dtype, block_size: int, threshold: int) -> dict:
    """The Triton schedules over 0x0BE's tree: threshold 1 is ChunkAttention's, 0 the Hydragen coordinate."""
    query, kc, vc, chunks, want = seed_tree_inputs(dtype, block_size)
    out = shared.chunked_shared_attention(query, kc, vc, chunks, threshold=threshold)
    plan = shared.plan_chunks(chunks, query.shape[0], block_size, kc.shape[0], threshold)
    err, ok = _errors(out, want, dtype)
    return {"max_abs_err": err, "within_tolerance": ok, "finite": bool(torch.isfinite(out).all()),
            "partial_rows": plan.partial_rows}
