"""``kvexact bench checker|reference|kernels``: benchmarks, separate from the tests.

``checker``: a TLA+ corpus (default tla-corpus; ``--corpus DIR``, e.g. tla-examples) model by model, each
in a child process with a CPU-time budget: the table (model, verdict vs TLC, distinct, generated, CPU
seconds, generated states per CPU-second), the slowest models, those over budget and the totals
(spec/checker/corpus.py); one model at a time; with ``--results FILE`` each finished model is appended to
FILE and a rerun skips the models already there (an interrupted run keeps its rows);
exit 0 when every model matched TLC, 1 when one did not, 3 when the corpus is missing. ``reference``:
:mod:`kvexact.reference.bench` at several pool sizes; exit 1 when the work per operation grows with the
pool or the slowdown passes ``--max-slowdown``. ``kernels``:
:mod:`kvexact.kernels.bench` (exit 3 without CUDA).
"""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path

import click

from kvexact.kernels.device import click_option
from kvexact.spec.files import write_atomic


@click.command("checker")
@click.option("--corpus", "corpus", type=click.Path(path_type=Path), default=None,
              help="corpus folder with corpus.json (default: shared/tla-corpus or KVEXACT_TLA_CORPUS)")
@click.option("--lib", "lib", multiple=True, type=click.Path(path_type=Path),
              help="library folder (repeatable; default: the corpus's _modules/* folders)")
@click.option("--workers", type=int, default=1, show_default=True)
@click.option("--only", multiple=True, help="model id, or a part of one (repeatable)")
@click.option("--cpu-limit", type=float, default=600.0, show_default=True, help="CPU seconds per model")
@click.option("--in-process", is_flag=True, help="run the models in this process (no CPU budget)")
@click.option("--table", "table_path", default=None, help="write the Markdown table here")
@click.option("--json", "json_path", default=None, help="write the figures as JSON")
@click.option("--tlc-jar", default=None, help="also time TLC on each model (or TLA2TOOLS_JAR)")
@click.option("--results", "results_path", type=click.Path(path_type=Path), default=None,
              help="JSON-lines file each finished model is appended to; models already in it are not run again")
@click.option("--no-run", is_flag=True, help="only render the table from --results (the others are listed as not run)")
@click.option("--engines", default=None,
              help="e.g. embedded,tlc: instead of the corpus, check the shipped specs' CI models with each engine "
                   "and print them side by side (generated states per CPU-second, ratio)")
@click.option("--spec-dir", type=click.Path(path_type=Path), default=None,
              help="with --engines: the folder whose NAME.cfg models are checked (default: the shipped specs)")
@click.option("--models", "model_kind", type=click.Choice(["ci", "deep"]), default="ci", show_default=True,
              help="with --engines: the NAME.cfg models or the NAME.deep.cfg ones")
@click.option("--max-states", type=click.IntRange(min=1), default=None,
              help="with --engines: stop the embedded engine after this many distinct states (TLC has no such "
                   "bound and runs to the end; the row says so)")
