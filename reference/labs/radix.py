"""The radix index's seed trace (0x08F, reconstructed: the seed gives only its facts) and its failure lab
(0x08I)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from kvexact.reference.radix import (
    ROOT,
    RadixRejection,
    RadixSchedulerHandoffReceipt,
    RadixState,
    _seal,
    cache_finished,
    check_state,
    evict,
    evict_node,
    insert,
    lock,
    match,
    match_and_lock,
    publish_unfinished,
    release_request,
    reserve,
    unlock,
    verify_handoff,
)
from kvexact.reference.rejections import NegativeCase, register_negative


# the seed's 0x08F trace -------------------------------------------------------------------------
@attrs.frozen
class TraceStep:
    label: str
    operation: str
    state: RadixState
    receipt: Any


def seed_trace_0x08F() -> list[TraceStep]:
    """Reconstruction of the 18-operation, 24-slot trace of 0x08F (the seed gives only its facts).

    Pool slots 1..24, page size 1. Fixed by the seed: r02 splits [10,11,12,13,20,21]->[1..6] at 3
    (query [10,11,12,99]); r05 inserts [10,11,12,13,30,31] with slots [7..12], 4 cached, releases
    [7,8,9,10] and splits [13,20,21] at 1; r07 publishes chat-a's [22,23]->[13,14] and moves its lock
    from node 1 to node 5; r14 asks for 3 rows and frees [60]->[20] then [50,51]->[15,16]; r17 frees
    [22,23] then [20,21]; r18 is the handoff for req-handoff (generation 4, version 18, path [2,3,4],
    slots [1,2,3,4,11,12], suffix [6,7)). Reconstructed (chosen so every stated total holds):

    ====  =====================================================  ==========================================
    r01   publish_unfinished req-chat-a [10..13,20,21]->[1..6]   node 1, lock on node 1
    r02   match [10,11,12,99]                                     split 1 (node 2 = [10,11,12])
    r03   reserve req-chat-b [7..12]                              6 private slots
    r04   match [10,11,12,40]                                     hit of 3 tokens, no split
    r05   cache_finished req-chat-b                               split 2 (node 3 = [13]), node 4, 4 dups
    r06   reserve req-fewshot-a [15,16,17]
    r07   publish_unfinished req-chat-a [22,23]->[13,14]         node 5, lock 1 -> 5
    r08   cache_finished req-fewshot-a [50,51,52]->[15,16,17]     node 6
    r09   reserve req-fewshot-b [18,19,20]
    r10   cache_finished req-fewshot-b [50,51,60]->[18,19,20]     split 3 (node 7 = [50,51]), node 8, 2 dups
    r11   match_and_lock req-chat-b2 [10..13,30,31,32]            locks path 2,3,4
    r12   evict 1                                                 eviction 1: [52]->[17]
    r13   match [50,51,60,61]                                     hit of 3 tokens
    r14   evict 3                                                 eviction 2: [60]->[20], then [50,51]
    r15   release_request req-chat-a                              lock on node 5 dropped
    r16   release_request req-chat-b2                             lock on node 4 dropped
    r17   evict 4                                                 eviction 3: [22,23], then [20,21]
    r18   match_and_lock req-handoff (gen 4) [10..13,30,31,32]    handoff receipt, lease v18
    ====  =====================================================  ==========================================

    Totals: 3 splits, 6 duplicate slots released, 3 eviction calls, 5 edges and 8 slots evicted;
    final tree 6 slots (all protected), 18 free, 0 private. LRU order at r17 holds because node 4 was
    last touched at r11 while nodes 5 and 1 were last touched at r07.
    """
    s = RadixState.empty(24, first_slot_id=1)
    steps: list[TraceStep] = []

    def run(label: str, op: Callable[..., tuple[RadixState, Any]], *args: Any) -> None:
        nonlocal s
        s, receipt = op(s, *args)
        steps.append(TraceStep(label, op.__name__, s, receipt))

    run("r01", publish_unfinished, "req-chat-a", [10, 11, 12, 13, 20, 21], [1, 2, 3, 4, 5, 6])
    run("r02", match, [10, 11, 12, 99])
    run("r03", reserve, "req-chat-b", [7, 8, 9, 10, 11, 12])
    run("r04", match, [10, 11, 12, 40])
    run("r05", cache_finished, "req-chat-b", [10, 11, 12, 13, 30, 31], [7, 8, 9, 10, 11, 12])
    run("r06", reserve, "req-fewshot-a", [15, 16, 17])
    run("r07", publish_unfinished, "req-chat-a", [22, 23], [13, 14])
    run("r08", cache_finished, "req-fewshot-a", [50, 51, 52], [15, 16, 17])
    run("r09", reserve, "req-fewshot-b", [18, 19, 20])
    run("r10", cache_finished, "req-fewshot-b", [50, 51, 60], [18, 19, 20])
    run("r11", match_and_lock, "req-chat-b2", 3, [10, 11, 12, 13, 30, 31, 32])
    run("r12", evict, 1)
    run("r13", match, [50, 51, 60, 61])
    run("r14", evict, 3)
    run("r15", release_request, "req-chat-a")
    run("r16", release_request, "req-chat-b2")
    run("r17", evict, 4)
    run("r18", match_and_lock, "req-handoff", 4, [10, 11, 12, 13, 30, 31, 32])
    return steps


# the 0x08I failure lab ----------------------------------------------------------------------------
def _lab() -> RadixState:
    """[1,2]->[0,1] with children [3]->[2] (locked by req-a) and [4,5]->[3,4]; pool 0..7."""
    s = RadixState.empty(8)
    s, _ = reserve(s, "p", [0, 1, 2])
    s, _ = insert(s, [1, 2, 3], [0, 1, 2], "p")
    s, _ = reserve(s, "q", [5, 6, 3, 4])
    s, _ = cache_finished(s, "q", [1, 2, 4, 5], [5, 6, 3, 4])
    s, _ = match_and_lock(s, "req-a", 1, [1, 2, 3, 9])
    return s


def _node_at(s: RadixState, tokens: tuple[int, ...]) -> int:
    return next(n.node_id for n in s.nodes.values() if n.token_ids == tokens)


def _with_node(s: RadixState, node_id: int, **changes: Any) -> RadixState:
    return attrs.evolve(s, nodes={**s.nodes, node_id: attrs.evolve(s.nodes[node_id], **changes)})


def _lab_receipt() -> tuple[RadixState, RadixSchedulerHandoffReceipt]:
    s, r = match_and_lock(_lab(), "req-b", 2, [1, 2, 4, 5, 7])
    return s, r


def _forged(**changes: Any) -> None:
    s, r = _lab_receipt()
    verify_handoff(s, _seal(attrs.evolve(r, **changes)))


def _tampered() -> None:
    s, r = _lab_receipt()
    verify_handoff(s, attrs.evolve(r, matched_tokens=5))


def _stale_receipt() -> None:
    s, r = _lab_receipt()
    s, _ = release_request(s, "req-b")
    s, _ = match(s, [1, 9])
    verify_handoff(s, r)


def _cases() -> list[tuple[RadixRejection, str, Callable[[], Any]]]:
    R = RadixRejection
    leaf3 = lambda s: _node_at(s, (3,))  # noqa: E731
    return [
        (R.LOCKED_LEAF_EVICTION, "evict a leaf locked by a running request",
         lambda: evict_node(_lab(), leaf3(_lab()))),
        (R.INTERNAL_NODE_EVICTION, "evict an internal node before its children",
         lambda: evict_node(_lab(), _node_at(_lab(), (1, 2)))),
        (R.ROOT_EVICTION, "evict the root", lambda: evict_node(_lab(), ROOT)),
        (R.LOCK_UNDERFLOW, "unlock a node whose lock count is zero",
         lambda: unlock(_lab(), _node_at(_lab(), (4, 5)))),
        (R.OWNED_SLOT_REUSE, "insert a new suffix into a slot the tree already owns",
         lambda: insert(_lab(), [7, 8], [0, 6])),
        (R.OWNED_SLOT_REUSE, "insert another request's private slot",
         lambda: insert(reserve(reserve(_lab(), "x", [5])[0], "y", [6])[0], [7], [5], "y")),
        (R.SLOT_NOT_PRIVATE, "insert a free slot that no request reserved",
         lambda: insert(_lab(), [7], [5])),
        (R.STALE_VERSION, "mutation prepared against an older tree version",
         lambda: match(_lab(), [1, 2], expected_version=_lab().version - 1)),
        (R.STALE_VERSION, "unlocked handoff receipt used after the tree mutated", _stale_receipt),
        (R.PATH_SLOT_MISMATCH, "resealed receipt whose prefix slots differ from the tree path",
         lambda: _forged(prefix_slot_ids=(0, 1, 3, 7))),
        (R.SUFFIX_MISMATCH, "resealed receipt whose suffix does not start at the matched length",
         lambda: _forged(suffix_interval=(3, 5))),
        (R.RECEIPT_TAMPERED, "receipt field edited without resealing", _tampered),
        (R.POLICY_DECISION_FORBIDDEN, "handoff receipt carrying a scheduling decision",
         lambda: _forged(policy_decision="admit-first")),
        (R.TOKEN_SLOT_LENGTH_MISMATCH, "insert with more tokens than slots",
         lambda: insert(reserve(_lab(), "x", [5])[0], [7, 8], [5], "x")),
        (R.TOKEN_SLOT_LENGTH_MISMATCH, "state whose edge has unequal token and slot segments",
         lambda: check_state(_with_node(_lab(), _node_at(_lab(), (4, 5)), slot_ids=(3,)))),
        (R.EMPTY_EDGE, "state with an empty non-root edge",
         lambda: check_state(_with_node(_lab(), leaf3(_lab()), token_ids=(), slot_ids=()))),
        (R.CHILD_SELECTOR_MISMATCH, "child filed under a token that does not start its edge",
         lambda: check_state(_with_node(_lab(), leaf3(_lab()), token_ids=(9,)))),
        (R.ORPHAN_NODE, "node whose parent does not list it",
         lambda: check_state(_with_node(_lab(), leaf3(_lab()), parent_id=ROOT))),
        (R.LOCK_COUNT_MISMATCH, "recorded lock count differs from the lock holders' paths",
         lambda: check_state(_with_node(_lab(), _node_at(_lab(), (4, 5)), lock_ref=1))),
        (R.PARTITION_VIOLATION, "slot both tree-owned and free",
         lambda: check_state(attrs.evolve(_lab(), free_slot_ids=_lab().free_slot_ids | {0}))),
        (R.PARTITION_VIOLATION, "slot leaked from every ledger",
         lambda: check_state(attrs.evolve(_lab(), free_slot_ids=_lab().free_slot_ids - {7}))),
        (R.DUPLICATE_INPUT_SLOT, "one slot offered twice in one insert",
         lambda: insert(reserve(_lab(), "x", [5])[0], [7, 8], [5, 5], "x")),
        (R.SLOT_OUT_OF_POOL, "reserve a slot outside the pool", lambda: reserve(_lab(), "x", [99])),
        (R.SLOT_NOT_FREE, "reserve a tree-owned slot", lambda: reserve(_lab(), "x", [0])),
        (R.NEGATIVE_EVICTION_TARGET, "evict a negative number of tokens", lambda: evict(_lab(), -1)),
        (R.UNKNOWN_NODE, "lock a node that does not exist", lambda: lock(_lab(), 999)),
        (R.UNKNOWN_REQUEST, "release a request that holds nothing", lambda: release_request(_lab(), "ghost")),
        (R.LEASE_ALREADY_HELD, "a request takes a second lease", lambda: match_and_lock(_lab(), "req-a", 1, [1, 2])),
        (R.MALFORMED_INPUT, "match a string instead of token ids", lambda: match(_lab(), "10 11 12")),  # type: ignore[arg-type]
    ]


def register() -> None:
    """Register the lab's cases (called once, by :func:`kvexact.reference.labs.register_all`)."""
    for reason, description, trigger in _cases():
        register_negative(NegativeCase("0x08I", reason, description, trigger))


