"""Trace export and trace validation against the TLA+ specs (docs/design.md, "Steps are the spec's actions").

A trace is a header (spec name, constants bound to the finite values seen in the run, model-value names,
the initial state) and one record per spec action: ``{"action", "params", "state"}`` with values in ITF
conventions. Formats: NDJSON (header line, one record per line, then the end line ``{"kind": "end",
"steps": N}`` that proves the file complete) and ITF JSON (Apalache's Informal Trace Format, the action and
parameters in each state's ``#meta``). Reading checks every line or document against the JSON schemas of
:mod:`line_schemas` first; a refused file raises :class:`TraceFormatError` with a named :class:`Rejection`.

Invariant of :func:`validate`: the trace is accepted only when every state (the initial one included)
satisfies the invariants the spec's cfg names (``TypeOK`` and the safety invariants), every consecutive
pair ``(s, s')`` is a step of the named action in the spec (checked by the embedded checker's step API),
and every record marked ``"in_spec": false`` leaves the projected state unchanged (a stuttering step).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from kvexact.conformance.line_schemas import (
    ITF_SCHEMA,
    TRACE_END_SCHEMA,
    TRACE_HEADER_SCHEMA,
    TRACE_RECORD_SCHEMA,
    VALUE_SCHEMA,
    Rejection,
    TraceInputError,
    shape_problem,
)
from kvexact.spec import itf
from kvexact.spec.checker.model import find_action, model_actions
from kvexact.spec.files import atomic_open, write_atomic


class TraceFormatError(TraceInputError):
    """A trace file that cannot be read: says which file, which line or state, and what is wrong."""


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
    """A :class:`Trace` (ITF JSON, as files hold it) from a recorder: its spec, initial state and records,
    whether they hold checker values (the reference's ``TraceRecorder``) or plain JSON already."""
    records = []
    for r in recorder.records:
        rec = {**r, "params": {k: itf.plain(v) for k, v in r.get("params", {}).items()},
               "state": {k: itf.plain(v) for k, v in r["state"].items()}}
        records.append(rec)
    return Trace(recorder.spec, _jsonable_constants(constants), tuple(sorted(set(model_values))),
                 {k: itf.plain(v) for k, v in recorder.initial_state.items()}, tuple(records))


def _jsonable_constants(constants: dict[str, Any]) -> dict[str, Any]:
    """Set-valued constants in their ITF form (the ITF module owns ``#set``); others as given."""
    return {k: itf.encode_plain(v) if isinstance(v, (set, frozenset)) else v for k, v in constants.items()}


def write_ndjson(trace: Trace, path: Path) -> None:
    """The header, one line per record, then the end line with the step count (a reader refuses a file
    without it: the trace was cut short)."""
    header = {"kind": "header", "spec": trace.spec, "constants": trace.constants,
              "model_values": list(trace.model_values), "initial_state": trace.initial_state}
    with atomic_open(path) as fh:
        fh.write(json.dumps(header, sort_keys=True) + "\n")
        for r in trace.records:
            fh.write(json.dumps(r, sort_keys=True) + "\n")
        fh.write(json.dumps({"kind": "end", "steps": len(trace.records)}) + "\n")


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
    write_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")


def read_text(path: Path, error: type[TraceInputError] = TraceFormatError,
              what: str = "a trace is an NDJSON or ITF JSON file") -> str:
    """The text of an input file; a missing file, a directory, unreadable bytes or non-UTF-8 content raise
    ``error`` with its :class:`Rejection` (``what`` says what the file should be)."""
    path = Path(path)
    if not path.exists():
        raise error(f"{path}: no such file", Rejection.NO_SUCH_FILE)
    if not path.is_file():
        raise error(f"{path}: not a regular file ({what})", Rejection.NOT_A_FILE)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}", Rejection.UNREADABLE) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: byte {exc.start}: not UTF-8 text ({what})", Rejection.NOT_TEXT) from None


def read_trace(path: Path) -> Trace:
    """Read an NDJSON or ITF trace; a malformed file raises :class:`TraceFormatError` naming the place and
    its :class:`Rejection` (invariant: nothing else escapes for any file content)."""
    path = Path(path)
    text = read_text(path)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise TraceFormatError(f"{path}: empty trace", Rejection.EMPTY)
    try:
        first = json.loads(lines[0])
    except (json.JSONDecodeError, RecursionError):
        first = None
    if isinstance(first, dict) and first.get("kind") == "header":
        return _read_ndjson(path, text)
    if (first is None and lines[0].lstrip()[:1] in "{[") or (isinstance(first, dict) and "states" in first):
        return _read_itf(path, text)
    if first is None:
        raise TraceFormatError(f"{path}:1: not JSON (a trace is an NDJSON or ITF JSON file)", Rejection.NOT_JSON)
    raise TraceFormatError(f"{path}:1: field kind: the first line must be the header ({{\"kind\": \"header\", ...}}) "
                           "or the file one ITF document", Rejection.BAD_FIELD)


