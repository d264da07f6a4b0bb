"""scripts/gpu-check.sh: its CPU walk (--dry-run) runs every section and writes one JSON report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvexact.kernels.device import cuda_available

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_dry_run_walks_every_section_and_writes_one_report(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable}
    env.pop("KVEXACT_DEVICE", None)
    done = subprocess.run(["bash", "scripts/gpu-check.sh", "--dry-run", "--out", str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=850)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "gpu-check.json").read_text())
    assert report["mode"] == "dry-run (cpu)" and report["passed"]
    assert report["environment"]["device_policy"] == "cpu"
    sections = report["sections"]
    assert set(sections) == {"kernel_tests", "machines", "benchmark"}
    counts = sections["kernel_tests"]["counts"]
    assert counts["tests"] >= 5 and counts["failures"] == 0 and counts["errors"] == 0
    machines = sections["machines"]["report"]
    assert machines["device"] == "cpu"
    runs = machines["machines"]
    assert all(runs[spec]["passed"] and runs[spec]["steps"] > 0 for spec in ("KVAllocation", "Radix"))
    assert runs["KVAllocation"]["attention_checks"] > 0  # the kernels ran inside the machine
    bench = sections["benchmark"]["report"]
    assert bench["failures"] == 0 and len(bench["sections"]["decode"]) == 4 and bench["sections"]["shared_prefix"]
    assert report["long_context_paged_decode"]["context"] == 64


@pytest.mark.skipif(cuda_available(), reason="a CUDA device is present: the check would run for real")
def test_without_cuda_the_real_check_is_a_usage_error(tmp_path):
    done = subprocess.run([sys.executable, "scripts/gpu_check.py", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "no CUDA device" in done.stderr and "--dry-run" in done.stderr
    assert not (tmp_path / "gpu-check.json").exists()
