"""Kernel benchmark: the device's copy bandwidth, native compile checks, paged decode against the roofline
and against torch SDPA, and shared-prefix attention against flat paged decode.

Runs on a bare GPU stack (torch, triton; no click, attrs, z3, tla, jpype): ``python -m kvexact.kernels.bench
--budget-s 300``; ``kvexact bench kernels`` wraps it. Exit codes: 0 every correctness check passed, 1 one
failed, 2 usage error, 3 no CUDA device (nothing measured). ``--device cpu`` walks every section on tiny
shapes under the Triton interpreter, so the code paths are tested where no GPU exists; its timings mean nothing.

Timing: on CUDA each point's kernel launches (and nothing else: inputs, outputs and workspaces are made
first, nothing is validated, copied to the device or read back) are captured once in a CUDA graph, and
``triton.testing.do_bench`` times the graph's replays (median, L2 flushed before each run), so Python
wrappers and launch overhead stay out of the timed region; the eager time, which includes Triton's Python
launch path, is reported beside it. Roofline bytes include the split workspace (stage 1 writes it and the
merge reads it, at every split count). The peak is the device's own: a measured device-to-device copy of
1 GiB, read plus write bytes. Baselines, as ratios of their time to the kernel's: torch SDPA over dense K/V
gathered beforehand, and gather-then-SDPA from the paged pool (the gather timed, as a runtime without a
paged kernel pays it).
Invariant: every section checks the remaining budget first and is skipped, and reported as skipped, rather
than overrunning it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary sibling renamed into place (a reader sees the old or
    the new file, never a part). kvexact.spec.files does this for every other layer; the benchmark runs on
    the bare GPU stack, where only torch, Triton and the kernels are importable."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def decode_bytes(seq_lens: Sequence[int], num_q_heads: int, num_kv_heads: int, head_dim: int, block_size: int,
                 kv_elem_bytes: int, q_elem_bytes: int, out_elem_bytes: int, num_splits: int) -> int:
    """Roofline bytes of one paged decode step (docs/kernels.md, "Roofline of one paged decode step"), with exact L_b since tail
    loads are masked: KV rows + q and out + block-table entries + the fp32 split workspace (output and lse
    per split), written by stage 1 and read by the merge (also for one split: the merge always runs)."""
    batch = len(seq_lens)
    kv = sum(seq_lens) * num_kv_heads * head_dim * 2 * kv_elem_bytes
    q_out = batch * num_q_heads * head_dim * (q_elem_bytes + out_elem_bytes)
    table = sum(-(-n // block_size) for n in seq_lens) * 4
    workspace = 2 * batch * num_q_heads * num_splits * (head_dim + 1) * 4
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


def time_us(fn: Callable[[], object], device: Any, rep_ms: float, graph: bool = True) -> tuple[float, str]:
    """Median microseconds of ``fn`` and how it was timed.

    CUDA: ``fn`` runs once (compiling), is captured in a CUDA graph (``graph``) and ``do_bench`` times the
    replays; a launch sequence that cannot be captured is timed eagerly and labelled so. CPU (dry run):
    ``time.perf_counter`` around one call, which says nothing about speed.
    """
    if device.type != "cuda":
        fn()
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6, "cpu-wallclock"
    import torch
    import triton.testing

    fn()
    torch.cuda.synchronize()
    how, timed = "do_bench(eager)", fn
    cuda_graph = None
    if graph:
        try:
            cuda_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(cuda_graph):
                fn()
            how, timed = "do_bench(cuda graph)", cuda_graph.replay
        except RuntimeError:  # not capturable: fall back to eager timing, labelled as such
            cuda_graph = None
            torch.cuda.synchronize()
    ms = triton.testing.do_bench(timed, warmup=max(5, int(rep_ms // 4)), rep=rep_ms, return_mode="median")
    del cuda_graph
    return float(ms) * 1e3, how


def _paged_inputs(batch, seq_len, hq, hkv, d, bs, dtype, prefix_tokens=0, seed=0):
    """A pool holding ``batch`` sequences of ``seq_len`` tokens (the first ``prefix_tokens`` shared), with
    shuffled block ids, made by the device policy; returns (q, kc, vc, table, lens, prefix_ids, suffix_table,
    suffix_lens)."""
    import torch

    from kvexact.kernels import device as dev

    if prefix_tokens % bs:
        raise ValueError("the benchmark's shared prefix is page-aligned")
    prefix_blocks = prefix_tokens // bs
    suffix = seq_len - prefix_tokens
    suffix_blocks = -(-suffix // bs)
    num_blocks = prefix_blocks + batch * suffix_blocks + 1
    kc = dev.randn_native((num_blocks, bs, hkv, d), dtype, seed)
    vc = dev.randn_native((num_blocks, bs, hkv, d), dtype, seed + 1)
    perm = dev.randperm(num_blocks, dev.generator(seed)).to(torch.int32)
    prefix_ids = perm[:prefix_blocks].contiguous()
    suffix_table = perm[prefix_blocks: prefix_blocks + batch * suffix_blocks].reshape(batch, suffix_blocks)
    table = torch.cat([prefix_ids.expand(batch, prefix_blocks), suffix_table], dim=1).contiguous()
    lens = dev.full((batch,), seq_len, torch.int32)
    suffix_lens = dev.full((batch,), suffix, torch.int32)
    q = dev.randn_native((batch, hq, d), dtype, seed + 2)
    return q, kc, vc, table, lens, prefix_ids, suffix_table.contiguous(), suffix_lens


def _compile_check(dtype, d: int, group: int, tol) -> bool:
    """Every kernel once at (dtype, head dim, group), built for the policy's device, against float64 (the
    attention kernels) or exactly (the cache writes and block copies)."""
    import torch

    from kvexact.kernels import device as dev
    from kvexact.kernels import paged, shared
    from kvexact.kernels import reference as ref

    hkv = 2
    atol, rtol = tol
    q, kc, vc, table, _lens, pref, stab, _ = _paged_inputs(3, 37, hkv * group, hkv, d, 16, dtype, prefix_tokens=16)
    lens = dev.tensor([37, 1, 20], torch.int32)
    out = paged.paged_decode_attention(q, kc, vc, table, lens, num_splits=3)
    want, _ = ref.paged_decode_f64(q.cpu(), kc.cpu(), vc.cpu(), table.cpu(), lens.cpu())
    ok = bool(torch.allclose(out.double().cpu(), want, atol=atol, rtol=rtol))
    slens = dev.tensor([21, 0, 4], torch.int32)
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
    rows = dev.randn((4, hkv, d), dev.generator(1), dtype)
    slots = dev.tensor([5, -1, 40, 17], torch.int64)
    paged.reshape_and_cache(rows, rows, kc2, vc2, slots)
    paged.copy_blocks(kc2, vc2, dev.tensor([[0, 3], [1, 4]], torch.int64))
    want_k = kc.clone()
    for t, slot in enumerate(slots.tolist()):
        if slot >= 0:
            want_k[slot // 16, slot % 16] = rows[t]
    want_k[3], want_k[4] = want_k[0].clone(), want_k[1].clone()
    return ok and bool(torch.equal(kc2, want_k))


def _emit(text: str) -> None:
    print(text, flush=True)


def _free(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.empty_cache()


COMPILE_COMBOS_CUDA = [("bf16", 128, 1), ("bf16", 64, 4), ("bf16", 256, 8), ("fp16", 128, 8), ("fp16", 64, 1),
                       ("fp16", 256, 4), ("fp32", 128, 4), ("fp32", 64, 8), ("fp32", 256, 1)]
"""(dtype, head dim, query-head group): every pair of levels of two factors occurs once (a Latin square)."""


def _section_copy(torch, device, dry: bool, rep_ms: float, record: dict) -> float:
    from kvexact.kernels import device as dev

    elems = (1 << 20) if dry else (1 << 29)  # fp16: 2 MiB on the dry run, 1 GiB on a GPU
    src = dev.randn_native((elems,), torch.float16, 0)
    dst = dev.empty((elems,), torch.float16)
    us, how = time_us(lambda: dst.copy_(src), device, rep_ms, graph=False)
    bandwidth = 2 * elems * 2 / (us * 1e-6)
    record["copy"] = {"bytes_each_way": elems * 2, "us": us, "timer": how, "bytes_per_s": bandwidth}
    _emit(f"copy bandwidth: {bandwidth / 1e12:.3f} TB/s measured (read + write of {elems * 2 / 2**30:.3f} GiB in "
          f"{us:.1f} us, {how}); the peak every fraction below is taken of")
    return bandwidth


def _section_compile(torch, dry: bool, budget: Budget, budget_s: float, record: dict) -> int:
    from kvexact.kernels.differential import TOLERANCES

    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    combos = [("fp16", 16, 1), ("bf16", 16, 4), ("fp32", 64, 4)] if dry else COMPILE_COMBOS_CUDA
    rows: list[dict] = []
    for name, d, group in combos:
        if budget.left() < 0.7 * budget_s:
            _emit(f"compile check: stopped after {len(rows)} of {len(combos)} combinations (budget)")
            break
        try:
            ok, error = _compile_check(dtypes[name], d, group, TOLERANCES[dtypes[name]]), ""
        except Exception as exc:  # a native compile failure is a finding, not a crash of the whole run
            ok, error = False, f"{type(exc).__name__}: {str(exc)[:200]}"
        rows.append({"dtype": name, "head_dim": d, "group": group, "ok": ok, "error": error})
    bad = [c for c in rows if not c["ok"]]
    _emit(f"compile check: {len(rows)} (dtype, head dim, group) combinations built and ran; {len(bad)} wrong "
          f"against float64" + (f": {bad}" if bad else ""))
    record["compile"] = rows
    return len(bad)


def _dense_baselines(torch, q, kc, vc, table, batch, ctx, hkv, d, device, rep_ms):
    """(dense SDPA us, gather-then-SDPA us, dense output) over the same K/V rows."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    flat = table.reshape(-1).long()
    kd = kc.index_select(0, flat).reshape(batch, -1, hkv, d)[:, :ctx].transpose(1, 2).contiguous()
    vd = vc.index_select(0, flat).reshape(batch, -1, hkv, d)[:, :ctx].transpose(1, 2).contiguous()
    qd = q[:, :, None, :]
    dense_out = sdpa(qd, kd, vd, enable_gqa=True)[:, :, 0]
    dense_us, _ = time_us(lambda: sdpa(qd, kd, vd, enable_gqa=True), device, rep_ms)

    def gather_then_sdpa():
        kg = kc.index_select(0, flat).reshape(batch, -1, hkv, d)[:, :ctx].transpose(1, 2)
        vg = vc.index_select(0, flat).reshape(batch, -1, hkv, d)[:, :ctx].transpose(1, 2)
        return sdpa(qd, kg, vg, enable_gqa=True)

    gather_us, _ = time_us(gather_then_sdpa, device, rep_ms)
    return dense_us, gather_us, dense_out


