"""A TLA+ trace module generated from a recorded trace, so TLC (or the embedded engine) can validate it.

The module ``<Spec>Trace`` EXTENDS the spec and replays the trace: ``TraceInit`` pins the first state,
``TraceNext`` advances an index ``ti`` and requires the recorded action (called with its recorded
parameters when they are complete, else the spec's ``Next``) to lead to exactly the next recorded state.
The invariant ``TraceNotFinished`` (``ti < Len(TraceStates)``) is violated exactly when the whole trace
was replayed, so a safety violation of that invariant means "trace accepted" and a clean run means the
trace left the spec.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kvexact.conformance.trace import Trace
from kvexact.spec import itf
from kvexact.spec.checker.model import find_action
from kvexact.spec.checker.values import fmt

ACCEPT_INVARIANT = "TraceNotFinished"
CFG_KEYWORDS = {"INIT", "NEXT", "SPECIFICATION", "INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES",
                "CONSTRAINT", "CONSTRAINTS", "ACTION_CONSTRAINT", "ACTION_CONSTRAINTS", "SYMMETRY", "VIEW",
                "CHECK_DEADLOCK", "POSTCONDITION", "ALIAS"}


class TraceModuleError(ValueError):
    pass


def tla_literal(value: Any, model_values: frozenset[str]) -> str:
    """An ITF JSON value as a TLA+ expression, as TLC prints it (functions via ``:>`` and ``@@``)."""
    return fmt(itf.decode(value, model_values))


def _formal_parameters(spec_text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for m in re.finditer(r"^([A-Z][A-Za-z0-9_]*)\(([^)]*)\)\s*==", spec_text, flags=re.M):
        found[m.group(1)] = [p.strip() for p in m.group(2).split(",") if p.strip()]
    for m in re.finditer(r"^([A-Z][A-Za-z0-9_]*)\s*==", spec_text, flags=re.M):
        found.setdefault(m.group(1), [])
    return found


def _variables(spec_text: str) -> list[str]:
    m = re.search(r"^VARIABLES?\s+(.*?)(?=^\s*$|^[A-Z]|^\\\*)", spec_text, flags=re.M | re.S)
    if not m:
        raise TraceModuleError("the spec declares no VARIABLES")
    body = re.sub(r"\\\*[^\n]*", "", m.group(1))
    return [v.strip() for v in body.replace("\n", " ").split(",") if v.strip()]


def declared_constants(spec_path: Path) -> set[str]:
    """The constants the spec (and the modules it EXTENDS) declares, as the embedded checker's parser reads
    them: the only names a generated cfg may assign besides the spec cfg's own. The spec's own cfg (beside
    it), when there is one, gives the values an ``INSTANCE ... WITH`` substitution needs while loading."""
    from kvexact.spec.checker.cfg import parse_cfg
    from kvexact.spec.checker.compiler import Compiler

    cfg_path = Path(spec_path).with_suffix(".cfg")
    constants = dict(parse_cfg(cfg_path).constants) if cfg_path.is_file() else {}
    comp = Compiler(Path(spec_path).parent, constants, value_overrides=dict(constants))
    comp.load_root(Path(spec_path))
    return set(comp.declared_constants)


def copy_spec(spec_path: Path, out_dir: Path) -> None:
    """Copy the spec into ``out_dir`` with the modules of its folder it EXTENDS or INSTANCEs (transitively),
    so a generated module beside the copy loads as the spec does (KVAllocation instances ExactHistory)."""
    import shutil

    folder, todo, done = Path(spec_path).parent, [Path(spec_path).stem], set()
    while todo:
        name = todo.pop()
        source = folder / f"{name}.tla"
        if name in done or not source.is_file():
            continue
        done.add(name)
        shutil.copy(source, out_dir / source.name)
        text = source.read_text(encoding="utf-8")
        for m in re.finditer(r"^EXTENDS\s+([\w,\s]+?)$", text, flags=re.M):
            todo += [n.strip() for n in m.group(1).split(",") if n.strip()]
        todo += re.findall(r"\bINSTANCE\s+(\w+)", text)


def _other_constants(cfg_text: str, overridden: Iterable[str]) -> list[str]:
    lines, in_constants = [], False
    skip = set(overridden)
    for raw in cfg_text.splitlines():
        line = raw.split("\\*")[0].rstrip()
        head = line.strip().split(" ")[0] if line.strip() else ""
        if head in ("CONSTANT", "CONSTANTS"):
            in_constants = True
            line = line.strip()[len(head):]
        elif head in CFG_KEYWORDS:
            in_constants = False
        if in_constants:
            for m in re.finditer(r"(\w+)\s*(=|<-)\s*(\{[^}]*\}|[^\s]+)", line):
                if m.group(1) not in skip:
                    lines.append(f"    {m.group(1)} {m.group(2)} {m.group(3)}")
    return lines


def generate(trace: Trace, spec_path: Path, cfg_path: Path | None = None) -> tuple[str, str]:
    """(module text, cfg text) of ``<Spec>Trace`` for ``trace``; write both beside the spec to check them."""
    spec_path = Path(spec_path)
    spec_text = spec_path.read_text(encoding="utf-8")
    cfg_path = cfg_path or spec_path.with_suffix(".cfg")
    cfg_text = cfg_path.read_text(encoding="utf-8") if cfg_path.is_file() else ""
    mvs = frozenset(trace.model_values)
    variables = _variables(spec_text)
    formals = _formal_parameters(spec_text)
    states = [trace.initial_state, *[r["state"] for r in trace.records]]
    for i, s in enumerate(states):
        missing = [v for v in variables if v not in s]
        if missing:
            raise TraceModuleError(f"trace state {i} lacks variable(s) {', '.join(missing)}")
    name = f"{spec_path.stem}Trace"
    state_lits = ["[" + ", ".join(f"{v} |-> {tla_literal(s[v], mvs)}" for v in variables) + "]" for s in states]
    steps = []
    for i, rec in enumerate(trace.records, start=1):
        op = find_action(formals, rec["action"]) or rec["action"]
        params = rec.get("params", {})
        if rec.get("in_spec") is False:
            call = "UNCHANGED <<" + ", ".join(variables) + ">>"
        elif op in formals and set(formals[op]) == set(params) and params:
            call = f"{op}(" + ", ".join(tla_literal(params[p], mvs) for p in formals[op]) + ")"
        elif op in formals and not formals[op] and not params:
            call = op
        else:
            call = "Next"
        steps.append(f"    [] i = {i} -> {call}")
    declared = declared_constants(spec_path)
    fresh = sorted(mvs - declared)
    model_value_decl = f"CONSTANTS {', '.join(fresh)}\n" if fresh else ""
    module = "\n".join([
        f"---- MODULE {name} ----",
        f"\\* Generated by kvexact from a trace of {trace.spec}: replays {len(trace.records)} recorded steps.",
        f"EXTENDS {spec_path.stem}, TLC, Sequences, Naturals",
        model_value_decl.rstrip(),
        "VARIABLE ti",
        "TraceStates == <<",
        ",\n".join("    " + s for s in state_lits),
        ">>",
        "StepOk(i) ==",
        "    CASE " + "\n".join(steps).lstrip().removeprefix("[] ") if steps else "StepOk(i) == FALSE",
        "TraceInit == ti = 1 /\\ " + " /\\ ".join(f"{v} = TraceStates[1].{v}" for v in variables),
        "TraceNext == /\\ ti < Len(TraceStates)",
        "             /\\ StepOk(ti)",
        "             /\\ ti' = ti + 1",
        "             /\\ " + " /\\ ".join(f"{v}' = TraceStates[ti + 1].{v}" for v in variables),
        f"{ACCEPT_INVARIANT} == ti < Len(TraceStates)",
        "====",
        "",
    ])
    if not steps:
        module = module.replace("StepOk(i) ==\n    CASE StepOk(i) == FALSE", "StepOk(i) == FALSE")
    return module, trace_cfg(trace, cfg_text, declared)


def trace_cfg(trace: Trace, cfg_text: str, declared: set[str]) -> str:
    """The cfg of a generated trace module: the trace's constants that the spec declares (a trace may carry
    more, e.g. from an older spec), its model values, the spec cfg's other constants,
    ``TraceInit``/``TraceNext`` and the acceptance invariant."""
    mvs = frozenset(trace.model_values)
    constants = [f"    {k} = {tla_literal(v, mvs)}" for k, v in trace.constants.items() if k in declared]
    constants += [f"    {m} = {m}" for m in sorted(mvs) if m not in trace.constants]
    constants += _other_constants(cfg_text, [*trace.constants, *mvs])
    return "\n".join(["CONSTANTS", *constants, "INIT TraceInit", "NEXT TraceNext",
                      f"INVARIANT {ACCEPT_INVARIANT}", "CHECK_DEADLOCK FALSE", ""])


def write_trace_module(trace: Trace, spec_path: Path, out_dir: Path, cfg_path: Path | None = None) -> Path:
    """Write ``<Spec>Trace.tla/.cfg`` plus a copy of the spec into ``out_dir``; return the module path."""
    module, cfg = generate(trace, spec_path, cfg_path)
    return write_beside_spec(spec_path, out_dir, f"{Path(spec_path).stem}Trace", module, cfg)


def write_beside_spec(spec_path: Path, out_dir: Path, name: str, module: str, cfg: str) -> Path:
    """Write the generated ``name``.tla/.cfg into ``out_dir`` next to a copy of the spec (and the modules it
    uses); return the module path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    copy_spec(spec_path, out_dir)
    target = out_dir / f"{name}.tla"
    target.write_text(module, encoding="utf-8")
    target.with_suffix(".cfg").write_text(cfg, encoding="utf-8")
    return target


def accepted(result: Any) -> bool:
    """A model-check result of a trace module accepts the trace iff ``TraceNotFinished`` was violated."""
    v = getattr(result, "violation", None)
    return v is not None and v.name == ACCEPT_INVARIANT
