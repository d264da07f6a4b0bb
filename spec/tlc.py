"""The TLC engine: run ``tla2tools.jar`` in a child process and parse its ``-tool`` output.

Invariant: TLC never runs in the caller's process (``tlc2.TLC.main`` ends in ``System.exit``); each
model gets its own child (JPype in a spawned interpreter, else plain ``java``) working in a temporary
copy of the spec's folder with a temporary ``-metadir``, so no trace or state file is left beside the
spec. The result is the same :class:`ModelCheckResult` the embedded engine returns.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from kvexact.spec.checker.result import ModelCheckResult, Outcome, TraceState, Violation
from kvexact.spec.checker.values import ModelValue  # one model-value type for both engines

JAR_ENV = "TLA2TOOLS_JAR"
JPYPE_MISSING_EXIT = 97  # the child's exit code when JPype cannot start a JVM

# The child: start a JVM with the jar on the classpath and call MAIN.main(args); System.exit ends
# the child with the Java program's exit code.
_CHILD = r"""
import sys
try:
    import jpype
    jpype.startJVM(classpath=[sys.argv[1]], convertStrings=False)
except Exception as exc:
    print("kvexact-tlc-child: JPype cannot start a JVM: %s" % exc, file=sys.stderr)
    sys.exit(%d)
main = jpype.JClass(sys.argv[2])
main.main(jpype.JArray(jpype.JString)(sys.argv[3:]))
sys.stdout.flush()
jpype.java.lang.System.out.flush()
jpype.java.lang.System.exit(0)
""".replace("%d", str(JPYPE_MISSING_EXIT))


class TlcUnavailable(Exception):
    """No jar, or neither JPype nor a ``java`` executable can run it."""


class TlcFailed(Exception):
    """TLC ran but ended without a result this module understands (timeout, crash, unknown exit)."""


class FrozenDict(dict):
    """A record or function value: a dict that can sit inside a frozenset."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))


@attrs.frozen
class ChildRun:
    exit_code: int
    stdout: str
    stderr: str
    via: str  # "jpype" or "java"
    seconds: float


# The CI copy of the jar sits beside the clone, in the folder that holds it: shared/tlc/tla2tools.jar.
_BESIDE_CLONE = ("shared", "tlc", "tla2tools.jar")


@attrs.frozen
class JarChoice:
    """Where the jar came from: ``--tlc-jar``, ``$TLA2TOOLS_JAR``, or the copy beside the clone."""
    path: str
    source: str


def beside_clone_candidates() -> list[Path]:
    """The places the CI copy may be: beside the clone holding this package, and beside the current
    directory (a clone run from its root)."""
    from kvexact.spec import spec_dir

    roots = [spec_dir().resolve().parent.parent, Path.cwd().resolve().parent]
    out: list[Path] = []
    for root in roots:
        candidate = root.joinpath(*_BESIDE_CLONE)
        if candidate not in out:
            out.append(candidate)
    return out


def find_jar(jar: str | os.PathLike[str] | None = None) -> JarChoice:
    """The one place the jar is resolved: ``jar`` (``--tlc-jar``), else ``$TLA2TOOLS_JAR``, else the CI
    copy beside the clone when it exists. A path that is named but missing is an error, never skipped."""
    for path, source in ((str(jar) if jar else "", "--tlc-jar"), (os.environ.get(JAR_ENV, ""), JAR_ENV)):
        if path:
            if not Path(path).is_file():
                raise TlcUnavailable(f"TLC jar not found: {path} (from {source})")
            return JarChoice(path, source)
    for candidate in beside_clone_candidates():
        if candidate.is_file():
            return JarChoice(str(candidate), "the copy beside the clone")
    raise TlcUnavailable(f"no TLC jar: pass --tlc-jar PATH or set {JAR_ENV} (none beside the clone either)")


def resolve_jar(jar: str | os.PathLike[str] | None) -> str:
    """The jar's path (see :func:`find_jar`); :class:`TlcUnavailable` when there is none."""
    return find_jar(jar).path


