"""The gate's framework: named checks, their selection, running and verdicts.

The checks themselves are listed in :mod:`kvexact.gate.checks`. Invariant of :func:`exit_code`: 0 only
when every selected check passed; 1 when any check failed (a failure outranks "could not run"); 3 when
none failed but one could not run; 130 when the run was interrupted (Ctrl-C), whatever the others said.
Each check has the lowest level (``quick`` < ``full`` < ``deep``) at which it runs unselected; a check
may also do more work at a deeper level (``GateContext.level``).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from kvexact.spec.interrupts import sigint_seen


class Verdict(enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    COULD_NOT_RUN = "could not run"
    INTERRUPTED = "interrupted"


LEVELS = ("quick", "full", "deep")
INTERRUPTED_EXIT = 130


class CheckCouldNotRun(Exception):
    """Raised by a check whose preconditions are missing (a GPU, a jar, a dependency)."""


@attrs.frozen
class CheckResult:
    verdict: Verdict
    figures: dict[str, Any] = attrs.field(factory=dict)
    detail: str = ""
    seeds: dict[str, Any] = attrs.field(factory=dict)
    states: int = 0  # distinct states the check explored (model checking), summed over its models
    examples: int = 0  # examples the check ran (state machines), summed over its machines


@attrs.define
class GateContext:
    """What a check may read: the level, the Hypothesis profile, the base seed, an adapter spec (and its
    per-call limit in seconds, None: KVEXACT_CALL_TIMEOUT or the default), a TLC jar."""

    level: str = "quick"
    profile: str = "ci"
    seed: int = 0
    adapter: Any = None  # the resolved --adapter (kvexact.conformance.adapter_border.Adapter), None: reference
    call_timeout: float | None = None
    tlc_jar: str | None = None
    workdir: Path = attrs.field(factory=Path.cwd)
    status: Callable[[str], None] = lambda _text: None
    interrupted: bool = False  # set by Ctrl-C (see interrupts_caught); the running check is then INTERRUPTED
    jobs: int = 1  # checks run at once, each in a worker process (kvexact.gate.parallel) when more than one


@attrs.frozen
class GateCheck:
    name: str
    layer: str
    description: str
    run: Callable[[GateContext], CheckResult]
    level: str = attrs.field(default="quick", validator=attrs.validators.in_(LEVELS))  # lowest level it runs at


@attrs.frozen
class CheckOutcome:
    check: GateCheck
    result: CheckResult
    seconds: float


class UnknownCheck(ValueError):
    pass


def select_checks(
    checks: list[GateCheck], select: Iterable[str] = (), skip: Iterable[str] = (), level: str = "quick"
) -> list[GateCheck]:
    """Checks to run: the named ones (in registry order, any level) or every check of ``level`` and the
    levels below it, minus the skipped."""
    select, skip = list(select), list(skip)
    known = {c.name for c in checks}
    unknown = [n for n in [*select, *skip] if n not in known]
    if unknown:
        raise UnknownCheck(f"unknown check name(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    depth = LEVELS.index(level)
    chosen = [c for c in checks if (c.name in select if select else LEVELS.index(c.level) <= depth)]
    return [c for c in chosen if c.name not in skip]


@contextmanager
def interrupts_caught(ctx: GateContext) -> Iterator[None]:
    """While inside: Ctrl-C sets ``ctx.interrupted`` and raises KeyboardInterrupt in the running check; a
    check that swallows it (an engine reporting a partial search) is still marked INTERRUPTED by
    :func:`run_check`. The KeyboardInterrupt does not leave the block; the caller reads the flag."""

    def on_signal() -> None:
        ctx.interrupted = True

    try:
        with sigint_seen(on_signal):
            yield
    except KeyboardInterrupt:
        ctx.interrupted = True


def run_check(check: GateCheck, ctx: GateContext) -> CheckOutcome:
    """Run one check; an exception is a failure (or 'could not run' for CheckCouldNotRun), never lost;
    Ctrl-C during it makes it INTERRUPTED, whatever it returned."""
    start = time.perf_counter()
    try:
        result = check.run(ctx)
    except CheckCouldNotRun as exc:
        result = CheckResult(Verdict.COULD_NOT_RUN, detail=str(exc))
    except KeyboardInterrupt:
        ctx.interrupted = True
        result = CheckResult(Verdict.INTERRUPTED)
    except Exception as exc:  # a crash inside a check is a failed check
        result = CheckResult(Verdict.FAILED, detail=f"{type(exc).__name__}: {exc}")
    if ctx.interrupted and result.verdict is not Verdict.INTERRUPTED:
        result = attrs.evolve(result, verdict=Verdict.INTERRUPTED, detail="interrupted (Ctrl-C); it had returned "
                              f"{result.verdict.value}: {result.detail}")
    return CheckOutcome(check, result, time.perf_counter() - start)


def exit_code(outcomes: Iterable[CheckOutcome]) -> int:
    verdicts = {o.result.verdict for o in outcomes}
    if Verdict.INTERRUPTED in verdicts:
        return INTERRUPTED_EXIT
    if Verdict.FAILED in verdicts:
        return 1
    if Verdict.COULD_NOT_RUN in verdicts:
        return 3
    return 0
