"""Radix index (seed 0x08): the 0x08F trace facts, the 0x08G handoff, the 0x08I failure lab."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvexact.reference import labs
from kvexact.reference import radix as rx
from kvexact.reference.labs import radix as rx_lab
from kvexact.reference.rejections import Rejected, rejection_of

TRACE = rx_lab.seed_trace_0x08F()
BY_LABEL = {t.label: t for t in TRACE}


def _before(label: str) -> rx.RadixState:
    i = [t.label for t in TRACE].index(label)
    return TRACE[i - 1].state if i else rx.RadixState.empty(24, first_slot_id=1)


def _splits(step: rx_lab.TraceStep) -> int:
    r = step.receipt
    if isinstance(r, rx.MatchReceipt):
        return int(r.split)
    if isinstance(r, rx.RadixMutationReceipt):
        return r.splits
    before, after = _before(step.label), step.state
    return len(after.nodes) - len(before.nodes) if step.operation == "match_and_lock" else 0


def test_trace_has_18_committed_operations_each_advancing_the_version():
    assert [t.label for t in TRACE] == [f"r{i:02d}" for i in range(1, 19)]
    assert [t.state.version for t in TRACE] == list(range(1, 19))


def test_every_successor_reconciles_and_hash_chain_links_predecessors():
    prev = rx.RadixState.empty(24, first_slot_id=1)
    for step in TRACE:
        report = rx.check_state(step.state)
        assert report.tree_owned_slots + report.private_slots + report.free_slots == 24
        if isinstance(step.receipt, rx.RadixSchedulerHandoffReceipt):
            assert step.receipt.tree_state_sha256 == rx.state_sha256(step.state)
        else:  # every other operation hashes its predecessor and successor
            assert step.receipt.predecessor_sha256 == rx.state_sha256(prev)
            assert step.receipt.successor_sha256 == rx.state_sha256(step.state)
        prev = step.state


def test_r02_split_partitions_the_same_ordered_ownership():
    before, after = _before("r02"), BY_LABEL["r02"].state
    assert before.edges() == {(10, 11, 12, 13, 20, 21): (1, 2, 3, 4, 5, 6)}
    assert after.edges() == {(10, 11, 12): (1, 2, 3), (13, 20, 21): (4, 5, 6)}
    assert BY_LABEL["r02"].receipt.matched_tokens == 3
    assert BY_LABEL["r02"].receipt.prefix_slot_ids == (1, 2, 3)
    assert after.free_slot_ids == before.free_slot_ids  # no slot allocated, copied, freed or duplicated
    old = after.nodes[1]
    assert after.path_tokens(1) == (10, 11, 12, 13, 20, 21) and after.path_slots(1) == (1, 2, 3, 4, 5, 6)
    assert after.nodes[2].lock_ref == old.lock_ref == 1  # the active lock survives on both halves


def test_r05_insert_releases_duplicates_and_splits_at_one_token():
    step = BY_LABEL["r05"]
    assert step.receipt.detail["prefix_tokens"] == 4
    assert step.receipt.duplicate_slot_ids == (7, 8, 9, 10)
    assert {7, 8, 9, 10} <= step.state.free_slot_ids
    edges = step.state.edges()
    assert edges[(13,)] == (4,) and edges[(20, 21)] == (5, 6) and edges[(30, 31)] == (11, 12)


def test_r07_publishes_unfinished_rows_and_moves_the_lock_from_node_1_to_node_5():
    before, step = _before("r07"), BY_LABEL["r07"]
    assert before.requests["req-chat-a"].last_node_id == 1 and before.terminal_locks.get(1) == 1
    assert step.state.nodes[5].token_ids == (22, 23) and step.state.nodes[5].slot_ids == (13, 14)
    assert step.state.requests["req-chat-a"].last_node_id == 5
    assert 1 not in step.state.terminal_locks and step.state.terminal_locks[5] == 1
    assert step.receipt.detail == {"old_last_node": 1, "new_last_node": 5, "prefix_tokens": 6}
    assert step.state.path_slots(5) == (1, 2, 3, 4, 5, 6, 13, 14)


def test_r14_and_r17_evict_recursively_and_whole_edge():
    r14, r17 = BY_LABEL["r14"], BY_LABEL["r17"]
    assert r14.receipt.released_tokens == 3 and r14.receipt.freed_slot_ids == ((20,), (15, 16))
    assert [_before("r14").nodes[n].token_ids for n in r14.receipt.evicted_node_ids] == [(60,), (50, 51)]
    assert [_before("r17").nodes[n].token_ids for n in r17.receipt.evicted_node_ids] == [(22, 23), (20, 21)]
    # locked chat paths survive both calls made while their leases were held
    for label in ("r12", "r14"):
        assert all(n in BY_LABEL[label].state.nodes for n in (1, 2, 3, 4, 5))


def test_trace_totals():
    assert sum(_splits(t) for t in TRACE) == 3
    dups = [s for t in TRACE if isinstance(t.receipt, rx.RadixMutationReceipt) for s in t.receipt.duplicate_slot_ids]
    assert len(dups) == 6
    evictions = [t.receipt for t in TRACE if isinstance(t.receipt, rx.EvictReceipt)]
    assert len(evictions) == 3
    assert sum(len(e.evicted_node_ids) for e in evictions) == 5
    assert sum(e.released_tokens for e in evictions) == 8


def test_final_reconciliation():
    report = rx.check_state(TRACE[-1].state)
    assert (report.pool_slots, report.tree_owned_slots, report.free_slots, report.private_slots) == (24, 6, 18, 0)
    assert report.tree_owned_slots + report.free_slots == report.pool_slots
    assert (report.protected_tokens, report.evictable_tokens) == (6, 0)


def test_handoff_receipt_for_req_handoff():
    r = BY_LABEL["r18"].receipt
    assert r.request_id == "req-handoff" and r.request_generation == 4 and r.tree_version == 18
    assert r.matched_tokens == 6 and r.path_node_ids == (2, 3, 4) and r.terminal_node_id == 4
    assert r.prefix_slot_ids == (1, 2, 3, 4, 11, 12) and r.suffix_interval == (6, 7)
    assert r.lock_lease_id == "lease-req-handoff-v18" and r.policy_decision is None
    assert r.scheduler_owner == "M5.2" and r.lock_required_until_scheduler_disposition
    assert r.tree_state_sha256 == rx.state_sha256(TRACE[-1].state)
    rx.verify_handoff(TRACE[-1].state, r)  # accepted
    # prefill estimate of 0x08G: one token left to compute for a 7-token prompt
    assert r.suffix_interval[1] - r.matched_tokens == 1


def test_prefill_estimate_of_0x08G():
    r = BY_LABEL["r18"].receipt
    est = rx.prefill_estimate(r, row_bytes=16, block_tokens=4)
    s_prompt = 7
    assert est.prompt_tokens_to_compute == s_prompt - 6 == 1
    assert est.new_useful_kv_bytes == 1 * 16
    assert est.new_physical_blocks == 1 and est.new_physical_capacity_bytes == 1 * 4 * 16
    assert rx.prefill_estimate(r, 16, 4, free_private_tail_slots=3).new_physical_blocks == 0


def test_locked_receipt_survives_unrelated_mutation_but_unlocked_one_goes_stale():
    s, r = TRACE[-1].state, BY_LABEL["r18"].receipt
    s2, _ = rx.match(s, [99])
    rx.verify_handoff(s2, r)  # still locked under its lease
    s3, _ = rx.release_request(s2, "req-handoff")
    with pytest.raises(Rejected) as exc:
        rx.verify_handoff(s3, r)
    assert exc.value.reason is rx.RadixRejection.STALE_VERSION


def test_eviction_overshoots_whole_edges_and_reexposes_parents():
    s = rx.RadixState.empty(8)
    s, _ = rx.reserve(s, "a", [0, 1, 2, 3])
    s, _ = rx.insert(s, [1, 2, 3, 4], [0, 1, 2, 3], "a")
    s, _ = rx.reserve(s, "b", [4, 5, 6, 7])
    s, ins = rx.insert(s, [1, 2, 5, 6], [4, 5, 6, 7], "b")
    assert ins.prefix_tokens == 2 and ins.duplicate_slot_ids == (4, 5)
    s, _ = rx.release(s, "b")
    s5, ev = rx.evict(s, 5)
    assert ev.released_tokens == 6 and ev.freed_slot_ids == ((2, 3), (6, 7), (0, 1))
    assert rx.check_state(s5).free_slots == 8
    s1, ev1 = rx.evict(s, 1)
    assert ev1.released_tokens == 2  # one token asked, one whole edge released


def test_rejected_transition_leaves_input_unchanged():
    s = TRACE[-1].state
    digest = rx.state_sha256(s)
    with pytest.raises(Rejected):
        rx.evict_node(s, 4)
    assert rx.state_sha256(s) == digest


def test_fifo_ranking_is_pluggable():
    s = rx.RadixState.empty(4)
    s, _ = rx.reserve(s, "a", [0, 1])
    s, _ = rx.insert(s, [1], [0], "a")
    s, _ = rx.insert(s, [2], [1], "a")
    s, _ = rx.match(s, [1])  # [1] is now most recently used
    assert rx.evict(s, 1)[1].freed_slot_ids == ((1,),)
    assert rx.evict(s, 1, ranking=rx.fifo)[1].freed_slot_ids == ((0,),)


def test_failure_lab_has_at_least_18_named_cases_all_rejected_by_name():
    cases = labs.cases("0x08I")
    assert len(cases) >= 18
    assert {c.reason.name for c in cases} >= {"LOCKED_LEAF_EVICTION", "INTERNAL_NODE_EVICTION", "LOCK_UNDERFLOW",
                                              "OWNED_SLOT_REUSE", "STALE_VERSION", "PATH_SLOT_MISMATCH",
                                              "SUFFIX_MISMATCH", "RECEIPT_TAMPERED"}
    for case in cases:
        assert rejection_of(case.trigger) is case.reason, case.description


ops = st.lists(st.tuples(st.sampled_from(["ins", "match", "lock", "unlock", "evict"]),
                         st.lists(st.integers(0, 3), min_size=1, max_size=5)), max_size=25)


@given(ops)
def test_random_streams_keep_every_invariant(stream):
    s = rx.RadixState.empty(40)
    locked: list[int] = []
    for op, toks in stream:
        try:
            if op == "ins":
                free = sorted(s.free_slot_ids)[: len(toks)]
                if len(free) < len(toks):
                    continue
                s, _ = rx.reserve(s, "w", free)
                s, r = rx.insert(s, toks, free, "w")
                s, _ = rx.release(s, "w") if "w" in s.private_slot_ids else (s, None)
            elif op == "match":
                s, m = rx.match(s, toks)
                assert s.path_tokens(m.node_id) == tuple(toks[: m.matched_tokens])
            elif op == "lock":
                s, m = rx.match(s, toks)
                s, _ = rx.lock(s, m.node_id)
                locked.append(m.node_id)
            elif op == "unlock" and locked:
                s, _ = rx.unlock(s, locked.pop())
            elif op == "evict":
                s, _ = rx.evict(s, len(toks))
        except Rejected as exc:  # only the named, expected refusals
            raise AssertionError(f"unexpected rejection {exc}") from exc
        report = rx.check_state(s)
        assert report.tree_owned_slots + report.private_slots + report.free_slots == 40
    assert attrs.has(type(s))


request_ops = st.lists(st.tuples(st.sampled_from(["publish", "finish", "acquire", "release", "evict", "match"]),
                                 st.sampled_from(["a", "b", "c"]),
                                 st.lists(st.integers(0, 2), min_size=1, max_size=4)), max_size=30)


@given(request_ops)
def test_request_transactions_keep_the_partition_and_locks(stream):
    """Random request-level transactions either commit a state that re-derives every invariant or are
    refused by a RadixRejection name; nothing else escapes."""
    s = rx.RadixState.empty(64)
    for op, rid, toks in stream:
        before = rx.state_sha256(s)
        try:
            if op == "publish":
                free = sorted(s.free_slot_ids)[: len(toks)]
                s, _ = rx.publish_unfinished(s, rid, toks, free)
                entry = s.requests[rid]
                assert s.terminal_locks.get(entry.last_node_id, 0) >= 1
                assert len(s.path_tokens(entry.last_node_id)) == entry.protected_tokens
            elif op == "finish":
                free = sorted(s.free_slot_ids)[: len(toks)]
                s, _ = rx.reserve(s, rid + "-f", free)
                s, _ = rx.cache_finished(s, rid + "-f", toks, free)
                assert rid + "-f" not in s.private_slot_ids
            elif op == "acquire":
                s, r = rx.match_and_lock(s, rid, 1, toks)
                rx.verify_handoff(s, r)
            elif op == "release":
                s, _ = rx.release_request(s, rid)
            elif op == "evict":
                s, ev = rx.evict(s, len(toks))
                assert ev.released_tokens >= len(toks) or rx.check_state(s).leaf_ready_tokens == 0
            else:
                s, m = rx.match(s, toks)
        except Rejected as exc:
            assert isinstance(exc.reason, rx.RadixRejection)
            assert rx.state_sha256(s) == before
        report = rx.check_state(s)
        assert report.tree_owned_slots + report.private_slots + report.free_slots == 64
        assert report.protected_tokens + report.evictable_tokens == report.tree_owned_slots
