"""Gate reports: a versioned JSON document and a JUnit XML file for CI systems.

Invariant: both reports list every check that ran, with the same verdicts and seconds as the summary.
"""

from __future__ import annotations

import json
import platform
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import kvexact
from kvexact.gate.framework import CheckOutcome, GateContext, Verdict, exit_code

SCHEMA_VERSION = 1
DEPENDENCIES = (
    "attrs", "hypothesis", "z3-solver", "tla", "jpype1", "numpy", "pytest", "click", "rich",
    "torch", "triton",
)


class ReportPathError(ValueError):
    pass


def dependency_versions(names: Sequence[str] = DEPENDENCIES) -> dict[str, str | None]:
    """Installed version of each dependency (None where absent)."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def ensure_writable(path: Path) -> None:
    """Fail early, before any check runs, when a report cannot be written at ``path``."""
    try:
        if path.is_dir():
            raise ReportPathError(f"report path {path} is a directory")
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise ReportPathError(f"cannot write report {path}: {exc.strerror or exc}") from None


def build_json(outcomes: Sequence[CheckOutcome], ctx: GateContext) -> dict[str, Any]:
    seeds: dict[str, Any] = {"base": ctx.seed}
    for o in outcomes:
        if o.result.seeds:
            seeds[o.check.name] = o.result.seeds
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "kvexact gate",
        "created": datetime.now(timezone.utc).isoformat(),
        "exit_code": exit_code(outcomes),
        "profile": ctx.profile,
        "adapter": ctx.adapter,
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
                "seconds": round(o.seconds, 3),
                "figures": o.result.figures,
                "detail": o.result.detail,
            }
            for o in outcomes
        ],
    }


def write_json(document: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")


def write_junit(outcomes: Sequence[CheckOutcome], path: Path) -> None:
    """One testsuite 'kvexact-gate', one testcase per check (failure / skipped for could-not-run)."""
    suite = ET.Element(
        "testsuite",
        name="kvexact-gate",
        tests=str(len(outcomes)),
        failures=str(sum(o.result.verdict is Verdict.FAILED for o in outcomes)),
        skipped=str(sum(o.result.verdict is Verdict.COULD_NOT_RUN for o in outcomes)),
        errors="0",
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
        if o.result.figures:
            ET.SubElement(case, "system-out").text = json.dumps(o.result.figures, sort_keys=True, default=str)
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
