"""Gate reports: a versioned JSON document and a JUnit XML file for CI systems.

Invariant: both reports list every check that ran, with the same verdicts, states, examples and seconds
as the summary, and the process's own exit code; an interrupted run says so and names the checks not run.
The command writes them atomically (:mod:`kvexact.spec.files`).
"""

from __future__ import annotations

import json
import platform
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

import kvexact
from kvexact.gate.framework import CheckOutcome, GateContext, Verdict

SCHEMA_VERSION = 1
DEPENDENCIES = (
    "attrs", "hypothesis", "z3-solver", "tla", "jpype1", "numpy", "pytest", "click", "rich",
    "torch", "triton",
)


def dependency_versions(names: Sequence[str] = DEPENDENCIES) -> dict[str, str | None]:
    """Installed version of each dependency (None where absent)."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def build_json(outcomes: Sequence[CheckOutcome], ctx: GateContext, code: int,
               not_run: Sequence[str] = ()) -> dict[str, Any]:
    seeds: dict[str, Any] = {"base": ctx.seed}
    for o in outcomes:
        if o.result.seeds:
            seeds[o.check.name] = o.result.seeds
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "kvexact gate",
        "created": datetime.now(timezone.utc).isoformat(),
        "exit_code": code,
        "interrupted": ctx.interrupted,
        "not_run": list(not_run),
        "level": ctx.level,
        "profile": ctx.profile,
        "jobs": ctx.jobs,
        "adapter": str(ctx.adapter) if ctx.adapter else None,
        "seeds": seeds,
        "versions": {
            "python": platform.python_version(),
            "kvexact": kvexact.__version__,
            "dependencies": dependency_versions(),
        },
        "platform": platform.platform(),
        "argv": sys.argv,
        "checks": [
            {
                "name": o.check.name,
                "layer": o.check.layer,
                "description": o.check.description,
                "verdict": o.result.verdict.value,
                "level": o.check.level,
                "states": o.result.states,
                "examples": o.result.examples,
                "seconds": round(o.seconds, 3),
                "figures": o.result.figures,
                "detail": o.result.detail,
            }
            for o in outcomes
        ],
    }


def json_text(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True, default=str) + "\n"


def junit_bytes(outcomes: Sequence[CheckOutcome], not_run: Sequence[str] = ()) -> bytes:
    """One testsuite 'kvexact-gate', one testcase per check (failure / skipped for could-not-run, error
    for an interrupted one); the checks an interrupt left unrun are skipped cases."""
    suite = ET.Element(
        "testsuite",
        name="kvexact-gate",
        tests=str(len(outcomes) + len(not_run)),
        failures=str(sum(o.result.verdict is Verdict.FAILED for o in outcomes)),
        skipped=str(sum(o.result.verdict is Verdict.COULD_NOT_RUN for o in outcomes) + len(not_run)),
        errors=str(sum(o.result.verdict is Verdict.INTERRUPTED for o in outcomes)),
        time=f"{sum(o.seconds for o in outcomes):.3f}",
    )
    for o in outcomes:
        case = ET.SubElement(
            suite, "testcase", classname=f"kvexact.{o.check.layer}", name=o.check.name, time=f"{o.seconds:.3f}"
        )
        if o.result.verdict is Verdict.FAILED:
            ET.SubElement(case, "failure", message=o.result.detail[:200] or "failed").text = o.result.detail
        elif o.result.verdict is Verdict.COULD_NOT_RUN:
            ET.SubElement(case, "skipped", message=o.result.detail[:200] or "could not run")
        elif o.result.verdict is Verdict.INTERRUPTED:
            ET.SubElement(case, "error", message="interrupted (Ctrl-C)").text = o.result.detail
        if o.result.figures:
            ET.SubElement(case, "system-out").text = json.dumps(o.result.figures, sort_keys=True, default=str)
    for name in not_run:
        case = ET.SubElement(suite, "testcase", classname="kvexact.gate", name=name, time="0")
        ET.SubElement(case, "skipped", message="not run: the gate was interrupted (Ctrl-C)")
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)
