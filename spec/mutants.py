"""Seeded-bug mutants and non-vacuity witnesses of the shipped specs, run as expected violations.

Invariant of :func:`run_mutants`: a mutant counts as killed only when its model check ends in a
violation of exactly what its first comment names (``VIOLATES: Name``), within the time limit: a safety
violation (exit 12) of that invariant, or, when its cfg lists Name as a PROPERTY, a property violation
(exit 13: a lasso, an action property or an initial-state property) of that property; a survivor, a
deadlock, another invariant or property, an error or a slow run is not a kill, and the exit code is 0
only at a 100% kill rate. Witnesses (``spec/witnesses/<Spec>_<What>.cfg``, checked
against ``spec/<Spec>.tla``) must likewise end in a violation of their negated-witness invariant.
Each model runs in its own child process (both cores are used), so a hung check can be killed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs

from kvexact.spec import spec_dir

MUTANT_TIME_LIMIT_S = 10.0
LIVENESS_TIME_LIMIT_S = 120.0  # a lasso is searched on the complete state graph (a witness-sized search)
WITNESS_TIME_LIMIT_S = 60.0  # a witness is a search of the CI model (each CI model checks in < 60 s)
_STARTUP_ALLOWANCE_S = 30.0  # interpreter start and spec compilation in a busy child, on top of the limit


@attrs.frozen
class ExpectedViolation:
    """One model that must be violated: a mutant, or a witness of a shipped spec."""

    name: str
    kind: str  # "mutant" or "witness"
    spec: Path
    cfg: Path
    invariant: str  # the invariant, or the PROPERTY, that must be violated

    @property
    def is_property(self) -> bool:
        """Named under PROPERTY in its cfg: it dies of exit 13 after the complete state graph."""
        from kvexact.spec.checker.cfg import parse_cfg
        return self.invariant in parse_cfg(self.cfg).properties


@attrs.frozen
class Verdict:
    model: ExpectedViolation
    killed: bool
    outcome: str  # "killed", "survived", "wrong-invariant", "deadlock", "error", "too-slow", "timeout"
    detail: str
    seconds: float
    depth: int = 0
    distinct_states: int = 0


def discover_mutants(folder: Path | None = None) -> list[ExpectedViolation]:
    """Every ``<Spec>_<bug>.tla`` with its ``.cfg`` in the mutants folder; the first ``VIOLATES:``
    comment names the invariant it must break (a mutant without one is an error)."""
    folder = folder or spec_dir() / "mutants"
    found = []
    for tla in sorted(folder.glob("*.tla")):
        m = re.search(r"VIOLATES: (\w+)", tla.read_text())
        if m is None:
            raise ValueError(f"{tla}: no 'VIOLATES: <Invariant>' comment naming the invariant it must break")
        cfg = tla.with_suffix(".cfg")
        if not cfg.is_file():
            raise ValueError(f"{tla}: its model {cfg.name} is missing")
        found.append(ExpectedViolation(tla.stem, "mutant", tla, cfg, m.group(1)))
    return found


def discover_witnesses(folder: Path | None = None) -> list[ExpectedViolation]:
    """Every ``witnesses/<Spec>_<What>.cfg``; its first comment names the invariant to violate."""
    folder = folder or spec_dir() / "witnesses"
    found = []
    for cfg in sorted(folder.glob("*.cfg")):
        m = re.search(r"(\w+) must be VIOLATED", cfg.read_text())
        if m is None:
            raise ValueError(f"{cfg}: no '<Invariant> must be VIOLATED' comment")
        spec = folder.parent / (cfg.stem.split("_", 1)[0] + ".tla")
        found.append(ExpectedViolation(cfg.stem, "witness", spec, cfg, m.group(1)))
    return found


_CHILD = """
import json, sys
from pathlib import Path
engine, spec, cfg, jar = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] or None
if engine == "tlc":
    from kvexact.spec.tlc import run_tlc
    r = run_tlc(spec, cfg, jar)
else:
    from kvexact.spec.checker import check_model
    r = check_model(spec, cfg, coverage=False)
v = r.violation
print(json.dumps({"exit": r.exit_code, "kind": v.kind if v else None, "name": v.name if v else None,
                  "message": (v.message if v else "")[:300], "seconds": r.seconds, "depth": r.depth,
                  "distinct": r.distinct_states}))
