"""The corpus totals line counts only the finished models' generated states."""
from kvexact.spec.checker.corpus import render_table, row_from_record


def _rec(mid: str, verdict: str, generated: int, cpu_s: float) -> dict:
    return {"id": mid, "verdict": verdict, "why": "", "outcome": "success", "result": "success",
            "distinct": generated // 2, "generated": generated, "depth": 3, "complete": verdict == "match",
            "cpu_s": cpu_s}


def test_the_totals_line_leaves_out_models_over_the_budget():
    rows = [row_from_record(_rec("A", "match", 1000, 2.0), {"result": "success"}),
            row_from_record(_rec("B", "over the CPU limit", 50000, 10.0), {"result": "success"})]
    totals = [ln for ln in render_table(rows).splitlines() if ln.startswith("Totals:")]
    assert totals == ["Totals: 2 models; 1 match TLC, 0 mismatch, 1 over the CPU limit, 0 crashed; 12 CPU-seconds "
                      "in all; the finished models generated 1,000 states in 2 CPU-seconds (500 generated states "
                      "per CPU-second)."]
