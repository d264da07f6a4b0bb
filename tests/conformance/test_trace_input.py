"""Bad trace files get one line saying what and where, a named Rejection and exit 2 (issue 24, part B):
every probe of the issue is reproduced here as a file and checked by the reader and by ``validate-trace``."""

from __future__ import annotations

import copy
import json
import os

import pytest
from trace_helpers import kv_trace

from kvexact.conformance import trace as tr
from kvexact.conformance.line_schemas import Rejection, TraceInputError
from kvexact.spec import spec_dir


@pytest.fixture(scope="module")
def good():
    return kv_trace()


def itf_doc(trace: tr.Trace, tmp_path) -> dict:
    path = tmp_path / "good.itf.json"
    tr.write_itf(trace, path)
    return json.loads(path.read_text())


def refused(kvexact_cli, path, kind: Rejection, *fragments: str, spec: str = "KVAllocation") -> str:
    """The reader refuses ``path`` with ``kind``; the CLI prints one line with the fragments, exits 2."""
    with pytest.raises(TraceInputError) as exc:
        tr.read_trace(path) if kind is not Rejection.WRONG_SPEC else tr.validate(tr.read_trace(path),
                                                                                  spec_dir() / f"{spec}.tla")
    assert exc.value.kind is kind, exc.value
    code, out = kvexact_cli(["validate-trace", spec, str(path)]).code_and_text
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert code == 2, out
    assert len(lines) == 1 and kind.name in lines[0], out
    assert "Traceback" not in out and "internal error" not in out and "could not validate" not in out
    for fragment in fragments:
        assert fragment in lines[0], (fragment, out)
    return lines[0]


