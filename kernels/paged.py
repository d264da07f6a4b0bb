"""Triton kernels over a paged K/V pool in vLLM V1 layout, with host wrappers that validate first.

Layout: ``key_cache [num_blocks, block_size, num_kv_heads, head_dim_k]`` and ``value_cache [..., head_dim_v]``
with any strides (views of one combined tensor are fine); ``block_table`` int32 ``[num_seqs, max_blocks]``;
``seq_lens`` int32 ``[num_seqs]``; ``slot_mapping`` int64 ``[num_tokens]`` with -1 meaning skip.
Numerics: fp32 accumulation, natural-log fp32 LSE laid out ``[num_tokens, num_heads]`` with ``-inf`` for an
empty partition, outputs in the query dtype. Addressing: every loaded block id or slot is cast to int64
before it multiplies a stride (``_INT64_ADDRESSING``; the overflow test flips it off to prove it matters).
Only ``tl.dot`` shapes >= 16 in every dimension are launched, so what the interpreter runs also compiles.
"""

from __future__ import annotations

import math

# isort: off
from kvexact.kernels import device as _device
from kvexact.kernels.errors import KernelInputError, KernelRejection

_device.settle()  # sets or clears TRITON_INTERPRET before triton is imported

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

# isort: on

_INT64_ADDRESSING = True
"""Cast loaded block ids and slots to int64 before addressing. Only the overflow test turns this off."""

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MIN_DOT = 16  # every tl.dot operand dimension is padded to at least this


def _pow2(n: int, floor: int = 1) -> int:
    return max(floor, triton.next_power_of_2(max(1, int(n))))


def default_block_n(head_dim: int, dtype: torch.dtype) -> int:
    """Key rows per tile: 16 under the interpreter (cheap, still a legal dot); natively
    :func:`native_block_n`."""
    if _device.interpreted():
        return MIN_DOT
    return native_block_n(head_dim, dtype)


