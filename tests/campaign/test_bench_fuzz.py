"""``kvexact bench fuzz``: worker-count parsing, and one short measured row with its table and JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvexact.cli.bench_fuzz import render_table


@pytest.mark.parametrize("text", ["", "0", "1,x", " , "])
def test_bad_worker_counts_are_a_usage_error(text):
    done = subprocess.run([sys.executable, "-m", "kvexact.cli", "bench", "fuzz", "--workers", text],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "worker counts" in done.stderr


def test_render_table_puts_worker_counts_side_by_side():
    rows = [{"machine": "Vmm", "workers": 1, "examples_per_second": 2.5, "steps_per_second": 100.0},
            {"machine": "Vmm", "workers": 2, "examples_per_second": 4.0, "steps_per_second": 170.0}]
    lines = render_table(rows, (1, 2)).splitlines()
    assert lines[0] == "| machine | 1 worker: examples/s, steps/s | 2 workers: examples/s, steps/s |"
    assert lines[2] == "| Vmm | 2.5, 100.0 | 4.0, 170.0 |"
    assert render_table(rows[:1], (1, 2)).splitlines()[2] == "| Vmm | 2.5, 100.0 | - |"


@pytest.mark.slow
def test_one_worker_row_counts_examples_and_steps(tmp_path):
    out = tmp_path / "fuzz.json"
    table = tmp_path / "fuzz.md"
    done = subprocess.run([sys.executable, "-m", "kvexact.cli", "bench", "fuzz", "--workers", "1", "--spec", "Vmm",
                           "--seconds", "3", "--examples-per-slice", "2", "--steps", "5", "--no-kernels",
                           "--json", str(out), "--table", str(table)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(out.read_text())
    assert [(r["machine"], r["workers"]) for r in rows] == [("Vmm", 1)]
    row = rows[0]
    assert row["examples"] >= 1 and row["failures"] == 0
    assert row["steps"] >= row["examples"]  # every example runs at least one step
    assert row["steps_per_second"] > 0 and row["examples_per_second"] > 0
    assert "| Vmm |" in table.read_text()
