"""Observability (0x0CF): funnel, reconciliation gauges, alerts, hygiene, Prometheus text export."""

from __future__ import annotations

import re

import attrs
import pytest

from kvexact.reference import telemetry as tm
from kvexact.reference.labs import telemetry as tm_lab
from kvexact.reference.rejections import Rejected


def test_funnel_of_the_12_attempts_through_the_gate():
    f = tm_lab.run_funnel_fixture()
    assert [f.counts[s] for s in tm.FUNNEL_STAGES] == [12, 11, 9, 7, 6, 6, 5, 4, 4]
    assert f.rejections == {"authorization": 1, "index_miss": 2, "compatibility": 2, "generation": 1, "lease": 0,
                            "mapping": 1, "snapshot": 1}
    tm.check_funnel(f)
    counts = [f.counts[s] for s in tm.FUNNEL_STAGES]
    assert all(a >= b for a, b in zip(counts, counts[1:], strict=False))  # monotone


def test_pool_gauges_reconcile():
    g = tm.reconcile_pool(tm_lab.POOL_FIXTURE)
    assert g.blocks_by_state == {"free": 3, "evictable": 2, "live": 5, "reserved_or_copying": 2}
    assert sum(g.blocks_by_state.values()) == g.pool_blocks == 12
    assert (g.refcount_recorded, g.refcount_derived, g.refcount_delta) == (9, 9, 0)
    assert g.refcount_mismatched_blocks == 0 and g.mapping_lag_tokens == 0


def test_per_block_mismatch_is_visible_even_when_totals_agree():
    snap = attrs.evolve(tm_lab.POOL_FIXTURE, recorded_refcounts={3: 3, 4: 1, 5: 2, 6: 1, 7: 2})
    g = tm.reconcile_pool(snap)
    assert g.refcount_delta == 0 and g.refcount_mismatched_blocks == 2


def test_mapping_lag_is_directional():
    g = tm.reconcile_pool(attrs.evolve(tm_lab.POOL_FIXTURE, required_frontier_tokens=40, ready_frontier_tokens=32))
    assert g.mapping_lag_tokens == 8
    g = tm.reconcile_pool(attrs.evolve(tm_lab.POOL_FIXTURE, required_frontier_tokens=16, ready_frontier_tokens=32))
    assert g.mapping_lag_tokens == 0


BASE = tm.TelemetrySample(at_s=0, free_blocks=3, evictable_blocks=2, allocation_failures=0, locked_eviction_rejects=0,
                          refcount_recorded=9, refcount_derived=9, refcount_mismatch_age_s=0,
                          required_frontier_tokens=32, ready_frontier_tokens=32, map_wait_age_s=0,
                          candidate_matches=9, compatible_matches=7, generation_rejects=1, cross_namespace_rejects=0,
                          stale_namespace_rejects=0)


@pytest.mark.parametrize("change, alert", [
    ({"free_blocks": 0, "evictable_blocks": 0, "allocation_failures": 3}, "allocator_exhaustion"),
    ({"free_blocks": 0, "evictable_blocks": 2, "locked_eviction_rejects": 1}, "locked_cache_pressure"),
    ({"refcount_recorded": 10, "refcount_mismatch_age_s": 60}, "reference_leak"),
    ({"required_frontier_tokens": 36, "map_wait_age_s": 0.5}, "mapping_stall"),
    ({"compatible_matches": 5}, "compatibility_churn"),
    ({"generation_rejects": 4}, "stale_receipt_race"),
    ({"stale_namespace_rejects": 1}, "security_boundary_pressure"),
])
def test_each_alert_is_a_joint_predicate(change, alert):
    cur = attrs.evolve(BASE, at_s=10, **change)
    assert tm.evaluate_alerts(BASE, cur, slo_budget_s=0.2, grace_s=30) == (alert,)


def test_single_conditions_alone_do_not_alert():
    assert tm.evaluate_alerts(BASE, attrs.evolve(BASE, free_blocks=0), 0.2, 30) == ()  # free 0, evictable > 0, no rise
    assert tm.evaluate_alerts(BASE, attrs.evolve(BASE, refcount_recorded=10, refcount_mismatch_age_s=5), 0.2, 30) == ()
    assert tm.evaluate_alerts(BASE, attrs.evolve(BASE, required_frontier_tokens=36, map_wait_age_s=0.1), 0.2, 30) == ()
    # compatible falling while candidates also fall is the workload changing, not churn
    assert tm.evaluate_alerts(BASE, attrs.evolve(BASE, candidate_matches=7, compatible_matches=5), 0.2, 30) == ()


def test_prometheus_export_of_the_fixture():
    text = tm_lab.export_fixture()
    assert text.endswith("\n")
    assert 'kvexact_reuse_funnel_total{stage="requests"} 12' in text
    assert 'kvexact_reuse_funnel_total{stage="executed"} 4' in text
    assert 'kvexact_pool_blocks{state="reserved_or_copying"} 2' in text
    assert "kvexact_refcount_delta 0" in text and "kvexact_mapping_lag_tokens 0" in text
    sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*",?)*\})? -?[0-9.e+]+$')
    families = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            families[name] = kind
        elif not line.startswith("# HELP "):
            assert sample.match(line), line
            assert line.split("{")[0].split(" ")[0] in families  # TYPE precedes samples
    assert all(n.endswith("_total") for n, k in families.items() if k == "counter")


def test_label_values_are_escaped():
    m = tm.Metric("kvexact_x", "gauge", "h", (({"state": 'a"b\\c'}, 1),))
    assert 'kvexact_x{state="a\\"b\\\\c"} 1' in tm.to_prometheus([m])


