"""The TLA+ validation corpus (tlaplus/Examples models with TLC's recorded counts): locate it, run it,
compare with TLC.

Invariant: a model passes when the embedded result equals TLC's ``result`` and, for successes, the
distinct and generated counts equal TLC's exactly; depth is reported beside TLC's ``stateDepth`` and
never fails a model (TLC recorded it with several workers).
"""

from __future__ import annotations

import contextlib
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
                Outcome.EVALUATION: "evaluation error", Outcome.PARSE: "parse error", Outcome.CONFIG: "config error",
                Outcome.ASSUMPTION: "assumption failure", Outcome.ASSERT: "assert failure"}


def find_corpus() -> Path | None:
    """$KVEXACT_TLA_CORPUS, else shared/tla-corpus beside or inside the source tree."""
    env = os.environ.get("KVEXACT_TLA_CORPUS")
    if env:
        return Path(env) if (Path(env) / "corpus.json").exists() else None
    here = Path(__file__).resolve()
    for base in here.parents:
        for cand in (base / "shared" / "tla-corpus", base.parent / "shared" / "tla-corpus"):
            if (cand / "corpus.json").exists():
                return cand
    return None


@attrs.frozen
class CorpusRow:
    id: str
    expected: dict[str, Any]
    result: ModelCheckResult
    ok: bool
    why: str

    @property
    def result_word(self) -> str:
        return RESULT_WORDS.get(self.result.outcome, self.result.outcome.value)


def compare_with_tlc(expected: dict, r: ModelCheckResult) -> tuple[bool, str]:
    word = RESULT_WORDS.get(r.outcome, r.outcome.value)
    if word != expected["result"]:
        return False, f"result {word} != TLC {expected['result']}" + (f" ({r.violation.message})"
                                                                     if r.violation else "")
    if expected["result"] == "success":
        if not r.complete:
            return False, "incomplete run"
        if r.distinct_states != expected["distinctStates"] or r.generated_states != expected["totalStates"]:
            return False, (f"distinct {r.distinct_states} vs TLC {expected['distinctStates']}, generated "
                           f"{r.generated_states} vs TLC {expected['totalStates']}")
    return True, ""


def run_corpus(root: Path | None = None, *, workers: int = 1, only: list[str] | None = None,
               on_row: Callable[[CorpusRow], None] | None = None) -> list[CorpusRow]:
    root = root or find_corpus()
    if root is None:
        raise FileNotFoundError("tla-corpus not found (set KVEXACT_TLA_CORPUS)")
    manifest = json.loads((root / "corpus.json").read_text())
    rows = []
    for m in manifest["models"]:
        if only and m["id"] not in only:
            continue
        folder = root / m["id"]
        started = time.monotonic()
        with contextlib.redirect_stderr(io.StringIO()):  # the models' Print/PrintT output is not ours to show
            r = check_model(folder / m["spec"], folder / m["cfg"], workers=workers, coverage=False)
        r = attrs.evolve(r, seconds=time.monotonic() - started)
        ok, why = compare_with_tlc(m, r)
        row = CorpusRow(m["id"], m, r, ok, why)
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows
