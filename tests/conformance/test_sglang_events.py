"""SGLang KV events (recorded from the SGLang profile) validated against RadixIndex through the event mapping."""

from __future__ import annotations

import json

import pytest
from trace_helpers import run_cli

from kvexact.conformance import sglang_events as se
from kvexact.conformance.partial_trace import PartialRejection
from kvexact.reference.peers.sglang import RadixCache
from kvexact.reference.peers.sglang_events import page_hash
from kvexact.reference.peers.sglang_stream import random_event_log

NAMED = PartialRejection.EVENT_NOT_MAPPED


def log(seed: int, ops: int = 36, page_size: int = 1) -> list[tuple[str, dict]]:
    return [(f"event {i}", e) for i, e in enumerate(random_event_log(seed, ops, page_size), start=1)]


def validate(events):
    return se.validate_events(events)


def kinds(events):
    return [e["type"] for _w, e in events]


# ------------------------------------------------------------------------------- the profile's recorder


def test_the_recorder_follows_0_5_23():
    cache = RadixCache(kv_events=True)
    cache.insert([1, 2])
    cache.insert([1, 2, 3])  # a new node under the last stored page: merged into the store before it
    cache.insert([1, 2])  # nothing new: no event
    cache.evict(10)
    cache.reset()
    ev = cache.kv_events.take()
    assert [e["type"] for e in ev] == ["AllBlocksCleared", "BlockStored", "BlockRemoved", "AllBlocksCleared"]
    assert ev[1]["block_hashes"] == [page_hash((1,)), page_hash((1, 2)), page_hash((1, 2, 3))]
    assert ev[1]["parent_block_hash"] is None and ev[1]["token_ids"] == [1, 2, 3]
    # two nodes evicted leaf first ([3], then [1, 2]), merged into one removal
    assert ev[2]["block_hashes"] == [page_hash((1, 2, 3)), page_hash((1,)), page_hash((1, 2))]
    assert cache.kv_events.take() == []


def test_a_store_under_a_non_tail_parent_is_a_new_event_and_removals_merge():
    cache = RadixCache(kv_events=True)
    cache.insert([1, 2, 3])
    cache.insert([1, 2, 4])
    ev = cache.kv_events.take()
    assert [e["type"] for e in ev] == ["AllBlocksCleared", "BlockStored", "BlockStored"]
    assert ev[2]["block_hashes"] == [page_hash((1, 2, 4))] and ev[2]["parent_block_hash"] == page_hash((1, 2))
    cache.evict(10)
    removed = cache.kv_events.take()
    assert len(removed) == 1 and sorted(removed[0]["block_hashes"]) == sorted(
        page_hash(p) for p in [(1,), (1, 2), (1, 2, 3), (1, 2, 4)])


def test_a_disabled_cache_records_nothing():
    cache = RadixCache(kv_events=True, disable=True)
    cache.insert([1, 2])
    assert cache.kv_events.take() == []


# ------------------------------------------------------------------------------- valid logs


@pytest.mark.parametrize("seed", range(4))
def test_profile_logs_under_random_streams_validate(seed):
    events = log(seed)
    assert kinds(events).count("BlockStored") >= 4 and "BlockRemoved" in kinds(events)
    result = validate(events)
    assert result.ok, result.summary()
    assert len(result.growth) == result.steps


def test_a_page_size_2_log_validates():
    events = log(5, page_size=2)
    assert any(e.get("block_size") == 2 for _w, e in events)
    result = validate(events)
    assert result.ok, result.summary()


# ------------------------------------------------------------------------------- mutated logs


def touches(raw: dict, hashes: set) -> bool:
    if raw["type"] == "BlockStored":
        return bool(hashes & set(raw["block_hashes"])) or raw["parent_block_hash"] in hashes
    return raw["type"] == "BlockRemoved" and bool(hashes & set(raw["block_hashes"]))


def next_touch(events, i) -> int | None:
    hashes = set(events[i][1]["block_hashes"])
    for k in range(i + 1, len(events)):
        if events[k][1]["type"] == "AllBlocksCleared":
            return None
        if touches(events[k][1], hashes):
            return k
    return None


def test_a_dropped_store_is_rejected_at_the_next_event_that_needs_it():
    tried = 0
    for seed in range(3):
        events = log(seed)
        for i, (_w, raw) in enumerate(events):
            k = next_touch(events, i) if raw["type"] == "BlockStored" else None
            if k is None:
                continue
            result = validate(events[:i] + events[i + 1:])
            assert not result.ok and result.failure.index == k  # 1-based in the mutated log
            assert result.failure.rejection is NAMED
            assert result.failure.reason.split(":")[0] in ("UNKNOWN_PARENT", "UNKNOWN_HASH", "REMOVED_NOT_CACHED")
            tried += 1
            break
    assert tried == 3


def test_a_duplicated_event_is_rejected_at_the_duplicate():
    events = log(1)
    for kind, name in (("BlockStored", "STORED_WHILE_CACHED"), ("BlockRemoved", "REMOVED_NOT_CACHED")):
        i = kinds(events).index(kind)
        result = validate(events[:i + 1] + [events[i]] + events[i + 1:])
        assert not result.ok and result.failure.index == i + 2
        assert result.failure.reason.startswith(name)