def _shape(schema: dict[str, Any], doc: Any, where: str, prefix: str = "") -> None:
    try:
        problem = shape_problem(schema, doc, where, prefix)
    except RecursionError:
        problem = (Rejection.BAD_VALUE, f"{where}: a value is nested too deeply")
    if problem is not None:
        raise TraceFormatError(problem[1], problem[0])


def _state_values(state: dict[str, Any], where: str, field: str, seen: set[str]) -> None:
    """Each variable's value is ITF JSON (:data:`VALUE_SCHEMA`); a value already seen is not checked again."""
    for name, value in state.items():
        key = json.dumps(value, sort_keys=True)
        if key not in seen:
            _shape(VALUE_SCHEMA, value, where, f"{field}{name}/")
            seen.add(key)


def _same_variables(names: Iterable[str], expected: Iterable[str], where: str, what: str) -> None:
    names, expected = set(names), set(expected)
    if expected - names:
        raise TraceFormatError(f"{where}: field {', '.join(sorted(expected - names))}: missing ({what})",
                               Rejection.MISSING_VARIABLE)
    if names - expected:
        raise TraceFormatError(f"{where}: field {', '.join(sorted(names - expected))}: not a variable of the "
                               f"trace ({what})", Rejection.EXTRA_VARIABLE)


def _read_itf(path: Path, text: str) -> Trace:
    try:
        doc = json.loads(text)
    except RecursionError:
        raise TraceFormatError(f"{path}: the JSON document is nested too deeply", Rejection.NOT_JSON) from None
    except json.JSONDecodeError as exc:
        if not text[exc.pos:].strip():
            raise TraceFormatError(f"{path}:{exc.lineno}: the JSON document ends early: the trace is incomplete "
                                   "(cut short)", Rejection.TRUNCATED) from None
        raise TraceFormatError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}", Rejection.NOT_JSON) from None
    _shape(ITF_SCHEMA, doc, str(path))
    meta, states = itf.read_document(doc)
    seen: set[str] = set()
    for i, (_m, values) in enumerate(states):
        _state_values(values, f"{path}: trace state {i}", "", seen)
        _same_variables(values, doc["vars"], f"{path}: trace state {i}", "the document's 'vars' lists it")
    records = []
    for m, values in states[1:]:
        rec = {"action": m["action"], "params": m.get("params", {}), "state": values}
        if m.get("in_spec") is False:
            rec["in_spec"] = False
        records.append(rec)
    return Trace(meta["spec"], meta.get("constants", {}), tuple(meta.get("model_values", [])), states[0][1],
                 tuple(records))


def ndjson_lines(path: Path, text: str, error: type[TraceInputError] = TraceFormatError,
                 what: str = "trace") -> list[tuple[int, Any]]:
    """(line number, parsed JSON) of every non-blank line; ``error`` names the line and column of bad JSON."""
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), start=1) if ln.strip()]
    if not lines:
        raise error(f"{path}: empty {what}", Rejection.EMPTY)
    parsed = []
    for n, ln in lines:
        try:
            parsed.append((n, json.loads(ln)))
        except RecursionError:
            raise error(f"{path}:{n}: not JSON: nested too deeply", Rejection.NOT_JSON) from None
        except json.JSONDecodeError as exc:
            raise error(f"{path}:{n}:{exc.colno}: not JSON: {exc.msg}", Rejection.NOT_JSON) from None
    return parsed


def step_lines(path: Path, parsed: list[tuple[int, Any]],
               error: type[TraceInputError] = TraceFormatError) -> list[tuple[int, Any]]:
    """The lines between the header and the end line ``{"kind": "end", "steps": N}``, which must be the last
    line and count them; a file without it (cut short, header only) or with fewer lines is TRUNCATED."""
    ends = [i for i, (_n, doc) in enumerate(parsed) if i and isinstance(doc, dict) and doc.get("kind") == "end"]
    if not ends:
        raise error(f"{path}: no end line ({{\"kind\": \"end\", \"steps\": N}}) after line {parsed[-1][0]}: the "
                    "trace is incomplete (cut short, or written before traces had end lines: record it again)",
                    Rejection.TRUNCATED)
    i = ends[0]
    n, end = parsed[i]
    if i != len(parsed) - 1:
        raise error(f"{path}:{parsed[i + 1][0]}: a line after the end line (line {n})", Rejection.BAD_FIELD)
    problem = shape_problem(TRACE_END_SCHEMA, end, f"{path}:{n}")
    if problem is not None:
        raise error(problem[1], problem[0])
    if end["steps"] != i - 1:
        raise error(f"{path}:{n}: field steps: the end line counts {end['steps']} steps, the file has {i - 1}: "
                    "the trace is incomplete", Rejection.TRUNCATED)
    return parsed[1:i]


