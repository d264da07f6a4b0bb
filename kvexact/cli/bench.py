"""``kvexact bench checker|reference|kernels``: benchmarks, separate from the tests.

``checker``: seconds and distinct states per second for each corpus model, the total, and TLC's time
beside it when a jar is given; exit 0 when every model matched TLC, 1 when one did not, 3 when the corpus
is missing. ``reference``: :mod:`kvexact.reference.bench` at several pool sizes; exit 1 when the work per
operation grows with the pool or the slowdown passes ``--max-slowdown``. ``kernels``:
:mod:`kvexact.kernels.bench` (exit 3 without CUDA).
"""

from __future__ import annotations

import functools
import json
import os

import click

from kvexact.kernels.device import click_option


@click.command("checker")
@click.option("--workers", type=int, default=1, show_default=True)
@click.option("--only", multiple=True, help="corpus model id (repeatable)")
@click.option("--tlc-jar", default=None, help="also time TLC (or TLA2TOOLS_JAR)")
@click.option("--json", "json_path", default=None, help="write the figures as JSON")
def bench_checker(workers: int, only: tuple[str, ...], tlc_jar: str | None, json_path: str | None) -> int:
    """Time the embedded checker on the TLA+ corpus."""
    from kvexact.spec.checker.corpus import find_corpus, run_corpus

    root = find_corpus()
    if root is None:
        click.echo("kvexact bench checker: tla-corpus not found (set KVEXACT_TLA_CORPUS)", err=True)
        return 3
    jar = tlc_jar or os.environ.get("TLA2TOOLS_JAR")
    click.echo(f"{'model':46s} {'result':15s} {'distinct':>9s} {'generated':>10s} {'depth':>9s} {'seconds':>8s} "
               f"{'distinct/s':>10s}" + (f" {'TLC s':>7s}" if jar else ""))
    rows_out = []

    def show(row) -> None:
        r = row.result
        rate = r.distinct_states / r.seconds if r.seconds > 0 else 0.0
        tlc_s = ""
        entry = {"id": row.id, "result": row.result_word, "distinct": r.distinct_states,
                 "generated": r.generated_states, "depth": r.depth, "tlc_depth": row.expected.get("stateDepth"),
                 "seconds": round(r.seconds, 3), "distinct_per_s": round(rate, 1), "matches_tlc": row.ok}
        if jar:
            from kvexact.cli.check import CouldNotRun, run_tlc_engine
            folder = root / row.id
            try:
                t = run_tlc_engine(folder / row.expected["spec"], folder / row.expected["cfg"], jar, workers=1,
                                   max_states=None, max_depth=None)
                tlc_s = f" {t.seconds:7.2f}"
                entry["tlc_seconds"] = round(t.seconds, 3)
            except CouldNotRun as exc:
                tlc_s = "     n/a"
                entry["tlc_error"] = str(exc)
        depth = f"{r.depth}/{row.expected.get('stateDepth')}"
        click.echo(f"{row.id:46s} {row.result_word:15s} {r.distinct_states:9d} {r.generated_states:10d} "
                   f"{depth:>9s} {r.seconds:8.2f} {rate:10.0f}{tlc_s}" + ("" if row.ok else f"  MISMATCH: {row.why}"))
        rows_out.append(entry)

    rows = run_corpus(root, workers=workers, only=list(only) or None, on_row=show)
    total = sum(r.result.seconds for r in rows)
    distinct = sum(r.result.distinct_states for r in rows)
    click.echo(f"{'TOTAL':46s} {'':15s} {distinct:9d} {'':10s} {'':9s} {total:8.2f} {distinct / max(total, 1e-9):10.0f}")
    bad = [r for r in rows if not r.ok]
    click.echo(f"{len(rows) - len(bad)}/{len(rows)} models match TLC (workers={workers})")
    if json_path:
        with open(json_path, "w") as fh:
            json.dump({"models": rows_out, "total_seconds": round(total, 3), "workers": workers}, fh, indent=2)
    return 1 if bad else 0


@click.command("reference")
@click.option("--sizes", default="1024,16384,131072", show_default=True,
              help="comma-separated pool sizes, in blocks per cache group")
