"""The guard around a system under test: an adapter cannot end the check by ending the process.

An adapter that calls ``sys.exit`` inside a call is caught in-process (:data:`AdapterFault.EXITED`, an ordinary
failure that Hypothesis shrinks and replays). Exits that cannot be caught in-process (``os._exit``, a C library's
``exit``, SIGSEGV, SIGABRT) are met by running each machine run of an adapter in a forked child
(:func:`run_isolated`): the child logs every adapter call before making it, so when it dies the parent names the
adapter, the call that was running and its arguments, and writes a script that replays the calls of the dying
example (:func:`replay_source`).

Invariant: a machine run through an adapter ends either with the child's own result or with a failed run whose
error names an :class:`AdapterFault`; it never ends the command, and never passes, because the adapter died.
"""

from __future__ import annotations

import enum
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class AdapterFault(enum.Enum):
    """How an adapter ended the process it ran in (a failing check, exit 1; never a pass)."""

    EXITED = "an adapter call raised SystemExit (sys.exit)"
    PROCESS_ENDED = "the process running the adapter ended without a result (os._exit, a C library's exit)"
    KILLED_BY_SIGNAL = "the process running the adapter was killed by a signal (SIGSEGV, SIGABRT, ...)"
    HUNG = "an adapter call did not return within the per-call limit (--call-timeout) and was stopped"


class AdapterFaultError(Exception):
    """An adapter ended (or tried to end) the process; ``fault`` says how. An ``Exception``, so that inside a
    machine it is a failure like any other (shrunk, replayed, reported)."""

    def __init__(self, fault: AdapterFault, message: str):
        super().__init__(message)
        self.fault = fault

    def __reduce__(self) -> Any:
        return (AdapterFaultError, (self.fault, str(self)))


# the call log of the forked child: [file descriptor] while a guarded run is in progress, else empty
_LOG: list[int] = []


def freeze(value: Any) -> Any:
    """``value`` with every list made a tuple (recursively): what an adapter receives cannot change the
    caller's data."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def log_build(config: Any) -> None:
    """A new adapter is being built (a new example): the log restarts with ``config``."""
    if _LOG:
        os.ftruncate(_LOG[0], 0)
        os.lseek(_LOG[0], 0, os.SEEK_SET)
        os.write(_LOG[0], f"factory {config!r}\n".encode())


def log_call(text: str) -> None:
    """An adapter call is about to run (one line: ``method(args)``)."""
    if _LOG:
        os.write(_LOG[0], (text.replace("\n", " ") + "\n").encode())


def cuda_open() -> bool:
    """Whether this process holds a CUDA context (which a forked child cannot use)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        return bool(cuda is not None and cuda.is_initialized())
    except Exception:
        return False


def isolation() -> str | None:
    """How a machine run is isolated here: ``fork`` (POSIX, no CUDA context), ``spawn`` (a CUDA context is
    open: a fresh interpreter runs it, at the cost of its imports), None (no ``os.fork`` or no process start)."""
    if not hasattr(os, "fork"):
        return None
    return "spawn" if cuda_open() else "fork"


def run_isolated(run: Callable[[Path], T], died: Callable[[str, list[str]], T],
                 raised: Callable[[BaseException, list[str]], T | None] | None = None,
                 stall_seconds: float = 0.0, poll: Callable[[Path], None] | None = None,
                 spawn: bool = False) -> T:
    """``run(channel)`` in a forked child (same memory, environment and files), or with ``spawn`` in a fresh
    interpreter (``run`` is then pickled: a module-level callable, and this process's ``sys.path``); its value,
    or its exception raised here. ``channel`` is a private folder both processes see: while the child runs,
    the parent calls ``poll(channel)`` about every :data:`POLL_SECONDS` (to hand over a stop request, or read
    progress the child writes there). When the child dies without a result, ``died(how, log)``: how it ended
    and the call log of its last adapter (``factory CONFIG`` then one line per call, the last one running).
    When it raised, ``raised(exc, log)`` may turn the exception into a value (None: the exception is raised
    here). With ``stall_seconds`` > 0 a child whose call log has not grown for that long is killed and
    reported through ``died`` as :data:`STALLED` (a hang the child's own per-call timer could not stop: a call
    stuck in C code). Ctrl-C here waits for the child (it has the signal too) and is raised after it."""
    folder = Path(tempfile.mkdtemp(prefix="kvexact-guard-"))
    log_path, result_path = folder / "calls.log", folder / "result.pickle"
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    proc = None
    if spawn:
        (folder / RUN_FILE).write_bytes(pickle.dumps(run))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        proc = subprocess.Popen([sys.executable, "-c", SPAWNED, str(folder), str(parent)], env=env)
        pid = proc.pid
    else:
        pid = os.fork()
        if pid == 0:  # the child: never returns
            _child(folder, parent, lambda: run)
    try:
        status = _wait(pid, log_path, stall_seconds, (lambda: poll(folder)) if poll is not None else None)
        if proc is not None:
            proc.returncode = -1  # reaped by _wait: the Popen object must not wait again
        if status is None:
            return died(f"{STALLED} {stall_seconds:g} s", _read_log(log_path))
        if result_path.is_file() and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            kind, value = pickle.loads(result_path.read_bytes())
            if kind == "error":
                turned = raised(value, _read_log(log_path)) if raised is not None else None
                if turned is None:
                    raise value
                return turned
            return value  # type: ignore[no-any-return]
        return died(_how(status), _read_log(log_path))
    finally:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()


