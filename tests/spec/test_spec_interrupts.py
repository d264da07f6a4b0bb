"""kvexact.spec.interrupts: a Ctrl-C is recorded even where its KeyboardInterrupt cannot usefully be raised."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from kvexact.spec.interrupts import sigint_seen


def test_a_ctrl_c_sets_the_event_runs_the_callback_and_raises():
    calls = []
    with pytest.raises(KeyboardInterrupt):
        with sigint_seen(lambda: calls.append(1)) as seen:
            os.kill(os.getpid(), signal.SIGINT)
            threading.Event().wait(30)  # the handler raises here; the wait never runs out
    assert seen.is_set() and calls == [1]


def test_inside_a_gc_callback_the_interrupt_is_recorded_and_sent_again():
    def gc_callback() -> str:  # named as Hypothesis' garbage-collector callback is
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000):  # the handler runs in here and must not raise
            pass
        return "returned"

    before = signal.getsignal(signal.SIGINT)
    returned = []
    with pytest.raises(KeyboardInterrupt):
        with sigint_seen() as seen:
            returned.append(gc_callback())
            assert seen.is_set()
            threading.Event().wait(30)  # the signal sent again lands here
    assert returned == ["returned"]  # the interrupt did not escape the callback
    assert signal.getsignal(signal.SIGINT) is before
