"""``kvexact bench events``: how long a long vLLM event log takes to validate, and how the candidate set grows.

A benchmark, not a test: it records a log from the vLLM profile under a random workload (one shared token
stream, deterministic seed), writes it as the publisher's MessagePack batches, then times reading and
validating it against KVAllocation. It prints events, seconds, events per second and the candidate-set sizes
(largest, and how many steps ended with 1, 2-9, 10-99, 100+ candidates) for each mode asked for.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import click


def _growth(sizes: tuple[int, ...]) -> dict[str, int]:
    bands = {"1": 0, "2-9": 0, "10-99": 0, "100+": 0}
    for n in sizes:
        bands["1" if n == 1 else "2-9" if n < 10 else "10-99" if n < 100 else "100+"] += 1
    return bands


@click.command()
@click.option("--events", "target", type=click.IntRange(1), default=100_000, show_default=True,
              help="Record operations until the log has at least this many events.")
@click.option("--modes", default="minimal", show_default=True, help="Comma-separated: minimal, exhaustive.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.option("--runtime", type=click.Choice(["vllm", "sglang"]), default="vllm", show_default=True,
              help="sglang: --logs profile logs of --ops operations against RadixIndex, the search with and "
                   "without its prune bounds side by side (--events and --modes do not apply).")
@click.option("--logs", type=click.IntRange(1), default=4, show_default=True)
@click.option("--ops", type=click.IntRange(1), default=36, show_default=True)
def bench_events(target: int, modes: str, seed: int, as_json: bool, runtime: str, logs: int, ops: int) -> int:
    """Validate a TARGET-event vLLM log recorded from the profile; print the time and the candidate growth."""
    if runtime == "sglang":
        from kvexact.cli.bench_events_sglang import sglang_rows, sglang_text

        sg = sglang_rows(seed, logs, ops)
        click.echo(json.dumps(sg, indent=1) if as_json else sglang_text(sg, ops))
        return 0 if all(r["pruned_ok"] and r["unpruned_ok"] for r in sg) else 1
    from kvexact.conformance import vllm_events as ve
    from kvexact.reference.peers import vllm_wire as wire

    started = time.perf_counter()
    batches = wire.random_stream_log(seed, int(target * 1.7) + 10)
    while sum(len(b) for b in batches) < target:
        batches += wire.random_stream_log(seed + len(batches), target // 2 + 10)
    record_s = time.perf_counter() - started
    rows = []
    with tempfile.TemporaryDirectory(prefix="kvexact-events-") as tmp:
        path = Path(tmp) / "events.msgpack"
        path.write_bytes(b"".join(wire.encode_batch(b, ts=0.0) for b in batches))
        for mode in [m.strip() for m in modes.split(",") if m.strip()]:
            t0 = time.perf_counter()
            events = ve.read_events(path)
            t1 = time.perf_counter()
            result = ve.validate_events(events, blocks=8, requests=2, mode=mode)
            t2 = time.perf_counter()
            rows.append({"mode": mode, "events": len(events), "accepted": result.ok, "spec_steps": result.steps,
                         "read_s": round(t1 - t0, 2), "validate_s": round(t2 - t1, 2),
                         "events_per_s": round(len(events) / max(t2 - t0, 1e-9)),
                         "max_candidates": result.max_candidates, "growth": _growth(result.growth)})
    if as_json:
        click.echo(json.dumps({"record_s": round(record_s, 2), "runs": rows}, indent=1))
    else:
        click.echo(f"recorded in {record_s:.1f} s (vLLM profile: 8 usable blocks, block size 2, 2 running requests)")
        for r in rows:
            click.echo(f"{r['mode']:>10}: {r['events']} events, {r['spec_steps']} spec steps, "
                       f"{'accepted' if r['accepted'] else 'REJECTED'}; read {r['read_s']} s + validate "
                       f"{r['validate_s']} s = {r['events_per_s']} events/s; candidates at most "
                       f"{r['max_candidates']}, per step {r['growth']}")
    return 0 if all(r["accepted"] for r in rows) else 1
