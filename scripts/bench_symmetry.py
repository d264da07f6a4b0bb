"""Benchmark: what SYMMETRY costs per state, side by side in one run (not a test; times are CPU seconds).

A four-process request/grant model (24 permutations) is checked to the same distinct-state bound
without SYMMETRY, with it, and with it under the symmetry.py of a baseline commit (``--baseline REV``,
loaded from git), each after a warm-up run. Prints generated states per CPU-second and the ratios.
``--model SPEC CFG`` times a model of one's own instead (its cfg without the SYMMETRY line is the plain run;
the library path is the corpus's ``_modules/*`` when the spec's folder sits in a corpus).
Usage: .venv/bin/python scripts/bench_symmetry.py [--states 8000] [--baseline REV] [--model SPEC CFG]
"""
import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kvexact.spec.checker import check_model, model
from kvexact.spec.checker.corpus import corpus_lib_dirs

SPEC = r"""---- MODULE Sym ----
EXTENDS Naturals, FiniteSets, TLC
CONSTANT P
VARIABLES pc, msgs, owner
Init == pc = [p \in P |-> "idle"] /\ msgs = {} /\ owner = [p \in P |-> {}]
Ask(p) == pc[p] = "idle" /\ pc' = [pc EXCEPT ![p] = "wait"] /\ msgs' = msgs \cup {[from |-> p, kind |-> "req"]}
          /\ UNCHANGED owner
Grant(p, q) == /\ [from |-> q, kind |-> "req"] \in msgs /\ p # q /\ Cardinality(owner[p]) < 2
               /\ owner' = [owner EXCEPT ![p] = @ \cup {q}]
               /\ msgs' = (msgs \ {[from |-> q, kind |-> "req"]}) \cup {[from |-> p, kind |-> "ok"]}
               /\ UNCHANGED pc
Done(p) == pc[p] = "wait" /\ pc' = [pc EXCEPT ![p] = "done"] /\ UNCHANGED <<msgs, owner>>
Reset(p) == pc[p] = "done" /\ pc' = [pc EXCEPT ![p] = "idle"] /\ owner' = [q \in P |-> owner[q] \ {p}]
            /\ UNCHANGED msgs
Next == \E p \in P : Ask(p) \/ Done(p) \/ Reset(p) \/ \E q \in P : Grant(p, q)
Sym == Permutations(P)
====
"""
CFG = "INIT Init\nNEXT Next\nCONSTANT P = {a, b, c, d}\nCHECK_DEADLOCK FALSE\n"


def rate(spec: Path, cfg: Path, states: int) -> tuple[float, int, float]:
    lib = corpus_lib_dirs(spec.resolve().parent.parent)
    check_model(spec, cfg, max_states=20, coverage=False, lib=lib)  # warm-up: parsing and code generation
    t = time.process_time()
    r = check_model(spec, cfg, max_states=states, coverage=False, lib=lib)
    cpu = time.process_time() - t
    return r.generated_states / cpu, r.generated_states, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--states", type=int, default=8000)
    ap.add_argument("--baseline", default=None, help="git revision whose symmetry.py is timed too")
    ap.add_argument("--model", nargs=2, type=Path, default=None, metavar=("SPEC", "CFG"))
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp())
    spec, sym_cfg, plain_cfg = d / "Sym.tla", d / "Sym.cfg", d / "Plain.cfg"
    if a.model:
        spec, sym_cfg = a.model
        plain_cfg = sym_cfg.with_name(sym_cfg.stem + ".nosym.tmp.cfg")
        plain_cfg.write_text("\n".join(x for x in sym_cfg.read_text().splitlines()
                                       if not x.strip().startswith("SYMMETRY")) + "\n")
    else:
        spec.write_text(SPEC)
        plain_cfg.write_text(CFG)
        sym_cfg.write_text(CFG + "SYMMETRY Sym\n")
    runs = {"plain": rate(spec, plain_cfg, a.states), "symmetry": rate(spec, sym_cfg, a.states)}
    if a.baseline:
        root = Path(__file__).resolve().parents[1]
        src = subprocess.run(["git", "-C", str(root), "show", f"{a.baseline}:spec/checker/symmetry.py"],
                             capture_output=True, text=True, check=True).stdout
        (d / "old_symmetry.py").write_text(src)
        found = importlib.util.spec_from_file_location("old_symmetry", d / "old_symmetry.py")
        old = importlib.util.module_from_spec(found)
        found.loader.exec_module(old)
        model.Symmetry = old.Symmetry
        runs[f"symmetry at {a.baseline}"] = rate(spec, sym_cfg, a.states)
    if a.model:
        plain_cfg.unlink()
    for name, (r, gen, cpu) in runs.items():
        print(f"{name:24} {gen:8,} generated in {cpu:6.2f} CPU-s: {r:8,.0f} generated/CPU-s, "
              f"plain/this = {runs['plain'][0] / r:.2f}x")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
