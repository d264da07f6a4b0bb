"""Trace export and trace validation against the TLA+ specs (DESIGN.md, "Steps are the spec's actions").

A trace is a header (spec name, constants bound to the finite values seen in the run, model-value names,
the initial state) and one record per spec action: ``{"action", "params", "state"}`` with values in ITF
conventions. Formats: NDJSON (header line, then one record per line) and ITF JSON (Apalache's Informal
Trace Format, the action and parameters in each state's ``#meta``).

Invariant of :func:`validate`: the trace is accepted only when every state (the initial one included)
satisfies the invariants the spec's cfg names (``TypeOK`` and the safety invariants), every consecutive
pair ``(s, s')`` is a step of the named action in the spec (checked by the embedded checker's step API),
and every record marked ``"in_spec": false`` leaves the projected state unchanged (a stuttering step).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from kvexact.spec import itf
from kvexact.spec.actions import find_action, model_actions


class TraceFormatError(ValueError):
    """A trace file that cannot be read: says which file, which line, and what is wrong."""


@attrs.frozen
class Trace:
    spec: str
    constants: dict[str, Any]
    model_values: tuple[str, ...]
    initial_state: dict[str, Any]
    records: tuple[dict[str, Any], ...]


@attrs.frozen
class StepFailure:
    index: int  # 1-based index of the failing record
    action: str
    params: dict[str, Any]
    changed_variables: tuple[str, ...]
    reason: str


@attrs.frozen
class TraceValidation:
    ok: bool
    steps: int
    actions: dict[str, int]
    failure: StepFailure | None = None

    def summary(self) -> str:
        if self.ok:
            return f"trace accepted: {self.steps} steps ({', '.join(f'{a}={n}' for a, n in self.actions.items())})"
        f = self.failure
        assert f is not None
        return (f"trace leaves the spec at step {f.index} ({f.action} {json.dumps(f.params, sort_keys=True)}): "
                f"{f.reason}; variables changed by the step: {', '.join(f.changed_variables) or 'none'}")


# ------------------------------------------------------------------------------------------- files


def trace_from_recorder(recorder: Any, constants: dict[str, Any], model_values: Iterable[str]) -> Trace:
    """A :class:`Trace` from a reference ``TraceRecorder`` (its spec, initial state and records)."""
    return Trace(recorder.spec, _jsonable_constants(constants), tuple(sorted(set(model_values))),
                 recorder.initial_state, tuple(recorder.records))


def _jsonable_constants(constants: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in constants.items():
        if isinstance(v, (set, frozenset)):
            out[k] = {"#set": sorted(v, key=lambda x: (str(type(x)), x))}
        else:
            out[k] = v
    return out


def write_ndjson(trace: Trace, path: Path) -> None:
    header = {"kind": "header", "spec": trace.spec, "constants": trace.constants,
              "model_values": list(trace.model_values), "initial_state": trace.initial_state}
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(header, sort_keys=True) + "\n")
        for r in trace.records:
            fh.write(json.dumps(r, sort_keys=True) + "\n")


def write_itf(trace: Trace, path: Path) -> None:
    states = [({"index": 0, "action": "Init"}, trace.initial_state)]
    for i, r in enumerate(trace.records, start=1):
        meta = {"index": i, "action": r["action"], "params": r.get("params", {})}
        if r.get("in_spec") is False:
            meta["in_spec"] = False
        states.append((meta, r["state"]))
    doc = itf.document(states, sorted(trace.initial_state), {
        "source": f"kvexact trace of {trace.spec}", "spec": trace.spec, "constants": trace.constants,
        "model_values": list(trace.model_values)})
    Path(path).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def read_trace(path: Path) -> Trace:
    """Read an NDJSON or ITF trace; a malformed file raises :class:`TraceFormatError` naming the place."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    stripped = text.lstrip()
    if stripped.startswith("{") and '"states"' in text and "\n{" not in stripped:
        return _read_itf(path, text)
    try:
        return _read_ndjson(path, text)
    except TraceFormatError:
        if stripped.startswith("{") and '"states"' in text:
            return _read_itf(path, text)
        raise


def _read_itf(path: Path, text: str) -> Trace:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    try:
        meta, states = itf.read_document(doc)
    except itf.ITFError as exc:
        raise TraceFormatError(f"{path}: {exc}") from None
    if "spec" not in meta:
        raise TraceFormatError(f"{path}: ITF '#meta' must name the spec ('spec')")
    records = []
    for i, (m, values) in enumerate(states[1:], start=1):
        if "action" not in m:
            raise TraceFormatError(f"{path}: state {i} has no '#meta.action'")
        rec = {"action": m["action"], "params": m.get("params", {}), "state": values}
        if m.get("in_spec") is False:
            rec["in_spec"] = False
        records.append(rec)
    return Trace(meta["spec"], meta.get("constants", {}), tuple(meta.get("model_values", [])), states[0][1],
                 tuple(records))


