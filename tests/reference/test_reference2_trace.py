"""Reference traces checked step by step against spec/KVAllocation.tla and spec/CowPublication.tla with the
embedded checker's step API: each record's (previous state, state) must be a step of the named action."""

from __future__ import annotations

import json

import pytest
from step_validation import validate

from kvexact.reference import lifecycle
from kvexact.reference.adapters import (
    TraceRecorder,
    checker_value,
    project_cow_publication,
    project_kv_allocation,
    project_state,
)
from kvexact.reference.allocator import Allocator
from kvexact.reference.labs import allocator as fixtures
from kvexact.reference.pool import GroupConfig, PoolRejection, QueuePolicy
from kvexact.reference.rejections import Rejected
from kvexact.spec import itf
from kvexact.spec.checker.values import ModelValue, from_python, to_python


def test_cow_publication_trace_from_init():
    groups = [GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 2, 4)]
    alloc = Allocator(groups, [[1, 2, 3], [1, 2, 3]], check_every_op=True, policy=QueuePolicy.LOWEST_ID)
    rec = TraceRecorder("CowPublication", requests=["a", "d"], readers=["x"]).attach(alloc)
    alloc.append("a", 1)
    lifecycle.fork(alloc, "a", "d")
    alloc.fault_after.add(("cow_reserve", 1))
    assert alloc.append("d", 2).outcome == "ROLLED_BACK"
    r = alloc.append("d", 2)
    assert r.paths == ("cow", "cow") and r.copied_rows == 1
    lifecycle.reader_snapshot(alloc, "x", "a")
    lifecycle.release(alloc, "d")
    assert alloc.append("a", 3).paths == ("cow", "cow")  # the reader's lease shares a's tail
    lifecycle.reader_release(alloc, "x")
    lifecycle.fork(alloc, "a", "d")
    lifecycle.release(alloc, "d")
    assert alloc.append("a", 1).paths == ("new", "new")
    lifecycle.release(alloc, "a")
    actions = validate("CowPublication", rec, {
        "Groups": {0, 1}, "Blocks": {1, 2, 3}, "Requests": {"a", "d"}, "Readers": {"x"}, "NoReq": "NoReq",
        "Tokens": {1, 2, 3}, "P": 2, "MaxTokens": 4, "Concurrent": 1}, {"a", "d", "x", "NoReq"})
    assert actions == ["append_boundary", "fork", "cow_begin", "cow_reserve", "cow_reserve", "cow_rollback",
                       "cow_begin", "cow_reserve", "cow_reserve", "cow_copy", "cow_write", "cow_copy",
                       "cow_write", "cow_validate", "cow_publish", "cow_release_sources", "reader_snapshot",
                       "release", "cow_begin", "cow_reserve", "cow_reserve", "cow_copy", "cow_write",
                       "cow_copy", "cow_write", "cow_validate", "cow_publish", "cow_release_sources",
                       "reader_release", "fork", "release", "append_boundary", "release"]


def test_kv_allocation_trace_from_init():
    groups = [GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 2, 4)]
    alloc = Allocator(groups, [[1, 2], [1, 2]], check_every_op=True)
    rec = TraceRecorder("KVAllocation", requests=["r1", "r2"]).attach(alloc)
    alloc.append("r1", 7)
    alloc.append("r1", 8)
    lifecycle.cache_block(alloc, "r1", 0, "1")
    lifecycle.release(alloc, "r1")
    lifecycle.prefix_hit(alloc, "r2", ["1"])
    lifecycle.truncate(alloc, "r2", 0)
    alloc.fault_after.add(("append_reserve", 0))
    assert alloc.append("r1", 9).outcome == "ROLLED_BACK"
    alloc.append("r1", 9)
    lifecycle.evict(alloc, "1")
    alloc.append("r1", 10)
    tail = alloc.append("r1", 11).published_tables[0][-1]
    lifecycle.truncate(alloc, "r1", 2)
    with pytest.raises(Rejected) as exc:
        lifecycle.delayed_write(alloc, tail, 1, 12)
    assert exc.value.reason is PoolRejection.HANDLE_NOT_OWNED
    lifecycle.release(alloc, "r1")
    actions = validate("KVAllocation", rec, {
        "Groups": {0, 1}, "Blocks": {1, 2}, "Requests": {"r1", "r2"}, "NoReq": "NoReq", "P": 2,
        "MaxTokens": 4}, {"r1", "r2", "NoReq"})
    assert actions == ["append_reserve", "append_reserve", "append_write", "append_publish", "append_in_place",
                       "cache_block", "release", "prefix_hit", "truncate", "append_reserve", "append_rollback",
                       "append_reserve", "append_reserve", "append_write", "append_publish", "evict", "evict",
                       "append_in_place", "append_reserve", "append_reserve", "append_write", "append_publish",
                       "truncate", "stale_write_rejected", "release"]


