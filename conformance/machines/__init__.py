"""Hypothesis state machines, one module per machine: ``allocator`` (KVAllocation and CowPublication:
the reference or an allocator adapter against the kernels and the specs), ``radix`` (the radix index and
shared-prefix attention, or a prefix index in its place), ``vmm`` (vAttention's virtual mapping read
back through the kernels), ``revocation`` (namespace revocation against its spec), ``tails`` (partial-tail
policies of prefix hits), ``prompt_cache`` (Prompt Cache modules in pool blocks) and ``chunk_attention``
(chunk trees of the radix index through the chunk-first kernel). They share the kernel mirror of
:mod:`kvexact.conformance.mirror`, the failure type and the rule counter below.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from hypothesis.errors import HypothesisException


class ConformanceFailure(AssertionError):
    """The system under test and the reference disagree, a pool check failed, or a trace left the spec."""


def counted_rule(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Count each call of a rule in the machine's stats (``rule:<name>``), for rule coverage. A call that
    found the system under test lacking the optional method it needs (:func:`lacks`) does not count."""

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._lacking = None
        result = fn(self, *args, **kwargs)
        if self._lacking is None:
            self._count(f"rule:{fn.__name__}")
        return result  # what a rule with a ``target`` bundle adds to it

    return wrapper


def failure_in_flight() -> BaseException | None:
    """The failure propagating through a ``teardown`` (Hypothesis tears down in a ``finally``), if any: an
    ``Exception`` that is not one of Hypothesis' own control exceptions (end of data, rejected example)."""
    exc = sys.exc_info()[1]
    return exc if isinstance(exc, Exception) and not isinstance(exc, HypothesisException) else None


def not_applicable(machine: Any, why: str) -> None:
    """The current rule found nothing to act on (a handle whose state moved on since it was drawn): counted
    as ``why``, and the rule does not count as fired."""
    machine._lacking = why
    machine._count(why)


def lacks(machine: Any, sut: Any, method: str) -> bool:
    """True (and counted as ``missing:<method>``, so the run reports it) when ``sut`` has no callable
    ``method``; the current rule then does not count as fired. False for the reference (``sut`` None)."""
    if sut is None or callable(getattr(sut, method, None)):
        return False
    machine._lacking = method
    machine._count(f"missing:{method}")
    return True
