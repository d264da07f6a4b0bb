"""``kvexact bench checker``: seconds and distinct states per second for each corpus model, the total,
and TLC's time beside it when a jar is given.

Invariant: exit 0 when every model matched TLC, 1 when one did not, 3 when the corpus is missing.
"""

from __future__ import annotations

import json
import os

import click


@click.command("checker")
@click.option("--workers", type=int, default=1, show_default=True)
@click.option("--only", multiple=True, help="corpus model id (repeatable)")
@click.option("--tlc-jar", default=None, help="also time TLC (or TLA2TOOLS_JAR)")
@click.option("--json", "json_path", default=None, help="write the figures as JSON")
def bench_checker(workers: int, only: tuple[str, ...], tlc_jar: str | None, json_path: str | None) -> int:
    """Time the embedded checker on the TLA+ corpus."""
    from kvexact.spec.checker.corpus import find_corpus, run_corpus

    root = find_corpus()
    if root is None:
        click.echo("kvexact bench checker: tla-corpus not found (set KVEXACT_TLA_CORPUS)", err=True)
        return 3
    jar = tlc_jar or os.environ.get("TLA2TOOLS_JAR")
    click.echo(f"{'model':46s} {'result':15s} {'distinct':>9s} {'generated':>10s} {'depth':>9s} {'seconds':>8s} "
               f"{'distinct/s':>10s}" + (f" {'TLC s':>7s}" if jar else ""))
    rows_out = []

    def show(row) -> None:
        r = row.result
        rate = r.distinct_states / r.seconds if r.seconds > 0 else 0.0
        tlc_s = ""
        entry = {"id": row.id, "result": row.result_word, "distinct": r.distinct_states,
                 "generated": r.generated_states, "depth": r.depth, "tlc_depth": row.expected.get("stateDepth"),
                 "seconds": round(r.seconds, 3), "distinct_per_s": round(rate, 1), "matches_tlc": row.ok}
        if jar:
            from kvexact.spec.check_cmd import CouldNotRun, run_tlc_engine
            folder = root / row.id
            try:
                t = run_tlc_engine(folder / row.expected["spec"], folder / row.expected["cfg"], jar, workers=1,
                                   max_states=None, max_depth=None)
                tlc_s = f" {t.seconds:7.2f}"
                entry["tlc_seconds"] = round(t.seconds, 3)
            except CouldNotRun as exc:
                tlc_s = "     n/a"
                entry["tlc_error"] = str(exc)
        depth = f"{r.depth}/{row.expected.get('stateDepth')}"
        click.echo(f"{row.id:46s} {row.result_word:15s} {r.distinct_states:9d} {r.generated_states:10d} "
                   f"{depth:>9s} {r.seconds:8.2f} {rate:10.0f}{tlc_s}" + ("" if row.ok else f"  MISMATCH: {row.why}"))
        rows_out.append(entry)

    rows = run_corpus(root, workers=workers, only=list(only) or None, on_row=show)
    total = sum(r.result.seconds for r in rows)
    distinct = sum(r.result.distinct_states for r in rows)
    click.echo(f"{'TOTAL':46s} {'':15s} {distinct:9d} {'':10s} {'':9s} {total:8.2f} {distinct / max(total, 1e-9):10.0f}")
    bad = [r for r in rows if not r.ok]
    click.echo(f"{len(rows) - len(bad)}/{len(rows)} models match TLC (workers={workers})")
    if json_path:
        with open(json_path, "w") as fh:
            json.dump({"models": rows_out, "total_seconds": round(total, 3), "workers": workers}, fh, indent=2)
    return 1 if bad else 0