@pytest.mark.parametrize("labels, reason", [
    ({"bucket": "Please summarize the attached contract"}, "RAW_PROMPT_IN_METRICS"),
    ({"prompt": "hi"}, "RAW_PROMPT_IN_METRICS"),
    ({"bucket": "9f86d081884c7d659a2feaa0c55ad015"}, "UNSALTED_CACHE_KEY_IN_METRICS"),
    ({"cache_key": "ns-a"}, "UNSALTED_CACHE_KEY_IN_METRICS"),
    ({"bucket": "101,7592,102"}, "TOKEN_LIST_IN_METRICS"),
    ({"session_id": "chat-42"}, "HIGH_CARDINALITY_LABEL"),
    ({"9bad": "x"}, "INVALID_METRIC_NAME"),
])
def test_hygiene_rejects_by_name_before_export(labels, reason):
    with pytest.raises(Rejected) as exc:
        tm.to_prometheus([tm.Metric("kvexact_reuse_rejections_total", "counter", "h", ((labels, 1),))])
    assert exc.value.reason is tm.TelemetryRejection[reason]


def test_stable_low_cardinality_ids_pass():
    tm.check_hygiene(tm.Metric("kvexact_reuse_rejections_total", "counter", "h",
                               (({"bucket": "index_miss", "namespace_id": "tenant-a.chat"}, 2),)))


# ---------------------------------------------------------------- 0x0BL granularity counters


def test_0x0BL_counters_carry_the_seeds_worked_values():
    c = tm_lab.granularity_counters()
    # 0x0AA: the pinned V1 launcher instantiates 8/16/32 only; 64 splits (0x0AC), 12 has no divisor
    assert c.block_sizes == {0: (16, 16), 1: (64, 32)}
    assert c.dispatch == {("selected", "allocator_block_instantiated"): 1, ("fallback", "split_allocator_block"): 1,
                          ("rejected", "unsupported_kernel_block"): 1}
    # 0x0D: six request refs, three unique blocks, three valid-tail records, 15 unique tail slots, 482 B
    assert {k: c.ledger[k] for k in ("request_refs", "unique_blocks", "valid_tail_records", "unique_tail_slots",
                                     "metadata_bytes")} == {"request_refs": 6, "unique_blocks": 3,
                                                            "valid_tail_records": 3, "unique_tail_slots": 15,
                                                            "metadata_bytes": 482}
    t = c.totals
    assert (t["prefix_full_hit_tokens"], t["prefix_recomputed_tokens"]) == (16, 25)  # 0x09B at P_a = 16
    # 0x09C at P_a = 16: r = 20 mod 16 = 4 rows, 2 r B_row = 512 KiB, one 1 MiB destination block
    assert (t["cow_copied_rows"], t["cow_traffic_bytes"], t["cow_destination_bytes"]) == (4, 512 * 1024, 1024 * 1024)
    # 0x0AB lengths [64, 63, 17, 1] at P_k = 16: 16 dense = 11 used + 5 padded cells; int32 cells: 64 B staged
    assert (t["table_dense_cells"], t["table_used_cells"], t["table_padded_cells"]) == (16, 11, 5)
    assert t["table_transfer_bytes"] == 16 * 4
    # 0x0BI at P_c = 16: B = 8 rows share the prefix; 12 shared-schedule chunks; 32 partial rows of 264 B
    assert c.ledger["shared_group_size"] == 8
    assert (t["chunk_visits"], t["partial_rows"], t["partial_state_bytes"]) == (12, 32, 32 * 264)
    # 0x06F geometry: 64 B page groups of 4 tokens; 9 rows need 3 bundles of 2 L = 4 page groups each
    assert c.ledger["vmm_page_group_bytes"] == 64
    assert (c.ledger["vmm_mapped_groups"], c.ledger["vmm_ready_frontier_tokens"]) == (12, 12)
    assert t["map_latency_operations_count"] == 1 and t["map_latency_operations_sum"] == 4  # 3 maps + await


def test_0x0BL_counters_export_as_prometheus_text():
    text = tm_lab.granularity_export()
    for line in ('kvexact_block_size_tokens{group="1",kind="allocator"} 64',
                 'kvexact_block_size_tokens{group="1",kind="kernel"} 32',
                 'kvexact_kernel_dispatch_total{outcome="fallback",reason="split_allocator_block"} 1',
                 "kvexact_cow_traffic_bytes_total 524288", "kvexact_table_padded_cells_total 5",
                 "kvexact_chunk_visits_total 12", "kvexact_metadata_bytes 482", "kvexact_vmm_mapped_groups 12",
                 "kvexact_map_latency_operations_sum 4", "kvexact_map_latency_operations_count 1"):
        assert line in text.splitlines(), line
    assert "# TYPE kvexact_cow_traffic_bytes_total counter" in text and "# TYPE kvexact_metadata_bytes gauge" in text


def test_counters_grow_and_accumulate():
    c = tm.GranularityCounters()
    c.observe_prefix_hit(16, 25)
    c.observe_prefix_hit(32, 16)
    assert (c.totals["prefix_full_hit_tokens"], c.totals["prefix_recomputed_tokens"]) == (48, 41)
    with pytest.raises(Rejected) as e:
        c.observe_prefix_hit(-1, 0)
    assert e.value.reason is tm.TelemetryRejection.COUNTER_DECREASE
    assert c.totals["prefix_full_hit_tokens"] == 48
