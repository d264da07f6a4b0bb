"""``kvexact bench kernels``: the click front of :mod:`kvexact.kernels.bench` (exit 3 without CUDA)."""

from __future__ import annotations

import functools

import click

from kvexact.kernels.device import click_option


@click.command("kernels")
@click.option("--budget-s", type=click.FloatRange(min=1.0), default=300.0, show_default=True,
              help="Wall-clock budget in seconds; sections that would overrun it are skipped and reported.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the figures as JSON to this file.")
@click.option("--rep-ms", type=click.FloatRange(min=1.0), default=50.0, show_default=True,
              help="do_bench's timing window per point, in milliseconds (the median is reported).")
@functools.partial(click_option, expose=True)
def bench_kernels(budget_s: float, json_path: str | None, rep_ms: float, device_name: str | None) -> int:
    """Copy bandwidth, native compile checks, paged decode vs the roofline and torch SDPA, shared prefix vs flat.

    Needs a CUDA device (exits 3 otherwise); ``--device cpu`` is a dry run on tiny shapes under Triton's
    interpreter (its timings mean nothing). On a bare GPU stack without click, run
    ``python -m kvexact.kernels.bench`` instead.
    """
    from kvexact.kernels import bench

    return bench.run(budget_s, device_name, json_path=json_path, rep_ms=rep_ms)
