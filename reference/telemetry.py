"""Observability that reconciles state (seed 0x0CF) and telemetry hygiene (0x0CE).

Invariants:

* the reuse funnel is monotone, ``N_req >= N_auth >= ... >= N_exec``, and every difference between two
  adjacent stages equals the count of exactly one rejection bucket (:func:`check_funnel`);
* the pool gauges reconcile, ``N_pool = N_free + N_evictable + N_live + N_reserved-or-copying``, with
  ``Delta_ref = recorded - derived`` and ``L_map = max(0, f_required - f_ready)`` reported, not hidden;
* alerts are joint predicates over two samples of the counters (:func:`evaluate_alerts`);
* metrics carry stable low-cardinality ids only: raw prompts, token lists, unsalted cache keys and
  per-request label names are rejected by name before export (:func:`check_hygiene`);
* the export is the Prometheus text exposition format (version 0.0.4), the format runtimes scrape.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from kvexact.reference import formulas_seed as F
from kvexact.reference import reuse_gate as gate
from kvexact.reference.rejections import Rejected


class TelemetryRejection(enum.Enum):
    RAW_PROMPT_IN_METRICS = "a label value looks like raw prompt text"
    UNSALTED_CACHE_KEY_IN_METRICS = "a label carries a concrete cache key or digest"
    TOKEN_LIST_IN_METRICS = "a label value is a token list"
    HIGH_CARDINALITY_LABEL = "a label name identifies a request, session or prompt"
    INVALID_METRIC_NAME = "metric or label name outside the Prometheus grammar"
    FUNNEL_NOT_MONOTONE = "a later funnel stage counts more than an earlier one"
    FUNNEL_UNRECONCILED = "a funnel difference is not the count of its rejection bucket"
    POOL_UNRECONCILED = "the block-state gauges do not sum to the pool, or states overlap"
    COUNTER_DECREASE = "an observation would decrease a counter"


FUNNEL_STAGES = ("requests", "authorized", "candidates", "compatible", "current_generation", "leased",
                 "mapping_ready", "current_snapshot", "executed")
# the rejection bucket that explains the drop into each stage (None: no rejection can happen there)
STAGE_BUCKET: dict[str, str | None] = {
    "authorized": "authorization", "candidates": "index_miss", "compatible": "compatibility",
    "current_generation": "generation", "leased": "lease", "mapping_ready": "mapping",
    "current_snapshot": "snapshot", "executed": None,
}
BUCKETS = tuple(b for b in STAGE_BUCKET.values() if b is not None)


@attrs.frozen
class Funnel:
    counts: Mapping[str, int]
    rejections: Mapping[str, int]


def funnel_from_outcomes(rejections: Iterable[gate.ReuseRejection | None]) -> Funnel:
    """Count attempts: each rejection in its one bucket; ``None`` is an executed hit."""
    outcomes = list(rejections)
    by_bucket = {b: 0 for b in BUCKETS}
    for r in outcomes:
        if r is not None:
            by_bucket[gate.BUCKETS[r]] += 1
    counts = {"requests": len(outcomes)}
    prev = len(outcomes)
    for stage in FUNNEL_STAGES[1:]:
        bucket = STAGE_BUCKET[stage]
        prev -= by_bucket[bucket] if bucket else 0
        counts[stage] = prev
    return Funnel(counts, by_bucket)


def check_funnel(funnel: Funnel) -> None:
    """Monotone, and each drop is exactly its bucket's count."""
    for i in range(1, len(FUNNEL_STAGES)):
        a, b = FUNNEL_STAGES[i - 1], FUNNEL_STAGES[i]
        na, nb = funnel.counts[a], funnel.counts[b]
        if nb > na:
            raise Rejected(TelemetryRejection.FUNNEL_NOT_MONOTONE, f"{b}={nb} > {a}={na}")
        bucket = STAGE_BUCKET[b]
        explained = funnel.rejections.get(bucket, 0) if bucket else 0
        if na - nb != explained:
            raise Rejected(TelemetryRejection.FUNNEL_UNRECONCILED,
                           f"{a}->{b} drops {na - nb}, bucket {bucket} counts {explained}")


