"""The Hybrid machine through the real vLLM 0.33.0 ``KVCacheManager`` (``conformance/live/vllm_hybrid.py``'s
hybrid-cache adapter: two full-attention groups of drawn block sizes in one pool, hashed at a drawn divisor
of their gcd), in lockstep with the normative hybrid prefix cache, run in the runtime environment."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIVE = "kvexact.conformance.live.vllm_hybrid:hybrid_factory"

# The live adapter with one planted bug (an eviction that drops nothing): the machine must name the step.
PLANTED = """
from hypothesis import settings
from kvexact.conformance.live import vllm_hybrid
from kvexact.conformance.runner import machine_settings, run_machine

class KeepsEvicted(vllm_hybrid.LiveHybridCache):
    name = "vllm-keeps-evicted"
    def evict(self, group, prefix):
        return True

def planted(config):
    return KeepsEvicted(config)

planted.adapter_protocol = "hybrid-cache"
vllm_hybrid.planted = planted
run = run_machine("Hybrid", "kvexact.conformance.live.vllm_hybrid:planted",
                  settings(machine_settings("ci", shrink=False), max_examples=200, stateful_step_count=30), seed=38)
print("PASSED" if run.passed else "FAILED " + run.error.splitlines()[0])
"""


def _cli(python: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "kvexact.cli", *args], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.slow
def test_conform_with_the_live_vllm_hybrid_adapter_runs_the_hybrid_machine_and_passes(runtime_python):
    """Without --spec the adapter's protocol picks the machine: Hybrid alone."""
    r = _cli(runtime_python, "conform", "--adapter", LIVE, "--examples", "25", "--steps", "25")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = [line for line in r.stdout.splitlines() if line.startswith(("Hybrid ", "KVAllocation", "Radix"))]
    assert len(lines) == 1 and lines[0].split()[:3] == ["Hybrid", LIVE, "passed"], r.stdout


@pytest.mark.slow
def test_the_live_adapter_refuses_the_other_machines_by_name(runtime_python):
    r = _cli(runtime_python, "conform", "--adapter", LIVE, "--spec", "KVAllocation", "--examples", "1")
    assert r.returncode == 2 and "hybrid-cache adapter; the KVAllocation machine takes none" in r.stderr, r.stderr


@pytest.mark.slow
def test_a_planted_eviction_bug_in_the_live_adapter_is_caught(runtime_python):
    r = subprocess.run([runtime_python, "-c", PLANTED], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("FAILED ConformanceFailure: vllm-keeps-evicted: "), r.stdout
    assert "the reference" in last and ("lookup(" in last or "admit(" in last), last


@pytest.mark.slow
def test_the_gate_runs_the_hybrid_machine_through_the_live_adapter(runtime_python, tmp_path):
    """``kvexact gate --adapter``: the machines check runs Hybrid through the live manager (the reference in
    the machines the adapter does not fit), and passes."""
    report = tmp_path / "gate.json"
    r = subprocess.run([runtime_python, "-m", "kvexact.cli", "gate", "--select", "machines", "--adapter", LIVE,
                        "--json", str(report)], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (check,) = [c for c in json.loads(report.read_text())["checks"] if c["name"] == "machines"]
    assert check["verdict"] == "passed" and check["figures"]["Hybrid.examples"] > 0, check
    assert check["figures"]["Hybrid.rules_fired"] >= 5, check


SHORT_POOL = """
import json
from kvexact.conformance.live.vllm_hybrid import hybrid_factory
from kvexact.reference.hybrid_adapter import HybridCacheConfig
c = hybrid_factory(HybridCacheConfig((1, 2), 1, 3))
out = [c.admit("a", [0, 1, 0, 1, 0, 1, 0]), c.admit("b", [0, 1, 0]), c.append("b", 1), c.append("b", 0),
       c.lookup([0, 1, 0, 1, 1])]
c.self_check()
c.free("b")
c.self_check()
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_live_manager_refuses_on_a_short_shared_pool_as_the_profile_does(runtime_python):
    from kvexact.reference.hybrid_adapter import HybridCacheConfig
    from kvexact.reference.peers.vllm_hybrid_cache import vllm_hybrid_factory

    r = subprocess.run([runtime_python, "-c", SHORT_POOL], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    c = vllm_hybrid_factory(HybridCacheConfig((1, 2), 1, 3))
    want = [c.admit("a", [0, 1, 0, 1, 0, 1, 0]), c.admit("b", [0, 1, 0]), c.append("b", 1), c.append("b", 0),
            c.lookup([0, 1, 0, 1, 1])]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == want == [None, 0, True, False, 4]