def java_executable() -> str:
    """The ``java`` that runs TLC (``$JAVA_HOME/bin/java``, else on PATH); a clear error when none."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise TlcUnavailable("Java not found: TLC needs Java 11 or later ('java' on PATH or JAVA_HOME)")
    return java


def choose_engine(engine: str, jar: str | None = None) -> tuple[str, str, str | None]:
    """``(engine, why, jar)`` for ``--engine``: ``auto`` is TLC when Java and the jar are present, else
    the embedded engine; the other choices are taken as given (the jar, when one is needed, resolved)."""
    if engine == "embedded":
        return "embedded", "--engine embedded", None
    if engine != "auto":
        return engine, f"--engine {engine}", find_jar(jar).path
    try:
        choice = find_jar(jar)
        java_executable()
    except TlcUnavailable as exc:
        return "embedded", f"auto: {exc}", None
    return "tlc", f"auto: Java and the TLC jar ({choice.source}: {choice.path}) are present", choice.path


def run_java_main(jar: str, main_class: str, args: list[str], *, cwd: Path | None = None,
                  timeout_s: float | None = None, prefer: str = "jpype") -> ChildRun:
    """Run ``main_class.main(args)`` with ``jar`` on the classpath in a child process.

    The caller survives the program's ``System.exit``: it runs in a spawned interpreter (JPype) or
    a ``java`` process; its exit code and output come back. JPype missing falls back to ``java``.
    """
    attempts = ["jpype", "java"] if prefer == "jpype" else ["java"]
    for via in attempts:
        if via == "jpype":
            command = [sys.executable, "-c", _CHILD, jar, main_class, *args]
        else:
            command = [java_executable(), "-XX:+UseParallelGC", "-cp", jar, main_class, *args]
        start = time.perf_counter()
        try:
            done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise TlcFailed(f"{main_class} did not finish within {timeout_s} s ({via})") from exc
        seconds = time.perf_counter() - start
        if via == "jpype" and done.returncode == JPYPE_MISSING_EXIT and "kvexact-tlc-child" in done.stderr:
            continue
        return ChildRun(done.returncode, done.stdout, done.stderr, via, seconds)
    raise TlcUnavailable("neither JPype nor a 'java' executable can run TLC")


@attrs.frozen
class Simulation:
    """TLC's ``-simulate``: ``num`` random behaviours of at most ``depth`` states each, from ``seed``."""
    num: int = 10
    depth: int = 100
    seed: int = 0


def run_tlc(spec_path: Path, cfg_path: Path | None, jar: str | None, workers: int | str = 1,
            max_states: int | None = None, max_depth: int | None = None,
            timeout_s: float | None = None, main_class: str = "tlc2.TLC",
            lib: list | tuple = (), simulate: Simulation | None = None) -> ModelCheckResult:
    """Check one model with TLC in a child process, hermetically, and parse its ``-tool`` output; the
    modules of the spec's folder, then of each ``lib`` folder not already there, are its modules.
    ``workers`` is a count or ``"auto"`` (every core); ``simulate`` runs TLC's random simulation."""
    if max_states is not None or max_depth is not None:
        raise ValueError("the TLC engine has no --max-states/--max-depth (TLC offers no such bound); "
                         "use the embedded engine or a CONSTRAINT")
    jar = resolve_jar(jar)
    spec_path = Path(spec_path)
    cfg_path = Path(cfg_path) if cfg_path is not None else spec_path.with_suffix(".cfg")
    mode = ["-simulate", f"num={simulate.num}", "-depth", str(simulate.depth), "-seed", str(simulate.seed)] \
        if simulate is not None else []
    with _model_folder(spec_path, cfg_path, lib) as (work, meta):
        args = ["-tool", *mode, "-workers", str(workers), "-metadir", str(meta), "-cleanup",
                "-noTE", "-config", "MC_kvexact.cfg", spec_path.name]
        child = run_java_main(jar, main_class, args, cwd=work, timeout_s=timeout_s)
    return _named(parse_tool_output(child.stdout, child.exit_code, seconds=child.seconds, stderr=child.stderr),
                  cfg_path)


