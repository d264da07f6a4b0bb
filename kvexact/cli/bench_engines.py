"""``kvexact bench checker --engines embedded,tlc``: the two engines side by side on the bench models.

Each model (by default every ``spec/*.cfg`` CI model of a shipped spec) is checked to the end by each
engine named; the table gives generated states, distinct states and generated states per CPU-second for
each, and the ratio embedded / TLC. The embedded engine's CPU time is that of its search (the model is
loaded, parsed and compiled first, untimed); TLC runs as ``java -cp JAR tlc2.TLC -workers 1`` in a child
process whose CPU time (user + system, every JVM thread) is read from ``getrusage(RUSAGE_CHILDREN)``; the
CPU time of the same JVM checking a one-state spec (start-up, parsing, class loading) is measured once and
subtracted, and is printed with the setup. A row whose two engines disagree on the counts or the verdict
says so, and the command then exits 1.

Invariant: a benchmark, not a test; nothing here asserts a time.
"""

from __future__ import annotations

import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ENGINES = ("embedded", "tlc")
_TRIVIAL = "---- MODULE Trivial ----\nVARIABLE x\nInit == x = 0\nNext == UNCHANGED x\n====\n"


class BenchError(Exception):
    """The benchmark cannot run as asked (an unknown engine, no jar, no java): exit 3 or 2."""


@dataclass
class EngineRun:
    """One engine on one model: its verdict, counts and CPU seconds of the search."""

    outcome: str
    generated: int
    distinct: int
    cpu_s: float

    @property
    def rate(self) -> float:
        return self.generated / self.cpu_s if self.cpu_s > 0 else 0.0


def parse_engines(text: str) -> tuple[str, ...]:
    """The engines named in ``--engines`` (comma-separated, each one of :data:`ENGINES`, no repeats)."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if n not in ENGINES]
    if not names or bad or len(set(names)) != len(names):
        raise BenchError(f"--engines: expected a comma-separated list of {', '.join(ENGINES)} without repeats, "
                         f"got {text!r}")
    return names


def bench_models(spec_dir: Path, only: tuple[str, ...] = (), suffix: str = ".cfg") -> list[tuple[Path, Path]]:
    """(spec, cfg) of each shipped spec's model with this suffix, in name order; ``only`` filters by name."""
    out = []
    for cfg in sorted(spec_dir.glob(f"*{suffix}")):
        name = cfg.name[: -len(suffix)]
        if "." in name or (only and not any(o in cfg.name for o in only)):
            continue
        spec = spec_dir / f"{name}.tla"
        if spec.exists():
            out.append((spec, cfg))
    return out


def run_embedded(spec: Path, cfg: Path, max_states: int | None = None) -> EngineRun:
    """The embedded engine on one model, in this process; the CPU time of the search only."""
    from kvexact.spec.checker.engine import check_loaded
    from kvexact.spec.checker.model import load_model

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    model = load_model(spec, cfg)
    t = time.process_time()
    r = check_loaded(model, max_states=max_states, coverage=False)
    cpu = time.process_time() - t
    return EngineRun(r.outcome.value, r.generated_states, r.distinct_states, cpu)