def test_a_removal_moved_before_its_store_is_rejected_at_the_removal():
    events = log(2)
    i = next(i for i, (_w, raw) in enumerate(events)
             if raw["type"] == "BlockStored" and (k := next_touch(events, i)) is not None
             and events[k][1]["type"] == "BlockRemoved")
    k = next_touch(events, i)
    assert k is not None
    mutated = events[:i] + [events[k]] + events[i:k] + events[k + 1:]
    result = validate(mutated)
    assert not result.ok and result.failure.index == i + 1
    assert result.failure.reason.split(":")[0] in ("UNKNOWN_HASH", "REMOVED_NOT_CACHED")


def test_an_unknown_parent_is_rejected_at_its_event():
    events = log(3)
    i = next(i for i, (_w, raw) in enumerate(events)
             if raw["type"] == "BlockStored" and raw["parent_block_hash"] is not None)
    raw = dict(events[i][1], parent_block_hash=424242)
    result = validate(events[:i] + [(events[i][0], raw)] + events[i + 1:])
    assert not result.ok and result.failure.index == i + 1
    assert result.failure.reason.startswith(se.SglangEventRejection.UNKNOWN_PARENT.name)


def test_a_parent_that_is_no_longer_cached_is_rejected_by_the_spec():
    """A store under an evicted hash would need that path cached again, which no event stored."""
    events = [(f"e{i}", e) for i, e in enumerate([
        {"type": "AllBlocksCleared"},
        {"type": "BlockStored", "block_hashes": [11], "parent_block_hash": None, "token_ids": [1], "block_size": 1},
        {"type": "BlockStored", "block_hashes": [22], "parent_block_hash": None, "token_ids": [2], "block_size": 1},
        {"type": "BlockRemoved", "block_hashes": [11]},
        {"type": "BlockStored", "block_hashes": [33], "parent_block_hash": 11, "token_ids": [3], "block_size": 1},
    ], start=1)]
    assert validate(events[:4]).ok
    result = validate(events)
    assert not result.ok and result.failure.index == 5
    assert result.failure.rejection is PartialRejection.UNEXPLAINED
    assert "not cached after the insert" in result.failure.nearest.reason


def test_an_eviction_of_an_inner_node_is_rejected_by_the_spec():
    """Only leaves are evicted: removing the parent of a cached child has no EvictNode."""
    events = [(f"e{i}", e) for i, e in enumerate([
        {"type": "BlockStored", "block_hashes": [11, 12], "parent_block_hash": None, "token_ids": [1, 2],
         "block_size": 1},
        {"type": "BlockRemoved", "block_hashes": [11]},
    ], start=1)]
    result = validate(events)
    assert not result.ok and result.failure.index == 2
    assert result.failure.rejection is PartialRejection.UNEXPLAINED
    assert result.failure.nearest.action == "EvictNode"


@pytest.mark.parametrize("event, name", [
    ({"type": "BlockStored", "block_hashes": [5], "parent_block_hash": None, "token_ids": [1], "block_size": 1,
      "medium": "CPU_PINNED"}, se.SglangEventRejection.OTHER_MEDIUM),
    ({"type": "BlockStored", "block_hashes": [5], "parent_block_hash": None, "token_ids": [1, 2],
      "block_size": 1}, se.SglangEventRejection.TOKEN_COUNT),
    ({"type": "BlockRemoved", "block_hashes": [9]}, se.SglangEventRejection.UNKNOWN_HASH),
    ({"type": "BlockStored", "block_hashes": [6], "parent_block_hash": None, "token_ids": [1, 2],
      "block_size": 2}, se.SglangEventRejection.BLOCK_SIZE_CHANGED),
    ({"type": "BlockStored", "block_hashes": [5], "parent_block_hash": 7, "token_ids": [1],
      "block_size": 1}, se.SglangEventRejection.HASH_AT_TWO_PATHS),
])
def test_each_mapping_rejection_is_named_at_its_event(event, name):
    first = [{"type": "BlockStored", "block_hashes": [7], "parent_block_hash": None, "token_ids": [3],
              "block_size": 1},
             {"type": "BlockStored", "block_hashes": [5], "parent_block_hash": None, "token_ids": [1],
              "block_size": 1},
             {"type": "BlockRemoved", "block_hashes": [5]}]
    events = [(f"e{i}", e) for i, e in enumerate([*first, event], start=1)]
    result = validate(events)
    assert not result.ok and result.failure.index == 4
    assert result.failure.rejection is NAMED and result.failure.reason.startswith(name.name)


# ------------------------------------------------------------------------------- the command


def batches_file(tmp_path, events):
    path = tmp_path / "sglang-events.json"
    path.write_text(json.dumps([[0.0, [e for _w, e in events], 0]]))
    return path


