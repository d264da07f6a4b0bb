"""TLC's distributed mode on this machine: one ``TLCServer`` and N ``TLCWorker`` processes over RMI.

Invariant: every process is a child of the caller and is gone when :func:`run_tlc_distributed` returns
(the workers are stopped when the server ends, also on a timeout); the server listens on a free port of
its own, so two runs do not meet. The server runs in a JPype child that exports the server's
fingerprint set for RMI before the search starts: in the pinned TLC build the fingerprint set is no
longer an exported remote object, and a worker that receives it unexported fails with
``NotSerializableException`` (the same jar run from the command line cannot start a worker). The result
is the same :class:`ModelCheckResult` as for a plain TLC run; its exit code is read from TLC's messages
(the server ends with status 0 whatever it found).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import attrs

from kvexact.spec.checker.result import ModelCheckResult
from kvexact.spec.tlc import (
    TlcFailed,
    _model_folder,
    _named,
    java_executable,
    parse_tool_output,
    tool_messages,
)

PORT_PROPERTY = "tlc2.tool.distributed.TLCServer.port"
SERVER_FAILED = 153  # TLC's system-error status: the server's search raised (its child exits, never hangs)
# the pinned TLC's server can raise this when a worker finishes a tiny model before the server has its states
START_RACE = 'because "this.states" is null'
READY = 7000  # TLC's message "TLC server at HOST is ready"

_SERVER_CHILD = r"""
import sys
import jpype
jar, port = sys.argv[1], sys.argv[2]
jpype.startJVM("-D%s=" % "PORT_PROPERTY" + port, classpath=[jar], convertStrings=False)
jpype.JClass("tlc2.TLCGlobals").setNumWorkers(0)  # as TLCServer.main: each registered worker adds one
app = jpype.JClass("tlc2.tool.distributed.TLCApp").create(jpype.JArray(jpype.JString)(sys.argv[3:]))
system = jpype.JClass("java.lang.System")
if app is None:
    system.exit(150)
server = jpype.JClass("tlc2.tool.distributed.TLCServer")(app)
klass = jpype.java.lang.Class.forName("tlc2.tool.distributed.TLCServer")
field = klass.getDeclaredField("fpSetManager")
field.setAccessible(True)
manager = field.get(server)
inner = manager.getClass().getDeclaredField("fpSet")
inner.setAccessible(True)
jpype.JClass("java.rmi.server.UnicastRemoteObject").exportObject(inner.get(manager), 0)
check = klass.getDeclaredMethod("modelCheck")
check.setAccessible(True)
try:
    check.invoke(server)
except Exception as exc:  # the JVM's RMI threads would keep this process alive: leave through System.exit
    print("SERVER_FAILED " + str(exc), flush=True)
    system.out.flush()
    system.exit(SERVER_FAILED_CODE)
system.out.flush()
system.exit(0)
""".replace('"PORT_PROPERTY"', repr(PORT_PROPERTY)).replace("SERVER_FAILED_CODE", str(SERVER_FAILED))

# The exit code TLC's own ``tlc2.TLC`` would give, from the message that reports the verdict. The server
# reports an invariant violation only by its behaviour ("The behavior up to this point is:", 2121),
# without naming the invariant.
_VERDICT_CODES = {2110: 12, 2107: 12, 2114: 11, 2112: 13, 2116: 13}
_UNNAMED_BEHAVIOUR = 2121


def free_port() -> int:
    """A TCP port nobody listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def exit_code_from_messages(text: str) -> int:
    """TLC's exit code for the server's ``-tool`` output: the verdict's (12, 11, 13), 75 for another
    error message, 0 when the search completed without one."""
    codes = [(code, cls) for code, cls, _body in tool_messages(text)]
    for code, _cls in codes:
        if code in _VERDICT_CODES:
            return _VERDICT_CODES[code]
    if any(code == _UNNAMED_BEHAVIOUR for code, _cls in codes):
        return 12
    if any(cls == 1 for _code, cls in codes):
        return 75
    if not any(code == 2199 for code, _cls in codes):
        raise TlcFailed("the TLC server ended without its final statistics: " + text.strip()[-300:])
    return 0