def ndjson_lines(path: Path, text: str, error: type[ValueError] = TraceFormatError,
                 what: str = "trace") -> list[tuple[int, Any]]:
    """(line number, parsed JSON) of every non-blank line; ``error`` names the line and column of bad JSON."""
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), start=1) if ln.strip()]
    if not lines:
        raise error(f"{path}: empty {what}")
    parsed = []
    for n, ln in lines:
        try:
            parsed.append((n, json.loads(ln)))
        except json.JSONDecodeError as exc:
            raise error(f"{path}:{n}:{exc.colno}: not JSON: {exc.msg}") from None
    return parsed


def _read_ndjson(path: Path, text: str) -> Trace:
    parsed = ndjson_lines(path, text)
    n0, header = parsed[0]
    if not isinstance(header, dict) or header.get("kind") != "header":
        raise TraceFormatError(f"{path}:{n0}: the first line must be the header ({{\"kind\": \"header\", ...}})")
    for key in ("spec", "initial_state"):
        if key not in header:
            raise TraceFormatError(f"{path}:{n0}: the header has no '{key}'")
    records = []
    for n, rec in parsed[1:]:
        if not isinstance(rec, dict) or "action" not in rec or "state" not in rec:
            raise TraceFormatError(f"{path}:{n}: a record needs 'action' and 'state'")
        records.append(rec)
    return Trace(header["spec"], header.get("constants", {}), tuple(header.get("model_values", [])),
                 header["initial_state"], tuple(records))


# -------------------------------------------------------------------------------------- validation


def constant_overrides(trace: Trace) -> dict[str, Any]:
    mvs = frozenset(trace.model_values)
    return {k: itf.decode(v, mvs) for k, v in trace.constants.items()}


_MODELS: dict[tuple, Any] = {}  # loaded models by (spec, cfg, constants): loading dominates short traces


def trace_model(trace: Trace, spec_path: Path, cfg_path: Path | None = None) -> Any:
    """The checker's model of the spec with the trace's constants (loaded once per spec, cfg, constants)."""
    from kvexact.spec.checker.model import load_model

    mvs = frozenset(trace.model_values)
    cache_key = (str(spec_path), str(cfg_path), json.dumps(trace.constants, sort_keys=True), mvs)
    model = _MODELS.get(cache_key)
    if model is None:
        model = _MODELS[cache_key] = load_model(spec_path, cfg_path, constant_overrides(trace))
    return model


def validate(trace: Trace, spec_path: Path, cfg_path: Path | None = None,
             invariants: bool = True) -> TraceValidation:
    """Check that every state of ``trace`` satisfies the cfg's invariants (unless the caller already did,
    ``invariants=False``) and every step is a step of its named action of the spec (module invariant)."""
    mvs = frozenset(trace.model_values)
    model = trace_model(trace, spec_path, cfg_path)
    actions = model_actions(model)
    prev_raw = trace.initial_state
    prev = {k: itf.decode(v, mvs) for k, v in prev_raw.items()}
    broken = model.violated_invariant(prev) if invariants else None
    if broken:
        return TraceValidation(False, 0, {}, StepFailure(0, "Init", {}, (), f"invariant {broken} does not hold"))
    counts: dict[str, int] = {}
    for i, rec in enumerate(trace.records, start=1):
        state = {k: itf.decode(v, mvs) for k, v in rec["state"].items()}
        params = {k: itf.decode(v, mvs) for k, v in rec.get("params", {}).items()}
        changed = tuple(sorted(k for k in state if prev.get(k) != state[k]))
        action = rec["action"]
        broken = model.violated_invariant(state) if invariants else None
        if broken:
            return TraceValidation(False, i - 1, counts, StepFailure(
                i, action, rec.get("params", {}), changed, f"invariant {broken} does not hold after the step"))
        if rec.get("in_spec") is False:
            if changed:
                return TraceValidation(False, i - 1, counts, StepFailure(
                    i, action, rec.get("params", {}), changed, "a step outside the spec changed spec variables"))
        elif (spec_action := find_action(actions, action)) is None:
            return TraceValidation(False, i - 1, counts, StepFailure(
                i, action, rec.get("params", {}), changed, f"{action} is not an action of {Path(spec_path).name}"))
        else:
            verdict = model.check_step(spec_action, prev, state, params or None)
            if not verdict.ok:
                return TraceValidation(False, i - 1, counts, StepFailure(
                    i, action, rec.get("params", {}), changed,
                    f"{verdict.failed or 'not a step of the action'} ({verdict.location})"))
        counts[action] = counts.get(action, 0) + 1
        prev = state
    return TraceValidation(True, len(trace.records), counts)
