"""Partial traces: the NDJSON format (shape-checked at the border) and the constrained search over the spec."""

from __future__ import annotations

import json

import pytest
from trace_helpers import kv_trace, run_cli

from kvexact.conformance import partial_file as pf
from kvexact.conformance.partial_trace import PartialRejection
from kvexact.spec import spec_dir
from kvexact.spec.checker.model import action_of

SPEC = spec_dir() / "KVAllocation.tla"


def header(trace, **extra):
    return {"kind": "partial", "spec": "KVAllocation", "constants": trace.constants,
            "model_values": list(trace.model_values), **extra}


def lines_of(trace, keep=("len",), params=False):
    """One action line per record, giving only the variables in ``keep`` (and the params if asked)."""
    out = []
    for r in trace.records:
        line = {"action": action_of("KVAllocation", r["action"]), "state": {v: r["state"][v] for v in keep}}
        if params:
            line["params"] = r["params"]
        out.append(line)
    return out


def write(path, head, lines):
    """A partial-trace file: the header, the step lines, the end line that counts them."""
    end = {"kind": "end", "steps": len(lines)}
    path.write_text("\n".join(json.dumps(x) for x in [head, *lines, end]) + "\n")
    return path


def check(path):
    return pf.validate_partial(pf.read_partial(path), SPEC, path.name)


def test_a_full_trace_with_most_variables_dropped_is_accepted(tmp_path):
    trace = kv_trace()
    result = check(write(tmp_path / "p.ndjson", header(trace), lines_of(trace)))
    assert result.ok, result.summary()
    assert result.steps == len(trace.records)


def test_a_wrong_given_variable_is_rejected_at_its_line_with_the_field(tmp_path):
    trace = kv_trace()
    lines = lines_of(trace)
    lines[3]["state"]["len"] = {"#map": [["r1", 2], ["r2", 0]]}  # AppendPublish makes len[r1] = 1
    result = check(write(tmp_path / "p.ndjson", header(trace), lines))
    assert not result.ok
    f = result.failure
    assert f.rejection is PartialRejection.UNEXPLAINED and f.index == 5  # file line 5 = record 4
    assert f.nearest is not None and f.nearest.action == "AppendPublish"
    assert "variable len" in f.nearest.reason and f.num_candidates >= 1


def test_a_disabled_action_names_the_false_conjunct(tmp_path):
    trace = kv_trace()
    lines = lines_of(trace)
    lines.insert(1, {"action": "CacheBlock", "params": {"j": 1}})  # nothing is published yet
    result = check(write(tmp_path / "p.ndjson", header(trace), lines))
    assert not result.ok and result.failure.index == 3
    assert result.failure.nearest.rank == 2 and "is FALSE" in result.failure.nearest.reason


def test_unlogged_steps_are_explained_only_when_declared_internal(tmp_path):
    trace = kv_trace()
    lines = [x for x in lines_of(trace) if x["action"] != "AppendWrite"]
    bare = check(write(tmp_path / "a.ndjson", header(trace), lines))
    assert not bare.ok and bare.failure.index == 4  # the AppendPublish right after the dropped AppendWrite
    hidden = check(write(tmp_path / "b.ndjson", header(trace, internal=["AppendWrite"], internal_max=1), lines))
    assert hidden.ok, hidden.summary()


def test_silent_variables_forbid_internal_steps_that_change_them(tmp_path):
    trace = kv_trace()
    lines = [x for x in lines_of(trace, keep=("ident",)) if x["action"] != "CacheBlock"]
    loose = check(write(tmp_path / "a.ndjson", header(trace, internal=["CacheBlock"], internal_max=1), lines))
    assert loose.ok, loose.summary()
    strict = header(trace, internal=["CacheBlock"], internal_max=1, silent=["ident"])
    result = check(write(tmp_path / "b.ndjson", strict, lines))
    assert not result.ok and result.failure.index == 7  # the Release whose given ident has identity 1


@pytest.mark.parametrize("mode", ["exhaustive", "minimal"])
def test_both_modes_accept_and_the_candidate_set_is_reported(tmp_path, mode):
    trace = kv_trace()
    lines = lines_of(trace, keep=())
    result = check(write(tmp_path / "p.ndjson", header(trace, mode=mode), lines))
    assert result.ok and len(result.growth) == len(lines)
    # with no variable given, AppendReserve's block is unknown: more than one candidate survives
    assert result.max_candidates > 1


def test_a_bad_initial_state_is_named(tmp_path):
    trace = kv_trace()
    result = check(write(tmp_path / "p.ndjson", header(trace, init={"epoch": 7}), lines_of(trace)))
    assert not result.ok and result.failure.rejection is PartialRejection.NO_INITIAL_STATE


def test_an_unknown_action_is_named(tmp_path):
    trace = kv_trace()
    result = check(write(tmp_path / "p.ndjson", header(trace), [{"action": "Teleport"}]))
    assert not result.ok and result.failure.rejection is PartialRejection.UNKNOWN_ACTION


