"""Accounting cases of the golden tests (registered in :mod:`golden`, issue
#25): telemetry's funnel, pool gauges, alerts, hygiene, export and 0x0BL counters; the ledger's request-view
tail slots; the lifecycle's truncate, release and compensation receipts; the allocator's receipts.

Invariant: each case returns ``(what, got, expected)`` rows whose expected values come from the seed (``0x0..``
sections), from the documented contract quoted in the docstring, or from the arithmetic written beside them, never
from the reference's own output; a row that differs (or a case that raises) fails its golden test by name.
"""

from __future__ import annotations

from typing import Any

from seed_cases_core import _refusal  # the one refusal helper of the case modules

Rows = list[tuple[str, Any, Any]]
KIB = 1024
MIB = 1024 * KIB


def _shown(value: Any) -> Any:
    """``value``, or a short marker for an int too long to print (a mutant's ``P << B`` has 65,000 bits)."""
    return f"<{value.bit_length()}-bit int>" if isinstance(value, int) and value.bit_length() > 256 else value


def _int(text: str) -> int:
    """An int built at run time (another object than the literal for values past the small-int cache)."""
    return int(text)


def telemetry_funnel() -> Rows:
    """0x0CF: each attempt counts in the one bucket of its rejection (None: executed); stage k holds the attempts
    minus the buckets of stages 1..k; ``check_funnel`` refuses a stage larger than the one before it
    (FUNNEL_NOT_MONOTONE, "b=nb > a=na") and a drop that differs from its bucket's count (FUNNEL_UNRECONCILED,
    "a->b drops d, bucket name counts n"). Seven attempts: executed, unauthorized, 2 index misses, a cross-namespace
    candidate (compatibility), a stale tree version (generation), executed."""
    import attrs

    from kvexact.reference import reuse_gate as gate
    from kvexact.reference import telemetry as tm

    R = gate.ReuseRejection
    outcomes = [None, R.UNAUTHORIZED_PRINCIPAL, R.INDEX_MISS, R.INDEX_MISS, R.CROSS_NAMESPACE_CANDIDATE,
                R.STALE_TREE_VERSION, None]
    f = tm.funnel_from_outcomes(iter(outcomes))  # any iterable, read once
    T = tm.TelemetryRejection
    more = attrs.evolve(f, counts={**f.counts, "executed": 3})
    short = attrs.evolve(f, rejections={**f.rejections, "index_miss": 1})
    unexplained = attrs.evolve(f, counts={**f.counts, "executed": 1})
    lease = attrs.evolve(f, counts={**f.counts, **{s: 1 for s in tm.FUNNEL_STAGES[5:]}},
                         rejections={**f.rejections, "lease": 1})
    return [("funnel of 7 attempts", [f.counts[s] for s in tm.FUNNEL_STAGES], [7, 6, 4, 3, 2, 2, 2, 2, 2]),
            ("funnel stages", list(f.counts), list(tm.FUNNEL_STAGES)),
            ("rejections by bucket", dict(f.rejections),
             {"authorization": 1, "index_miss": 2, "compatibility": 1, "generation": 1, "lease": 0, "mapping": 0,
              "snapshot": 0}),
            ("empty funnel", dict(tm.funnel_from_outcomes([]).counts), {s: 0 for s in tm.FUNNEL_STAGES}),
            ("the funnel checked", _refusal(lambda: tm.check_funnel(f)), (None, "")),
            ("executed 3 over current_snapshot 2", _refusal(lambda: tm.check_funnel(more)),
             (T.FUNNEL_NOT_MONOTONE, "executed=3 > current_snapshot=2")),
            ("index_miss counting 1 of the drop 6 -> 4", _refusal(lambda: tm.check_funnel(short)),
             (T.FUNNEL_UNRECONCILED, "authorized->candidates drops 2, bucket index_miss counts 1")),
            ("executed 1 of current_snapshot 2 (no bucket)", _refusal(lambda: tm.check_funnel(unexplained)),
             (T.FUNNEL_UNRECONCILED, "current_snapshot->executed drops 1, bucket None counts 0")),
            ("a drop of 1 into leased with a lease bucket of 1", _refusal(lambda: tm.check_funnel(lease)), (None, ""))]


def telemetry_pool() -> Rows:
    """0x0CF's pool gauges on a 4-block pool (0 free, 1 and 2 live, 3 evictable): by state 1/1/2/0; Delta_ref =
    recorded - derived where derived counts each request map and lease entry; mismatched blocks are those whose
    recorded and derived counts differ; L_map = max(0, required - ready). A block in an unknown state, outside
    [0, N_pool), or states that do not sum to N_pool are refused (POOL_UNRECONCILED) naming the block or the sum."""
    import attrs

    from kvexact.reference import telemetry as tm

    snap = tm.PoolSnapshot(pool_blocks=4, block_states={0: "free", 1: "live", 2: "live", 3: "evictable"},
                           recorded_refcounts={1: 2, 2: 1}, request_maps={"r": (1, 2)}, leases={"l": (1,)},
                           required_frontier_tokens=10, ready_frontier_tokens=4)
    g = tm.reconcile_pool(snap)
    # block 1: derived 2, recorded 1; block 2: 1 and 1; block 3: derived 0, recorded 3
    skew = tm.reconcile_pool(attrs.evolve(snap, recorded_refcounts={1: 1, 2: 1, 3: 3}, ready_frontier_tokens=11))
    P = tm.TelemetryRejection.POOL_UNRECONCILED
    return [("gauges", (g.pool_blocks, dict(g.blocks_by_state), g.refcount_recorded, g.refcount_derived,
                        g.refcount_delta, g.refcount_mismatched_blocks, g.mapping_lag_tokens),
             (4, {"free": 1, "evictable": 1, "live": 2, "reserved_or_copying": 0}, 3, 3, 0, 0, 10 - 4)),
            ("skewed refs, ready past required: recorded, derived, delta, mismatched, lag",
             (skew.refcount_recorded, skew.refcount_derived, skew.refcount_delta, skew.refcount_mismatched_blocks,
              skew.mapping_lag_tokens), (5, 3, 5 - 3, 2, 0)),
            ("ready 9 of required 10: lag", tm.reconcile_pool(attrs.evolve(snap, ready_frontier_tokens=9))
             .mapping_lag_tokens, 1),
            ("state 'broken' refused", _refusal(lambda: tm.reconcile_pool(
                attrs.evolve(snap, block_states={**snap.block_states, 0: "broken"}))), (P, "block 0 in state 'broken'")),
            ("block 4 of 4 refused", _refusal(lambda: tm.reconcile_pool(
                attrs.evolve(snap, block_states={**snap.block_states, 4: "free"}))), (P, "block 4 in state 'free'")),
            ("block 5 of 4 refused", _refusal(lambda: tm.reconcile_pool(
                attrs.evolve(snap, block_states={**snap.block_states, 5: "free"}))), (P, "block 5 in state 'free'")),
            ("block -1 refused", _refusal(lambda: tm.reconcile_pool(
                attrs.evolve(snap, block_states={**snap.block_states, -1: "free"}))), (P, "block -1 in state 'free'")),
            ("states summing to 4 of 5 refused", _refusal(lambda: tm.reconcile_pool(attrs.evolve(snap, pool_blocks=5))),
             (P, "1 + 1 + 2 + 0 != 5")),
            ("block 3 missing: 3 of 4 refused", _refusal(lambda: tm.reconcile_pool(attrs.evolve(
                snap, block_states={0: "free", 1: "live", 2: "reserved_or_copying"}))), (P, "1 + 0 + 1 + 1 != 4"))]


def telemetry_alerts() -> Rows:
    """0x0CF's alerts, each a joint predicate over two samples (sorted by name): exhaustion (free = evictable = 0,
    failures rising), locked pressure (free = 0, evictable > 0, locked rejects rising), reference leak
    (recorded != derived for at least the grace), mapping stall (required > ready for more than the SLO budget),
    compatibility churn and stale-receipt race (candidates stable; compatible falling / generation rejects
    rising), security pressure (cross- or stale-namespace rejects rising). Budget 0.2 s, grace 30 s."""
    import attrs

    from kvexact.reference import telemetry as tm

    base = tm.TelemetrySample(at_s=0, free_blocks=3, evictable_blocks=2, allocation_failures=5,
                              locked_eviction_rejects=5, refcount_recorded=9, refcount_derived=9,
                              refcount_mismatch_age_s=0, required_frontier_tokens=32, ready_frontier_tokens=32,
                              map_wait_age_s=0, candidate_matches=9, compatible_matches=7, generation_rejects=1,
                              cross_namespace_rejects=4, stale_namespace_rejects=4)

    def alerts(**cur: Any) -> tuple[str, ...]:
        return tm.evaluate_alerts(base, attrs.evolve(base, at_s=10, **cur), 0.2, 30)

    return [("no change", alerts(), ()),
            ("exhaustion; failures equal; evictable 1", (alerts(free_blocks=0, evictable_blocks=0, allocation_failures=6),
                                                         alerts(free_blocks=0, evictable_blocks=0),
                                                         alerts(free_blocks=1, evictable_blocks=0, allocation_failures=6)),
             (("allocator_exhaustion",), (), ())),
            ("locked pressure; evictable 0; free 1; rejects equal",
             (alerts(free_blocks=0, evictable_blocks=1, locked_eviction_rejects=6),
              alerts(free_blocks=0, evictable_blocks=0, locked_eviction_rejects=6),
              alerts(free_blocks=1, evictable_blocks=1, locked_eviction_rejects=6),
              alerts(free_blocks=0, evictable_blocks=1)), (("locked_cache_pressure",), (), (), ())),
            ("leak at age 30, 29, recorded below derived at 31",
             (alerts(refcount_recorded=10, refcount_mismatch_age_s=30), alerts(refcount_recorded=10,
                                                                              refcount_mismatch_age_s=29),
              alerts(refcount_recorded=8, refcount_mismatch_age_s=31), alerts(refcount_mismatch_age_s=31)),
             (("reference_leak",), (), ("reference_leak",), ())),
            ("stall at wait 0.3, 0.2; required = ready",
             (alerts(ready_frontier_tokens=31, map_wait_age_s=0.3), alerts(ready_frontier_tokens=31, map_wait_age_s=0.2),
              alerts(map_wait_age_s=0.3)), (("mapping_stall",), (), ())),
            ("churn; candidates rising; compatible equal",
             (alerts(compatible_matches=6), alerts(candidate_matches=10, compatible_matches=6),
              alerts(compatible_matches=8)), (("compatibility_churn",), (), ())),
            ("race; candidates rising; rejects equal, falling",
             (alerts(generation_rejects=2), alerts(candidate_matches=10, generation_rejects=2),
              alerts(generation_rejects=0)), (("stale_receipt_race",), (), ())),
            ("security: cross rising, stale rising, both falling",
             (alerts(cross_namespace_rejects=5), alerts(stale_namespace_rejects=5),
              alerts(cross_namespace_rejects=3, stale_namespace_rejects=3)),
             (("security_boundary_pressure",), ("security_boundary_pressure",), ())),
            ("churn and race with 1000 candidates in both samples (equal ints, other objects)",
             tm.evaluate_alerts(attrs.evolve(base, candidate_matches=_int("1000")),
                                attrs.evolve(base, at_s=10, candidate_matches=_int("1000"), compatible_matches=6,
                                             generation_rejects=2), 0.2, 30),
             ("compatibility_churn", "stale_receipt_race")),
            ("all seven at once, sorted", alerts(
                free_blocks=0, evictable_blocks=0, allocation_failures=6, refcount_derived=8,
                refcount_mismatch_age_s=40, ready_frontier_tokens=0, map_wait_age_s=1, compatible_matches=6,
                generation_rejects=2, cross_namespace_rejects=5),
             ("allocator_exhaustion", "compatibility_churn", "mapping_stall", "reference_leak",
              "security_boundary_pressure", "stale_receipt_race"))]