# pool reconciliation gauges ---------------------------------------------------------------------------
BlockState = Literal["free", "evictable", "live", "reserved_or_copying"]
BLOCK_STATES: tuple[BlockState, ...] = ("free", "evictable", "live", "reserved_or_copying")


@attrs.frozen
class PoolSnapshot:
    """Allocator states (declared mutually exclusive), recorded refcounts, and the reachability
    sources of the derived refcounts (request maps and active leases, the Loop 5 convention)."""

    pool_blocks: int
    block_states: Mapping[int, str]
    recorded_refcounts: Mapping[int, int]
    request_maps: Mapping[str, tuple[int, ...]]
    leases: Mapping[str, tuple[int, ...]]
    required_frontier_tokens: int
    ready_frontier_tokens: int


@attrs.frozen
class PoolGauges:
    pool_blocks: int
    blocks_by_state: Mapping[str, int]
    refcount_recorded: int
    refcount_derived: int
    refcount_delta: int
    refcount_mismatched_blocks: int
    mapping_lag_tokens: int


def reconcile_pool(snap: PoolSnapshot) -> PoolGauges:
    """N_pool = free + evictable + live + reserved/copying; Delta_ref; L_map = max(0, required - ready)."""
    by_state: dict[str, int] = {s: 0 for s in BLOCK_STATES}
    for block, state in snap.block_states.items():
        if state not in by_state or not 0 <= block < snap.pool_blocks:
            raise Rejected(TelemetryRejection.POOL_UNRECONCILED, f"block {block} in state {state!r}")
        by_state[state] += 1
    if F.pool_blocks(**by_state) != snap.pool_blocks:
        raise Rejected(TelemetryRejection.POOL_UNRECONCILED,
                       f"{' + '.join(str(v) for v in by_state.values())} != {snap.pool_blocks}")
    per_block: dict[int, int] = {}
    for blocks in (*snap.request_maps.values(), *snap.leases.values()):
        for b in blocks:
            per_block[b] = per_block.get(b, 0) + 1
    recorded = sum(snap.recorded_refcounts.values())
    mismatched = sum(1 for b in set(per_block) | set(snap.recorded_refcounts)
                     if per_block.get(b, 0) != snap.recorded_refcounts.get(b, 0))
    derived = sum(per_block.values())
    return PoolGauges(snap.pool_blocks, by_state, recorded, derived,
                      F.ref_delta(recorded_refs=recorded, derived_refs=derived), mismatched,
                      F.map_lag(required_frontier=snap.required_frontier_tokens,
                                ready_frontier=snap.ready_frontier_tokens))


def allocator_pool_snapshot(alloc: Any, group: int) -> PoolSnapshot:
    """Cache group ``group`` of a live reference ``Allocator`` as a :class:`PoolSnapshot`: block states from
    the pool, recorded refcounts, and as reachability sources every request's and reader's table and every
    active lease (block ids renumbered densely in id order; no virtual mapping, so the frontiers are 0)."""
    from kvexact.reference.pool import BlockState as PoolState

    pool = alloc.pools[group]
    dense = {b: i for i, b in enumerate(sorted(pool.blocks))}
    names = {PoolState.FREE: "free", PoolState.EVICTABLE: "evictable", PoolState.REFERENCED: "live",
             PoolState.RESERVED: "reserved_or_copying"}
    maps = {f"request:{rid}": tuple(dense[h.block_id] for h in rec.tables[group])
            for rid, rec in alloc.requests.items()}
    maps.update({f"reader:{rid}": tuple(dense[h.block_id] for h in snap.tables[group])
                 for rid, (snap, _tokens) in alloc.readers.items()})
    leases = {f"lease:{lid}": (dense[h.block_id],) for lid, h in alloc.leases.items() if h.cache_group_id == group}
    return PoolSnapshot(len(dense), {dense[b]: names[pool.state_of(b)] for b in pool.blocks},
                        {dense[b]: n for b, n in pool.refs.items()}, maps, leases, 0, 0)


