"""Trace export (NDJSON, ITF) and validation of reference traces against the shipped specs."""

from __future__ import annotations

import inspect
import json
import textwrap

import pytest
from trace_helpers import CONSTANTS, MODEL_VALUES, kv_trace

from kvexact.conformance import trace as tr
from kvexact.reference import allocator as allocator_module
from kvexact.reference import lifecycle
from kvexact.reference.adapters import TraceRecorder
from kvexact.reference.allocator import Allocator, AllocRejection
from kvexact.reference.pool import GroupConfig
from kvexact.reference.rejections import Rejected
from kvexact.spec import spec_dir


def test_reference_trace_is_accepted():
    trace = kv_trace()
    result = tr.validate(trace, spec_dir() / "KVAllocation.tla", spec_dir() / "KVAllocation.cfg")
    assert result.ok, result.summary()
    assert result.steps == len(trace.records) >= 7
    assert result.actions["append_reserve"] == 2 and result.actions["prefix_hit"] == 1
    # validation compiled no split action of Next: each step was checked with its named action
    model = tr.trace_model(trace, spec_dir() / "KVAllocation.tla", spec_dir() / "KVAllocation.cfg")
    assert model.lazy_actions and not any("act" in vars(a) for a in model.actions)


@pytest.mark.parametrize("fmt", ["ndjson", "itf"])
def test_round_trip_and_cli(tmp_path, kvexact_cli, fmt):
    trace = kv_trace()
    path = tmp_path / f"t.{fmt}.json"
    (tr.write_ndjson if fmt == "ndjson" else tr.write_itf)(trace, path)
    back = tr.read_trace(path)
    assert back.spec == "KVAllocation" and back.records == trace.records
    assert back.initial_state == trace.initial_state
    code, out = kvexact_cli(["validate-trace", "KVAllocation", str(path)]).code_and_text
    assert code == 0 and "trace accepted" in out


def test_tampered_trace_names_step_action_and_variables(tmp_path, kvexact_cli):
    """Bump one block's generation in the published state: that step is no longer a step of the spec."""
    trace = kv_trace()
    records = [dict(r) for r in trace.records]
    idx = next(i for i, r in enumerate(records) if r["action"] == "append_publish")
    state = json.loads(json.dumps(records[idx]["state"]))
    gen = state["gen"]
    key, fn = (gen["#map"][0] if "#map" in gen else next(iter(gen.items())))
    inner = fn["#map"] if isinstance(fn, dict) and "#map" in fn else None
    if inner is not None:
        inner[0][1] = inner[0][1] + 5
    else:
        first = next(iter(fn))
        fn[first] = fn[first] + 5
    records[idx] = {**records[idx], "state": state}
    bad = tr.Trace(trace.spec, trace.constants, trace.model_values, trace.initial_state, tuple(records))
    result = tr.validate(bad, spec_dir() / "KVAllocation.tla")
    assert not result.ok and result.failure is not None
    assert result.failure.index == idx + 1 and result.failure.action == "append_publish"
    assert "gen" in result.failure.changed_variables
    path = tmp_path / "bad.ndjson"
    tr.write_ndjson(bad, path)
    code, out = kvexact_cli(["validate-trace", "KVAllocation", str(path)]).code_and_text
    assert code == 1 and f"step {idx + 1}" in out and "append_publish" in out


def test_malformed_trace_files(tmp_path, kvexact_cli):
    p = tmp_path / "x.ndjson"
    p.write_text('{"kind": "header", "spec": "KVAllocation"}\n')
    with pytest.raises(tr.TraceFormatError, match="initial_state"):
        tr.read_trace(p)
    p.write_text('{"kind": "header", "spec": "KVAllocation", "initial_state": {}}\n{not json\n')
    with pytest.raises(tr.TraceFormatError, match=r"x.ndjson:2:"):
        tr.read_trace(p)
    p.write_text('{"action": "release"}\n')
    with pytest.raises(tr.TraceFormatError, match="header"):
        tr.read_trace(p)
    code, out = kvexact_cli(["validate-trace", "KVAllocation", str(p)]).code_and_text
    assert code == 2 and "header" in out
    code, out = kvexact_cli(["validate-trace", "NoSuchSpec", str(p)]).code_and_text
    assert code == 2 and "NoSuchSpec" in out