def telemetry_hygiene() -> Rows:
    """0x0CE: metric and label names follow the Prometheus grammar (no leading ``__``); prompt/text, token and key
    label names, per-request label names, token lists (two or more integers), digests (16 or more hex digits,
    optionally ``sha256:``/``0x``), values over 64 characters or with whitespace are refused by name, the label
    named as ``metric{label=...}``. The 0.0.4 text format: HELP, TYPE, one line per sample, ``"`` ``\\`` and line
    feeds escaped in label values, integral values without a fraction, a line feed at the end."""
    from kvexact.reference import telemetry as tm

    T = tm.TelemetryRejection

    def check(labels: dict[str, str], name: str = "kvexact_x") -> tuple[Any, str]:
        return _refusal(lambda: tm.check_hygiene(tm.Metric(name, "counter", "h", ((labels, 1),))))

    where = "kvexact_x{%s=...}"
    rows: Rows = [("metric name 1bad, a:b_9", (check({}, "1bad"), check({}, "a:b_9")),
                   ((T.INVALID_METRIC_NAME, "1bad"), (None, "")))]
    cases = [("__x", "v", T.INVALID_METRIC_NAME), ("bad-name", "v", T.INVALID_METRIC_NAME),
             ("prompt", "v", T.RAW_PROMPT_IN_METRICS), ("text", "v", T.RAW_PROMPT_IN_METRICS),
             ("tokens", "v", T.TOKEN_LIST_IN_METRICS), ("token_ids", "v", T.TOKEN_LIST_IN_METRICS),
             ("cache_key", "v", T.UNSALTED_CACHE_KEY_IN_METRICS), ("block_hash", "v", T.UNSALTED_CACHE_KEY_IN_METRICS),
             ("key", "v", T.UNSALTED_CACHE_KEY_IN_METRICS), ("request_id", "v", T.HIGH_CARDINALITY_LABEL),
             ("session_id", "v", T.HIGH_CARDINALITY_LABEL), ("user_id", "v", T.HIGH_CARDINALITY_LABEL),
             ("trace_id", "v", T.HIGH_CARDINALITY_LABEL), ("lease_id", "v", T.HIGH_CARDINALITY_LABEL),
             ("block_id", "v", T.HIGH_CARDINALITY_LABEL), ("v", "1, 2", T.TOKEN_LIST_IN_METRICS),
             ("v", "(1 -2)", T.TOKEN_LIST_IN_METRICS), ("v", "[3,4]", T.TOKEN_LIST_IN_METRICS),
             ("v", "0123456789abcdef", T.UNSALTED_CACHE_KEY_IN_METRICS),
             ("v", "sha256:0123456789ABCDEF", T.UNSALTED_CACHE_KEY_IN_METRICS),
             ("v", "0x0123456789abcdef", T.UNSALTED_CACHE_KEY_IN_METRICS)]
    rows.append(("refused labels", [check({n: v}) for n, v, _r in cases], [(r, where % n) for n, v, r in cases]))
    accepted = [("_x", "v"), ("v", "12"), ("v", "0123456789abcde"), ("v", "z" * 64), ("v", "")]
    rows.append(("accepted labels", [check({n: v}) for n, v in accepted], [(None, "")] * len(accepted)))
    rows.append(("65 characters, a space, a tab refused",
                 [check({"v": v}) for v in ("z" * 65, "a b", "a\tb")],
                 [(T.RAW_PROMPT_IN_METRICS, f"{where % 'v'} ({n} chars)") for n in (65, 3, 3)]))
    rows.append(("the second label refused", check({"ok": "v", "request_id": "q"}),
                 (T.HIGH_CARDINALITY_LABEL, where % "request_id")))
    text = tm.to_prometheus([tm.Metric("m_total", "counter", "h", (({"a": 'q"x\\', "b": "y"}, 2.0),
                                                                   ({"a": "z"}, 1.5))),
                             tm.Metric("g", "gauge", "two words", (({}, 3),))])
    rows.append(("0.0.4 text of a counter with two samples and a gauge", text,
                 '# HELP m_total h\n# TYPE m_total counter\nm_total{a="q\\"x\\\\",b="y"} 2\nm_total{a="z"} 1.5\n'
                 "# HELP g two words\n# TYPE g gauge\ng 3\n"))
    rows.append(("a refused metric is not exported", _refusal(lambda: tm.to_prometheus(
        [tm.Metric("g", "gauge", "h", (({"prompt": "p"}, 1),))]))[0], T.RAW_PROMPT_IN_METRICS))
    return rows


def telemetry_counters() -> Rows:
    """0x0BL: a dispatch counter counts each decision once per (outcome, reason); counters only grow (a negative
    increment is refused as COUNTER_DECREASE, "name += value"); map latency is the version difference, summed, and
    its count; block sizes are gauges by group, exported allocator then kernel; ``metrics`` lists the block sizes,
    the dispatch counter, the ledger gauges and the counters (``_total`` unless ``_sum``/``_count``), by name."""
    from kvexact.reference import telemetry as tm
    from kvexact.reference.traversal import dispatch_kernel_block

    c = tm.GranularityCounters()
    for p in (_int("16"), 16, 64, 32, 12):  # 0x0AA: 8/16/32 instantiated; 64 splits into 32; 12 divides by none
        c.observe_dispatch(dispatch_kernel_block(p))
    c.observe_block_sizes(1, 64, 32)
    c.observe_block_sizes(0, 16, 16)
    c.observe_block_sizes(0, 12, 8)  # a gauge: the last value
    c.observe_prefix_hit(32, 17)
    c.observe_prefix_hit(_int("1000"), 0)
    c.observe_map_wait(3, 7)
    c.observe_map_wait(7, 7)
    refused = _refusal(lambda: c.observe_prefix_hit(1, -1))
    after = dict(c.totals)
    c.ledger["gauge_x"] = 5
    ms = c.metrics()
    return [("dispatch counts", dict(c.dispatch),
             {("selected", "allocator_block_instantiated"): 3, ("fallback", "split_allocator_block"): 1,
              ("rejected", "unsupported_kernel_block"): 1}),
            ("totals after hits (32 + 1000, 17 + 0) and map waits (4 + 0 over 2)", after,
             {"prefix_full_hit_tokens": 1033, "prefix_recomputed_tokens": 17, "map_latency_operations_sum": 4,
              "map_latency_operations_count": 2}),
            ("a negative increment refused", refused, (tm.TelemetryRejection.COUNTER_DECREASE,
                                                       "prefix_recomputed_tokens += -1")),
            ("block sizes", c.block_sizes, {0: (12, 8), 1: (64, 32)}),
            ("metric names", [m.name for m in ms],
             ["kvexact_block_size_tokens", "kvexact_kernel_dispatch_total", "kvexact_gauge_x",
              "kvexact_map_latency_operations_count", "kvexact_map_latency_operations_sum",
              "kvexact_prefix_full_hit_tokens_total", "kvexact_prefix_recomputed_tokens_total"]),
            ("block size samples", ms[0].samples,
             (({"group": "0", "kind": "allocator"}, 12), ({"group": "0", "kind": "kernel"}, 8),
              ({"group": "1", "kind": "allocator"}, 64), ({"group": "1", "kind": "kernel"}, 32))),
            ("dispatch samples (sorted)", ms[1].samples,
             (({"outcome": "fallback", "reason": "split_allocator_block"}, 1),
              ({"outcome": "rejected", "reason": "unsupported_kernel_block"}, 1),
              ({"outcome": "selected", "reason": "allocator_block_instantiated"}, 3))),
            ("kinds", [m.kind for m in ms], ["gauge", "counter", "gauge", "counter", "counter", "counter", "counter"])]


def telemetry_snapshot() -> Rows:
    """0x0CF on a live allocator (one group of 2-token blocks 10..14, renumbered densely 0..4): r = [1, 2, 3] in 10,
    11; u = [7, 8] in 12; r's block 0 cached; s forked from r; a read lease on 11; reader x of s; u's boundary append
    reserves 13; 14 free. Recorded refs 10: r, s, x = 3; 11: r, s, x, lease = 4; 12: u = 1 (8 = the 8 derived
    from the maps and the lease). The standard families: the funnel by stage, rejections by bucket, blocks by state,
    capacity, recorded, derived, delta, mismatched blocks, mapping lag."""
    from kvexact.reference import lifecycle as lc
    from kvexact.reference import telemetry as tm
    from kvexact.reference.allocator import Allocator, GroupConfig
    from kvexact.reference.handles import BlockHandle

    alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[10, 11, 12, 13, 14]])
    alloc.allocate("r", [1, 2, 3])
    alloc.allocate("u", [7, 8])
    lc.cache_block(alloc, "r", 0, "5")
    lc.fork(alloc, "r", "s")
    lc.retain_read(alloc, BlockHandle(0, 0, 11, 1))
    lc.reader_snapshot(alloc, "x", "s")
    t = alloc.begin("append", "u", ("new",), (9,))
    alloc.append_reserve(t, 0)
    snap = tm.allocator_pool_snapshot(alloc, 0)
    g = tm.reconcile_pool(snap)
    metrics = tm.standard_metrics(tm.funnel_from_outcomes([None, None]), g)
    return [("snapshot: blocks, states, recorded refs, maps, leases, frontiers",
             (snap.pool_blocks, dict(snap.block_states), dict(snap.recorded_refcounts), dict(snap.request_maps),
              dict(snap.leases), snap.required_frontier_tokens, snap.ready_frontier_tokens),
             (5, {0: "live", 1: "live", 2: "live", 3: "reserved_or_copying", 4: "free"}, {0: 3, 1: 4, 2: 1},
              {"request:r": (0, 1), "request:s": (0, 1), "request:u": (2,), "reader:x": (0, 1)}, {"lease:1": (1,)},
              0, 0)),
            ("gauges: by state, recorded, derived, delta, mismatched, lag",
             (dict(g.blocks_by_state), g.refcount_recorded, g.refcount_derived, g.refcount_delta,
              g.refcount_mismatched_blocks, g.mapping_lag_tokens),
             ({"free": 1, "evictable": 0, "live": 3, "reserved_or_copying": 1}, 8, 8, 0, 0, 0)),
            ("standard families: name, kind", [(m.name, m.kind) for m in metrics],
             [("kvexact_reuse_funnel_total", "counter"), ("kvexact_reuse_rejections_total", "counter"),
              ("kvexact_pool_blocks", "gauge"), ("kvexact_pool_capacity_blocks", "gauge"),
              ("kvexact_refcount_recorded", "gauge"), ("kvexact_refcount_derived", "gauge"),
              ("kvexact_refcount_delta", "gauge"), ("kvexact_refcount_mismatched_blocks", "gauge"),
              ("kvexact_mapping_lag_tokens", "gauge")]),
            ("standard samples", [m.samples for m in metrics],
             [tuple(({"stage": st}, 2) for st in tm.FUNNEL_STAGES), tuple(({"bucket": b}, 0) for b in tm.BUCKETS),
              (({"state": "free"}, 1), ({"state": "evictable"}, 0), ({"state": "live"}, 3),
               ({"state": "reserved_or_copying"}, 1)), (({}, 5),), (({}, 8),), (({}, 8),), (({}, 0),), (({}, 0),),
              (({}, 0),)])]


