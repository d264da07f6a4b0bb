"""``kvexact fuzz --workers N`` / ``--scheduler tcp://HOST:8786``: a fuzzing campaign on Dask.

Invariant: the command ends with the campaign's report (totals, rule coverage per machine, restarts) and
every failure a slice returned written as a reproduction with its ITF traces; exit 1 when a failure was
found, 3 when the campaign could not run (no Dask, an unusable adapter, a shared database that went away),
130 on Ctrl-C (every worker stopped first), else 0.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import click

from kvexact.cli.adapter_options import CouldNotRun, as_click_error, report_failure
from kvexact.spec.files import write_atomic
from kvexact.spec.interrupts import sigint_seen


def campaign(*, minutes: float, seed: int, adapter: str | None, specs: tuple[str, ...], out: Path, examples: int,
             steps: int | None, shrink: bool, kernels: bool, local_db: Path, shared_db: str | None,
             read_db: str | None, workers: int | None, scheduler: str | None, dashboard_port: int,
             counters_port: int, counters_host: str, report_path: Path | None, call_timeout: float | None,
             shrink_seconds: float, ticker: Callable[[Callable[[], str]], AbstractContextManager[None]]) -> int:
    """Run the campaign and report it (see the module's invariant for the exit codes)."""
    from kvexact.cli.conform import machines_to_run
    from kvexact.conformance.campaign import CampaignUnavailable, require_dask

    try:
        require_dask()
    except CampaignUnavailable as exc:
        raise click.UsageError(str(exc)) from None
    from hypothesis import settings

    from kvexact.conformance.campaign import (
        Campaign,
        Counters,
        Databases,
        report_lines,
        run_campaign,
        start_client,
    )
    from kvexact.conformance.campaign_db import CampaignDatabaseError, redis_database, shared_gone
    from kvexact.conformance.campaign_page import serving
    from kvexact.conformance.profiles import load_profile
    from kvexact.conformance.runner import summary_line

    specs, _ = machines_to_run(specs, adapter, call_timeout)  # checked here; each worker resolves its own
    load_profile("fuzz")
    step_count = steps or settings.get_profile("fuzz").stateful_step_count
    for url in (shared_db, read_db):  # check the shared databases answer before any worker starts
        if url:
            try:
                redis_database(url)
            except CampaignDatabaseError as exc:
                raise CouldNotRun(str(exc)) from None
    local = str(local_db if scheduler else local_db.resolve())
    plan = Campaign(tuple(specs), adapter, seed, minutes, examples, step_count,
                    Databases(local, shared_db, read_db), shrink, kernels, call_timeout, shrink_seconds)
    counters = Counters()
    started = time.monotonic()
    with sigint_seen() as interrupted:
        try:
            client = start_client(workers, scheduler, dashboard_port)
        except (OSError, TimeoutError) as exc:
            raise CouldNotRun(f"could not reach the Dask scheduler {scheduler}: {exc}") from None
        try:
            try:
                client.wait_for_workers(1, timeout=60)
            except TimeoutError:
                raise CouldNotRun(f"no Dask worker joined the scheduler {scheduler} within 60 s") from None
            parallel = workers or max(1, sum(w.get("nthreads", 1) for w in
                                             client.scheduler_info()["workers"].values()))
            counters.dashboard = client.dashboard_link or ""
            with serving(counters.snapshot, counters_host, counters_port) as page:
                pids = sorted(client.run(_pid).values())
                click.echo(f"fuzz: campaign on {parallel} workers (pids {', '.join(map(str, pids))}); counters "
                           f"page {page} ; Dask dashboard {counters.dashboard or 'off (install bokeh)'}")
                click.echo(f"fuzz: machines {', '.join(specs)}, adapter {adapter or 'reference'}, "
                           f"{examples} examples per slice, database {local}"
                           + (f" + shared {shared_db}" if shared_db else "") + (f" + read-only {read_db}"
                                                                                 if read_db else ""))
                with ticker(lambda: _progress(counters)):
                    outcome = run_campaign(client, plan, counters, interrupted, parallel)
        finally:
            _close(client)
    seconds = time.monotonic() - started
    for line in report_lines(outcome, counters, seconds):
        click.echo(line)
    if report_path is not None:
        doc: dict[str, Any] = {**counters.snapshot(), "restarted_slices": counters.restarts(),
                               "interrupted": outcome.interrupted, "lost_slices": outcome.lost,
                               "failures_found": [r.error.splitlines()[0] for r in outcome.failures]}
        write_atomic(report_path, json.dumps(doc, indent=2) + "\n")
    written: set[tuple[str, str, str]] = set()
    for run in outcome.failures:  # every failure is already in the database; here it becomes a reproduction
        same = (run.spec, run.adapter, run.falsifying or run.error)
        if same in written:  # a slice run again after its worker was lost replays what another slice found
            continue
        written.add(same)
        click.echo(summary_line(run))
        report_failure(run, out, step_count, "fuzz")
    if outcome.shared_errors:
        click.echo(f"fuzz: {shared_gone(shared_db or read_db or '', outcome.shared_errors[0], local_db)}", err=True)
    if outcome.interrupted:
        return 130
    if outcome.failures:
        return 1
    for bad in outcome.adapter_errors:
        from kvexact.reference.adapters import AdapterError, AdapterProblem

        raise as_click_error(AdapterError(AdapterProblem[bad.adapter_problem], bad.adapter_error))
    if outcome.shared_errors:
        raise CouldNotRun(shared_gone(shared_db or read_db or "", outcome.shared_errors[0], local_db))
    if outcome.lost:
        raise CouldNotRun(f"Dask gave up on {len(outcome.lost)} slice(s): {outcome.lost[0]}")
    return 0


def _progress(counters: Any) -> str:
    c = counters.snapshot()
    return (f"fuzz: ... examples={c['examples']} steps={c['steps']} ({c['steps_per_second']} steps/s) "
            f"failures={c['failures']} slices={c['slices']} restarts={c['restarts']}")


def _pid() -> int:
    import os

    return os.getpid()


def _close(client: Any) -> None:
    """Stop the workers of a local cluster (all of them) and disconnect; a remote cluster is left running."""
    cluster = getattr(client, "cluster", None)
    try:
        client.close(timeout=10)
    finally:
        if cluster is not None:
            cluster.close(timeout=10)
