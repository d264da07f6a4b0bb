"""Running gate checks on several cores: one spawned worker process per job, one check at a time each.

Invariant of :func:`run_checks`: every check handed to a worker comes back as one outcome, whatever the
worker does: its result, FAILED when the check could not be sent, loaded or answered (the worker
ended, say), or INTERRUPTED after Ctrl-C. Outcomes are returned in the order of ``checks``, so the
reports do not depend on which core finished first. Each worker leads its own process group: a Ctrl-C at
the terminal reaches the gate alone, which stops handing out checks and sends one SIGINT to the group of
each busy worker (its check, and the processes the check started, see it as a terminal's Ctrl-C); a
second Ctrl-C ends those workers. A worker whose gate died reads end-of-file and leaves.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

import attrs

from kvexact.gate.framework import (
    CheckOutcome,
    CheckResult,
    GateCheck,
    GateContext,
    Verdict,
    interrupts_caught,
    run_check,
)

POLL_SECONDS = 0.2


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the platform tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def worker_settings(ctx: GateContext) -> dict[str, Any]:
    """The context fields a worker rebuilds its own :class:`GateContext` from (the adapter travels as its
    ``module:factory`` text and is resolved again there)."""
    return {"level": ctx.level, "profile": ctx.profile, "seed": ctx.seed, "adapter": ctx.adapter,
            "call_timeout": ctx.call_timeout, "tlc_jar": ctx.tlc_jar, "workdir": ctx.workdir}


def _payload(check: GateCheck) -> bytes:
    """The check pickled (``P``), or its name (``N``) when it does not pickle (a check built by a closure):
    the worker then takes the check of that name from its own registry."""
    try:
        return b"P" + pickle.dumps(check)
    except Exception:
        return b"N" + check.name.encode()


def _check_from(payload: bytes) -> GateCheck:
    if payload[:1] == b"P":
        check: GateCheck = pickle.loads(payload[1:])
        return check
    from kvexact.gate.checks import load_checks

    name = payload[1:].decode()
    for check in load_checks():
        if check.name == name:
            return check
    raise LookupError(f"no check named {name!r} in the registry")


def _worker(settings: dict[str, Any], inbox: Connection, outbox: Connection) -> None:
    """Run each check received (see :func:`_payload`) until an empty message or end-of-file; send back ``("status", text)`` while
    it runs and ``("done", result, seconds)`` at its end."""
    os.setpgrp()  # Ctrl-C at the terminal is the gate's to pass on, to this worker's group (its subprocesses too)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even where the gate started with SIGINT ignored
    while True:
        try:
            payload = inbox.recv_bytes()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if payload == b"":
            return
        ctx = GateContext(**settings, status=lambda text: outbox.send(("status", text)))
        try:
            check = _check_from(payload)
        except Exception as exc:
            outbox.send(("done", CheckResult(Verdict.FAILED, detail="the worker could not load the check: "
                                             f"{type(exc).__name__}: {exc}; run with --jobs 1"), 0.0))
            continue
        with interrupts_caught(ctx):
            outcome = run_check(check, ctx)
        try:
            outbox.send(("done", outcome.result, outcome.seconds))
        except Exception as exc:  # a figure that does not pickle: the verdict must still arrive
            outbox.send(("done", CheckResult(outcome.result.verdict, detail=f"{outcome.result.detail} (its "
                                             f"figures could not be sent: {type(exc).__name__}: {exc})"),
                         outcome.seconds))


@attrs.define
class _Worker:
    process: Any
    inbox: Connection
    outbox: Connection
    check: GateCheck | None = None
    interrupted: bool = False


def run_checks(checks: Sequence[GateCheck], ctx: GateContext, jobs: int,
               started: Callable[[GateCheck], None] = lambda _c: None,
               status: Callable[[GateCheck, str], None] = lambda _c, _t: None,
               finished: Callable[[CheckOutcome], None] = lambda _o: None) -> list[CheckOutcome]:
    """Run ``checks`` on ``jobs`` worker processes; call ``started``, ``status`` and ``finished`` as they
    happen. After Ctrl-C (``ctx.interrupted``), checks not yet started are left out of the result."""
    spawn = multiprocessing.get_context("spawn")
    settings = worker_settings(ctx)
    workers: list[_Worker] = []
    for _ in range(max(1, min(jobs, len(checks)))):
        their_inbox, inbox = spawn.Pipe(duplex=False)
        outbox, their_outbox = spawn.Pipe(duplex=False)
        process = spawn.Process(target=_worker, args=(settings, their_inbox, their_outbox), daemon=True,
                                name="kvexact-gate-worker")
        process.start()
        their_inbox.close()
        their_outbox.close()
        workers.append(_Worker(process, inbox, outbox))
    pending = list(checks)
    done: dict[str, CheckOutcome] = {}

    def finish(worker: _Worker, outcome: CheckOutcome) -> None:
        worker.check = None
        done[outcome.check.name] = outcome
        finished(outcome)

    def hand_out() -> None:
        for worker in workers:
            while worker.check is None and pending and not ctx.interrupted and worker.process.is_alive():
                check = pending.pop(0)
                worker.check = check
                started(check)
                try:
                    worker.inbox.send_bytes(_payload(check))
                except OSError:  # the worker is gone: its sentinel reports the check as failed
                    pass

    def interrupt() -> None:
        ctx.interrupted = True
        for worker in workers:
            if worker.check is None:
                continue
            if worker.interrupted:  # a second Ctrl-C: the check would not stop
                worker.process.terminate()
            else:
                worker.interrupted = True
                try:
                    os.killpg(worker.process.pid, signal.SIGINT)  # as a terminal's Ctrl-C reaches a group
                except ProcessLookupError:
                    pass

    try:
        hand_out()
        while any(w.check is not None for w in workers):
            try:
                busy = [w for w in workers if w.check is not None]
                ready = wait([w.outbox for w in busy] + [w.process.sentinel for w in busy], POLL_SECONDS)
                for worker in busy:
                    assert worker.check is not None
                    if worker.outbox in ready:
                        try:
                            message = worker.outbox.recv()
                        except (EOFError, OSError):
                            message = None
                        if message is not None and message[0] == "status":
                            status(worker.check, message[1])
                            continue
                        if message is not None:
                            finish(worker, CheckOutcome(worker.check, message[1], message[2]))
                            continue
                    if worker.process.sentinel in ready or not worker.process.is_alive():
                        worker.process.join()
                        verdict = Verdict.INTERRUPTED if worker.interrupted else Verdict.FAILED
                        finish(worker, CheckOutcome(worker.check, CheckResult(
                            verdict, detail=f"the worker process running it ended (exit code "
                                            f"{worker.process.exitcode})"), 0.0))
                hand_out()
            except KeyboardInterrupt:
                interrupt()
    finally:
        for worker in workers:
            try:
                worker.inbox.send_bytes(b"")
            except OSError:
                pass
        for worker in workers:
            worker.process.join(timeout=5)
            if worker.process.is_alive():
                worker.process.terminate()
    for check in checks:  # nothing is lost: only Ctrl-C leaves a check out (not run)
        if check.name in done or (check in pending and ctx.interrupted):
            continue
        detail = "no worker was left to run it" if check in pending else "no result came back"
        done[check.name] = CheckOutcome(check, CheckResult(Verdict.INTERRUPTED if ctx.interrupted else
                                                           Verdict.FAILED, detail=detail), 0.0)
    return [done[c.name] for c in checks if c.name in done]
