"""The telemetry fixtures of 0x0CF (the funnel of twelve real gate attempts, the 12-block pool snapshot,
their Prometheus scrape) and telemetry's failure cases (Loop 11, registered under 0x0CG)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kvexact.reference import reuse_gate as gate
from kvexact.reference.labs import reuse_gate as gate_fixtures
from kvexact.reference.rejections import NegativeCase, register_negative
from kvexact.reference.telemetry import (
    Funnel,
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


