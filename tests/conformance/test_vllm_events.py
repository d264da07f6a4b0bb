"""vLLM KV events (recorded from the vLLM profile) validated against KVAllocation through the event mapping."""

from __future__ import annotations

import json
import threading

import msgspec
import pytest
from trace_helpers import run_cli

from kvexact.conformance import vllm_events as ve
from kvexact.conformance.partial_trace import PartialRejection
from kvexact.reference.peers import vllm_pool as bp
from kvexact.reference.peers import vllm_wire as wire

BLOCKS = 8  # the profile's pool below: 9 blocks, block 0 the null block


def log(seed: int, ops: int = 70) -> list[tuple[str, object]]:
    data = b"".join(wire.encode_batch(b, ts=0.0) for b in wire.random_stream_log(seed, ops))
    return list(ve.events_from_batches(ve.batches_from_bytes(data, "log")))


def validate(events, blocks=BLOCKS):
    return ve.validate_events(events, blocks=blocks, requests=2)


def hashes_of(raw):
    return raw[1]


@pytest.mark.parametrize("seed", range(6))
def test_profile_logs_under_random_streams_validate(seed):
    events = log(seed)
    assert len(events) >= 15
    result = validate(events)
    assert result.ok, result.summary()
    assert result.max_candidates >= 1 and len(result.growth) == result.steps


def test_the_json_form_validates_like_the_msgpack_form(tmp_path):
    batches = wire.random_stream_log(3, 70)
    packed = tmp_path / "log.msgpack"
    packed.write_bytes(b"".join(wire.encode_batch(b, ts=0.0) for b in batches))
    as_json = tmp_path / "log.ndjson"
    as_json.write_bytes(b"\n".join(wire.encode_batch_json(b, ts=0.0) for b in batches) + b"\n")
    a, b = ve.read_events(packed), ve.read_events(as_json)
    assert [r for _w, r in a] == [r for _w, r in b]
    assert validate(a).ok and validate(b).ok


def test_wire_round_trip_keeps_every_field_the_mapping_reads():
    events = (bp.BlockStored((11, 12), None, (1, 2, 3, 4), 2, None, None, (None, None), 0),
              bp.BlockRemoved((12,), 0), bp.AllBlocksCleared())
    raw = [r for _w, r in ve.events_from_batches(ve.batches_from_bytes(wire.encode_batch(events), "x"))]
    assert raw[0][0] == "BlockStored" and raw[1][0] == "BlockRemoved" and raw[2] == ["AllBlocksCleared"]
    norm = [ev for _w, ev in ve.normalize((f"e{i}", r) for i, r in enumerate(raw))]
    assert (norm[0].hashes, norm[0].parent, norm[0].num_tokens, norm[0].block_size) == ((11, 12), None, 4, 2)
    assert norm[1].hashes == (12,) and norm[2].kind == "AllBlocksCleared"


# ------------------------------------------------------------------------------- mutated logs


def stored_first_copies(events):
    """(index, hash) of single-hash BlockStored events that publish a hash no block holds yet, each with
    the index of the event that next touches that hash and what it does."""
    copies: dict = {}
    out = []
    for i, (_w, raw) in enumerate(events):
        if raw[0] == "BlockStored":
            for h in raw[1]:
                if len(raw[1]) == 1 and copies.get(h, 0) == 0:
                    out.append((i, h))
                copies[h] = copies.get(h, 0) + 1
        elif raw[0] == "BlockRemoved":
            for h in raw[1]:
                copies[h] -= 1
        else:
            copies.clear()
    return out


def next_touch(events, i, h):
    for k in range(i + 1, len(events)):
        raw = events[k][1]
        if raw[0] == "AllBlocksCleared":
            return k, "cleared"
        if raw[0] == "BlockRemoved" and h in raw[1]:
            return k, "removed"
        if raw[0] == "BlockStored" and (h in raw[1] or raw[2] == h):
            return k, "stored"
    return None, None


def seen_before(events, i, h):
    return any(r[0] == "BlockStored" and h in r[1] for _w, r in events[:i])


def test_a_dropped_store_is_rejected_at_the_removal_it_leaves_unexplained():
    events = log(0, 120)
    cases = [(i, h) for i, h in stored_first_copies(events)
             if seen_before(events, i, h) and next_touch(events, i, h)[1] == "removed"]
    assert cases, "the workload must produce a store that is later evicted"
    for i, h in cases[:3]:
        k, _ = next_touch(events, i, h)
        result = validate(events[:i] + events[i + 1:])
        assert not result.ok
        assert result.failure.index == k  # 1-based in the mutated log: the removal moved up by one
        assert result.failure.rejection is PartialRejection.UNEXPLAINED
        assert "is not cached before the step" in result.failure.nearest.reason


