"""``kvexact bench specs``: the nightly ``*.deep.cfg`` model of each shipped spec, checked by the embedded
engine up to a distinct-state budget, with distinct states, states generated, depth and seconds.

Invariant: exit 0 when no deep model reported a violation or an error (a model stopped by the budget is
"incomplete", not a failure); 1 otherwise.
"""

from __future__ import annotations

import json

import click


@click.command("specs")
@click.option("--max-states", type=int, default=1_000_000, show_default=True,
              help="stop each deep model after this many distinct states")
@click.option("--only", multiple=True, help="spec name (repeatable), e.g. RadixIndex")
@click.option("--workers", type=int, default=1, show_default=True)
@click.option("--json", "json_path", default=None, help="write the figures as JSON")
def bench_specs(max_states: int, only: tuple[str, ...], workers: int, json_path: str | None) -> int:
    """Check each spec's deep model with the embedded engine (figures for the README)."""
    from kvexact.gate.spec_checks import SPECS as SPEC_ACTIONS
    from kvexact.spec import spec_dir
    from kvexact.spec.checker import check_model

    unknown = sorted(set(only) - set(SPEC_ACTIONS))
    if unknown:
        raise click.UsageError(f"--only: unknown spec {', '.join(unknown)} (one of {', '.join(SPEC_ACTIONS)})")
    click.echo(f"{'deep model':34s} {'result':11s} {'distinct':>10s} {'generated':>11s} {'depth':>6s} "
               f"{'seconds':>9s} {'distinct/s':>10s}")
    rows, bad = [], 0
    for spec in [s for s in SPEC_ACTIONS if not only or s in only]:
        r = check_model(spec_dir() / f"{spec}.tla", spec_dir() / f"{spec}.deep.cfg", max_states=max_states,
                        coverage=False, workers=workers)
        failed = r.violation is not None or r.exit_code != 0
        word = r.outcome.value if failed else ("complete" if r.complete else "incomplete")
        bad += failed
        rate = r.distinct_states / r.seconds if r.seconds > 0 else 0.0
        click.echo(f"{spec + '.deep.cfg':34s} {word:11s} {r.distinct_states:10,d} {r.generated_states:11,d} "
                   f"{r.depth:6d} {r.seconds:9.1f} {rate:10.0f}")
        rows.append({"model": f"{spec}.deep.cfg", "result": word, "distinct": r.distinct_states,
                     "generated": r.generated_states, "depth": r.depth, "seconds": round(r.seconds, 2)})
    if json_path:
        with open(json_path, "w") as fh:
            json.dump({"max_states": max_states, "workers": workers, "models": rows}, fh, indent=2)
    return 1 if bad else 0
