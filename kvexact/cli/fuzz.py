"""``kvexact fuzz``: run the machines for N minutes at the ``fuzz`` profile with a persistent database."""

from __future__ import annotations

import os
import time
from pathlib import Path

import click

from kvexact.kernels.device import click_option as device_option


@click.command()
@click.option("--minutes", type=float, required=True, help="Wall-clock budget.")
@click.option("--seed", type=int, default=0, show_default=True, help="Base seed; each round adds one.")
@click.option("--adapter", default=None, metavar="MODULE:FACTORY", help="System under test (default: reference).")
@click.option("--spec", "specs", multiple=True, type=click.Choice(["KVAllocation", "CowPublication", "Radix", "Vmm", "Revocation"]),
              help="Which machine(s) (default: all five in turn, or with --adapter the machines it fits).")
@click.option("--out", type=click.Path(path_type=Path), default=Path("fuzz-failures"), show_default=True,
              help="Where a failure's reproduction (pytest file) and ITF trace are written.")
@click.option("--examples-per-round", type=click.IntRange(min=1), default=25, show_default=True)
@click.option("--steps", type=click.IntRange(min=1), default=None, help="Steps per example (profile default).")
@click.option("--shrink/--no-shrink", default=True, show_default=True,
              help="Shrink a failure to a minimal example before writing the reproduction (can take minutes).")
@device_option
def fuzz(minutes, seed, adapter, specs, out, examples_per_round, steps, shrink) -> int:
    """Fuzz until the budget is spent or a failure is found (then write a replayable reproduction).

    The budget is checked between rounds of --examples-per-round examples, so a round in progress
    finishes (and a failure's shrinking completes) before the command returns."""
    from hypothesis import settings

    from kvexact.cli.conform import machines_to_run
    from kvexact.conformance.profiles import load_profile
    from kvexact.conformance.runner import machine_settings, run_machine, summary_line, write_reproduction

    if minutes <= 0:
        raise click.UsageError("--minutes must be positive")
    specs = machines_to_run(specs, adapter)
    load_profile("fuzz")
    step_count = steps or settings.get_profile("fuzz").stateful_step_count
    deadline = time.monotonic() + minutes * 60
    totals = {"examples": 0, "steps": 0}
    operations: set[str] = set()
    fired: dict[str, set[str]] = {}
    round_no = 0
    while time.monotonic() < deadline:
        spec = specs[round_no % len(specs)]
        s = machine_settings("fuzz", examples_per_round, step_count, shrink=shrink)
        run = run_machine(spec, adapter, s, seed + round_no)
        round_no += 1
        totals["examples"] += run.examples
        totals["steps"] += run.steps
        operations.update(k for k in run.stats if ":" in k and not k.startswith("rule:"))
        fired.setdefault(spec, set()).update(run.rules_fired())
        coverage = ", ".join(f"{sp} {len(r)}/{len(run.rules)} rules" for sp, r in sorted(fired.items()))
        left = max(0.0, deadline - time.monotonic())
        click.echo(f"fuzz: round {round_no} ({spec}) examples={totals['examples']} steps={totals['steps']} "
                   f"distinct_operations={len(operations)} coverage: {coverage}; {left / 60:.1f} min left")
        if not run.passed:
            click.echo(summary_line(run))
            click.echo(run.error, err=True)
            if run.reproduce is None:
                click.echo("fuzz: Hypothesis printed no reproduction blob for this failure", err=True)
                return 1
            repro = write_reproduction(run, out, step_count)
            _write_trace(run, repro, out, step_count)
            click.echo(f"fuzz: reproduction written to {repro} (run: pytest {repro})")
            return 1
    click.echo(f"fuzz: no failure in {minutes} min: {totals['examples']} examples, {totals['steps']} steps, "
               f"{len(operations)} distinct operations")
    return 0


def _write_trace(run, repro: Path, out: Path, step_count: int) -> None:
    """Replay the failing example once with trace output on, leaving ``<spec>.itf.json`` beside it."""
    import importlib.util

    os.environ["KVEXACT_TRACE_DIR"] = str(out)
    os.environ["KVEXACT_TRACE_ALWAYS"] = "1"
    try:
        spec = importlib.util.spec_from_file_location("kvexact_fuzz_repro", repro)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        try:
            module.TestReproduction("runTest").runTest()
        except Exception:
            pass  # the failure is expected; the trace is what we wanted
    finally:
        os.environ.pop("KVEXACT_TRACE_ALWAYS", None)
    trace = out / f"{run.spec}.itf.json"
    if trace.is_file():
        click.echo(f"fuzz: ITF trace of the failing example written to {trace}")
