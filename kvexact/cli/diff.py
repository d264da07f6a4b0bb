"""``kvexact diff vllm|sglang``: the live runtime against its peer profile on random streams."""

from __future__ import annotations

import click


@click.command()
@click.argument("runtime", type=click.Choice(["vllm", "sglang"]))
@click.option("--streams", type=click.IntRange(min=1), default=100, show_default=True,
              help="How many random operation streams.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the stream generator.")
@click.option("--length", type=click.IntRange(min=1), default=24, show_default=True,
              help="Operations per stream.")
def diff(runtime: str, streams: int, seed: int, length: int) -> int:
    """Run RUNTIME's live allocator and kvexact's profile of it side by side; exit 0 only with no
    divergence (1: a divergence, minimised; 3: the runtime is missing or unsupported)."""
    from kvexact.conformance.differential import run_diff
    from kvexact.conformance.live.runtime import UnsupportedRuntime

    try:
        report = run_diff(runtime, streams, seed, length)
    except UnsupportedRuntime as exc:
        click.echo(f"diff: {exc}", err=True)
        return 3
    click.echo(f"diff: {runtime} {report.version} (live) vs the profile: {report.streams} streams, "
               f"{report.operations} operations, seed {seed}, {len(report.divergences)} divergent")
    for divergence in report.divergences[:1]:
        click.echo(divergence.describe())
    return 1 if report.divergences else 0
