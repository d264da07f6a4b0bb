"""``kvexact fuzz``: run the machines for N minutes at the ``fuzz`` profile with a persistent database."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from kvexact.cli.adapter_options import as_click_error, limit_options, report_failure
from kvexact.kernels.device import click_option as device_option
from kvexact.reference.adapters import AdapterError
from kvexact.spec.interrupts import sigint_seen

PROGRESS_SECONDS = 10.0  # a progress line at least this often while fuzzing


def _minutes(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """A finite budget of at least one second."""
    if not (math.isfinite(value) and value * 60 >= 1):
        raise click.BadParameter(f"expected a finite number of minutes, at least 1/60 (one second); got {value}",
                                 ctx, param)
    return value


@contextmanager
def _ticker(line: Callable[[], str], seconds: float | None = None) -> Iterator[None]:
    """Print ``line()`` every ``seconds`` (default :data:`PROGRESS_SECONDS`) from a helper thread while the
    block runs."""
    seconds = seconds or PROGRESS_SECONDS
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(seconds):
            click.echo(line())

    thread = threading.Thread(target=tick, name="kvexact-fuzz-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@click.command()
@click.option("--minutes", type=float, required=True, callback=_minutes,
              help="Wall-clock budget (checked after every example).")
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
@limit_options
@device_option
def fuzz(minutes, seed, adapter, specs, out, examples_per_round, steps, shrink, call_timeout, shrink_seconds) -> int:
    """Fuzz until the budget is spent or a failure is found (then write a replayable reproduction).

    The budget is checked after every example, so the example in progress finishes (and a failure's
    shrinking, bounded by --shrink-seconds, completes) before the command returns; a progress line
    (examples, steps, failures so far) comes at least every ten seconds."""
    from hypothesis import settings

    from kvexact.cli.conform import machines_to_run
    from kvexact.conformance.profiles import load_profile
    from kvexact.conformance.runner import machine_settings, run_machine, summary_line

    specs = machines_to_run(specs, adapter, call_timeout)
    load_profile("fuzz")
    step_count = steps or settings.get_profile("fuzz").stateful_step_count
    deadline = time.monotonic() + minutes * 60
    totals = {"examples": 0, "steps": 0}
    operations: set[str] = set()
    fired: dict[str, set[str]] = {}
    round_no = 0
    live: dict[str, dict[str, int]] = {"stats": {}}

    def progress() -> str:
        now = live["stats"]
        state = "shrinking a failure" if now.get("failures") else "running"
        return (f"fuzz: ... examples={totals['examples'] + now.get('examples', 0)} "
                f"steps={totals['steps'] + now.get('steps', 0)} failures={now.get('failures', 0)} "
                f"(round {round_no + 1}, {state}; {max(0.0, deadline - time.monotonic()) / 60:.1f} min left)")

    with sigint_seen() as interrupted:
        try:
            while time.monotonic() < deadline:
                spec = specs[round_no % len(specs)]
                s = machine_settings("fuzz", examples_per_round, step_count, shrink=shrink)
                try:
                    with _ticker(progress):
                        run = run_machine(spec, adapter, s, seed + round_no, call_timeout=call_timeout,
                                          shrink_seconds=shrink_seconds, watch=lambda stats: live.update(stats=stats),
                                          stop_at=deadline)
                except AdapterError as exc:
                    raise as_click_error(exc) from None
                if interrupted.is_set():
                    raise KeyboardInterrupt
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
                    report_failure(run, out, step_count, "fuzz")
                    return 1
        except KeyboardInterrupt:  # files are written atomically: a reproduction is whole or absent
            click.echo(f"fuzz: interrupted (Ctrl-C) in round {round_no + 1}; before it: {round_no} rounds, "
                       f"{totals['examples']} examples, {totals['steps']} steps, no failure")
            return 130
    click.echo(f"fuzz: no failure in {minutes} min: {totals['examples']} examples, {totals['steps']} steps, "
               f"{len(operations)} distinct operations")
    return 0