def ledger_tail_valid_slots() -> Rows:
    """0x0D: a request view's tail slots that hold rows another view materialized are not waste: in the worked
    fixture A (33 rows) ends in block 102 holding 1 row (33 - 32 visible: 0), B (25) ends in block 101 holding 16
    rows of which B sees 25 - 16 = 9 (16 - 9 = 7), C (16) ends in the full block 100 (0): 7 slots."""
    import attrs

    from kvexact.reference.labs.ledgers import worked_fixture
    from kvexact.reference.ledgers import RequestView, compute_ledger

    f = worked_fixture()
    led = compute_ledger(f)
    # D: a 20-row view of A's blocks 100, 101 (sees 20 - 16 = 4 of 101's 16 rows: 12 more)
    more = attrs.evolve(f, requests=(*f.requests, RequestView("D", 20, 32, (100, 101))))
    return [("request-view tail slots holding valid rows", led.request_view_tail_valid_slots, 16 - (25 - 16)),
            ("with D (20 rows over 100, 101)", compute_ledger(more).request_view_tail_valid_slots,
             7 + (16 - (20 - 16)))]


def ledger_validation() -> Rows:
    """0x0D's fixture rules, each refused by name with the first failing check (detail naming the value): positive
    P and B_row (bools refused), non-negative int record sizes, unique request ids, rows >= 0, reservation >= rows,
    exactly ceil(rows / P) distinct pool blocks a table, valid rows in 1..P and >= the rows a view sees, no valid
    count for an unreachable block, free queue = pool - reachable without repeats, cached hashes on full blocks.
    ``reconcile`` names a wrong claim by its figure. On the worked fixture (A 33 over 100-102, B 25 over 100-101, C 16
    over 100; valid 16/16/1; pool 100-107; free 103-107; cached 100, 101)."""
    import attrs

    from kvexact.reference.labs.ledgers import worked_fixture
    from kvexact.reference.ledgers import (
        LedgerFixture,
        LedgerRejection,
        RequestView,
        compute_ledger,
        reconcile,
    )

    L = LedgerRejection
    f = worked_fixture()
    a, b, c = f.requests

    def valid(**blocks: int) -> Any:
        return attrs.evolve(f, valid_rows_by_block=tuple({**dict(f.valid_rows_by_block),
                                                          **{int(k[1:]): v for k, v in blocks.items()}}.items()))

    def reqs(*views: Any) -> Any:
        return attrs.evolve(f, requests=views)

    rows_of = [
        (attrs.evolve(f, block_tokens=0), (L.NON_POSITIVE_BLOCK_SIZE, "block_tokens=0")),
        (attrs.evolve(f, block_tokens=True), (L.NON_POSITIVE_BLOCK_SIZE, "block_tokens=True")),
        (attrs.evolve(f, row_bytes=-1), (L.NON_POSITIVE_ROW_BYTES, "row_bytes=-1")),
        (attrs.evolve(f, record_sizes=attrs.evolve(f.record_sizes, fixed_bytes=-1)),
         (L.NEGATIVE_RECORD_SIZE, "fixed_bytes=-1")),
        (attrs.evolve(f, record_sizes=attrs.evolve(f.record_sizes, map_entry_bytes=1.5)),
         (L.NEGATIVE_RECORD_SIZE, "map_entry_bytes=1.5")),
        (attrs.evolve(f, record_sizes=attrs.evolve(f.record_sizes, hash_entry_bytes=0)), (None, "")),
        (reqs(a, b, c, RequestView("A", 0, 0, ())), (L.DUPLICATE_REQUEST, "request ids ['A', 'B', 'C', 'A']")),
        (reqs(a, b, RequestView("C", -1, 32, ())), (L.NEGATIVE_LENGTH, "request C: rows_tokens=-1")),
        (reqs(a, b, RequestView("C", 16, 15, (100,))), (L.RESERVATION_BELOW_ROWS, "request C: reserved 15 < rows 16")),
        (reqs(a, b, RequestView("C", 16, 16, (100,))), (None, "")),
        (reqs(a, b, RequestView("C", 17, 32, (100,))), (L.TABLE_TOO_SHORT, "request C: 1 blocks, needs 2")),
        (reqs(a, b, RequestView("C", 16, 32, (100, 101))), (L.TABLE_TOO_LONG, "request C: 2 blocks, needs 1")),
        (reqs(a, b, RequestView("C", 0, 32, ())), (None, "")),
        (reqs(a, RequestView("B", 25, 48, (100, 100)), c), (L.DUPLICATE_BLOCK_IN_TABLE, "request B: (100, 100)")),
        (reqs(a, b, RequestView("C", 16, 32, (99,))), (L.BLOCK_NOT_IN_POOL, "request C: block 99")),
        (reqs(a, b, RequestView("C", 16, 32, (103,))), (L.MISSING_VALID_ROWS, "request C: block 103")),
        (valid(b102=0), (L.VALID_ROWS_OUT_OF_RANGE, "block 102: valid_rows=0")),
        (valid(b102=17), (L.VALID_ROWS_OUT_OF_RANGE, "block 102: valid_rows=17")),
        (valid(b102=16), (None, "")),
        (valid(b101=15), (L.VISIBLE_ROW_NOT_MATERIALIZED, "request A sees 16 rows of block 101, which has 15 valid")),
        (valid(b103=5), (L.UNREACHABLE_BLOCK_COUNTED, "blocks [103]")),
        (attrs.evolve(f, free_queue_block_ids=(103, 104, 105, 106, 107, 107)),
         (L.FREE_QUEUE_MISMATCH, "free queue [103, 104, 105, 106, 107, 107], expected [103, 104, 105, 106, 107]")),
        (attrs.evolve(f, free_queue_block_ids=(103, 104, 105, 106, 107, 102)),
         (L.FREE_QUEUE_MISMATCH, "free queue [102, 103, 104, 105, 106, 107], expected [103, 104, 105, 106, 107]")),
        (attrs.evolve(f, cached_hash_block_ids=(100, 102)), (L.CACHED_HASH_NOT_FULL, "block 102")),
        (attrs.evolve(f, cached_hash_block_ids=(103,)), (L.CACHED_HASH_NOT_FULL, "block 103")),
    ]
    big = _int("300")  # a block of 300 tokens, its count built at run time (not the literal's object)
    large = LedgerFixture(row_bytes=1, block_tokens=big, requests=(RequestView("A", _int("300"), 300, (1,)),),
                          valid_rows_by_block=((1, _int("300")),), pool_block_ids=(1, 2), cached_hash_block_ids=(1,),
                          free_queue_block_ids=(2,), record_sizes=f.record_sizes)
    rows_of.append((large, (None, "")))
    # P = 3 (not a power of two): A's 5 rows see 5 - 3 = 2 rows of its second block, which holds 2
    odd = LedgerFixture(row_bytes=1, block_tokens=3, requests=(RequestView("A", 5, 6, (1, 2)),),
                        valid_rows_by_block=((1, 3), (2, 2)), pool_block_ids=(1, 2, 3), cached_hash_block_ids=(1,),
                        free_queue_block_ids=(3,), record_sizes=f.record_sizes)
    rows_of.append((odd, (None, "")))
    out: Rows = [("fixture rules", [_refusal(lambda x=x: compute_ledger(x)) for x, _e in rows_of],
                  [e for _x, e in rows_of])]
    claims = [({"unique_blocks": 6}, (L.UNIQUE_BLOCKS_MISCOUNTED, "unique_blocks: claimed 6, computed 3")),
              ({"unique_tail_slots": 48 - 33 + 1}, (L.TAIL_MISATTRIBUTED, "unique_tail_slots: claimed 16, computed 15")),
              ({"metadata_bytes": 481}, (L.METADATA_MISMATCH, "metadata_bytes: claimed 481, computed 482")),
              ({"logical_rows_tokens": 75}, (L.LEDGER_FIGURE_MISMATCH, "logical_rows_tokens: claimed 75, computed 74")),
              ({"unique_blocks": 3, "logical_rows_tokens": 74}, (None, ""))]
    out.append(("claims", [_refusal(lambda cl=cl: reconcile(f, cl)) for cl, _e in claims], [e for _c, e in claims]))
    try:
        reconcile(f, {"no_such_figure": 1})
        unknown = ""
    except KeyError as exc:
        unknown = str(exc)
    out.append(("an unknown claimed figure", unknown, "\"unknown ledger figure 'no_such_figure'\""))
    return out


def ledger_figures() -> Rows:
    """0x0D's worked ledger, every figure (B_row 64 KiB, P 16): rows 33 + 25 + 16 = 74 logical, 64 + 48 + 32 = 144
    reserved, 6 refs = 96 slots, tails 96 - 74 = 22 slots, 7 of them valid; 3 unique blocks, 33 materialized rows,
    48 slots, tail 15; dedup 74 - 33 = 41 rows; sharing avoided 6 - 3 blocks; pool 8 blocks, idle 5; metadata 482.
    0x09B's cost vector of the same three requests at P 16 and 8 (128 slots): unique ceil(33 / P), refs sum of
    ceil(T / P), hashes floor(33 / P), free pool - unique, hits P floor(T / P) and P floor((T - 1) / P) over the
    consumers 25 and 16, recompute 41 - capped, partial hits (T - 1), metadata from 0x0D's record sizes."""
    from kvexact.reference.labs.ledgers import nested_prefix_cost, worked_fixture
    from kvexact.reference.ledgers import compute_ledger

    R = 64 * KIB
    led = compute_ledger(worked_fixture())
    fields = ("row_bytes", "block_bytes", "logical_rows_tokens", "logical_bytes", "reserved_rows_tokens",
              "reserved_bytes", "rect_slack_bytes", "ref_blocks", "request_view_slots", "paged_ref_bytes",
              "request_view_tail_slots", "request_view_tail_bytes", "request_view_tail_valid_slots", "unique_blocks",
              "unique_materialized_rows", "unique_materialized_bytes", "unique_slots", "unique_capacity_bytes",
              "unique_tail_slots", "unique_tail_bytes", "dedup_payload_bytes", "sharing_avoided_bytes", "pool_blocks",
              "pool_bytes", "live_unique_bytes", "pool_idle_bytes", "metadata_bytes")
    expected = (R, 16 * R, 74, 74 * R, 144, 144 * R, 70 * R, 6, 96, 96 * R, 22, 22 * R, 7, 3, 33, 33 * R, 48, 48 * R,
                15, 15 * R, 41 * R, 48 * R, 8, 8 * MIB, 3 * MIB, 5 * MIB, 482)
    cost_fields = ("block_tokens", "request_view_tail_bytes", "unique_blocks", "unique_tail_bytes", "map_entries",
                   "pool_descriptors", "cached_hashes", "free_blocks", "metadata_bytes", "full_hit_tokens",
                   "full_hit_tokens_capped", "recompute_tokens_capped", "partial_hit_tokens_capped")
    # P 8: tails 7 + 7 + 0; metadata 4 x 11 + 32 x 16 + 24 x 4 + 2 x 3 + 4 x 11 + 128 = 830
    costs = {16: (16, 22 * R, 3, 15 * R, 6, 8, 2, 5, 482, 16 + 16, 16 + 0, 41 - 16, 24 + 15),
             8: (8, 14 * R, 5, 7 * R, 11, 16, 4, 11, 830, 24 + 16, 24 + 8, 41 - 32, 24 + 15)}
    return [("worked ledger: " + ", ".join(fields), tuple(_shown(getattr(led, n)) for n in fields), expected),
            *((f"0x09B at P {p}: " + ", ".join(cost_fields),
               tuple(_shown(getattr(nested_prefix_cost(p), n)) for n in cost_fields), want) for p, want in costs.items())]


