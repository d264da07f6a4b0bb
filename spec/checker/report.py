"""Render a ModelCheckResult: TLC-like text, JSON, and ITF (Apalache's Informal Trace Format) traces.

Invariant: the JSON always has result, generated_states, distinct_states, depth, seconds, engine; a
violation adds violation.kind / .name / .message / .trace. Trace values are TLA+ text in JSON and typed
ITF values in the ITF file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvexact.spec import itf
from kvexact.spec.checker.result import ModelCheckResult, Outcome, TraceState
from kvexact.spec.checker.values import fmt
from kvexact.spec.files import write_atomic


def _text(v: Any, raw: bool = True) -> str:
    """TLA+ text of a trace value: the embedded engine stores values, the TLC engine stores text."""
    return fmt(v) if raw or not isinstance(v, str) else v


def result_word(r: ModelCheckResult) -> str:
    if r.outcome is Outcome.SUCCESS and not r.complete:
        return "incomplete"
    return r.outcome.value


def trace_lines(trace: tuple[TraceState, ...], raw: bool = True) -> list[str]:
    """Each state with its action label and location; changed variables are marked with '*'."""
    lines: list[str] = []
    prev: dict | None = None
    for st in trace:
        if st.action.startswith("<"):
            label = st.action
        elif st.action == "Initial predicate" or not st.location:
            label = f"<{st.action}>"
        else:
            label = f"<{st.action} {st.location}>"  # TLC: <Name line L, col C to line L2, col C2 of module M>
        lines.append(f"State {st.index}: {label}")
        for var, val in st.values.items():
            changed = prev is not None and (var not in prev or _text(prev[var], raw) != _text(val, raw))
            lines.append(f"{'*' if changed else ' '} /\\ {var} = {_text(val, raw)}")
        lines.append("")
        prev = st.values
    return lines


def lasso_lines(trace: tuple[TraceState, ...], loop: int, raw: bool = True) -> list[str]:
    """A liveness counterexample as TLC prints it: the states, then ``State n+1: Stuttering`` when the
    last state stutters forever, else ``Back to state k.``"""
    lines = trace_lines(trace, raw)
    if loop == len(trace):
        lines.append(f"State {len(trace) + 1}: Stuttering")
    else:
        lines.append(f"Back to state {loop}.")
    return lines


def summary_lines(r: ModelCheckResult, spec: str = "") -> list[str]:
    out: list[str] = []
    for msg in r.messages:
        out.append(f"Warning: {msg}")
    v = r.violation
    if v is not None:
        if v.kind == "invariant":
            out.append(f"Error: {v.message}" if v.message else f"Error: Invariant {v.name} is violated.")
        elif v.kind == "deadlock":
            out.append("Error: Deadlock reached.")
        elif v.kind == "temporal":
            out.append("Error: Temporal properties were violated.")
            out.append(f"Error: PROPERTY {v.name} does not hold on this behavior.")
        else:
            out.append(f"Error: {v.message or v.name}")
        if v.trace and v.loop is not None:
            out.append("Error: The following behavior constitutes a counter-example:")
            out += lasso_lines(v.trace, v.loop, r.engine == "embedded")
        elif v.trace:
            out.append("Error: The behavior up to this point is:")
            out += trace_lines(v.trace, r.engine == "embedded")
    elif r.outcome is Outcome.SUCCESS:
        if r.complete:
            out.append("Model checking completed. No error has been found.")
        else:
            out.append("INCOMPLETE: the search was stopped before the state space was exhausted "
                       "(not a success).")
    if r.outcome not in (Outcome.PARSE, Outcome.CONFIG):
        out.append(f"{r.generated_states} states generated, {r.distinct_states} distinct states found, "
                   f"{r.left_on_queue} states left on queue.")
        out.append(f"The depth of the complete state graph search is {r.depth}.")
    if r.coverage:
        out.append("Coverage (action: successors generated / new distinct states):")
        for name, c in r.coverage.items():
            flag = "   <-- never fired" if c.get("fired", 0) == 0 else ""
            out.append(f"  {name}: {c.get('fired', 0)} / {c.get('new', 0)}{flag}")
    out.append(f"Finished in {r.seconds:.2f}s ({r.engine} engine): {result_word(r)}")
    return out


def exit_code(r: ModelCheckResult) -> int:
    return r.exit_code


def to_json(r: ModelCheckResult, spec: str = "", exit_code: int | None = None) -> dict:
    """``exit_code`` is the process's own (an incomplete run exits 3, not the result's 0)."""
    d: dict[str, Any] = {
        "spec": spec,
        "engine": r.engine,
        "result": result_word(r),
        "exit_code": r.exit_code if exit_code is None else exit_code,
        "complete": r.complete,
        "generated_states": r.generated_states,
        "distinct_states": r.distinct_states,
        "depth": r.depth,
        "left_on_queue": r.left_on_queue,
        "seconds": round(r.seconds, 4),
        "coverage": r.coverage,
        "messages": list(r.messages),
    }
    if r.violation is not None:
        v = r.violation
        d["violation"] = {
            "kind": v.kind, "name": v.name, "message": v.message, "loop": v.loop,
            "trace": [{"index": st.index, "action": st.action, "location": st.location,
                       "values": {k: _text(x, r.engine == "embedded") for k, x in st.values.items()}}
                      for st in v.trace],
        }
    return d


def write_json(r: ModelCheckResult, path: str | Path, spec: str = "", exit_code: int | None = None) -> None:
    write_atomic(path, json.dumps(to_json(r, spec, exit_code), indent=2) + "\n")


def to_itf_trace(trace: tuple[TraceState, ...], spec: str = "", description: str = "",
                 loop: int | None = None) -> dict:
    """An ITF document: {"#meta", "vars", "states": [{"#meta": {"index", "action"}, var: value}]}; a
    lasso adds "loop", the 0-based index of the state the last state steps back to."""
    variables: list[str] = list(trace[0].values) if trace else []
    states = [({"index": st.index - 1, "action": st.action, "location": st.location},
               {k: itf.encode(x) for k, x in st.values.items()}) for st in trace]
    doc = itf.document(states, variables, {"source": spec, "description": description})
    if loop is not None:
        doc["loop"] = loop - 1
    return doc


def write_itf(r: ModelCheckResult, path: str | Path, spec: str = "") -> bool:
    """Write the counterexample as ITF; returns False (and writes nothing) when there is no trace."""
    if r.violation is None or not r.violation.trace:
        return False
    doc = to_itf_trace(r.violation.trace, spec, r.violation.message or r.violation.name, r.violation.loop)
    write_atomic(path, json.dumps(doc, indent=2) + "\n")
    return True