def _tampered(trace: tr.Trace) -> tr.Trace:
    records = [dict(r) for r in trace.records]
    last = json.loads(json.dumps(records[-1]["state"]))
    last["epoch"] = last["epoch"] + 7
    records[-1] = {**records[-1], "state": last}
    return tr.Trace(trace.spec, trace.constants, trace.model_values, trace.initial_state, tuple(records))


def test_generated_trace_module_accepts_and_rejects(tmp_path):
    """The embedded engine over the generated module: the real trace replays to its end, a tampered one not."""
    from kvexact.conformance.trace_module import ACCEPT_INVARIANT, accepted, write_trace_module
    from kvexact.spec.checker import check_model

    trace = kv_trace()
    module = write_trace_module(trace, spec_dir() / "KVAllocation.tla", tmp_path / "good")
    result = check_model(module, module.with_suffix(".cfg"))
    assert accepted(result) and result.violation.name == ACCEPT_INVARIANT
    assert len(result.violation.trace) == len(trace.records) + 1
    module = write_trace_module(_tampered(trace), spec_dir() / "KVAllocation.tla", tmp_path / "bad")
    result = check_model(module, module.with_suffix(".cfg"))
    assert not accepted(result) and result.violation is None
    assert result.distinct_states == len(trace.records)  # stuck before the tampered last step


def test_validate_trace_module_engine_cli(tmp_path, kvexact_cli):
    trace = kv_trace()
    good, bad = tmp_path / "good.ndjson", tmp_path / "bad.ndjson"
    tr.write_ndjson(trace, good)
    tr.write_ndjson(_tampered(trace), bad)
    code, out = kvexact_cli(["validate-trace", "KVAllocation", str(good), "--engine", "module"]).code_and_text
    assert code == 0 and "accepted" in out
    code, out = kvexact_cli(["validate-trace", "KVAllocation", str(bad), "--engine", "module"]).code_and_text
    assert code == 1 and "rejected" in out


def test_validate_trace_with_tlc(tmp_path, kvexact_cli, monkeypatch, tlc_jar):
    jar = tlc_jar  # skips outside CI only, fails in CI without TLC
    path = tmp_path / "t.ndjson"
    tr.write_ndjson(kv_trace(), path)
    code, out = kvexact_cli(["validate-trace", "KVAllocation", str(path), "--engine", "tlc", "--tlc-jar", jar]).code_and_text
    assert code == 0 and "accepted" in out


def cached_tail_trace(monkeypatch: pytest.MonkeyPatch | None = None) -> tr.Trace:
    return tr.trace_from_recorder(cached_tail_recorder(monkeypatch), CONSTANTS, MODEL_VALUES)


_KEY_GUARD = "if rec.cache_key is not None:"


def _write_rows_ignoring_cache_keys():
    """``Allocator._write_rows`` without its WRITE_TO_CACHED_BLOCK refusal (the guard's condition made never
    true), compiled in the allocator module's namespace: the allocator's own defence against the planted bug
    is removed, so the buggy write reaches the trace and the spec is what must catch it."""
    source = textwrap.dedent(inspect.getsource(Allocator._write_rows))
    assert source.count(_KEY_GUARD) == 1, "the allocator's cached-block guard moved"
    namespace = dict(vars(allocator_module))
    exec(compile(source.replace(_KEY_GUARD, "if False:"), str(allocator_module.__file__), "exec"), namespace)
    return namespace["_write_rows"]