def ledger_costs() -> Rows:
    """0x02F: F_ext = 1 - largest / total (not applicable for a full arena; a negative or non-int extent refused);
    interchangeable blocks fit when ceil(bytes / block) <= free; 0x09C: a COW after s shared tokens copies
    r = s mod P rows (traffic 2 r B_row, a new block of P B_row, amplification P / r; r = 0 at a boundary: not
    applicable), a COW append's traffic is 2 r B_row + B_row (2r + 1 rows); 0x09B refuses an empty prompt and a pool
    that is not whole blocks. B_row = 64 KiB."""
    from fractions import Fraction

    from kvexact.reference.labs.ledgers import WORKED_RECORD_SIZES
    from kvexact.reference.ledgers import (
        NOT_APPLICABLE,
        LedgerRejection,
        block_pool_fit,
        block_size_cost,
        cow_cost,
        external_fragmentation,
    )

    L = LedgerRejection
    r4, r0 = cow_cost(16, 20), cow_cost(16, 32)
    return [("F_ext of [], [0, 0], [3, 1], [5]", [external_fragmentation(e) for e in ([], [0, 0], [3, 1], [5])],
             [NOT_APPLICABLE, NOT_APPLICABLE, Fraction(1, 4), Fraction(0)]),
            ("extents -1, 1.0 refused", [_refusal(lambda e=e: external_fragmentation([4, e])) for e in (-1, 1.0)],
             [(L.NEGATIVE_SIZE, "free extent -1"), (L.NEGATIVE_SIZE, "free extent 1.0")]),
            ("block fit: 128 B in 2 of 64, 129 B in 2, 129 B in 3, 0 B in 0",
             [block_pool_fit(2, 128, 64), block_pool_fit(2, 129, 64), block_pool_fit(3, 129, 64),
              block_pool_fit(0, 0, 64)], [True, False, True, True]),
            ("block bytes 0 refused", _refusal(lambda: block_pool_fit(1, 1, 0)),
             (L.NON_POSITIVE_BLOCK_SIZE, "block_bytes=0")),
            ("COW after 20 of P 16: rows, traffic, destination, amplification, payload, append traffic, x",
             (r4.tail_rows, r4.copy_traffic_bytes, r4.destination_bytes, r4.capacity_amplification,
              r4.copy_payload_bytes, r4.traffic_bytes, r4.amplification),
             (4, 2 * 4 * 64 * KIB, MIB, 4, 4 * 64 * KIB, (2 * 4 + 1) * 64 * KIB, 2 * 4 + 1)),
            ("COW after 32 of P 16: rows, traffic, amplification, append traffic",
             (r0.tail_rows, r0.copy_traffic_bytes, r0.capacity_amplification, r0.traffic_bytes),
             (0, 0, NOT_APPLICABLE, 64 * KIB)),
            ("COW refusals: shared -1, P 0", [_refusal(lambda: cow_cost(16, -1)), _refusal(lambda: cow_cost(0))],
             [(L.NEGATIVE_LENGTH, "shared_tokens=-1"), (L.NON_POSITIVE_BLOCK_SIZE, "block_tokens=0")]),
            ("0x09B refusals: a 0-token prompt, 100 slots at P 16",
             [_refusal(lambda: block_size_cost(16, [33, 0], 64, 128, WORKED_RECORD_SIZES)),
              _refusal(lambda: block_size_cost(16, [33], 64, 100, WORKED_RECORD_SIZES))],
             [(L.NEGATIVE_LENGTH, "request length 0 (a prompt needs >= 1 row)"),
              (L.POOL_NOT_WHOLE_BLOCKS, "100 slots, P=16")])]


def lifecycle_receipts() -> Rows:
    """0x05E: truncate keeps ceil(keep / P) blocks per group, drops the suffix (released tail first) and publishes
    table version + 1; keep must be in [0, context) (TRUNCATE_NOT_SHORTER, "id: keep k of n"); only the last logical
    block may be dropped (INTERIOR_BLOCK_REMOVAL / BAD_LOGICAL_BLOCK, "id: block j of n"); release and cancel drop
    every strong reference, group by group, with no table version; 0x04F: compensating an append truncates its row
    and reports the truncate's version, compensating an allocation cancels it; only a PUBLISHED receipt can be
    compensated (NOTHING_TO_COMPENSATE, "txn: outcome")."""
    import attrs

    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import AllocRejection
    from kvexact.reference.handles import BlockHandle
    from kvexact.reference.labs import allocator as fx
    from kvexact.reference.pool import PoolRejection

    A = AllocRejection

    def lc_cow(a: Any, tail: Any) -> Any:
        return lifecycle.cow_append(a, "D", 900, 1, 1, expected_tail=tail)

    alloc = fx.fixture_0x05b()  # A at context 33, version 5: 1000@3 1001@5 1002@9 / 2000@7 2001@8 2002@12
    appended = alloc.append("A", 133, expected_generation=1, expected_table_version=5)  # in place: version 6
    refused = [_refusal(lambda k=k: lifecycle.truncate(alloc, "A", k)) for k in (34, 35, -1)]
    dropped = [_refusal(lambda j=j: lifecycle.drop_logical_block(alloc, "A", j)) for j in (0, 3, -1)]
    # the receipt's outcome and operation as a caller might rebuild them (equal strings, other objects)
    rebuilt = attrs.evolve(appended, outcome="".join(("PUB", "LISHED")), operation="".join(("app", "end")))
    comp = lifecycle.compensate(alloc, rebuilt)  # truncate(A, 33): no block leaves, version 7
    t = lifecycle.truncate(alloc, "A", 17, expected_generation=1, expected_table_version=7)  # 2 blocks kept
    rec = alloc.request("A")
    h = [[BlockHandle(g, g, b, n) for b, n in blocks] for g, blocks in
         ((0, ((1000, 3), (1001, 5), (1002, 9))), (1, ((2000, 7), (2001, 8), (2002, 12))))]
    out: Rows = [
        ("truncate to 34, 35, -1 of 34 refused", refused,
         [(A.TRUNCATE_NOT_SHORTER, f"A: keep {k} of 34") for k in (34, 35, -1)]),
        ("drop logical block 0, 3, -1 of 3 refused", dropped,
         [(A.INTERIOR_BLOCK_REMOVAL, "A: block 0 of 3"), (A.BAD_LOGICAL_BLOCK, "A: block 3 of 3"),
          (A.BAD_LOGICAL_BLOCK, "A: block -1 of 3")]),
        ("compensation of the append: id, operation, outcome, version, deltas, rows, capacity",
         (comp.transaction_id, comp.operation, comp.outcome, comp.table_version_after, comp.refcount_deltas,
          comp.useful_new_rows, comp.new_capacity_bytes), (f"{appended.transaction_id}-compensation",
                                                           "compensate-append", "COMPENSATED", 7, (), 0, 0)),
        ("truncate(A, 17): reason, dropped, freed, evictable, version after, record",
         (t.reason, t.dropped_handles, t.freed_handles, t.evictable_handles, t.table_version_after,
          rec.table_version, rec.context_tokens, [len(x) for x in rec.tables]),
         ("truncate", (h[0][2], h[1][2]), (h[1][2], h[0][2]), (), 8, 8, 17, [2, 2])),
        ("truncate: epoch after, digests", (t.allocator_epoch_after == alloc.epoch,
                                            t.predecessor_digest != t.successor_digest,
                                            t.successor_digest == alloc.digest()), (True, True, True))]
    empty = fx.fixture_0x05b()
    z = lifecycle.truncate(empty, "A", 0)  # keep 0 is allowed: every block leaves, version 5 + 1
    out.append(("truncate(A, 0) of the fixture: dropped, version after, tables",
                (z.dropped_handles, z.table_version_after, empty.request("A").tables), ((*h[0], *h[1]), 6, ((), ()))))
    lifecycle.cache_block(alloc, "A", 0, "A/0")
    r = lifecycle.cancel(alloc, "A", expected_generation=1)
    out.append(("cancel(A): reason, dropped, freed, evictable, version",
                (r.reason, r.dropped_handles, r.freed_handles, r.evictable_handles, r.table_version_after),
                ("cancel", (h[0][0], h[0][1], h[1][0], h[1][1]), (h[1][1], h[0][1]), (h[1][0], h[0][0]), None)))
    f = alloc.allocate("F", list(range(16)))  # 1003 and 2003 head the free queues (free since the fixture)
    fc = lifecycle.compensate(alloc, attrs.evolve(f, operation="".join(("allo", "cate"))))
    out.append(("compensation of F's allocation: operation, deltas, version, ended",
                (fc.operation, [(d.block_id, n) for d, n in fc.refcount_deltas], fc.table_version_after,
                 "F" in alloc.requests), ("compensate-allocate", [(1003, -1), (2003, -1)], None, False)))
    forked = fx.fixture_0x05b_forked()  # D (version 1) shares A's tails 1002@9 and 2002@12
    tails = [(h[0][1], h[1][2]), (BlockHandle(0, 0, 1002, 8), h[1][2]), (h[0][2], h[1][1])]
    out.append(("0x05C step 2: COW append expecting tails 1001@5, 1002@8, 2001@8 refused",
                [_refusal(lambda x=x: lc_cow(forked, x)) for x in tails],
                [(A.UNEXPECTED_SOURCE_HANDLE, "group 0: p0/g0/1001@5"),
                 (PoolRejection.STALE_BLOCK_GENERATION, "p0/g0/1002@8 but block 1002 is at generation 9"),
                 (A.UNEXPECTED_SOURCE_HANDLE, "group 1: p1/g1/2001@8")]))
    cow = lc_cow(forked, (h[0][2], h[1][2]))
    out.append(("COW append expecting the current tails: outcome, version after", (cow.outcome, cow.table_version_after),
                ("PUBLISHED", 2)))
    fx_alloc = fx.fixture_0x05b_forked()
    fx_alloc.fault_after.add(("cow_reserve", 0))
    rb = fx_alloc.append("D", 900, expected_generation=1, expected_table_version=fx_alloc.request("D").table_version)
    out.append(("compensating a rolled-back receipt refused", _refusal(lambda: lifecycle.compensate(fx_alloc, rb)),
                (A.NOTHING_TO_COMPENSATE, f"{rb.transaction_id}: ROLLED_BACK")))
    return out