def _read_ndjson(path: Path, text: str) -> Trace:
    parsed = ndjson_lines(path, text)
    n0, header = parsed[0]
    _shape(TRACE_HEADER_SCHEMA, header, f"{path}:{n0}")
    variables = header["initial_state"]
    seen: set[str] = set()
    _state_values(variables, f"{path}:{n0}", "initial_state/", seen)
    records: list[dict[str, Any]] = []
    for i, (n, rec) in enumerate(step_lines(path, parsed), start=1):
        _shape(TRACE_RECORD_SCHEMA, rec, f"{path}:{n} (trace state {i})")
        _state_values(rec["state"], f"{path}:{n} (trace state {i})", "state/", seen)
        _same_variables(rec["state"], variables, f"{path}:{n} (trace state {i})",
                        "every state has the initial state's variables")
        records.append(rec)
    return Trace(header["spec"], header.get("constants", {}), tuple(header.get("model_values", [])),
                 header["initial_state"], tuple(records))


# -------------------------------------------------------------------------------------- validation


def constant_overrides(trace: Trace) -> dict[str, Any]:
    mvs = frozenset(trace.model_values)
    return {k: itf.decode(v, mvs) for k, v in trace.constants.items()}


_MODELS: dict[tuple, Any] = {}  # loaded models by (spec, cfg, constants): loading dominates short traces


def trace_model(trace: Trace, spec_path: Path, cfg_path: Path | None = None) -> Any:
    """The checker's model of the spec with the trace's constants (see :func:`spec_model`)."""
    return spec_model(spec_path, cfg_path, constant_overrides(trace), trace.model_values)


def spec_model(spec_path: Path, cfg_path: Path | None, constants: dict[str, Any],
               model_values: Iterable[str]) -> Any:
    """The checker's model of the spec with ``constants`` (checker values) bound, loaded once per spec, cfg,
    constants and model values; its split actions compiled on first use (a step names its action, so most
    are never run). A constant the spec cannot evaluate raises :class:`TraceFormatError` (BAD_VALUE)."""
    from kvexact.spec.checker.model import load_model

    cache_key = (str(spec_path), str(cfg_path), tuple(sorted(constants.items(), key=lambda kv: kv[0])),
                 frozenset(model_values))
    model = _MODELS.get(cache_key)
    if model is None:
        from kvexact.spec.checker.values import EvalError

        try:
            model = _MODELS[cache_key] = load_model(spec_path, cfg_path, constants, lazy_actions=True)
        except EvalError as exc:  # a constant of the wrong kind (a sequence where the spec needs a set)
            raise TraceFormatError(f"field constants: {Path(spec_path).name} cannot use the trace's constants: "
                                   f"{exc}", Rejection.BAD_VALUE) from None
    return model


def recorder_model(recorder: Any, constants: dict[str, Any], spec_path: Path, cfg_path: Path | None = None) -> Any:
    """:func:`spec_model` for a reference ``TraceRecorder``'s records: ``constants`` are Python values (sets,
    integers, names of model values), converted with the recorder's model values."""
    from kvexact.reference.adapters import checker_value

    mvs = frozenset(recorder.model_values)
    return spec_model(spec_path, cfg_path, {k: checker_value(v, mvs) for k, v in constants.items()}, mvs)


def check_fits(trace: Trace, model: Any, spec_path: Path, name: str = "trace") -> None:
    """Raise :class:`TraceFormatError` unless the trace's states have every variable of the spec (more are
    allowed: a projection may record more): WRONG_SPEC when the trace names another spec, else
    MISSING_VARIABLE. A recorder (its ``spec`` and ``initial_state``) may stand for the trace."""
    spec = Path(spec_path).stem
    missing = sorted(set(model.variables) - set(trace.initial_state))
    if missing and trace.spec != spec:
        raise TraceFormatError(f"{name}: this trace is for {trace.spec}, not {spec} (its states lack {spec}'s "
                               f"variable(s) {', '.join(missing)}); validate it against {trace.spec}",
                               Rejection.WRONG_SPEC)
    if missing:
        raise TraceFormatError(f"{name}: trace state 0: field {', '.join(missing)}: missing ({Path(spec_path).name} "
                               "declares it)", Rejection.MISSING_VARIABLE)


