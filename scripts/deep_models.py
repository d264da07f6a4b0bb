"""Run every spec/*.deep.cfg to exhaustion with TLC and record what it found.

    python scripts/deep_models.py [--workers auto] [--only KVAllocation] [--timeout-s 3600]
    python scripts/deep_models.py --from-logs DIR    # read saved `tlc2.TLC -tool` outputs (DIR/<Spec>.log)

With --from-logs, DIR/<Spec>.rc holds "EXIT_CODE [WALL_SECONDS]" and DIR/<Spec>.time, when present, the
line `/usr/bin/time -f "%U %S %e %M"` wrote (user and system CPU seconds, wall seconds, peak RSS in KiB).

Writes scripts/results/deep-models.json: per model its result, distinct and generated states, depth,
wall and CPU seconds, TLC workers, and whether the search was exhaustive (a model stopped by the timeout is
recorded as such, never as a result). The table in docs/results/deep-models.md is this file's data.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import resource
import sys
import time
from pathlib import Path

from kvexact.spec import spec_dir
from kvexact.spec.tlc import TlcFailed, find_jar, parse_tool_output, run_tlc, tool_messages

RESULTS = Path(__file__).resolve().parent / "results" / "deep-models.json"


def deep_models() -> list[str]:
    return sorted(p.name.removesuffix(".deep.cfg") for p in spec_dir().glob("*.deep.cfg"))


def module_of(name: str) -> str:
    """The spec a deep model checks: ``RadixIndex.page2`` (``RadixIndex.page2.deep.cfg``) checks ``RadixIndex``."""
    return name.split(".", 1)[0]


def _workers_and_wall(text: str) -> tuple[int | None, float | None]:
    """TLC's own figures: the worker count from its start banner, the wall time from 'Finished in'."""
    workers = wall = None
    for code, _cls, body in tool_messages(text):
        if code == 2187:
            m = re.search(r"with (\d+) workers?", body)
            workers = int(m.group(1)) if m else None
        elif code == 2186:
            m = re.search(r"Finished in (\d+)ms", body)
            wall = int(m.group(1)) / 1000 if m else None
    return workers, wall


def _last_progress(text: str) -> dict:
    """TLC's last progress report (a run that was stopped): depth so far, generated, distinct, queue."""
    last = [body for code, _cls, body in tool_messages(text) if code == 2200]
    if not last:
        return {}
    m = re.search(r"Progress\((\d+)\) at (.+?): ([\d,]+) states generated.*?, ([\d,]+) distinct states found.*?"
                  r"([\d,]+) states left on queue", last[-1])
    if not m:
        return {}
    depth, at, gen, dist, queue = m.groups()
    return {"depth_reached": int(depth), "last_progress_at": at, "generated_states": int(gen.replace(",", "")),
            "distinct_states": int(dist.replace(",", "")), "left_on_queue": int(queue.replace(",", ""))}


def cpu_from_time_file(text: str) -> dict:
    """CPU seconds (user + system) and peak RSS from the last line of a `/usr/bin/time -f "%U %S %e %M"` file;
    {} when that line is not four numbers."""
    lines = text.strip().splitlines()
    parts = lines[-1].split() if lines else []
    try:
        user, system, _wall, rss = (float(x) for x in parts)
    except ValueError:
        return {}
    return {"cpu_s": round(user + system, 1), "peak_rss_mib": round(rss / 1024)}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def record_from_log(name: str, text: str, exit_code: int, stopped_after_s: float | None = None) -> dict:
    workers, wall = _workers_and_wall(text)
    if exit_code not in (0, 10, 11, 12, 13, 14, 75, 150, 151):  # stopped from outside (timeout, kill)
        return {"model": name, "cfg": f"spec/{name}.deep.cfg", "result": "stopped", "exhaustive": False,
                "exit_code": exit_code, "wall_s": stopped_after_s, "workers": workers, **_last_progress(text)}
    r = parse_tool_output(text, exit_code)
    return {"model": name, "cfg": f"spec/{name}.deep.cfg", "result": r.outcome.value, "exit_code": r.exit_code,
            "exhaustive": r.left_on_queue == 0 and r.generated_states > 0, "distinct_states": r.distinct_states,
            "generated_states": r.generated_states, "depth": r.depth, "wall_s": wall, "workers": workers}


def run_one(name: str, jar: str, workers: str, timeout_s: float) -> dict:
    start, cpu0 = time.perf_counter(), _children_cpu()
    try:
        r = run_tlc(spec_dir() / f"{module_of(name)}.tla", spec_dir() / f"{name}.deep.cfg", jar, workers=workers,
                    timeout_s=timeout_s)
    except TlcFailed as exc:
        return {"model": name, "cfg": f"spec/{name}.deep.cfg", "result": "not finished", "exhaustive": False,
                "detail": str(exc), "wall_s": round(time.perf_counter() - start, 1), "workers": workers}
    return {"model": name, "cfg": f"spec/{name}.deep.cfg", "result": r.outcome.value, "exit_code": r.exit_code,
            "exhaustive": r.left_on_queue == 0, "distinct_states": r.distinct_states,
            "generated_states": r.generated_states, "depth": r.depth, "wall_s": round(r.seconds, 1),
            "cpu_s": round(_children_cpu() - cpu0, 1), "workers": workers}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="auto", help="TLC workers (a count or auto: every core)")
    ap.add_argument("--only", action="append", default=[], help="model name (repeatable)")
    ap.add_argument("--timeout-s", type=float, default=3600.0, help="give up on a model after this long")
    ap.add_argument("--tlc-jar", default=None)
    ap.add_argument("--from-logs", type=Path, default=None, help="folder of saved -tool outputs")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    names = args.only or deep_models()
    rows = []
    for name in names:
        if args.from_logs is not None:
            log = args.from_logs / f"{name}.log"
            status = args.from_logs / f"{name}.rc"
            rc, _, wall = (status.read_text().strip() + " ").partition(" ") if status.exists() else ("0", "", "")
            row = record_from_log(name, log.read_text(errors="replace"), int(rc),
                                  float(wall) if wall.strip() else None)
            timing = args.from_logs / f"{name}.time"
            rows.append({**row, **(cpu_from_time_file(timing.read_text()) if timing.exists() else {})})
        else:
            rows.append(run_one(name, find_jar(args.tlc_jar).path, args.workers, args.timeout_s))
        print(json.dumps(rows[-1]), file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"engine": "tlc", "machine": f"{platform.machine()}, {platform.system()}", "models": rows}
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if all(r.get("exhaustive") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