def lifecycle_trace_params() -> Rows:
    """spec/KVAllocation.tla numbers a request's blocks 1..MaxBlocks (``CacheBlock(r, j)``, j in 1..MaxBlocks), so
    the trace record of caching logical block b (0-based) carries j = b + 1; ``Truncate(r, n)`` carries the kept
    length, ``PrefixHit(r, k)`` the number of cached bundles mapped, ``Release(r)`` the request; the allocation
    (not a KVAllocation action) is recorded as outside the spec. One group of 2-token blocks, 4 blocks."""
    from kvexact.reference import lifecycle as lc
    from kvexact.reference.adapters import TraceRecorder
    from kvexact.reference.allocator import Allocator, GroupConfig
    from kvexact.spec.checker.values import ModelValue

    alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3, 4]])
    rec = TraceRecorder("KVAllocation", requests=["r", "s"]).attach(alloc)
    alloc.allocate("r", [1, 2, 3, 4])
    lc.cache_block(alloc, "r", 1, "7")
    lc.cache_block(alloc, "r", 0, "5")
    lc.truncate(alloc, "r", 3)
    lc.release(alloc, "r")
    lc.prefix_hit(alloc, "s", ["5"])
    r, s = ModelValue("r"), ModelValue("s")
    return [("actions, params, in spec", [(x["action"], x["params"], x.get("in_spec", True)) for x in rec.records],
             [("allocate", {"r": r, "n": 4}, False), ("cache_block", {"r": r, "j": 2}, True),
              ("cache_block", {"r": r, "j": 1}, True), ("truncate", {"r": r, "n": 3}, True),
              ("release", {"r": r}, True), ("prefix_hit", {"r": s, "k": 1}, True)])]


def lifecycle_mappings() -> Rows:
    """0x05A-0x05F on one group of 2-token blocks 1..4 (pool 0): fork maps every parent block into a child at
    version 1 and request generation ended + 1 (onto itself: FORK_ONTO_SELF; onto a live id: DUPLICATE_REQUEST);
    only a full block of the table gets a weak identity (CACHE_PARTIAL_BLOCK, BAD_LOGICAL_BLOCK, a keyed block:
    CACHE_BLOCK_ALREADY_KEYED, a key on another block: CACHE_KEY_CONFLICT); a prefix hit maps the bundles of its keys
    (context = keys x P, version 1), refusing a live id, no keys (EMPTY_APPEND) and a missing key; evict drops the
    identity and keeps the mapping; read leases are numbered from 1 and take a reference; a delayed writer's stale,
    retired or published handle is refused; a reader's snapshot leases every block once (READER_BUSY, LEASE_NOT_HELD)."""
    from kvexact.reference import lifecycle as lc
    from kvexact.reference.allocator import Allocator, AllocRejection, GroupConfig
    from kvexact.reference.handles import BlockHandle
    from kvexact.reference.pool import PoolRejection

    A, P = AllocRejection, PoolRejection
    alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3, 4]])
    alloc.allocate("r", [1, 2, 3])  # blocks 1 (2 rows) and 2 (1 row), generation 1
    h1, h2 = BlockHandle(0, 0, 1, 1), BlockHandle(0, 0, 2, 1)
    refs = alloc.pools[0].refcount
    out: Rows = [("fork onto itself", _refusal(lambda: lc.fork(alloc, "r", "r")), (A.FORK_ONTO_SELF, "r"))]
    child = lc.fork(alloc, "r", "s")
    out.append(("fork r -> s: generation, version, context, tables, refs of 1 and 2",
                (child.request_generation, child.table_version, child.context_tokens, child.tables, refs(1), refs(2)),
                (1, 1, 3, ((h1, h2),), 2, 2)))
    out.append(("fork onto live s", _refusal(lambda: lc.fork(alloc, "r", "s")), (A.DUPLICATE_REQUEST, "request 's'")))
    lc.release(alloc, "s")
    again = lc.fork(alloc, "r", "s")
    out.append(("s forked again after its release: generation, refs of 1", (again.request_generation, refs(1)), (2, 2)))
    out.append(("cache block 1 (1 of 2 rows), block 2 of 2",
                [_refusal(lambda: lc.cache_block(alloc, "r", 1, "6")), _refusal(lambda: lc.cache_block(alloc, "r", 2, "6"))],
                [(A.CACHE_PARTIAL_BLOCK, "r block 1 group 0: 1 of 2 rows"), (A.BAD_LOGICAL_BLOCK, "r: block 2")]))
    keyed = lc.cache_block(alloc, "r", 0, "5")
    alloc.allocate("q", [7, 8])  # block 3
    out.append(("cache block 0 as 5; again as 6; q's block 3 as 5", (
        keyed, _refusal(lambda: lc.cache_block(alloc, "r", 0, "6")), _refusal(lambda: lc.cache_block(alloc, "q", 0, "5"))),
        ((h1,), (A.CACHE_BLOCK_ALREADY_KEYED, "p0/g0/1@1 carries '5'"), (A.CACHE_KEY_CONFLICT, "'5' already names p0/g0/1@1"))))
    out.append(("lookups of 5 and 9", (lc.lookup_all_groups(alloc, "5"), lc.lookup_all_groups(alloc, "9")), ((h1,), None)))
    out.append(("prefix hits: live r, no keys, missing key 9",
                [_refusal(lambda: lc.prefix_hit(alloc, "r", ["5"])), _refusal(lambda: lc.prefix_hit(alloc, "t", [])),
                 _refusal(lambda: lc.prefix_hit(alloc, "t", ["9"]))],
                [(A.DUPLICATE_REQUEST, "request 'r'"), (A.EMPTY_APPEND, "prefix hit of t without keys"),
                 (A.CACHE_IDENTITY_MISSING, "'9'")]))
    hit = lc.prefix_hit(alloc, "t", ["5"])
    out.append(("prefix hit of t on 5: generation, version, context, tables, refs of 1",
                (hit.request_generation, hit.table_version, hit.context_tokens, hit.tables, refs(1)), (1, 1, 2, ((h1,),), 3)))
    out.append(("evict 9", _refusal(lambda: lc.evict(alloc, "9")), (A.CACHE_IDENTITY_MISSING, "'9'")))
    evicted = lc.evict(alloc, "5")
    out.append(("evict 5: handles, lookup, refs of 1, key", (evicted, lc.lookup_all_groups(alloc, "5"), refs(1),
                                                            alloc.pools[0].blocks[1].cache_key), ((h1,), None, 3, None)))
    leases = [lc.retain_read(alloc, h1), lc.retain_read(alloc, h2)]
    out.append(("read leases of 1 and 2: ids, refs", (leases, refs(1), refs(2)), ([1, 2], 4, 3)))
    out.append(("leases refused: group 5, free block 4, unknown lease 9",
                [_refusal(lambda: lc.retain_read(alloc, BlockHandle(0, 5, 1, 1))),
                 _refusal(lambda: lc.retain_read(alloc, BlockHandle(0, 0, 4, 0))),
                 _refusal(lambda: lc.release_lease(alloc, 9))],
                [(P.FOREIGN_POOL_HANDLE, "p0/g5/1@1"), (A.CACHE_IDENTITY_MISSING, "p0/g0/4@0 is not mapped by any request"),
                 (A.LEASE_NOT_HELD, "lease 9")]))
    lc.release_lease(alloc, 1)
    out.append(("lease 1 released: refs of 1", refs(1), 3))
    out.append(("delayed writes: generation 0 of 1, free 4, published 1, group 3",
                [_refusal(lambda h=h: lc.delayed_write(alloc, h, 0, 9)) for h in
                 (BlockHandle(0, 0, 1, 0), BlockHandle(0, 0, 4, 0), h1, BlockHandle(0, 3, 1, 1))],
                [(P.STALE_BLOCK_GENERATION, "p0/g0/1@0 but block 1 is at generation 1"), (P.HANDLE_NOT_OWNED, "p0/g0/4@0"),
                 (A.WRONG_STEP_FOR_PATH, "p0/g0/1@1 is published; write through append"), (P.FOREIGN_POOL_HANDLE, "p0/g3/1@1")]))
    snap = lc.reader_snapshot(alloc, "x", "r")
    during = (snap.tables, refs(1), refs(2))
    out.append(("reader x of r: tables, refs of 1 and 2; x again; release of y", (
        during, _refusal(lambda: lc.reader_snapshot(alloc, "x", "r")), _refusal(lambda: lc.reader_release(alloc, "y"))),
        ((((h1, h2),), 4, 4), (A.READER_BUSY, "reader 'x'"), (A.LEASE_NOT_HELD, "reader 'y'"))))
    lc.reader_release(alloc, "x")
    out.append(("reader x released: refs of 1 and 2", (refs(1), refs(2)), (3, 3)))
    return out


def allocator_receipts() -> Rows:
    """0x04D/0x05A receipts on 0x05B's two groups (P = 16; rows 48 and 16 KiB: 64 KiB a bundle row, 1 MiB a
    bundle): an in-place append publishes 1 row and no block (append write 64 KiB, traffic 64 KiB, version 5 + 1);
    an allocation of 16 tokens takes 1003@12 and 2003@6 (+1 each: 1 MiB of capacity, 16 rows written, 1 MiB,
    version 1); a rolled-back COW append commits nothing: every count, byte and list is zero or empty, no version,
    and the digest is unchanged."""
    from kvexact.reference.handles import BlockHandle
    from kvexact.reference.labs import allocator as fx

    alloc = fx.fixture_0x05b()
    a = alloc.append("A", 133, expected_generation=1, expected_table_version=5)
    f = alloc.allocate("F", list(range(16)))
    new = (BlockHandle(0, 0, 1003, 12), BlockHandle(1, 1, 2003, 6))
    forked = fx.fixture_0x05b_forked()
    epoch = forked.epoch
    forked.fault_after.add(("cow_reserve", 0))
    rb = forked.append("D", 900, expected_generation=1, expected_table_version=forked.request("D").table_version)
    return [("in-place append: paths, rows, blocks, copied, payload, deltas, capacity, write, traffic, version",
             (a.operation, a.outcome, a.paths, a.useful_new_rows, a.new_physical_blocks, a.copied_rows,
              a.copy_payload_bytes, a.refcount_deltas, a.new_capacity_bytes, a.append_write_bytes,
              a.copy_traffic_bytes, a.table_version_after, a.copies, a.rejection),
             ("append", "PUBLISHED", ("unique", "unique"), 1, 0, 0, 0, (), 0, 64 * KIB, 64 * KIB, 6, (), None)),
            ("in-place append: published tails", (a.published_tables[0][-1], a.published_tables[1][-1]),
             (BlockHandle(0, 0, 1002, 9), BlockHandle(1, 1, 2002, 12))),
            ("allocate(F, 16): paths, rows, blocks, deltas, capacity, write, version, tables",
             (f.paths, f.useful_new_rows, f.new_physical_blocks, f.refcount_deltas, f.new_capacity_bytes,
              f.append_write_bytes, f.table_version_after, f.published_tables, f.copy_traffic_bytes),
             (("alloc", "alloc"), 16, 2, ((new[0], 1), (new[1], 1)), MIB, 16 * 64 * KIB, 1, ((new[0],), (new[1],)),
              MIB)),
            ("rolled-back COW append: every field",
             (rb.outcome, rb.request_id, rb.operation, rb.useful_new_rows, rb.new_physical_blocks, rb.copied_rows,
              rb.copy_payload_bytes, rb.refcount_deltas, rb.paths, rb.new_capacity_bytes, rb.append_write_bytes,
              rb.table_version_after, rb.published_tables, rb.rejection, rb.copies, rb.copy_traffic_bytes,
              rb.allocator_epoch_after, rb.predecessor_digest == rb.successor_digest),
             ("ROLLED_BACK", "D", "append", 0, 0, 0, 0, (), (), 0, 0, None, (), None, (), 0, epoch, True))]