def test_a_duplicated_removal_is_rejected_at_the_duplicate():
    events = log(1, 120)
    copies: dict = {}
    picked = None
    for i, (_w, raw) in enumerate(events):
        if raw[0] == "BlockRemoved" and copies.get(raw[1][0], 0) == 1:
            picked = i
            break
        if raw[0] == "BlockStored":
            for h in raw[1]:
                copies[h] = copies.get(h, 0) + 1
        elif raw[0] == "BlockRemoved":
            copies[raw[1][0]] -= 1
        else:
            copies.clear()
    assert picked is not None
    mutated = events[:picked + 1] + [events[picked]] + events[picked + 1:]
    result = validate(mutated)
    assert not result.ok and result.failure.index == picked + 2
    assert "is not cached before the step" in result.failure.nearest.reason


def test_a_removal_moved_before_its_store_is_rejected_at_the_removal():
    events = log(2, 120)
    pairs = [(i, h) for i, h in stored_first_copies(events) if next_touch(events, i, h) == (i + 1, "removed")]
    if not pairs:  # no adjacent pair: move the removal right before its store
        pairs = [(i, h) for i, h in stored_first_copies(events) if next_touch(events, i, h)[1] == "removed"]
    assert pairs
    i, h = pairs[0]
    k, _ = next_touch(events, i, h)
    mutated = events[:i] + [events[k]] + events[i:k] + events[k + 1:]
    result = validate(mutated)
    assert not result.ok and result.failure.index == i + 1
    assert result.failure.rejection in (PartialRejection.UNEXPLAINED, PartialRejection.EVENT_NOT_MAPPED)


def test_an_unknown_parent_hash_is_rejected_at_its_event():
    events = log(4, 120)
    i = next(k for k, (_w, raw) in enumerate(events) if raw[0] == "BlockStored" and raw[2] is not None)
    raw = list(events[i][1])
    raw[2] = 424242
    result = validate(events[:i] + [(events[i][0], raw)] + events[i + 1:])
    assert not result.ok and result.failure.index == i + 1
    assert result.failure.rejection is PartialRejection.EVENT_NOT_MAPPED
    assert ve.VllmEventRejection.UNKNOWN_PARENT.name in result.failure.reason


def test_a_parent_from_another_depth_is_rejected_at_its_event():
    events = log(5, 120)
    depth: dict = {}
    for i, (_w, raw) in enumerate(events):
        if raw[0] != "BlockStored":
            continue
        base = 0 if raw[2] is None else depth[raw[2]]
        wrong = [h for h, d in depth.items() if d != base and d + 1 in depth.values() and d + 1 != base + 1]
        if wrong:
            mutated_raw = list(raw)
            mutated_raw[2] = wrong[0]
            result = validate(events[:i] + [(events[i][0], mutated_raw)] + events[i + 1:])
            assert not result.ok and result.failure.index == i + 1
            assert ve.VllmEventRejection.SECOND_STREAM.name in result.failure.reason \
                or ve.VllmEventRejection.HASH_AT_TWO_DEPTHS.name in result.failure.reason
            return
        for n, h in enumerate(raw[1], start=1):
            depth.setdefault(h, base + n)
    pytest.fail("no store with a parent at another depth to try")


def test_a_duplicated_store_is_accepted_because_vllm_itself_emits_duplicates():
    """vLLM caches a second block with a hash already cached (a block-aligned prompt recomputes its last
    block under the num_tokens - 1 hit cap; concurrent decoders of one stream fill the same block), so a
    repeated BlockStored is not evidence of a broken log: the mapping counts copies."""
    events = log(0, 120)
    i = next(k for k, (_w, raw) in enumerate(events) if raw[0] == "BlockStored")
    assert validate(events[:i + 1] + [events[i]] + events[i + 1:]).ok


def test_too_few_blocks_is_rejected_at_the_first_store_that_needs_one_more():
    events = log(0, 120)
    result = validate(events, blocks=2)
    assert not result.ok and result.failure.rejection is PartialRejection.UNEXPLAINED
    assert result.failure.nearest.action == "CacheBlock" and "FALSE" in result.failure.nearest.reason


def test_an_event_outside_the_mapping_is_named():
    events = [("e1", ["BlockStored", [5], None, [1, 2], 2, None, "CPU"])]
    result = validate(events)
    assert not result.ok and ve.VllmEventRejection.OTHER_MEDIUM.name in result.failure.reason
    events = [("e1", ["BlockStored", [5], None, [1, 2, 3], 2])]
    assert ve.VllmEventRejection.TOKEN_COUNT.name in validate(events).failure.reason
    events = [("e1", ["BlockRemoved", [5]])]
    assert ve.VllmEventRejection.UNKNOWN_HASH.name in validate(events).failure.reason