def _java_cpu(command: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done, cpu


def tlc_command(jar: str, spec: str, cfg: str, metadir: Path) -> list[str]:
    java = shutil.which("java")
    if java is None:
        raise BenchError("no 'java' executable on PATH: the TLC engine cannot run")
    return [java, "-XX:+UseParallelGC", "-cp", jar, "tlc2.TLC", "-tool", "-workers", "1", "-metadir", str(metadir),
            "-cleanup", "-noTE", "-config", cfg, spec]


def run_tlc_timed(jar: str, spec: Path, cfg: Path) -> EngineRun:
    """TLC with one worker on one model, in a child JVM working in a temporary copy of the spec's folder;
    the CPU time is the child's, start-up included (the caller subtracts :func:`tlc_startup`)."""
    from kvexact.spec.tlc import parse_tool_output

    with tempfile.TemporaryDirectory(prefix="kvexact-bench-") as tmp:
        work = Path(tmp) / "model"
        work.mkdir()
        for module in spec.parent.glob("*.tla"):
            shutil.copy2(module, work / module.name)
        shutil.copy2(cfg, work / "MC_bench.cfg")
        done, cpu = _java_cpu(tlc_command(jar, spec.name, "MC_bench.cfg", Path(tmp) / "meta"), work)
    r = parse_tool_output(done.stdout, done.returncode, stderr=done.stderr)
    return EngineRun(r.outcome.value, r.generated_states, r.distinct_states, cpu)


def tlc_startup(jar: str) -> float:
    """CPU seconds of TLC checking a one-state spec: the JVM's start-up, class loading and parsing."""
    with tempfile.TemporaryDirectory(prefix="kvexact-bench-") as tmp:
        work = Path(tmp)
        (work / "Trivial.tla").write_text(_TRIVIAL)
        (work / "Trivial.cfg").write_text("INIT Init\nNEXT Next\n")
        done, cpu = _java_cpu(tlc_command(jar, "Trivial.tla", "Trivial.cfg", work / "meta"), work)
    if done.returncode != 0:
        raise BenchError(f"TLC could not check a one-state spec (exit {done.returncode}): "
                         + " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:]))
    return cpu


def java_version() -> str:
    java = shutil.which("java")
    if java is None:
        return "no java"
    done = subprocess.run([java, "-version"], capture_output=True, text=True)
    return (done.stderr or done.stdout).strip().splitlines()[0] if (done.stderr or done.stdout) else "java"


def setup_lines(jar: str | None, startup: float | None, engines: tuple[str, ...]) -> list[str]:
    lines = [f"python {platform.python_version()} ({platform.python_implementation()}), "
             f"{platform.machine()}, {os.cpu_count()} CPUs, load average "
             f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}"]
    if "tlc" in engines:
        lines.append(f"TLC: {jar}, {java_version()}, java -XX:+UseParallelGC tlc2.TLC -workers 1; "
                     f"JVM start-up (a one-state spec) {startup:.2f} CPU-s, subtracted from each TLC time")
    lines.append("embedded: the search only (loading and compiling the model not timed); "
                 "CPU time = user + system of every thread")
    return lines


def render(rows: list[tuple[str, dict[str, EngineRun], str]], engines: tuple[str, ...]) -> str:
    """The Markdown table: one row per model, each engine's counts and rate, then the ratio."""
    head = ["model"]
    for e in engines:
        head += [f"{e} generated", f"{e} distinct", f"{e} CPU-s", f"{e} generated/CPU-s"]
    both = set(engines) == set(ENGINES)
    if both:
        head.append("embedded / TLC")
    head.append("note")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" + "---:|" * (len(head) - 2) + "---|"]
    for name, runs, note in rows:
        cells = [name]
        for e in engines:
            r = runs.get(e)
            cells += ([f"{r.generated:,}", f"{r.distinct:,}", f"{r.cpu_s:.2f}", f"{r.rate:,.0f}"] if r
                      else ["-"] * 4)
        if both:
            a, b = runs.get("embedded"), runs.get("tlc")
            cells.append(ratio_text(a.rate / b.rate) if a and b and a.rate > 0 and b.rate > 0 else "-")
        cells.append(note)
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def ratio_text(ratio: float) -> str:
    """``0.25 (1/4.0)`` below 1, ``2.50`` above."""
    return f"{ratio:.3f} (1/{1 / ratio:.1f})" if ratio < 1 else f"{ratio:.2f}"


DISAGREE = "engines disagree: "


def row_note(runs: dict[str, EngineRun], max_states: int | None) -> str:
    """The row's note: a disagreement (which fails the run), or that the embedded engine was stopped by
    the bound (its counts then differ from TLC's by design, and are not compared)."""
    a = runs.get("embedded")
    if max_states is not None and a is not None and a.distinct >= max_states:
        return f"embedded stopped at {max_states:,} distinct states; rates compared, counts not"
    return disagreement(runs)


def disagreement(runs: dict[str, EngineRun]) -> str:
    a, b = runs.get("embedded"), runs.get("tlc")
    if a is None or b is None:
        return ""
    diffs = []
    if a.outcome != b.outcome:
        diffs.append(f"result {a.outcome} vs {b.outcome}")
    if (a.generated, a.distinct) != (b.generated, b.distinct):
        diffs.append(f"counts {a.generated}/{a.distinct} vs {b.generated}/{b.distinct}")
    return DISAGREE + "; ".join(diffs) if diffs else ""