@contextlib.contextmanager
def _model_folder(spec_path: Path, cfg_path: Path, lib: list | tuple) -> Iterator[tuple[Path, Path]]:
    """A temporary copy of the model's modules and cfg (as ``MC_kvexact.cfg``) and a metadir in it."""
    with tempfile.TemporaryDirectory(prefix="kvexact-tlc-") as tmp:
        work = Path(tmp) / "model"
        work.mkdir()
        for folder in (*lib, spec_path.parent):  # EXTENDS/INSTANCE resolve from the folder, then lib
            for module in Path(folder).glob("*.tla"):
                shutil.copy2(module, work / module.name)
        shutil.copy2(spec_path, work / spec_path.name)
        shutil.copy2(cfg_path, work / "MC_kvexact.cfg")
        yield work, Path(tmp) / "meta"


def _named(result: ModelCheckResult, cfg_path: Path) -> ModelCheckResult:
    """TLC does not name a violated temporal property, and names an action property by its source
    location; when the cfg has one property, it is that one."""
    v = result.violation
    if v is not None and (v.kind == "temporal" or (v.kind == "action-property" and not v.name.isidentifier())):
        from kvexact.spec.checker.cfg import parse_cfg
        props = parse_cfg(cfg_path).properties
        if len(props) == 1:
            result = attrs.evolve(result, violation=attrs.evolve(v, name=props[0]))
    return result


# ---------------------------------------------------------------------------------------------
# -tool output

_MSG = re.compile(r"@!@!@STARTMSG (\d+):(\d+) @!@!@\r?\n(.*?)@!@!@ENDMSG \1 @!@!@", re.S)
_EXIT_OUTCOMES = {0: Outcome.SUCCESS, 11: Outcome.DEADLOCK, 12: Outcome.SAFETY, 13: Outcome.LIVENESS,
                  10: Outcome.EVALUATION, 14: Outcome.EVALUATION, 75: Outcome.EVALUATION,
                  76: Outcome.EVALUATION, 77: Outcome.EVALUATION, 150: Outcome.PARSE, 151: Outcome.CONFIG,
                  255: Outcome.EVALUATION}  # 255: an error inside an evaluator, e.g. SubSeq out of range


def tool_messages(text: str) -> list[tuple[int, int, str]]:
    """The ``(code, class, body)`` of every ``-tool`` message, in order."""
    return [(int(m.group(1)), int(m.group(2)), m.group(3).rstrip("\n")) for m in _MSG.finditer(text)]


def _count(text: str) -> int:
    return int(text.replace(",", ""))


_SANY_BLOCK = re.compile(r"Starting SANY\.\.\.\r?\n@!@!@ENDMSG 2220 @!@!@\r?\n(.*?)(?:@!@!@STARTMSG|\Z)", re.S)
_SANY_NOISE = ("Parsing file", "Semantic processing of module", "Linting of module", "*** Errors:",
               "Semantic errors:", "Fatal errors while parsing", "In module ", "***Parse Error***")


def sany_error(text: str) -> str:
    """SANY's own error in TLC's ``-tool`` output (printed outside TLC's messages), on one line: what it
    found and where (``SANY: line 7, col 13 to line 7, col 15 of module S: Unknown operator: `Foo'.``); ""
    when SANY printed none."""
    m = _SANY_BLOCK.search(text)
    if not m:
        return ""
    keep: list[str] = []
    in_stack = False
    for line in m.group(1).splitlines():
        line = line.strip()
        if line.startswith("Residual stack trace follows"):
            in_stack = True
        elif in_stack:
            in_stack = bool(line)
        elif line and not line.startswith(_SANY_NOISE) and line not in keep:
            keep.append(line)
    return "SANY: " + ": ".join(keep) if keep else ""


