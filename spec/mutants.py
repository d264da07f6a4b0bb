"""Seeded-bug mutants and non-vacuity witnesses of the shipped specs, run as expected violations.

Invariant of :func:`run_mutants`: a mutant counts as killed only when its model check ends in a safety
violation (exit 12) of exactly the invariant its first comment names (``VIOLATES: Name``), or, when its
cfg lists Name as a PROPERTY, in a property violation (exit 13: a lasso, an action property or an
initial-state property) of that property, within the first :data:`MUTANT_STATE_LIMIT` distinct states
of the search (:data:`LIVENESS_STATE_LIMIT` for a property, judged on the complete graph) (the embedded engine's bound; TLC has
no such option and runs to the end); a survivor, a deadlock, another invariant,
an error or a search that reaches the bound first is not a kill, and the exit code is 0 only at a 100%
kill rate. Witnesses (``spec/witnesses/<Spec>_<What>.cfg``, checked against ``spec/<Spec>.tla``) must
likewise end in a violation of their negated-witness invariant, within :data:`WITNESS_STATE_LIMIT`.
The bounds count work, not seconds, so a verdict is the same on a busy machine. Each model runs in its
own child process (both cores are used); Ctrl-C stops every child and the run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs

from kvexact.spec import CI_STATE_BUDGET, spec_dir

# A mutant is one edit of a CI model; its bug must show within the first MUTANT_STATE_LIMIT distinct states
# of the breadth-first search. Derivation (`kvexact bench specs --models mutants`, docs/specs.md "Mutants and
# witnesses"): the costliest kill of the shipped mutants (KVAllocation_DuplicateIdentity) takes
# MUTANT_KILL_MAX distinct states; the bound is four times that, room for the specs to grow.
MUTANT_KILL_MAX = 3_188
MUTANT_STATE_LIMIT = 4 * MUTANT_KILL_MAX
# A witness is a search of a CI model, so it is reached within that model's state space: the bound is the
# CI budget (every CI model has at most CI_STATE_BUDGET distinct states, tests/spec/test_specs_models.py).
WITNESS_STATE_LIMIT = CI_STATE_BUDGET
# A liveness mutant is judged on the complete state graph (its lasso is found only after the search
# ends), so its bound is the whole CI model: every liveness model is a CI model of at most CI_STATE_BUDGET.
LIVENESS_STATE_LIMIT = CI_STATE_BUDGET


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
    outcome: str  # "killed", "survived", "wrong-invariant", "deadlock", "error", "not-within-bound"
    detail: str
    seconds: float  # reported, never judged
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
from kvexact.spec import spec_dir
engine, spec, cfg, jar = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] or None
lib = [spec_dir()]  # a mutant in spec/mutants/ instantiates ExactHistory from spec/
if engine == "tlc":
    from kvexact.spec.tlc import run_tlc
    r = run_tlc(spec, cfg, jar, lib=lib)
else:
    from kvexact.spec.checker import check_model
    r = check_model(spec, cfg, coverage=False, max_states=int(sys.argv[5]), lib=lib)
v = r.violation
print(json.dumps({"exit": r.exit_code, "kind": v.kind if v else None, "name": v.name if v else None,
                  "message": (v.message if v else "")[:300], "seconds": r.seconds, "depth": r.depth,
                  "distinct": r.distinct_states, "complete": r.complete}))
"""


