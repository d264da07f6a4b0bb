"""The reuse gate's fixtures (one runtime, one candidate, the twelve attempts behind 0x0CF's funnel) and
its failure cases (Loop 11, registered under 0x0CG)."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import attrs

from kvexact.reference.handles import BlockHandle
from kvexact.reference.rejections import NegativeCase, register_negative
from kvexact.reference.reuse_gate import (
    Candidate,
    Expected,
    GateRuntime,
    ReuseRejection,
    ReuseRequest,
    acquire_executable_reuse,
)

# fixtures -------------------------------------------------------------------------------------------
REFS = (BlockHandle(0, 0, 3, 5), BlockHandle(0, 0, 7, 2))
CANDIDATE = Candidate("k-sys", "ns-a", 2, "sem-1", "lay-1", tuple(range(100, 132)), (2, 3), REFS, 32, 32)
LONG = attrs.evolve(CANDIDATE, concrete_key="k-long", required_mapping_frontier_tokens=64)
RUNTIME = GateRuntime(
    grants=frozenset({("alice", "ns-a"), ("bob", "ns-a")}), namespace_generations={"ns-a": 2},
    index={("ns-a", "k-sys"): CANDIDATE, ("ns-a", "k-long"): LONG}, index_version=7, tree_version=18,
    block_generations={(0, 0, 3): 5, (0, 0, 7): 2}, ready_mapping_frontier_tokens=32,
    pending_mapping_frontier_tokens=48, execution_snapshot_version=4)
EXPECTED = Expected(2, "sem-1", "lay-1", 7, 18, 32, 4)


def request(request_id: str = "r", principal: str = "alice", key: str = "k-sys", tokens: tuple[int, ...] | None = None,
            **expected_changes: Any) -> ReuseRequest:
    toks = tuple(range(100, 140)) if tokens is None else tokens
    return ReuseRequest(request_id, principal, "ns-a", key, toks, attrs.evolve(EXPECTED, **expected_changes))


def funnel_requests() -> list[tuple[GateRuntime | None, ReuseRequest]]:
    """The 12 attempts behind the funnel of 0x0CF: 4 executed hits and one rejection per bucket count
    (1 authorization, 2 index misses, 2 semantic/layout, 1 stale generation, 1 mapping lag, 1 stale
    snapshot). ``None`` means the attempt runs against the shared runtime."""
    return [
        (None, request("q01")), (None, request("q02", "bob")), (None, request("q03")), (None, request("q04")),
        (None, request("q05", "mallory")),
        (None, request("q06", key="k-other")), (None, request("q07", key="k-gone")),
        (None, request("q08", semantic_digest="sem-2")), (None, request("q09", layout_digest="lay-2")),
        (None, request("q10", index_version=6)),
        (None, request("q11", key="k-long")),
        (None, request("q12", execution_snapshot_version=3)),
    ]


# Loop 11 cases (0x0CG) --------------------------------------------------------------------------
def _ev(**changes: Any) -> GateRuntime:
    return attrs.evolve(RUNTIME, **changes)


def _cases() -> list[tuple[enum.Enum, str, Callable[[], Any]]]:
    R = ReuseRejection
    acq = acquire_executable_reuse
    return [
        (R.UNAUTHORIZED_PRINCIPAL, "lookup attempted by an unauthorized principal",
         lambda: acq(RUNTIME, request(principal="mallory"))),
        (R.STALE_NAMESPACE_GENERATION, "request prepared under a revoked namespace generation",
         lambda: acq(RUNTIME, request(namespace_generation=1))),
        (R.SEMANTIC_DIGEST_MISMATCH, "candidate with another semantic digest", lambda: acq(RUNTIME, request(semantic_digest="s2"))),
        (R.LAYOUT_DIGEST_MISMATCH, "candidate with another layout digest", lambda: acq(RUNTIME, request(layout_digest="l2"))),
        (R.COLLISION_WITNESS_MISMATCH, "equal key digest over a different token witness",
         lambda: acq(RUNTIME, request(tokens=tuple(range(200, 240))))),
        (R.CROSS_NAMESPACE_CANDIDATE, "index entry filed under the key but from another namespace generation",
         lambda: acq(_ev(index={("ns-a", "k-sys"): attrs.evolve(CANDIDATE, namespace_generation=1)}), request())),
        (R.LEASE_UNAVAILABLE, "candidate block is being purged and cannot be leased",
         lambda: acq(_ev(unleasable=frozenset({(0, 0, 7)})), request())),
        (R.STALE_INDEX_VERSION, "index mutated after the candidate was prepared", lambda: acq(_ev(index_version=8), request())),
        (R.STALE_TREE_VERSION, "tree mutated after the candidate was prepared", lambda: acq(_ev(tree_version=19), request())),
        (R.STALE_POOL_GENERATION, "candidate block recycled to a new owner (generation moved)",
         lambda: acq(_ev(block_generations={(0, 0, 3): 6, (0, 0, 7): 2}), request())),
        (R.INVALID_FRONTIER, "candidate's valid rows end before the reused interval",
         lambda: acq(RUNTIME, request(covered_tokens=40))),
        (R.MODULE_POSITION_MISMATCH, "declared module reused at other positions",
         lambda: acq(RUNTIME, request(position_ids=tuple(range(8, 40))))),
        (R.SESSION_INTERVAL_MISMATCH, "session history reused over another interval",
         lambda: acq(RUNTIME, request(session_interval=(0, 32)))),
        (R.MAPPING_FRONTIER_LAG, "rows to dereference lie beyond the ready and pending mapping frontier",
         lambda: acq(RUNTIME, request(key="k-long"))),
        (R.STALE_EXECUTION_SNAPSHOT, "execution snapshot changed under the attempt",
         lambda: acq(_ev(execution_snapshot_version=5), request())),
    ]


def register() -> None:
    """Register the lab's cases (called once, by :func:`kvexact.reference.labs.register_all`)."""
    for reason, description, trigger in _cases():
        register_negative(NegativeCase("0x0CG", reason, description, trigger))