# alerts ---------------------------------------------------------------------------------------------------
@attrs.frozen
class TelemetrySample:
    """One scrape of the factual counters M5.3 owns (M5.2 owns the SLO budget and the response)."""

    at_s: float
    free_blocks: int
    evictable_blocks: int
    allocation_failures: int
    locked_eviction_rejects: int
    refcount_recorded: int
    refcount_derived: int
    refcount_mismatch_age_s: float
    required_frontier_tokens: int
    ready_frontier_tokens: int
    map_wait_age_s: float
    candidate_matches: int
    compatible_matches: int
    generation_rejects: int
    cross_namespace_rejects: int
    stale_namespace_rejects: int


def evaluate_alerts(prev: TelemetrySample, cur: TelemetrySample, slo_budget_s: float, grace_s: float
                    ) -> tuple[str, ...]:
    """The alerts of 0x0CF, each a joint predicate over two samples."""
    def rising(f: str) -> bool:
        return bool(getattr(cur, f) > getattr(prev, f))

    def stable(f: str) -> bool:
        return bool(getattr(cur, f) == getattr(prev, f))

    alerts = {
        "allocator_exhaustion": cur.free_blocks == 0 and cur.evictable_blocks == 0 and rising("allocation_failures"),
        "locked_cache_pressure": cur.free_blocks == 0 and cur.evictable_blocks > 0
        and rising("locked_eviction_rejects"),
        "reference_leak": cur.refcount_recorded - cur.refcount_derived != 0 and cur.refcount_mismatch_age_s >= grace_s,
        "mapping_stall": cur.required_frontier_tokens > cur.ready_frontier_tokens and cur.map_wait_age_s > slo_budget_s,
        "compatibility_churn": stable("candidate_matches") and cur.compatible_matches < prev.compatible_matches,
        "stale_receipt_race": stable("candidate_matches") and rising("generation_rejects"),
        "security_boundary_pressure": rising("cross_namespace_rejects") or rising("stale_namespace_rejects"),
    }
    return tuple(sorted(name for name, fired in alerts.items() if fired))


# hygiene and the Prometheus text export ----------------------------------------------------------------
_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_TOKEN_LIST = re.compile(r"^[\[(]?\s*-?\d+(\s*[, ]\s*-?\d+)+\s*[\])]?$")
_DIGEST = re.compile(r"^(sha256:|0x)?[0-9a-fA-F]{16,}$")
FORBIDDEN_LABELS = {"prompt": TelemetryRejection.RAW_PROMPT_IN_METRICS,
                    "text": TelemetryRejection.RAW_PROMPT_IN_METRICS,
                    "tokens": TelemetryRejection.TOKEN_LIST_IN_METRICS,
                    "token_ids": TelemetryRejection.TOKEN_LIST_IN_METRICS,
                    "cache_key": TelemetryRejection.UNSALTED_CACHE_KEY_IN_METRICS,
                    "block_hash": TelemetryRejection.UNSALTED_CACHE_KEY_IN_METRICS,
                    "key": TelemetryRejection.UNSALTED_CACHE_KEY_IN_METRICS}
HIGH_CARDINALITY = {"request_id", "session_id", "user_id", "trace_id", "lease_id", "block_id"}
MAX_LABEL_VALUE = 64


@attrs.frozen
class Metric:
    name: str
    kind: Literal["counter", "gauge"]
    help: str
    samples: tuple[tuple[Mapping[str, str], float], ...]


