"""``kvexact bench fuzz``: examples and steps per second of a fuzzing campaign for 1, 2 and N workers.

Invariant: each row is one campaign of ``--seconds`` on one machine, run on a local Dask cluster of that
many worker processes (started and warmed up before the clock starts) with a fresh example database, so
no row replays another's examples; the rate is the campaign's examples (steps) over its wall-clock time.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from pathlib import Path

import click

from kvexact.spec.files import write_atomic


def parse_counts(text: str, what: str = "worker counts") -> tuple[int, ...]:
    """``1,2,4`` as counts, ascending and each once; a usage error naming ``what`` otherwise."""
    try:
        counts = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise click.BadParameter(f"expected {what} like 1,2,4; got {text!r}") from None
    if not counts or counts[0] < 1:
        raise click.BadParameter(f"expected {what} of at least 1; got {text!r}")
    return counts


@click.command("fuzz")
@click.option("--workers", "workers_text", default=None,
              help="Worker counts, comma-separated (default: 1,2,N with N the CPU count).")
@click.option("--spec", "specs", multiple=True,
              type=click.Choice(["KVAllocation", "CowPublication", "Radix", "Vmm", "Revocation", "SharedTail", "PromptCache", "ChunkAttention", "Radix@page2", "Radix@page4", "Hybrid"]),
              help="Machine(s) to measure (default: all of them).")
@click.option("--seconds", type=click.FloatRange(min=1), default=30.0, show_default=True,
              help="Length of each campaign.")
@click.option("--examples-per-slice", type=click.IntRange(min=1), default=25, show_default=True)
@click.option("--steps", type=click.IntRange(min=1), default=None, help="Steps per example (fuzz profile's).")
@click.option("--no-kernels", is_flag=True, help="Do not check attention through the kernels.")
@click.option("--table", "table_path", type=click.Path(path_type=Path), default=None,
              help="Write the Markdown table here.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write the figures as JSON.")
def bench_fuzz(workers_text: str | None, specs: tuple[str, ...], seconds: float, examples_per_slice: int,
               steps: int | None, no_kernels: bool, table_path: Path | None, json_path: Path | None) -> int:
    """Measure campaign throughput side by side for several worker counts on each machine."""
    from kvexact.conformance.campaign import CampaignUnavailable, require_dask

    try:
        require_dask()
    except CampaignUnavailable as exc:
        raise click.UsageError(str(exc)) from None
    from hypothesis import settings

    from kvexact.conformance.campaign import Campaign, Counters, Databases, run_campaign, start_client
    from kvexact.conformance.profiles import load_profile
    from kvexact.conformance.runner import MACHINES

    counts = parse_counts(f"1,2,{os.cpu_count() or 1}" if workers_text is None else workers_text)
    chosen = specs or MACHINES
    load_profile("fuzz")
    step_count = steps or settings.get_profile("fuzz").stateful_step_count
    rows: list[dict[str, object]] = []
    for workers in counts:
        client = start_client(workers, None, 0)
        try:
            client.run(_warm_up)
            for spec in chosen:
                with tempfile.TemporaryDirectory(prefix="kvexact-bench-fuzz-") as db:
                    plan = Campaign((spec,), None, 0, seconds / 60, examples_per_slice, step_count, Databases(db),
                                    shrink=False, kernels=not no_kernels)
                    counters = Counters()
                    start = time.monotonic()
                    outcome = run_campaign(client, plan, counters, threading.Event(), workers)
                    wall = time.monotonic() - start
                snap = counters.snapshot()
                rows.append({"machine": spec, "workers": workers, "seconds": round(wall, 1),
                             "examples": snap["examples"], "steps": snap["steps"],
                             "examples_per_second": round(snap["examples"] / wall, 2),
                             "steps_per_second": round(snap["steps"] / wall, 1), "failures": len(outcome.failures)})
                click.echo(f"bench fuzz: {spec} on {workers} worker(s): {rows[-1]['examples_per_second']} examples/s, "
                           f"{rows[-1]['steps_per_second']} steps/s")
        finally:
            cluster = client.cluster
            client.close()
            cluster.close()
    table = render_table(rows, counts)
    click.echo(table)
    if table_path:
        write_atomic(table_path, table + "\n")
    if json_path:
        write_atomic(json_path, json.dumps(rows, indent=2) + "\n")
    return 0


def render_table(rows: list[dict[str, object]], counts: tuple[int, ...]) -> str:
    """One line per machine, examples/s and steps/s for each worker count side by side."""
    head = "| machine | " + " | ".join(f"{w} worker{'s' if w > 1 else ''}: examples/s, steps/s" for w in counts) + " |"
    lines = [head, "|---" * (len(counts) + 1) + "|"]
    for spec in dict.fromkeys(str(r["machine"]) for r in rows):
        cells = []
        for w in counts:
            row = next((r for r in rows if r["machine"] == spec and r["workers"] == w), None)
            cells.append(f"{row['examples_per_second']}, {row['steps_per_second']}" if row else "-")
        lines.append(f"| {spec} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _warm_up() -> None:
    """Import the machines on a worker before the clock starts."""
    import kvexact.conformance.machines.allocator  # noqa: F401
    import kvexact.conformance.machines.radix  # noqa: F401
    import kvexact.conformance.machines.revocation  # noqa: F401
    import kvexact.conformance.machines.vmm  # noqa: F401
    import kvexact.conformance.runner  # noqa: F401
