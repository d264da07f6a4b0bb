"""SANY (TLA+'s own parser and semantic analyser) over many files in one child JVM, for the parser
differential: which files SANY accepts, and at which level it rejects the others.

Invariant: SANY never runs in the caller's process; one child (JPype) parses every file given, each
with its own folder and the given library folders as module search path, and reports one JSON line
per file: the error level SANY reached (0 accepted, 2 parse, 3 or more semantic) and its message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import attrs

# The child: argv = [jar, extra jar, json list of [file, [search folders]]]; one JSON line per file.
_CHILD = r"""
import json, sys
import jpype
jpype.startJVM(classpath=[sys.argv[1], sys.argv[2]], convertStrings=True)
SANY = jpype.JClass("tla2sany.drivers.SANY")
SpecObj = jpype.JClass("tla2sany.modanalyzer.SpecObj")
Resolver = jpype.JClass("util.SimpleFilenameToStream")
Buffer = jpype.JClass("java.io.ByteArrayOutputStream")
Printer = jpype.JClass("java.io.PrintStream")
for path, dirs in json.loads(sys.argv[3]):
    spec = SpecObj(path, Resolver(jpype.JArray(jpype.JString)(dirs)))
    buf = Buffer()
    crash = ""
    try:
        SANY.frontEndMain(spec, path, Printer(buf))
    except Exception as exc:
        crash = str(exc)
    level = int(spec.getErrorLevel()) or (2 if crash else 0)
    print(json.dumps({"path": path, "level": level, "text": str(buf.toString())[:20000] + crash}), flush=True)
"""


@attrs.frozen
class SanyVerdict:
    level: int  # 0: accepted; 2: parse error; 3 or more: semantic error
    text: str

    @property
    def accepted(self) -> bool:
        return self.level == 0

    @property
    def parse_error(self) -> bool:
        """Refused before semantic analysis began (SANY analyses modules only once all have parsed; its
        error level alone cannot tell, a message holding `%` ends either phase at level 2)."""
        return self.level != 0 and "Semantic processing of module" not in self.text

    def first_error(self) -> str:
        """The line of SANY's report that names the problem."""
        keys = ("onflict", "Could not find", "rror", "ncountered", "not", "Unknown", "Exception")
        for line in self.text.splitlines():
            if any(k in line for k in keys) and "Fatal errors while" not in line and line.strip():
                return line.strip()
        return self.text.strip().splitlines()[-1] if self.text.strip() else f"error level {self.level}"


class SanyUnavailable(Exception):
    """JPype or the jar cannot run SANY."""


def sany_verdicts(files: list[Path], jar: str | Path, lib_dirs: list[Path] | None = None,
                  timeout_s: float = 600.0) -> dict[Path, SanyVerdict]:
    """SANY's verdict on every file (each parsed with its own folder, then ``lib_dirs``, searched)."""
    jar = Path(jar)
    extra = jar.parent / "CommunityModules.jar"
    todo = [[str(Path(f).resolve()), [str(Path(f).resolve().parent), *map(str, lib_dirs or [])]] for f in files]
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(jar), str(extra), json.dumps(todo)],
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise SanyUnavailable(f"SANY did not finish {len(files)} files in {timeout_s:.0f} s") from exc
    out: dict[Path, SanyVerdict] = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            out[Path(row["path"])] = SanyVerdict(row["level"], row["text"])
    if len(out) != len(files):
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise SanyUnavailable(f"SANY answered for {len(out)} of {len(files)} files: {' '.join(tail)}")
    return {Path(f): out[Path(f).resolve()] for f in files}


def find_jar() -> Path | None:
    """$TLA2TOOLS_JAR, else shared/tlc/tla2tools.jar beside or above the source tree (where CI puts it)."""
    env = os.environ.get("TLA2TOOLS_JAR")
    if env:
        return Path(env) if Path(env).is_file() else None
    for base in Path(__file__).resolve().parents:
        for cand in (base / "shared" / "tlc" / "tla2tools.jar", base.parent / "shared" / "tlc" / "tla2tools.jar"):
            if cand.is_file():
                return cand
    return None
