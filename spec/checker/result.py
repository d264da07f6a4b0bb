"""The result object every engine (embedded, TLC) produces, so ``kvexact check`` treats them alike.

Invariant: ``exit_code`` follows TLC: 0 no error, 11 deadlock, 12 safety violation, 13 temporal
property, action property or initial-state property violated, 75 evaluation error, 150 parse error,
151 config error; an incomplete run (``--max-states``/``--max-depth``) is never
reported as success (``complete`` is False and the CLI says so).
"""

from __future__ import annotations

import enum
from typing import Any

import attrs


class Outcome(enum.Enum):
    SUCCESS = "success"
    DEADLOCK = "deadlock"
    SAFETY = "safety"
    EVALUATION = "evaluation"
    PARSE = "parse"
    CONFIG = "config"
    ASSUMPTION = "assumption"
    ASSERT = "assert"  # TLC's Assert(FALSE, ...) failed while checking (TLC exit 14)
    LIVENESS = "liveness"  # a PROPERTY is violated: temporal, action or initial-state property (TLC exit 13)


EXIT_CODES = {
    Outcome.SUCCESS: 0,
    Outcome.DEADLOCK: 11,
    Outcome.SAFETY: 12,
    Outcome.LIVENESS: 13,
    Outcome.EVALUATION: 75,
    Outcome.PARSE: 150,
    Outcome.CONFIG: 151,
    Outcome.ASSUMPTION: 10,
    Outcome.ASSERT: 14,
}


@attrs.frozen
class TraceState:
    """One state of a counterexample: its action label, source location and variable values."""

    index: int
    action: str
    location: str
    values: dict[str, Any]


@attrs.frozen
class Violation:
    kind: str  # "invariant", "deadlock", "evaluation", "temporal", "action-property", "property-init", ...
    name: str  # the invariant's or property's name, or "Deadlock", or the error kind
    message: str = ""
    trace: tuple[TraceState, ...] = ()
    loop: int | None = None  # a lasso (temporal property): the 1-based state the last state steps back to


@attrs.frozen
class ModelCheckResult:
    engine: str  # "embedded" or "tlc"
    outcome: Outcome
    generated_states: int = 0
    distinct_states: int = 0
    depth: int = 0
    left_on_queue: int = 0
    seconds: float = 0.0
    complete: bool = True
    violation: Violation | None = None
    coverage: dict[str, dict[str, int]] = attrs.field(factory=dict)  # action -> {"fired", "new"}
    messages: tuple[str, ...] = ()  # warnings, e.g. "SYMMETRY with liveness checking"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]