def cached_tail_recorder(monkeypatch: pytest.MonkeyPatch | None = None, keep_key_guard: bool = False
                         ) -> TraceRecorder:
    """Truncate into a block published in the prefix cache, append (copy on write because cached: the
    block has one reference), then truncate the private copy and append in place over its dead row.
    With ``monkeypatch``, the planted bug: the COW decision looks at the refcount only, and (unless
    ``keep_key_guard``) the write ignores the block's cache key, so the append writes the cached tail in place."""
    alloc = Allocator([GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 2, 4)], [[1, 2], [1, 2]], check_every_op=True)
    rec = TraceRecorder("KVAllocation", requests=["r1", "r2"]).attach(alloc)
    alloc.append("r1", 7)
    alloc.append("r1", 8)
    lifecycle.cache_block(alloc, "r1", 0, "1")
    if monkeypatch is not None:  # the planted bug: the COW decision looks at the refcount only

        def refcount_only(self: Allocator, r) -> tuple[str, ...]:
            boundary = [self.tail_rows(r, g) in (0, 2) for g in range(len(self.groups))]
            shared = any(not b and self.pools[g].refcount(r.tables[g][-1].block_id) != 1
                         for g, b in enumerate(boundary))
            return tuple("new" if b else ("cow" if shared else "unique") for b in boundary)

        monkeypatch.setattr(Allocator, "append_plan", refcount_only)
        if not keep_key_guard:
            monkeypatch.setattr(Allocator, "_write_rows", _write_rows_ignoring_cache_keys())
    lifecycle.truncate(alloc, "r1", 1)
    receipt = alloc.append("r1", 5)
    if monkeypatch is None:
        assert receipt.paths == ("cow", "cow") and receipt.copied_rows == 1
        lifecycle.truncate(alloc, "r1", 1)
        assert alloc.append("r1", 6).paths == ("unique", "unique")
    return rec


@pytest.mark.parametrize("planted_bug", [False, True])
def test_the_recorded_values_get_the_verdict_of_the_trace_file(planted_bug, monkeypatch, tmp_path):
    """The machine validates the recorder's checker values as they are (validate_recorded); a trace file of
    the same records (ITF JSON, read back) gets the same verdict, down to the failing step and its reason."""
    rec = cached_tail_recorder(monkeypatch if planted_bug else None)
    spec, cfg = spec_dir() / "KVAllocation.tla", spec_dir() / "KVAllocation.cfg"
    direct = tr.validate_recorded(rec, CONSTANTS, spec, cfg)
    tr.write_ndjson(tr.trace_from_recorder(rec, CONSTANTS, MODEL_VALUES), tmp_path / "t.ndjson")
    from_file = tr.validate(tr.read_trace(tmp_path / "t.ndjson"), spec, cfg)
    assert direct.ok is (not planted_bug)
    assert direct.summary() == from_file.summary()
    assert (direct.steps, direct.actions) == (from_file.steps, from_file.actions)


def test_truncate_to_a_partial_tail_and_copy_on_write_because_cached():
    trace = cached_tail_trace()
    result = tr.validate(trace, spec_dir() / "KVAllocation.tla", spec_dir() / "KVAllocation.cfg")
    assert result.ok, result.summary()
    assert result.actions["truncate"] == 2 and result.actions["append_copy"] == 1
    assert result.actions["append_in_place"] == 2
    copy = next(r for r in trace.records if r["action"] == "append_copy")
    assert copy["params"]["r"] == "r1"


def test_an_in_place_write_onto_a_cached_tail_is_refused_by_the_allocator(monkeypatch):
    """The planted COW bug alone: the allocator's write guard refuses the in-place write onto the cached
    tail by name."""
    with pytest.raises(Rejected) as exc:
        cached_tail_recorder(monkeypatch, keep_key_guard=True)
    assert exc.value.reason is AllocRejection.WRITE_TO_CACHED_BLOCK


def test_an_in_place_write_onto_a_cached_tail_is_not_a_step(monkeypatch):
    """With the allocator's write guard removed as well, the buggy write is recorded: the spec rejects it."""
    trace = cached_tail_trace(monkeypatch)
    assert [r["action"] for r in trace.records][-2:] == ["truncate", "append_in_place"]
    result = tr.validate(trace, spec_dir() / "KVAllocation.tla", spec_dir() / "KVAllocation.cfg")
    assert not result.ok
    assert result.failure is not None and result.failure.action == "append_in_place"
    assert "invariant CachedBlocksImmutable does not hold" in result.summary()
