"""The packaging self-test: the installed distribution imports, its version matches, its data is found.

Invariant: passes only when every import name of the distribution imports, the metadata version
equals ``kvexact.__version__``, and every model the spec layer declares (``SHIPPED_MODELS``) is found
through ``importlib.resources`` (so from an installed copy, not from the current directory).
"""

from __future__ import annotations

import importlib
from importlib import metadata
from pathlib import Path

from kvexact.gate.framework import CheckResult, GateCheck, GateContext, Verdict

IMPORT_NAMES = ("kvexact", "kvexact.spec", "kvexact.reference", "kvexact.conformance")


def packaging_selftest(ctx: GateContext) -> CheckResult:
    problems: list[str] = []
    for name in IMPORT_NAMES:
        try:
            importlib.import_module(name)
        except Exception as exc:
            problems.append(f"import {name}: {type(exc).__name__}: {exc}")
    import kvexact
    import kvexact.spec as spec

    try:
        dist_version = metadata.version("kvexact")
    except metadata.PackageNotFoundError:
        dist_version = None
        problems.append("distribution 'kvexact' is not installed")
    if dist_version is not None and dist_version != kvexact.__version__:
        problems.append(f"metadata version {dist_version} != kvexact.__version__ {kvexact.__version__}")
    data_dir = spec.spec_dir()
    declared = list(getattr(spec, "SHIPPED_MODELS", ()))
    missing = [m for m in declared if not (data_dir / m).is_file()]
    if missing:
        problems.append(f"shipped spec files not found under {data_dir}: {', '.join(missing)}")
    orphan_cfgs = [p.name for p in data_dir.glob("*.cfg") if not p.with_name(p.name.split(".")[0] + ".tla").is_file()]
    if orphan_cfgs:
        problems.append(f"configs without their module: {', '.join(orphan_cfgs)}")
    figures = {
        "version": kvexact.__version__,
        "package_dir": str(Path(kvexact.__file__).parent),
        "spec_dir": str(data_dir),
        "shipped_models": len(declared),
    }
    if problems:
        return CheckResult(Verdict.FAILED, figures, "; ".join(problems))
    return CheckResult(Verdict.PASSED, figures, "imports, version and shipped data found")


CHECKS = [
    GateCheck(
        name="packaging-selftest",
        layer="conformance",
        description="the installed distribution imports, its version matches, shipped specs are found",
        run=packaging_selftest,
    )
]
