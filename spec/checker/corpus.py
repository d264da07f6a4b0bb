"""TLA+ validation corpora (tlaplus/Examples models with TLC's recorded results): locate one, run it
(each model in a child process with a CPU-time budget), compare with TLC, and render the bench table.

Invariant: a model matches when its result equals TLC's ``result`` and, where TLC recorded them,
its distinct and generated counts equal TLC's exactly; depth is reported beside TLC's ``stateDepth``
and never fails a model (TLC recorded it with several workers). A PROPERTY is checked like an
invariant: a model whose property the engine cannot check ends in an error, never a match.
"""

from __future__ import annotations

import contextlib
import enum
import io
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from kvexact.spec.checker.engine import check_model
from kvexact.spec.checker.result import ModelCheckResult, Outcome

RESULT_WORDS = {Outcome.SUCCESS: "success", Outcome.SAFETY: "safety failure", Outcome.DEADLOCK: "deadlock failure",
                Outcome.LIVENESS: "liveness failure", Outcome.EVALUATION: "evaluation error",
                Outcome.PARSE: "parse error", Outcome.CONFIG: "config error",
                Outcome.ASSUMPTION: "assumption failure", Outcome.ASSERT: "assert failure"}


class Verdict(enum.Enum):
    MATCH = "match"
    MISMATCH = "mismatch"
    OVER_CPU_LIMIT = "over the CPU limit"  # stopped at the CPU-time limit: never a match
    CRASHED = "crashed"


def find_corpus(name: str = "tla-corpus") -> Path | None:
    """$KVEXACT_TLA_CORPUS (tla-corpus) or $KVEXACT_TLA_EXAMPLES (tla-examples), else shared/<name>
    beside or inside the source tree."""
    env = os.environ.get("KVEXACT_TLA_CORPUS" if name == "tla-corpus" else "KVEXACT_TLA_EXAMPLES")
    if env:
        return Path(env) if (Path(env) / "corpus.json").exists() else None
    here = Path(__file__).resolve()
    for base in here.parents:
        for cand in (base / "shared" / name, base.parent / "shared" / name):
            if (cand / "corpus.json").exists():
                return cand
    return None


def corpus_lib_dirs(root: Path) -> list[Path]:
    """The library folders a corpus ships (``_modules/*``), as a user would pass them with --lib."""
    mods = root / "_modules"
    return sorted(p for p in mods.iterdir() if p.is_dir()) if mods.is_dir() else []


@attrs.frozen
class CorpusRow:
    id: str
    expected: dict[str, Any]
    result: ModelCheckResult
    verdict: Verdict
    why: str
    cpu_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.MATCH

    @property
    def result_word(self) -> str:
        return RESULT_WORDS.get(self.result.outcome, self.result.outcome.value)

    @property
    def rate(self) -> float:
        """Generated states per CPU-second."""
        return self.result.generated_states / self.cpu_s if self.cpu_s > 0 else 0.0


def compare_with_tlc(expected: dict, r: ModelCheckResult) -> tuple[Verdict, str]:
    word = RESULT_WORDS.get(r.outcome, r.outcome.value)
    if word != expected["result"]:
        return Verdict.MISMATCH, f"result {word} != TLC {expected['result']}" + (
            f" ({r.violation.message})" if r.violation else "")
    if expected["result"] == "success":
        if not r.complete:
            return Verdict.MISMATCH, "incomplete run"
        want = (expected.get("distinctStates"), expected.get("totalStates"))
        if want[0] is not None and (r.distinct_states, r.generated_states) != want:
            return Verdict.MISMATCH, (f"distinct {r.distinct_states} vs TLC {want[0]}, generated "
                                      f"{r.generated_states} vs TLC {want[1]}")
    return Verdict.MATCH, ""


def _check_quietly(folder: Path, m: dict, lib: list[Path], workers: int) -> ModelCheckResult:
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        return check_model(folder / m["spec"], folder / m["cfg"], workers=workers, coverage=False, lib=lib)


