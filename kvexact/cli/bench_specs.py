"""``kvexact bench specs``: the nightly ``*.deep.cfg`` model of each shipped spec (or, with ``--models ci``,
each CI model; with ``--models mutants``, every mutant and witness), checked by the embedded engine up to a
distinct-state budget, with distinct states, states generated, depth and seconds. The tests judge these
models by states only; their times live here.

Invariant: exit 0 when no model reported an unexpected violation or an error (a model stopped by the
budget is "incomplete", not a failure; a mutant or witness must be violated as expected); 1 otherwise.
"""

from __future__ import annotations

import json

import click

from kvexact.spec.files import write_atomic


@click.command("specs")
@click.option("--max-states", type=int, default=1_000_000, show_default=True,
              help="stop each deep model after this many distinct states")
@click.option("--only", multiple=True, help="spec name (repeatable), e.g. RadixIndex")
@click.option("--workers", type=int, default=1, show_default=True)
@click.option("--models", "kind", type=click.Choice(["deep", "ci", "mutants"]), default="deep",
              show_default=True, help="which models: the deep ones, the CI ones, or the mutants and witnesses")
@click.option("--json", "json_path", default=None, help="write the figures as JSON")
def bench_specs(max_states: int, only: tuple[str, ...], workers: int, kind: str, json_path: str | None) -> int:
    """Check each spec's deep (or CI) model, or every mutant, with the embedded engine (the figures of docs/specs.md)."""
    from kvexact.gate.spec_checks import SPECS as SPEC_ACTIONS
    from kvexact.spec import spec_dir
    from kvexact.spec.checker import check_model

    unknown = sorted(set(only) - set(SPEC_ACTIONS))
    if unknown:
        raise click.UsageError(f"--only: unknown spec {', '.join(unknown)} (one of {', '.join(SPEC_ACTIONS)})")
    if kind == "mutants":
        return _bench_mutants(only, max(workers, 1), max_states, json_path)
    suffix = ".deep.cfg" if kind == "deep" else ".cfg"
    click.echo(f"{kind + ' model':34s} {'result':11s} {'distinct':>10s} {'generated':>11s} {'depth':>6s} "
               f"{'seconds':>9s} {'distinct/s':>10s}")
    rows, bad = [], 0
    for spec in [s for s in SPEC_ACTIONS if not only or s in only]:
        r = check_model(spec_dir() / f"{spec}.tla", spec_dir() / f"{spec}{suffix}", max_states=max_states,
                        coverage=False, workers=workers)
        failed = r.violation is not None or r.exit_code != 0
        word = r.outcome.value if failed else ("complete" if r.complete else "incomplete")
        bad += failed
        rate = r.distinct_states / r.seconds if r.seconds > 0 else 0.0
        click.echo(f"{spec + suffix:34s} {word:11s} {r.distinct_states:10,d} {r.generated_states:11,d} "
                   f"{r.depth:6d} {r.seconds:9.1f} {rate:10.0f}")
        rows.append({"model": f"{spec}{suffix}", "result": word, "distinct": r.distinct_states,
                     "generated": r.generated_states, "depth": r.depth, "seconds": round(r.seconds, 2)})
    if json_path:
        write_atomic(json_path, json.dumps({"max_states": max_states, "workers": workers, "models": rows}, indent=2))
    return 1 if bad else 0


def _bench_mutants(only: tuple[str, ...], workers: int, max_states: int, json_path: str | None) -> int:
    from kvexact.spec.mutants import check_all, discover_mutants, discover_witnesses

    models = [m for m in [*discover_mutants(), *discover_witnesses()] if not only or m.name.split("_")[0] in only]
    click.echo(f"{'mutant or witness':56s} {'outcome':16s} {'distinct':>10s} {'depth':>6s} {'seconds':>9s}")
    rows = []

    def show(v) -> None:
        click.echo(f"{v.model.name:56s} {v.outcome:16s} {v.distinct_states:10,d} {v.depth:6d} {v.seconds:9.2f}")
        rows.append({"model": v.model.name, "kind": v.model.kind, "outcome": v.outcome,
                     "distinct": v.distinct_states, "depth": v.depth, "seconds": round(v.seconds, 2)})

    verdicts = check_all(models, workers=workers, state_limit=max_states, on_verdict=show)
    if json_path:
        write_atomic(json_path, json.dumps({"max_states": max_states, "workers": workers, "models": rows}, indent=2))
    return 0 if all(v.killed for v in verdicts) else 1