def parse_tool_output(text: str, exit_code: int, seconds: float = 0.0, stderr: str = "") -> ModelCheckResult:
    """Turn TLC's ``-tool`` output and exit code into a :class:`ModelCheckResult` (see the notes §2.6)."""
    if exit_code not in _EXIT_OUTCOMES:
        tail = (text + stderr).strip().splitlines()[-5:]
        raise TlcFailed(f"TLC exited with code {exit_code}: " + " | ".join(tail))
    outcome = _EXIT_OUTCOMES[exit_code]
    generated = distinct = depth = queue = 0
    violation_kind = violation_name = ""
    message = ""
    trace: list[TraceState] = []
    loop: int | None = None  # a liveness lasso: the state the last one steps back to
    errors: list[str] = []
    for code, _cls, body in tool_messages(text):
        if code in (2190, 2191) and not generated:
            m = re.search(r"([\d,]+) distinct state", body) or re.search(r"with ([\d,]+) of them distinct", body)
            if m:
                distinct = _count(m.group(1))
        elif code == 2199:
            m = re.search(r"([\d,]+) states generated, ([\d,]+) distinct states found, ([\d,]+) states? left",
                          body)
            if m:
                generated, distinct, queue = (_count(g) for g in m.groups())
        elif code == 2210:  # -simulate: "The number of states generated: N"
            m = re.search(r"states generated: ([\d,]+)", body)
            if m:
                generated = _count(m.group(1))
        elif code == 2194:
            m = re.search(r"search is ([\d,]+)", body)
            if m:
                depth = _count(m.group(1))
        elif code in (2110, 2107):
            m = re.search(r"Invariant (\S+) is violated", body)
            violation_kind, violation_name, message = "invariant", m.group(1) if m else "?", body
        elif code == 2114:
            violation_kind, violation_name, message = "deadlock", "Deadlock", body
        elif code == 2112:
            m = re.search(r"Action property (.+?) is violated", body)
            violation_kind, violation_name, message = "action-property", m.group(1) if m else "?", body
        elif code == 2116:
            violation_kind, violation_name, message = "temporal", "Temporal", body
        elif code == 2217:
            trace.append(parse_state(body))
        elif code == 2218:  # "N: Stuttering": the last state stutters forever
            loop = len(trace)
        elif code == 2122:  # "N: Back to state." (-tool) or "Back to state N."
            m = re.search(r"(\d+)", body)
            loop = int(m.group(1)) if m else None
        elif _cls == 1 and code not in (2110, 2107, 2114, 2112, 2116):
            errors.append(body)
    if outcome is Outcome.PARSE and sany_error(text):
        errors.insert(0, sany_error(text))  # "Parsing or semantic analysis failed." alone says nothing
    if not depth and trace:
        depth = len(trace)
    violation = None
    if outcome is not Outcome.SUCCESS:
        if not violation_kind:
            violation_kind = outcome.value
            violation_name = outcome.value
            message = "\n".join(errors)
        violation = Violation(violation_kind, violation_name, message, tuple(trace), loop=loop)
    return ModelCheckResult(engine="tlc", outcome=outcome, generated_states=generated,
                            distinct_states=distinct, depth=depth, left_on_queue=queue, seconds=seconds,
                            violation=violation, messages=tuple(errors))


_STATE_HEAD = re.compile(r"^(\d+): (.*)$")


def parse_state(body: str) -> TraceState:
    """One ``State k: <label>`` message: its index, action label, location and variable values."""
    head, _, rest = body.partition("\n")
    m = _STATE_HEAD.match(head.strip().removeprefix("State "))
    if not m:
        raise ValueError(f"not a TLC state: {head!r}")
    index, label = int(m.group(1)), m.group(2).strip()
    action, location = label, ""
    lm = re.match(r"<(.+?)(?: (line \d+, col \d+ .*))?>$", label)
    if lm:
        action, location = lm.group(1), lm.group(2) or ""
    values: dict[str, Any] = {}
    for var, expr in _conjuncts(rest):
        values[var] = parse_value(expr)
    return TraceState(index=index, action=action, location=location, values=values)


def _conjuncts(text: str) -> list[tuple[str, str]]:
    """Split ``/\\ x = e`` lines (a value may span lines) into (variable, value text)."""
    lines = text.strip().splitlines()
    if len(lines) == 1 and not lines[0].lstrip().startswith("/\\"):
        lines = ["/\\ " + lines[0]]  # a one-variable state is printed without the bullet
    items: list[list[str]] = []
    for line in lines:
        if line.startswith("/\\ "):
            items.append([line[3:]])
        elif items:
            items[-1].append(line)
    out = []
    for chunk in items:
        joined = "\n".join(chunk)
        var, sep, expr = joined.partition(" = ")
        if not sep:
            raise ValueError(f"not a variable assignment in a TLC state: {joined!r}")
        out.append((var.strip(), expr))
    return out