def native_block_n(head_dim: int, dtype: torch.dtype) -> int:
    """Key rows per tile of a compiled kernel: 64 rows of up to 256 bytes (the head dim padded to a power of
    two, at least 16), fewer for wider rows (64 x 256 bytes per tile), never below 16, so K and V tiles of a
    pipelined loop stay well inside shared memory."""
    row_bytes = _pow2(head_dim, MIN_DOT) * dtype.itemsize
    return max(MIN_DOT, min(64, 64 * 256 // row_bytes))


def _fp32_dot(dtype: torch.dtype) -> bool:
    """fp32 inputs dot in fp32 (IEEE); bf16 too under the interpreter, which cannot multiply bf16."""
    return dtype == torch.float32 or (_device.interpreted() and dtype == torch.bfloat16)


# ----------------------------------------------------------------------------------------------------
# validation helpers (host side, before any launch)


def _reject(reason: KernelRejection, detail: str) -> None:
    raise KernelInputError(reason, detail)


def _check_tensor(name: str, t, rank: int, dtypes: tuple, device=None) -> None:
    if not isinstance(t, torch.Tensor):
        _reject(KernelRejection.WRONG_SHAPE, f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dim() != rank:
        _reject(KernelRejection.WRONG_SHAPE, f"{name}: expected rank {rank}, got shape {tuple(t.shape)}")
    if t.dtype not in dtypes:
        _reject(KernelRejection.WRONG_DTYPE,
                f"{name}: dtype {t.dtype} not in {', '.join(str(d) for d in dtypes)}")
    if device is not None and t.device != device:
        _reject(KernelRejection.WRONG_DEVICE, f"{name}: on {t.device}, expected {device}")


def _check_same(name: str, got, expected, what: str) -> None:
    if got != expected:
        _reject(KernelRejection.WRONG_SHAPE, f"{name}: {what} is {got}, expected {expected}")


def check_cache_pair(key_cache, value_cache) -> tuple[int, int, int, int, int]:
    """(num_blocks, block_size, num_kv_heads, head_dim_k, head_dim_v) of a valid K/V cache pair."""
    _check_tensor("key_cache", key_cache, 4, FLOAT_DTYPES)
    _check_tensor("value_cache", value_cache, 4, (key_cache.dtype,), key_cache.device)
    nb, bs, hkv, dk = key_cache.shape
    _check_same("value_cache", tuple(value_cache.shape[:3]), (nb, bs, hkv), "[num_blocks, block_size, heads]")
    if bs <= 0 or hkv <= 0 or dk <= 0 or value_cache.shape[3] <= 0:
        _reject(KernelRejection.WRONG_SHAPE, f"key_cache/value_cache: empty extent in {tuple(key_cache.shape)}")
    return nb, bs, hkv, dk, value_cache.shape[3]


def check_block_tables(block_table, lens, num_blocks: int, block_size: int, name: str = "block_table",
                       lens_name: str = "seq_lens", check_ids: bool = True) -> list[int]:
    """Host copy of ``lens`` after checking lengths >= 0, enough table entries, referenced ids in range."""
    lens_host = [int(x) for x in lens.tolist()]
    for i, n in enumerate(lens_host):
        if n < 0:
            _reject(KernelRejection.NEGATIVE_LENGTH, f"{lens_name}[{i}] = {n}")
    need = [(n + block_size - 1) // block_size for n in lens_host]
    width = block_table.shape[1]
    for i, n_blocks in enumerate(need):
        if n_blocks > width:
            _reject(KernelRejection.BLOCK_TABLE_TOO_SHORT,
                    f"{name}[{i}] has {width} entries but {lens_name}[{i}] = {lens_host[i]} needs {n_blocks} "
                    f"blocks of {block_size} tokens")
    if check_ids and need and max(need) > 0:
        used = block_table[:, : max(need)].to("cpu").tolist()
        for i, n_blocks in enumerate(need):
            for j in range(n_blocks):
                if not 0 <= used[i][j] < num_blocks:
                    _reject(KernelRejection.BLOCK_ID_OUT_OF_RANGE,
                            f"{name}[{i}][{j}] = {used[i][j]} not in [0, {num_blocks})")
    return lens_host


# ----------------------------------------------------------------------------------------------------
# reshape_and_cache


@triton.jit
def _reshape_and_cache_kernel(
    key_ptr, value_ptr, kc_ptr, vc_ptr, slot_ptr, block_size,
    s_kt, s_kh, s_kd, s_vt, s_vh, s_vd,
    s_kcb, s_kct, s_kch, s_kcd, s_vcb, s_vct, s_vch, s_vcd,
    HEADS: tl.constexpr, DK: tl.constexpr, DV: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_DK: tl.constexpr, BLOCK_DV: tl.constexpr, CAST_INT64: tl.constexpr,
):
    t = tl.program_id(0)
    h = tl.arange(0, BLOCK_H)
    dk = tl.arange(0, BLOCK_DK)
    dv = tl.arange(0, BLOCK_DV)
    slot = tl.load(slot_ptr + t + h * 0)  # the token's slot, once per head lane (a vector mask)
    if CAST_INT64:
        slot = slot.to(tl.int64)
    keep = (slot >= 0) & (h < HEADS)
    row = (slot // block_size) * s_kcb + (slot % block_size) * s_kct
    vrow = (slot // block_size) * s_vcb + (slot % block_size) * s_vct
    mk = keep[:, None] & (dk[None, :] < DK)
    mv = keep[:, None] & (dv[None, :] < DV)
    k = tl.load(key_ptr + t * s_kt + h[:, None] * s_kh + dk[None, :] * s_kd, mask=mk)
    v = tl.load(value_ptr + t * s_vt + h[:, None] * s_vh + dv[None, :] * s_vd, mask=mv)
    tl.store(kc_ptr + row[:, None] + h[:, None] * s_kch + dk[None, :] * s_kcd, k, mask=mk)
    tl.store(vc_ptr + vrow[:, None] + h[:, None] * s_vch + dv[None, :] * s_vcd, v, mask=mv)


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, *, validate: bool = True) -> None:
    """Write row t of key/value ``[T, num_kv_heads, D]`` into slot ``slot_mapping[t]``; -1 skips.

    Invariant: only the addressed slots change; every other byte of both caches is untouched.
    """
    nb, bs, hkv, dk, dv = check_cache_pair(key_cache, value_cache)
    _check_tensor("key", key, 3, (key_cache.dtype,), key_cache.device)
    _check_tensor("value", value, 3, (key_cache.dtype,), key_cache.device)
    _check_tensor("slot_mapping", slot_mapping, 1, (torch.int64,), key_cache.device)
    num_tokens = key.shape[0]
    _check_same("key", tuple(key.shape), (num_tokens, hkv, dk), "shape")
    _check_same("value", tuple(value.shape), (num_tokens, hkv, dv), "shape")
    _check_same("slot_mapping", tuple(slot_mapping.shape), (num_tokens,), "shape")
    if validate and num_tokens:
        seen: set[int] = set()
        for t, slot in enumerate(slot_mapping.to("cpu").tolist()):
            if slot == -1:
                continue
            if not 0 <= slot < nb * bs:
                _reject(KernelRejection.SLOT_OUT_OF_RANGE, f"slot_mapping[{t}] = {slot} not in [0, {nb * bs}) or -1")
            if slot in seen:
                _reject(KernelRejection.DUPLICATE_SLOT, f"slot_mapping[{t}] = {slot} is written twice")
            seen.add(slot)
    if num_tokens == 0:
        return
    _reshape_and_cache_kernel[(num_tokens,)](
        key, value, key_cache, value_cache, slot_mapping, bs,
        *key.stride(), *value.stride(), *key_cache.stride(), *value_cache.stride(),
        HEADS=hkv, DK=dk, DV=dv, BLOCK_H=_pow2(hkv, 2), BLOCK_DK=_pow2(dk, 2), BLOCK_DV=_pow2(dv, 2),
        CAST_INT64=_INT64_ADDRESSING,
    )


# ----------------------------------------------------------------------------------------------------
# copy_blocks


@triton.jit
def _copy_blocks_kernel(
    kc_ptr, vc_ptr, map_ptr,
    s_kcb, s_kct, s_kch, s_kcd, s_vcb, s_vct, s_vch, s_vcd,
    HEADS: tl.constexpr, DK: tl.constexpr, DV: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_DK: tl.constexpr, BLOCK_DV: tl.constexpr, CAST_INT64: tl.constexpr,
):
    p = tl.program_id(0)
    t = tl.program_id(1)
    src = tl.load(map_ptr + 2 * p)
    dst = tl.load(map_ptr + 2 * p + 1)
    if CAST_INT64:
        src = src.to(tl.int64)
        dst = dst.to(tl.int64)
    h = tl.arange(0, BLOCK_H)
    dk = tl.arange(0, BLOCK_DK)
    dv = tl.arange(0, BLOCK_DV)
    mk = (h[:, None] < HEADS) & (dk[None, :] < DK)
    mv = (h[:, None] < HEADS) & (dv[None, :] < DV)
    k_off = t * s_kct + h[:, None] * s_kch + dk[None, :] * s_kcd
    v_off = t * s_vct + h[:, None] * s_vch + dv[None, :] * s_vcd
    k = tl.load(kc_ptr + src * s_kcb + k_off, mask=mk)
    v = tl.load(vc_ptr + src * s_vcb + v_off, mask=mv)
    tl.store(kc_ptr + dst * s_kcb + k_off, k, mask=mk)
    tl.store(vc_ptr + dst * s_vcb + v_off, v, mask=mv)


def copy_blocks(key_cache, value_cache, block_mapping, *, validate: bool = True) -> None:
    """Copy whole blocks ``src -> dst`` for each row of ``block_mapping`` (int64 ``[P, 2]``), K and V.

    Invariant: destinations are distinct and none is a source in the same launch (else rejected), so the
    copies are independent; blocks that are not destinations are untouched.
    """
    nb, bs, hkv, dk, dv = check_cache_pair(key_cache, value_cache)
    _check_tensor("block_mapping", block_mapping, 2, (torch.int64,), key_cache.device)
    if block_mapping.shape[1] != 2:
        _reject(KernelRejection.WRONG_SHAPE, f"block_mapping: expected [P, 2], got {tuple(block_mapping.shape)}")
    pairs = block_mapping.shape[0]
    if validate and pairs:
        rows = block_mapping.to("cpu").tolist()
        sources = {src for src, _ in rows}
        dests: set[int] = set()
        for i, (src, dst) in enumerate(rows):
            for which, b in (("source", src), ("destination", dst)):
                if not 0 <= b < nb:
                    _reject(KernelRejection.BLOCK_ID_OUT_OF_RANGE, f"block_mapping[{i}] {which} {b} not in [0, {nb})")
            if dst in dests:
                _reject(KernelRejection.DUPLICATE_DESTINATION, f"block_mapping[{i}]: block {dst} is already a destination")
            if dst in sources:
                _reject(KernelRejection.DESTINATION_IS_SOURCE, f"block_mapping[{i}]: block {dst} is also a source")
            dests.add(dst)
    if pairs == 0:
        return
    mapping = block_mapping.contiguous()
    _copy_blocks_kernel[(pairs, bs)](
        key_cache, value_cache, mapping, *key_cache.stride(), *value_cache.stride(),
        HEADS=hkv, DK=dk, DV=dv, BLOCK_H=_pow2(hkv, 2), BLOCK_DK=_pow2(dk, 2), BLOCK_DV=_pow2(dv, 2),
        CAST_INT64=_INT64_ADDRESSING,
    )


# ----------------------------------------------------------------------------------------------------
# the online-softmax tile loop shared by paged decode and the chunk-first shared-prefix kernel


@triton.jit
def _attend_tokens(
    q, tab_ptr, s_tabp, lo, hi, block_size, kc_ptr, vc_ptr,
    s_kcb, s_kct, s_kch, s_kcd, s_vcb, s_vct, s_vch, s_vcd,
    kvh, scale, dk, dv, ROWS: tl.constexpr, BLOCK_DV: tl.constexpr,
    DK: tl.constexpr, DV: tl.constexpr, BLOCK_N: tl.constexpr,
    FP32_DOT: tl.constexpr, CAST_INT64: tl.constexpr,
):
    """Attend the query rows ``q [ROWS, BLOCK_DK]`` over tokens ``[lo, hi)`` read through the block table
    at ``tab_ptr``; returns the fp32 state ``(out [ROWS, BLOCK_DV], lse [ROWS])``, lse -inf when empty.
    Loaded block ids are cast to int64 before they multiply a stride (when ``CAST_INT64``)."""
    m = tl.full([ROWS], float("-inf"), tl.float32)
    l_sum = tl.zeros([ROWS], tl.float32)
    acc = tl.zeros([ROWS, BLOCK_DV], tl.float32)
    for tile in range(lo, hi, BLOCK_N):
        pos = tile + tl.arange(0, BLOCK_N)
        valid = pos < hi
        blk = tl.load(tab_ptr + (pos // block_size) * s_tabp, mask=valid, other=0)
        if CAST_INT64:
            blk = blk.to(tl.int64)
        row = blk * s_kcb + (pos % block_size) * s_kct
        vrow = blk * s_vcb + (pos % block_size) * s_vct
        k = tl.load(kc_ptr + row[:, None] + kvh * s_kch + dk[None, :] * s_kcd,
                    mask=valid[:, None] & (dk[None, :] < DK), other=0.0)
        v = tl.load(vc_ptr + vrow[:, None] + kvh * s_vch + dv[None, :] * s_vcd,
                    mask=valid[:, None] & (dv[None, :] < DV), other=0.0)
        if FP32_DOT:
            scores = tl.dot(q, tl.trans(k.to(tl.float32)), input_precision="ieee")
        else:
            scores = tl.dot(q, tl.trans(k))
        scores = tl.where(valid[None, :], scores * scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, 1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(scores - m_new[:, None])
        l_sum = l_sum * alpha + tl.sum(p, 1)
        if FP32_DOT:
            acc = acc * alpha[:, None] + tl.dot(p, v.to(tl.float32), input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    nonempty = l_sum > 0
    out = acc / tl.where(nonempty, l_sum, 1.0)[:, None]
    lse = tl.where(nonempty, m + tl.log(tl.where(nonempty, l_sum, 1.0)), float("-inf"))
    return out, lse


# ----------------------------------------------------------------------------------------------------
# paged decode attention: stage 1 (one program per sequence, KV head and page-aligned split)


@triton.jit
def _decode_split_kernel(
    q_ptr, kc_ptr, vc_ptr, bt_ptr, lens_ptr, po_ptr, plse_ptr,
    scale, block_size, num_splits,
    s_qb, s_qh, s_qd,
    s_kcb, s_kct, s_kch, s_kcd, s_vcb, s_vct, s_vch, s_vcd,
    s_btb, s_btp,
    s_pos, s_pob, s_poh, s_pod, s_ls, s_lb, s_lh,
    GROUP: tl.constexpr, DK: tl.constexpr, DV: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_DK: tl.constexpr, BLOCK_DV: tl.constexpr, BLOCK_N: tl.constexpr,
    FP32_DOT: tl.constexpr, CAST_INT64: tl.constexpr,
):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
    seq_len = tl.load(lens_ptr + b)
    pages = tl.cdiv(seq_len, block_size)
    pages_per_split = tl.cdiv(pages, num_splits)
    start = split * pages_per_split * block_size
    end = tl.minimum(start + pages_per_split * block_size, seq_len)

    g = tl.arange(0, BLOCK_G)
    dk = tl.arange(0, BLOCK_DK)
    dv = tl.arange(0, BLOCK_DV)
    heads = kvh * GROUP + g
    gmask = g < GROUP
    q = tl.load(q_ptr + b * s_qb + heads[:, None] * s_qh + dk[None, :] * s_qd,
                mask=gmask[:, None] & (dk[None, :] < DK), other=0.0)
    if FP32_DOT:
        q = q.to(tl.float32)
    out, lse = _attend_tokens(q, bt_ptr + b * s_btb, s_btp, start, end, block_size, kc_ptr, vc_ptr,
                              s_kcb, s_kct, s_kch, s_kcd, s_vcb, s_vct, s_vch, s_vcd, kvh, scale, dk, dv,
                              BLOCK_G, BLOCK_DV, DK, DV, BLOCK_N, FP32_DOT, CAST_INT64)
    tl.store(po_ptr + split * s_pos + b * s_pob + heads[:, None] * s_poh + dv[None, :] * s_pod, out,
             mask=gmask[:, None] & (dv[None, :] < DV))
    tl.store(plse_ptr + split * s_ls + b * s_lb + heads * s_lh, lse, mask=gmask)


# ----------------------------------------------------------------------------------------------------
# merging partial states: out[t, h] = LSE-merge over n of (o[n, t, h, :], lse[n, t, h])


@triton.jit
def _merge_states_kernel(
    o_ptr, lse_ptr, out_ptr, out_lse_ptr, num_states,
    s_on, s_ot, s_oh, s_od, s_ln, s_lt, s_lh, s_outt, s_outh, s_outd, s_olt, s_olh,
    DV: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_DV: tl.constexpr, HAS_LSE_OUT: tl.constexpr,
):
    t = tl.program_id(0)
    h = tl.program_id(1)
    n = tl.arange(0, BLOCK_S)
    dv = tl.arange(0, BLOCK_DV)
    lse = tl.load(lse_ptr + n * s_ln + t * s_lt + h * s_lh, mask=n < num_states, other=float("-inf"))
    lse = tl.where(lse == float("inf"), float("-inf"), lse)  # FA2 marks an empty state with +inf
    m = tl.max(lse, 0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    live = lse > float("-inf")
    w = tl.where(live, tl.exp(lse - m_safe), 0.0)
    # an empty state is an identity: its output is never read, so garbage or NaN there cannot leak
    o = tl.load(o_ptr + n[:, None] * s_on + t * s_ot + h * s_oh + dv[None, :] * s_od,
                mask=live[:, None] & (dv[None, :] < DV), other=0.0).to(tl.float32)
    total = tl.sum(w, 0)
    out = tl.sum(w[:, None] * o, 0) / tl.where(total > 0, total, 1.0)
    tl.store(out_ptr + t * s_outt + h * s_outh + dv * s_outd, out, mask=dv < DV)
    if HAS_LSE_OUT:
        lse_out = tl.where(total > 0, m_safe + tl.log(tl.where(total > 0, total, 1.0)), float("-inf"))
        tl.store(out_lse_ptr + t * s_olt + h * s_olh, lse_out)


def merge_states(states_o, states_lse, out, out_lse=None) -> None:
    """LSE-merge N partial states ``o [N, T, H, Dv]`` (any float dtype) and ``lse [N, T, H]`` into ``out``.

    Invariant: the result equals softmax attention over the union of the N disjoint key partitions; an
    empty state (lse -inf or +inf) is an identity, and all-empty gives output 0 and lse -inf.
    """
    n_states, n_tokens, n_heads, dv = states_o.shape
    if n_tokens == 0 or n_heads == 0:
        return
    lse_out = out_lse if out_lse is not None else states_lse  # unused pointer when not written
    _merge_states_kernel[(n_tokens, n_heads)](
        states_o, states_lse, out, lse_out, n_states,
        *states_o.stride(), *states_lse.stride(), *out.stride(),
        *(out_lse.stride() if out_lse is not None else (0, 0)),
        DV=dv, BLOCK_S=_pow2(n_states, 2), BLOCK_DV=_pow2(dv, 2), HAS_LSE_OUT=out_lse is not None,
    )


def merge_attn_states(prefix_output, prefix_lse, suffix_output, suffix_lse, *, output=None,
                      return_lse: bool = False):
    """Exact LSE merge of two partial states (``o [T, H, Dv]``, natural-log ``lse [T, H]``).

    Either side may be empty (lse -inf, or +inf as FlashAttention 2 writes it); both empty gives 0 and -inf.
    Returns ``output`` (dtype of ``prefix_output`` unless given), and the merged lse when ``return_lse``.
    """
    _check_tensor("prefix_output", prefix_output, 3, FLOAT_DTYPES)
    dev = prefix_output.device
    _check_tensor("suffix_output", suffix_output, 3, FLOAT_DTYPES, dev)
    _check_tensor("prefix_lse", prefix_lse, 2, (torch.float32,), dev)
    _check_tensor("suffix_lse", suffix_lse, 2, (torch.float32,), dev)
    t, h, dv = prefix_output.shape
    _check_same("suffix_output", tuple(suffix_output.shape), (t, h, dv), "shape")
    _check_same("prefix_lse", tuple(prefix_lse.shape), (t, h), "shape")
    _check_same("suffix_lse", tuple(suffix_lse.shape), (t, h), "shape")
    if output is None:
        output = torch.empty_like(prefix_output)
    else:
        _check_tensor("output", output, 3, FLOAT_DTYPES, dev)
        _check_same("output", tuple(output.shape), (t, h, dv), "shape")
    states_o = torch.stack([prefix_output.to(torch.float32), suffix_output.to(torch.float32)])
    states_lse = torch.stack([prefix_lse, suffix_lse])
    lse = torch.empty((t, h), dtype=torch.float32, device=dev) if return_lse else None
    merge_states(states_o, states_lse, output, lse)
    return (output, lse) if return_lse else output


# ----------------------------------------------------------------------------------------------------
# paged decode attention: host wrapper


def split_count(sms: int, batch: int, num_kv_heads: int, longest: int, block_size: int) -> int:
    """The split count of a device with ``sms`` multiprocessors: about 2 programs per SM over the
    ``batch * num_kv_heads`` (sequence, KV head) pairs, yet at least 4 pages of the longest sequence
    (``longest`` tokens in pages of ``block_size``) per split, and at least 1."""
    pages = -(-longest // block_size)
    want = max(1, -(-2 * sms // max(1, batch * num_kv_heads)))
    return max(1, min(want, -(-pages // 4)))


def default_num_splits(batch: int, num_kv_heads: int, longest: int, block_size: int, device) -> int:
    """:func:`split_count` with the CUDA device's multiprocessor count; 1 on a CPU (the interpreter runs
    the programs one by one: splitting only adds a merge)."""
    if device.type != "cuda":
        return 1
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return split_count(sms, batch, num_kv_heads, longest, block_size)


def check_decode_inputs(query, key_cache, value_cache, block_table, seq_lens, validate: bool = True):
    """(geometry, host lens or None) after the decode contract checks; raises KernelInputError otherwise.
    Dtypes, shapes and devices are always checked; lengths and referenced ids only when ``validate``."""
    nb, bs, hkv, dk, dv = check_cache_pair(key_cache, value_cache)
    dev = key_cache.device
    _check_tensor("query", query, 3, (key_cache.dtype,), dev)
    _check_tensor("block_table", block_table, 2, (torch.int32,), dev)
    _check_tensor("seq_lens", seq_lens, 1, (torch.int32,), dev)
    batch, hq = query.shape[0], query.shape[1]
    _check_same("query", query.shape[2], dk, "head dim (must match key_cache)")
    if hq % hkv:
        _reject(KernelRejection.HEAD_GROUP_MISMATCH, f"query has {hq} heads, key_cache {hkv} KV heads")
    _check_same("block_table", block_table.shape[0], batch, "row count")
    _check_same("seq_lens", seq_lens.shape[0], batch, "length")
    # validate=False (timing only) reads nothing back from the device: no host synchronization
    lens = check_block_tables(block_table, seq_lens, nb, bs) if validate else None
    return (nb, bs, hkv, dk, dv, batch, hq), lens


def decode_partials(query, key_cache, value_cache, block_table, seq_lens, scale: float, num_splits: int,
                    states_o, states_lse, block_n: int | None = None) -> None:
    """Stage 1 only: split s of sequence b writes its normalized output and lse into
    ``states_o[s, b, h, :]`` and ``states_lse[s, b, h]`` (views with any strides). No validation."""
    _nb, bs, hkv, dk, dv = key_cache.shape[0], key_cache.shape[1], key_cache.shape[2], key_cache.shape[3], \
        value_cache.shape[3]
    batch, hq = query.shape[0], query.shape[1]
    group = hq // hkv
    if batch == 0:
        return
    _decode_split_kernel[(batch, hkv, num_splits)](
        query, key_cache, value_cache, block_table, seq_lens, states_o, states_lse,
        float(scale), bs, num_splits,
        *query.stride(), *key_cache.stride(), *value_cache.stride(), *block_table.stride(),
        *states_o.stride(), *states_lse.stride(),
        GROUP=group, DK=dk, DV=dv,
        BLOCK_G=_pow2(group, MIN_DOT), BLOCK_DK=_pow2(dk, MIN_DOT), BLOCK_DV=_pow2(dv, MIN_DOT),
        BLOCK_N=block_n or default_block_n(max(dk, dv), query.dtype), FP32_DOT=_fp32_dot(query.dtype),
        CAST_INT64=_INT64_ADDRESSING, num_stages=2,
    )


def decode_launcher(query, key_cache, value_cache, block_table, seq_lens, num_splits: int, *,
                    scale: float | None = None, output=None, return_lse: bool = False, block_n: int | None = None):
    """Allocate the output (unless given) and the split workspace now; return ``(launch, output, lse)``.

    ``launch()`` runs stage 1 and the LSE merge and nothing else: no allocation, no validation and no host
    synchronization, so it can be timed on its own or captured in a CUDA graph. Inputs are not checked
    here (see :func:`paged_decode_attention`); ``lse`` is None unless ``return_lse``.
    """
    batch, hq, dk = query.shape
    dv = value_cache.shape[3]
    dev = query.device
    if output is None:
        output = torch.empty((batch, hq, dv), dtype=query.dtype, device=dev)
    states_o = torch.empty((num_splits, batch, hq, dv), dtype=torch.float32, device=dev)
    states_lse = torch.empty((num_splits, batch, hq), dtype=torch.float32, device=dev)
    lse = torch.empty((batch, hq), dtype=torch.float32, device=dev) if return_lse else None
    scale = 1.0 / math.sqrt(dk) if scale is None else float(scale)

    def launch() -> None:
        decode_partials(query, key_cache, value_cache, block_table, seq_lens, scale, num_splits,
                        states_o, states_lse, block_n)
        merge_states(states_o, states_lse, output, lse)

    return launch, output, lse


def paged_decode_attention(query, key_cache, value_cache, block_table, seq_lens, *, scale: float | None = None,
                           num_splits: int | None = None, output=None, return_lse: bool = False,
                           validate: bool = True, block_n: int | None = None):
    """Decode attention: sequence b's query row ``[Hq, Dk]`` over its first ``seq_lens[b]`` cached tokens.

    GQA: query head h reads KV head ``h // (Hq / Hkv)``. Split-K: each sequence's pages are cut into
    ``num_splits`` page-aligned ranges (empty ones write lse -inf) merged by LSE in a second kernel.
    Only referenced slots are read (table entries past the length and tails of last blocks never are).
    Returns ``output [B, Hq, Dv]`` in the query dtype, and fp32 ``lse [B, Hq]`` when ``return_lse``.
    ``validate=False`` skips the host checks that read device tensors.
    """
    (nb, bs, hkv, dk, dv, batch, hq), lens = check_decode_inputs(
        query, key_cache, value_cache, block_table, seq_lens, validate)
    if num_splits is None:
        longest = max(lens, default=0) if lens is not None else int(seq_lens.max().item()) if batch else 0
        num_splits = default_num_splits(batch, hkv, longest, bs, query.device)
    if int(num_splits) <= 0:
        _reject(KernelRejection.NON_POSITIVE_SPLITS, f"num_splits = {num_splits}")
    if output is not None:
        _check_tensor("output", output, 3, FLOAT_DTYPES, query.device)
        _check_same("output", tuple(output.shape), (batch, hq, dv), "shape")
    launch, output, lse = decode_launcher(query, key_cache, value_cache, block_table, seq_lens, int(num_splits),
                                          scale=scale, output=output, return_lse=return_lse, block_n=block_n)
    launch()
    return (output, lse) if return_lse else output


def to_flashinfer_lse(lse):
    """Natural-log LSE to FlashInfer's base-2 convention."""
    return lse * (1.0 / math.log(2.0))


def kernel_block_table(allocator_tables, allocator_block_tokens: int, kernel_block_tokens: int,
                       width: int | None = None, pad_id: int = 0):
    """int32 kernel block table ``[num_seqs, width]`` from allocator block tables (lists of ids), through
    :func:`kvexact.reference.blockmap.expand_block_table` (P_a = q P_k; a kernel block that does not divide
    the allocator block is rejected there). Entries past a row's expansion hold ``pad_id``. On the policy's device."""
    from kvexact.reference.blockmap import expand_block_table

    rows = [expand_block_table(list(t), allocator_block_tokens, kernel_block_tokens) for t in allocator_tables]
    width = max([1, *(len(r) for r in rows)]) if width is None else width
    if any(len(r) > width for r in rows):
        _reject(KernelRejection.BLOCK_TABLE_TOO_SHORT, f"an expanded row is longer than width {width}")
    return _device.tensor([r + [pad_id] * (width - len(r)) for r in rows], torch.int32)


def slots_for(table_row, positions, block_size: int):
    """int64 slot mapping (on the policy's device) of token ``positions`` of one sequence:
    ``table[t // P] * P + t % P``."""
    ids = [int(x) for x in (table_row.tolist() if isinstance(table_row, torch.Tensor) else table_row)]
    slots = []
    for t in positions:
        if not 0 <= t // block_size < len(ids):
            _reject(KernelRejection.BLOCK_TABLE_TOO_SHORT, f"position {t} needs entry {t // block_size} of a "
                                                           f"{len(ids)}-entry table")
        slots.append(ids[t // block_size] * block_size + t % block_size)
    return _device.tensor(slots, torch.int64)
