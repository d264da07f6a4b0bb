"""What ``conform``, ``fuzz`` and ``gate`` share about ``--adapter``: the per-call limit and shrink budget
options, the border check, and the report of a failing run (steps, reproduction, the adapter's trace).

Invariant: a broken adapter ends the command with one line naming it and what is wrong, exit 2 for a bad
argument and 3 when it could not run (``AdapterError.exit_code``), never as a conformance failure.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kvexact.conformance.adapter_border import CALL_TIMEOUT_ENV, DEFAULT_CALL_SECONDS, DEFAULT_SHRINK_SECONDS
from kvexact.reference.adapters import AdapterError


def call_timeout_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--call-timeout SECONDS`` (or KVEXACT_CALL_TIMEOUT)."""
    return click.option("--call-timeout", type=click.FloatRange(min=0), default=DEFAULT_CALL_SECONDS,
                        envvar=CALL_TIMEOUT_ENV, show_default=True, show_envvar=True,
                        help="Stop an adapter call (or the factory) that has not returned after this many "
                        "seconds and report it with its arguments, exit 3 (0: no limit).")(func)


def limit_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--call-timeout`` and ``--shrink-seconds``."""
    func = click.option("--shrink-seconds", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_SHRINK_SECONDS,
                        show_default=True, help="Stop shrinking a failure after this many seconds and report "
                        "the smallest example found so far.")(func)
    return call_timeout_option(func)


class CouldNotRun(click.ClickException):
    """One line, exit 3: the command could not run (docs/design.md, "Exit codes")."""

    exit_code = 3


def as_click_error(exc: AdapterError) -> click.ClickException:
    """A usage error (exit 2) for a bad adapter argument; exit 3 for one that could not run."""
    return click.UsageError(str(exc)) if exc.exit_code == 2 else CouldNotRun(str(exc))


def check_adapter_option(adapter: str | None, call_timeout: float | None) -> Any:
    """``--adapter`` resolved (imported once) and checked at the border, before any example runs; the
    :class:`~kvexact.conformance.adapter_border.Adapter` it returns is what the command passes down (None:
    the reference)."""
    from kvexact.conformance.adapter_border import load_adapter

    if not adapter:
        return None
    try:
        return load_adapter(adapter, call_timeout)
    except AdapterError as exc:
        raise as_click_error(exc) from None


def report_failure(run: Any, out: Path, steps: int, command: str) -> None:
    """Print a failing run's error and steps; write its reproduction and (replaying it) its ITF traces."""
    from kvexact.conformance.runner import write_reproduction

    click.echo(run.error, err=True)
    if run.falsifying:
        click.echo(f"{command}: failing steps:\n{run.falsifying}", err=True)
    if run.reproduce is None and not run.replay:
        click.echo(f"{command}: Hypothesis printed no reproduction blob for this failure", err=True)
        return
    repro = write_reproduction(run, out, steps)
    click.echo(f"{command}: reproduction written to {repro} (run: pytest {repro})")
    if run.reproduce is None:
        return  # the replay ends the process: no trace replay here
    _write_traces(run, repro, out, command)


def _write_traces(run: Any, repro: Path, out: Path, command: str) -> None:
    """Replay the failing example once with trace output on, leaving its ITF traces in ``out``."""
    previous = os.environ.get("KVEXACT_TRACE_DIR")
    os.environ["KVEXACT_TRACE_DIR"] = str(out)
    os.environ["KVEXACT_TRACE_ALWAYS"] = "1"
    try:
        spec = importlib.util.spec_from_file_location("kvexact_repro", repro)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        with contextlib.redirect_stdout(io.StringIO()):  # Hypothesis prints the replayed example again
            try:
                module.TestReproduction("runTest").runTest()
            except Exception:
                pass  # the failure is expected; the traces are what we wanted
    finally:
        os.environ.pop("KVEXACT_TRACE_ALWAYS", None)
        if previous is None:
            os.environ.pop("KVEXACT_TRACE_DIR", None)
        else:
            os.environ["KVEXACT_TRACE_DIR"] = previous
    adapter_trace = out / f"{run.spec}.adapter.itf.json"
    if run.adapter != "reference" and adapter_trace.is_file():
        click.echo(f"{command}: ITF trace of the adapter's steps in the failing example: {adapter_trace}")
    trace = out / f"{run.spec}.itf.json"
    if trace.is_file():
        click.echo(f"{command}: ITF trace of the reference's steps in the failing example: {trace}")