# ---------------------------------------------------------------------------------------------
# TLC's value syntax

_TOKEN = re.compile(r'\s*(<<|>>|\|->|:>|@@|\.\.|"(?:[^"\\]|\\.)*"|-?\d+|[A-Za-z_][A-Za-z0-9_]*|[{}\[\](),])')


class _Values:
    def __init__(self, text: str):
        self.tokens: list[str] = []
        pos = 0
        text = text.rstrip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m:
                raise ValueError(f"cannot read a TLC value at column {pos + 1}: {text[pos:pos + 20]!r}")
            self.tokens.append(m.group(1))
            pos = m.end()
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise ValueError(f"TLC value: expected {expected or 'a value'}, found {tok!r}")
        self.i += 1
        return tok

    def items(self, close: str) -> list[Any]:
        out: list[Any] = []
        while self.peek() != close:
            out.append(self.value())
            if self.peek() == ",":
                self.take(",")
        self.take(close)
        return out

    def value(self) -> Any:
        first = self.function_piece()
        if self.peek() != "@@":
            return first
        merged = FrozenDict()
        merged.update(first)
        while self.peek() == "@@":
            self.take("@@")
            for k, v in self.function_piece().items():
                merged.setdefault(k, v)
        return merged

    def function_piece(self) -> Any:
        left = self.atom()
        if self.peek() == ":>":
            self.take(":>")
            return FrozenDict({left: self.atom()})
        if self.peek() == "..":
            self.take("..")
            right = self.atom()
            return frozenset(range(left, right + 1))
        return left

    def atom(self) -> Any:
        tok = self.take()
        if tok == "<<":
            return tuple(self.items(">>"))
        if tok == "{":
            return frozenset(self.items("}"))
        if tok == "(":
            inner = self.value()
            self.take(")")
            return inner
        if tok == "[":
            record = FrozenDict()
            while self.peek() != "]":
                name = self.take()
                self.take("|->")
                record[name] = self.value()
                if self.peek() == ",":
                    self.take(",")
            self.take("]")
            return record
        if tok.startswith('"'):
            return bytes(tok[1:-1], "utf-8").decode("unicode_escape")
        if tok == "TRUE":
            return True
        if tok == "FALSE":
            return False
        if re.fullmatch(r"-?\d+", tok):
            return int(tok)
        if re.fullmatch(r"[A-Za-z_]\w*", tok):
            return ModelValue(tok)
        raise ValueError(f"TLC value: unexpected {tok!r}")


def parse_value(text: str) -> Any:
    """Parse one value printed by TLC: integers, strings, booleans, model values, sets, tuples and
    sequences, records, ``a..b`` and functions ``(k :> v @@ ...)``; the Python forms are those of the
    embedded engine's ``to_python`` (dict, tuple, frozenset, its ModelValue)."""
    reader = _Values(text)
    value = reader.value()
    if reader.peek() is not None:
        raise ValueError(f"TLC value: unexpected {reader.peek()!r} after a complete value")
    return value


# ---------------------------------------------------------------------------------------------
# SANY

def sany_parse(modules: list[Path], jar: str | None = None, timeout_s: float | None = None) -> ChildRun:
    """Parse ``modules`` with SANY (TLC's own front end) in one child process: all of them are copied
    flat into a temporary folder (so each finds the others by module name) and parsed there. Exit code
    0 means every module is valid TLA+; SANY stops at the first one it rejects and names its file."""
    jar = resolve_jar(jar)
    with tempfile.TemporaryDirectory(prefix="kvexact-sany-") as tmp:
        names = []
        for module in modules:
            target = Path(tmp) / Path(module).name
            if target.exists():
                raise ValueError(f"two modules named {target.name}: SANY resolves modules by name")
            shutil.copy2(module, target)
            names.append(target.name)
        return run_java_main(jar, "tla2sany.SANY", names, cwd=Path(tmp), timeout_s=timeout_s)