class _Children:
    """The child processes of running checks, so that Ctrl-C in the parent stops every one of them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live: set[subprocess.Popen] = set()
        self.stopping = False

    def run(self, command: list[str]) -> tuple[int, str, str]:
        with self.lock:
            if self.stopping:
                raise KeyboardInterrupt
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.live.add(proc)
        try:
            out, err = proc.communicate()
        finally:
            with self.lock:
                self.live.discard(proc)
        return proc.returncode, out, err

    def stop_all(self) -> None:
        with self.lock:
            self.stopping = True
            for proc in self.live:
                proc.kill()


def check_expected(model: ExpectedViolation, engine: str = "embedded", tlc_jar: str | None = None,
                   state_limit: int = MUTANT_STATE_LIMIT, children: _Children | None = None) -> Verdict:
    """Check one model in a child process, at most ``state_limit`` distinct states (embedded engine; a
    liveness mutant at least :data:`LIVENESS_STATE_LIMIT`), and judge it against the violation it must show."""
    if model.is_property:
        state_limit = max(state_limit, LIVENESS_STATE_LIMIT)
    command = [sys.executable, "-c", _CHILD, engine, str(model.spec), str(model.cfg), tlc_jar or "",
               str(state_limit)]
    returncode, stdout, stderr = (children or _Children()).run(command)
    lines = stdout.strip().splitlines()
    if returncode != 0 or not lines:
        tail = " | ".join((stderr or stdout).strip().splitlines()[-3:])
        return Verdict(model, False, "error", f"the check crashed: {tail}", 0.0)
    r = json.loads(lines[-1])
    common = {"seconds": float(r["seconds"]), "depth": r["depth"], "distinct_states": r["distinct"]}
    if r["exit"] == 0 and not r.get("complete", True):
        return Verdict(model, False, "not-within-bound",
                       f"no violation within the first {state_limit:,} distinct states", **common)
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
    what = f"{r['kind']} property" if liveness else "invariant"
    return Verdict(model, True, "killed", f"{what} {model.invariant} violated at depth {r['depth']} after "
                   f"{r['distinct']:,} distinct states", **common)


def check_all(models: list[ExpectedViolation], *, engine: str = "embedded", tlc_jar: str | None = None,
              workers: int = 2, state_limit: int = MUTANT_STATE_LIMIT,
              on_verdict: Callable[[Verdict], None] = lambda _v: None) -> list[Verdict]:
    """Judge every model, ``workers`` child processes at a time, in the given order (``on_verdict`` sees
    each verdict in that order as it is known). On Ctrl-C every child is killed and KeyboardInterrupt
    propagates."""
    children = _Children()
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    futures = [pool.submit(check_expected, m, engine, tlc_jar, state_limit, children) for m in models]
    verdicts: list[Verdict] = []
    try:
        for future in futures:
            verdicts.append(future.result())
            on_verdict(verdicts[-1])
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        children.stop_all()
        raise
    finally:
        pool.shutdown(wait=True)
    return verdicts


def run_mutants(*, engine: str = "embedded", tlc_jar: str | None = None, workers: int = 2,
                select: str | None = None, witnesses: bool = True,
                echo: Callable[[str], None] = print) -> int:
    """Run every mutant (and, by default, every witness), print one line each and the kill rate.

    Returns 0 only when every mutant is killed by its named invariant within the bound (and every
    witness is violated); 1 otherwise; 3 when there is nothing to run; 130 after Ctrl-C (the models
    judged until then are printed).
    """
    mutants = [m for m in discover_mutants() if select is None or select in m.name]
    extra = discover_witnesses() if witnesses and select is None else []
    if not mutants:
        echo("kvexact check --mutants: no mutant matches" if select else "kvexact check --mutants: no mutants found")
        return 3

    shown: list[Verdict] = []

    def show(v: Verdict) -> None:
        shown.append(v)
        mark = "killed " if v.killed else v.outcome.upper()
        if v.model.kind == "witness":
            mark = "reached" if v.killed else "NOT REACHED"
        echo(f"{mark:12s} {v.model.name:48s} {v.model.invariant:30s} {v.distinct_states:9,d} states "
             f"{v.seconds:6.2f} s  {v.detail}")

    verdicts: list[Verdict] = []
    try:
        verdicts += check_all(mutants, engine=engine, tlc_jar=tlc_jar, workers=workers, on_verdict=show)
        verdicts += check_all(extra, engine=engine, tlc_jar=tlc_jar, workers=workers,
                              state_limit=WITNESS_STATE_LIMIT, on_verdict=show)
    except KeyboardInterrupt:
        echo(f"Interrupted (Ctrl-C): {len(shown)} of {len(mutants) + len(extra)} models judged before it (the "
             "lines above); no kill rate")
        return 130
    killed = sum(v.killed for v in verdicts if v.model.kind == "mutant")
    reached = sum(v.killed for v in verdicts if v.model.kind == "witness")
    echo(f"Mutants killed: {killed}/{len(mutants)} ({100.0 * killed / len(mutants):.0f}%)")
    if extra:
        echo(f"Witnesses reached: {reached}/{len(extra)}")
    return 0 if killed == len(mutants) and reached == len(extra) else 1