def _cpu_s() -> float:
    import resource
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _child(conn, folder: Path, m: dict, lib: list[Path], cpu_limit_s: float | None, workers: int) -> None:
    import resource
    import sys
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
    import signal
    hit: list[bool] = []

    def over(signum, frame):  # the soft limit: stop the search like Ctrl-C, keeping its counts
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)
        hit.append(True)
        raise KeyboardInterrupt

    if cpu_limit_s:
        limit = int(cpu_limit_s + _cpu_s()) + 1
        signal.signal(signal.SIGXCPU, over)
        resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 5))
    started = _cpu_s()
    r: ModelCheckResult | None = None
    with contextlib.suppress(KeyboardInterrupt):  # the limit came before the search began
        r = _check_quietly(folder, m, lib, workers)
    conn.send((r, _cpu_s() - started, bool(hit)))
    conn.close()


def run_model(root: Path, m: dict, *, lib: list[Path] | None = None, isolate: bool = True,
              cpu_limit_s: float | None = None, workers: int = 1) -> CorpusRow:
    """Check one corpus model (in a forked child with a CPU-time budget when ``isolate``)."""
    folder = root / m["id"]
    lib = corpus_lib_dirs(root) if lib is None else lib
    if not isolate:
        started = _cpu_s()
        r = _check_quietly(folder, m, lib, workers)
        cpu = _cpu_s() - started
    else:
        import multiprocessing
        ctx = multiprocessing.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(send, folder, m, lib, cpu_limit_s, workers))
        proc.start()
        send.close()
        got = None
        with contextlib.suppress(EOFError):
            got = recv.recv()
        proc.join()
        empty = ModelCheckResult(engine="embedded", outcome=Outcome.SUCCESS, complete=False)
        if got is not None and got[2]:  # stopped at the CPU limit: the counts so far, never a match
            return CorpusRow(m["id"], m, got[0] or empty, Verdict.OVER_CPU_LIMIT,
                             f"not finished within {cpu_limit_s:.0f} CPU-seconds", got[1])
        if got is None or got[0] is None:
            out_of_budget = proc.exitcode in (-24, -9) and cpu_limit_s is not None
            verdict = Verdict.OVER_CPU_LIMIT if out_of_budget else Verdict.CRASHED
            why = (f"not finished within {cpu_limit_s:.0f} CPU-seconds" if out_of_budget
                   else f"the child process ended with code {proc.exitcode}")
            return CorpusRow(m["id"], m, empty, verdict, why, float(cpu_limit_s or 0.0))
        r, cpu = got[0], got[1]
    r = attrs.evolve(r, seconds=cpu)
    verdict, why = compare_with_tlc(m, r)
    return CorpusRow(m["id"], m, r, verdict, why, cpu)


def load_manifest(root: Path) -> list[dict]:
    return json.loads((root / "corpus.json").read_text())["models"]


def run_corpus(root: Path | None = None, *, workers: int = 1, only: list[str] | None = None,
               on_row: Callable[[CorpusRow], None] | None = None, lib: list[Path] | None = None,
               isolate: bool = False, cpu_limit_s: float | None = None,
               on_start: Callable[[int, int, str], None] | None = None,
               where: Callable[[dict], bool] | None = None) -> list[CorpusRow]:
    root = root or find_corpus()
    if root is None:
        raise FileNotFoundError("tla-corpus not found (set KVEXACT_TLA_CORPUS)")
    models = [m for m in load_manifest(root)
              if (not only or m["id"] in only) and (where is None or where(m))]
    rows = []
    for i, m in enumerate(models):
        if on_start is not None:
            on_start(i, len(models), m["id"])
        started = time.monotonic()
        row = run_model(root, m, lib=lib, isolate=isolate, cpu_limit_s=cpu_limit_s, workers=workers)
        if not isolate:
            row = attrs.evolve(row, result=attrs.evolve(row.result, seconds=time.monotonic() - started))
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


# ----------------------------------------------------------------------------- the bench table

TABLE_HEAD = ("| model | PROPERTY | verdict vs TLC | distinct | generated | depth (TLC) | CPU s | generated/CPU-s |\n"
              "|---|---|---|---:|---:|---:|---:|---:|")


def table_line(row: CorpusRow) -> str:
    r = row.result
    verdict = row.verdict.value + (f": {row.why}" if row.why and row.verdict is not Verdict.MATCH else "")
    depth = f"{r.depth} ({row.expected.get('stateDepth')})"
    prop = "yes" if row.expected.get("has_property") else ""
    return (f"| {row.id} | {prop} | {verdict.replace('|', '/')} | {r.distinct_states} | {r.generated_states} | {depth} | "
            f"{row.cpu_s:.1f} | {row.rate:,.0f} |")