def _section_decode(torch, device, dry: bool, rep_ms: float, bandwidth: float, budget: Budget, budget_s: float,
                    record: dict) -> int:
    from kvexact.kernels import paged

    hq, hkv, d, bs = (4, 2, 16, 16) if dry else (32, 8, 128, 16)
    batches = (1, 2) if dry else (1, 8, 32, 128, 256)
    contexts = (32, 64) if dry else (1024, 4096, 16384, 32768)
    dtype = torch.float16 if dry else torch.bfloat16
    _emit(f"paged decode, {str(dtype)[6:]}, Hq {hq}, Hkv {hkv}, D {d}, block {bs}; fractions of the measured "
          f"copy bandwidth; baselines as (their time / kernel time):")
    _emit(f"{'batch':>6} {'context':>8} {'splits':>6} {'us':>9} {'eager us':>9} {'MB':>9} {'TB/s':>6} "
          f"{'of copy':>7} {'sdpa':>9} {'ratio':>6} {'gth+sdpa':>9} {'ratio':>6}")
    rows, failures = [], 0
    # longest contexts first (the headline figure), then shorter ones while the budget lasts
    for ctx, batch in sorted(((c, b) for b in batches for c in contexts), key=lambda p: (-p[0], p[1])):
        if budget.left() < 0.35 * budget_s:
            _emit(f"decode sweep: stopped before batch {batch}, context {ctx} (budget)")
            break
        q, kc, vc, table, lens, *_ = _paged_inputs(batch, ctx, hq, hkv, d, bs, dtype)
        splits = paged.default_num_splits(batch, hkv, ctx, bs, device)
        paged.paged_decode_attention(q, kc, vc, table, lens, num_splits=splits)  # validated once, untimed
        launch, out, _ = paged.decode_launcher(q, kc, vc, table, lens, splits)
        us, how = time_us(launch, device, rep_ms)
        eager_us, _ = time_us(launch, device, rep_ms, graph=False)
        moved = decode_bytes([ctx] * batch, hq, hkv, d, bs, 2, 2, 2, splits)
        rate = moved / (us * 1e-6)
        row = {"batch": batch, "context": ctx, "splits": splits, "us": us, "timer": how, "eager_us": eager_us,
               "bytes": moved, "bytes_per_s": rate, "of_copy_bandwidth": rate / bandwidth,
               "sdpa_us": math.nan, "gather_sdpa_us": math.nan, "agrees_with_sdpa": None}
        if ctx * batch <= 64 * 32768:  # the dense copies stay under about 9 GB each
            try:
                dense_us, gather_us, dense_out = _dense_baselines(torch, q, kc, vc, table, batch, ctx, hkv, d,
                                                                  device, rep_ms)
                launch()
                agree = bool(torch.allclose(out.float(), dense_out.float(), atol=2e-2, rtol=2e-2))
                failures += not agree
                row.update(sdpa_us=dense_us, gather_sdpa_us=gather_us, agrees_with_sdpa=agree)
            except (RuntimeError, TypeError) as exc:  # out of memory, or a torch without enable_gqa
                _emit(f"  sdpa baselines skipped: {type(exc).__name__}: {str(exc)[:80]}")
        rows.append(row)
        _emit(f"{batch:>6} {ctx:>8} {splits:>6} {us:>9.1f} {eager_us:>9.1f} {moved / 1e6:>9.2f} "
              f"{rate / 1e12:>6.3f} {rate / bandwidth:>7.0%} {row['sdpa_us']:>9.1f} "
              f"{row['sdpa_us'] / us:>6.2f} {row['gather_sdpa_us']:>9.1f} {row['gather_sdpa_us'] / us:>6.2f}"
              + ("" if row["agrees_with_sdpa"] is not False else "  DIFFERS FROM SDPA"))
        del q, kc, vc, table, lens, launch, out
        _free(device)
    record["decode"] = rows
    return failures


