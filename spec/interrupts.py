"""Ctrl-C that is never lost: a SIGINT handler that records every interrupt before raising KeyboardInterrupt.

Hypothesis may swallow a KeyboardInterrupt that lands in its own code, or turn it into a test failure, and
one raised inside a garbage-collector callback (Hypothesis keeps one) is only printed as "Exception
ignored". Invariant of :func:`sigint_seen`: once a SIGINT arrives inside the block, the returned event is
set, whatever became of the exception, so the caller can still stop with exit 130 and write nothing.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType


def _in_gc_callback(frame: FrameType | None, depth: int = 6) -> bool:
    """Is the interrupted code running inside a garbage-collector callback?"""
    while frame is not None and depth > 0:
        if frame.f_code.co_name == "gc_callback":
            return True
        frame, depth = frame.f_back, depth - 1
    return False


@contextmanager
def sigint_seen(on_signal: Callable[[], None] = lambda: None) -> Iterator[threading.Event]:
    """An event set by every Ctrl-C while the block runs (``on_signal`` runs too); the KeyboardInterrupt is
    raised as usual, except inside a garbage-collector callback, where the signal is sent again shortly.
    Off the main thread (where Python allows no handler) the event is returned and never set."""
    seen = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        seen.set()
        on_signal()
        if _in_gc_callback(frame):
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
            return
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)
