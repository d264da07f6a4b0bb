"""Named rejections and the cumulative negative-case registry (docs/design.md, "Named failures").

Each object family defines its own ``enum.Enum`` of rejection names. A rejected operation raises
:class:`Rejected` (or returns a receipt carrying the reason). Every failure-lab case is registered once
as a :class:`NegativeCase` whose ``trigger`` must be rejected with exactly ``reason``; the registry
test runs every trigger, so no registered case goes unexercised.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import attrs


class Rejected(Exception):
    """An operation refused by name; the state it was applied to is unchanged."""

    def __init__(self, reason: enum.Enum, detail: str = ""):
        self.reason = reason
        self.detail = detail
        super().__init__(f"{type(reason).__name__}.{reason.name}: {detail}" if detail else
                         f"{type(reason).__name__}.{reason.name}")


@attrs.frozen
class NegativeCase:
    """One failure-lab case: seed section, the rejection it must produce, and how to trigger it."""

    section: str  # e.g. "0x05G"
    reason: enum.Enum
    description: str
    trigger: Callable[[], Any]


_REGISTRY: dict[tuple[str, str], NegativeCase] = {}


def register_negative(case: NegativeCase) -> NegativeCase:
    """Register ``case`` once; a second case with the same section and description is an error."""
    key = (case.section, case.description)
    if key in _REGISTRY:
        raise ValueError(f"negative case registered twice: {case.section} {case.description!r}")
    _REGISTRY[key] = case
    return case


def negative_cases(section: str | None = None) -> list[NegativeCase]:
    return [c for c in _REGISTRY.values() if section is None or c.section == section]


def rejection_of(trigger: Callable[[], Any]) -> enum.Enum | None:
    """The reason a trigger was rejected with (raised, or carried by a returned receipt's ``rejection``)."""
    try:
        outcome = trigger()
    except Rejected as exc:
        return exc.reason
    reason = getattr(outcome, "rejection", None)
    return reason if isinstance(reason, enum.Enum) else None


def failures(cases: list[NegativeCase]) -> list[tuple[NegativeCase, str]]:
    """Every case not rejected with exactly its reason, with what happened instead."""
    out = []
    for case in cases:
        try:
            got = rejection_of(case.trigger)
        except Exception as exc:  # an unnamed exception is a failure of the case, not of the command
            out.append((case, f"raised {type(exc).__name__}: {exc}"))
            continue
        if got is not case.reason:
            out.append((case, "accepted" if got is None else f"rejected as {type(got).__name__}.{got.name}"))
    return out
