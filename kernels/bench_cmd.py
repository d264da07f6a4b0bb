"""``kvexact bench kernels``: the click front of :mod:`kvexact.kernels.bench` (exit 3 without CUDA)."""

from __future__ import annotations

import click


@click.command("kernels")
@click.option("--budget-s", type=click.FloatRange(min=1.0), default=600.0, show_default=True,
              help="Wall-clock budget in seconds; sections that would overrun it are skipped and reported.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the figures as JSON to this file.")
@click.option("--reps", type=click.IntRange(min=1), default=50, show_default=True,
              help="Timed repetitions per point (the median is reported).")
def bench_kernels(budget_s: float, json_path: str | None, reps: int) -> int:
    """Copy bandwidth, native compile checks, paged decode vs the roofline, shared prefix vs flat decode.

    Needs a CUDA device (exits 3 otherwise). On a bare GPU stack without click, run
    ``python -m kvexact.kernels.bench --budget-s 600`` instead.
    """
    from kvexact.kernels import bench

    return bench.run(budget_s, json_path=json_path, reps=reps)
