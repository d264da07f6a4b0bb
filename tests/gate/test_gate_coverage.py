"""`kvexact gate --coverage`: per machine, the rules fired and the reference functions and branches the run
executed (coverage.py); a machine whose rules do not all fire fails. CI runs the rule-coverage check of
every machine here, at small settings without the kernels."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import settings

from kvexact.conformance.runner import machine_settings
from kvexact.gate.coverage import measure_machine, summary_lines

SIMPLE = "kvexact.conformance.simple_runtime:simple_runtime"


def _small(examples: int, steps: int = 30) -> settings:
    return settings(machine_settings("ci", shrink=False), max_examples=examples, stateful_step_count=steps)


@pytest.mark.slow
@pytest.mark.parametrize("machine", ["KVAllocation", "CowPublication", "Radix", "Vmm", "Revocation", "SharedTail",
                                     "PromptCache", "ChunkAttention", "Radix@page2", "Radix@page4", "Hybrid"])
def test_every_rule_of_every_machine_fires(machine):
    result = measure_machine(machine, None, _small(15), check_kernels=False)
    assert result.passed, result.error
    assert result.not_fired == (), f"{machine}: rules never fired: {result.not_fired}"
    assert result.ok and len(result.fired) == len(result.rules) > 0


def test_the_report_is_per_run_reference_coverage():
    result = measure_machine("Revocation", None, _small(5, 10), check_kernels=False)
    modules = {m.module: m for m in result.modules}
    revocation = modules["revocation"]
    assert revocation.functions_executed > 0 and revocation.branches_taken > 0
    assert revocation.functions_executed <= revocation.functions and revocation.branches_taken <= revocation.branches
    assert modules["vmm"].functions_executed == 0  # the revocation machine never runs the virtual mapping
    assert "vmm" not in " ".join(summary_lines(result, modules=True))  # only executed modules are listed
    fe, f, bt, b = result.totals()
    assert 0 < fe < f and 0 < bt < b


def test_gate_coverage_command(kvexact_cli, tmp_path):
    out = tmp_path / "coverage.json"
    code, text = kvexact_cli(["gate", "--coverage", "--machine", "Revocation", "--examples", "5", "--steps", "10",
                              "--json", str(out)]).code_and_text
    assert code == 0, text
    fired = re.search(r"rules=(\d+)/(\d+)", text)
    assert fired and fired.group(1) == fired.group(2) and "1/1 machines fired every rule" in text, text
    report = json.loads(out.read_text())
    assert report["machines"][0]["machine"] == "Revocation" and report["machines"][0]["ok"] is True


def test_gate_coverage_fails_a_machine_whose_rules_do_not_fire(kvexact_cli):
    """The simple runtime has no cache(): the KVAllocation machine's cache rule never fires with it."""
    code, text = kvexact_cli(["gate", "--coverage", "--adapter", SIMPLE, "--machine", "KVAllocation",
                              "--examples", "4", "--steps", "20", "--no-kernels"]).code_and_text
    assert code == 1, text
    assert "RULES NOT FIRED" in text and "rules not fired:" in text and "cache" in text
    assert "adapter lacks: append_with_failure, cache" in text
    code, text = kvexact_cli(["gate", "--coverage", "--adapter", SIMPLE, "--machine", "Radix"]).code_and_text
    assert code == 2 and "does not fit" in text