RUN_FILE = "run.pickle"
SPAWNED = "import sys; from kvexact.conformance.guard import spawned; spawned(sys.argv[1], int(sys.argv[2]))"


def spawned(folder: str, parent: int) -> None:
    """The entry point of a spawned child: the pickled run in ``folder``, then as a forked child."""
    path = Path(folder)
    _child(path, parent, lambda: pickle.loads((path / RUN_FILE).read_bytes()))


def _child(folder: Path, parent: int, get_run: Callable[[], Callable[[Path], Any]]) -> None:
    """The child's whole life: log adapter calls to ``folder``, run, leave the outcome (value or exception)
    there, and end with exit status 0; never returns."""
    try:
        _die_with(parent)
        _LOG[:] = [os.open(folder / "calls.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)]
        try:
            outcome: tuple[str, Any] = ("value", get_run()(folder))
        except BaseException as exc:  # handed to the parent
            outcome = ("error", exc)
        try:
            data = pickle.dumps(outcome)
        except Exception as exc:
            data = pickle.dumps(("error", RuntimeError(f"{type(outcome[1]).__name__}: {outcome[1]} "
                                                      f"(not picklable: {exc})")))
        (folder / "result.part").write_bytes(data)
        os.replace(folder / "result.part", folder / "result.pickle")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _die_with(parent: int) -> None:
    """In the child: be killed when ``parent`` ends (Linux ``PR_SET_PDEATHSIG``), so a machine run never
    outlives the command or campaign worker that forked it; elsewhere nothing."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent ended before the request was made
        os._exit(1)


def _read_log(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []


STARTUP = 120.0  # seconds a child may take before its adapter's factory runs (imports, Hypothesis' set-up)
POLL_SECONDS = 0.25  # how often the parent calls run_isolated's poll while the child runs


def _wait(pid: int, log_path: Path, stall_seconds: float, poll: Callable[[], None] | None = None) -> int | None:
    """The child's wait status, or None when it was killed for making no adapter call for ``stall_seconds``
    (0: wait as long as it runs; before the factory has run, at least :data:`STARTUP`). Ctrl-C waits up to 10 s for the child to end, kills it after, then is
    raised."""
    try:
        last_size, last_progress = -1, time.monotonic()
        last_poll = 0.0
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            size = log_path.stat().st_size if log_path.exists() else 0
            now = time.monotonic()
            if poll is not None and now - last_poll >= POLL_SECONDS:
                poll()
                last_poll = now
            if size != last_size:
                last_size, last_progress = size, now
            elif stall_seconds > 0 and now - last_progress > (stall_seconds if size else max(stall_seconds, STARTUP)):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return None
            time.sleep(0.05)
    except KeyboardInterrupt:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                raise
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"was killed by signal {signal.Signals(number).name}"
        except ValueError:
            return f"was killed by signal {number}"
    return f"ended with exit status {os.WEXITSTATUS(status)} and no result"


STALLED = "made no adapter call and was stopped by kvexact after"


def fault_of(how: str) -> AdapterFault:
    if how.startswith(STALLED):
        return AdapterFault.HUNG
    return AdapterFault.KILLED_BY_SIGNAL if how.startswith("was killed") else AdapterFault.PROCESS_ENDED


def death_message(adapter: str, spec: str, how: str, log: list[str]) -> str:
    """One line naming the fault, the adapter, the call that was running and its arguments."""
    fault = fault_of(how)
    calls = log[1:]
    during = (f"during {calls[-1]} (call {len(calls)} on the adapter built by factory({log[0].split(' ', 1)[1]}))"
              if calls else f"while building the adapter ({log[0]})" if log else "before any adapter call")
    return (f"AdapterFaultError: {fault.name}: the process running --adapter {adapter} in the {spec} machine "
            f"{how} {during}")


REPLAY_TEMPLATE = '''"""Reproduction written by kvexact on {when}: {message}

Run it with `python {name}` or `pytest {name}`; it builds the adapter as the {spec} machine did and makes the
calls of the failing example in order; the last one ended the process or did not return.
"""

import importlib

from kvexact.reference.adapters import AdapterConfig, OpResult  # noqa: F401 (names in the calls below)
from kvexact.reference.index import IndexConfig  # noqa: F401

factory = getattr(importlib.import_module({module!r}), {attr!r})


def test_reproduction():
    adapter = factory({config})
{calls}


if __name__ == "__main__":
    test_reproduction()
'''


def replay_source(adapter: str, spec: str, message: str, log: list[str], path_name: str) -> str:
    """A plain script (and pytest file) that replays the logged calls of the dying example."""
    module, attr = adapter.split(":", 1)
    config = log[0].split(" ", 1)[1] if log else "AdapterConfig()"
    calls = "\n".join(f"    adapter.{line}" for line in log[1:]) or "    pass"
    safe = message[:300].replace("\\", "/").replace('"' * 3, "'" * 3)
    return REPLAY_TEMPLATE.format(when=time.strftime("%Y%m%dT%H%M%S"), message=safe, name=path_name,
                                  spec=spec, module=module, attr=attr, config=config, calls=calls)