def allocator_self_check() -> Rows:
    """allocator.py's self check recomputes every invariant and names the first one broken (one table per group,
    ceil(context / P) blocks, current handles of the group's pool, published blocks holding every visible row,
    groups agreeing on the rows, readers and leases on current handles, stored = reachable refcounts, consistent
    queue maps, each block exactly one of queued/referenced/reserved, reservations by open transactions, keys the
    index maps back, at most P rows, index entries carried, the incremental digest equal to the recomputed one).
    One group of 2-token blocks 1..4: r = [1, 2, 3] holds 1 (2 rows) and 2 (1 row) at generation 1."""
    import attrs

    from kvexact.reference.allocator import Allocator, GroupConfig, SelfCheckFailed
    from kvexact.reference.handles import BlockHandle

    h1, h2, old1 = BlockHandle(0, 0, 1, 1), BlockHandle(0, 0, 2, 1), BlockHandle(0, 0, 1, 0)

    def make() -> tuple[Any, Any, Any]:
        alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3, 4]])
        alloc.allocate("r", [1, 2, 3])
        return alloc, alloc.pools[0], alloc.requests["r"]

    def req(**changes: Any) -> Any:
        def corrupt(a: Any, p: Any, r: Any) -> None:
            a.requests["r"] = attrs.evolve(r, **changes)
        return corrupt

    def block(b: int, **changes: Any) -> Any:
        def corrupt(a: Any, p: Any, r: Any) -> None:
            p.blocks[b] = attrs.evolve(p.blocks[b], **changes)
        return corrupt

    def swap(a: Any, p: Any, r: Any) -> None:
        s3, s4 = p.q_seq[3], p.q_seq[4]
        p.q_at[s3], p.q_at[s4] = 4, 3

    def reserved_closed(a: Any, p: Any, r: Any) -> None:
        p._dequeue(3)
        p.blocks[3] = attrs.evolve(p.blocks[3], reserved_by="t9")

    def set_item(table: str, key: Any, value: Any) -> Any:
        def corrupt(a: Any, p: Any, r: Any) -> None:
            getattr(p if table in ("refs", "q_at") else a, table)[key] = value
        return corrupt

    def drop_q(a: Any, p: Any, r: Any) -> None:
        del p.q_at[p.q_seq[3]]

    def bump(a: Any, p: Any, r: Any) -> None:
        a.journal.acc += 1

    cases = [
        (None, None),
        (req(tables=(((h1, h2)), (h1, h2))), "r: 2 tables for 1 groups"),
        (req(context_tokens=5), "r group 0: 2 blocks for 5 tokens"),
        (req(tables=((old1, h2),)), "r group 0 maps stale or foreign p0/g0/1@0"),
        (req(tables=((BlockHandle(7, 0, 1, 1), h2),)), "r group 0 maps stale or foreign p7/g0/1@1"),
        (req(tables=((BlockHandle(0, 0, 9, 1), h2),)), "r group 0 maps stale or foreign p0/g0/9@1"),
        (block(1, reserved_by="t9"), "r maps unpublished p0/g0/1@1"),
        (block(2, rows=()), "r sees 1 rows of p0/g0/2@1 which holds 0"),
        (set_item("readers", "x", (attrs.evolve(make()[2], tables=((old1, h2),)), ())), "reader x holds stale p0/g0/1@0"),
        (set_item("leases", 5, old1), "lease 5 holds stale p0/g0/1@0"),
        (set_item("refs", 1, 2), "group 0: stored refcounts {1: 2, 2: 1} != reachable {1: 1, 2: 1}"),
        (drop_q, "group 0: queue maps disagree"),
        (swap, "group 0: queue position of block 3 is inconsistent"),
        (block(3, reserved_by="t1"), "group 0: block 3 is queued/referenced/reserved = [True, False, True]"),
        (reserved_closed, "group 0: block 3 reserved by closed transaction t9"),
        (block(1, cache_key="k"), "group 0: block 1 carries key 'k' the index does not map to it"),
        (block(3, rows=(1, 2, 3)), "group 0: block 3 holds 3 rows"),
        (block(3, rows=(1, 2)), None),
        (set_item("index", (0, "z"), h1), "index entry 'z' in group 0 names p0/g0/1@1, which does not carry it"),
        (bump, "incremental digest differs from the digest recomputed from scratch"),
    ]
    got: list[str | None] = []
    for corrupt, _msg in cases:
        alloc, pool, rec = make()
        if corrupt is not None:
            corrupt(alloc, pool, rec)
        try:
            alloc.self_check()
            got.append(None)
        except SelfCheckFailed as exc:
            got.append(str(exc))
    two = Allocator([GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 2, 8)], [[1, 2], [5, 6]])
    two.allocate("r", [1, 2])
    two.pools[1].blocks[5] = attrs.evolve(two.pools[1].blocks[5], rows=(1, 9))
    try:
        two.self_check()
        disagree = ""
    except SelfCheckFailed as exc:
        disagree = str(exc)
    return [("self-check verdicts", got, [m for _c, m in cases]),
            ("two groups holding other rows", disagree, "r: cache groups disagree on the request's rows")]


def allocator_queries() -> Rows:
    """allocator.py's queries and predecessor checks: a missing request is UNKNOWN_REQUEST, an ended one
    REQUEST_ALREADY_ENDED ("request 'id'"); the expected epoch, generation and table version are checked in that
    order ("expected e, current c"); transactions are numbered t1, t2, ...; a second one while one is open is
    TRANSACTION_IN_FLIGHT ("in flight: [...]"); an unknown id UNKNOWN_TRANSACTION; the tail rows are context -
    (blocks - 1) P; an ended request comes back at generation + 1; a handle's refcount and state."""
    from kvexact.reference import lifecycle as lc
    from kvexact.reference.allocator import Allocator, AllocRejection, GroupConfig
    from kvexact.reference.handles import BlockHandle
    from kvexact.reference.pool import BlockState

    A = AllocRejection
    alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3, 4]], epoch=_int("700"))
    alloc.allocate("r", [1, 2, 3])
    alloc.allocate("e", [4])
    lc.release(alloc, "e")
    rec = alloc.request("r")
    checks = [_refusal(lambda: alloc.request("x")), _refusal(lambda: alloc.request("e")),
              _refusal(lambda: alloc.validate_expected("r", 2, 3, 5)),
              _refusal(lambda: alloc.validate_expected("r", 2, 3, None)),
              _refusal(lambda: alloc.validate_expected("r", 1, 3, _int("701"))),
              _refusal(lambda: alloc.validate_expected("r", None, 3, None)),
              _refusal(lambda: alloc.validate_expected("r", _int("1"), _int("1"), _int("701"))),
              _refusal(lambda: alloc.validate_expected("r", 0, None, None)),
              _refusal(lambda: alloc.validate_expected("r", None, 0, None)),
              _refusal(lambda: alloc.validate_expected("r", 1, 1, 703))]
    t = alloc.begin("append", "r", ("unique",), (4,))
    open_ = [t, _refusal(lambda: alloc.begin("append", "r", ("unique",), (4,))),
             _refusal(lambda: alloc.cow_begin("t9"))]
    return [("refusals", checks,
             [(A.UNKNOWN_REQUEST, "request 'x'"), (A.REQUEST_ALREADY_ENDED, "request 'e'"),
              (A.EPOCH_MISMATCH, "expected 5, current 702"), (A.REQUEST_GENERATION_MISMATCH, "r: expected 2, current 1"),
              (A.EPOCH_MISMATCH, "expected 701, current 702"), (A.TABLE_VERSION_MISMATCH, "r: expected 3, current 1"),
              (A.EPOCH_MISMATCH, "expected 701, current 702"), (A.REQUEST_GENERATION_MISMATCH, "r: expected 0, current 1"),
              (A.TABLE_VERSION_MISMATCH, "r: expected 0, current 1"), (A.EPOCH_MISMATCH, "expected 703, current 702")]),
            ("the third transaction; another while it is open; an unknown one", open_,
             ["t3", (A.TRANSACTION_IN_FLIGHT, "in flight: ['t3']"), (A.UNKNOWN_TRANSACTION, "transaction 't9'")]),
            ("r: tail rows, tokens, refcount and state of block 2", (alloc.tail_rows(rec, 0), alloc.tokens_of("r"),
                                                                    alloc.refcount(BlockHandle(0, 0, 2, 1)),
                                                                    alloc.block_state(BlockHandle(0, 0, 2, 1))),
             (3 - 1 * 2, (1, 2, 3), 1, BlockState.REFERENCED)),
            ("e after its release: generation, version, context, tables", alloc.current_or_empty("e"),
             type(rec)(2, 0, 0, ((),)))]