def validate(trace: Trace, spec_path: Path, cfg_path: Path | None = None,
             invariants: bool = True) -> TraceValidation:
    """Check that every state of ``trace`` satisfies the cfg's invariants (unless the caller already did,
    ``invariants=False``) and every step is a step of its named action of the spec (module invariant).
    A trace whose variables are not the spec's raises :class:`TraceFormatError` (:func:`check_fits`); a
    state the spec cannot evaluate (values of the wrong type) fails at that step."""
    model = trace_model(trace, spec_path, cfg_path)
    check_fits(trace, model, spec_path)
    mvs = frozenset(trace.model_values)

    def values(rec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        return ({k: itf.decode(v, mvs) for k, v in rec["state"].items()},
                {k: itf.decode(v, mvs) for k, v in rec.get("params", {}).items()})

    initial = {k: itf.decode(v, mvs) for k, v in trace.initial_state.items()}
    return _checked(model, spec_path, initial, trace.records, values, lambda rec: rec.get("params", {}), invariants)


def validate_recorded(recorder: Any, constants: dict[str, Any], spec_path: Path, cfg_path: Path | None = None,
                      invariants: bool = True) -> TraceValidation:
    """:func:`validate` of a reference ``TraceRecorder``'s records as they are (checker values, no JSON
    between); ``constants`` as :func:`recorder_model` takes them. The verdict is the one :func:`validate`
    gives the trace :func:`trace_from_recorder` makes of them."""
    model = recorder_model(recorder, constants, spec_path, cfg_path)
    check_fits(recorder, model, spec_path)
    return _checked(model, spec_path, recorder.initial_state, recorder.records,
                    lambda rec: (rec["state"], rec.get("params", {})),
                    lambda rec: {k: itf.plain(v) for k, v in rec.get("params", {}).items()}, invariants)


def _checked(model: Any, spec_path: Path, initial: dict[str, Any], records: Sequence[dict[str, Any]],
             values: Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]],
             shown: Callable[[dict[str, Any]], dict[str, Any]], invariants: bool) -> TraceValidation:
    """The checks of :func:`validate` over ``records`` (``values``: a record's state and parameters as checker
    values; ``shown``: its parameters as JSON, for a failure)."""
    from kvexact.spec.checker.values import EvalError

    counts: dict[str, int] = {}
    at = [0]  # the step being checked, for an evaluation error
    try:
        return _validate_steps(model, spec_path, initial, records, values, shown, invariants, counts, at)
    except EvalError as exc:
        i = at[0]
        action = records[i - 1]["action"] if i else "Init"
        return TraceValidation(False, max(i - 1, 0), counts, StepFailure(
            i, action, shown(records[i - 1]) if i else {}, (),
            f"the spec cannot evaluate this state with the trace's values: {exc}"))


def _validate_steps(model: Any, spec_path: Path, prev: dict[str, Any], records: Sequence[dict[str, Any]],
                    values: Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]],
                    shown: Callable[[dict[str, Any]], dict[str, Any]], invariants: bool,
                    counts: dict[str, int], at: list[int]) -> TraceValidation:
    actions = model_actions(model)
    broken = model.violated_invariant(prev) if invariants else None
    if broken:
        return TraceValidation(False, 0, {}, StepFailure(0, "Init", {}, (), f"invariant {broken} does not hold"))
    for i, rec in enumerate(records, start=1):
        at[0] = i
        state, params = values(rec)
        changed = tuple(sorted(k for k in state if prev.get(k) != state[k]))
        action = rec["action"]
        broken = model.violated_invariant(state) if invariants else None
        if broken:
            return TraceValidation(False, i - 1, counts, StepFailure(
                i, action, shown(rec), changed, f"invariant {broken} does not hold after the step"))
        if rec.get("in_spec") is False:
            if changed:
                return TraceValidation(False, i - 1, counts, StepFailure(
                    i, action, shown(rec), changed, "a step outside the spec changed spec variables"))
        elif (spec_action := find_action(actions, action)) is None:
            return TraceValidation(False, i - 1, counts, StepFailure(
                i, action, shown(rec), changed, f"{action} is not an action of {Path(spec_path).name}"))
        else:
            if params and set(params) != set(actions[spec_action]):
                raise TraceFormatError(f"trace state {i}: field params: {spec_action} takes "
                                       f"({', '.join(actions[spec_action])}), the record gives "
                                       f"({', '.join(sorted(params))})", Rejection.BAD_FIELD)
            verdict = model.check_step(spec_action, prev, state, params or None)
            if not verdict.ok:
                return TraceValidation(False, i - 1, counts, StepFailure(
                    i, action, shown(rec), changed,
                    f"{verdict.failed or 'not a step of the action'} ({verdict.location})"))
        counts[action] = counts.get(action, 0) + 1
        prev = state
    return TraceValidation(True, len(records), counts)
