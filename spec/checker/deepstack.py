"""Deep recursion without Python's stack limit: a TLA+ recursive operator a few thousand levels deep
evaluates (the check runs in a thread with a large stack and a raised recursion limit), and runaway
recursion ends in a TLA+-style error naming the operator and the depth, at a configurable bound.

Invariant: a recursive operator's nesting never exceeds ``max_recursion()`` levels (KVEXACT_MAX_RECURSION,
default 20,000): the call one level deeper raises :class:`RecursionTooDeep` (an EvalError, so the check
ends as TLC's evaluation errors do, exit 75); Python's own limit sits far above that bound.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from kvexact.spec.checker.values import EvalError

ENV = "KVEXACT_MAX_RECURSION"
DEFAULT_LEVELS = 20_000
STACK_BYTES = 1 << 30  # reserved, not committed: pages are used only as deep as the recursion goes
FRAMES_PER_LEVEL = 40  # Python frames one TLA+ level may take (operators nested inside the body)

T = TypeVar("T")


class RecursionTooDeep(EvalError, RecursionError):
    """A recursive operator nested deeper than the configured bound (a RecursionError too, so no fallback
    path retries the evaluation)."""


def max_recursion() -> int:
    """The bound on a recursive operator's nesting (KVEXACT_MAX_RECURSION; a bad value: the default)."""
    try:
        return max(1, int(os.environ.get(ENV, DEFAULT_LEVELS)))
    except ValueError:
        return DEFAULT_LEVELS


# the nesting of recursive operator calls in the thread evaluating them (one checking thread at a time)
DEPTH = [0, DEFAULT_LEVELS]


def too_deep(name: str) -> RecursionTooDeep:
    return RecursionTooDeep(f"the recursive operator {name} was applied more than {DEPTH[1]} levels deep "
                            f"(runaway recursion? the bound is {ENV}={DEPTH[1]}); TLC reports such a "
                            f"recursion as a stack overflow")


def run_deep(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a thread with a large stack and a Python recursion limit above the
    TLA+ bound; its result or its exception. Ctrl-C in the caller is passed on to the thread."""
    DEPTH[0], DEPTH[1] = 0, max_recursion()
    if threading.current_thread() is not threading.main_thread():
        return fn(*args, **kwargs)  # already inside a worker: keep its stack
    box: dict[str, Any] = {}
    done = threading.Event()  # not Thread.is_alive: a join interrupted by a signal can make it lie

    def body() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller as is
            box["error"] = exc
        finally:
            done.set()

    old_limit = sys.getrecursionlimit()
    old_size = threading.stack_size()
    sys.setrecursionlimit(max(old_limit, DEPTH[1] * FRAMES_PER_LEVEL))
    try:
        threading.stack_size(STACK_BYTES)
        worker = threading.Thread(target=body, name="kvexact-check", daemon=True)
        worker.start()
    finally:
        threading.stack_size(old_size)
    try:
        while not done.is_set():
            try:
                done.wait(0.2)
            except KeyboardInterrupt:  # the search stops at its next step and returns what it found
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident or 0),
                                                           ctypes.py_object(KeyboardInterrupt))
    finally:
        sys.setrecursionlimit(old_limit)
    if "error" in box:
        raise box["error"]
    return box["value"]