def allocator_steps() -> Rows:
    """0x05C's COW steps and 0x04A's boundary steps taken by hand, every out-of-order step refused by name with
    its detail. One group of 4-token blocks 1..6: r = [1, 2, 3] in block 1 (3 rows), forked to s (the tail is
    shared, so r's append copies on write: lease the source, reserve block 2, copy exactly 3 rows, write row 9 at
    offset 3, validate, publish version 2 at epoch 1 + 1, release the lease). Then u = [5, 6, 7, 8] (a full block)
    appends 9 at a boundary: reserve, write, append_write, publish."""
    from kvexact.reference import lifecycle as lc
    from kvexact.reference.allocator import Allocator, AllocRejection, GroupConfig
    from kvexact.reference.handles import BlockHandle

    A = AllocRejection
    alloc = Allocator([GroupConfig(0, 0, 4, 8)], [[1, 2, 3, 4, 5, 6]])
    alloc.allocate("r", [1, 2, 3])
    lc.fork(alloc, "r", "s")
    t = alloc.begin("append", "r", ("".join(("c", "ow")),), (9,))  # a path name built at run time: equal, not the literal
    dst = BlockHandle(0, 0, 2, 1)
    before = [_refusal(lambda: alloc.cow_reserve(t, 0)), _refusal(lambda: alloc.append_reserve(t, 0)),
              _refusal(lambda: alloc.cow_copy(t, 0, 3)), _refusal(lambda: alloc.write_rows(t, 0, dst, 0, (9,))),
              _refusal(lambda: alloc.cow_validate(t)), _refusal(lambda: alloc.cow_release_sources(t))]
    leases = alloc.cow_begin(t)
    begun = (leases, alloc.pools[0].refcount(1), _refusal(lambda: alloc.cow_begin(t)))
    reserved = alloc.cow_reserve(t, 0)
    mid = [_refusal(lambda: alloc.cow_reserve(t, 0)), _refusal(lambda: alloc.cow_write(t, 0, dst, 3, (9,))),
           _refusal(lambda: alloc.cow_copy(t, 0, 2))]
    alloc.cow_copy(t, 0, 3)
    copied = (alloc.pools[0].blocks[2].rows, alloc.txns[t].copied_rows, _refusal(lambda: alloc.cow_copy(t, 0, 3)))
    writes = [_refusal(lambda: alloc.cow_write(t, 0, dst, 2, (9,))), _refusal(lambda: alloc.cow_write(t, 0, dst, 3, (9, 9)))]
    alloc.cow_write(t, 0, dst, 3, (9,))
    late = [_refusal(lambda: alloc.cow_write(t, 0, dst, 4, (9,))), _refusal(lambda: alloc.cow_publish(t)),
            _refusal(lambda: alloc.append_rollback(t, 0))]
    alloc.cow_validate(t)
    alloc.cow_publish(t)
    rec = alloc.request("r")
    published = (rec.tables, rec.table_version, rec.context_tokens, alloc.epoch, alloc.pools[0].blocks[2].bundle_epoch,
                 _refusal(lambda: alloc.cow_rollback(t, 0)), alloc.pools[0].refcount(1))
    alloc.cow_release_sources(t)
    closed = (len(alloc.txns), alloc.pools[0].refcount(1), alloc.pools[0].refcount(2), len(alloc.leases))
    alloc.allocate("u", [5, 6, 7, 8])  # block 3, epoch 3
    b = alloc.begin("append", "u", ("".join(("n", "ew")),), (9,))
    new = BlockHandle(0, 0, 4, 1)
    boundary = [_refusal(lambda: alloc.append_publish(b))]
    alloc.append_reserve(b, 0)
    boundary.append(_refusal(lambda: alloc.append_publish(b)))
    boundary.append(_refusal(lambda: alloc.append_write(b)))
    alloc.write_rows(b, 0, new, 0, (9,))
    boundary.append(_refusal(lambda: alloc.append_publish(b)))
    alloc.append_write(b)
    boundary.append(_refusal(lambda: alloc.append_write(b)))
    alloc.append_publish(b)
    u = alloc.request("u")
    return [("COW steps before cow_begin", before,
             [(A.STEP_OUT_OF_ORDER, "cow_reserve before cow_begin"),
              (A.WRONG_STEP_FOR_PATH, "new reservation for group 0 on a 'cow' path in state RESERVED"),
              (A.STEP_OUT_OF_ORDER, "copy needs a reserved destination and a leased source in group 0"),
              (A.WRONG_STEP_FOR_PATH, "group 0 copies on write: cow_write writes it"),
              (A.STEP_OUT_OF_ORDER, f"cow_validate on {t}: written (), state RESERVED"),
              (A.STEP_OUT_OF_ORDER, f"{t} is RESERVED")]),
            ("cow_begin: leases, refs of the source (r, s, lease), again", begun,
             ((1,), 3, (A.STEP_OUT_OF_ORDER, f"cow_begin on {t} (BEGUN)"))),
            ("reserved destination", reserved, dst),
            ("a second destination, a write before the copy, a copy of 2 of 3 rows", mid,
             [(A.WRONG_STEP_FOR_PATH, "group 0 already has a destination"),
              (A.STEP_OUT_OF_ORDER, "cow_write on group 0 before its copy, or twice"),
              (A.COPY_ROW_COUNT_MISMATCH, "group 0: 2 rows, predecessor tail holds 3")]),
            ("copied: rows, copied rows, a second copy", copied, ((1, 2, 3), 3, (A.WRONG_STEP_FOR_PATH, "cow_copy on group 0"))),
            ("writes at offset 2, and of 2 rows at 3", writes,
             [(A.WRITE_OFFSET_MISMATCH, "p0/g0/2@1: offset 2, frontier 3, 1 rows, block 4"),
              (A.WRITE_OFFSET_MISMATCH, "p0/g0/2@1: offset 3, frontier 3, 2 rows, block 4")]),
            ("a second write, publication before validation, a boundary rollback of a COW", late,
             [(A.STEP_OUT_OF_ORDER, "cow_write on group 0 before its copy, or twice"),
              (A.FRONTIER_NOT_VALID, f"{t} publishes before cow_validate"),
              (A.WRONG_STEP_FOR_PATH, f"{t} follows the paths ('cow',)")]),
            ("published: tables, version, context, epoch, bundle epoch, rollback, source refs (s, lease)", published,
             (((dst,),), 2, 4, 2, 2, (A.ROLLBACK_AFTER_PUBLICATION, t), 2)),
            ("sources released: open transactions, refs of 1 and 2, leases", closed, (0, 1, 1, 0)),
            ("boundary: publish before reserve, before write; append_write before write; publish before append_write;"
             " append_write twice", boundary,
             [(A.HALF_BUNDLE_PUBLICATION, "group 0 would map 1 blocks for 5 tokens (needs 2) or lacks its destination"),
              (A.FRONTIER_NOT_VALID, f"{b}: groups written ()"),
              (A.STEP_OUT_OF_ORDER, f"append_write on {b}: written (), state RESERVED"),
              (A.STEP_OUT_OF_ORDER, f"{b} publishes before append_write"),
              (A.STEP_OUT_OF_ORDER, f"append_write on {b}: written (0,), state READY_TO_PUBLISH")]),
            ("boundary published: tables, version, context, epoch, bundle epoch",
             (u.tables, u.table_version, u.context_tokens, alloc.epoch, alloc.pools[0].blocks[4].bundle_epoch),
             (((BlockHandle(0, 0, 3, 1), new),), 2, 5, 4, 4)),
            ("a hand plan (unique, cow) on two groups of 4: tables, rows of both tails", _mixed_unique_cow(),
             (((BlockHandle(0, 0, 1, 1),), (BlockHandle(1, 1, 6, 1),)), (1, 2, 3, 9), (1, 2, 3, 9)))]


def _mixed_unique_cow() -> tuple[Any, Any, Any]:
    """r = [1, 2, 3] on two groups of 4-token blocks (1..4, 5..8), appended by hand on the plan (unique, cow): group 0
    writes its private tail in place, group 1 copies its tail (block 5) into block 6 and writes there."""
    from kvexact.reference.allocator import Allocator, GroupConfig
    from kvexact.reference.handles import BlockHandle

    alloc = Allocator([GroupConfig(0, 0, 4, 8), GroupConfig(1, 1, 4, 8)], [[1, 2, 3, 4], [5, 6, 7, 8]])
    alloc.allocate("r", [1, 2, 3])
    t = alloc.begin("append", "r", ("unique", "cow"), (9,))
    alloc.write_rows(t, 0, BlockHandle(0, 0, 1, 1), 3, (9,))
    alloc.cow_begin(t)
    dst = alloc.cow_reserve(t, 1)
    alloc.cow_copy(t, 1, 3)
    alloc.cow_write(t, 1, dst, 3, (9,))
    alloc.cow_validate(t)
    alloc.cow_publish(t)
    alloc.cow_release_sources(t)
    return alloc.request("r").tables, alloc.pools[0].blocks[1].rows, alloc.pools[1].blocks[6].rows


def allocator_appends() -> Rows:
    """0x04E's append paths per group (a boundary reserves "new"; else a shared or keyed tail makes every
    non-boundary group "cow", otherwise "unique"), on groups of 2- and 4-token blocks (8 B rows); an append writes
    exactly one row (0: EMPTY_APPEND, 2: WRITE_OFFSET_MISMATCH, "append writes exactly one row, got n"); an append
    to an unknown id with a table version is UNKNOWN_REQUEST; a mixed append publishes one new 2-token block
    (16 B of capacity) and writes 8 + 8 B; a fault after the reservation rolls the append back to the predecessor
    digest; a COW rollback of a boundary transaction is refused; an allocator needs one id list per group, ids
    0..n-1 in order."""
    from kvexact.reference import lifecycle as lc
    from kvexact.reference.allocator import Allocator, AllocRejection, GroupConfig

    A = AllocRejection

    def make() -> Any:
        return Allocator([GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 4, 8)], [[1, 2, 3, 4], [5, 6, 7, 8]])

    plans = []
    for n in (2, 3, 4):
        alloc = make()
        alloc.allocate("r", list(range(n)))
        unique = alloc.append_plan(alloc.request("r"))
        lc.fork(alloc, "r", "s")
        plans.append((unique, alloc.append_plan(alloc.request("r"))))
    empty = make().append_plan(make().current_or_empty("z"))
    alloc = make()
    alloc.allocate("r", [1, 2])
    refused = [_refusal(lambda: alloc.run_txn("append", "r", ())), _refusal(lambda: alloc.run_txn("append", "r", (1, 2))),
               _refusal(lambda: alloc.append("zz", 3, expected_table_version=3))]
    mixed = alloc.append("r", 3)
    faulty = make()
    faulty.allocate("r", [1, 2])
    before = faulty.digest()
    faulty.fault_after.add(("append_reserve", 0))
    rb = faulty.append("r", 3)
    unchanged = faulty.digest() == before
    t = faulty.begin("append", "r", ("new", "unique"), (3,))
    wrong = _refusal(lambda: faulty.cow_rollback(t, 0))
    errors = []
    for groups, ids in (([], []), ([GroupConfig(1, 0, 2, 8)], [[1]]), ([GroupConfig(0, 0, 2, 8)], [[1], [2]])):
        try:
            Allocator(groups, ids)
            errors.append("")
        except ValueError as exc:
            errors.append(str(exc))
    return [("plans at 2, 3, 4 tokens: unique tails, shared tails", plans,
             [(("new", "unique"), ("new", "cow")), (("unique", "unique"), ("cow", "cow")), (("new", "new"), ("new", "new"))]),
            ("plan of a request not yet admitted", empty, ("new", "new")),
            ("appends of 0 and 2 rows, to an unknown id", refused,
             [(A.EMPTY_APPEND, "append writes exactly one row, got 0"),
              (A.WRITE_OFFSET_MISMATCH, "append writes exactly one row, got 2"), (A.UNKNOWN_REQUEST, "request 'zz'")]),
            ("mixed append: paths, new blocks, capacity, write bytes, context, tables per group",
             (mixed.paths, mixed.new_physical_blocks, mixed.new_capacity_bytes, mixed.append_write_bytes,
              alloc.request("r").context_tokens, [len(x) for x in alloc.request("r").tables]),
             (("new", "unique"), 1, 2 * 8, 8 + 8, 3, [2, 1])),
            ("fault after the reservation: outcome, digest unchanged, new blocks",
             (rb.outcome, unchanged, rb.new_physical_blocks), ("ROLLED_BACK", True, 0)),
            ("COW rollback of a boundary transaction", wrong, (A.WRONG_STEP_FOR_PATH, f"{t} follows the paths ('new', 'unique')")),
            ("allocators without groups, with group id 1 first, with two id lists for one group", errors,
             ["one block id list per cache group is required", "cache group ids must be 0..n-1 in order",
              "one block id list per cache group is required"])]


