"""Errors of the embedded checker, each carrying the TLC outcome it maps to and a file:line:col location."""

from __future__ import annotations

from kvexact.spec.checker.values import EvalError

__all__ = ["EvalError", "SpecError", "ParseError", "UnsupportedError", "UndefinedError", "ArityError"]


class SpecError(Exception):
    """A problem found while loading or compiling a spec (not while evaluating states)."""

    outcome = "evaluation"

    def __init__(self, message: str, location: str = ""):
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message


class ParseError(SpecError):
    outcome = "parse"


class UnsupportedError(SpecError):
    """A TLA+ construct this engine does not implement (named in the message)."""

    outcome = "evaluation"


class UndefinedError(SpecError):
    outcome = "parse"


class ArityError(SpecError):
    """An operator applied to a number of arguments other than its definition's (SANY refuses it)."""

    outcome = "parse"
