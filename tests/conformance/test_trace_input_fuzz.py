"""Fuzz of the trace readers (issue 24, B): random bytes, random and truncated JSON/NDJSON and mutated real
traces are either read (and then validated without an internal error) or refused with a named Rejection;
never a traceback, never exit 3. A strict prefix of a trace file is never read as a trace."""

from __future__ import annotations

import copy
import functools
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trace_helpers import kv_trace

from kvexact.conformance import partial_file as pf
from kvexact.conformance import trace as tr
from kvexact.conformance.line_schemas import Rejection, TraceInputError
from kvexact.conformance.vllm_events import read_events
from kvexact.spec import spec_dir

SPEC = spec_dir() / "KVAllocation.tla"
KEYS = ["#bigint", "#set", "#map", "#tup", "#unserializable", "#meta", "kind", "spec", "states", "vars", "action",
        "params", "state", "initial_state", "constants", "steps", "model_values", "in_spec", "header", "end",
        "partial", "event", "epoch"]
SCALARS = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.sampled_from(KEYS)
           | st.text(max_size=6))
JSON = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=4)
                    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), kids, max_size=4), max_leaves=24)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                        HealthCheck.too_slow])


@functools.cache
def good_texts() -> dict[str, str]:
    """The good trace in both formats, as text."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        trace = kv_trace()
        tr.write_ndjson(trace, folder / "t.ndjson")
        tr.write_itf(trace, folder / "t.itf.json")
        return {"ndjson": (folder / "t.ndjson").read_text(), "itf": (folder / "t.itf.json").read_text()}


def read_both(path: Path) -> tr.Trace | None:
    """The readers (partial traces, vLLM event logs, traces) on ``path``: each reads it or refuses it with a
    Rejection (any other exception fails the test); the trace, if read."""
    for reader in (pf.read_partial, read_events, tr.read_trace):
        try:
            got = reader(path)
        except TraceInputError as exc:
            assert isinstance(exc.kind, Rejection) and "\n" not in str(exc) and str(path.name) in str(exc)
            got = None
        if reader is tr.read_trace:
            return got
    return None


def write(tmp_path: Path, data: bytes | str) -> Path:
    path = tmp_path / "fuzzed.trace"
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    return path


@FUZZ
@given(data=st.binary(max_size=2048))
def test_random_bytes(tmp_path, data):
    read_both(write(tmp_path, data))


@FUZZ
@given(doc=JSON, indent=st.none() | st.just(1))
def test_random_json_document(tmp_path, doc, indent):
    read_both(write(tmp_path, json.dumps(doc, indent=indent)))


@FUZZ
@given(lines=st.lists(JSON, min_size=1, max_size=6), header=st.sampled_from(["header", "partial", None]))
def test_random_ndjson(tmp_path, lines, header):
    head = [{"kind": header, "spec": "KVAllocation", "initial_state": {"epoch": 0}}] if header else []
    read_both(write(tmp_path, "\n".join(json.dumps(x) for x in [*head, *lines]) + "\n"))


@FUZZ
@given(fmt=st.sampled_from(["ndjson", "itf"]), cut=st.floats(0, 1, exclude_max=True))
def test_a_truncated_trace_is_never_read(tmp_path, fmt, cut):
    text = good_texts()[fmt].rstrip()
    prefix = text[: int(len(text) * cut)]
    with pytest.raises(TraceInputError) as exc:
        tr.read_trace(write(tmp_path, prefix))
    assert exc.value.kind in (Rejection.EMPTY, Rejection.TRUNCATED, Rejection.NOT_JSON, Rejection.BAD_FIELD), exc.value


def _paths(doc, prefix=()):
    yield prefix
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        yield from _paths(value, (*prefix, key))


def _mutated(doc, path, value, delete):
    doc = copy.deepcopy(doc)
    if not path:
        return value
    target = doc
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(fmt=st.sampled_from(["ndjson", "itf"]), pick=st.integers(0, 10**9), value=JSON, delete=st.booleans())
def test_a_mutated_trace_is_read_and_validated_or_refused(tmp_path, fmt, pick, value, delete):
    """One node of a real trace replaced (or deleted): refused by name, or read and then validated to a
    verdict (accepted or failed at a step), never an internal error. (Validation runs when the constants are
    the original ones: other constants load another model, which costs seconds a time; a bad constant has its
    own test.)"""
    texts = good_texts()
    if fmt == "itf":
        doc = json.loads(texts["itf"])
    else:
        doc = [json.loads(ln) for ln in texts["ndjson"].splitlines()]
    paths = list(_paths(doc))
    path = paths[pick % len(paths)]
    doc = _mutated(doc, path, value, delete and bool(path))
    text = json.dumps(doc) if fmt == "itf" else "\n".join(json.dumps(x) for x in doc) + "\n" if isinstance(
        doc, list) else json.dumps(doc)
    trace = read_both(write(tmp_path, text))
    if trace is None or trace.constants != kv_trace().constants:
        return
    try:
        result = tr.validate(trace, SPEC, SPEC.with_suffix(".cfg"))
    except TraceInputError as exc:
        assert exc.kind in (Rejection.WRONG_SPEC, Rejection.MISSING_VARIABLE, Rejection.BAD_FIELD), exc
        return
    assert isinstance(result, tr.TraceValidation) and (result.ok or result.failure is not None)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(kind=st.sampled_from(["bytes", "cut", "json"]), data=st.binary(max_size=512), cut=st.floats(0, 1),
       doc=JSON)
def test_cli_never_exits_3_on_bad_trace_input(tmp_path, kvexact_cli, kind, data, cut, doc):
    texts = good_texts()
    if kind == "bytes":
        content: bytes | str = data
    elif kind == "cut":
        content = texts["ndjson"][: int(len(texts["ndjson"].rstrip()) * cut)]
    else:
        content = json.dumps(doc)
    result = kvexact_cli(["validate-trace", "KVAllocation", str(write(tmp_path, content))])
    assert result.code in (0, 1, 2), result.text
    assert "Traceback" not in result.text and "internal error" not in result.text
    if result.code == 2:
        assert len([ln for ln in result.err.splitlines() if ln.strip()]) == 1, result.text


def test_constants_the_spec_cannot_use_are_bad_value(tmp_path, kvexact_cli):
    """Found by the fuzz above: Blocks given as a sequence, not a set, is refused by name (was EvalError)."""
    doc = json.loads(good_texts()["itf"])
    doc["#meta"]["constants"]["Blocks"] = []
    path = write(tmp_path, json.dumps(doc))
    with pytest.raises(TraceInputError) as exc:
        tr.validate(tr.read_trace(path), SPEC)
    assert exc.value.kind is Rejection.BAD_VALUE and "field constants" in str(exc.value)
    result = kvexact_cli(["validate-trace", "KVAllocation", str(path)])
    assert result.code == 2 and "BAD_VALUE" in result.err and "Traceback" not in result.text, result.text
