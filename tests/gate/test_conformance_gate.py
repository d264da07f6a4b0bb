"""The whole gate, once, as a user runs it (the default, quick level): every check of that level passes
and both reports are complete (docs/design.md: the test suite runs the gate once). The full and deep levels add
checks that have tests of their own; which level runs which check is asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from kvexact.gate import checks, spec_checks
from kvexact.gate import framework as gate

QUICK = {"packaging-selftest", "spec-KVAllocation", "spec-CowPublication", "spec-NamespaceRevocation",
         "spec-RadixIndex", "spec-VirtualMapping", "spec-HybridAllocation", "spec-mutants", "kernels-differential",
         "kernels-int64-addressing", "formulas-golden", "reference-seed",
         "z3-obligations",
         "negative-registry", "machines", "adapter-faulty-caught", "adapter-sglang-index",
         "adapter-faulty-index-caught"}
FULL = QUICK | {"spec-witnesses", "adapter-simple-runtime", "adapter-reference", "adapter-vllm-profile", "adapter-vllm-delayed-caching",
               "adapter-vllm-hybrid-profile",
               "adapter-faulty-hybrid-caught", "spec-KVAllocation-liveness",
               "spec-CowPublication-liveness", "spec-NamespaceRevocation-liveness"}
DEEP = FULL | {"checker-corpus", "checker-properties"}


def test_each_level_runs_the_checks_the_readme_lists():
    registry = checks.load_checks()
    for level, expected in (("quick", QUICK), ("full", FULL), ("deep", DEEP)):
        assert {c.name for c in gate.select_checks(registry, level=level)} == expected, level



def test_z3_check_reports_rlimit_use_and_fails_on_the_exhausted_rlimit(monkeypatch):
    """The gate's z3 check carries each obligation's rlimit use; an obligation that spends the whole limit
    fails it as 'unknown: rlimit exhausted' (here: a limit of 100 instead of PROOF_RLIMIT)."""
    import functools

    from kvexact.conformance import obligations, proofs
    from kvexact.gate.conformance_checks import z3_obligations

    few = [o for o in proofs.all_obligations() if o.name in {"int64-headroom", "slot-mapping-roundtrip"}]
    monkeypatch.setattr(proofs, "all_obligations", lambda: few)
    ok = z3_obligations(gate.GateContext())
    assert ok.verdict is gate.Verdict.PASSED, ok.detail
    assert ok.figures["rlimit"] == obligations.PROOF_RLIMIT and set(ok.figures["rlimit_used"]) == {o.name for o in few}
    assert 0 < ok.figures["rlimit_used_max"] == max(ok.figures["rlimit_used"].values())
    monkeypatch.setattr(obligations, "discharge", functools.partial(obligations.discharge, rlimit=100))
    bad = z3_obligations(gate.GateContext())
    assert bad.verdict is gate.Verdict.FAILED and "int64-headroom: unknown: rlimit exhausted" in bad.detail

@pytest.mark.slow
@pytest.mark.timeout(1500)  # a guard against a hang only: the work is bounded by examples and states
def test_gate_passes_with_complete_reports(tmp_path):
    r = subprocess.run([sys.executable, "-m", "kvexact.cli", "gate", "--json", str(tmp_path / "g.json"),
                        "--junit", str(tmp_path / "g.xml")], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    doc = json.loads((tmp_path / "g.json").read_text())
    names = {c["name"] for c in doc["checks"]}
    assert names == QUICK and doc["level"] == "quick" and doc["exit_code"] == 0
    assert all(c["verdict"] == "passed" for c in doc["checks"])
    kv = next(c for c in doc["checks"] if c["name"] == "spec-KVAllocation")
    assert kv["states"] == kv["figures"]["distinct_states"] > 0
    # quick searches the first states of a large model and says so (tests/gate/test_spec_gate.py has the
    # small model; these two checks are asserted here, where the gate runs them anyway)
    assert kv["figures"]["complete"] is False and "first" in kv["detail"] and "--level full" in kv["detail"]
    assert spec_checks.QUICK_STATES <= kv["states"] < 2 * spec_checks.QUICK_STATES
    # quick samples one mutant per spec, every one killed within the bound
    mutants = next(c for c in doc["checks"] if c["name"] == "spec-mutants")["figures"]
    assert mutants["models"] == len(spec_checks.SPECS) and mutants["kill_rate"] == 1.0
    assert 0 < mutants["most_states"] <= mutants["state_limit"]
    assert next(c for c in doc["checks"] if c["name"] == "machines")["examples"] > 0
    machines = next(c for c in doc["checks"] if c["name"] == "machines")
    assert machines["figures"]["KVAllocation.examples"] > 0 and machines["figures"]["CowPublication.steps"] > 0
    assert machines["figures"]["Vmm.attention_checks"] > 0 and machines["figures"]["Radix.attention_checks"] > 0
    sglang = next(c for c in doc["checks"] if c["name"] == "adapter-sglang-index")
    assert sglang["figures"]["Radix.steps"] > 0 and sglang["figures"]["Radix.attention_checks"] > 0
    assert doc["versions"]["dependencies"]["z3-solver"] and doc["profile"] == "ci"
    suite = ET.parse(tmp_path / "g.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("tests", 0)) == len(names) and suite.get("failures") == "0"
    assert "kvexact gate" in r.stdout and "-> exit 0" in r.stdout
