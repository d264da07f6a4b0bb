"""The gate's framework: named checks, their selection, running and verdicts.

The checks themselves are listed in :mod:`kvexact.gate.checks`. Invariant of :func:`exit_code`: 0 only
when every selected check passed; 1 when any check failed (a failure outranks "could not run"); 3 when
none failed but one could not run.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import attrs


class Verdict(enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    COULD_NOT_RUN = "could not run"


class CheckCouldNotRun(Exception):
    """Raised by a check whose preconditions are missing (a GPU, a jar, a dependency)."""


@attrs.frozen
class CheckResult:
    verdict: Verdict
    figures: dict[str, Any] = attrs.field(factory=dict)
    detail: str = ""
    seeds: dict[str, Any] = attrs.field(factory=dict)


@attrs.define
class GateContext:
    """What a check may read: the Hypothesis profile, the base seed, an adapter spec (and its per-call
    limit in seconds, None: KVEXACT_CALL_TIMEOUT or the default), a TLC jar."""

    profile: str = "ci"
    seed: int = 0
    adapter: str | None = None
    call_timeout: float | None = None
    tlc_jar: str | None = None
    workdir: Path = attrs.field(factory=Path.cwd)
    status: Callable[[str], None] = lambda _text: None


@attrs.frozen
class GateCheck:
    name: str
    layer: str
    description: str
    run: Callable[[GateContext], CheckResult]
    default: bool = True  # False: runs only when named by --select


@attrs.frozen
class CheckOutcome:
    check: GateCheck
    result: CheckResult
    seconds: float


class UnknownCheck(ValueError):
    pass


def select_checks(
    checks: list[GateCheck], select: Iterable[str] = (), skip: Iterable[str] = ()
) -> list[GateCheck]:
    """Checks to run: the named ones (in registry order) or all default ones, minus the skipped."""
    select, skip = list(select), list(skip)
    known = {c.name for c in checks}
    unknown = [n for n in [*select, *skip] if n not in known]
    if unknown:
        raise UnknownCheck(f"unknown check name(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    chosen = [c for c in checks if (c.name in select if select else c.default)]
    return [c for c in chosen if c.name not in skip]


def run_check(check: GateCheck, ctx: GateContext) -> CheckOutcome:
    """Run one check; an exception is a failure (or 'could not run' for CheckCouldNotRun), never lost."""
    start = time.perf_counter()
    try:
        result = check.run(ctx)
    except CheckCouldNotRun as exc:
        result = CheckResult(Verdict.COULD_NOT_RUN, detail=str(exc))
    except Exception as exc:  # a crash inside a check is a failed check
        result = CheckResult(Verdict.FAILED, detail=f"{type(exc).__name__}: {exc}")
    return CheckOutcome(check, result, time.perf_counter() - start)


def exit_code(outcomes: Iterable[CheckOutcome]) -> int:
    verdicts = {o.result.verdict for o in outcomes}
    if Verdict.FAILED in verdicts:
        return 1
    if Verdict.COULD_NOT_RUN in verdicts:
        return 3
    return 0