"""


def check_expected(model: ExpectedViolation, engine: str = "embedded", tlc_jar: str | None = None,
                   time_limit_s: float = MUTANT_TIME_LIMIT_S) -> Verdict:
    """Check one model in a child process and judge it against the violation it must show."""
    start = time.perf_counter()
    command = [sys.executable, "-c", _CHILD, engine, str(model.spec), str(model.cfg), tlc_jar or ""]
    if model.is_property:
        time_limit_s = max(time_limit_s, LIVENESS_TIME_LIMIT_S)
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=time_limit_s + _STARTUP_ALLOWANCE_S)
    except subprocess.TimeoutExpired:
        return Verdict(model, False, "timeout", f"no result within {time_limit_s + _STARTUP_ALLOWANCE_S:.0f} s",
                       time.perf_counter() - start)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        return Verdict(model, False, "error", f"the check crashed: {tail}", time.perf_counter() - start)
    r = json.loads(lines[-1])
    seconds = float(r["seconds"])
    common = {"seconds": seconds, "depth": r["depth"], "distinct_states": r["distinct"]}
    if r["exit"] == 0:
        return Verdict(model, False, "survived", "no violation found", **common)
    if r["exit"] == 11:
        return Verdict(model, False, "deadlock", "ended in a deadlock, not a safety violation", **common)
    liveness = model.is_property
    expected = (13, ("temporal", "action-property", "property-init")) if liveness else (12, ("invariant",))
    if r["exit"] != expected[0] or r["kind"] not in expected[1]:
        return Verdict(model, False, "error", f"exit {r['exit']}: {r['kind']} {r['name']}: {r['message']}",
                       **common)
    if r["name"] != model.invariant:
        return Verdict(model, False, "wrong-invariant", f"violated {r['name']}, expected {model.invariant}",
                       **common)
    if seconds > time_limit_s:
        return Verdict(model, False, "too-slow", f"violation found after {seconds:.1f} s > {time_limit_s:.0f} s",
                       **common)
    what = f"{r['kind']} property" if liveness else "invariant"
    return Verdict(model, True, "killed", f"{what} {model.invariant} violated at depth {r['depth']}", **common)


def check_all(models: list[ExpectedViolation], *, engine: str = "embedded", tlc_jar: str | None = None,
              workers: int = 2, time_limit_s: float = MUTANT_TIME_LIMIT_S) -> list[Verdict]:
    """Judge every model, ``workers`` child processes at a time, in the given order."""
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(lambda m: check_expected(m, engine, tlc_jar, time_limit_s), models))


def run_mutants(*, engine: str = "embedded", tlc_jar: str | None = None, workers: int = 2,
                select: str | None = None, witnesses: bool = True,
                echo: Callable[[str], None] = print) -> int:
    """Run every mutant (and, by default, every witness), print one line each and the kill rate.

    Returns 0 only when every mutant is killed by its named invariant within the limit (and every
    witness is violated); 1 otherwise; 3 when there is nothing to run.
    """
    mutants = [m for m in discover_mutants() if select is None or select in m.name]
    extra = discover_witnesses() if witnesses and select is None else []
    if not mutants:
        echo("kvexact check --mutants: no mutant matches" if select else "kvexact check --mutants: no mutants found")
        return 3
    verdicts = check_all(mutants, engine=engine, tlc_jar=tlc_jar, workers=workers)
    verdicts += check_all(extra, engine=engine, tlc_jar=tlc_jar, workers=workers,
                          time_limit_s=WITNESS_TIME_LIMIT_S)
    for v in verdicts:
        mark = "killed " if v.killed else v.outcome.upper()
        if v.model.kind == "witness":
            mark = "reached" if v.killed else "NOT REACHED"
        echo(f"{mark:12s} {v.model.name:48s} {v.model.invariant:30s} {v.seconds:6.2f} s  {v.detail}")
    killed = sum(v.killed for v in verdicts if v.model.kind == "mutant")
    reached = sum(v.killed for v in verdicts if v.model.kind == "witness")
    echo(f"Mutants killed: {killed}/{len(mutants)} ({100.0 * killed / len(mutants):.0f}%)")
    if extra:
        echo(f"Witnesses reached: {reached}/{len(extra)}")
    return 0 if killed == len(mutants) and reached == len(extra) else 1
