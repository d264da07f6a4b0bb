"""Rule and branch coverage of the machines (``kvexact gate --coverage``), measured by coverage.py.

For each machine, one run under a fresh :class:`coverage.Coverage` (branch mode, limited to the
``reference`` package): which of its rules fired, which optional adapter methods were missing, and which
reference functions and branches the run executed, per module.

Invariant: a machine's coverage is ``ok`` only when its run passed and every rule it has fired at least
once; a rule whose call found an adapter method missing does not count (see
:func:`kvexact.conformance.machines.lacks`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import attrs


@attrs.frozen
class ModuleCoverage:
    """What one run executed of one reference module (functions are coverage.py's function regions)."""

    module: str
    functions: int
    functions_executed: int
    branches: int
    branches_taken: int
    unexecuted_functions: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class MachineCoverage:
    machine: str
    adapter: str
    passed: bool
    error: str
    rules: tuple[str, ...]
    fired: tuple[str, ...]
    missing_methods: tuple[str, ...]
    modules: tuple[ModuleCoverage, ...]

    @property
    def not_fired(self) -> tuple[str, ...]:
        return tuple(r for r in self.rules if r not in self.fired)

    @property
    def ok(self) -> bool:
        return self.passed and not self.not_fired

    def totals(self) -> tuple[int, int, int, int]:
        """(functions executed, functions, branches taken, branches) over the reference modules."""
        return (sum(m.functions_executed for m in self.modules), sum(m.functions for m in self.modules),
                sum(m.branches_taken for m in self.modules), sum(m.branches for m in self.modules))

    def as_dict(self) -> dict[str, Any]:
        fe, f, bt, b = self.totals()
        return {"machine": self.machine, "adapter": self.adapter, "passed": self.passed, "ok": self.ok,
                "error": self.error, "rules": list(self.rules), "fired": list(self.fired),
                "not_fired": list(self.not_fired), "missing_methods": list(self.missing_methods),
                "functions_executed": fe, "functions": f, "branches_taken": bt, "branches": b,
                "modules": [m.as_dict() for m in self.modules]}


def reference_dir() -> Path:
    import kvexact.reference

    return Path(kvexact.reference.__file__).resolve().parent


def _modules(report: dict[str, Any], root: Path) -> tuple[ModuleCoverage, ...]:
    """Per-module figures from coverage.py's JSON report (module-level code is not a function)."""
    out = []
    for path, data in sorted(report["files"].items()):
        rel = Path(path).resolve().relative_to(root)
        functions = {name: f for name, f in data.get("functions", {}).items() if name}
        executed = [n for n, f in functions.items() if f["summary"]["covered_lines"] > 0]
        out.append(ModuleCoverage(
            module=rel.with_suffix("").as_posix().replace("/", "."), functions=len(functions),
            functions_executed=len(executed), branches=data["summary"]["num_branches"],
            branches_taken=data["summary"]["covered_branches"],
            unexecuted_functions=tuple(sorted(set(functions) - set(executed)))))
    return tuple(out)


def measure_machine(machine: str, adapter: Any, machine_settings: Any, seed: int | None = None,
                    check_kernels: bool = True) -> MachineCoverage:
    """Run one machine under coverage.py (branch mode, ``reference/`` only) and collect its figures."""
    import coverage

    from kvexact.conformance.runner import run_machine

    root = reference_dir()
    cov = coverage.Coverage(branch=True, data_file=None, source=[str(root)], omit=[str(root / "labs" / "*")])
    cov.start()
    try:
        run = run_machine(machine, adapter, machine_settings, seed, check_kernels)
    finally:
        cov.stop()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "coverage.json"
        cov.json_report(outfile=str(out))
        report = json.loads(out.read_text(encoding="utf-8"))
    return MachineCoverage(machine, run.adapter, run.passed, run.error, tuple(run.rules),
                           tuple(run.rules_fired()), tuple(run.missing_methods()), _modules(report, root))


def summary_lines(result: MachineCoverage, modules: bool = False) -> list[str]:
    """The report of one machine: verdict, rules, reference functions and branches (and per module)."""
    fe, f, bt, b = result.totals()
    verdict = "ok" if result.ok else ("FAILED" if not result.passed else "RULES NOT FIRED")
    lines = [f"{result.machine:13} {result.adapter:24} {verdict:15} rules={len(result.fired)}/{len(result.rules)} "
             f"reference functions={fe}/{f} branches={bt}/{b}"]
    if result.not_fired:
        lines.append(f"  rules not fired: {', '.join(result.not_fired)}")
    if result.missing_methods:
        lines.append(f"  adapter lacks: {', '.join(result.missing_methods)}")
    if not result.passed:
        lines.append(f"  {result.error.splitlines()[0][:300] if result.error else 'failed'}")
    if modules:
        for m in result.modules:
            if m.functions_executed or m.branches_taken:
                lines.append(f"  {m.module:32} functions={m.functions_executed}/{m.functions} "
                             f"branches={m.branches_taken}/{m.branches}")
    return lines
