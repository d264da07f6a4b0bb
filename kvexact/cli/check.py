"""``kvexact check SPEC.tla``: model-check a TLA+ spec with TLC, the embedded engine, or both.

``--engine auto`` (the default; ``KVEXACT_ENGINE`` sets another) runs TLC when Java and its jar are
present, the embedded engine otherwise; the report's first line and the JSON's ``engine_reason`` say
which ran and why.

Exit codes follow TLC: 0 no error, 10 assumption false, 11 deadlock, 12 safety violation, 13 property
violated (temporal, action or initial-state), 14 Assert failed, 75 evaluation error, 150 parse error,
151 config error. Outside TLC's codes: 1 when ``--engine both`` finds the engines disagree, 3 when
the run could not be done or was stopped early (--max-states, --max-depth: a partial search is never
a success, and temporal properties are not checked), 130 after Ctrl-C (statistics are printed first).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from kvexact.spec.checker.result import ModelCheckResult, Outcome
from kvexact.spec.interrupts import sigint_seen

ENGINES = ("auto", "embedded", "tlc", "both")
ENGINE_ENV = "KVEXACT_ENGINE"  # the default --engine (auto when unset)


class CouldNotRun(Exception):
    """The requested engine cannot run here (no TLC jar, no Java, TLC crashed): exit 3."""


def _progress(info: dict) -> None:
    click.echo(f"Progress: {info['generated']:,} states generated, {info['distinct']:,} distinct states found, "
               f"{info['queue']:,} states left on queue, depth {info['depth']}, "
               f"{info['states_per_s']:,.0f} states/s", err=True)


def run_embedded(spec: Path, cfg: Path | None, *, workers: int, max_states: int | None,
                 max_depth: int | None, coverage: bool, progress: bool = True,
                 simulate: bool = False, depth: int = 100, num: int = 10, seed: int = 0,
                 lib: tuple = ()) -> ModelCheckResult:
    from kvexact.spec.checker.engine import check_model
    from kvexact.spec.checker.engine import simulate as run_sim
    if simulate:
        return run_sim(spec, cfg, depth=depth, num=num, seed=seed, lib=lib)
    return check_model(spec, cfg, workers=workers, max_states=max_states, max_depth=max_depth,
                       coverage=coverage, progress=_progress if progress else None, lib=lib)


def run_tlc_engine(spec: Path, cfg: Path | None, jar: str | None, *, workers: int | str, max_states: int | None,
                   max_depth: int | None, timeout_s: float | None = None, simulate: bool = False,
                   depth: int = 100, num: int = 10, seed: int = 0, distributed: int = 0,
                   lib: tuple = ()) -> ModelCheckResult:
    """Run TLC through kvexact.spec.tlc (in a child process); raise CouldNotRun when it cannot run."""
    from kvexact.spec import tlc as tlc_mod

    cfg_path = cfg if cfg is not None else spec.with_suffix(".cfg")
    sim = tlc_mod.Simulation(num=num, depth=depth, seed=seed) if simulate else None
    try:
        jar = tlc_mod.resolve_jar(jar)
        if distributed:
            from kvexact.spec.tlc_distributed import run_tlc_distributed
            return run_tlc_distributed(spec, cfg_path, jar, workers=distributed, threads=workers,
                                       timeout_s=timeout_s, lib=lib)
        return tlc_mod.run_tlc(spec, cfg_path, jar, workers=workers, max_states=max_states, max_depth=max_depth,
                               timeout_s=timeout_s, simulate=sim, lib=lib)
    except (tlc_mod.TlcUnavailable, tlc_mod.TlcFailed, ValueError) as exc:
        raise CouldNotRun(f"TLC could not run: {exc}") from None


def pick_engine(engine: str, tlc_jar: str | None, *, embedded_only: list[str]) -> tuple[str, str]:
    """The engine that runs and why: ``auto`` is TLC when Java and the jar are present (and no option
    only the embedded engine has was given), the embedded engine otherwise."""
    from kvexact.spec.tlc import TlcUnavailable, choose_engine

    if engine == "auto" and embedded_only:
        return "embedded", f"auto: {', '.join(embedded_only)} is the embedded engine's only"
    try:
        chosen, why, _jar = choose_engine(engine, tlc_jar)
    except TlcUnavailable as exc:
        raise CouldNotRun(f"the TLC engine cannot run: {exc}") from None
    return chosen, why


def compare(a: ModelCheckResult, b: ModelCheckResult) -> list[str]:
    """Differences that make ``--engine both`` fail: result, distinct states, states generated."""
    diffs = []
    if a.outcome is not b.outcome:
        diffs.append(f"result: {a.engine} {a.outcome.value} vs {b.engine} {b.outcome.value}")
    if a.distinct_states != b.distinct_states:
        diffs.append(f"distinct states: {a.engine} {a.distinct_states} vs {b.engine} {b.distinct_states}")
    if a.generated_states != b.generated_states:
        diffs.append(f"states generated: {a.engine} {a.generated_states} vs {b.engine} {b.generated_states}")
    return diffs


# Outcomes that are an engine's failure to check the model at all (its own error, not a verdict on it).
NOT_CHECKED = (Outcome.PARSE, Outcome.CONFIG, Outcome.EVALUATION)


def engine_error(r: ModelCheckResult) -> str:
    """One line: the engine, its error class and exit code (TLC's codes), and its first message line."""
    text = (r.violation.message or r.violation.name) if r.violation is not None else ""
    first = next((line.strip() for line in text.splitlines() if line.strip()), r.outcome.value)
    return f"{r.engine}: {r.outcome.value} error (exit {r.exit_code}): {first}"


def judge_both(a: ModelCheckResult, b: ModelCheckResult) -> tuple[int | None, list[str]]:
    """``--engine both``: ``(exit code, lines)``. When either engine could not check the model (parse,
    config or evaluation error), each engine's own result is shown and counts are not compared; the exit
    code is TLC's when TLC failed, else the embedded engine's (TLC's codes either way). ``(None, [])``:
    both checked the model, compare their results and counts."""
    failed = [r for r in (a, b) if r.outcome in NOT_CHECKED]
    if not failed:
        return None, []
    lines = ["An engine could not check the model; each engine's own result:"]
    lines += [f"  {engine_error(r)}" if r.outcome is not Outcome.SUCCESS else
              f"  {r.engine}: {r.outcome.value} (exit {r.exit_code}), {r.distinct_states} distinct states"
              for r in (a, b)]
    if a.outcome is b.outcome:
        lines.append(f"Engines agree: both report a {a.outcome.value} error.")
        return a.exit_code, lines
    tlc = next((r for r in failed if r.engine == "tlc"), failed[0])
    lines.append("Engines disagree on the result.")
    return tlc.exit_code, lines


def run_check(spec: Path, cfg: Path | None = None, *, engine: str = "auto", tlc_jar: str | None = None,
              workers: int | str = 1, max_states: int | None = None, max_depth: int | None = None,
              coverage: bool = False, simulate: bool = False, depth: int = 100, num: int = 10, seed: int = 0,
              json_path: str | None = None, itf_path: str | None = None, quiet: bool = False,
              echo=click.echo, lib: tuple = (), distributed: int = 0) -> int:
    """The body of ``kvexact check`` (reusable, e.g. by a --mutants mode): run, print, write, return the
    exit code."""
    from kvexact.spec.checker.report import summary_lines, to_json, write_itf
    from kvexact.spec.files import remove_stale, write_atomic

    if not spec.exists():
        echo(f"Error: spec file {spec} not found")
        return 150
    if cfg is not None and not cfg.exists():
        echo(f"Error: cfg file {cfg} not found")
        return 151
    for path in (json_path, itf_path):  # a report left by an earlier run must not pass for this run's
        if path:
            remove_stale(path)
    embedded_only = [name for name, given in (("--max-states", max_states), ("--max-depth", max_depth),
                                              ("--coverage", coverage)) if given]
    results: list[ModelCheckResult] = []
    embedded_workers = (os.cpu_count() or 1) if workers == "auto" else int(workers)
    try:
        chosen, why = pick_engine(engine, tlc_jar, embedded_only=embedded_only)
        if not quiet:
            echo(f"Engine: {chosen} ({why})")
        if chosen in ("embedded", "both"):
            results.append(run_embedded(spec, cfg, workers=embedded_workers, max_states=max_states,
                                        max_depth=max_depth, coverage=coverage, progress=not quiet,
                                        simulate=simulate, depth=depth, num=num, seed=seed, lib=lib))
        if chosen in ("tlc", "both"):
            results.append(run_tlc_engine(spec, cfg, tlc_jar, workers=workers, max_states=max_states,
                                          max_depth=max_depth, simulate=simulate, depth=depth, num=num,
                                          seed=seed, distributed=distributed, lib=lib))
    except CouldNotRun as exc:
        echo(f"kvexact check: could not run: {exc}")
        return 3
    for r in results:
        if not quiet or r.outcome is not Outcome.SUCCESS:
            if len(results) > 1:
                echo(f"--- {r.engine} ---")
            for line in summary_lines(r, str(spec)):
                echo(line)
    main = results[-1] if chosen == "both" else results[0]  # with both, TLC is the authority
    rc = main.exit_code
    if main.outcome is Outcome.SUCCESS and not main.complete and not simulate:
        rc = 130 if any("Ctrl-C" in m for m in main.messages) else 3
    if chosen == "both":
        own, lines = judge_both(results[0], results[1])
        for line in lines:
            echo(line)
        if own is not None:
            rc = own
        else:
            diffs = compare(results[0], results[1])
            if diffs:
                echo("Engines disagree:")
                for d in diffs:
                    echo(f"  {d}")
                rc = 1
            else:
                echo("Engines agree on result, distinct states and states generated.")
    if json_path:
        doc = to_json(main, str(spec), exit_code=rc)
        doc["engine_reason"] = why
        if chosen == "both":
            doc["engines"] = {r.engine: to_json(r, str(spec)) for r in results}
        write_atomic(json_path, json.dumps(doc, indent=2) + "\n")
    if itf_path and write_itf(main, itf_path, str(spec)):
        echo(f"Counterexample written to {itf_path} (ITF)")
    return rc


def _workers(value: str) -> int | str:
    """``--workers``: a positive count or ``auto`` (every core)."""
    if value == "auto":
        return value
    try:
        n = int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a worker count (a positive integer or auto)") from None
    if n < 1:
        raise click.BadParameter("--workers must be at least 1")
    return n


@click.command("check")
@click.argument("spec", type=click.Path(path_type=Path), required=False)
@click.option("--config", "cfg", type=click.Path(path_type=Path), default=None,
              help="model config (default: SPEC with .cfg)")
@click.option("--engine", type=click.Choice(ENGINES), default="auto", show_default=True, envvar=ENGINE_ENV,
              show_envvar=True, help="auto: TLC when Java and its jar are present, else the embedded engine")
@click.option("--tlc-jar", default=None,
              help="tla2tools.jar (else TLA2TOOLS_JAR, else the CI copy beside the clone)")
@click.option("--workers", default="1", show_default=True, help="worker threads (TLC) or processes (embedded); "
              "a count or auto")
@click.option("--distributed", type=click.IntRange(min=1), default=None, metavar="N",
              help="TLC engine: run TLC's distributed mode (a TLCServer and N TLCWorker processes on localhost)")
@click.option("--max-states", type=click.IntRange(min=1), default=None, help="stop after this many distinct states")
@click.option("--max-depth", type=click.IntRange(min=1), default=None, help="do not explore beyond this BFS depth")
@click.option("--coverage", is_flag=True, help="per-action coverage (fired, new states)")
@click.option("--simulate", is_flag=True, help="random walks instead of exhaustive search (both engines)")
@click.option("--depth", type=click.IntRange(min=1), default=100, show_default=True, help="simulation: states per walk")
@click.option("--num", type=click.IntRange(min=1), default=10, show_default=True, help="simulation: number of walks")
@click.option("--seed", type=int, default=0, show_default=True, help="simulation: random seed")
@click.option("--json", "json_path", default=None, help="write the result as JSON")
@click.option("--itf", "itf_path", default=None, help="write the counterexample as ITF JSON")
@click.option("--lib", "lib", multiple=True, type=click.Path(path_type=Path),
              help="library folder for EXTENDS/INSTANCE (repeatable; also KVEXACT_TLA_LIB)")
@click.option("--mutants", is_flag=True, help="check every shipped mutant and witness instead of SPEC; "
              "exit 0 only at a 100% kill rate")
def check(spec: Path | None, cfg: Path | None, engine: str, tlc_jar: str | None, workers: str,
          max_states: int | None, max_depth: int | None, coverage: bool, simulate: bool, depth: int, num: int,
          seed: int, json_path: str | None, itf_path: str | None, mutants: bool = False,
          lib: tuple[Path, ...] = (), distributed: int | None = None) -> int:
    """Model-check SPEC.tla; exit codes follow TLC (0, 10, 11, 12, 13, 14, 75, 150, 151)."""
    n_workers = _workers(workers)
    if simulate and engine == "both":
        raise click.UsageError("--simulate runs one engine (random walks differ between engines)")
    if distributed and engine != "tlc":
        raise click.UsageError("--distributed is TLC's distributed mode: use it with --engine tlc")
    if distributed and simulate:
        raise click.UsageError("--distributed checks exhaustively: it cannot be combined with --simulate")
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
    if mutants and engine == "both":
        raise click.UsageError("--mutants runs one engine: embedded or tlc")
    if not mutants and spec is None:
        raise click.UsageError("missing argument SPEC (or --mutants)")
    # Ctrl-C stops a check even where the shell started it with SIGINT ignored (a background job), as it
    # stops conform, fuzz and gate
    with sigint_seen():
        if mutants:
            from kvexact.spec.mutants import run_mutants
            mutant_engine = pick_engine(engine, tlc_jar, embedded_only=[])[0] if engine == "auto" else engine
            return run_mutants(engine=mutant_engine, tlc_jar=tlc_jar,
                               workers=max(n_workers if isinstance(n_workers, int) else 2, 2), echo=click.echo)
        assert spec is not None
        _readable(spec, "a TLA+ spec is a .tla text file")
        if cfg is not None:
            _readable(cfg, "a model config is a .cfg text file")
        return run_check(spec, cfg, engine=engine, tlc_jar=tlc_jar, workers=n_workers, max_states=max_states,
                         max_depth=max_depth, coverage=coverage, simulate=simulate, depth=depth, num=num,
                         seed=seed, json_path=json_path, itf_path=itf_path, lib=lib,
                         distributed=distributed or 0)


def _readable(path: Path, what: str) -> None:
    """A usage error (one line, its Rejection named) unless ``path`` is a readable UTF-8 text file."""
    from kvexact.conformance.line_schemas import TraceInputError
    from kvexact.conformance.trace import read_text

    try:
        read_text(path, TraceInputError, what)
    except TraceInputError as exc:
        raise click.UsageError(f"{exc} [{exc.kind.name}]") from None
