"""``kvexact gate --coverage``: per machine, the rules that fired and the reference functions and branches
the run executed (coverage.py); exit 1 when a machine failed or left a rule unfired."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kvexact.spec.files import write_atomic

MACHINE_NAMES = ("KVAllocation", "CowPublication", "Radix", "Vmm", "Revocation", "SharedTail", "PromptCache",
                 "ChunkAttention", "Radix@page2", "Radix@page4", "Hybrid")


def coverage_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options of the coverage mode, gathered into one ``coverage`` keyword of the gate command."""
    options = [
        click.option("--coverage", "cov_on", is_flag=True,
                     help="Instead of the checks: run the machines under coverage.py and report, per machine, "
                          "the rules fired and the reference functions and branches executed; fail a machine "
                          "whose rules do not all fire."),
        click.option("--machine", "cov_machines", multiple=True, type=click.Choice(MACHINE_NAMES),
                     help="With --coverage: only these machines (default: all, or those the adapter fits)."),
        click.option("--examples", "cov_examples", type=click.IntRange(min=1), default=None,
                     help="With --coverage: examples per machine (default: the profile's)."),
        click.option("--steps", "cov_steps", type=click.IntRange(min=1), default=None,
                     help="With --coverage: steps per example (default: the profile's)."),
        click.option("--no-kernels", "cov_no_kernels", is_flag=True,
                     help="With --coverage: skip the device mirror and the attention checks."),
        click.option("--modules", "cov_modules", is_flag=True, help="With --coverage: list every module's figures."),
    ]

    @functools.wraps(fn)
    def wrapper(*args: Any, cov_on: bool, cov_machines: tuple[str, ...], cov_examples: int | None,
                cov_steps: int | None, cov_no_kernels: bool, cov_modules: bool, **kwargs: Any) -> Any:
        coverage = None
        if cov_on:
            coverage = {"machines": cov_machines, "examples": cov_examples, "steps": cov_steps,
                        "kernels": not cov_no_kernels, "modules": cov_modules}
        return fn(*args, coverage=coverage, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def run_coverage(options: dict[str, Any], profile: str, seed: int, adapter: Any,
                 json_path: Path | None) -> int:
    """Measure every chosen machine; print the report (and write it as JSON); 0 when every one is ok."""
    from kvexact.conformance.adapter_border import resolve
    from kvexact.conformance.profiles import load_profile
    from kvexact.conformance.runner import machine_settings, machines_for
    from kvexact.gate.coverage import measure_machine, summary_lines
    from kvexact.reference.adapters import AdapterError

    chosen = load_profile(profile)
    try:
        adapter = resolve(adapter)  # imported once here; every machine below takes the object
        fits = machines_for(adapter)
    except AdapterError as exc:
        raise click.UsageError(str(exc)) from None
    machines = options["machines"] or fits
    unfit = [m for m in machines if m not in fits]
    if unfit:
        raise click.UsageError(f"--machine {unfit[0]}: the adapter {adapter} does not fit it (it fits: "
                               f"{', '.join(fits)})")
    results = []
    for name in machines:
        click.echo(f"coverage: {name} machine, profile {chosen}, adapter {adapter or 'reference'} ...")
        settings_ = machine_settings(chosen, options["examples"], options["steps"])
        result = measure_machine(name, adapter, settings_, seed, options["kernels"])
        results.append(result)
        for line in summary_lines(result, options["modules"]):
            click.echo(line)
    bad = [r.machine for r in results if not r.ok]
    click.echo(f"coverage: {len(results) - len(bad)}/{len(results)} machines fired every rule and passed"
               + (f"; not: {', '.join(bad)}" if bad else ""))
    if json_path is not None:
        write_atomic(json_path, json.dumps({"profile": chosen, "seed": seed,
                                            "machines": [r.as_dict() for r in results]}, indent=2, sort_keys=True))
    return 1 if bad else 0
