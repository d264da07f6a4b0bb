"""The adapter the conformance machines drive: plain values out, trace records, named refusals."""

from __future__ import annotations

import json

import pytest

from kvexact.reference.peers.vllm import ManagerRejection
from kvexact.reference.peers.vllm_adapter import AdapterRejection, VllmAdapter
from kvexact.reference.rejections import Rejected, rejection_of

C48 = [0] * 16 + [1] * 16 + [2] * 16


def test_vllm_adapter_replays_scenario1():
    a = VllmAdapter(11, 16)
    out = a.allocate("r0", C48 + [3] * 7)
    assert (out.num_hit_tokens, out.block_ids) == (0, (1, 2, 3, 4))
    out = a.allocate("r1", C48 + [3] * 5)
    assert (out.num_hit_tokens, out.hit_block_ids, out.new_block_ids) == (48, (1, 2, 3), (5,))
    assert [a.ref_count(b) for b in range(1, 6)] == [2, 2, 2, 1, 1]
    assert a.free("r0") == (4, 3, 2, 1)
    a.free("r1")
    assert a.free_queue() == (5, 4, 6, 7, 8, 9, 10, 3, 2, 1)
    assert a.lookup(C48 + [3] * 6) == 48 and a.free_queue() == (5, 4, 6, 7, 8, 9, 10, 3, 2, 1)
    steps = [(r.action, r.params) for r in a.trace]
    assert steps == [("allocate_block", {"r": "r0", "g": 0, "b": b}) for b in (1, 2, 3, 4)] + [
        ("cache_block", {"r": "r0", "j": j}) for j in (0, 1, 2)] + [
        ("prefix_hit", {"r": "r1", "k": 3}), ("allocate_block", {"r": "r1", "g": 0, "b": 5}),
        ("release", {"r": "r0"}), ("release", {"r": "r1"})]
    hit = a.trace[7].as_dict()
    assert "in_spec" not in hit and a.trace[0].as_dict()["in_spec"] is False
    ref = dict(hit["state"]["ref"]["#map"][0][1]["#map"])
    assert [ref[b] for b in range(1, 6)] == [2, 2, 2, 1, 0]  # touched, block 5 not yet allocated
    assert hit["state"]["tables"]["#map"][-1] == ["r1", {"#map": [[0, [{"block": 1}, {"block": 2}, {"block": 3}]]]}]
    last = a.trace[-1].as_dict()["state"]
    assert last["tables"] == {"#map": []} and set(dict(last["ref"]["#map"][0][1]["#map"]).values()) == {0}
    idents = dict(last["ident"]["#map"][0][1]["#map"])
    assert sorted(b for b, i in idents.items() if i) == [1, 2, 3]
    assert dict(last["rows"]["#map"][0][1]["#map"]) == {b: 16 if b <= 3 else 0 for b in range(1, 11)}
    json.dumps([r.as_dict() for r in a.trace])  # records are JSON-able


def test_vllm_adapter_trace_records_evictions():
    a = VllmAdapter(3, 4)
    a.allocate("r0", [1, 2, 3, 4, 5])
    a.free("r0")  # queue [2, 1]: unhashed block 2 first, cached block 1 last
    assert a.free_queue() == (2, 1)
    a.allocate("r1", [8] * 5)
    steps = [(r.action, r.params) for r in a.trace if r.params.get("r") != "r0"]
    assert steps == [("allocate_block", {"r": "r1", "g": 0, "b": 2}), ("evict", {"g": 0, "b": 1}),
                     ("allocate_block", {"r": "r1", "g": 0, "b": 1}), ("cache_block", {"r": "r1", "j": 0})]
    evict = next(r for r in a.trace if r.action == "evict").as_dict()["state"]
    assert dict(evict["ident"]["#map"][0][1]["#map"])[1] == 0  # identity gone, block not yet reassigned


def test_vllm_adapter_append_decode_and_shortage():
    a = VllmAdapter(4, 4)
    assert a.allocate("r0", [1, 2, 3]).block_ids == (1,)
    assert a.append("r0", [4]) == ()
    assert a.append("r0", [5]) == (2,)
    assert a.tokens_of("r0") == (1, 2, 3, 4, 5) and a.cached_block_ids() == {1}
    assert a.append("r0", [6, 7, 8, 9, 10, 11, 12, 13]) is None  # needs 2 more blocks, 1 free
    assert a.tokens_of("r0") == (1, 2, 3, 4, 5) and a.num_free_blocks() == 1
    assert a.allocate("r1", list(range(20))) is None and "r1" not in a.requests
    assert [r.action for r in a.trace] == ["allocate_block", "cache_block", "allocate_block"]


def test_vllm_adapter_refusals_are_named():
    a = VllmAdapter(4, 4)
    a.allocate("r0", [1])
    with pytest.raises(Rejected) as exc:
        a.fork("r0", "r1")
    assert exc.value.reason is AdapterRejection.FORK_UNSUPPORTED and not a.supports_fork
    assert rejection_of(lambda: a.allocate("r0", [1])) is ManagerRejection.DUPLICATE_REQUEST
    assert rejection_of(lambda: a.append("nobody", [1])) is ManagerRejection.UNKNOWN_REQUEST
    assert rejection_of(lambda: a.free("nobody")) is ManagerRejection.UNKNOWN_REQUEST
    assert rejection_of(lambda: a.allocate("r2", [])) is AdapterRejection.EMPTY_PROMPT


def test_vllm_adapter_reset_prefix_cache():
    a = VllmAdapter(4, 4)
    a.allocate("r0", list(range(8)))
    assert a.reset_prefix_cache() is False
    a.free("r0")
    assert a.reset_prefix_cache() is True and a.lookup(list(range(9))) == 0