def totals(rows: list[CorpusRow]) -> dict[str, Any]:
    counts = {v.value: sum(1 for r in rows if r.verdict is v) for v in Verdict}
    gen = sum(r.result.generated_states for r in rows)
    cpu = sum(r.cpu_s for r in rows)
    finished = [r for r in rows if r.verdict not in (Verdict.OVER_CPU_LIMIT, Verdict.CRASHED)]
    fin_gen, fin_cpu = sum(r.result.generated_states for r in finished), sum(r.cpu_s for r in finished)
    return {"models": len(rows), **counts, "generated": gen, "distinct": sum(r.result.distinct_states for r in rows),
            "cpu_s": round(cpu, 1), "finished_generated": fin_gen, "finished_cpu_s": round(fin_cpu, 1),
            "generated_per_cpu_s": round(fin_gen / fin_cpu, 1) if fin_cpu else 0.0}


def render_table(rows: list[CorpusRow], slowest: int = 10) -> str:
    """The Markdown table, the slowest models named, and the totals."""
    lines = [TABLE_HEAD] + [table_line(r) for r in rows]
    t = totals(rows)
    lines.append("")
    lines.append("Slowest (CPU seconds): " + ", ".join(
        f"{r.id} {r.cpu_s:.0f}" for r in sorted(rows, key=lambda r: -r.cpu_s)[:slowest]) + ".")
    over = [r.id for r in rows if r.verdict is Verdict.OVER_CPU_LIMIT]
    if over:
        lines.append("")
        lines.append(f"Over the CPU budget ({len(over)}): " + ", ".join(over) + ".")
    props = [r for r in rows if r.expected.get("has_property")]
    lines.append("")
    lines.append(f"With PROPERTY: {len(props)} models, {sum(r.ok for r in props)} match TLC; without: "
                 f"{len(rows) - len(props)} models, {sum(r.ok for r in rows) - sum(r.ok for r in props)} match TLC.")
    lines.append("")
    lines.append(f"Totals: {t['models']} models; {t['match']} match TLC, {t['mismatch']} mismatch, "
                 f"{t['over the CPU limit']} over the CPU "
                 f"limit, {t['crashed']} crashed; {t['cpu_s']:,.0f} CPU-seconds in all; the finished models generated "
                 f"{t['finished_generated']:,} states in {t['finished_cpu_s']:,.0f} CPU-seconds ({t['generated_per_cpu_s']:,.0f} "
                 f"generated states per CPU-second).")
    return "\n".join(lines)


def depth_differences(rows: list[CorpusRow]) -> list[str]:
    return [f"{r.id}: depth {r.result.depth} (TLC recorded {r.expected['stateDepth']})" for r in rows
            if r.verdict is Verdict.MATCH and r.expected.get("stateDepth") is not None
            and r.result.depth != r.expected["stateDepth"]]


# ----------------------------------------------------------------------------- the results file

def row_record(row: CorpusRow, cpu_limit_s: float | None = None) -> dict[str, Any]:
    """One model's figures as a JSON object (a line of the results file)."""
    r = row.result
    return {"id": row.id, "verdict": row.verdict.value, "why": row.why, "outcome": r.outcome.value,
            "result": row.result_word, "distinct": r.distinct_states, "generated": r.generated_states,
            "depth": r.depth, "complete": r.complete, "cpu_s": round(row.cpu_s, 3), "cpu_limit_s": cpu_limit_s,
            "generated_per_cpu_s": round(row.rate, 1)}


def row_from_record(rec: dict[str, Any], expected: dict[str, Any]) -> CorpusRow:
    r = ModelCheckResult(engine="embedded", outcome=Outcome(rec["outcome"]), generated_states=rec["generated"],
                         distinct_states=rec["distinct"], depth=rec["depth"], complete=rec["complete"],
                         seconds=rec["cpu_s"])
    return CorpusRow(rec["id"], expected, r, Verdict(rec["verdict"]), rec["why"], rec["cpu_s"])


def append_record(path: Path, rec: dict[str, Any]) -> None:
    """Append one line and flush it to disk, so an interrupted run keeps every finished model."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_records(path: Path) -> dict[str, dict[str, Any]]:
    """The models already in a results file (the last line of a model wins; a torn last line is ignored)."""
    out: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            rec = json.loads(line)
            out[rec["id"]] = rec
    return out