def _set(path: list, value):
    def mutate(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return mutate


_DELETE = object()

ITF_PROBES = {
    "action_is_a_number": (_set(["states", 2, "#meta", "action"], 5), Rejection.BAD_FIELD,
                           "trace state 2: field #meta/action: 5 is not of type 'string'"),
    "parameters_are_a_list": (_set(["states", 2, "#meta", "params"], [1, 2]), Rejection.BAD_FIELD,
                              "trace state 2: field #meta/params:"),
    "constants_are_a_string": (_set(["#meta", "constants"], "P=2"), Rejection.BAD_FIELD,
                               "field #meta/constants: 'P=2' is not of type 'object'"),
    "malformed_bigint": (_set(["states", 2, "epoch"], {"#bigint": "x12"}), Rejection.BAD_VALUE,
                         "trace state 2: field epoch/#bigint: 'x12'"),
    "float_value": (_set(["states", 1, "epoch"], 1.5), Rejection.BAD_VALUE, "trace state 1: field epoch: 1.5"),
    "state_missing_a_variable": (_set(["states", 2, "epoch"], _DELETE), Rejection.MISSING_VARIABLE,
                                 "trace state 2: field epoch: missing"),
    "state_is_a_number": (_set(["states", 2], 7), Rejection.BAD_FIELD,
                          "trace state 2: field (the state): 7 is not of type 'object'"),
    "no_states": (_set(["states"], []), Rejection.BAD_FIELD, "field states:"),
}


@pytest.mark.parametrize("probe", sorted(ITF_PROBES))
def test_itf_probe_is_one_line_naming_state_and_field(tmp_path, kvexact_cli, good, probe):
    mutate, kind, fragment = ITF_PROBES[probe]
    doc = itf_doc(good, tmp_path)
    mutate(doc)
    path = tmp_path / f"{probe}.itf.json"
    path.write_text(json.dumps(doc, indent=1))
    refused(kvexact_cli, path, kind, f"{path.name}: {fragment}")


def ndjson_lines(trace: tr.Trace, tmp_path) -> list[str]:
    path = tmp_path / "good.ndjson"
    tr.write_ndjson(trace, path)
    return path.read_text().splitlines(keepends=True)


def test_header_only_ndjson_is_truncated(tmp_path, kvexact_cli, good):
    path = tmp_path / "h.ndjson"
    path.write_text(ndjson_lines(good, tmp_path)[0])
    refused(kvexact_cli, path, Rejection.TRUNCATED, "h.ndjson: no end line", "incomplete")


@pytest.mark.parametrize("keep", [2, 5, -1])
def test_ndjson_cut_at_a_line_boundary_is_truncated(tmp_path, kvexact_cli, good, keep):
    lines = ndjson_lines(good, tmp_path)
    path = tmp_path / "cut.ndjson"
    path.write_text("".join(lines[:keep]))
    refused(kvexact_cli, path, Rejection.TRUNCATED, "incomplete")


def test_ndjson_with_a_step_removed_is_truncated(tmp_path, kvexact_cli, good):
    lines = ndjson_lines(good, tmp_path)
    path = tmp_path / "gap.ndjson"
    path.write_text("".join(lines[:3] + lines[4:]))
    refused(kvexact_cli, path, Rejection.TRUNCATED, f"the end line counts {len(good.records)} steps")


def test_itf_cut_at_a_line_boundary_is_truncated(tmp_path, kvexact_cli, good):
    tr.write_itf(good, tmp_path / "full.itf.json")
    text = (tmp_path / "full.itf.json").read_text().splitlines(keepends=True)
    path = tmp_path / "cut.itf.json"
    path.write_text("".join(text[: len(text) // 2]))
    refused(kvexact_cli, path, Rejection.TRUNCATED, "ends early", "incomplete")


def test_a_complete_zero_step_trace_still_reads(tmp_path, good):
    """The end line makes a 0-step trace complete: it reads (the header-only file above does not)."""
    empty = tr.Trace(good.spec, good.constants, good.model_values, good.initial_state, ())
    path = tmp_path / "zero.ndjson"
    tr.write_ndjson(empty, path)
    back = tr.read_trace(path)
    assert back.records == () and back.initial_state == good.initial_state


@pytest.mark.parametrize("name, content, kind", [
    ("random_bytes", bytes(range(256)) * 8, Rejection.NOT_TEXT),
    ("binary_file", b"\x7fELF\x02\x01\x01\x00" + bytes(200), Rejection.NOT_JSON),
    ("utf8_not_json", b"name,value\nP,2\n", Rejection.NOT_JSON),
    ("empty_file", b"", Rejection.EMPTY),
    ("json_array", b"[1, 2, 3]\n", Rejection.BAD_FIELD),
])
def test_file_that_is_not_a_trace(tmp_path, kvexact_cli, name, content, kind):
    path = tmp_path / name
    path.write_bytes(content)
    refused(kvexact_cli, path, kind, name)


def test_random_bytes_file(tmp_path, kvexact_cli):
    path = tmp_path / "random.bin"
    path.write_bytes(b"\xff" + os.urandom(4095))
    refused(kvexact_cli, path, Rejection.NOT_TEXT, "random.bin: byte 0: not UTF-8 text")


def test_directory_and_missing_file(tmp_path, kvexact_cli):
    refused(kvexact_cli, tmp_path, Rejection.NOT_A_FILE, "not a regular file")
    refused(kvexact_cli, tmp_path / "absent.ndjson", Rejection.NO_SUCH_FILE, "absent.ndjson: no such file")


def cow_trace() -> tr.Trace:
    """A short CowPublication trace recorded by the reference (append, fork, release)."""
    from kvexact.reference import lifecycle
    from kvexact.reference.adapters import TraceRecorder
    from kvexact.reference.allocator import Allocator
    from kvexact.reference.pool import GroupConfig, QueuePolicy

    alloc = Allocator([GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 2, 4)], [[1, 2, 3], [1, 2, 3]],
                      check_every_op=True, policy=QueuePolicy.LOWEST_ID)
    rec = TraceRecorder("CowPublication", requests=["a", "d"], readers=["x"]).attach(alloc)
    alloc.append("a", 1)
    lifecycle.fork(alloc, "a", "d")
    lifecycle.release(alloc, "d")
    constants = {"Groups": {0, 1}, "Blocks": {1, 2, 3}, "Requests": {"a", "d"}, "Readers": {"x"},
                 "NoReq": "NoReq", "Tokens": {1, 2, 3}, "P": 2, "MaxTokens": 4, "Concurrent": 1}
    return tr.trace_from_recorder(rec, constants, {"a", "d", "x", "NoReq"})


@pytest.mark.parametrize("fmt", ["ndjson", "itf"])
def test_cow_trace_against_kv_allocation_is_wrong_spec(tmp_path, kvexact_cli, fmt):
    trace = cow_trace()
    path = tmp_path / f"cow.{fmt}.json"
    (tr.write_ndjson if fmt == "ndjson" else tr.write_itf)(trace, path)
    assert tr.validate(trace, spec_dir() / "CowPublication.tla").ok  # the trace itself is a good one
    refused(kvexact_cli, path, Rejection.WRONG_SPEC, "this trace is for CowPublication, not KVAllocation")


def test_module_engine_ignores_a_constant_the_spec_no_longer_declares(tmp_path, kvexact_cli, good):
    """A trace carrying MaxReqGen (recorded before KVAllocation dropped it) validates with --engine module:
    the generated cfg assigns only constants the spec declares, and the embedded checker replays it."""
    from kvexact.conformance.trace_module import accepted, declared_constants, write_trace_module
    from kvexact.spec.checker import check_model

    old = tr.Trace(good.spec, {**good.constants, "MaxReqGen": 64}, good.model_values, good.initial_state,
                   good.records)
    module = write_trace_module(old, spec_dir() / "KVAllocation.tla", tmp_path / "m")
    cfg = module.with_suffix(".cfg").read_text()
    assert "MaxReqGen" not in cfg and "    P = 2" in cfg
    assert "MaxReqGen" not in declared_constants(spec_dir() / "KVAllocation.tla")
    result = check_model(module, module.with_suffix(".cfg"))
    assert accepted(result), result.messages
    path = tmp_path / "old.ndjson"
    tr.write_ndjson(old, path)
    code, out = kvexact_cli(["validate-trace", "KVAllocation", str(path), "--engine", "module"]).code_and_text
    assert code == 0 and "accepted by the module engine" in out, out


def test_machine_trace_constants_are_declared_by_the_spec():
    """The allocator machine records only constants its spec declares (MaxReqGen is gone)."""
    from kvexact.conformance.machines.allocator import spec_constants
    from kvexact.conformance.trace_module import declared_constants
    from kvexact.reference.adapters import AdapterConfig

    for spec in ("KVAllocation", "CowPublication"):
        recorded = set(spec_constants(spec, AdapterConfig()))
        assert recorded <= declared_constants(spec_dir() / f"{spec}.tla"), (spec, recorded)


def test_values_of_the_wrong_type_fail_at_their_step(tmp_path, good):
    """Schema-valid values the spec cannot use (a string epoch) fail the step that holds them, named."""
    records = [copy.deepcopy(r) for r in good.records]
    records[1]["state"]["epoch"] = "soon"
    bad = tr.Trace(good.spec, good.constants, good.model_values, good.initial_state, tuple(records))
    result = tr.validate(bad, spec_dir() / "KVAllocation.tla", spec_dir() / "KVAllocation.cfg")
    assert not result.ok and result.failure is not None and result.failure.index == 2, result.summary()


@pytest.mark.parametrize("change, kind, fragment", [
    (lambda state: state.pop("epoch"), Rejection.MISSING_VARIABLE, "(trace state 2): field epoch: missing"),
    (lambda state: state.update(colour=1), Rejection.EXTRA_VARIABLE, "(trace state 2): field colour: not a variable"),
    (lambda state: state.update(epoch={"#bigint": "12x"}), Rejection.BAD_VALUE,
     "(trace state 2): field state/epoch/#bigint: '12x'"),
])
def test_ndjson_record_state_probe(tmp_path, kvexact_cli, good, change, kind, fragment):
    lines = ndjson_lines(good, tmp_path)
    record = json.loads(lines[2])
    change(record["state"])
    path = tmp_path / "s.ndjson"
    path.write_text("".join([*lines[:2], json.dumps(record) + "\n", *lines[3:]]))
    refused(kvexact_cli, path, kind, f"s.ndjson:3 {fragment}")


@pytest.mark.parametrize("keep, fragment", [(1, "no end line"), (3, "no end line"), (-1, "no end line")])
def test_partial_trace_cut_or_header_only_is_truncated(tmp_path, kvexact_cli, good, keep, fragment):
    """A partial trace ends with its end line too: header-only or cut at a line boundary is TRUNCATED."""
    head = {"kind": "partial", "spec": "KVAllocation", "constants": good.constants,
            "model_values": list(good.model_values)}
    steps = [{"action": "Release", "params": {"r": "r1"}}, {"action": "Release", "params": {"r": "r2"}}]
    lines = [json.dumps(x) + "\n" for x in [head, *steps, {"kind": "end", "steps": len(steps)}]]
    path = tmp_path / "p.ndjson"
    path.write_text("".join(lines[:keep]))
    from kvexact.conformance import partial_file as pf

    with pytest.raises(pf.PartialFormatError) as exc:
        pf.read_partial(path)
    assert exc.value.kind is Rejection.TRUNCATED and fragment in str(exc.value)
    code, out = kvexact_cli(["validate-trace", "KVAllocation", str(path)]).code_and_text
    assert code == 2 and "TRUNCATED" in out and len(out.strip().splitlines()) == 1, out


def test_params_that_are_not_the_actions_parameters(tmp_path, kvexact_cli, good):
    """Found by the fuzz: cache_block's params without ``j`` reached the checker as a KeyError."""
    lines = ndjson_lines(good, tmp_path)
    n = next(i for i, ln in enumerate(lines) if '"cache_block"' in ln)
    record = json.loads(lines[n])
    del record["params"]["j"]
    path = tmp_path / "params.ndjson"
    path.write_text("".join([*lines[:n], json.dumps(record) + "\n", *lines[n + 1:]]))
    with pytest.raises(TraceInputError) as exc:
        tr.validate(tr.read_trace(path), spec_dir() / "KVAllocation.tla")
    assert exc.value.kind is Rejection.BAD_FIELD and "CacheBlock takes (r, j)" in str(exc.value)
    code, out = kvexact_cli(["validate-trace", "KVAllocation", str(path)]).code_and_text
    assert code == 2 and "field params: CacheBlock takes" in out and "BAD_FIELD" in out, out


def test_a_field_name_with_a_newline_is_still_one_line(tmp_path, kvexact_cli, good):
    """Found by the fuzz: a constant named "\\n" made a two-line error; it is shown escaped."""
    lines = ndjson_lines(good, tmp_path)
    header = json.loads(lines[0])
    header["constants"] = {"\n": None}
    path = tmp_path / "nl.ndjson"
    path.write_text("".join([json.dumps(header) + "\n", *lines[1:]]))
    refused(kvexact_cli, path, Rejection.BAD_VALUE, "field constants/\\n: None")
