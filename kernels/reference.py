"""Float64 references for the kernels: gather the logical rows, repeat KV heads, softmax in binary64.

Invariant: each function reads only the rows a sequence's length references (never a slot past it) and
computes in float64 on the CPU (the host, whatever the kernels' device), so it is the oracle the kernels are
compared against; results are returned on the device of the inputs, so a test compares them with a kernel's
output where that output lives.
"""

from __future__ import annotations

import math

import torch


def attention_f64(query, keys, values, scale: float | None = None):
    """Attention of one query row ``[Hq, Dk]`` over a logical history ``keys [T, Hkv, Dk]``,
    ``values [T, Hkv, Dv]``; returns float64 ``(out [Hq, Dv], lse [Hq])`` on ``query``'s device; T = 0 gives
    zeros and -inf."""
    out, lse = _attention_host(query, keys, values, scale)
    return out.to(query.device), lse.to(query.device)


def _attention_host(query, keys, values, scale):
    q = query.detach().to("cpu", torch.float64)
    k = keys.detach().to("cpu", torch.float64)
    v = values.detach().to("cpu", torch.float64)
    hq, dk = q.shape
    hkv = k.shape[1]
    scale = 1.0 / math.sqrt(dk) if scale is None else scale
    if k.shape[0] == 0:
        return (torch.zeros((hq, v.shape[2]), dtype=torch.float64, device="cpu"),
                torch.full((hq,), -math.inf, dtype=torch.float64, device="cpu"))
    group = hq // hkv
    k = k.repeat_interleave(group, dim=1)  # [T, Hq, Dk]
    v = v.repeat_interleave(group, dim=1)
    scores = torch.einsum("hd,thd->ht", q, k) * scale
    lse = torch.logsumexp(scores, dim=1)
    probs = torch.exp(scores - lse[:, None])
    return torch.einsum("ht,thd->hd", probs, v), lse


def gather_history(cache, table_row, length: int):
    """The ``length`` logical rows ``[length, Hkv, D]`` of one sequence, read through its block table."""
    bs = cache.shape[1]
    ids = [int(x) for x in table_row[: -(-length // bs)].tolist()] if length else []
    if not ids:
        return cache.new_zeros((0, *cache.shape[2:]))
    return torch.cat([cache[i] for i in ids], dim=0)[:length]


def paged_decode_f64(query, key_cache, value_cache, block_table, seq_lens, scale: float | None = None):
    """float64 ``(out [B, Hq, Dv], lse [B, Hq])`` of paged decode, through the block tables."""
    outs, lses = [], []
    for b, n in enumerate(int(x) for x in seq_lens.tolist()):
        keys = gather_history(key_cache, block_table[b], n)
        values = gather_history(value_cache, block_table[b], n)
        o, lse = attention_f64(query[b], keys, values, scale)
        outs.append(o)
        lses.append(lse)
    return torch.stack(outs), torch.stack(lses)


def merge_f64(outputs, lses):
    """float64 LSE merge of partial states ``[N, ..., Dv]`` / ``[N, ...]``; all-empty gives 0 and -inf."""
    o = torch.as_tensor(outputs, dtype=torch.float64)
    lse = torch.as_tensor(lses, dtype=torch.float64)
    lse = torch.where(torch.isposinf(lse), torch.full_like(lse, -math.inf), lse)
    m = lse.max(dim=0).values
    m_safe = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    w = torch.where(torch.isneginf(lse), torch.zeros_like(lse), torch.exp(lse - m_safe))
    total = w.sum(dim=0)
    o = torch.where(torch.isneginf(lse)[..., None], torch.zeros_like(o), o)
    out = (w[..., None] * o).sum(dim=0) / torch.where(total > 0, total, torch.ones_like(total))[..., None]
    merged = torch.where(total > 0, m_safe + torch.log(torch.where(total > 0, total, torch.ones_like(total))),
                         torch.full_like(total, -math.inf))
    return out, merged