@click.option("--ops", default=300, show_default=True, help="operations timed per kind, size and round")
@click.option("--repeat", default=3, show_default=True, help="rounds per size (the best round counts)")
@click.option("--fill", default=0.25, show_default=True, help="fraction of the pool occupied before timing")
@click.option("--max-slowdown", default=4.0, show_default=True,
              help="fail when the largest pool is this many times slower than the smallest")
@click.option("--json", "as_json", is_flag=True, help="print the figures as JSON")
def bench_reference(sizes: str, ops: int, repeat: int, fill: float, max_slowdown: float, as_json: bool) -> int:
    """Time allocate, append, fork, release and prefix lookup at several pool sizes."""
    from kvexact.reference.bench import OPERATIONS, measure

    try:
        pool_sizes = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError:
        raise click.UsageError(f"--sizes must be comma-separated integers, got {sizes!r}") from None
    if not pool_sizes or min(pool_sizes) <= 0 or ops <= 0 or repeat <= 0 or not 0 <= fill < 1:
        raise click.UsageError("sizes, --ops and --repeat must be positive and --fill in [0, 1)")
    if min(pool_sizes) * (1 - fill) < 2 * ops + 4:
        raise click.UsageError(f"the smallest pool needs at least {2 * ops + 4} free blocks for --ops {ops}")
    figures = {n: measure(n, ops, fill, repeat) for n in pool_sizes}
    small, large = figures[min(pool_sizes)], figures[max(pool_sizes)]
    slowdown = {op: small[op] / large[op] for op in OPERATIONS}
    work_grows = [op for op in OPERATIONS if large[f"cells/{op}"] != small[f"cells/{op}"]]
    if as_json:
        click.echo(json.dumps({"ops_per_second": figures, "slowdown_largest_vs_smallest": slowdown}, indent=2))
    else:
        click.echo(f"operations per second (2 cache groups, P=16, {fill:.0%} of the pool occupied, best of "
                   f"{repeat} rounds of {ops})")
        click.echo("blocks/group " + "".join(f"{op:>15}" for op in OPERATIONS))
        for n, row in figures.items():
            click.echo(f"{n:>12} " + "".join(f"{row[op]:>15,.0f}" for op in OPERATIONS))
        click.echo(f"{'slowdown':>12} " + "".join(f"{slowdown[op]:>14.2f}x" for op in OPERATIONS))
        click.echo(f"{'cells/op':>12} " + "".join(f"{small[f'cells/{op}']:>15.0f}" for op in OPERATIONS)
                   + "   (state cells written per operation, the same at every size)")
    if work_grows:
        click.echo(f"state cells written per operation grow with pool size: {', '.join(work_grows)}", err=True)
        return 1
    worst = max(slowdown.values())
    if worst > max_slowdown:
        click.echo(f"per-operation cost grows with pool size: worst slowdown {worst:.2f}x > {max_slowdown}x",
                   err=True)
        return 1
    return 0


@click.command("kernels")
@click.option("--budget-s", type=click.FloatRange(min=1.0), default=300.0, show_default=True,
              help="Wall-clock budget in seconds; sections that would overrun it are skipped and reported.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the figures as JSON to this file.")
@click.option("--rep-ms", type=click.FloatRange(min=1.0), default=50.0, show_default=True,
              help="do_bench's timing window per point, in milliseconds (the median is reported).")
@functools.partial(click_option, expose=True)
def bench_kernels(budget_s: float, json_path: str | None, rep_ms: float, device_name: str | None) -> int:
    """Copy bandwidth, native compile checks, paged decode vs the roofline and torch SDPA, shared prefix vs flat.

    Needs a CUDA device (exits 3 otherwise); ``--device cpu`` is a dry run on tiny shapes under Triton's
    interpreter (its timings mean nothing). On a bare GPU stack without click, run
    ``python -m kvexact.kernels.bench`` instead.
    """
    from kvexact.kernels import bench

    return bench.run(budget_s, device_name, json_path=json_path, rep_ms=rep_ms)
