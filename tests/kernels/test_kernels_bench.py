"""`kvexact bench kernels` on a CPU: exits 3, imports nothing beyond torch/triton, and its code paths run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvexact.kernels import bench
from kvexact.kernels.device import cuda_available

cpu_only = pytest.mark.skipif(cuda_available(), reason="with a CUDA device the benchmark runs for real (the GPU "
                                                       "check runs it); these check the answer without one")

BLOCKED = ["z3", "tla", "jpype", "attrs", "click", "hypothesis", "rich", "kvexact.conformance", "kvexact.spec"]
BARE_STACK = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name in {BLOCKED!r} or any(name.startswith(b + ".") for b in {BLOCKED!r}):
            raise ImportError("blocked on the bare GPU stack: " + name)
sys.meta_path.insert(0, Block())
from kvexact.kernels import bench
sys.exit(bench.main(sys.argv[1:]))
"""


def _bare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BARE_STACK, *args], capture_output=True, text=True, timeout=600)


@cpu_only
def test_cli_exits_3_saying_it_needs_a_cuda_device(capsys):
    from kvexact.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["bench", "kernels", "--budget-s", "5"])
    assert exc.value.code == 3
    assert "needs a CUDA device" in capsys.readouterr().err


def test_cli_rejects_a_non_positive_budget_as_usage_error():
    from kvexact.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["bench", "kernels", "--budget-s", "0"])
    assert exc.value.code == 2


@cpu_only
def test_bare_stack_without_click_attrs_or_z3_exits_3():
    done = _bare("--budget-s", "5")
    assert done.returncode == 3, done.stderr[-2000:]
    assert "needs a CUDA device" in done.stderr


def test_bare_stack_usage_error_exits_2():
    assert _bare("--budget-s", "-1").returncode == 2


@pytest.mark.slow
def test_dry_run_walks_every_section_on_the_bare_stack(tmp_path):
    out = tmp_path / "bench.json"
    done = _bare("--device", "cpu", "--budget-s", "300", "--json", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    record = json.loads(out.read_text())
    assert record["failures"] == 0
    assert record["sections"]["compile"] and all(c["ok"] for c in record["sections"]["compile"])
    assert len(record["sections"]["decode"]) == 4
    assert all(row["agrees_with_sdpa"] for row in record["sections"]["decode"])
    assert record["sections"]["shared_prefix"][0]["agree"]
    assert record["sections"]["copy"]["bytes_per_s"] > 0
    assert record["long_context"]["context"] == 64


def test_roofline_bytes_by_hand():
    # KV 36 rows x 2 heads x 8 x (K+V) x 2 B = 2304; q+out 2 x 4 x 8 x 4 B = 256; table 3 entries x 4 B = 12
    # split workspace, written then read, also for one split: 2 x B 2 x Hq 4 x S 1 x (D 8 + 1) x 4 B = 576
    assert bench.decode_bytes([16, 20], 4, 2, 8, 16, 2, 2, 2, num_splits=1) == 2304 + 256 + 12 + 576
    # two splits: 2 x 2 x 4 x 2 x 9 x 4 B = 1152
    assert bench.decode_bytes([16, 20], 4, 2, 8, 16, 2, 2, 2, num_splits=2) == 2304 + 256 + 12 + 1152


def test_ideal_shared_speedup_by_hand():
    assert bench.ideal_shared_speedup(4, 100, 10) == pytest.approx(440 / 140)
    assert bench.ideal_shared_speedup(1, 100, 10) == pytest.approx(1.0)


def test_long_context_fraction_picks_the_longest_context_then_the_largest_batch():
    rows = [{"batch": 8, "context": 4096, "of_copy_bandwidth": 0.5},
            {"batch": 1, "context": 32768, "of_copy_bandwidth": 0.3},
            {"batch": 32, "context": 32768, "of_copy_bandwidth": 0.8}]
    assert bench.long_context_fraction(rows) == {"batch": 32, "context": 32768, "of_copy_bandwidth": 0.8}
    assert bench.long_context_fraction([]) is None
