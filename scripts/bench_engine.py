"""Benchmark: the checker engine (spec/checker/) of this tree against a baseline commit's, side by side in
one run (not a test; times are CPU seconds of the search: loading the model, which is
spec/checker/model.py's load path, is not timed).

Each model is checked to a fixed distinct-state bound by each engine in its own child process (the
baseline's spec/checker is taken from git and imported in place of this tree's), alternating
baseline/current for ``--rounds`` rounds after one warm-up run per engine; the best round counts. Prints
generated states per CPU-second per engine and the ratio current / baseline; the two engines must give
the same generated and distinct counts (else the row says so).
Usage: .venv/bin/python scripts/bench_engine.py [--baseline main] [--rounds 2] [--only NAME ...]
"""
import argparse
import importlib.abc
import importlib.util
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT.parent / "shared" / "tla-examples"
# (name, spec, cfg or None, distinct-state bound)
# The project's own specs (relative names) are taken from the baseline commit, so that both engines check
# the same text: the specs changed along with the engine (an INSTANCE WITH reading cfg constants, which an
# engine older than issue 16 cannot load).
MODELS = [
    ("KVAllocation deep", "spec/KVAllocation.tla", "spec/KVAllocation.deep.cfg", 6000),
    ("CowPublication CI", "spec/CowPublication.tla", "spec/CowPublication.cfg", 3000),
    ("TLCSailfish1", EXAMPLES / "dag-consensus__TLCSailfish1/TLCSailfish1.tla", None, 8000),
    ("MCVoting", EXAMPLES / "PaxosHowToWinATuringAward__MCVoting/MCVoting.tla", None, 3000),
    ("PaxosCommit", EXAMPLES / "transaction_commit__PaxosCommit/PaxosCommit.tla", None, 6000),
    ("ReadersWriters", EXAMPLES / "ReadersWriters__MC/MC.tla", None, 20000),
]


class _Baseline(importlib.abc.MetaPathFinder):
    """Imports kvexact.spec.checker and its modules from a baseline folder."""

    def __init__(self, folder: Path):
        self.folder = folder

    def find_spec(self, name, path, target=None):
        prefix = "kvexact.spec.checker"
        if name != prefix and not name.startswith(prefix + "."):
            return None
        rel = name.split(".")[3:]
        p = self.folder.joinpath(*rel)
        if p.is_dir():
            return importlib.util.spec_from_file_location(name, p / "__init__.py", submodule_search_locations=[str(p)])
        return importlib.util.spec_from_file_location(name, p.with_suffix(".py"))


def child(baseline: str | None, spec: str, cfg: str | None, states: int) -> None:
    if baseline:
        sys.meta_path.insert(0, _Baseline(Path(baseline)))
    import inspect

    from kvexact.spec.checker import check_model, corpus
    from kvexact.spec.checker.engine import check_loaded
    from kvexact.spec.checker.model import load_model
    sp = Path(spec)
    cf = Path(cfg) if cfg else sp.with_suffix(".cfg")
    # an engine older than the library path (issue 16) has no lib parameter
    kw = {}
    if "lib" in inspect.signature(load_model).parameters:
        kw["lib"] = corpus.corpus_lib_dirs(sp.resolve().parent.parent)
    check_model(sp, cf, max_states=50, coverage=False, **kw)  # warm-up: parsing and code generation
    model = load_model(sp, cf, **kw)
    t = time.process_time()
    r = check_loaded(model, max_states=states, coverage=False)
    cpu = time.process_time() - t
    import kvexact.spec.checker.engine as eng
    print(json.dumps({"generated": r.generated_states, "distinct": r.distinct_states, "cpu": cpu,
                      "outcome": str(r.outcome), "engine": str(Path(eng.__file__).parent)}))


def run_one(baseline: str | None, spec: Path, cfg: Path | None, states: int) -> dict:
    """One child's result, or {"error": its last line of output} when the engine cannot check the model."""
    cmd = [sys.executable, __file__, "--child", baseline or "", str(spec), str(cfg or ""), str(states)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = (p.stdout + p.stderr).strip().splitlines() or ["no output"]
    if p.returncode != 0:
        return {"error": lines[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, base, spec, cfg, states = sys.argv
        child(base or None, spec, cfg or None, int(states))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", default="main", help="git revision whose spec/checker is the baseline")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", nargs="*", default=None)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    blob = subprocess.run(["git", "-C", str(ROOT), "archive", a.baseline, "spec/checker"],
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(tmp, filter="data")
    specs = subprocess.run(["git", "-C", str(ROOT), "archive", a.baseline, "spec"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(specs)) as tar:
        tar.extractall(tmp / "specs", filter=lambda m, dest: m if m.name.endswith((".tla", ".cfg")) else None)
    base = str(tmp / "spec" / "checker")
    print(f"baseline {a.baseline} = {_rev(a.baseline)}; the project's specs are the baseline's", flush=True)
    rows = []
    for name, spec_name, cfg_name, states in MODELS:
        if a.only and not any(o.lower() in name.lower() for o in a.only):
            continue
        spec = tmp / "specs" / spec_name if isinstance(spec_name, str) else spec_name
        cfg = tmp / "specs" / cfg_name if isinstance(cfg_name, str) else cfg_name
        if not spec.exists():
            print(f"{name}: {spec} not found, skipped")
            continue
        best: dict[str, dict] = {}
        for _ in range(a.rounds):
            for label, b in (("baseline", base), ("current", None)):
                r = run_one(b, spec, cfg, states)
                if "error" in r:
                    best[label] = r
                elif label not in best or r["cpu"] < best[label]["cpu"]:
                    best[label] = r
            if "error" in best["baseline"] or "error" in best["current"]:
                break
        old, new = best["baseline"], best["current"]
        if "error" in old or "error" in new:
            which = "baseline" if "error" in old else "current"
            print(f"{name}: the {which} engine cannot check it: {(old if which == 'baseline' else new)['error']}",
                  flush=True)
            continue
        same = (old["generated"], old["distinct"]) == (new["generated"], new["distinct"])
        ratio = (new["generated"] / new["cpu"]) / (old["generated"] / old["cpu"])
        rows.append((name, states, old, new, ratio, same))
        print(f"{name} ({states} states): baseline {old['generated'] / old['cpu']:.0f}/s "
              f"({old['cpu']:.1f} CPU-s), current {new['generated'] / new['cpu']:.0f}/s ({new['cpu']:.1f} CPU-s), "
              f"ratio {ratio:.2f}x{'' if same else '  COUNTS DIFFER'}", flush=True)
    print("\n| model | distinct bound | generated | baseline states/CPU-s | current states/CPU-s | ratio |\n"
          "|---|---:|---:|---:|---:|---:|")
    for name, states, old, new, ratio, same in rows:
        print(f"| {name} | {states} | {new['generated']} | {old['generated'] / old['cpu']:.0f} | "
              f"{new['generated'] / new['cpu']:.0f} | {ratio:.2f}x{'' if same else ' (counts differ)'} |")


def _rev(rev: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True, text=True,
                          check=True).stdout.strip()


if __name__ == "__main__":
    main()