def bench_checker(corpus: Path | None, lib: tuple[Path, ...], workers: int, only: tuple[str, ...],
                  cpu_limit: float, in_process: bool, table_path: str | None, json_path: str | None,
                  tlc_jar: str | None, results_path: Path | None, no_run: bool, engines: str | None,
                  spec_dir: Path | None, model_kind: str, max_states: int | None) -> int:
    """Run the embedded checker over a TLA+ corpus and compare with TLC's recorded results (or, with
    --engines, the engines side by side on the shipped specs' models)."""
    if engines is not None:
        return _bench_engines(engines, spec_dir, only, tlc_jar, table_path, json_path,
                              ".deep.cfg" if model_kind == "deep" else ".cfg", max_states)
    from kvexact.spec.checker.corpus import (
        append_record,
        depth_differences,
        find_corpus,
        load_manifest,
        read_records,
        render_table,
        row_from_record,
        row_record,
        run_corpus,
        table_line,
        totals,
    )

    root = corpus or find_corpus()
    if root is None or not (root / "corpus.json").exists():
        click.echo(f"kvexact bench checker: no corpus.json in {root or 'shared/tla-corpus'} "
                   f"(give --corpus DIR or set KVEXACT_TLA_CORPUS)", err=True)
        return 3
    manifest = {m["id"]: m for m in load_manifest(root) if not only or any(o in m["id"] for o in only)}
    done = read_records(results_path) if results_path else {}
    if no_run and results_path is None:
        raise click.UsageError("--no-run renders the table from --results FILE; give one")
    ids = [i for i in manifest if i not in done]
    if done:
        click.echo(f"{len(manifest) - len(ids)} models already in {results_path}; "
                   f"{'not running' if no_run else 'running'} the other {len(ids)}", err=True)
    not_run, ids = (ids, []) if no_run else ([], ids)
    budget = None if in_process else cpu_limit
    started = time.monotonic()

    def on_start(i: int, n: int, model: str) -> None:
        click.echo(f"[{i + 1}/{n}] {model} ... ({time.monotonic() - started:.0f} s elapsed)", err=True)

    jar = tlc_jar or os.environ.get("TLA2TOOLS_JAR")
    tlc_seconds: dict[str, float | str] = {}

    def on_row(row) -> None:
        click.echo("  " + table_line(row), err=True)
        if results_path:
            append_record(results_path, row_record(row, budget))
        if jar:
            from kvexact.cli.check import CouldNotRun, run_tlc_engine
            folder = root / row.id
            try:
                t = run_tlc_engine(folder / row.expected["spec"], folder / row.expected["cfg"], jar, workers=1,
                                   max_states=None, max_depth=None)
                tlc_seconds[row.id] = round(t.seconds, 3)
            except CouldNotRun as exc:
                tlc_seconds[row.id] = f"could not run: {exc}"

    fresh = {r.id: r for r in run_corpus(root, workers=workers, only=ids, lib=list(lib) or None,
                                         isolate=not in_process, cpu_limit_s=budget, on_start=on_start,
                                         on_row=on_row)} if ids else {}
    rows = [fresh[i] if i in fresh else row_from_record(done[i], manifest[i]) for i in manifest
            if i in fresh or i in done]
    text = render_table(rows)
    if not_run:
        text += f"\n\nNot run yet ({len(not_run)}): " + ", ".join(not_run) + "."
    depth = depth_differences(rows)
    if depth:
        text += "\n\nDepth differs from TLC's record (TLC ran with several workers): " + "; ".join(depth) + "."
    click.echo(text)
    if table_path:
        write_atomic(table_path, text + "\n")
    if json_path:
        doc = {"corpus": str(root), "workers": workers, "cpu_limit_s": cpu_limit, "totals": totals(rows),
               "models": [{"id": r.id, "verdict": r.verdict.value, "why": r.why, "result": r.result_word,
                           "distinct": r.result.distinct_states, "generated": r.result.generated_states,
                           "depth": r.result.depth, "tlc_depth": r.expected.get("stateDepth"),
                           "tlc_distinct": r.expected.get("distinctStates"),
                           "tlc_generated": r.expected.get("totalStates"), "cpu_s": round(r.cpu_s, 3),
                           "generated_per_cpu_s": round(r.rate, 1), "matches_tlc": r.ok,
                           **({"tlc_seconds": tlc_seconds[r.id]} if r.id in tlc_seconds else {})} for r in rows]}
        write_atomic(json_path, json.dumps(doc, indent=2) + "\n")
    return 0 if all(r.ok for r in rows) and not not_run else 1


def _bench_engines(engines_text: str, spec_dir: Path | None, only: tuple[str, ...], tlc_jar: str | None,
                   table_path: str | None, json_path: str | None, suffix: str, max_states: int | None) -> int:
    """``--engines``: exit 0 when the engines agree on every model, 1 when not, 2 bad usage, 3 cannot run."""
    from kvexact.cli import bench_engines as be

    try:
        engines = be.parse_engines(engines_text)
    except be.BenchError as exc:
        raise click.UsageError(str(exc)) from None
    if spec_dir is None:
        from kvexact.spec import spec_dir as shipped
        spec_dir = shipped()
    models = be.bench_models(spec_dir, only, suffix)
    if not models:
        click.echo(f"kvexact bench checker: no NAME{suffix} model beside its NAME.tla in {spec_dir}", err=True)
        return 3
    jar, startup = None, None
    if "tlc" in engines:
        from kvexact.spec.tlc import TlcUnavailable, resolve_jar
        try:
            jar = resolve_jar(tlc_jar)
            startup = be.tlc_startup(jar)
        except (TlcUnavailable, be.BenchError) as exc:
            click.echo(f"kvexact bench checker: {exc}", err=True)
            return 3
    setup = be.setup_lines(jar, startup, engines)
    if max_states is not None:
        setup.append(f"embedded engine stopped at {max_states:,} distinct states; TLC runs each model to the end")
    for line in setup:
        click.echo(line, err=True)
    rows = []
    for spec, cfg in models:
        runs: dict = {}
        for e in engines:
            click.echo(f"{cfg.name}: {e} ...", err=True)
            if e == "embedded":
                runs[e] = be.run_embedded(spec, cfg, max_states)
            else:
                r = be.run_tlc_timed(jar, spec, cfg)  # type: ignore[arg-type]
                r.cpu_s = max(r.cpu_s - (startup or 0.0), 1e-3)
                runs[e] = r
        rows.append((cfg.name, runs, be.row_note(runs, max_states)))
    text = "\n".join(f"- {line}" for line in setup) + "\n\n" + be.render(rows, engines)
    click.echo(text)
    if table_path:
        write_atomic(table_path, text + "\n")
    if json_path:
        doc = {"setup": setup, "tlc_startup_cpu_s": startup,
               "models": [{"model": name, "note": note,
                           **{e: {"outcome": r.outcome, "generated": r.generated, "distinct": r.distinct,
                                  "cpu_s": round(r.cpu_s, 3), "generated_per_cpu_s": round(r.rate, 1)}
                              for e, r in runs.items()}} for name, runs, note in rows]}
        write_atomic(json_path, json.dumps(doc, indent=2) + "\n")
    return 1 if any(note.startswith(be.DISAGREE) for _, _, note in rows) else 0


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