def check_hygiene(metric: Metric) -> None:
    """Reject, by name, anything that would leak prompt content or explode cardinality."""
    if not _METRIC_NAME.match(metric.name):
        raise Rejected(TelemetryRejection.INVALID_METRIC_NAME, metric.name)
    for labels, _ in metric.samples:
        for name, value in labels.items():
            where = f"{metric.name}{{{name}=...}}"
            if not _LABEL_NAME.match(name) or name.startswith("__"):
                raise Rejected(TelemetryRejection.INVALID_METRIC_NAME, where)
            if name in FORBIDDEN_LABELS:
                raise Rejected(FORBIDDEN_LABELS[name], where)
            if name in HIGH_CARDINALITY:
                raise Rejected(TelemetryRejection.HIGH_CARDINALITY_LABEL, where)
            text = str(value)
            if _TOKEN_LIST.match(text):
                raise Rejected(TelemetryRejection.TOKEN_LIST_IN_METRICS, where)
            if _DIGEST.match(text):
                raise Rejected(TelemetryRejection.UNSALTED_CACHE_KEY_IN_METRICS, where)
            if len(text) > MAX_LABEL_VALUE or re.search(r"\s", text):
                raise Rejected(TelemetryRejection.RAW_PROMPT_IN_METRICS, f"{where} ({len(text)} chars)")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def to_prometheus(metrics: Sequence[Metric]) -> str:
    """Prometheus text exposition (0.0.4): HELP, TYPE, then one line per sample; hygiene first."""
    lines: list[str] = []
    for m in metrics:
        check_hygiene(m)
        lines.append(f"# HELP {m.name} {m.help.replace(chr(92), chr(92) * 2).replace(chr(10), chr(92) + 'n')}")
        lines.append(f"# TYPE {m.name} {m.kind}")
        for labels, value in m.samples:
            rendered = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
            lines.append(f"{m.name}{{{rendered}}} {_number(value)}" if rendered else f"{m.name} {_number(value)}")
    return "\n".join(lines) + "\n"


def standard_metrics(funnel: Funnel, gauges: PoolGauges) -> list[Metric]:
    """The counter and gauge families of 0x0CF for one funnel and one pool snapshot."""
    return [
        Metric("kvexact_reuse_funnel_total", "counter", "Reuse attempts that reached each funnel stage.",
               tuple(({"stage": s}, funnel.counts[s]) for s in FUNNEL_STAGES)),
        Metric("kvexact_reuse_rejections_total", "counter", "Reuse attempts rejected, one bucket per funnel drop.",
               tuple(({"bucket": b}, funnel.rejections.get(b, 0)) for b in BUCKETS)),
        Metric("kvexact_pool_blocks", "gauge", "Physical blocks by mutually exclusive allocator state.",
               tuple(({"state": s}, n) for s, n in gauges.blocks_by_state.items())),
        Metric("kvexact_pool_capacity_blocks", "gauge", "Physical blocks in the pool.", (({}, gauges.pool_blocks),)),
        Metric("kvexact_refcount_recorded", "gauge", "Sum of recorded block reference counts.",
               (({}, gauges.refcount_recorded),)),
        Metric("kvexact_refcount_derived", "gauge", "Sum of references derived from request maps and leases.",
               (({}, gauges.refcount_derived),)),
        Metric("kvexact_refcount_delta", "gauge", "Recorded minus derived references (nonzero: integrity alert).",
               (({}, gauges.refcount_delta),)),
        Metric("kvexact_refcount_mismatched_blocks", "gauge", "Blocks whose recorded and derived counts differ.",
               (({}, gauges.refcount_mismatched_blocks),)),
        Metric("kvexact_mapping_lag_tokens", "gauge", "Required minus ready mapping frontier, floored at zero.",
               (({}, gauges.mapping_lag_tokens),)),
    ]