def allocator_plans() -> Rows:
    """0x04E: a transaction's plan names one path per cache group, "alloc" in every group of an allocate and "new",
    "cow" or "unique" in each group of an append; ``begin`` refuses any other plan by name (BAD_PLAN, naming the
    operation, the plan and the group count) and opens no transaction. On 0x05B's two groups."""
    from kvexact.reference.allocator import AllocRejection
    from kvexact.reference.labs import allocator as fx

    alloc = fx.fixture_0x05b_forked()
    version = alloc.request("D").table_version
    bad = [("append", ("cow",)), ("append", ("cow", "cow", "cow")), ("append", ("alloc", "cow")),
           ("append", ("new", "bogus")), ("allocate", ("new", "new")), ("allocate", ("alloc",)), ("append", ())]
    refused = [_refusal(lambda o=o, p=p: alloc.begin(o, "D" if o == "append" else "N", p, (900,), 1,
                                                     version if o == "append" else None)) for o, p in bad]
    opened = len(alloc.txns)
    alloc.begin("append", "D", ("new", "unique"), (900,), 1, version)  # known paths, even if not D's (cow, cow)
    fresh = fx.fixture_0x05b()
    fresh.begin("".join(("allo", "cate")), "N", ("alloc", "".join(("al", "loc"))), (1,))  # names built at run time
    return [("bad plans refused", refused,
             [(AllocRejection.BAD_PLAN, f"{o} plan {p!r} for 2 cache groups") for o, p in bad]),
            ("transactions opened by the refused plans", opened, 0),
            ("transactions opened by (new, unique) for an append, (alloc, alloc) for an allocate",
             (len(alloc.txns), len(fresh.txns)), (1, 1))]


def pool_queue() -> Rows:
    """0x04B/0x05F block pool: a malformed config (P or B_row <= 0, no ids, duplicate or negative ids) is refused
    (BAD_POOL_CONFIG); LRU takes the queue head, MRU the tail, LOWEST_ID the smallest id, skipping blocks that left
    the queue; a taken block's generation goes up by 1 and it loses its cache key (returned); incref takes a
    zero-ref block out of the queue, decref to 0 puts it at the tail (EVICTABLE with a key, else FREE); an empty
    queue is OUT_OF_MEMORY; handles of another pool or group, unknown blocks and older generations are refused by
    name, as are a decref below 0 and a publication by another transaction."""
    from kvexact.reference.handles import BlockHandle
    from kvexact.reference.pool import BlockPool, BlockState, GroupConfig, Journal, PoolRejection, QueuePolicy

    R = PoolRejection
    bad = [(GroupConfig(0, 0, 0, 8), [1]), (GroupConfig(0, 0, 4, 0), [1]), (GroupConfig(2, 0, 4, 8), []),
           (GroupConfig(0, 0, 4, 8), [1, 1]), (GroupConfig(0, 0, 4, 8), [-1, 2])]
    refused = [_refusal(lambda c=c, ids=ids: BlockPool(Journal(), c, ids)) for c, ids in bad]
    expected_bad = [(R.BAD_POOL_CONFIG, f"group {c.cache_group_id}: {c}") for c, _ids in bad[:3]]
    expected_bad += [(R.BAD_POOL_CONFIG, "group 0: duplicate or negative block ids")] * 2
    pool = BlockPool(Journal(), GroupConfig(0, 3, 4, 8), [5, 6, 7, 8], generations={6: 2})
    first = (pool.config.block_bytes, pool.queue_order(), pool.num_queued(), pool.handle(6))
    h5, lost5 = pool.reserve("t1")
    reserved5 = pool.state_of(5)
    pool.set_cache_key(6, "k")
    pool.incref(6)
    pool.incref(6)
    held = (pool.refcount(6), pool.state_of(6), pool.queue_order())
    pool.decref(6)
    once = (pool.refcount(6), pool.state_of(6))
    pool.decref(6)
    back = (pool.refcount(6), pool.state_of(6), pool.queue_order(), pool.state_of(5))
    taken = [pool.reserve(t) for t in ("t2", "t3", "t4")]
    empty = _refusal(lambda: pool.reserve("t5"))
    under = _refusal(lambda: pool.decref(5))
    wrong = _refusal(lambda: pool.publish_reserved(h5, "t2"))
    pool.publish_reserved(h5, "t1")
    handles = [_refusal(lambda h=h: pool.check_handle(h)) for h in
               (BlockHandle(4, 0, 5, 1), BlockHandle(3, 1, 5, 1), BlockHandle(3, 0, 9, 0), BlockHandle(3, 0, 5, 0),
                BlockHandle(3, 0, 5, 1))]

    def order(policy: QueuePolicy, ids: list[int], drop: int | None = None, cycle: int | None = None) -> list[int]:
        q = BlockPool(Journal(), GroupConfig(0, 0, 4, 8), ids, policy=policy)
        if drop is not None:
            q.incref(drop)
        if cycle is not None:
            q.incref(cycle)
            q.decref(cycle)
        return [q.reserve(f"t{i}")[0].block_id for i in range(q.num_queued())]

    return [("malformed configs refused", refused, expected_bad),
            ("block bytes, queue, queued, handle of 6", first, (32, [5, 6, 7, 8], 4, BlockHandle(3, 0, 6, 2))),
            ("LRU reserve: handle, lost key, state", (h5, lost5, reserved5),
             (BlockHandle(3, 0, 5, 1), None, BlockState.RESERVED)),
            ("6 keyed, held twice: refs, state, queue", held, (2, BlockState.REFERENCED, [7, 8])),
            ("one decref: refs, state", once, (1, BlockState.REFERENCED)),
            ("second decref: refs, state, queue; 5 reserved", back,
             (0, BlockState.EVICTABLE, [7, 8, 6], BlockState.RESERVED)),
            ("next three reserves: handles, lost keys", taken,
             [(BlockHandle(3, 0, 7, 1), None), (BlockHandle(3, 0, 8, 1), None), (BlockHandle(3, 0, 6, 3), "k")]),
            ("empty queue, decref of 0 refs, publication by t2", [empty, under, wrong],
             [(R.OUT_OF_MEMORY, "group 0 (pool 3)"), (R.REFCOUNT_UNDERFLOW, "block 5 of group 0"),
              (R.BLOCK_NOT_RESERVED, "p3/g0/5@1 by t2")]),
            ("published 5: state", pool.state_of(5), BlockState.FREE),
            ("handles refused", handles,
             [(R.FOREIGN_POOL_HANDLE, "p4/g0/5@1 given to pool 3 group 0"),
              (R.FOREIGN_POOL_HANDLE, "p3/g1/5@1 given to pool 3 group 0"), (R.UNKNOWN_BLOCK, "p3/g0/9@0"),
              (R.STALE_BLOCK_GENERATION, "p3/g0/5@0 but block 5 is at generation 1"), (None, "")]),
            ("orders: LRU, MRU, LOWEST_ID", [order(p, [9, 3, 5, 1]) for p in QueuePolicy],
             [[9, 3, 5, 1], [1, 5, 3, 9], [1, 3, 5, 9]]),
            ("LRU without its head, MRU without its tail", (order(QueuePolicy.LRU, [1, 2, 3], drop=1),
                                                            order(QueuePolicy.MRU, [1, 2, 3, 4], drop=4)),
             ([2, 3], [3, 2, 1])),
            ("block id 0 is a block: LOWEST_ID order of [2, 0]", order(QueuePolicy.LOWEST_ID, [2, 0]), [0, 2]),
            ("2 released again goes to the tail: LRU, MRU", (order(QueuePolicy.LRU, [1, 2, 3], cycle=2),
                                                             order(QueuePolicy.MRU, [1, 2, 3], cycle=2)),
             ([1, 3, 2], [2, 3, 1]))]


def journal_digest() -> Rows:
    """pool.py's digest: each cell (table, key, value) hashes as SHA-256 of "table US repr(key) US repr(value)"
    (US = 0x1f), the cells' hashes sum modulo 2**256, and the digest is SHA-256 of the tag
    b"kvexact/allocator-state/v1" plus that sum in 32 big-endian bytes; every write and delete counts once and is
    undone exactly back to a mark; deleting a missing key is a KeyError."""
    import hashlib

    from kvexact.reference.pool import BlockPool, BlockRecord, GroupConfig, JDict, Journal

    def cell(table: str, key: Any, value: Any) -> int:
        return int.from_bytes(hashlib.sha256(f"{table}\x1f{key!r}\x1f{value!r}".encode()).digest(), "big")

    def digest(*cells: int) -> str:
        return hashlib.sha256(b"kvexact/allocator-state/v1" + (sum(cells) % (1 << 256)).to_bytes(32, "big")).hexdigest()

    j = Journal()
    t, u = JDict(j, "t"), JDict(j, "u")
    empty = j.digest()
    t["a"] = 1
    one = j.digest()
    m = j.mark()
    t["a"] = 2
    u[_int("300")] = "x"
    del t["a"]
    after = (j.digest(), j.recompute_digest(), j.writes, dict(t.items()), len(u), _int("300") in u, list(u))
    try:
        del t["missing"]
        missing = ""
    except KeyError as exc:
        missing = str(exc)
    j.undo_to(m)
    undone = (j.digest(), dict(t.items()), len(u), j.mark())
    j.undo_to(0)
    # a one-block pool: its record, the queue's two maps (the i-th release gets sequence number i, from 0) and ends
    pj = Journal()
    BlockPool(pj, GroupConfig(0, 0, 2, 8), [7])
    pool_cells = (cell("g0/blocks", 7, BlockRecord(0)), cell("g0/queue_at", 0, 7), cell("g0/queue_seq", 7, 0),
                  cell("g0/queue_ends", "head", 0), cell("g0/queue_ends", "next", 1))
    rows_pool = [("a one-block pool's digest", pj.digest(), digest(*pool_cells))]
    return rows_pool + [("empty digest", empty, digest()),
            ("after t[a] = 1", one, digest(cell("t", "a", 1))),
            ("after t[a] = 2, u[300] = x, del t[a]: digest, recomputed, writes, t, len u, 300 in u, keys", after,
             (digest(cell("u", 300, "x")), digest(cell("u", 300, "x")), 4, {}, 1, True, [300])),
            ("del of a missing key", missing, "'missing'"),
            ("undone to the mark: digest, t, len u, mark", undone, (one, {"a": 1}, 0, 1)),
            ("undone to 0: digest, t", (j.digest(), dict(t.items())), (empty, {}))]


CASES = {"telemetry funnel": telemetry_funnel, "telemetry pool": telemetry_pool, "telemetry alerts": telemetry_alerts,
         "telemetry hygiene": telemetry_hygiene, "telemetry counters": telemetry_counters,
         "telemetry snapshot": telemetry_snapshot,
         "ledger tail valid slots": ledger_tail_valid_slots,
         "ledger validation": ledger_validation, "ledger figures": ledger_figures, "ledger costs": ledger_costs, "lifecycle receipts": lifecycle_receipts,
         "lifecycle trace params": lifecycle_trace_params,
         "lifecycle mappings": lifecycle_mappings,
         "allocator receipts": allocator_receipts,
         "allocator plans": allocator_plans, "allocator steps": allocator_steps,
         "allocator appends": allocator_appends,
         "allocator self check": allocator_self_check, "allocator queries": allocator_queries,
         "pool queue": pool_queue, "journal digest": journal_digest}
