"""The unified reuse gate (seed 0x0CD): one reuse attempt is a versioned concurrency protocol.

Invariant: an index match is an executable hit only if ``G_use = G_auth and G_compat and G_version and
G_lease and G_map and G_snapshot`` holds for the evidence tuple
``E = (g_ns, d_sem, d_layout, v_index, v_tree, g_pool, f_map, v_exec)``, checked in the ten-step order
of :data:`STEPS`. Authorization precedes any cache-existence lookup. A rejected attempt holds no lease
afterwards. Fallback may lose reuse but never weakens identity, ownership, mapping or execution
exactness (0x0CG): :func:`reuse_or_recompute` recomputes instead of using a stale or unauthorized object.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from typing import Literal

import attrs

from kvexact.reference.handles import BlockHandle
from kvexact.reference.rejections import Rejected

STEPS = (
    "authorize_namespace",  # 1 before any cache-existence lookup
    "validate_namespace_generation",  # 2 build semantic/layout key, validate namespace generation
    "lookup_candidate",  # 3 lookup; check the collision witness if policy requires it
    "acquire_leases",  # 4 path and physical-object leases
    "validate_versions",  # 5 index version, tree version, pool generations, valid frontiers
    "validate_declared_positions",  # 6 declared-module positions or session interval
    "wait_mapping",  # 7 physical mapping covers every dereferenced row
    "freeze_snapshot",  # 8 immutable execution snapshot and kernel ABI
    "execute",  # 9
    "release_or_publish",  # 10 release leases (or publish one complete COW successor)
)


class ReuseRejection(enum.Enum):
    UNAUTHORIZED_PRINCIPAL = "the principal is not authorized for the namespace"
    STALE_NAMESPACE_GENERATION = "the request's namespace generation is not the current one"
    INDEX_MISS = "no candidate under this key"
    CROSS_NAMESPACE_CANDIDATE = "the candidate belongs to another namespace or generation"
    SEMANTIC_DIGEST_MISMATCH = "the candidate's semantic digest differs"
    LAYOUT_DIGEST_MISMATCH = "the candidate's layout digest differs"
    COLLISION_WITNESS_MISMATCH = "equal key digest but different token witness"
    LEASE_UNAVAILABLE = "a path or physical object cannot be leased (revoked or being purged)"
    STALE_INDEX_VERSION = "the index version moved since the candidate was prepared"
    STALE_TREE_VERSION = "the tree version moved since the candidate was prepared"
    STALE_POOL_GENERATION = "a physical block was recycled (its generation moved)"
    INVALID_FRONTIER = "the candidate's valid rows do not cover the interval to reuse"
    MODULE_POSITION_MISMATCH = "declared-module positions differ from the request's"
    SESSION_INTERVAL_MISMATCH = "the session interval differs from the request's"
    MAPPING_FRONTIER_LAG = "the ready mapping frontier does not cover the rows to dereference"
    STALE_EXECUTION_SNAPSHOT = "the frozen execution snapshot is not the expected version"


# rejection -> the funnel bucket of 0x0CF it is counted in
BUCKETS: dict[ReuseRejection, str] = {
    ReuseRejection.UNAUTHORIZED_PRINCIPAL: "authorization",
    ReuseRejection.INDEX_MISS: "index_miss",
    ReuseRejection.CROSS_NAMESPACE_CANDIDATE: "compatibility",
    ReuseRejection.SEMANTIC_DIGEST_MISMATCH: "compatibility",
    ReuseRejection.LAYOUT_DIGEST_MISMATCH: "compatibility",
    ReuseRejection.COLLISION_WITNESS_MISMATCH: "compatibility",
    ReuseRejection.MODULE_POSITION_MISMATCH: "compatibility",
    ReuseRejection.SESSION_INTERVAL_MISMATCH: "compatibility",
    ReuseRejection.STALE_NAMESPACE_GENERATION: "generation",
    ReuseRejection.STALE_INDEX_VERSION: "generation",
    ReuseRejection.STALE_TREE_VERSION: "generation",
    ReuseRejection.STALE_POOL_GENERATION: "generation",
    ReuseRejection.INVALID_FRONTIER: "generation",
    ReuseRejection.LEASE_UNAVAILABLE: "lease",
    ReuseRejection.MAPPING_FRONTIER_LAG: "mapping",
    ReuseRejection.STALE_EXECUTION_SNAPSHOT: "snapshot",
}


def concrete_key(namespace_salt: str, semantic_digest: str, layout_digest: str, token_ids: tuple[int, ...]) -> str:
    """The key built at step 2: the namespace salt enters it first (as vLLM's cache_salt enters the
    first block hash), so equal tokens in two trust groups never share a key. A salt isolates keys; it
    does not authorize: step 1 still decides who may look anything up."""
    payload = "\x1f".join([namespace_salt, semantic_digest, layout_digest, ",".join(map(str, token_ids))])
    return "k-" + hashlib.sha256(payload.encode()).hexdigest()[:32]


def _block(h: BlockHandle) -> tuple[int, int, int]:
    return (h.pool_id, h.cache_group_id, h.block_id)


@attrs.frozen
class Candidate:
    """An index entry: identity, witness, path and physical references, and what it needs mapped."""

    concrete_key: str
    namespace_id: str
    namespace_generation: int
    semantic_digest: str
    layout_digest: str
    token_witness: tuple[int, ...]
    path_node_ids: tuple[int, ...]
    physical_refs: tuple[BlockHandle, ...]
    valid_tokens: int
    required_mapping_frontier_tokens: int
    position_ids: tuple[int, ...] | None = None
    session_interval: tuple[int, int] | None = None


@attrs.frozen
class Expected:
    """What the requester proved when it prepared the attempt (the evidence it expects to still hold)."""

    namespace_generation: int
    semantic_digest: str
    layout_digest: str
    index_version: int
    tree_version: int
    covered_tokens: int
    execution_snapshot_version: int
    position_ids: tuple[int, ...] | None = None
    session_interval: tuple[int, int] | None = None


@attrs.frozen
class ReuseRequest:
    request_id: str
    principal: str
    namespace_id: str
    concrete_key: str
    token_ids: tuple[int, ...]
    expected: Expected


@attrs.frozen
class GateRuntime:
    """The runtime facts the gate reads: grants, namespace generations, index, versions, block
    generations, mapping frontiers, the execution snapshot version and the leases held."""

    grants: frozenset[tuple[str, str]]
    namespace_generations: Mapping[str, int]
    index: Mapping[tuple[str, str], Candidate]
    index_version: int
    tree_version: int
    block_generations: Mapping[tuple[int, int, int], int]
    ready_mapping_frontier_tokens: int
    pending_mapping_frontier_tokens: int
    execution_snapshot_version: int
    unleasable: frozenset[tuple[int, int, int]] = frozenset()
    leases: Mapping[str, tuple[BlockHandle, ...]] = attrs.field(factory=dict)
    collision_witness_required: bool = True


@attrs.frozen
class Evidence:
    """E = (g_ns, d_sem, d_layout, v_index, v_tree, g_pool, f_map, v_exec)."""

    namespace_generation: int
    semantic_digest: str
    layout_digest: str
    index_version: int
    tree_version: int
    pool_generations: tuple[int, ...]
    mapping_frontier_tokens: int
    execution_snapshot_version: int


@attrs.frozen
class ExecutableReuseReceipt:
    request_id: str
    candidate: Candidate
    lease_id: str
    evidence: Evidence
    steps: tuple[str, ...]


@attrs.frozen
class Attempt:
    """The outcome of one attempt: the successor runtime, the steps run, and a receipt or a rejection."""

    runtime: GateRuntime
    steps: tuple[str, ...]
    receipt: ExecutableReuseReceipt | None
    rejection: ReuseRejection | None
    lookups: int  # cache-existence lookups performed (0 when authorization failed)


def attempt(runtime: GateRuntime, request: ReuseRequest) -> Attempt:
    """Run steps 1-8 of the use transaction; on any rejection no lease is left held."""
    steps: list[str] = []
    lookups = 0
    ex = request.expected

    def fail(reason: ReuseRejection) -> Attempt:
        return Attempt(runtime, tuple(steps), None, reason, lookups)

    steps.append(STEPS[0])
    if (request.principal, request.namespace_id) not in runtime.grants:
        return fail(ReuseRejection.UNAUTHORIZED_PRINCIPAL)
    steps.append(STEPS[1])
    if runtime.namespace_generations.get(request.namespace_id) != ex.namespace_generation:
        return fail(ReuseRejection.STALE_NAMESPACE_GENERATION)
    steps.append(STEPS[2])
    lookups += 1
    cand = runtime.index.get((request.namespace_id, request.concrete_key))
    if cand is None:
        return fail(ReuseRejection.INDEX_MISS)
    if (cand.namespace_id, cand.namespace_generation) != (request.namespace_id, ex.namespace_generation):
        return fail(ReuseRejection.CROSS_NAMESPACE_CANDIDATE)
    if cand.semantic_digest != ex.semantic_digest:
        return fail(ReuseRejection.SEMANTIC_DIGEST_MISMATCH)
    if cand.layout_digest != ex.layout_digest:
        return fail(ReuseRejection.LAYOUT_DIGEST_MISMATCH)
    if runtime.collision_witness_required and cand.token_witness != request.token_ids[: len(cand.token_witness)]:
        return fail(ReuseRejection.COLLISION_WITNESS_MISMATCH)
    steps.append(STEPS[3])
    if any(_block(h) in runtime.unleasable for h in cand.physical_refs):
        return fail(ReuseRejection.LEASE_UNAVAILABLE)
    lease_id = f"lease-{request.request_id}-i{runtime.index_version}-t{runtime.tree_version}"
    leased = attrs.evolve(runtime, leases={**runtime.leases, lease_id: cand.physical_refs})
    steps.append(STEPS[4])
    if runtime.index_version != ex.index_version:
        return fail(ReuseRejection.STALE_INDEX_VERSION)
    if runtime.tree_version != ex.tree_version:
        return fail(ReuseRejection.STALE_TREE_VERSION)
    for h in cand.physical_refs:
        if runtime.block_generations.get(_block(h)) != h.generation:
            return fail(ReuseRejection.STALE_POOL_GENERATION)
    if cand.valid_tokens < ex.covered_tokens:
        return fail(ReuseRejection.INVALID_FRONTIER)
    steps.append(STEPS[5])
    if ex.position_ids is not None and cand.position_ids != ex.position_ids:
        return fail(ReuseRejection.MODULE_POSITION_MISMATCH)
    if ex.session_interval is not None and cand.session_interval != ex.session_interval:
        return fail(ReuseRejection.SESSION_INTERVAL_MISMATCH)
    steps.append(STEPS[6])
    need = cand.required_mapping_frontier_tokens
    ready = leased.ready_mapping_frontier_tokens
    if ready < need:
        if leased.pending_mapping_frontier_tokens < need:
            return fail(ReuseRejection.MAPPING_FRONTIER_LAG)
        ready = leased.pending_mapping_frontier_tokens  # await the in-flight map
        leased = attrs.evolve(leased, ready_mapping_frontier_tokens=ready)
    steps.append(STEPS[7])
    if leased.execution_snapshot_version != ex.execution_snapshot_version:
        return fail(ReuseRejection.STALE_EXECUTION_SNAPSHOT)
    evidence = Evidence(cand.namespace_generation, cand.semantic_digest, cand.layout_digest, leased.index_version,
                        leased.tree_version, tuple(h.generation for h in cand.physical_refs), ready,
                        leased.execution_snapshot_version)
    receipt = ExecutableReuseReceipt(request.request_id, cand, lease_id, evidence, tuple(steps))
    return Attempt(leased, tuple(steps), receipt, None, lookups)


def acquire_executable_reuse(runtime: GateRuntime, request: ReuseRequest
                             ) -> tuple[GateRuntime, ExecutableReuseReceipt]:
    """Steps 1-8; raises :class:`Rejected` with the named reason when ``G_use`` is false."""
    out = attempt(runtime, request)
    if out.rejection is not None:
        raise Rejected(out.rejection, f"{request.request_id} after {out.steps[-1]}")
    assert out.receipt is not None
    return out.runtime, out.receipt


def execute_and_release(runtime: GateRuntime, receipt: ExecutableReuseReceipt
                        ) -> tuple[GateRuntime, tuple[str, ...]]:
    """Steps 9 and 10: execute under the frozen snapshot, then release the attempt's lease."""
    leases = {k: v for k, v in runtime.leases.items() if k != receipt.lease_id}
    return attrs.evolve(runtime, leases=leases), receipt.steps + (STEPS[8], STEPS[9])


def run_transaction(runtime: GateRuntime, request: ReuseRequest) -> Attempt:
    """All ten steps for an accepted attempt; a rejected one stops where it was refused."""
    out = attempt(runtime, request)
    if out.receipt is None:
        return out
    after, steps = execute_and_release(out.runtime, out.receipt)
    return attrs.evolve(out, runtime=after, steps=steps)


@attrs.frozen
class Decision:
    """Reuse (with a receipt) or recompute from tokens (with the rejection that forced it)."""

    mode: Literal["reuse", "recompute"]
    prefill_tokens: int
    rejection: ReuseRejection | None
    receipt: ExecutableReuseReceipt | None


def reuse_or_recompute(runtime: GateRuntime, request: ReuseRequest) -> tuple[GateRuntime, Decision]:
    """Fallback loses reuse but never exactness: any rejection means recomputing every token."""
    out = attempt(runtime, request)
    if out.receipt is None:
        return out.runtime, Decision("recompute", len(request.token_ids), out.rejection, None)
    reused = min(request.expected.covered_tokens, len(request.token_ids) - 1)
    return out.runtime, Decision("reuse", len(request.token_ids) - reused, None, out.receipt)
