"""``kvexact check SPEC.tla``: model-check a TLA+ spec with the embedded engine, TLC, or both.

Exit codes follow TLC: 0 no error, 10 assumption false, 11 deadlock, 12 safety violation, 13 property
violated (temporal, action or initial-state), 14 Assert failed, 75 evaluation error, 150 parse error,
151 config error. Outside TLC's codes: 1 when ``--engine both`` finds the engines disagree, 3 when
the run could not be done or was stopped early (--max-states, --max-depth: a partial search is never
a success, and temporal properties are not checked), 130 after Ctrl-C (statistics are printed first).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from kvexact.spec.checker.result import ModelCheckResult, Outcome
from kvexact.spec.interrupts import sigint_seen

ENGINES = ("embedded", "tlc", "both")


class CouldNotRun(Exception):
    """The requested engine cannot run here (no TLC jar, no spec/tlc.py): exit 3."""


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


def run_tlc_engine(spec: Path, cfg: Path | None, jar: str | None, *, workers: int, max_states: int | None,
                   max_depth: int | None, timeout_s: float | None = None) -> ModelCheckResult:
    """Run TLC through spec/tlc.py (another layer); raise CouldNotRun when it is not available."""
    jar = jar or os.environ.get("TLA2TOOLS_JAR")
    if not jar:
        raise CouldNotRun("the TLC engine needs tla2tools.jar: pass --tlc-jar PATH or set TLA2TOOLS_JAR")
    try:
        from kvexact.spec import tlc as tlc_mod
    except ImportError:
        raise CouldNotRun("the TLC engine (kvexact.spec.tlc) is not available in this build") from None
    run_tlc = tlc_mod.run_tlc
    failures: tuple = (tlc_mod.TlcUnavailable, getattr(tlc_mod, "TlcFailed", tlc_mod.TlcUnavailable), ValueError)
    cfg_path = cfg if cfg is not None else spec.with_suffix(".cfg")
    try:
        return run_tlc(spec, cfg_path, jar, workers=workers, max_states=max_states, max_depth=max_depth,
                       timeout_s=timeout_s)
    except failures as exc:
        raise CouldNotRun(f"TLC could not run: {exc}") from None


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


def run_check(spec: Path, cfg: Path | None = None, *, engine: str = "embedded", tlc_jar: str | None = None,
              workers: int = 1, max_states: int | None = None, max_depth: int | None = None,
              coverage: bool = False, simulate: bool = False, depth: int = 100, num: int = 10, seed: int = 0,
              json_path: str | None = None, itf_path: str | None = None, quiet: bool = False,
              echo=click.echo, lib: tuple = ()) -> int:
    """The body of ``kvexact check`` (reusable, e.g. by a --mutants mode): run, print, write, return the
    exit code."""
    from kvexact.spec.checker.report import summary_lines, write_itf, write_json
    if not spec.exists():
        echo(f"Error: spec file {spec} not found")
        return 150
    if cfg is not None and not cfg.exists():
        echo(f"Error: cfg file {cfg} not found")
        return 151
    for path in (json_path, itf_path):  # a report left by an earlier run must not pass for this run's
        if path:
            Path(path).unlink(missing_ok=True)
    results: list[ModelCheckResult] = []
    try:
        if engine in ("embedded", "both"):
            results.append(run_embedded(spec, cfg, workers=workers, max_states=max_states, max_depth=max_depth,
                                        coverage=coverage,
                                        progress=not quiet, simulate=simulate, depth=depth, num=num, seed=seed,
                                        lib=lib))
        if engine in ("tlc", "both"):
            results.append(run_tlc_engine(spec, cfg, tlc_jar, workers=workers, max_states=max_states,
                                          max_depth=max_depth))
    except CouldNotRun as exc:
        echo(f"kvexact check: could not run: {exc}")
        return 3
    for r in results:
        if not quiet or r.outcome is not Outcome.SUCCESS:
            for line in summary_lines(r, str(spec)):
                echo(line)
    main = results[0]
    rc = main.exit_code
    if main.outcome is Outcome.SUCCESS and not main.complete and not simulate:
        rc = 130 if any("Ctrl-C" in m for m in main.messages) else 3
    if engine == "both":
        diffs = compare(results[0], results[1])
        if diffs:
            echo("Engines disagree:")
            for d in diffs:
                echo(f"  {d}")
            rc = 1
        else:
            echo("Engines agree on result, distinct states and states generated.")
    if json_path:
        write_json(main, json_path, str(spec), exit_code=rc)
    if itf_path and write_itf(main, itf_path, str(spec)):
        echo(f"Counterexample written to {itf_path} (ITF)")
    return rc


@click.command("check")
@click.argument("spec", type=click.Path(path_type=Path), required=False)
@click.option("--config", "cfg", type=click.Path(path_type=Path), default=None,
              help="model config (default: SPEC with .cfg)")
@click.option("--engine", type=click.Choice(ENGINES), default="embedded", show_default=True)
@click.option("--tlc-jar", default=None, help="tla2tools.jar for the TLC engine (or TLA2TOOLS_JAR)")
@click.option("--workers", type=int, default=1, show_default=True, help="worker processes")
@click.option("--max-states", type=click.IntRange(min=1), default=None, help="stop after this many distinct states")
@click.option("--max-depth", type=click.IntRange(min=1), default=None, help="do not explore beyond this BFS depth")
@click.option("--coverage", is_flag=True, help="per-action coverage (fired, new states)")
@click.option("--simulate", is_flag=True, help="random walks instead of exhaustive search")
@click.option("--depth", type=click.IntRange(min=1), default=100, show_default=True, help="simulation: states per walk")
@click.option("--num", type=click.IntRange(min=1), default=10, show_default=True, help="simulation: number of walks")
@click.option("--seed", type=int, default=0, show_default=True, help="simulation: random seed")
@click.option("--json", "json_path", default=None, help="write the result as JSON")
@click.option("--itf", "itf_path", default=None, help="write the counterexample as ITF JSON")
@click.option("--lib", "lib", multiple=True, type=click.Path(path_type=Path),
              help="library folder for EXTENDS/INSTANCE (repeatable; also KVEXACT_TLA_LIB)")
@click.option("--mutants", is_flag=True, help="check every shipped mutant and witness instead of SPEC; "
              "exit 0 only at a 100% kill rate")
def check(spec: Path | None, cfg: Path | None, engine: str, tlc_jar: str | None, workers: int,
          max_states: int | None, max_depth: int | None, coverage: bool, simulate: bool, depth: int, num: int,
          seed: int, json_path: str | None, itf_path: str | None, mutants: bool = False,
          lib: tuple[Path, ...] = ()) -> int:
    """Model-check SPEC.tla; exit codes follow TLC (0, 10, 11, 12, 13, 14, 75, 150, 151)."""
    if workers < 1:
        raise click.UsageError("--workers must be at least 1")
    if simulate and engine != "embedded":
        raise click.UsageError("--simulate runs with the embedded engine only")
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
            return run_mutants(engine=engine, tlc_jar=tlc_jar, workers=max(workers, 2), echo=click.echo)
        assert spec is not None
        _readable(spec, "a TLA+ spec is a .tla text file")
        if cfg is not None:
            _readable(cfg, "a model config is a .cfg text file")
        return run_check(spec, cfg, engine=engine, tlc_jar=tlc_jar, workers=workers, max_states=max_states,
                         max_depth=max_depth, coverage=coverage, simulate=simulate, depth=depth, num=num,
                         seed=seed, json_path=json_path, itf_path=itf_path, lib=lib)


def _readable(path: Path, what: str) -> None:
    """A usage error (one line, its Rejection named) unless ``path`` is a readable UTF-8 text file."""
    from kvexact.conformance.line_schemas import TraceInputError
    from kvexact.conformance.trace import read_text

    try:
        read_text(path, TraceInputError, what)
    except TraceInputError as exc:
        raise click.UsageError(f"{exc} [{exc.kind.name}]") from None