def run_tlc_distributed(spec_path: Path, cfg_path: Path, jar: str, *, workers: int = 2, threads: int | str = 1,
                        timeout_s: float | None = None, lib: list | tuple = ()) -> ModelCheckResult:
    """Check one model with a TLC server and ``workers`` TLCWorker processes on localhost (``threads``
    threads each; ``auto``: TLC's default, one per core). A server that fails with TLC's start-up race
    (:data:`START_RACE`) is run once more; any other server failure raises :class:`TlcFailed`."""
    try:
        return _run_once(spec_path, cfg_path, jar, workers, threads, timeout_s, lib)
    except TlcFailed as exc:
        if START_RACE not in str(exc):
            raise
    return _run_once(spec_path, cfg_path, jar, workers, threads, timeout_s, lib)


def _run_once(spec_path: Path, cfg_path: Path, jar: str, workers: int, threads: int | str,
              timeout_s: float | None, lib: list | tuple) -> ModelCheckResult:
    java = java_executable()
    port = free_port()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    with _model_folder(Path(spec_path), Path(cfg_path), lib) as (work, meta):
        args = ["-tool", "-metadir", str(meta), "-config", "MC_kvexact.cfg", Path(spec_path).name]
        log = work.parent / "server.out"
        start = time.perf_counter()
        with open(log, "w") as out:
            server = subprocess.Popen([sys.executable, "-c", _SERVER_CHILD, jar, str(port), *args], cwd=work,
                                      stdout=out, stderr=subprocess.STDOUT, text=True)
        procs: list[subprocess.Popen] = []
        try:
            ready = _wait_ready(server, log, deadline)
            props = [f"-D{PORT_PROPERTY}={port}"]
            if threads != "auto":
                props.append(f"-Dtlc2.tool.distributed.TLCWorker.threadCount={threads}")
            for i in range(workers if ready else 0):
                with open(work.parent / f"worker{i}.out", "w") as wout:
                    procs.append(subprocess.Popen([java, *props, "-cp", jar, "tlc2.tool.distributed.TLCWorker",
                                                   "localhost"], cwd=work, stdout=wout, stderr=subprocess.STDOUT))
            remaining = None if deadline is None else max(deadline - time.monotonic(), 1.0)
            try:
                server.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                raise TlcFailed(f"the TLC server did not finish within {timeout_s} s") from None
        finally:
            for p in (server, *procs):
                if p.poll() is None:
                    p.kill()
                    p.wait()
        seconds = time.perf_counter() - start
        text = log.read_text(errors="replace")
    if server.returncode == SERVER_FAILED:
        failed = [line for line in text.splitlines() if line.startswith("SERVER_FAILED")]
        raise TlcFailed(f"the TLC server failed (exit {SERVER_FAILED}): {failed[-1] if failed else text[-300:]}")
    code = server.returncode if server.returncode not in (0, None) else exit_code_from_messages(text)
    result = parse_tool_output(text, code, seconds=seconds)
    v = result.violation
    if v is not None and v.kind == "safety":  # the server showed the behaviour but named no invariant
        message = "Invariant violated (TLC's distributed server does not say which one; the last state " \
                  "of the behaviour below violates it)"
        result = attrs.evolve(result, violation=attrs.evolve(v, kind="invariant", name="?", message=message))
    return _named(result, cfg_path)


def _wait_ready(server: subprocess.Popen, log: Path, deadline: float | None) -> bool:
    """True once the server says it is ready for workers, False when it ended first (a parse or config
    error, or a violation in the initial states); TlcFailed when it is not ready in time."""
    marker = f"@!@!@STARTMSG {READY}:"
    while True:
        if marker in log.read_text(errors="replace"):
            return True
        if server.poll() is not None:
            return False
        if deadline is not None and time.monotonic() > deadline:
            raise TlcFailed("the TLC server was not ready in time")
        time.sleep(0.2)
