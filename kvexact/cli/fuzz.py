"""``kvexact fuzz``: run the machines for N minutes at the ``fuzz`` profile with a persistent database."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from kvexact.cli.adapter_options import CouldNotRun, as_click_error, limit_options, report_failure
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
@click.option("--spec", "specs", multiple=True, type=click.Choice(["KVAllocation", "CowPublication", "Radix", "Vmm", "Revocation", "SharedTail", "PromptCache", "ChunkAttention", "Radix@page2", "Radix@page4", "Hybrid"]),
              help="Which machine(s) (default: all of them in turn, or with --adapter the machines it fits).")
@click.option("--out", type=click.Path(path_type=Path), default=Path("fuzz-failures"), show_default=True,
              help="Where a failure's reproduction (pytest file) and ITF trace are written.")
@click.option("--examples-per-round", type=click.IntRange(min=1), default=25, show_default=True)
@click.option("--steps", type=click.IntRange(min=1), default=None, help="Steps per example (profile default).")
@click.option("--shrink/--no-shrink", default=True, show_default=True,
              help="Shrink a failure to a minimal example before writing the reproduction (can take minutes).")
@click.option("--no-kernels", is_flag=True, help="Do not check attention through the kernels (faster).")
@click.option("--db", type=click.Path(path_type=Path), default=None,
              help="Local example database folder (default: KVEXACT_EXAMPLE_DB or .hypothesis/examples).")
@click.option("--shared-db", default=None, metavar="redis://HOST:PORT",
              help="A shared Redis/Valkey example database, written as well as the local one.")
@click.option("--read-db", default=None, metavar="redis://HOST:PORT",
              help="A shared example database read only (replay a campaign's failures, write nothing there).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Run slices in parallel on a local Dask cluster of this many processes (campaign extra).")
@click.option("--scheduler", default=None, metavar="tcp://HOST:8786",
              help="Run the campaign on the Dask cluster of this scheduler (campaign extra).")
@click.option("--dashboard-port", type=click.IntRange(0, 65535), default=8787, show_default=True,
              help="Dask dashboard port of the local cluster (0: any free port).")
@click.option("--counters-port", type=click.IntRange(0, 65535), default=8788, show_default=True,
              help="Port of the campaign's counters page (0: any free port).")
@click.option("--counters-host", default="127.0.0.1", show_default=True,
              help="Address the counters page listens on (0.0.0.0: every interface).")
@click.option("--report", "report_path", type=click.Path(path_type=Path), default=None,
              help="Write the campaign's final counters here as JSON.")
@limit_options
@device_option
def fuzz(minutes, seed, adapter, specs, out, examples_per_round, steps, shrink, no_kernels, db, shared_db, read_db,
         workers, scheduler, dashboard_port, counters_port, counters_host, report_path, call_timeout,
         shrink_seconds) -> int:
    """Fuzz until the budget is spent or a failure is found (then write a replayable reproduction).

    The budget is checked after every example, so the example in progress finishes (and a failure's
    shrinking, bounded by --shrink-seconds, completes) before the command returns; a progress line
    (examples, steps, failures so far) comes at least every ten seconds. With --workers or --scheduler
    the rounds run in parallel as slices on Dask (docs/fuzzing.md)."""
    from hypothesis import settings

    from kvexact.cli.conform import machines_to_run
    from kvexact.conformance.profiles import load_profile
    from kvexact.conformance.runner import machine_settings, run_machine, summary_line

    if workers and scheduler:
        raise click.UsageError("--workers starts a local cluster, --scheduler uses an existing one: give one")
    local_db = db or Path(os.environ.get("KVEXACT_EXAMPLE_DB", ".hypothesis/examples"))
    if workers or scheduler:
        from kvexact.cli.fuzz_campaign import campaign

        return campaign(minutes=minutes, seed=seed, adapter=adapter, specs=specs, out=out,
                        examples=examples_per_round, steps=steps, shrink=shrink, kernels=not no_kernels,
                        local_db=local_db, shared_db=shared_db, read_db=read_db, workers=workers,
                        scheduler=scheduler, dashboard_port=dashboard_port, counters_port=counters_port,
                        counters_host=counters_host, report_path=report_path, call_timeout=call_timeout,
                        shrink_seconds=shrink_seconds, ticker=_ticker)
    from kvexact.conformance.campaign_db import CampaignDatabaseError, campaign_database, shared_gone

    specs, adapter = machines_to_run(specs, adapter, call_timeout)
    load_profile("fuzz")
    try:
        database, shared = campaign_database(local_db, shared_db, read_db)
    except CampaignDatabaseError as exc:
        raise CouldNotRun(str(exc)) from None
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
                s = settings(machine_settings("fuzz", examples_per_round, step_count, shrink=shrink),
                             database=database)
                try:
                    with _ticker(progress):
                        run = run_machine(spec, adapter, s, seed + round_no, not no_kernels, call_timeout=call_timeout,
                                          shrink_seconds=shrink_seconds, watch=lambda stats: live.update(stats=stats),
                                          stop_at=deadline, profile="fuzz")
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
                if shared is not None and shared.error:
                    raise CouldNotRun(shared_gone(shared.url, shared.error, local_db))
        except KeyboardInterrupt:  # files are written atomically: a reproduction is whole or absent
            click.echo(f"fuzz: interrupted (Ctrl-C) in round {round_no + 1}; before it: {round_no} rounds, "
                       f"{totals['examples']} examples, {totals['steps']} steps, no failure")
            return 130
    click.echo(f"fuzz: no failure in {minutes} min: {totals['examples']} examples, {totals['steps']} steps, "
               f"{len(operations)} distinct operations")
    return 0