def _section_shared(torch, device, dry: bool, rep_ms: float, budget: Budget, budget_s: float, record: dict) -> int:
    from kvexact.kernels import paged, shared

    hq, hkv, d, bs = (4, 2, 16, 16) if dry else (32, 8, 128, 16)
    dtype = torch.float16 if dry else torch.bfloat16
    points = [(b, p, s) for b in ((2,) if dry else (32, 128, 256)) for p in ((32,) if dry else (1024, 4096, 16384))
              for s in ((16,) if dry else (64, 256))]
    _emit(f"shared prefix (Hydragen schedule) vs flat paged decode ({str(dtype)[6:]}, Hq {hq}, Hkv {hkv}, D {d}):")
    _emit(f"{'batch':>6} {'prefix':>7} {'suffix':>7} {'flat us':>9} {'shared us':>9} {'speedup':>8} {'ideal':>7}")
    rows, failures = [], 0
    for batch, p, s in points:
        if budget.left() < 0.05 * budget_s:
            _emit(f"shared prefix: stopped before batch {batch}, prefix {p}, suffix {s} (budget)")
            break
        q, kc, vc, table, lens, pref, stab, slens = _paged_inputs(batch, p + s, hq, hkv, d, bs, dtype,
                                                                  prefix_tokens=p)
        splits = paged.default_num_splits(batch, hkv, p + s, bs, device)
        psplits = paged.default_num_splits(1, hkv, p, bs, device)
        flat, flat_out, _ = paged.decode_launcher(q, kc, vc, table, lens, splits)
        hyd, hyd_out, _ = shared.hydragen_launcher(q, kc, vc, pref, p, stab, slens, prefix_splits=psplits)
        flat_us, _ = time_us(flat, device, rep_ms)
        shared_us, how = time_us(hyd, device, rep_ms)
        flat()
        hyd()
        agree = bool(torch.allclose(flat_out.float(), hyd_out.float(), atol=2e-2, rtol=2e-2))
        failures += not agree
        ideal = ideal_shared_speedup(batch, p, s)
        rows.append({"batch": batch, "prefix": p, "suffix": s, "flat_us": flat_us, "shared_us": shared_us,
                     "timer": how, "speedup": flat_us / shared_us, "ideal": ideal, "agree": agree})
        _emit(f"{batch:>6} {p:>7} {s:>7} {flat_us:>9.1f} {shared_us:>9.1f} {flat_us / shared_us:>8.2f} "
              f"{ideal:>7.2f}" + ("" if agree else "  OUTPUTS DIFFER"))
        del q, kc, vc, table, lens, pref, stab, slens, flat, hyd, flat_out, hyd_out
        _free(device)
    record["shared_prefix"] = rows
    return failures