# ------------------------------------------------------------------------------- the command


def test_cli_reads_a_msgpack_file(tmp_path, capsys):
    path = tmp_path / "events.msgpack"
    path.write_bytes(b"".join(wire.encode_batch(b) for b in wire.random_stream_log(2, 60)))
    code, out = run_cli(["validate-trace", "--events", "vllm", str(path)], capsys)
    assert code == 0 and "vLLM event log accepted" in out
    code, out = run_cli(["validate-trace", "--events", "vllm", str(path), "--blocks", "2"], capsys)
    assert code == 1 and "rejected at" in out and "nearest miss" in out


@pytest.mark.parametrize("content, where", [
    (b'[[0.0, [["BlockStored", [1], null, [1, 2], "two"]]]]', "field block_size"),
    (b'[[0.0, [["Exploded", 1]]]]', "field type"),
    (b'{"ts": 0.0}\n', "not a KVEventBatch"),
    (b"\xc1\xc1\xc1", "not MessagePack"),
])
def test_cli_bad_event_input_is_one_line_and_exit_2(tmp_path, capsys, content, where):
    path = tmp_path / "events.bin"
    path.write_bytes(content)
    code, out = run_cli(["validate-trace", "--events", "vllm", str(path)], capsys)
    assert code == 2 and where in out and "Traceback" not in out and out.strip().count("\n") == 0


def test_cli_reads_a_live_publisher(capsys):
    batches = wire.random_stream_log(1, 60)
    publisher = wire.Publisher("tcp://127.0.0.1:*")
    stop = threading.Event()

    def publish() -> None:
        if not publisher.wait_for_subscriber():
            return
        for b in batches:
            publisher.publish(b)

    thread = threading.Thread(target=publish)
    thread.start()
    try:
        # the read ends at --max-batches; --idle is only a guard (a busy machine may stall the publisher)
        code, out = run_cli(["validate-trace", "--events", "vllm", "--live", publisher.endpoint, "--idle", "60",
                             "--max-batches", str(len(batches))], capsys)
    finally:
        stop.set()
        thread.join()
        publisher.close()
    assert code == 0, out
    assert f"{sum(len(b) for b in batches)} events" in out


def test_a_live_publisher_message_is_a_msgpack_batch_with_a_sequence_number():
    import zmq

    publisher = wire.Publisher("tcp://127.0.0.1:*")
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(publisher.endpoint)
    try:
        assert publisher.wait_for_subscriber()
        publisher.publish([bp.AllBlocksCleared()])
        publisher.publish([bp.AllBlocksCleared()])
        assert sub.poll(10_000)
        topic, seq, payload = sub.recv_multipart()
        assert topic == b"" and seq == (0).to_bytes(8, "big")
        assert msgspec.msgpack.decode(payload)[1] == [["AllBlocksCleared"]]
    finally:
        sub.close()
        ctx.term()
        publisher.close()


def stored(hashes, parent=None, size=2, **more):
    return ["BlockStored", hashes, parent, [0] * (size * len(hashes)), size, None, more.get("medium", "GPU"),
            None, None, more.get("group", 0)]


@pytest.mark.parametrize("events, name, depth", [
    ([stored([5]), stored([6], 5, size=4)], ve.VllmEventRejection.BLOCK_SIZE_CHANGED, None),
    ([stored([5], group=1)], ve.VllmEventRejection.OTHER_GROUP, None),
    ([stored([5, 6, 7])], ve.VllmEventRejection.TOO_DEEP, 2),
    ([stored([5]), stored([6], 5), stored([6])], ve.VllmEventRejection.HASH_AT_TWO_DEPTHS, None),
    ([stored([5]), stored([9])], ve.VllmEventRejection.SECOND_STREAM, None),
])
def test_each_mapping_rejection_is_named_at_its_event(events, name, depth):
    raw = [(f"e{i}", e) for i, e in enumerate(events, start=1)]
    result = ve.validate_events(raw, blocks=BLOCKS, depth=depth)
    assert not result.ok and result.failure.index == len(events)
    assert result.failure.rejection is PartialRejection.EVENT_NOT_MAPPED
    assert result.failure.reason.startswith(name.name)


# ------------------------------------------------------------------------------- the generated trace spec
# The generated spec explores every explanation of every event (no view renames blocks), so these logs are
# short and the pool small: 3 blocks (measured: a 5-event profile log explores 1,035 states with 3 blocks,
# 30,430 with 8).

SMALL = 3


