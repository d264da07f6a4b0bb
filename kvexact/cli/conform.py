"""``kvexact conform``: run the state machines once (a profile, a seed, an adapter).

Exit codes: 0 every machine passed, 1 one failed, 2 usage, 3 could not run, 130 Ctrl-C (the machines
finished before it are printed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kvexact.cli.adapter_options import as_click_error, check_adapter_option, limit_options, report_failure
from kvexact.conformance.profiles import PROFILE_NAMES, load_profile
from kvexact.kernels.device import click_option as device_option
from kvexact.reference.adapters import AdapterError
from kvexact.spec.interrupts import sigint_seen


@click.command()
@click.option("--spec", "specs", multiple=True, type=click.Choice(["KVAllocation", "CowPublication", "Radix", "Vmm", "Revocation", "SharedTail", "PromptCache", "ChunkAttention", "Radix@page2", "Radix@page4", "Hybrid"]),
              help="Which machine(s) (default: all of them, or with --adapter the machines it fits).")
@click.option("--adapter", default=None, metavar="MODULE:FACTORY",
              help="System under test in the reference's place (default: the reference itself): an "
                   "allocator adapter (KVAllocation, CowPublication), a prefix-index adapter (Radix) or a hybrid-cache "
                   "adapter (Hybrid).")
@click.option("--profile", type=click.Choice(PROFILE_NAMES), default=None, envvar="KVEXACT_PROFILE", show_envvar=True,
              help="Hypothesis profile (default: ci).")
@click.option("--seed", type=int, default=None, help="Seed (ignored by the derandomized ci profile).")
@click.option("--examples", type=click.IntRange(min=1), default=None, help="Override the profile's examples.")
@click.option("--steps", type=click.IntRange(min=1), default=None, help="Override the profile's steps per example.")
@click.option("--no-kernels", is_flag=True, help="Skip the device mirror and attention checks.")
@click.option("--shrink/--no-shrink", default=True, show_default=True, help="Shrink a failure before reporting.")
@click.option("--out", type=click.Path(path_type=Path), default=Path("conform-failures"), show_default=True,
              help="Where a failure's reproduction (pytest file) and ITF traces are written.")
@limit_options
@device_option
def conform(specs, adapter, profile, seed, examples, steps, no_kernels, shrink, out, call_timeout,
            shrink_seconds) -> int:
    """Drive the reference (or an adapter) with random operation streams, against kernels and specs."""
    from kvexact.conformance.runner import machine_settings, run_machine, summary_line

    chosen = load_profile(profile)
    specs, adapter = machines_to_run(specs, adapter, call_timeout)
    try:
        import kvexact.kernels.paged  # noqa: F401
    except ImportError as exc:
        if not no_kernels:
            click.echo(f"conform: the kernels cannot be imported ({exc}); install the kernels extra or pass "
                       "--no-kernels", err=True)
            return 3
    failed = done = 0
    spec = specs[0]
    with sigint_seen() as interrupted:
        try:
            for spec in specs:
                click.echo(f"conform: {spec} machine, profile {chosen}, adapter {adapter or 'reference'} ...")
                s = machine_settings(chosen, examples, steps, shrink)
                try:
                    run = run_machine(spec, adapter, s, seed, not no_kernels, call_timeout, shrink_seconds,
                                      profile=chosen)
                except AdapterError as exc:
                    raise as_click_error(exc) from None
                if interrupted.is_set():  # Hypothesis may have swallowed it or made it a failure
                    raise KeyboardInterrupt
                click.echo(summary_line(run))
                done += 1
                if not run.passed:
                    failed += 1
                    report_failure(run, out, s.stateful_step_count, "conform")
        except KeyboardInterrupt:
            click.echo(f"conform: interrupted (Ctrl-C) in the {spec} machine; {done} of {len(specs)} machines done "
                       f"before it (above), {failed} of them failed")
            return 130
    return 1 if failed else 0


def machines_to_run(specs: tuple[str, ...], adapter: str | None, call_timeout: float | None = None
                    ) -> tuple[tuple[str, ...], Any]:
    """The machines asked for (default: those the adapter fits) and the adapter resolved once at the border
    (None: the reference); a one-line error names a bad adapter or a machine the adapter does not fit."""
    from kvexact.conformance.runner import build_machine, machines_for

    resolved = check_adapter_option(adapter, call_timeout)
    try:
        fits = machines_for(resolved)
        for spec in specs:
            build_machine(spec, resolved)
    except AdapterError as exc:
        raise as_click_error(exc) from None
    return specs or fits, resolved
