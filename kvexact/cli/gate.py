"""``kvexact gate``: run the registered checks with a live progress display, a summary and reports.

Invariant: a report path given names either this run's complete report or nothing: the previous report
is removed before the first check runs and the new one is written atomically at the end, also after
Ctrl-C (then marked ``"interrupted": true`` with exit code 130, listing the checks done).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from kvexact.cli.adapter_options import call_timeout_option, check_adapter_option
from kvexact.cli.gate_coverage import coverage_options, run_coverage
from kvexact.conformance.profiles import PROFILE_NAMES, resolve_profile
from kvexact.gate import framework as gate_mod
from kvexact.gate import parallel, reports
from kvexact.gate.checks import load_checks
from kvexact.kernels.device import click_option as device_option
from kvexact.spec.files import check_writable, remove_stale, write_atomic


def _names(values: tuple[str, ...], option: str) -> list[str]:
    names = [n.strip() for v in values for n in v.split(",")]
    if "" in names:
        raise click.UsageError(f"{option} got an empty check name ({', '.join(map(repr, values))}); see --list")
    return names


def _show_status(progress: Progress, task: TaskID, text: str) -> None:
    progress.update(task, status=text[:60])


def _figures_text(figures: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in figures.items() if not isinstance(v, (dict, list)))[:80]


def _tlc_jar(option: Path | None) -> str | None:
    """The TLC jar as ``kvexact check`` resolves it, or None when TLC is absent (no jar or no Java: the
    spec checks then use the embedded engine alone); a jar that is named but missing is a usage error."""
    from kvexact.spec.tlc import TlcUnavailable, find_jar, java_executable

    try:
        jar = find_jar(option).path
    except TlcUnavailable as exc:
        if option or os.environ.get("TLA2TOOLS_JAR"):
            raise click.UsageError(str(exc)) from None
        return None
    try:
        java_executable()
    except TlcUnavailable:
        return None
    return jar


def _print_outcome(progress: Progress, outcome: gate_mod.CheckOutcome) -> None:
    progress.console.print(f"{outcome.result.verdict.value:>13}  {escape(outcome.check.name)}  "
                           f"({outcome.seconds:.1f}s)", highlight=False)


def _run_here(chosen: list[gate_mod.GateCheck], ctx: gate_mod.GateContext, progress: Progress,
              task: TaskID, outcomes: list[gate_mod.CheckOutcome]) -> None:
    """The checks one after another in this process, each outcome appended as it comes; the first
    interrupted one ends the run."""
    for check in chosen:
        progress.update(task, description=check.name, status="")
        ctx.status = functools.partial(_show_status, progress, task)
        outcome = gate_mod.run_check(check, ctx)
        outcomes.append(outcome)
        _print_outcome(progress, outcome)
        progress.advance(task)
        if outcome.result.verdict is gate_mod.Verdict.INTERRUPTED:
            break


def _run_in_workers(chosen: list[gate_mod.GateCheck], ctx: gate_mod.GateContext, jobs: int, progress: Progress,
                    task: TaskID, outcomes: list[gate_mod.CheckOutcome]) -> None:
    """The checks on ``jobs`` worker processes, each outcome appended as it comes, then all put in the
    order of ``chosen``; the bar names the checks running and the latest status."""
    running: list[str] = []

    def show(text: str = "") -> None:
        progress.update(task, description=", ".join(running) or "gate", status=text[:60])

    def started(check: gate_mod.GateCheck) -> None:
        running.append(check.name)
        show()

    def finished(outcome: gate_mod.CheckOutcome) -> None:
        outcomes.append(outcome)
        running.remove(outcome.check.name)
        _print_outcome(progress, outcome)
        progress.advance(task)
        show()

    ordered = parallel.run_checks(chosen, ctx, jobs, started, lambda check, text: show(f"{check.name}: {text}"),
                                  finished)
    outcomes[:] = ordered


@click.command()
@click.option("--select", multiple=True, metavar="NAMES", help="Run only these checks (comma-separated).")
@click.option("--skip", multiple=True, metavar="NAMES", help="Do not run these checks (comma-separated).")
@click.option("--level", type=click.Choice(gate_mod.LEVELS), default="quick", show_default=True,
              help="How deep: quick (every change), full (before a release), deep (adds the TLA+ corpus).")
@click.option("--list", "list_only", is_flag=True, help="List the registered checks and exit.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="Write the JSON report here.")
@click.option("--junit", "junit_path", type=click.Path(path_type=Path), help="Write a JUnit XML report here.")
@click.option("--profile", type=click.Choice(PROFILE_NAMES), default=None, envvar="KVEXACT_PROFILE", show_envvar=True,
              help="Hypothesis profile for the state machines (default: ci).")
@click.option("--seed", type=int, default=0, show_default=True, help="Base seed for every randomized check.")
@click.option("--adapter", default=None, metavar="MODULE:FACTORY",
              help="System under test in the machines it fits (an allocator, prefix-index or hybrid-cache adapter).")
@click.option("--tlc-jar", type=click.Path(path_type=Path), default=None,
              help="tla2tools.jar for the TLC engine (else TLA2TOOLS_JAR, else the CI copy beside the clone).")
@click.option("--jobs", type=click.IntRange(min=1), default=None, metavar="N", envvar="KVEXACT_GATE_JOBS",
              show_envvar=True, help="Checks run at once, each in its own worker process (default: the cores this process may "
                   "use); 1 runs them here, one after another.")
@call_timeout_option
@coverage_options
@device_option
def gate(select, skip, level, list_only, json_path, junit_path, profile, seed, adapter, tlc_jar,
         jobs, call_timeout, coverage) -> int:
    """Run the conformance gate: every registered check, a summary table, and reports."""
    if coverage is not None:
        return run_coverage(coverage, profile, seed, adapter, json_path)
    console = Console(stderr=False)
    checks = load_checks()
    if list_only:
        for c in checks:
            click.echo(f"{c.name:28} {c.level:6} {c.layer:12} {c.description}")
        return 0
    try:
        chosen = gate_mod.select_checks(checks, _names(select, "--select"), _names(skip, "--skip"), level)
    except gate_mod.UnknownCheck as exc:
        raise click.UsageError(str(exc)) from None
    for path in (json_path, junit_path):
        if path is not None:
            problem = check_writable(path)
            if problem:
                raise click.UsageError(problem)
    adapter = check_adapter_option(adapter, call_timeout)  # resolved once; the checks take the object
    jar = _tlc_jar(tlc_jar)
    ctx = gate_mod.GateContext(level=level, profile=resolve_profile(profile), seed=seed, adapter=adapter,
                               tlc_jar=jar, call_timeout=call_timeout)
    for path in (json_path, junit_path):  # a report that is not this run's must not look current
        if path is not None:
            remove_stale(path)
    jobs = ctx.jobs = min(jobs or parallel.available_cores(), max(1, len(chosen)))
    outcomes: list[gate_mod.CheckOutcome] = []
    with Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                  TextColumn("{task.fields[status]}"), console=console, transient=False) as progress:
        task = progress.add_task("gate", total=len(chosen), status="")
        with gate_mod.interrupts_caught(ctx):
            if jobs == 1:
                _run_here(chosen, ctx, progress, task, outcomes)
            else:
                _run_in_workers(chosen, ctx, jobs, progress, task, outcomes)
        progress.update(task, description="gate", status="interrupted" if ctx.interrupted else "done")
    outcomes.sort(key=lambda o: chosen.index(o.check))  # reports list the checks in registry order, however they finished
    ran = {o.check.name for o in outcomes}
    not_run = [c.name for c in chosen if c.name not in ran]
    table = Table(title=f"kvexact gate ({ctx.level} level, {ctx.profile} profile, seed {ctx.seed}, "
                        f"{jobs} job{'s' if jobs > 1 else ''} at once)")
    wide = console.width >= 120  # the figures column only where it fits (all figures are in --json)
    for col in ("check", "verdict", "states", "examples", "seconds", *(["figures"] if wide else [])):
        table.add_column(col, no_wrap=col != "figures", justify="right" if col in ("states", "examples",
                                                                                  "seconds") else "left")
    colors = {gate_mod.Verdict.PASSED: "green", gate_mod.Verdict.FAILED: "red",
              gate_mod.Verdict.COULD_NOT_RUN: "yellow", gate_mod.Verdict.INTERRUPTED: "red"}
    for o in outcomes:
        v = o.result.verdict
        table.add_row(escape(o.check.name), f"[{colors[v]}]{v.value}[/]", f"{o.result.states:,}",
                      f"{o.result.examples:,}", f"{o.seconds:.2f}",
                      *([escape(_figures_text(o.result.figures))] if wide else []))
    console.print(table)
    for o in outcomes:
        if o.result.verdict is not gate_mod.Verdict.PASSED and o.result.detail:
            console.print(f"[bold]{escape(o.check.name)}[/]: {escape(o.result.detail)}", highlight=False)
    code = gate_mod.INTERRUPTED_EXIT if ctx.interrupted else gate_mod.exit_code(outcomes)
    if json_path is not None:
        write_atomic(json_path, reports.json_text(reports.build_json(outcomes, ctx, code, not_run)))
    if junit_path is not None:
        write_atomic(junit_path, reports.junit_bytes(outcomes, not_run))
    summary = {v.value: sum(o.result.verdict is v for o in outcomes) for v in gate_mod.Verdict}
    if ctx.interrupted:
        click.echo(f"gate: interrupted (Ctrl-C) after {len(outcomes)} of {len(chosen)} checks; not run: "
                   f"{', '.join(not_run) or 'none'}")
    click.echo(f"gate: {json.dumps(summary)} -> exit {code}")
    return code
