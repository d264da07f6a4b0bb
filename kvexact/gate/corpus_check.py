"""Gate check ``checker-corpus`` (selected explicitly): the embedded checker reproduces TLC on every
model of the TLA+ validation corpus (result; for successes exact distinct and generated counts).

Invariant: PASSED only when every corpus model matches; COULD_NOT_RUN when the corpus is absent.
"""

from __future__ import annotations

from kvexact.gate.framework import CheckCouldNotRun, CheckResult, GateCheck, GateContext, Verdict


def checker_corpus(ctx: GateContext) -> CheckResult:
    from kvexact.spec.checker.corpus import find_corpus, run_corpus

    root = find_corpus()
    if root is None:
        raise CheckCouldNotRun("tla-corpus not found: set KVEXACT_TLA_CORPUS to the folder with corpus.json")
    rows = run_corpus(root, workers=1, on_row=lambda row: ctx.status(
        f"{row.id}: {'ok' if row.ok else 'MISMATCH'} ({row.result.seconds:.1f}s)"))
    bad = [r for r in rows if not r.ok]
    figures = {
        "models": len(rows),
        "matching": len(rows) - len(bad),
        "seconds": round(sum(r.result.seconds for r in rows), 2),
        "per_model": {r.id: {"result": r.result_word, "distinct": r.result.distinct_states,
                             "generated": r.result.generated_states, "depth": r.result.depth,
                             "tlc_depth": r.expected.get("stateDepth"), "seconds": round(r.result.seconds, 3)}
                      for r in rows},
    }
    depth_notes = [f"{r.id}: depth {r.result.depth} (TLC recorded {r.expected['stateDepth']})" for r in rows
                   if r.expected.get("stateDepth") is not None and r.result.depth != r.expected["stateDepth"]]
    detail = "; ".join(f"{r.id}: {r.why}" for r in bad) or f"all {len(rows)} corpus models match TLC"
    if depth_notes:
        detail += " (depth differs, not failed: " + "; ".join(depth_notes) + ")"
    return CheckResult(Verdict.FAILED if bad else Verdict.PASSED, figures, detail)


def checker_properties(ctx: GateContext) -> CheckResult:
    """Every tla-examples model with PROPERTY/PROPERTIES (``has_property``): TLC's result, and TLC's
    counts for a success; the figures name each model's result."""
    from kvexact.spec.checker.corpus import find_corpus, run_corpus

    root = find_corpus("tla-examples")
    if root is None:
        raise CheckCouldNotRun("tla-examples not found: set KVEXACT_TLA_EXAMPLES to the folder with corpus.json")
    rows = run_corpus(root, workers=1, where=lambda m: bool(m.get("has_property")), on_row=lambda row: ctx.status(
        f"{row.id}: {'ok' if row.ok else 'MISMATCH'} ({row.result.seconds:.1f}s)"))
    bad = [r for r in rows if not r.ok]
    figures = {"models": len(rows), "matching": len(rows) - len(bad),
               "per_model": {r.id: {"result": r.result_word, "tlc": r.expected["result"],
                                    "distinct": r.result.distinct_states, "seconds": round(r.result.seconds, 2)}
                             for r in rows}}
    detail = "; ".join(f"{r.id}: {r.why}" for r in bad) or f"all {len(rows)} PROPERTY models match TLC"
    return CheckResult(Verdict.FAILED if bad else Verdict.PASSED, figures, detail)


CHECKS = [GateCheck("checker-corpus", "spec",
                    "embedded TLA+ checker reproduces TLC's results and counts on the tlaplus/Examples corpus",
                    checker_corpus, level="deep"),
          GateCheck("checker-properties", "spec",
                    "embedded checker gives TLC's result on every tla-examples model with a PROPERTY",
                    checker_properties, level="deep")]
