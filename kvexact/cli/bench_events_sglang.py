"""``kvexact bench events --runtime sglang``: SGLang event logs against RadixIndex, the search with and without
the stores' prune bounds side by side (a benchmark, not a test).

For each profile log (``random_event_log(seed, ops)``) it loads a fresh model twice (so no run profits from
the checker's caches filled by the other) and times the search alone, pruned and unpruned; it prints the
events, spec steps, seconds of each and their ratio.
"""

from __future__ import annotations

import time
from typing import Any


def sglang_rows(seed: int, logs: int, ops: int) -> list[dict[str, Any]]:
    from kvexact.conformance import sglang_events as se
    from kvexact.conformance.partial_trace import Search
    from kvexact.conformance.vllm_events import normalize
    from kvexact.reference.peers.sglang_stream import random_event_log

    rows = []
    for s in range(seed, seed + logs):
        raw = [(f"event {i}", e) for i, e in enumerate(random_event_log(s, ops), start=1)]
        events = list(normalize(raw))
        row: dict[str, Any] = {"seed": s, "events": len(raw)}
        for prune in (False, True):
            se.radix_model.cache_clear()
            t0 = time.process_time()
            model = se.event_model(events)
            t1 = time.process_time()
            search = Search(model, se.STORE_STEPS, (), view=se.radix_view if prune else None, mode="minimal",
                            prune=prune)
            mapping = se.SglangMapping(1)
            result = search.run(step for where, ev in events for step in mapping.expects(ev, where))
            t2 = time.process_time()
            tag = "pruned" if prune else "unpruned"
            row.update({f"{tag}_load_s": round(t1 - t0, 2), f"{tag}_s": round(t2 - t1, 2),
                        f"{tag}_ok": result.ok, "spec_steps": result.steps,
                        f"{tag}_max_candidates": result.max_candidates})
        row["speedup"] = round(row["unpruned_s"] / max(row["pruned_s"], 1e-9), 1)
        rows.append(row)
    return rows


def sglang_text(rows: list[dict[str, Any]], ops: int) -> str:
    out = [f"SGLang profile logs ({ops} operations each, page size 1, 1 request), minimal mode, CPU seconds of "
           "the search (model load apart):"]
    for r in rows:
        out.append(f"  seed {r['seed']}: {r['events']} events, {r['spec_steps']} spec steps; unpruned "
                   f"{r['unpruned_s']} s, pruned {r['pruned_s']} s: {r['speedup']}x (load {r['pruned_load_s']} s; "
                   f"{'accepted' if r['pruned_ok'] and r['unpruned_ok'] else 'REJECTED'}; candidates at most "
                   f"{r['pruned_max_candidates']})")
    un, pr = sum(r["unpruned_s"] for r in rows), sum(r["pruned_s"] for r in rows)
    out.append(f"  total: unpruned {un:.2f} s, pruned {pr:.2f} s: {un / max(pr, 1e-9):.1f}x")
    return "\n".join(out)