def test_cli_validates_a_json_log_and_names_the_failing_event(tmp_path, capsys):
    events = log(0, 24)
    code, out = run_cli(["validate-trace", "--events", "sglang", str(batches_file(tmp_path, events))], capsys)
    assert code == 0 and "SGLang event log accepted by RadixIndex" in out
    i = kinds(events).index("BlockRemoved")
    mutated = events[:i + 1] + [events[i]] + events[i + 1:]
    code, out = run_cli(["validate-trace", "--events", "sglang", str(batches_file(tmp_path, mutated))], capsys)
    assert code == 1 and f"batch 1, event {i + 2}" in out and "REMOVED_NOT_CACHED" in out


def test_cli_reads_a_msgpack_log(tmp_path, capsys):
    import msgspec

    path = tmp_path / "events.msgpack"
    path.write_bytes(msgspec.msgpack.encode([0.0, [e for _w, e in log(2, 20)], 0]))
    code, out = run_cli(["validate-trace", "--events", "sglang", str(path)], capsys)
    assert code == 0, out


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text('[[0.0, [{"type": "Exploded"}], 0]]')
    code, out = run_cli(["validate-trace", "--events", "sglang", str(path)], capsys)
    assert code == 2 and "field type" in out and "Traceback" not in out and out.strip().count("\n") == 0


# ------------------------------------------------------------------------------- the generated trace spec


def worked(*removals):
    """The docs' example (docs/runtime.md) as separate removals: 101 102 stored, 103 under 101, then ``removals``."""
    return [(f"e{i}", e) for i, e in enumerate([
        {"type": "AllBlocksCleared"},
        {"type": "BlockStored", "block_hashes": [101, 102], "parent_block_hash": None, "token_ids": [7, 8],
         "block_size": 1},
        {"type": "BlockStored", "block_hashes": [103], "parent_block_hash": 101, "token_ids": [9], "block_size": 1},
        *({"type": "BlockRemoved", "block_hashes": [h]} for h in removals),
    ], start=1)]


@pytest.mark.parametrize("events", [log(0, 16), log(3, 16), worked(102, 103, 101), worked(103, 101),
                                    worked(102, 101, 103)], ids=["profile-0", "profile-3", "worked", "dropped",
                                                                 "swapped"])
def test_the_prune_bounds_and_the_view_change_no_verdict(events):
    """The stores' prune bounds and ``radix_view`` only drop states that cannot explain the step (or
    duplicates up to renaming): the search without them reaches the same verdict at the same event."""
    plain, pruned = se.validate_events(events, prune=False), se.validate_events(events)
    assert (plain.ok, plain.steps) == (pruned.ok, pruned.steps)
    assert plain.ok or plain.failure.index == pruned.failure.index


def module_verdict(tmp_path, capsys, events, *more):
    code, out = run_cli(["validate-trace", "--events", "sglang", str(batches_file(tmp_path, events)),
                         "--engine", "module", *more], capsys)
    return code, out


@pytest.mark.parametrize("events", [log(1, 8), log(2, 10), worked(102, 103, 101)],
                         ids=["profile-1", "profile-2", "worked"])
def test_the_generated_trace_spec_accepts_what_the_search_accepts(tmp_path, capsys, events):
    assert validate(events).ok
    code, out = module_verdict(tmp_path, capsys, events, "--write-module", str(tmp_path / "out"))
    assert code == 0 and "SGLang event log accepted by the module engine" in out, out
    text = (tmp_path / "out" / "RadixIndexPartial.tla").read_text()
    assert "EXTENDS RadixIndex" in text and "CachedPaths(tree') = {}" in text


@pytest.mark.parametrize("events, at", [
    (worked(103, 101), 5),  # the removal of 102 dropped: 101 still has a child when it goes
    (worked(102, 101, 103), 5),  # two removals swapped: 101 goes before its child 103
])
def test_the_generated_trace_spec_rejects_what_the_search_rejects(tmp_path, capsys, events, at):
    result = validate(events)
    assert not result.ok and result.failure.index == at
    assert result.failure.rejection is PartialRejection.UNEXPLAINED
    code, out = module_verdict(tmp_path, capsys, events)
    assert code == 1 and "SGLang event log rejected by the module engine" in out, out


def test_an_event_the_mapping_refuses_is_refused_before_the_generated_spec(tmp_path, capsys):
    events = worked(102, 103, 101)
    dropped = events[:1] + events[2:]  # the first store dropped: 103's parent 101 was never stored
    result = validate(dropped)
    code, out = module_verdict(tmp_path, capsys, dropped)
    assert not result.ok and result.failure.index == 2 and result.failure.reason.startswith("UNKNOWN_PARENT")
    assert code == 1 and "batch 1, event 2: EVENT_NOT_MAPPED: UNKNOWN_PARENT" in out


def test_the_generated_trace_spec_under_tlc(tmp_path, capsys, monkeypatch, tlc_jar):
    jar = tlc_jar  # skips outside CI only, fails in CI without TLC
    for events, want in ((worked(102, 103, 101), 0), (worked(103, 101), 1)):
        code, out = run_cli(["validate-trace", "--events", "sglang", str(batches_file(tmp_path, events)),
                             "--engine", "tlc", "--tlc-jar", jar], capsys)
        assert code == want, out
