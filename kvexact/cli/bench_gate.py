"""``kvexact bench gate``: the gate run whole, as a user runs it, with different ``--jobs``, alternately and
side by side: each run's wall time and CPU time (the gate and every process it started), and each setting's
median wall time as a ratio to the first setting's. The tests bound the gate by states and examples; its
times live here.

Invariant: exit 0 when every gate run passed (exit 0); 1 when one did not (its exit code is printed).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from kvexact.cli.bench_fuzz import parse_counts
from kvexact.gate.framework import LEVELS
from kvexact.gate.parallel import available_cores
from kvexact.spec.files import write_atomic


def _jobs_list(_ctx: click.Context, _param: click.Parameter, text: str) -> list[int]:
    return list(parse_counts(text, "job counts"))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _one_gate(level: str, select: str | None, jobs: int, folder: Path) -> dict:
    """One ``kvexact gate`` in a child process: its exit code, wall and CPU seconds, and its checks' verdicts."""
    report = folder / f"gate-{jobs}.json"
    chosen = ["--select", select] if select else []
    cpu_before, start = _children_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kvexact.cli", "gate", "--level", level, *chosen, "--jobs",
                           str(jobs), "--json", str(report)], capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu_before
    verdicts: dict[str, int] = {}
    if report.exists():
        for check in json.loads(report.read_text())["checks"]:
            verdicts[check["verdict"]] = verdicts.get(check["verdict"], 0) + 1
    return {"jobs": jobs, "exit_code": done.returncode, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "verdicts": verdicts, "tail": done.stdout[-1500:] + done.stderr[-1500:]}


@click.command("gate")
@click.option("--jobs", "settings", default=f"1,{available_cores()}", show_default=True, callback=_jobs_list,
              help="the --jobs settings to compare (comma-separated); the smallest is the ratios' base")
@click.option("--rounds", type=click.IntRange(min=1), default=2, show_default=True,
              help="runs of each setting, taken in turn (1, 2, 1, 2, ...)")
@click.option("--level", type=click.Choice(LEVELS), default="quick", show_default=True)
@click.option("--select", default=None, metavar="NAMES", help="time only these checks (as the gate's --select)")
@click.option("--json", "json_path", default=None, help="write every run and the ratios as JSON")
def bench_gate(settings: list[int], rounds: int, level: str, select: str | None, json_path: str | None) -> int:
    """Time the whole gate with each --jobs setting, alternately, and print the ratios of their medians."""
    click.echo(f"bench gate: level {level}, checks {select or 'all of the level'}, --jobs {settings}, {rounds} round(s) each, alternately; "
               f"{available_cores()} cores available, load average {os.getloadavg()[0]:.2f} at the start")
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="kvexact-bench-gate-") as tmp:
        for round_no in range(1, rounds + 1):
            for jobs in settings:
                run = _one_gate(level, select, jobs, Path(tmp))
                runs.append(run)
                click.echo(f"round {round_no}  --jobs {jobs:<3d} wall {run['wall_s']:7.1f} s  cpu {run['cpu_s']:7.1f} s"
                           f"  exit {run['exit_code']}  {run['verdicts']}")
                if run["exit_code"] != 0:
                    click.echo(run["tail"], err=True)
    medians = {jobs: statistics.median(r["wall_s"] for r in runs if r["jobs"] == jobs) for jobs in settings}
    base = medians[settings[0]]
    for jobs in settings:
        click.echo(f"--jobs {jobs:<3d} median wall {medians[jobs]:7.1f} s  ratio to --jobs {settings[0]}: "
                   f"{medians[jobs] / base:.2f}")
    if json_path:
        write_atomic(json_path, json.dumps({"level": level, "select": select, "rounds": rounds, "cores": available_cores(),
                                            "runs": [{k: v for k, v in r.items() if k != "tail"} for r in runs],
                                            "median_wall_s": {str(j): m for j, m in medians.items()},
                                            "ratio": {str(j): round(m / base, 3) for j, m in medians.items()}},
                                           indent=2))
    return 1 if any(r["exit_code"] != 0 for r in runs) else 0
