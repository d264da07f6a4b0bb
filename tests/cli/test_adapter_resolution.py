"""``--adapter`` is resolved once: the front imports ``module:factory`` into an ``Adapter`` object and every
layer below (machine choice, machine building, running, the gate's checks, coverage) takes that object.

Each test counts the imports of the adapter's module (calls of ``load_factory``) over a whole command.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kvexact.cli import cli
from kvexact.conformance import adapter_border, runner
from kvexact.conformance.adapter_border import Adapter, resolve

SIMPLE = "kvexact.conformance.simple_runtime:simple_runtime"
INDEX = "kvexact.reference.index:radix_factory"


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ``module:factory`` text that was imported during the test."""
    seen: list[str] = []
    real = adapter_border.load_factory

    def counting(spec: str):
        seen.append(spec)
        return real(spec)

    monkeypatch.setattr(adapter_border, "load_factory", counting)
    return seen


def _invoke(args: list[str]) -> int:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    return result.exit_code


def test_conform_resolves_the_adapter_once_for_every_machine(loads: list[str], tmp_path) -> None:
    code = _invoke(["conform", "--adapter", SIMPLE, "--examples", "1", "--steps", "3", "--no-kernels",
                    "--out", str(tmp_path)])
    assert code == 0
    assert loads == [SIMPLE]  # two machines (KVAllocation, CowPublication), one import


def test_conform_with_named_machines_resolves_once(loads: list[str], tmp_path) -> None:
    code = _invoke(["conform", "--adapter", INDEX, "--spec", "Radix", "--examples", "1", "--steps", "3",
                    "--no-kernels", "--out", str(tmp_path)])
    assert code == 0
    assert loads == [INDEX]


def test_gate_coverage_resolves_the_adapter_once(loads: list[str]) -> None:
    code = _invoke(["gate", "--coverage", "--adapter", SIMPLE, "--examples", "1", "--steps", "3", "--no-kernels"])
    assert code in (0, 1)  # 1 when a rule did not fire in so short a run; the count is what is asserted
    assert loads == [SIMPLE]


def test_a_resolved_adapter_passes_through_unchanged(loads: list[str]) -> None:
    adapter = resolve(SIMPLE)
    assert isinstance(adapter, Adapter) and str(adapter) == SIMPLE and adapter.protocol == "allocator"
    assert resolve(adapter) is adapter and resolve(None) is None
    assert runner.machines_for(adapter) == ("KVAllocation", "CowPublication")
    runner.build_machine("KVAllocation", adapter, check_kernels=False)
    assert loads == [SIMPLE]


def test_a_wrong_machine_is_still_refused_by_name() -> None:
    from kvexact.reference.adapters import AdapterError, AdapterProblem

    with pytest.raises(AdapterError) as caught:
        runner.build_machine("Radix", resolve(SIMPLE))
    assert caught.value.problem is AdapterProblem.WRONG_MACHINE and SIMPLE in str(caught.value)