def reuse_log(*drop_or_dup: tuple[str, int]) -> list[tuple[str, object]]:
    """101 102 stored, 102 evicted, 102 stored again under 101, 102 evicted; ``("drop", i)`` / ``("dup", i)``
    drops or repeats event i (0-based)."""
    events = [{"type": "BlockStored", "block_hashes": [101, 102], "parent_block_hash": None, "token_ids": [7, 8],
               "block_size": 1},
              {"type": "BlockRemoved", "block_hashes": [102]},
              {"type": "BlockStored", "block_hashes": [102], "parent_block_hash": 101, "token_ids": [8],
               "block_size": 1},
              {"type": "BlockRemoved", "block_hashes": [102]},
              {"type": "AllBlocksCleared"}]
    for how, i in drop_or_dup:
        events = events[:i] + [events[i]] * (2 if how == "dup" else 0) + events[i + 1:]
    return [(f"e{i}", e) for i, e in enumerate(events, start=1)]


def module_verdict(tmp_path, capsys, events, engine="module", *more):
    path = tmp_path / "vllm-events.json"
    path.write_text(json.dumps([[0.0, [e for _w, e in events], 0]]))
    return run_cli(["validate-trace", "--events", "vllm", str(path), "--blocks", str(SMALL), "--engine", engine,
                    *more], capsys)


@pytest.mark.parametrize("events, form", [
    (log(1, 6), "Idents(ident') = {} /\\ \\A b \\in Blocks : ref'[0][b] = 0"),  # resets, then stores
    (reuse_log(), "Idents(ident') = Idents(ident) \\ {2}"),  # the removals of identity 2
], ids=["profile-1", "reuse"])
def test_the_generated_trace_spec_accepts_what_the_search_accepts(tmp_path, capsys, events, form):
    assert validate(events, blocks=SMALL).ok
    code, out = module_verdict(tmp_path, capsys, events, "module", "--write-module", str(tmp_path / "out"))
    assert code == 0 and "vLLM event log accepted by the module engine" in out, out
    text = (tmp_path / "out" / "KVAllocationPartial.tla").read_text()
    assert "EXTENDS KVAllocation" in text and form in text
    assert "VIEW TraceView" in (tmp_path / "out" / "KVAllocationPartial.cfg").read_text()


@pytest.mark.parametrize("mutation, at", [
    (("dup", 1), 3),  # the removal of 102 repeated: 102 is no longer cached
    (("drop", 2), 3),  # the second store of 102 dropped: its removal finds it uncached
])
def test_the_generated_trace_spec_rejects_what_the_search_rejects(tmp_path, capsys, mutation, at):
    events = reuse_log(mutation)
    result = validate(events, blocks=SMALL)
    assert not result.ok and result.failure.index == at
    assert result.failure.rejection is PartialRejection.UNEXPLAINED
    assert "is not cached before the step" in result.failure.nearest.reason
    code, out = module_verdict(tmp_path, capsys, events)
    assert code == 1 and "vLLM event log rejected by the module engine" in out, out


def test_an_event_the_mapping_refuses_is_refused_before_the_generated_spec(tmp_path, capsys):
    events = reuse_log(("drop", 0))  # 101 never stored: the removal of 102 names an unknown hash
    result = validate(events, blocks=SMALL)
    code, out = module_verdict(tmp_path, capsys, events)
    assert not result.ok and result.failure.index == 1 and result.failure.reason.startswith("UNKNOWN_HASH")
    assert code == 1 and "e1" not in out and "event 1: EVENT_NOT_MAPPED: UNKNOWN_HASH" in out, out


def test_the_generated_trace_spec_under_tlc(tmp_path, capsys, monkeypatch, tlc_jar):
    jar = tlc_jar  # skips outside CI only, fails in CI without TLC
    for events, want in ((reuse_log(), 0), (reuse_log(("dup", 1)), 1)):
        code, out = module_verdict(tmp_path, capsys, events, "tlc", "--tlc-jar", jar)
        assert code == want, out


@pytest.mark.parametrize("events", [reuse_log(), reuse_log(("dup", 1))], ids=["accepted", "rejected"])
def test_the_generated_view_changes_no_verdict(tmp_path, events):
    """``TraceView`` forgets generations, versions, the epoch, the history and the stale handle (no action of
    the mapping reads them in a guard): the module without it reaches the same verdict."""
    from kvexact.conformance.trace_module import accepted
    from kvexact.spec.checker import check_model

    verdicts = []
    for view in (True, False):
        module = ve.write_event_module(events, tmp_path / str(view), SMALL, view=view)
        verdicts.append(accepted(check_model(module, module.with_suffix(".cfg"))))
    assert verdicts[0] == verdicts[1] == validate(events, blocks=SMALL).ok