def test_project_state_is_plain_json():
    alloc = fixtures.fixture_0x05b_forked()
    for spec in ("KVAllocation", "CowPublication"):
        state = project_state(alloc, spec, requests=["A", "D"])
        assert json.loads(json.dumps(state)) == state
    s = project_state(alloc, "CowPublication", requests=["A", "D"])
    assert s["epoch"] == 43
    assert dict((k, v) for k, v in s["tver"]["#map"]) == {"A": 6, "D": 1}


def test_the_recorders_values_are_the_itf_round_trip_of_the_projection():
    """checker_value (what the recorder keeps) equals decoding the projection's ITF JSON, variable by
    variable, in both specs and with a COW transaction open, reader snapshots and model-value names."""
    alloc = fixtures.fixture_0x05b_forked()
    mvs = frozenset({"A", "D", "x", "NoReq"})
    lifecycle.reader_snapshot(alloc, "x", "A")
    alloc.fault_after.add(("cow_reserve", 1))
    for state in (project_kv_allocation(alloc, ["A", "D"], wrote=[(0, 1000)]),
                  project_cow_publication(alloc, ["A", "D"], ["x"], wrote=[(0, 1000)])):
        for name, value in state.items():
            assert checker_value(value, mvs) == itf.decode(itf.encode_plain(value), mvs), name
    assert checker_value("A", mvs) == ModelValue("A") and checker_value("idle", mvs) == "idle"
    assert checker_value({"req": "NoReq", "r": 1}, mvs) == from_python({"req": ModelValue("NoReq"), "r": 1})


def test_0x05b_trace_is_a_cow_publication_behaviour():
    """The seed's trace from the installed fixture state (Tokens is bound small: the actions take the
    written token as a parameter, the constant only bounds Next, which the checker splits at load)."""
    alloc = fixtures.fixture_0x05b()
    rec = TraceRecorder("CowPublication", requests=["A", "D"]).attach(alloc)
    alloc.append("A", 133, expected_generation=1, expected_table_version=5)
    lifecycle.fork(alloc, "A", "D", expected_generation=1, expected_table_version=6)
    alloc.fault_after.add(("cow_reserve", 0))  # 0x04F: fail after group 0's destination is reserved
    assert alloc.append("D", 900).outcome == "ROLLED_BACK"
    lifecycle.cow_append(alloc, "D", 900, expected_generation=1, expected_table_version=1)
    actions = validate("CowPublication", rec, {
        "Groups": {0, 1}, "Blocks": {1000, 1001, 1002, 1003, 2000, 2001, 2002, 2003}, "Requests": {"A", "D"},
        "Readers": set(), "NoReq": "NoReq", "Tokens": {900}, "P": 16, "MaxTokens": 48, "Concurrent": 1},
        {"A", "D", "NoReq"})
    assert actions == ["append_in_place", "fork", "cow_begin", "cow_reserve", "cow_rollback",
                       "cow_begin", "cow_reserve", "cow_reserve", "cow_copy",
                       "cow_write", "cow_copy", "cow_write", "cow_validate", "cow_publish", "cow_release_sources"]
    assert rec.records[4]["state"] == rec.records[1]["state"]  # rollback: the predecessor exactly
    assert rec.records[3]["state"]["epoch"] == rec.records[4]["state"]["epoch"] == 43
    last = rec.records[-1]["state"]
    assert last["epoch"] == 44
    # the recorder keeps checker values: request ids are model values, tables functions of groups
    assert to_python(last["tver"]) == {ModelValue("A"): 6, ModelValue("D"): 2}
    d_tables = to_python(last["tables"])[ModelValue("D")]
    assert [t[-1] for _g, t in sorted(d_tables.items())] == [{"block": 1003, "gen": 12}, {"block": 2003, "gen": 6}]
