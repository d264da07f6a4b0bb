"""The telemetry fixtures of 0x0CF (the funnel of twelve real gate attempts, the 12-block pool snapshot,
their Prometheus scrape) and telemetry's failure cases (Loop 11, registered under 0x0CG)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kvexact.reference import reuse_gate as gate
from kvexact.reference.labs import reuse_gate as gate_fixtures
from kvexact.reference.labs.ledgers import nested_prefix_cost
from kvexact.reference.labs.vmm import SEED_CONFIG
from kvexact.reference.rejections import NegativeCase, register_negative
from kvexact.reference.telemetry import (
    Funnel,
    GranularityCounters,
    Metric,
    PoolSnapshot,
    TelemetryRejection,
    check_funnel,
    check_hygiene,
    funnel_from_outcomes,
    reconcile_pool,
    standard_metrics,
    to_prometheus,
)


def run_funnel_fixture() -> Funnel:
    """The 12 attempts of :func:`kvexact.reference.labs.reuse_gate.funnel_requests` through the gate, counted."""
    runtime = gate_fixtures.RUNTIME
    outcomes = []
    for override, req in gate_fixtures.funnel_requests():
        out = gate.run_transaction(override or runtime, req)
        if override is None:
            runtime = out.runtime
        outcomes.append(out.rejection)
    return funnel_from_outcomes(outcomes)


# 12 blocks: 3 free, 2 evictable, 5 live (3..7), 2 reserved/copying; refs 9 recorded, 9 derived.
POOL_FIXTURE = PoolSnapshot(
    pool_blocks=12,
    block_states={0: "free", 1: "free", 2: "free", 3: "live", 4: "live", 5: "live", 6: "live", 7: "live",
                  8: "reserved_or_copying", 9: "reserved_or_copying", 10: "evictable", 11: "evictable"},
    recorded_refcounts={3: 2, 4: 2, 5: 2, 6: 1, 7: 2},
    request_maps={"r1": (3, 4, 5), "r2": (3, 4, 6), "r3": (7,)},
    leases={"l1": (5, 7)},
    required_frontier_tokens=32, ready_frontier_tokens=32)


def export_fixture() -> str:
    """The checked fixture of 0x0CF as a Prometheus scrape."""
    return to_prometheus(standard_metrics(run_funnel_fixture(), reconcile_pool(POOL_FIXTURE)))


def granularity_export() -> str:
    """The 0x0BL counters of :func:`granularity_counters` as a Prometheus scrape."""
    return to_prometheus(granularity_counters().metrics())


def granularity_counters() -> GranularityCounters:
    """0x0BL's counters fed by the reference's operations on the seed's fixtures: dispatch of allocator
    blocks 16, 64 and 12 (0x0AA/0x0AC), the 0x0D ledger, the 0x09B hit at P_a = 16, the 0x09C COW at
    P_a = 16, the 0x0AB table of lengths [64, 63, 17, 1], the 0x0BI chunks at P_c = 16 (B = 8), and the
    0x06F VMM growing request A to nine rows asynchronously."""
    from kvexact.reference import ledgers as L
    from kvexact.reference import traversal as T
    from kvexact.reference import vmm as V
    from kvexact.reference.labs.ledgers import worked_fixture

    c = GranularityCounters()
    for group, p_a in ((0, 16), (1, 64)):
        d = T.dispatch_kernel_block(p_a)
        c.observe_dispatch(d)
        c.observe_block_sizes(group, p_a, d.kernel_block_tokens or 0)
    c.observe_dispatch(T.dispatch_kernel_block(12))
    fixture = worked_fixture()
    c.observe_ledger(fixture, L.compute_ledger(fixture))
    cost = nested_prefix_cost(16)
    c.observe_prefix_hit(cost.full_hit_tokens_capped, cost.recompute_tokens_capped)
    c.observe_cow(L.cow_cost(16))
    c.observe_table(T.ragged_table_ledger([64, 63, 17, 1], 16))
    c.observe_chunks(T.chunk_ledger(16), group_size=8)
    s = V.VmmState.initial(SEED_CONFIG)
    s, _ = V.reserve_virtual(s)
    s, _ = V.create_handles(s)
    s, _ = V.alloc_reqid(s, 0, "A")
    requested = s.version
    s, _ = V.step_async(s, 0, 9)
    s, _ = V.await_mapping(s, 0)
    c.observe_vmm(s)
    c.observe_map_wait(requested, s.version)
    return c


# Loop 11 cases (0x0CG) --------------------------------------------------------------------------
def _metric(labels: Mapping[str, str], name: str = "kvexact_reuse_rejections_total") -> Metric:
    return Metric(name, "counter", "test", ((labels, 1),))


def _cases() -> list[tuple[enum.Enum, str, Callable[[], Any]]]:
    R = TelemetryRejection
    return [
        (R.RAW_PROMPT_IN_METRICS, "raw_prompt_in_metrics: a label carries the user's prompt text",
         lambda: check_hygiene(_metric({"bucket": "Summarize my medical record please"}))),
        (R.UNSALTED_CACHE_KEY_IN_METRICS, "unsalted_cache_key_in_metrics: a label carries a block hash",
         lambda: check_hygiene(_metric({"bucket": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}))),
        (R.TOKEN_LIST_IN_METRICS, "a label carries a token list", lambda: check_hygiene(_metric({"bucket": "[101, 7592, 102]"}))),
        (R.HIGH_CARDINALITY_LABEL, "a per-request label", lambda: check_hygiene(_metric({"request_id": "q01"}))),
        (R.FUNNEL_NOT_MONOTONE, "funnel stage larger than the stage before it",
         lambda: check_funnel(attrs.evolve(run_funnel_fixture(), counts={**run_funnel_fixture().counts, "leased": 7}))),
        (R.FUNNEL_UNRECONCILED, "funnel drop with no rejection bucket counting it",
         lambda: check_funnel(attrs.evolve(run_funnel_fixture(),
                                           rejections={**run_funnel_fixture().rejections, "mapping": 0}))),
        (R.POOL_UNRECONCILED, "block-state gauges that do not sum to the pool",
         lambda: reconcile_pool(attrs.evolve(POOL_FIXTURE, pool_blocks=13))),
    ]


def register() -> None:
    """Register the lab's cases (called once, by :func:`kvexact.reference.labs.register_all`)."""
    for reason, description, trigger in _cases():
        register_negative(NegativeCase("0x0CG", reason, description, trigger))