# 0x0BL granularity counters ------------------------------------------------------------------------------
@attrs.define
class GranularityCounters:
    """The observability 0x0BL requires, fed by the reference's records (``observe_*``).

    Invariants: counters only grow (each ``observe_*`` of an operation adds); gauges hold the last snapshot;
    the dense table cells equal used plus padded cells; map latency is counted in reference operations
    (VMM versions between the map request and the published frontier), not in seconds.
    """

    block_sizes: dict[int, tuple[int, int]] = attrs.field(factory=dict)  # group -> (P_a, P_k)
    dispatch: dict[tuple[str, str], int] = attrs.field(factory=dict)  # (outcome, reason) -> count
    ledger: dict[str, int] = attrs.field(factory=dict)  # request refs, unique blocks, tails, metadata
    totals: dict[str, int] = attrs.field(factory=dict)  # the counters below, by metric suffix

    def _add(self, name: str, value: int) -> None:
        if value < 0:
            raise Rejected(TelemetryRejection.COUNTER_DECREASE, f"{name} += {value}")
        self.totals[name] = self.totals.get(name, 0) + value

    def observe_block_sizes(self, group: int, allocator_block_tokens: int, kernel_block_tokens: int) -> None:
        self.block_sizes[group] = (allocator_block_tokens, kernel_block_tokens)

    def observe_dispatch(self, d: Any) -> None:
        """A :class:`~kvexact.reference.traversal.KernelDispatch` decision."""
        key = (d.outcome, d.reason)
        self.dispatch[key] = self.dispatch.get(key, 0) + 1

    def observe_ledger(self, fixture: Any, led: Any) -> None:
        """A 0x0D :class:`~kvexact.reference.ledgers.Ledger` and its fixture (gauges)."""
        self.ledger = {"request_refs": led.ref_blocks, "unique_blocks": led.unique_blocks,
                       "valid_tail_records": len(fixture.requests), "unique_tail_slots": led.unique_tail_slots,
                       "metadata_bytes": led.metadata_bytes}

    def observe_prefix_hit(self, hit_tokens: int, recompute_tokens: int) -> None:
        self._add("prefix_full_hit_tokens", hit_tokens)
        self._add("prefix_recomputed_tokens", recompute_tokens)

    def observe_cow(self, cost: Any) -> None:
        """A :class:`~kvexact.reference.ledgers.CowCost` (0x09C: read + write of r rows, one new block)."""
        self._add("cow_copied_rows", cost.tail_rows)
        self._add("cow_traffic_bytes", cost.copy_traffic_bytes)
        self._add("cow_destination_bytes", cost.destination_bytes)

    def observe_table(self, t: Any) -> None:
        """A :class:`~kvexact.reference.traversal.RaggedTableLedger` staged for one launch."""
        self._add("table_dense_cells", t.dense_cells)
        self._add("table_used_cells", t.used_cells)
        self._add("table_padded_cells", t.padded_cells)
        self._add("table_transfer_bytes", t.dense_bytes)

    def observe_chunks(self, c: Any, group_size: int) -> None:
        """A :class:`~kvexact.reference.traversal.ChunkLedger` executed with sharing (chunk visits are the
        shared schedule's chunk traversals)."""
        self.ledger["shared_group_size"] = group_size
        self._add("chunk_visits", c.shared_chunks)
        self._add("partial_rows", c.partial_states)
        self._add("partial_state_bytes", c.partial_state_bytes)

    def observe_vmm(self, state: Any) -> None:
        """A :class:`~kvexact.reference.vmm.VmmState` snapshot (gauges)."""
        self.ledger["vmm_page_group_bytes"] = state.config.page_bytes
        self.ledger["vmm_mapped_groups"] = sum(len(bundle) for s in state.slots for bundle in s.pages)
        self.ledger["vmm_ready_frontier_tokens"] = sum(s.ready_pages * state.config.page_tokens
                                                       for s in state.slots if s.active)

    def observe_map_wait(self, requested_version: int, ready_version: int) -> None:
        self._add("map_latency_operations_sum", ready_version - requested_version)
        self._add("map_latency_operations_count", 1)

    def metrics(self) -> list[Metric]:
        """The 0x0BL families as :class:`Metric` s (export with :func:`to_prometheus`)."""
        out = [Metric("kvexact_block_size_tokens", "gauge", "Allocator and kernel block size by cache group.",
                      tuple(({"group": str(g), "kind": kind}, size) for g, sizes in sorted(self.block_sizes.items())
                            for kind, size in zip(("allocator", "kernel"), sizes, strict=True))),
               Metric("kvexact_kernel_dispatch_total", "counter", "Kernel dispatch decisions by outcome and reason.",
                      tuple(({"outcome": o, "reason": r}, n) for (o, r), n in sorted(self.dispatch.items())))]
        out += [Metric(f"kvexact_{name}", "gauge", f"0x0BL gauge {name.replace('_', ' ')}.", (({}, v),))
                for name, v in sorted(self.ledger.items())]
        out += [Metric(f"kvexact_{name}" if name.endswith(("_sum", "_count")) else f"kvexact_{name}_total", "counter",
                       f"0x0BL counter {name.replace('_', ' ')}.", (({}, v),)) for name, v in sorted(self.totals.items())]
        return out
