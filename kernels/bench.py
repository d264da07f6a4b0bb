"""Kernel benchmark on a CUDA device: copy bandwidth, native compile checks, paged decode sweep against the
roofline, shared-prefix against flat decode, and a torch SDPA baseline.

Runs on a bare GPU stack (torch, triton; no click, attrs, z3, tla, jpype): ``python -m kvexact.kernels.bench
--budget-s 600``; ``kvexact bench kernels`` wraps it. Exit codes: 0 every correctness check passed, 1 one
failed, 2 usage error, 3 no CUDA device (nothing measured). ``--cpu-dry-run`` walks every section on tiny
shapes under the Triton interpreter, so the code paths are tested where no GPU exists; its timings mean nothing.
Invariant: every section checks the remaining budget first and is skipped, and reported as skipped, rather
than overrunning it.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial

H200_PEAK_BYTES_PER_S = 4.8e12


def decode_bytes(seq_lens: Sequence[int], num_q_heads: int, num_kv_heads: int, head_dim: int, block_size: int,
                 kv_elem_bytes: int, q_elem_bytes: int, out_elem_bytes: int, num_splits: int) -> int:
    """Roofline bytes of one paged decode step (notes/kernels.md section 4), with exact L_b since tail
    loads are masked: KV rows + q and out + block-table entries + split workspace written then read."""
    batch = len(seq_lens)
    kv = sum(seq_lens) * num_kv_heads * head_dim * 2 * kv_elem_bytes
    q_out = batch * num_q_heads * head_dim * (q_elem_bytes + out_elem_bytes)
    table = sum(-(-n // block_size) for n in seq_lens) * 4
    workspace = 0 if num_splits == 1 else 2 * batch * num_q_heads * num_splits * (head_dim + 1) * 4
    return kv + q_out + table + workspace


def ideal_shared_speedup(batch: int, prefix_tokens: int, suffix_tokens: float) -> float:
    """B (P + S) / (P + B S): K/V rows read by flat decode over rows read when the prefix is read once."""
    return batch * (prefix_tokens + suffix_tokens) / (prefix_tokens + batch * suffix_tokens)


class Budget:
    """Wall-clock budget shared by the sections."""

    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


def _timer(fn: Callable[[], object], device, reps: int, flush=None) -> float:
    """Median microseconds of ``fn`` over ``reps`` runs after a warm-up; L2 flushed before each run on CUDA."""
    import torch

    fn()
    times = []
    for _ in range(reps):
        if flush is not None:
            flush.zero_()
        if device.type == "cuda":
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(stop) * 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def _copy_us(torch, elems: int, device, reps: int) -> float:
    """Median microseconds of one device-to-device copy of ``elems`` fp16 values."""
    src = torch.empty(elems, dtype=torch.float16, device=device)
    dst = torch.empty_like(src)
    return _timer(lambda: dst.copy_(src), device, reps)


def _compile_check(torch, paged, shared, ref, dtype, d: int, group: int, tol, device) -> bool:
    """Every kernel once at (dtype, head dim, group), natively compiled, against float64 or exactly."""
    hkv = 2
    atol, rtol = tol
    q, kc, vc, table, lens, pref, stab, slens = _paged_inputs(
        torch, 3, 37, hkv * group, hkv, d, 16, dtype, device, prefix_tokens=16)
    lens = torch.tensor([37, 1, 20], dtype=torch.int32, device=device)
    out = paged.paged_decode_attention(q, kc, vc, table, lens, num_splits=3)
    want, _ = ref.paged_decode_f64(q.cpu(), kc.cpu(), vc.cpu(), table.cpu(), lens.cpu())
    ok = bool(torch.allclose(out.double().cpu(), want, atol=atol, rtol=rtol))
    slens = torch.tensor([21, 0, 4], dtype=torch.int32, device=device)
    hyd = shared.shared_prefix_attention(q, kc, vc, pref, 16, stab, slens)
    hist = [torch.cat([ref.gather_history(c.cpu(), pref.cpu(), 16),
                       ref.gather_history(c.cpu(), stab[b].cpu(), int(slens[b]))]) for c in (kc, vc) for b in range(3)]
    want_h = torch.stack([ref.attention_f64(q[b].cpu(), hist[b], hist[3 + b])[0] for b in range(3)])
    ok = ok and bool(torch.allclose(hyd.double().cpu(), want_h, atol=atol, rtol=rtol))
    chunks = [shared.Chunk(tuple(pref.tolist()), 16, 0, 3)]
    chunks += [shared.Chunk(tuple(stab[b].tolist()), int(slens[b]), b, b + 1) for b in range(3)]
    chk = shared.chunked_shared_attention(q, kc, vc, chunks)
    ok = ok and bool(torch.allclose(chk.double().cpu(), want_h, atol=atol, rtol=rtol))
    kc2, vc2 = kc.clone(), vc.clone()
    rows = torch.randn((4, hkv, d), device=device).to(dtype)
    slots = torch.tensor([5, -1, 40, 17], dtype=torch.int64, device=device)
    paged.reshape_and_cache(rows, rows, kc2, vc2, slots)
    copy = torch.tensor([[0, 3], [1, 4]], dtype=torch.int64, device=device)
    paged.copy_blocks(kc2, vc2, copy)
    want_k = kc.clone()
    for t, slot in enumerate(slots.tolist()):
        if slot >= 0:
            want_k[slot // 16, slot % 16] = rows[t]
    want_k[3], want_k[4] = want_k[0].clone(), want_k[1].clone()
    return ok and bool(torch.equal(kc2, want_k))


def _emit(lines: list[str], text: str) -> None:
    lines.append(text)
    print(text, flush=True)


def _paged_inputs(torch, batch, seq_len, hq, hkv, d, bs, dtype, device, prefix_tokens=0, gen_seed=0):
    """A pool holding ``batch`` sequences of ``seq_len`` tokens (the first ``prefix_tokens`` shared), with
    shuffled block ids; returns (q, kc, vc, table, lens, prefix_ids, suffix_table, suffix_lens)."""
    torch.manual_seed(gen_seed)
    prefix_blocks = -(-prefix_tokens // bs)
    suffix = seq_len - prefix_tokens
    suffix_blocks = -(-suffix // bs)
    num_blocks = prefix_blocks + batch * suffix_blocks + 1
    kc = torch.randn((num_blocks, bs, hkv, d), dtype=dtype, device=device)
    vc = torch.randn((num_blocks, bs, hkv, d), dtype=dtype, device=device)
    perm = torch.randperm(num_blocks, device=device).to(torch.int32)
    prefix_ids = perm[:prefix_blocks]
    suffix_table = perm[prefix_blocks: prefix_blocks + batch * suffix_blocks].reshape(batch, suffix_blocks)
    if prefix_tokens % bs:
        raise ValueError("the benchmark's shared prefix is page-aligned")
    table = torch.cat([prefix_ids.expand(batch, prefix_blocks), suffix_table], dim=1).contiguous()
    lens = torch.full((batch,), seq_len, dtype=torch.int32, device=device)
    suffix_lens = torch.full((batch,), suffix, dtype=torch.int32, device=device)
    q = torch.randn((batch, hq, d), dtype=dtype, device=device)
    return q, kc, vc, table, lens, prefix_ids.contiguous(), suffix_table.contiguous(), suffix_lens


def run(budget_s: float, cpu_dry_run: bool = False, json_path: str | None = None, reps: int = 50) -> int:
    """Run every section within ``budget_s`` seconds; return the exit code."""
    import torch

    if not cpu_dry_run and not torch.cuda.is_available():
        print("kvexact bench kernels: needs a CUDA device (none is visible); nothing was measured",
              file=sys.stderr)
        return 3
    from kvexact.kernels import paged, shared
    from kvexact.kernels import reference as ref

    budget = Budget(budget_s)
    device = torch.device("cpu" if cpu_dry_run else "cuda")
    lines: list[str] = []
    record: dict = {"device": "cpu (dry run)" if cpu_dry_run else torch.cuda.get_device_name(device),
                    "torch": torch.__version__, "sections": {}}
    failures = 0
    reps = 2 if cpu_dry_run else reps
    flush = None if cpu_dry_run else torch.empty(256 * 1024 * 1024, dtype=torch.int8, device=device)

    # 1. copy bandwidth (read + write bytes of a >= 1 GiB device-to-device copy)
    copy_elems = (1 << 20) if cpu_dry_run else (1 << 30) // 2
    us = _copy_us(torch, copy_elems, device, reps)
    bandwidth = 2 * copy_elems * 2 / (us * 1e-6)  # read + write bytes
    record["copy_bandwidth_bytes_per_s"] = bandwidth
    _emit(lines, f"copy bandwidth: {bandwidth / 1e12:.3f} TB/s measured ({us:.1f} us to copy "
                 f"{copy_elems * 2 / 2**30:.3f} GiB); "
                 f"{bandwidth / H200_PEAK_BYTES_PER_S:.0%} of the H200's 4.8 TB/s")

    # 2. native compilation and correctness of every supported (dtype, head dim, group) combination
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    tol = {"bf16": (1.6e-2, 1e-2), "fp16": (2e-3, 2e-3), "fp32": (1e-5, 1e-5)}
    combos = [(n, d, g) for n in dtypes for d in ((16, 64) if cpu_dry_run else (64, 128, 256))
              for g in ((1, 4) if cpu_dry_run else (1, 4, 8))]
    compiled: list[dict] = []
    for name, d, group in combos:
        if budget.left() < 0.6 * budget_s:
            _emit(lines, f"compile check: stopped after {len(compiled)} of {len(combos)} combinations (budget)")
            break
        try:
            ok = _compile_check(torch, paged, shared, ref, dtypes[name], d, group, tol[name], device)
            error = ""
        except Exception as exc:  # a native compile failure is a finding, not a crash of the whole run
            ok, error = False, f"{type(exc).__name__}: {str(exc)[:200]}"
        compiled.append({"dtype": name, "head_dim": d, "group": group, "ok": ok, "error": error})
        failures += not ok
    bad = [c for c in compiled if not c["ok"]]
    _emit(lines, f"compile check: {len(compiled)} (dtype, head dim, group) combinations compiled and ran; "
                 f"{len(bad)} wrong against float64" + (f": {bad}" if bad else ""))
    record["sections"]["compile"] = compiled

    # 3. paged decode sweep against the roofline
    hq, hkv, d, bs = (4, 2, 16, 16) if cpu_dry_run else (32, 8, 128, 16)
    batches = (1, 2) if cpu_dry_run else (1, 8, 32, 128, 256)
    contexts = (32, 64) if cpu_dry_run else (1024, 4096, 16384, 32768)
    dtype = torch.float16 if cpu_dry_run else torch.bfloat16
    _emit(lines, f"paged decode, {dtype}, Hq {hq}, Hkv {hkv}, D {d}, block {bs}:")
    _emit(lines, f"{'batch':>6} {'context':>8} {'splits':>6} {'us':>10} {'MB moved':>10} {'TB/s':>7} "
                 f"{'of meas.':>8} {'of 4.8':>7} {'sdpa us':>9}")
    sweep = []
    points = [(batch, ctx) for batch in batches for ctx in contexts]
    for batch, ctx in points:
        if budget.left() < 0.35 * budget_s:
            _emit(lines, f"decode sweep: stopped before batch {batch}, context {ctx} (budget)")
            break
        q, kc, vc, table, lens, *_ = _paged_inputs(torch, batch, ctx, hq, hkv, d, bs, dtype, device)
        splits = paged.default_num_splits(batch, hkv, ctx // bs, device)
        paged.paged_decode_attention(q, kc, vc, table, lens, num_splits=splits)  # validated once
        us = _timer(partial(paged.paged_decode_attention, q, kc, vc, table, lens, num_splits=splits,
                            validate=False), device, reps, flush)
        moved = decode_bytes([ctx] * batch, hq, hkv, d, bs, 2, 2, 2, splits)
        rate = moved / (us * 1e-6)
        sdpa_us = math.nan
        if ctx * batch <= 64 * 32768:  # the dense copies stay under about 9 GB each
            try:  # dense baseline over the same rows: torch SDPA with GQA
                kd = kc[table.long()].reshape(batch, -1, hkv, d)[:, :ctx].transpose(1, 2).contiguous()
                vd = vc[table.long()].reshape(batch, -1, hkv, d)[:, :ctx].transpose(1, 2).contiguous()
                qd = q[:, :, None, :]
                sdpa = torch.nn.functional.scaled_dot_product_attention
                sdpa_us = _timer(partial(sdpa, qd, kd, vd, enable_gqa=True), device, reps, flush)
                del kd, vd
            except (RuntimeError, TypeError) as exc:  # out of memory, or an older torch without GQA
                _emit(lines, f"  sdpa baseline skipped: {type(exc).__name__}: {str(exc)[:80]}")
        row = {"batch": batch, "context": ctx, "splits": splits, "us": us, "bytes": moved,
               "bytes_per_s": rate, "of_measured": rate / bandwidth, "sdpa_us": sdpa_us}
        sweep.append(row)
        _emit(lines, f"{batch:>6} {ctx:>8} {splits:>6} {us:>10.1f} {moved / 1e6:>10.2f} {rate / 1e12:>7.3f} "
                     f"{rate / bandwidth:>8.0%} {rate / H200_PEAK_BYTES_PER_S:>7.0%} {sdpa_us:>9.1f}")
        del q, kc, vc, table, lens
        if device.type == "cuda":
            torch.cuda.empty_cache()
    record["sections"]["decode"] = sweep

    # 4. shared prefix (Hydragen-style) against flat paged decode over the same rows
    prefixes = (32,) if cpu_dry_run else (1024, 4096, 16384)
    suffixes = (16,) if cpu_dry_run else (64, 256)
    sbatches = (2,) if cpu_dry_run else (32, 128, 256)
    _emit(lines, f"shared prefix vs flat paged decode ({dtype}, Hq {hq}, Hkv {hkv}, D {d}):")
    _emit(lines, f"{'batch':>6} {'prefix':>7} {'suffix':>7} {'flat us':>10} {'shared us':>10} {'speedup':>8} "
                 f"{'ideal':>7}")
    shared_rows = []
    for batch in sbatches:
        for p in prefixes:
            for s in suffixes:
                if budget.left() < 0.05 * budget_s:
                    break
                q, kc, vc, table, lens, pref, stab, slens = _paged_inputs(
                    torch, batch, p + s, hq, hkv, d, bs, dtype, device, prefix_tokens=p)
                splits = paged.default_num_splits(batch, hkv, (p + s) // bs, device)
                flat_us = _timer(partial(paged.paged_decode_attention, q, kc, vc, table, lens, num_splits=splits,
                                         validate=False), device, reps, flush)
                psplits = max(1, paged.default_num_splits(1, hkv, p // bs, device))
                shared_us = _timer(partial(shared.shared_prefix_attention, q, kc, vc, pref, p, stab, slens,
                                           prefix_splits=psplits, validate=False), device, reps, flush)
                a = paged.paged_decode_attention(q, kc, vc, table, lens, num_splits=splits)
                b = shared.shared_prefix_attention(q, kc, vc, pref, p, stab, slens, prefix_splits=psplits)
                agree = bool(torch.allclose(a.float(), b.float(), atol=2e-2, rtol=2e-2))
                failures += not agree
                ideal = ideal_shared_speedup(batch, p, s)
                shared_rows.append({"batch": batch, "prefix": p, "suffix": s, "flat_us": flat_us,
                                    "shared_us": shared_us, "speedup": flat_us / shared_us, "ideal": ideal,
                                    "agree": agree})
                _emit(lines, f"{batch:>6} {p:>7} {s:>7} {flat_us:>10.1f} {shared_us:>10.1f} "
                             f"{flat_us / shared_us:>8.2f} {ideal:>7.2f}" + ("" if agree else "  OUTPUTS DIFFER"))
                del q, kc, vc, table, lens, pref, stab, slens
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    record["sections"]["shared_prefix"] = shared_rows
    record["failures"] = failures
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(record, fh, indent=1, default=str)
    _emit(lines, f"done: {failures} correctness failure(s); {max(0.0, budget.left()):.0f} s of budget left")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvexact.kernels.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=600.0, help="wall-clock budget in seconds (default 600)")
    parser.add_argument("--json", dest="json_path", default=None, help="also write the figures as JSON here")
    parser.add_argument("--reps", type=int, default=50, help="timed repetitions per point (median)")
    parser.add_argument("--cpu-dry-run", action="store_true", help=argparse.SUPPRESS)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    if args.budget_s <= 0 or args.reps <= 0:
        print("kvexact bench kernels: --budget-s and --reps must be positive", file=sys.stderr)
        return 2
    return run(args.budget_s, args.cpu_dry_run, args.json_path, args.reps)


if __name__ == "__main__":
    sys.exit(main())