def long_context_fraction(decode_rows: list[dict]) -> dict | None:
    """The decode point with the longest context (largest batch among those) and its copy-bandwidth fraction."""
    if not decode_rows:
        return None
    row = max(decode_rows, key=lambda r: (r["context"], r["batch"]))
    return {"batch": row["batch"], "context": row["context"], "of_copy_bandwidth": row["of_copy_bandwidth"]}


def run(budget_s: float, device_name: str | None = None, json_path: str | None = None, rep_ms: float = 50.0) -> int:
    """Run every section within ``budget_s`` seconds on ``device_name`` (default cuda); return the exit code."""
    import torch

    from kvexact.kernels import device as dev
    from kvexact.kernels.errors import DeviceError

    try:
        dev.select(device_name or "cuda")
    except DeviceError as exc:
        print(f"kvexact bench kernels: needs a CUDA device ({exc.detail}); nothing was measured"
              if device_name is None else f"kvexact bench kernels: {exc.detail}", file=sys.stderr)
        return 3 if device_name is None else 2
    device = dev.device()
    dry = device.type != "cuda"
    budget = Budget(budget_s)
    record: dict = {"device": "cpu (dry run: timings mean nothing)" if dry else torch.cuda.get_device_name(device),
                    "torch": torch.__version__, "timing": "see kvexact.kernels.bench's docstring", "sections": {}}
    try:
        import triton

        record["triton"] = triton.__version__
    except ImportError:
        pass
    sections = record["sections"]
    bandwidth = _section_copy(torch, device, dry, rep_ms, sections)
    failures = _section_compile(torch, dry, budget, budget_s, sections)
    failures += _section_decode(torch, device, dry, rep_ms, bandwidth, budget, budget_s, sections)
    failures += _section_shared(torch, device, dry, rep_ms, budget, budget_s, sections)
    record["long_context"] = long_context_fraction(sections["decode"])
    record["failures"] = failures
    if json_path:
        write_atomic(json_path, json.dumps(record, indent=1, default=str))
    if record["long_context"]:
        lc = record["long_context"]
        _emit(f"paged decode at context {lc['context']} (batch {lc['batch']}): {lc['of_copy_bandwidth']:.0%} of the "
              f"measured copy bandwidth")
    _emit(f"done: {failures} correctness failure(s); {max(0.0, budget.left()):.0f} s of budget left")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvexact.kernels.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=300.0, help="wall-clock budget in seconds (default 300)")
    parser.add_argument("--json", dest="json_path", default=None, help="also write the figures as JSON here")
    parser.add_argument("--rep-ms", type=float, default=50.0, help="do_bench's timing window per point, in ms")
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None,
                        help="cuda (default; exit 3 without one) or cpu: a dry run on tiny shapes")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    if args.budget_s <= 0 or args.rep_ms <= 0:
        print("kvexact bench kernels: --budget-s and --rep-ms must be positive", file=sys.stderr)
        return 2
    return run(args.budget_s, args.device, args.json_path, args.rep_ms)


if __name__ == "__main__":
    sys.exit(main())