@pytest.mark.parametrize("line, field", [
    ({"action": "CacheBlock", "params": [1]}, "params"),
    ({"action": 3}, "action"),
    ({"action": "Release", "internal_max": -1}, "internal_max"),
    ({"action": "Release", "colour": "red"}, "(the line)"),
    ({"event": "BlockStored", "fields": {"block_hashes": [1], "parent_block_hash": None, "token_ids": [1],
                                         "block_size": "16"}}, "fields/block_size"),
    ({"event": "Exploded"}, "event"),
])
def test_a_malformed_line_is_one_line_naming_line_and_field(tmp_path, capsys, line, field):
    trace = kv_trace()
    path = write(tmp_path / "p.ndjson", header(trace, events="vllm") if "event" in line else header(trace),
                 [lines_of(trace)[0], line])
    with pytest.raises(pf.PartialFormatError) as exc:
        pf.read_partial(path)
    assert f"p.ndjson:3: field {field}:" in str(exc.value) and "\n" not in str(exc.value)
    code, out = run_cli(["validate-trace", "KVAllocation", str(path)], capsys)
    assert code == 2 and "p.ndjson:3: field" in out and "Traceback" not in out


def test_a_bad_header_is_named(tmp_path):
    path = tmp_path / "p.ndjson"
    path.write_text(json.dumps({"kind": "partial", "spec": "KVAllocation", "mode": "fast"}) + "\n"
                    + json.dumps({"kind": "end", "steps": 0}) + "\n")
    with pytest.raises(pf.PartialFormatError, match=r"p.ndjson:1: field mode:"):
        pf.read_partial(path)


def test_cli_accepts_and_rejects_partial_traces(tmp_path, capsys):
    trace = kv_trace()
    good = write(tmp_path / "good.ndjson", header(trace), lines_of(trace))
    code, out = run_cli(["validate-trace", "KVAllocation", str(good)], capsys)
    assert code == 0 and "partial trace accepted" in out
    lines = lines_of(trace)
    lines[0]["action"] = "Release"
    bad = write(tmp_path / "bad.ndjson", header(trace), lines)
    code, out = run_cli(["validate-trace", "KVAllocation", str(bad)], capsys)
    assert code == 1 and "rejected at bad.ndjson:2" in out and "nearest miss: Release" in out


# ------------------------------------------------------------------------------- generated trace spec


@pytest.mark.parametrize("internal, expect", [(["AppendWrite"], 0), ([], 1)])
def test_the_generated_trace_spec_agrees_with_the_search(tmp_path, capsys, internal, expect):
    trace = kv_trace()
    lines = [x for x in lines_of(trace) if x["action"] != "AppendWrite"]
    path = write(tmp_path / "p.ndjson", header(trace, internal=internal, internal_max=1), lines)
    assert check(path).ok is (expect == 0)
    code, out = run_cli(["validate-trace", "KVAllocation", str(path), "--engine", "module",
                         "--write-module", str(tmp_path / "out")], capsys)
    assert code == expect, out
    assert ("accepted" if expect == 0 else "rejected") in out
    text = (tmp_path / "out" / "KVAllocationPartial.tla").read_text()
    assert "EXTENDS KVAllocation" in text and "TraceNotFinished == tl <= 7" in text


def test_the_generated_trace_spec_under_tlc(tmp_path, capsys, monkeypatch, tlc_jar):
    trace = kv_trace()
    path = write(tmp_path / "p.ndjson", header(trace), lines_of(trace))
    jar = tlc_jar  # skips outside CI only, fails in CI without TLC
    code, out = run_cli(["validate-trace", "KVAllocation", str(path), "--engine", "tlc", "--tlc-jar", jar], capsys)
    assert code == 0 and "accepted" in out


def test_an_event_mapped_file_has_no_generated_spec(tmp_path, capsys):
    trace = kv_trace()
    path = write(tmp_path / "p.ndjson", header(trace, events="vllm"), [{"event": "AllBlocksCleared"}])
    code, out = run_cli(["validate-trace", "KVAllocation", str(path), "--engine", "module"], capsys)
    assert code == 2 and "no generated TLA+ module" in out


def test_event_lines_in_a_partial_trace_go_through_the_vllm_mapping(tmp_path):
    trace = kv_trace()
    stored = {"block_hashes": [7, 8], "parent_block_hash": None, "token_ids": [1, 2, 3, 4], "block_size": 2}
    lines = [{"event": "BlockStored", "fields": stored}, {"event": "BlockRemoved", "fields": {"block_hashes": [8]}},
             {"event": "AllBlocksCleared"}]
    head = header(trace, events="vllm", blocks=4, requests=1)
    assert check(write(tmp_path / "a.ndjson", head, lines)).ok
    again = [*lines[:2], {"event": "BlockRemoved", "fields": {"block_hashes": [8]}}]
    result = check(write(tmp_path / "b.ndjson", head, again))
    assert not result.ok and result.failure.index == 4 and "not cached" in result.failure.nearest.reason


def test_the_docs_worked_example_is_accepted_and_fails_without_its_in_place_append(tmp_path):
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "docs" / "runtime.md").read_text()
    start = readme.index('{"kind": "partial"')
    block = readme[start:readme.index("```", start)].strip().splitlines()
    path = tmp_path / "example.ndjson"
    path.write_text("\n".join(block) + "\n")
    assert check(path).ok
    steps = [x for x in block[1:-1] if "AppendInPlace" not in x]
    path.write_text("\n".join([block[0], *steps, json.dumps({"kind": "end", "steps": len(steps)})]) + "\n")
    result = check(path)
    assert not result.ok and result.failure.index == len(block) - 2


def test_a_candidate_set_past_its_bound_is_named(tmp_path):
    trace = kv_trace()
    result = check(write(tmp_path / "p.ndjson", header(trace, max_candidates=1), lines_of(trace, keep=())))
    assert not result.ok and result.failure.rejection is PartialRejection.TOO_MANY_CANDIDATES
