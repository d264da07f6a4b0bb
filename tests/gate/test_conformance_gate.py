"""The whole gate, once, as a user runs it: every registered default check passes and both reports are
complete (DESIGN.md: the test suite runs the gate once)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from kvexact.gate import checks
from kvexact.gate import framework as gate

EXPECTED = {"packaging-selftest", "spec-KVAllocation", "spec-CowPublication", "spec-NamespaceRevocation",
            "spec-RadixIndex", "spec-VirtualMapping",
            "spec-KVAllocation-liveness", "spec-CowPublication-liveness", "spec-NamespaceRevocation-liveness",
            "spec-mutants", "spec-witnesses", "kernels-differential", "z3-obligations", "negative-registry",
            "machines", "adapter-simple-runtime", "adapter-faulty-caught", "adapter-sglang-index",
            "adapter-faulty-index-caught"}


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_gate_passes_with_complete_reports(tmp_path):
    r = subprocess.run([sys.executable, "-m", "kvexact.cli", "gate", "--json", str(tmp_path / "g.json"),
                        "--junit", str(tmp_path / "g.xml")], capture_output=True, text=True, timeout=1400,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    doc = json.loads((tmp_path / "g.json").read_text())
    names = {c["name"] for c in doc["checks"]}
    assert EXPECTED <= names, EXPECTED - names
    assert names == {c.name for c in gate.select_checks(checks.load_checks())}
    assert all(c["verdict"] == "passed" for c in doc["checks"])
    machines = next(c for c in doc["checks"] if c["name"] == "machines")
    assert machines["figures"]["KVAllocation.examples"] > 0 and machines["figures"]["CowPublication.steps"] > 0
    assert machines["figures"]["Vmm.attention_checks"] > 0 and machines["figures"]["Radix.attention_checks"] > 0
    sglang = next(c for c in doc["checks"] if c["name"] == "adapter-sglang-index")
    assert sglang["figures"]["Radix.steps"] > 0 and sglang["figures"]["Radix.attention_checks"] > 0
    assert doc["versions"]["dependencies"]["z3-solver"] and doc["profile"] == "ci"
    suite = ET.parse(tmp_path / "g.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("tests", 0)) == len(names) and suite.get("failures") == "0"
    assert "kvexact gate" in r.stdout and "-> exit 0" in r.stdout
