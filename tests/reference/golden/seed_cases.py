"""Golden cases of the reference objects on the seed's worked traces (``SEED_CASES``) and of the peer profiles'
measured scenarios and event logs (``PEER_CASES``); registered with every other case module in :mod:`golden` and
run one pytest test per case by ``test_golden.py``.

Invariant: each case returns ``(what, got, expected)`` rows whose expected values are the seed's (the section id
is in the case's name or docstring), or follow from them by the arithmetic written beside them, or are the
peer profile's measured values; a row that differs, or a case that raises, fails that case's test by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Case = Callable[[], list[tuple[str, Any, Any]]]  # (what, got, expected)
KIB = 1024
MIB = 1024 * 1024


def radix_0x08F() -> list[tuple[str, Any, Any]]:
    """0x08F: the 18-operation trace's final reconciliation and its totals; 0x08G: the req-handoff receipt and its
    prefill estimate (S_prompt 7 - 6 matched = 1 token to compute; ceil(1 / P) = 1 new block)."""
    import attrs

    from kvexact.reference import radix as rx
    from kvexact.reference.labs import radix as rx_lab
    from kvexact.reference.rejections import rejection_of

    trace = rx_lab.seed_trace_0x08F()
    r = rx.check_state(trace[-1].state)
    paged = attrs.evolve(trace[-1].state, page_size=2)  # the same tree read as pages of 2: another committed state
    handoff = [t.receipt for t in trace if isinstance(t.receipt, rx.RadixSchedulerHandoffReceipt)][-1]
    est = rx.prefill_estimate(handoff, row_bytes=16, block_tokens=4)
    evictions = [t.receipt for t in trace if isinstance(t.receipt, rx.EvictReceipt)]
    dups = [s for t in trace if isinstance(t.receipt, rx.RadixMutationReceipt) for s in t.receipt.duplicate_slot_ids]
    return [("pool/tree/free/private slots", (r.pool_slots, r.tree_owned_slots, r.free_slots, r.private_slots),
             (24, 6, 18, 0)),
            ("protected/evictable tree tokens", (r.protected_tokens, r.evictable_tokens), (6, 0)),
            ("duplicate input slots released", len(dups), 6),
            ("eviction calls/edges/slots", (len(evictions), sum(len(e.evicted_node_ids) for e in evictions),
                                            sum(e.released_tokens for e in evictions)), (3, 5, 8)),
            ("0x08G req-handoff: generation, tree version, matched, path, slots, suffix, lease",
             (handoff.request_generation, handoff.tree_version, handoff.matched_tokens, handoff.path_node_ids,
              handoff.prefix_slot_ids, handoff.suffix_interval, handoff.lock_lease_id),
             (4, 18, 6, (2, 3, 4), (1, 2, 3, 4, 11, 12), (6, 7), "lease-req-handoff-v18")),
            ("0x08G prefill at B_row 16, P 4: compute, useful bytes, blocks, capacity",
             (est.prompt_tokens_to_compute, est.new_useful_kv_bytes, est.new_physical_blocks,
              est.new_physical_capacity_bytes), (7 - 6, 1 * 16, 1, 1 * 4 * 16)),
            ("state digests at page size 1 and 2 differ", rx.state_sha256(trace[-1].state) != rx.state_sha256(paged),
             True),
            ("0x08G prefill at B_row 0 rejected as", rejection_of(lambda: rx.prefill_estimate(handoff, row_bytes=0,
                                                                                        block_tokens=4)),
             rx.RadixRejection.MALFORMED_INPUT)]


def translate_0x03F() -> list[tuple[str, Any, Any]]:
    """0x03F: A's K row (layer 24, token 16, head 1, lane 5); 0x03H: C's token 16 in g0's physical slot 0 is the
    first element of g0's K tensor (coordinate all zeros), so its address is the tensor's base."""
    from kvexact.reference.labs.translate import loop4_snapshot, loop4_successor_snapshot
    from kvexact.reference.translate import consume_successor, resolve_kv_address

    s = loop4_snapshot()
    a = resolve_kv_address(s, "A", 16, 24, "K", 1, 5)
    s2 = consume_successor(s, loop4_successor_snapshot(), "C")
    first = resolve_kv_address(s2, "C", 16, 0, "K", 0, 0)
    return [("A slot, element offset, byte offset", (a.slot_id, a.element_offset, a.byte_offset), (96, 49_285, 98_570)),
            ("A byte address", a.byte_address, 4_311_744_512 + 98_570),
            ("C token 16 in g0: slot, coordinate", (first.slot_id, first.coordinate), (0, (0, 0, 0, 0, 0))),
            ("first element of g0's K tensor is at its base", first.byte_address, s2.pool(0).k_base_address)]


def ledger_0x0D() -> list[tuple[str, Any, Any]]:
    """0x0D's worked ledger (P = 16 tokens, 64 KiB rows): 3 unique blocks give 3 x 16 = 48 slots, 3 MiB; the free
    queue must be exactly the pool minus the reachable blocks (0x0D), so one idle block missing from it is refused."""
    import attrs

    from kvexact.reference.labs.ledgers import nested_prefix_cost, worked_fixture
    from kvexact.reference.ledgers import LedgerRejection, compute_ledger
    from kvexact.reference.rejections import rejection_of

    led = compute_ledger(worked_fixture())
    cost = nested_prefix_cost(16)  # the same three requests through the block-size sweep of 0x09B
    return [("logical/reserved rows", (led.logical_rows_tokens, led.reserved_rows_tokens), (74, 144)),
            ("identities that do not hold", [n for n, (lhs, rhs) in led.identities().items() if lhs != rhs], []),
            # 0x0D: the longest request (33 tokens) has 2 full blocks, so 2 cached hashes; 0x0D's metadata 482 B
            ("0x09B at P=16: cached hashes, metadata bytes", (cost.cached_hashes, cost.metadata_bytes), (2, 482)),
            ("0x09B at P=16: request-view tail bytes, unique tail bytes", (cost.request_view_tail_bytes,
                                                                         cost.unique_tail_bytes),
             ((6 * 16 - 74) * 64 * KIB, (3 * 16 - 33) * 64 * KIB)),
            ("request refs, view slots, view tail slots", (led.ref_blocks, led.request_view_slots,
                                                           led.request_view_tail_slots), (6, 6 * 16, 6 * 16 - 74)),
            ("unique blocks, materialized rows, slots", (led.unique_blocks, led.unique_materialized_rows,
                                                         led.unique_slots), (3, 33, 3 * 16)),
            ("unique capacity, tail slots", (led.unique_capacity_bytes, led.unique_tail_slots), (3 * MIB, 3 * 16 - 33)),
            ("pool blocks, pool idle bytes, metadata bytes", (led.pool_blocks, led.pool_idle_bytes, led.metadata_bytes),
             (8, 5 * MIB, 482)),
            ("free queue without idle block 107 (a leak) rejected as", rejection_of(lambda: compute_ledger(
                attrs.evolve(worked_fixture(), free_queue_block_ids=(103, 104, 105, 106)))),
             LedgerRejection.FREE_QUEUE_MISMATCH)]


def prefix_0x07() -> list[tuple[str, Any, Any]]:
    """0x07B (a change at token 37: S_sem 37, hit 32), a given semantic match of 0 or 20 tokens caps the hit at 0
    or 16 (0x07A), 0x07E (the prompt-cap edge at 48 and 50 tokens), a different cache salt or namespace
    generation sees no hit (0x07A: both are key/scope inputs), 0x09C's full-block staircase at P = 8 (B 25 and C 16 tokens over A's 33: 16 + 16 capped hits, 24 + 16 without
    the logits cap; 24 + 15 with immutable partial tails); 0x07C: a published tail whose block was freed and reused
    at the next generation is no longer current, so it is no hit (32 full-block tokens, no partial rows)."""
    import attrs

    from kvexact.reference import lifecycle
    from kvexact.reference.keys import KeyInputs
    from kvexact.reference.labs import prefix as px_lab
    from kvexact.reference.prefix import PrefixPolicy, PrefixRejection, verify_receipt
    from kvexact.reference.rejections import rejection_of

    s = px_lab.STREAM
    cache = px_lab.cache_with(s[:50])
    changed = list(s[:50])
    changed[37] = 7
    b = cache.lookup(px_lab.request("B", changed))
    out: list[tuple[str, Any, Any]] = [("0x07B S_sem, hit", (b.semantic_match_tokens, b.runtime_hit_tokens), (37, 32))]
    for s_sem, hit in ((0, 0), (20, 16)):  # 0x07A: P floor(min(S_sem, S_indexed, S_prompt - 1) / P), S_sem in [0, S_prompt]
        r = cache.lookup(px_lab.request("B", s[:50], semantic_match_tokens=s_sem))
        out.append((f"0x07A given S_sem {s_sem}: hit", r.runtime_hit_tokens, hit))
    cache48 = px_lab.cache_with(s[:48])
    for prompt, hit, recompute in ((48, 32, 16), (50, 48, 2)):
        r = cache48.lookup(px_lab.request("B", s[:prompt]))
        out.append((f"0x07E {prompt} tokens: cap, hit, recompute", (r.cap_tokens, r.runtime_hit_tokens,
                                                                    r.prompt_rows_recomputed), (prompt - 1, hit, recompute)))
        # 0x07E: B_row = 64 KiB, a bundle P B_row = 1 MiB: useful recompute payload 128 KiB at 50 tokens, 1 bundle
        out.append((f"0x07E {prompt} tokens: useful recompute bytes, new capacity bytes",
                    (r.useful_recompute_bytes, r.new_capacity_bytes), (recompute * 64 * KIB, 1 * MIB)))
    salted = attrs.evolve(px_lab.request("B", s[:50]), inputs=KeyInputs(tuple(s[:50]), cache_salt="other"))
    out.append(("another cache salt: hit", cache.lookup(salted).runtime_hit_tokens, 0))
    staircase = px_lab.cache_with(s[:33], block_tokens=8)
    pol = PrefixPolicy(block_tokens=8)
    hits = [staircase.lookup(px_lab.request(n, s[:t]), pol) for n, t in (("B", 25), ("C", 16))]
    out.append(("0x09C P=8: hit, recompute", (sum(r.runtime_hit_tokens for r in hits),
                                              sum(r.prompt_rows_recomputed for r in hits)), (16 + 16, 41 - 32)))
    free = [staircase.lookup(px_lab.request(n, s[:t], requires_logits=False), pol) for n, t in (("B", 25), ("C", 16))]
    out.append(("0x09C P=8 without logits: hit", sum(r.runtime_hit_tokens for r in free), 24 + 16))
    tail = PrefixPolicy(partial_tail=True)
    partial = px_lab.cache_with(s[:33], tail)
    out.append(("0x09C partial tail, P=16: B, C hits", tuple(partial.lookup(px_lab.request(n, s[:t]), tail)
                                                            .runtime_hit_tokens for n, t in (("B", 25), ("C", 16))),
                (24, 15)))
    b_tail = partial.lookup(px_lab.request("B", s[:25]), tail)  # 24 = one full block of 16 + 8 rows of A's tail
    out.append(("0x09C partial tail: B's matched bundles, partial rows", (len(b_tail.matched_group_handles),
                                                                         b_tail.copy_valid_partial_rows), (2, 8)))
    claimed = attrs.evolve(b_tail, copy_valid_partial_rows=7)  # 24 - 7 = 17 rows claimed as full blocks of 16
    claimed = attrs.evolve(claimed, receipt_sha256=claimed.body_sha256())
    groups = len(partial.alloc.groups)
    out.append(("0x07 verify: B's receipt, one claiming 7 partial rows of 24", (
        rejection_of(lambda: verify_receipt(b_tail, tail, groups)), rejection_of(lambda: verify_receipt(claimed, tail, groups))),
        (None, PrefixRejection.HIT_NOT_BLOCK_ALIGNED)))
    witness = PrefixPolicy(collision_witness=True)  # the witness equals the tokens on a true hit: same 0x07E hit
    out.append(("0x07E 50 tokens over 48 cached, collision witness on: hit",
                px_lab.cache_with(s[:48], witness).lookup(px_lab.request("B", s[:50]), witness).runtime_hit_tokens, 48))
    differs = [*s[:16], 7, *s[17:25]]  # B's row 16 differs from A's: the common prefix past block 0 is 0 rows
    out.append(("0x09C partial tail, B's row 16 differs: hit, partial rows",
                (lambda r: (r.runtime_hit_tokens, r.copy_valid_partial_rows))(
                    partial.lookup(px_lab.request("B", differs), tail)), (16, 0)))
    stale = px_lab.cache_with(s[:33], tail)
    lifecycle.release(stale.alloc, "A")
    stale.alloc.allocate("Z", [9000 + i for i in range(22 * 16)])  # the 21 free blocks, then A's tail block 3
    out.append(("0x07C A's tail block reused at the next generation: B's 40-token hit, partial rows",
                (lambda r: (r.runtime_hit_tokens, r.copy_valid_partial_rows))(
                    stale.lookup(px_lab.request("B", s[:40]), tail)), (32, 0)))
    return out


def telemetry_0x0CF() -> list[tuple[str, Any, Any]]:
    """0x0CF: the funnel of twelve attempts, the 12-block pool (3 + 2 + 5 + 2, refs 9 - 9 = 0), and its
    joint-predicate alerts: free = evictable = 0 with failures rising is allocator exhaustion, free = 0 alone
    is no alert."""
    import attrs

    from kvexact.reference import telemetry as tm
    from kvexact.reference.formulas import INT_OPS, evaluate
    from kvexact.reference.formulas_all import load_all
    from kvexact.reference.labs import telemetry as tm_lab

    load_all()

    f = tm_lab.run_funnel_fixture()
    g = tm.reconcile_pool(tm_lab.POOL_FIXTURE)
    base = tm.TelemetrySample(at_s=0, free_blocks=3, evictable_blocks=2, allocation_failures=0,
                              locked_eviction_rejects=0, refcount_recorded=9, refcount_derived=9,
                              refcount_mismatch_age_s=0, required_frontier_tokens=32, ready_frontier_tokens=32,
                              map_wait_age_s=0, candidate_matches=9, compatible_matches=7, generation_rejects=1,
                              cross_namespace_rejects=0, stale_namespace_rejects=0)
    exhausted = attrs.evolve(base, at_s=10, free_blocks=0, evictable_blocks=0, allocation_failures=3)
    counters = tm_lab.granularity_counters()
    return [("funnel", [f.counts[s] for s in tm.FUNNEL_STAGES], [12, 11, 9, 7, 6, 6, 5, 4, 4]),
            ("pool by state", g.blocks_by_state, {"free": 3, "evictable": 2, "live": 5, "reserved_or_copying": 2}),
            ("refs recorded/derived/delta, map lag", (g.refcount_recorded, g.refcount_derived, g.refcount_delta,
                                                      g.mapping_lag_tokens), (9, 9, 0, 0)),
            ("N_req >= N_auth >= ... holds for the funnel, not for 12, 11, 12",
             [evaluate("telemetry.funnel_monotone", INT_OPS, stage_counts=c) for c in ([12, 11, 9, 7, 6, 6, 5, 4, 4],
                                                                                      [12, 11, 12])], [True, False]),
            ("alerts, exhausted", tm.evaluate_alerts(base, exhausted, 0.2, 30), ("allocator_exhaustion",)),
            ("alerts, free 0 only", tm.evaluate_alerts(base, attrs.evolve(base, at_s=10, free_blocks=0), 0.2, 30), ()),
            ("alerts, refs 10 recorded vs 9 derived for 30 s", tm.evaluate_alerts(base, attrs.evolve(
                base, at_s=30, refcount_recorded=10, refcount_mismatch_age_s=30), 0.2, 30), ("reference_leak",)),
            # Prometheus text format 0.0.4: a HELP text escapes a backslash as \\ and a line feed as \n
            ("HELP line of a help text with a backslash and a line feed", tm.to_prometheus(
                [tm.Metric("kvexact_reuse_rejections_total", "counter", "a\\b\nc", (({"bucket": "x"}, 1),))])
             .splitlines()[0], "# HELP kvexact_reuse_rejections_total a\\\\b\\nc"),
            ("0x0BL table and chunk totals (0x0AB cells 16/11/5, 64 B; 0x0BI 12 shared chunks, 32 partial rows)",
             [counters.totals.get(k) for k in ("table_dense_cells", "table_used_cells", "table_padded_cells",
                                               "table_transfer_bytes", "chunk_visits", "partial_rows")],
             [16, 11, 5, 64, 12, 32]),
            ("0x0BL ledger counters", {k: counters.ledger[k] for k in ("request_refs", "unique_blocks",
                                                                        "unique_tail_slots", "metadata_bytes")},
             {"request_refs": 6, "unique_blocks": 3, "unique_tail_slots": 15, "metadata_bytes": 482}),
            # 0x06F's geometry: a tensor's page group is 4 tokens of 16 B rows = 64 B, a bundle 4 tensors (256 B);
            # 9 tokens mapped are 3 ready bundles = 12 page groups, a ready frontier of 3 x 4 tokens
            ("0x0BL VMM gauges: page group bytes, mapped groups, ready frontier tokens",
             tuple(counters.ledger[k] for k in ("vmm_page_group_bytes", "vmm_mapped_groups",
                                                "vmm_ready_frontier_tokens")), (4 * 16, 3 * 4, 3 * 4))]


def keys_0x09B() -> list[tuple[str, Any, Any]]:
    """0x09B: H^full = P floor(T / P); at P = 1 every token is a full block, so 3 tokens hash as 3 blocks."""
    from kvexact.reference.keys import (
        KeyInputs,
        KeyRejection,
        MultimodalFeature,
        hash_full_blocks,
        matching_full_blocks,
    )
    from kvexact.reference.rejections import rejection_of

    a, b, c, x = (bytes([i]) for i in range(4))
    return [("P=1: full blocks of 3 tokens", len(hash_full_blocks(KeyInputs((1, 2, 3)), 1)), 3),
            ("a feature over tokens [0, 2) of 3 rejected as",
             rejection_of(lambda: KeyInputs((1, 2, 3), mm_features=(MultimodalFeature("img", 0, 2),))), None),
            ("4 embedding rows for 3 tokens rejected as",
             rejection_of(lambda: KeyInputs((1, 2, 3), prompt_embed_rows=(b"r",) * 4)),
             KeyRejection.PROMPT_EMBEDS_LENGTH_MISMATCH),
            ("blocks after the first difference: matching of a b c vs a x c", matching_full_blocks((a, b, c), (a, x, c)),
             1)]


def inputs_refused() -> list[tuple[str, Any, Any]]:
    """Bad inputs refused by name, good ones kept: 0x0CG's session receipt must cover exactly [0, H) (one covering
    140 of a 120-token history is refused; a refused resume prefills H + U = 120 + 16, a compatible one U = 16);
    0x0CB's H_module wants the cached positions equal to the needed ones (7..9 for 6..8 refused); 0x06D's sync may
    map up to T_max rows, not past them."""
    import attrs

    from kvexact.reference import modules as pm
    from kvexact.reference import sessions, vmm
    from kvexact.reference.labs import modules as pm_lab
    from kvexact.reference.labs import sessions as ss_lab
    from kvexact.reference.labs.vmm import seed_trace_0x06F
    from kvexact.reference.rejections import rejection_of

    longer = attrs.evolve(ss_lab.RECEIPT, covered_interval=(0, 140))
    start = {t.label: t for t in seed_trace_0x06F()}["v03"].state  # slot 0 bound
    tmax = start.config.max_tokens
    return [("0x0CG receipt covering [0, 140) of 120 rejected as",
             rejection_of(lambda: sessions.check_resume(longer, ss_lab.TURN)), sessions.SessionRejection.INTERVAL_MISMATCH),
            ("0x0CG plans: refused, compatible", (sessions.plan_turn(longer, ss_lab.TURN),
                                                   sessions.plan_turn(ss_lab.RECEIPT, ss_lab.TURN)),
             (sessions.ResumePlan(False, 120 + 16, sessions.SessionRejection.INTERVAL_MISMATCH),
              sessions.ResumePlan(True, 16))),
            ("0x0CB module cached at 7..9, needed at 6..8, rejected as",
             rejection_of(lambda: pm.check_module(pm_lab.sample_receipt(position_ids=(7, 8, 9)),
                                                  pm_lab.sample_receipt())), pm.ModuleRejection.POSITION_MISMATCH),
            ("0x06D sync to T_max, T_max + 1 rejected as",
             (rejection_of(lambda: vmm.step_sync(start, 0, tmax)), rejection_of(lambda: vmm.step_sync(start, 0, tmax + 1))),
             (None, vmm.VmmRejection.ROWS_BEYOND_TMAX))]


def allocator_0x05E() -> list[tuple[str, Any, Any]]:
    """0x05B/0x05E: D's COW append publishes 1003@12 and 2003@6 at context 35, table version 2, epoch 43 -> 44;
    0x05A: it copies r = 2 rows of a 64 KiB bundle row (128 KiB), writes one row (64 KiB): traffic 2 x 128 + 64 =
    320 KiB, 1 MiB of new capacity across both groups;
    truncate(D, 32) drops that suffix bundle, returns 1003@12 and 2003@6 to the free queues and publishes D's
    next table version (each published table is version + 1, as A's 5 -> 6); F's 16 tokens reuse them at @13
    and @7; a weak identity for a block past D's two-block table is refused, and so is releasing the leased COW
    sources (0x05C step 9) while the copy is in flight, before the publication (step 8)."""
    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import AllocRejection
    from kvexact.reference.labs import allocator as fx
    from kvexact.reference.rejections import rejection_of

    alloc = fx.fixture_0x05b_forked()
    txn = alloc.begin("append", "D", ("cow", "cow"), (900,), 1, alloc.request("D").table_version)
    alloc.cow_begin(txn)  # sources leased (0x05C steps 2, 4); releasing them is step 9, after the publication
    early = rejection_of(lambda: alloc.cow_release_sources(txn))
    alloc = fx.fixture_0x05b_forked()
    r = lifecycle.cow_append(alloc, "D", 900, expected_generation=1,
                             expected_table_version=alloc.request("D").table_version)
    d = alloc.request("D")
    out: list[tuple[str, Any, Any]] = [
        ("COW sources released while the copy is in flight rejected as", early, AllocRejection.STEP_OUT_OF_ORDER),
        ("0x05A COW cost: rows, payload, append write, traffic, new capacity",
         (r.copied_rows, r.copy_payload_bytes, r.append_write_bytes, r.copy_traffic_bytes, r.new_capacity_bytes),
         (2, 128 * KIB, 64 * KIB, 320 * KIB, MIB)),
        ("COW append: D's tails, context, version, epoch",
         ((d.tables[0][-1].block_id, d.tables[0][-1].generation), (d.tables[1][-1].block_id, d.tables[1][-1].generation),
          d.context_tokens, d.table_version, alloc.epoch), ((1003, 12), (2003, 6), 35, 2, 44))]
    lifecycle.truncate(alloc, "D", 32)
    d = alloc.request("D")
    out.append(("truncate(D, 32): blocks per group, version, free queues",
                ([len(t) for t in d.tables], d.table_version, [alloc.pools[g].queue_order() for g in (0, 1)]),
                ([2, 2], 3, [[1003], [2003]])))
    f = alloc.allocate("F", list(range(500, 516)))
    out.append(("allocate(F, 16) reuses", [(t[0].block_id, t[0].generation) for t in f.published_tables],
                [(1003, 13), (2003, 7)]))
    out.append(("cache block 3 of D's two-block table rejected as",
                rejection_of(lambda: lifecycle.cache_block(alloc, "D", 3, "D/3")), AllocRejection.BAD_LOGICAL_BLOCK))
    # 0x05D/0x04F: a fault before publication rolls the COW append back: the receipt says ROLLED_BACK, publishes
    # no row and no block, and the epoch stays 43
    alloc = fx.fixture_0x05b_forked()
    alloc.fault_after.add(("cow_reserve", 0))
    rb = alloc.append("D", 900, expected_generation=1, expected_table_version=alloc.request("D").table_version)
    out.append(("COW append rolled back: outcome, useful rows, new blocks, copied rows, epoch",
                (rb.outcome, rb.useful_new_rows, rb.new_physical_blocks, rb.copied_rows, rb.allocator_epoch_after),
                ("ROLLED_BACK", 0, 0, 0, 43)))
    # a request id admitted again after it ended gets the next request generation each time (1, then 2, then 3)
    lifecycle.cache_block(alloc, "D", 0, "D/0")
    gens = []
    for _ in range(2):
        lifecycle.release(alloc, "D")
        gens.append(lifecycle.prefix_hit(alloc, "D", ["D/0"]).request_generation)
    out.append(("D re-admitted twice through a prefix hit: generations", gens, [2, 3]))
    # 0x04F: after publication history stays; compensation publishes a successor undoing the receipt's effect: an
    # allocation is cancelled (the request is gone), an append truncated back (D's 34 tokens and 3 blocks a group)
    alloc = fx.fixture_0x05b_forked()
    made = alloc.allocate("F", list(range(500, 516)))
    # 0x05E: only a suffix may go; D's last logical block (2 of 3, P = 16) drops to 32 tokens, block 1 is interior
    dropped = fx.fixture_0x05b_forked()
    lifecycle.drop_logical_block(dropped, "D", 2)
    out.append(("D's context after dropping its last logical block; its interior block 1 rejected as",
                (dropped.request("D").context_tokens,
                 rejection_of(lambda: lifecycle.drop_logical_block(fx.fixture_0x05b_forked(), "D", 1))),
                (2 * 16, AllocRejection.INTERIOR_BLOCK_REMOVAL)))
    comp = lifecycle.compensate(alloc, made)
    first = (comp.outcome, "F" in alloc.requests)
    # the successor writes no row and takes no block; its reference deltas are the allocation's, negated
    out.append(("compensation of F's allocation: useful rows, new blocks, refcount deltas",
                (comp.useful_new_rows, comp.new_physical_blocks, comp.refcount_deltas),
                (0, 0, tuple((h, -d) for h, d in made.refcount_deltas))))
    grown = lifecycle.cow_append(alloc, "D", 900, expected_generation=1,
                                 expected_table_version=alloc.request("D").table_version)
    undone = (*first, lifecycle.compensate(alloc, grown).outcome, alloc.request("D").context_tokens,
              [len(t) for t in alloc.request("D").tables])
    out.append(("compensate F's allocation, then D's append: outcomes, F live, D's context and blocks", undone,
                ("COMPENSATED", False, "COMPENSATED", 34, [3, 3])))
    return out


def traversal_0x0A() -> list[tuple[str, Any, Any]]:
    """0x0A: decoding B (25 tokens, g1 blocks 2000, 2001 at P = 16) told T = 24 reads ceil(24/16) = 2 tiles, the
    last 24 mod 16 = 8 rows; 0x0BI's chunk ledger: 8 x 64 + 96 = 608 logical rows, 160 unique, 448 saved, at 512 B
    a row 304, 80 and 224 KiB; at 16-token chunks 40 ordinary and 12 shared chunks, 32 partial states; 0x0AB: lengths
    [64, 63, 17, 1] at P_k = 16 need n_r = 4, 4, 2, 1 blocks: dense 4 x 4 = 16 cells, used 11, padded 5 (int32: 64,
    44, 20 B)."""
    from kvexact.reference.blockmap import expand_block_table
    from kvexact.reference.labs.translate import loop4_snapshot
    from kvexact.reference.traversal import (
        chunk_ledger,
        decode_traversal,
        geometry_table,
        page_group_staircase,
        ragged_table_ledger,
    )

    steps = decode_traversal(loop4_snapshot(), "B", 1, context_tokens=24)
    c = chunk_ledger(16)
    kib = 1024
    ragged = ragged_table_ledger([64, 63, 17, 1], 16)
    return [("B told 24 tokens: blocks, rows", [(st.handle.block_id, st.rows_read) for st in steps], [(2000, 16), (2001, 8)]),
            ("0x0AB [64, 63, 17, 1] at P_k = 16: n_r, cells dense/used/padded", (ragged.blocks_per_request, (
                ragged.dense_cells, ragged.used_cells, ragged.padded_cells)), ((4, 4, 2, 1), (16, 11, 5))),
            ("0x0AB int32 bytes dense/used/padded", (ragged.dense_bytes, ragged.used_bytes, ragged.padded_bytes),
             (64, 44, 20)),
            ("0x0BI rows logical/unique/saved", (c.logical_rows, c.unique_rows, c.saved_rows), (608, 160, 448)),
            ("0x0BI bytes logical/unique/saved", (c.logical_bytes, c.unique_bytes, c.saved_bytes),
             (304 * kib, 80 * kib, 224 * kib)),
            ("0x0BI chunks ordinary/shared, partial states", (c.ordinary_chunks, c.shared_chunks, c.partial_states),
             (40, 12, 32)),
            # M_partial = N_partial (d_v b_O + 2 b_state): 128 FP16 values and two FP32 scalars a partial state
            ("0x0BI partial state bytes", c.partial_state_bytes, 32 * (128 * 2 + 2 * 4)),
            # 0x0AC: P_a = 32, P_k = 16: allocator ids [3, 7] become kernel ids [6, 7, 14, 15]
            ("0x0AC allocator [3, 7] at P_a 32, P_k 16: kernel ids", expand_block_table([3, 7], 32, 16), [6, 7, 14, 15]),
            # 0x0AA: T = 2049, P_part = 512: all five listed rows have five partitions, each BLOCK_SIZE divides
            # PARTITION_SIZE (num_blocks_per_partition = PARTITION_SIZE / BLOCK_SIZE)
            ("0x0AA five rows: partitions, blocks per partition x block size",
             [(g.partitions, g.blocks_per_partition * g.kernel_block_tokens) for g in geometry_table()], [(5, 512)] * 5),
            # 0x0BJ: vAttention's 64/128/256 KiB and 2 MiB page groups, 2,048 B rows: P_G = G / 2048 tokens,
            # N_G = ceil(T / P_G), W_G = N_G G - 2048 T at T = 1,024 and 1,025
            ("0x0BJ (G, T, P_G, N_G, W_G)", [(g.page_group_bytes, g.context_tokens, g.tokens_per_group, g.groups,
                                              g.waste_bytes) for g in page_group_staircase()],
             [(G, T, G // 2048, -(-T // (G // 2048)), -(-T // (G // 2048)) * G - 2048 * T)
              for G in (64 * kib, 128 * kib, 256 * kib, 2048 * kib) for T in (1024, 1025)])]


def vmm_0x06F() -> list[tuple[str, Any, Any]]:
    """0x06F: after D's row 8 commits (v23), D holds 9 valid tokens in three mapped bundles; a row is 2 heads x 4
    dims x 2 B = 16 B over 4 tensors (K0, V0, K1, V1), so valid 9 x 16 x 4 = 576 B of 3 x 256 = 768 mapped; a tensor
    of a layer past the second, or of a kind other than K and V, does not exist."""
    from kvexact.reference import vmm
    from kvexact.reference.labs.vmm import seed_trace_0x06F
    from kvexact.reference.rejections import rejection_of

    at = {t.label: t for t in seed_trace_0x06F()}
    led = vmm.check_state(at["v23"].state)
    config = at["v23"].state.config
    return [("v23 mapped, active valid, active slack bytes", (led.mapped_bytes, led.active_valid_bytes,
                                                              led.active_slack_bytes), (768, 576, 768 - 576)),
            ("v23 pool bytes", (led.pool_bytes, led.free_handle_bytes), (768, 0)),
            ("tensor index of K0, V0, K1, V1", [config.tensor_index(k, n) for n in (0, 1) for k in "KV"], [0, 1, 2, 3]),
            # A_VA = base(X, l) + r R: request slot r of K0 starts r R = r T_max H_kv d_h b = r 12 x 2 x 4 x 2 B in
            ("K0's token 0 of request slots 0, 1, 2: A_VA", [vmm.virtual_address(config, "K", 0, r, 0, 0, 0)
                                                            .virtual_address for r in range(3)],
             [r * 12 * 2 * 4 * 2 for r in range(3)]),
            ("K2, K3 and X0 of a two-layer manifest rejected as",
             [rejection_of(lambda k=k, n=n: config.tensor_index(k, n)) for k, n in (("K", 2), ("K", 3), ("X", 0))],
             [vmm.VmmRejection.COORDINATE_OUT_OF_RANGE] * 3)]


def shared_prefix_0x0BA() -> list[tuple[str, Any, Any]]:
    """0x0BA: merging the states of two disjoint key partitions gives the state of their union (same max, mass,
    output, key count), in either order; the empty state is the identity; a negative value width is refused."""
    from kvexact.reference import shared_prefix as sp
    from kvexact.reference.labs import shared_prefix as sp_lab
    from kvexact.reference.rejections import rejection_of

    q = (0.5, -1.0)
    keys = ((1.0, 0.0), (0.0, 1.0), (2.0, -1.0), (-1.0, 0.5))
    values = ((1.0, 2.0, 0.0), (0.0, 1.0, 3.0), (-2.0, 0.5, 1.0), (4.0, 0.0, -1.0))
    a, b = sp.partition_state(q, keys[:1], values[:1], 1.0, 3), sp.partition_state(q, keys[1:], values[1:], 1.0, 3)
    whole = sp.partition_state(q, keys, values, 1.0, 3)

    def rounded(st: sp.PartitionState) -> tuple[Any, ...]:
        return st.valid, round(st.m, 9), round(st.l, 9), tuple(round(x, 9) for x in st.u), st.c

    tree = sp_lab.SEED_TREE
    return [("a value width of -1 rejected as", rejection_of(lambda: sp.draw_fixture(tree, sp_lab.SEED_NUM_SEQS,
                                                                                 sp_lab.SEED_D_QK, -1, 0)),
             sp.SharedPrefixRejection.NEGATIVE_SIZE),
            ("merge(a, b) = state of the union", rounded(sp.merge_states(a, b)), rounded(whole)),
            ("merge(b, a) = state of the union", rounded(sp.merge_states(b, a)), rounded(whole)),
            ("merge with the empty state", rounded(sp.merge_states(sp.empty_state(3), a)), rounded(a))]


def shared_prefix_0x0BE() -> list[tuple[str, Any, Any]]:
    """0x0BE: on the four-sequence tree (d_qk 2, d_v 3, 2 B elements, 4 B state scalars) both partitioned schedules
    match the monolithic rows within 2.3e-16; 19 logical pairs, 10 unique rows, 9 saved; a 10 B row, 190 B and
    100 B of payload; 8 partial rows of 3 x 2 + 8 = 14 B, 112 B. 0x0BI's regular ledger (B 8, S 64, U_r 4 x 8 and
    4 x 16, 512 B rows, d_v 128 FP16, FP32 state) at P_c = 16: 608 / 160 / 448 rows, 304 / 80 / 224 KiB, 40 ordinary
    and 4 + 8 = 12 shared chunks, 8 x 4 = 32 partial rows of 128 x 2 + 8 = 264 B."""
    from kvexact.reference import shared_prefix as sp
    from kvexact.reference.labs import shared_prefix as sp_lab

    fx = sp_lab.seed_fixture()
    mono = sp.monolithic(fx)
    led = sp.ledger(sp_lab.SEED_TREE, sp_lab.SEED_NUM_SEQS, sp_lab.SEED_D_QK, sp_lab.SEED_D_V, threshold=1)
    reg = sp.regular_prefix_ledger(64, [8, 8, 8, 8, 16, 16, 16, 16], 512, 16, 128)
    kib = 1024
    return [("Hydragen and ChunkAttention within 2.3e-16 of the monolithic rows",
             (sp.max_abs_difference(mono, sp.hydragen(fx)) <= 2.3e-16,
              sp.max_abs_difference(mono, sp.chunk_attention(fx, threshold=1)[0]) <= 2.3e-16), (True, True)),
            ("a row against itself plus one differs by 1", sp.max_abs_difference([[1.0, 2.0]], [[1.0, 3.0]]), 1.0),
            ("0x0BE pairs logical/unique/saved, row bytes", (led.logical_pairs, led.unique_rows, led.saved_reads,
                                                            led.kv_row_bytes), (19, 10, 9, 10)),
            ("0x0BE payload baseline/shared", (led.baseline_kv_bytes, led.shared_kv_bytes), (190, 100)),
            ("0x0BE partial rows, row bytes, buffer", (led.partial_rows, led.partial_row_bytes, led.partial_buffer_bytes),
             (8, 14, 112)),
            ("0x0BI rows logical/unique/saved", (reg.logical_rows, reg.unique_rows, reg.saved_rows), (608, 160, 448)),
            ("0x0BI bytes baseline/shared/saved", (reg.baseline_bytes, reg.shared_bytes, reg.saved_bytes),
             (304 * kib, 80 * kib, 224 * kib)),
            ("0x0BI chunks ordinary/shared, partial rows, bytes", (reg.ordinary_chunks, reg.shared_chunks,
                                                                  reg.partial_rows, reg.partial_bytes),
             (40, 12, 32, 32 * 264))]


def hybrid_0x07C() -> list[tuple[str, Any, Any]]:
    """0x07C: with cache groups of 16- and 32-token blocks a hit is a multiple of lcm = 32 below the logits cap that
    every group serves: a published 64-token prompt gives a 65-token query 64 tokens (a 64-token query, capped at 63,
    32); once the 16-token group loses its first block, no group frontier is common and the hit is 0."""
    from kvexact.reference.hybrid import CacheGroup, HybridIndex

    prompt = list(range(100, 164))
    index = HybridIndex.empty([CacheGroup(16), CacheGroup(32)]).publish(prompt)
    query = [*prompt, 7]
    return [("hits of a 65- and a 64-token query", (index.lookup(query), index.lookup(prompt)), (64, 32)),
            ("hit after the 16-token group's block 0 is evicted", index.evict(0, prompt[:16]).lookup(query), 0)]


def prompt_modules_0x0CB() -> list[tuple[str, Any, Any]]:
    """0x0CB: the schema assigns each module its positions (laid out in order from 0, the members of a union at one
    start, the union as long as its longest member), and assembly returns the segments in declared position order
    whatever the prompt's item order (0x0CG's schema: system at 0..3, city at 6..8 after a 2-position gap, question
    at 9..10)."""
    from kvexact.reference import modules as pm
    from kvexact.reference import prompt_cache as pc
    from kvexact.reference.labs import modules as pm_lab
    from kvexact.reference.rejections import rejection_of

    schema = pc.parse_schema('<schema name="s" generation="1"><module name="a">one two three</module><union>'
                             '<module name="b">four five</module><module name="c">six</module></union></schema>')
    items = [pm.PromptItem("question", (7, 8), cached=False), pm.PromptItem("city", (501, 502, 503), True, "p0"),
             pm.PromptItem("system", (1, 2, 3, 4), cached=False)]
    segments = pm.assemble_declared_prompt("alice", "travel-plan", 2, items, pm_lab.SCHEMA,
                                           {("travel-plan", "city", "p0"): pm_lab.sample_receipt()}, pm_lab.NS,
                                           "sem-1", "lay-1")
    return [("module a, union members b and c: positions, end",
             ([schema.modules[n].position_ids for n in "abc"], schema.end), ([(0, 1, 2), (3, 4), (3,)], 5)),
            ("items question, city, system assemble as", [(g.module_id, g.source, g.position_ids) for g in segments],
             [("system", "compute", (0, 1, 2, 3)), ("city", "cache", (6, 7, 8)), ("question", "compute", (9, 10))]),
            ("a parameter without its length (the positions it reserves) rejected as", rejection_of(
                lambda: pc.parse_schema('<schema name="s" generation="1"><module name="a">one <param name="x"/> two'
                                      '</module></schema>')),
             pc.MarkupRejection.MISSING_ATTRIBUTE)]


def revocation_0x0CE() -> list[tuple[str, Any, Any]]:
    """0x0CE: t1 publishes and offloads an entry, a second t1 request executes on it (a receipt), then t1 is revoked
    in seven steps with the live lease cancelled; every invariant of NamespaceRevocation holds in every state."""
    from kvexact.reference import revocation as rv
    from kvexact.reference.labs import revocation as rv_lab

    plan = rv_lab.PUBLISH_T1 + [(rv.offload, (rv.Entry("t1", 0, 1),))] + rv_lab.LEASE_T1 + [
        (rv.execute, ("t1",))] + rv_lab.REVOKE_T1
    states = [rv.play(rv.RevState.init(), plan[:k])[0] for k in range(len(plan) + 1)]
    broken = sorted({name for st in states for name, holds in rv.INVARIANTS.items() if not holds(st)})
    import attrs

    done = states[-1]  # t1 revoked: done[t1] = 1; a gen-0 lease or index entry of t1 left behind breaks completeness
    return [("receipts issued", max(len(st.receipts) for st in states) > 0, True),
            ("invariants broken in some state", broken, []),
            ("RevocationComplete with t1's gen-0 lease, with its gen-0 index entry left behind",
             [rv.revocation_complete(attrs.evolve(done, leases=frozenset({rv.Held("t1", "t1", 0, 1)}))),
              rv.revocation_complete(attrs.evolve(done, index=frozenset({rv.Entry("t1", 0, 1)})))], [False, False]),
            # spec/NamespaceRevocation.tla: RevocationComplete asks gen >= done[ns], so a later generation is not stale
            ("RevocationComplete with a t1 lease, with an index entry, of generation 2 > done[t1] = 1",
             [rv.revocation_complete(attrs.evolve(done, leases=frozenset({rv.Held("t1", "t1", 2, 1)}))),
              rv.revocation_complete(attrs.evolve(done, index=frozenset({rv.Entry("t1", 2, 1)})))], [True, True])]


def adapter_protocol() -> list[tuple[str, Any, Any]]:
    """The adapter protocol the machines call (``reference/adapters.py``): the reference adapter (without its
    spec recorder) passes the name and arity check; an adapter whose ``append`` takes the request only (the
    machines pass request, token) is refused as a bad signature; a published request's full blocks are the cached
    prefixes (with and without a token stream), and a later request with its prompt hits them."""
    from kvexact.reference import adapters as ad

    class OneArgumentAppend(ad.ReferenceAdapter):
        def append(self, request: str) -> None:  # type: ignore[override]  # the planted bad signature
            return None

    def problem(adapter: Any) -> Any:
        try:
            ad.check_adapter(adapter)
        except ad.AdapterError as exc:
            return exc.problem
        return None

    def published(adapter: ad.ReferenceAdapter, prompt: list[int]) -> tuple[Any, ...]:
        adapter.start("r", prompt)
        adapter.cache("r")
        return adapter.cached_prefixes(), adapter.start("s", prompt).hit_tokens

    config = ad.AdapterConfig()  # 2-token blocks
    stream = list(range(1, 13))
    return [("reference adapter: problem", problem(ad.ReferenceAdapter(config, spec=None)), None),
            ("append(request) only: problem", problem(OneArgumentAppend(config, spec=None)), ad.AdapterProblem.METHOD_SIGNATURE),
            ("7 stream tokens published: cached prefixes, a second request's hit",
             published(ad.ReferenceAdapter(config, spec=None, stream=stream), stream[:7]),
             ([tuple(stream[:2]), tuple(stream[:4]), tuple(stream[:6])], 6)),
            ("5 tokens published without a stream: cached prefixes, hit",
             published(ad.ReferenceAdapter(config, spec=None), [5, 6, 7, 8, 9]), ([(5, 6), (5, 6, 7, 8)], 4))]


def fragmentation_0x02F() -> list[tuple[str, Any, Any]]:
    """0x02F's synthetic arena: free extents [1 MiB, 2 MiB] give F_ext = 1 - 2/3 = 1/3; a 2.5 MiB contiguous
    candidate is refused (no extent holds it) while a 2 MiB one fits; under a 1 MiB block pool the candidate needs
    ceil(2.5) = 3 blocks, so 5 or 3 free blocks hold it and 2 do not; a full arena's ratio is not_applicable."""
    from fractions import Fraction

    from kvexact.reference.ledgers import (
        NOT_APPLICABLE,
        block_pool_fit,
        contiguous_fit,
        external_fragmentation,
    )

    free, cand = [1 * MIB, 2 * MIB], 5 * MIB // 2
    return [("F_ext of [1, 2] MiB, of a full arena", (external_fragmentation(free), external_fragmentation([])),
             (Fraction(1, 3), NOT_APPLICABLE)),
            ("contiguous fit of 2.5 MiB, of 2 MiB", (contiguous_fit(free, cand), contiguous_fit(free, 2 * MIB)),
             (False, True)),
            ("block-pool fit of 2.5 MiB in 1 MiB blocks with 5, 3, 2 free",
             [block_pool_fit(n, cand, MIB) for n in (5, 3, 2)], [True, True, False])]


SEED_CASES: dict[str, Case] = {"radix 0x08F": radix_0x08F, "translate 0x03F": translate_0x03F, "ledger 0x0D": ledger_0x0D,
                               "prefix 0x07": prefix_0x07, "telemetry 0x0CF": telemetry_0x0CF,
                               "allocator 0x05E": allocator_0x05E, "keys 0x09B": keys_0x09B, "traversal 0x0A": traversal_0x0A, "vmm 0x06F": vmm_0x06F,
                               "shared prefix 0x0BA": shared_prefix_0x0BA, "shared prefix 0x0BE": shared_prefix_0x0BE,
                               "hybrid 0x07C": hybrid_0x07C, "prompt modules 0x0CB": prompt_modules_0x0CB,
                               "revocation 0x0CE": revocation_0x0CE,
                               "adapter protocol": adapter_protocol, "inputs refused": inputs_refused,
                               "fragmentation 0x02F": fragmentation_0x02F}



def vllm_scenario_s01() -> list[tuple[str, Any, Any]]:
    """docs/peers/vllm.md scenario 1 (measured on vLLM 0.33.0): 55 tokens admitted into 11 blocks, then 53 tokens
    hit the 3 cached full blocks (48 tokens) and take one new block; refs 2, 2, 2, 1, 1; 5 blocks free; freeing r1
    leaves r0 its blocks, and once both are freed the same 53 tokens hit 3 blocks of the free queue."""
    from kvexact.reference.peers.vllm import VllmConfig, VllmKVCacheManager

    m = VllmKVCacheManager.create(VllmConfig(11, 16))
    c48 = [0] * 16 + [1] * 16 + [2] * 16
    got = []
    for rid, tokens in (("r0", c48 + [3] * 7), ("r1", c48 + [3] * 5)):
        req = m.make_request(rid, tokens)
        hit = m.get_computed_blocks(req)
        m, receipt = m.allocate_slots(req, req.num_tokens - hit.num_computed_tokens, hit.num_computed_tokens,
                                      hit.block_ids)
        m.check()
        got.append((hit.num_computed_tokens, hit.block_ids, receipt.block_ids))
    refs = ([m.pool.ref_cnt[b] for b in range(1, 6)], m.pool.num_free_blocks)
    usage = m.pool.usage()  # get_usage() = 1 - free / (num_blocks - 1) = 1 - 5 / 10
    m = m.free("r1")[0]  # r0 keeps its four blocks
    r0_blocks = m.blocks_of("r0")
    m = m.free("r0")[0]
    r2 = m.make_request("r2", c48 + [3] * 5)
    hit = m.get_computed_blocks(r2)  # notes step 5: cdiv(53, 16) - 3 hits = 1, plus the 3 hits with ref_cnt 0
    return [("r0 hit, new blocks", got[0], (0, (), (1, 2, 3, 4))), ("r1 hit, new blocks", got[1], (48, (1, 2, 3), (5,))),
            ("refs of blocks 1..5, free blocks", refs, ([2, 2, 2, 1, 1], 5)),
            ("usage with 5 of 10 usable blocks free", usage, 1 - 5 / 10),
            ("r0's blocks after r1 is freed; free blocks after both", (r0_blocks, m.pool.num_free_blocks),
             ((1, 2, 3, 4), 10)),
            ("r2 (r1's tokens) after both freed: hits, blocks to allocate",
             (hit.block_ids, m.num_blocks_to_allocate("r2", r2.num_tokens, hit.block_ids)), ((1, 2, 3), 1 + 3))]


def vllm_adapters_s01() -> list[tuple[str, Any, Any]]:
    """docs/peers/vllm.md scenario 1 through the profile's two adapters: the user-facing ``VllmAdapter`` (r0's table
    1..4, r1 hits 48 tokens and holds 1, 2, 3 and the new 5) and the conformance protocol adapter with one group of
    10 blocks (11 with the null block): r1's start reports the 48-token hit and its table is 1, 2, 3, 5."""
    from kvexact.reference.adapters import AdapterConfig
    from kvexact.reference.peers.vllm_adapter import VllmAdapter, project_kv_allocation
    from kvexact.reference.peers.vllm_protocol import VllmProtocolAdapter

    c48 = [0] * 16 + [1] * 16 + [2] * 16
    user = VllmAdapter(11, 16)
    outcomes = [user.allocate(rid, c48 + [3] * n) for rid, n in (("r0", 7), ("r1", 5))]
    proto = VllmProtocolAdapter(AdapterConfig(block_tokens=16, num_groups=1, blocks_per_group=10, row_bytes=(8,)))
    starts = [proto.start(rid, c48 + [3] * n) for rid, n in (("r0", 7), ("r1", 5))]
    return [("VllmAdapter r0, r1: hit, table", [(o.num_hit_tokens, o.block_ids) if o else None for o in outcomes],
             [(0, (1, 2, 3, 4)), (48, (1, 2, 3, 5))]),
            ("protocol adapter r0, r1: accepted, hit", [(r.accepted, r.hit_tokens) for r in starts],
             [(True, 0), (True, 48)]),
            ("protocol adapter r1's table", proto.table("r1", 0), [1, 2, 3, 5]),
            # the KVAllocation projection: the three cached blocks full, r0's tail 55 - 48 = 7 rows, r1's 53 - 48 = 5
            ("projected rows of blocks 1..10", dict(project_kv_allocation(user.manager, {"r0": 55, "r1": 53})["rows"][0]),
             {1: 16, 2: 16, 3: 16, 4: 7, 5: 5, **{b: 0 for b in range(6, 11)}})]


def vllm_event_log() -> list[tuple[str, Any, Any]]:
    """One event log of the vLLM profile under a random stream (seed 1, 20 operations: stores, removals, clears), over the wire format,
    accepted by KVAllocation through the event mapping."""
    from kvexact.conformance import vllm_events as ve
    from kvexact.reference.peers import vllm_wire as wire

    data = b"".join(wire.encode_batch(b, ts=0.0) for b in wire.random_stream_log(1, 20))
    events = list(ve.events_from_batches(ve.batches_from_bytes(data, "log")))
    result = ve.validate_events(events, blocks=8, requests=2)
    return [("vLLM profile log accepted by KVAllocation", result.ok or result.summary(), True)]


def sglang_event_log() -> list[tuple[str, Any, Any]]:
    """One event log of the SGLang profile under a random stream (seed 0, 30 operations), accepted by
    RadixIndex through the event mapping."""
    from kvexact.conformance import sglang_events as se
    from kvexact.reference.peers.sglang_stream import random_event_log

    events = [(f"event {i}", e) for i, e in enumerate(random_event_log(0, 30), start=1)]
    result = se.validate_events(events)
    return [("SGLang profile log accepted by RadixIndex", result.ok or result.summary(), True)]


def vllm_units() -> list[tuple[str, Any, Any]]:
    """docs/peers/vllm.md: the prefix-cache key is the block hash + the group id as 4 big-endian bytes (an id that
    does not fit is refused); ``allocate_slots`` with no new and no computed tokens is refused (vLLM raises)."""
    from kvexact.reference.peers import vllm_hashing as vh
    from kvexact.reference.peers.vllm import ManagerRejection, VllmConfig, VllmKVCacheManager
    from kvexact.reference.rejections import rejection_of

    h = bytes(32)
    m = VllmKVCacheManager.create(VllmConfig(11, 16))
    req = m.make_request("r0", [1] * 20)
    return [("key of group 258", vh.key_with_group(h, 258), h + b"\x00\x00\x01\x02"),
            ("group id 2**32 rejected as", rejection_of(lambda: vh.key_with_group(h, 2 ** 32)),
             vh.HashRejection.BAD_GROUP_ID),
            ("a 3-byte key (no room for the 4-byte group id) split, rejected as",
             rejection_of(lambda: vh.split_key(b"abc")), vh.HashRejection.BAD_KEY),
            ("allocate_slots(0 new, 0 computed) rejected as", rejection_of(lambda: m.allocate_slots(req, 0, 0)),
             ManagerRejection.NO_TOKENS_TO_SCHEDULE)]


def sglang_units() -> list[tuple[str, Any, Any]]:
    """docs/peers/sglang.md: 0.5.23's ``match_kv_cache`` matches the whole key but caps ``num_matched_prefix_tokens``
    at input_len - 1 (8 cached tokens: 7 for an 8-token input, 8 for a 9-token one); ``inc_lock_ref`` moves a
    node's tokens from evictable to protected when its lock goes 0 -> 1, ``dec_lock_ref`` back on 1 -> 0, and
    evictable + protected = total (I1)."""
    from kvexact.reference.peers.sglang import RadixCache, Req, match_kv_cache
    from kvexact.reference.peers.sglang_key import RadixKey, SGLangRejection
    from kvexact.reference.rejections import rejection_of

    c = RadixCache()
    c.insert([1, 2, 3, 4, 5, 6, 7, 8])
    got = []
    for n in (8, 9):
        r = Req(f"r{n}", list(range(1, n + 1)))
        res = match_kv_cache(c, r)
        got.append((res.device_prefix_len, r.num_matched_prefix_tokens))
    node = c.match_prefix([1, 2, 3]).last_device_node  # splits the 8-token edge at 3
    locked = (c.inc_lock_ref(node).delta, c.sizes())
    unlocked = (c.dec_lock_ref(node).delta, c.sizes())
    twice = [c.inc_lock_ref(node).delta, c.inc_lock_ref(node).delta, c.dec_lock_ref(node).delta]
    held = c.sizes()  # locked twice, unlocked once: still 1, still protected
    twice.append(c.dec_lock_ref(node).delta)
    return [("match of 8 and 9 tokens: prefix, capped match", got, [(8, 7), (8, 8)]),
            ("lock of the 3-token node: delta, (total, evictable, protected)", locked, (-3, (8, 5, 3))),
            ("unlock: delta, sizes", unlocked, (3, (8, 8, 0))),
            ("lock, lock, unlock, unlock: deltas; sizes after the first unlock", (twice, held),
             ([-3, 0, 0, 3], (8, 5, 3))),
            ("a bool token rejected as", rejection_of(lambda: RadixKey.of([1, True])), SGLangRejection.BAD_TOKEN),
            # §1: match rounds the 7-unit common prefix down to a multiple of the page size: 6 at 2, 4 at 4
            ("match of a 7-unit common prefix at page sizes 2, 4; page_aligned(4) length",
             ([RadixKey.of([1, 2, 3, 4, 5, 6, 7, 8]).match(RadixKey.of([1, 2, 3, 4, 5, 6, 7, 9]), ps) for ps in (2, 4)],
              len(RadixKey.of([1, 2, 3, 4, 5, 6, 7]).page_aligned(4))), ([6, 4], 4))]


def sglang_paged() -> list[tuple[str, Any, Any]]:
    """docs/peers/sglang.md §7: the paged allocator (page size > 1) numbers pages from 1 and hands out whole pages;
    ``free`` releases every page a freed slot touches; ``available_size`` = (free + staged pages) x page size. On
    the adapter (8 slots in pages of 2): 4 reserved slots are pages 1, 2 = slots 2..5, the pool is slots 2..9, and a
    tree slot holds the token path up to its token. §6: a queued request whose tokens an earlier queued request
    shares for at least 32 tokens (the deprioritize threshold) is deprioritized; 31 shared tokens are not."""
    from kvexact.reference.peers.sglang import RadixCache, Req
    from kvexact.reference.peers.sglang_adapter import SGLangAdapter
    from kvexact.reference.peers.sglang_pool import PagedTokenToKVPoolAllocator
    from kvexact.reference.peers.sglang_sched import compute_prefix_matches

    pool = PagedTokenToKVPoolAllocator(16, 4)
    slots = pool.alloc(8)
    taken = pool.available_size()
    pool.free([slots[0], slots[4]])  # one slot of each of the two pages
    sg = SGLangAdapter(8, page_size=2)
    got = sg.reserve("a", 4)
    sg.insert([1, 2, 3, 4], got or (), "a")
    p = sg.partition()
    base = list(range(1, 33))
    queue = [Req("r0", [*base, 50, 51]), Req("r1", [*base, 60, 61]), Req("r2", [*base[:31], 70, 71])]
    return [("paged alloc(8) of 16 slots in pages of 4: slots, available", (sorted(slots or ()), taken),
             (list(range(4, 12)), 8)),
            ("free of one slot in each page: available, free pages", (pool.available_size(),
                                                                     sorted(pool.free_pages + pool.release_pages)),
             (16, [1, 2, 3, 4])),
            ("adapter in pages of 2: reserved 4, pool, tree, free slots",
             (got, p.pool_slot_ids, p.tree_slot_ids, p.free_slot_ids),
             ((2, 3, 4, 5), tuple(range(2, 10)), (2, 3, 4, 5), (6, 7, 8, 9))),
            ("adapter: token path of each tree slot", sg.slot_tokens(),
             {2: ((None, None), (1,)), 3: ((None, None), (1, 2)), 4: ((None, None), (1, 2, 3)),
              5: ((None, None), (1, 2, 3, 4))}),
            ("queued requests sharing 32 and 31 tokens: deprioritized",
             sorted(compute_prefix_matches(RadixCache(), queue).deprioritized), [1])]


def vllm_hybrid_s17() -> list[tuple[str, Any, Any]]:
    """docs/peers/vllm.md scenario 17 (FA + 2 x SWA window 32, block size 16): r0 = C48 + [3] * 7 stored, then
    C48 + [3] * 5 looked up after removing keys (hash index, group): {(0,1),(0,2)} -> 3 blocks, {(0,0)} -> 0,
    {(2,0)} -> 2, {(1,1)} -> 1 (16 tokens a block)."""
    from kvexact.reference.peers.vllm_hybrid import GroupSpec, stored_then_lookup

    specs = [GroupSpec(16), GroupSpec(16, 32), GroupSpec(16, 32)]
    c48 = [0] * 16 + [1] * 16 + [2] * 16
    stored, query = [c48 + [3] * 7], c48 + [3] * 5
    removed = [[(0, 1, 0), (0, 2, 0)], [(0, 0, 0)], [(0, 0, 2)], [(0, 1, 1)]]
    return [("hit tokens after each removal", [stored_then_lookup(specs, stored, r, query).hit_length for r in removed],
             [48, 0, 32, 16])]


def vllm_multimodal_s09() -> list[tuple[str, Any, Any]]:
    """docs/peers/vllm.md scenario 9 (block size 16): images (offset, length, id) (11, 10, aaa), (30, 18, bbb), (48, 7,
    ccc) key block 0 with ("mm", "aaa", 11), block 1 with ("mm", "aaa", -5), ("mm", "bbb", 14), block 2 with
    ("mm", "bbb", -2), and, once 5 output tokens complete block 3, block 3 with ("mm", "ccc", 0); the measured
    example: an image at offset 0 keys block 0 with ("mm", id, 0) between the LoRA and the salt."""
    from kvexact.reference.peers import vllm_hashing as vh

    hasher = vh.BlockHasher(16)
    mm = vh.RequestExtras(mm=(vh.MMFeature("aaa", 11, 10), vh.MMFeature("bbb", 30, 18), vh.MMFeature("ccc", 48, 7)))
    prompt = [*range(10), *[-1] * 6, *[-1] * 4, *range(10, 20), *[-1] * 2, *[-1] * 16, *[-1] * 7, *[100] * 4]
    hashes, keys = hasher.extend(prompt, mm, (), ())
    _h, more = hasher.extend([*prompt, *[5] * 5], mm, hashes, keys)
    first = vh.RequestExtras(lora=vh.LoraRef("name", "path"), mm=(vh.MMFeature("hash1", 0, 20),), cache_salt="salt")
    return [("prompt of 59 tokens: extra keys of its 3 full blocks", list(keys),
             [(("mm", "aaa", 11),), (("mm", "aaa", -5), ("mm", "bbb", 14)), (("mm", "bbb", -2),)]),
            ("after 5 output tokens: block 3's extra keys", more[3], (("mm", "ccc", 0),)),
            ("LoRA + image at offset 0 + salt: block 0's extra keys",
             vh.block_extra_keys(first, 0, 16, 0)[0], (("lora", "name", "path"), ("mm", "hash1", 0),
                                                        ("cache_salt", "salt")))]


def sglang_pool_units() -> list[tuple[str, Any, Any]]:
    """docs/peers/sglang.md §7: ``TokenToKVPoolAllocator`` (page size 1) hands out slots 1..size from the front; by
    default (no ``need_sort``) ``free`` appends to the back of ``free_pages``, so freed slots come back last."""
    from kvexact.reference.peers.sglang_pool import TokenToKVPoolAllocator

    pool = TokenToKVPoolAllocator(4)
    first = pool.alloc(2)
    pool.free([2, 1])
    return [("alloc(2) of 4 slots", first, [1, 2]),
            ("free [2, 1], then alloc(4)", pool.alloc(4), [3, 4, 2, 1])]


def vllm_cap_s16() -> list[tuple[str, Any, Any]]:
    """docs/peers/vllm.md scenario 16 (FA, block size 16): after caching C48, the identical 48-token prompt hits 32
    tokens (blocks 1, 2: the num_tokens - 1 cap), the 49-token C48 + [5] hits 48, and max_cache_hit_length=48 gives
    48."""
    from kvexact.reference.peers.vllm import VllmConfig, VllmKVCacheManager

    m = VllmKVCacheManager.create(VllmConfig(11, 16))
    c48 = [0] * 16 + [1] * 16 + [2] * 16
    r0 = m.make_request("r0", c48)
    m, _receipt = m.allocate_slots(r0, 48, 0, ())
    same = m.get_computed_blocks(m.make_request("r1", c48))
    longer = m.get_computed_blocks(m.make_request("r2", [*c48, 5]))
    capped = m.get_computed_blocks(m.make_request("r3", [*c48, 5]), max_cache_hit_length=48)
    return [("identical 48 tokens: hit, blocks", (same.num_computed_tokens, same.block_ids), (32, (1, 2))),
            ("49 tokens; max_cache_hit_length 48: hits", (longer.num_computed_tokens, capped.num_computed_tokens),
             (48, 48))]


def vllm_hybrid_s18() -> list[tuple[str, Any, Any]]:
    """docs/peers/vllm.md scenario 18 (full attention in blocks of 32, a window of 32 over blocks of 16, hashes of 16):
    r0's 112 of 160 distinct tokens published; the first 113 tokens hit 96 with group lengths [3, 6], 97 tokens hit
    96; after the window group's keys of fine hashes 5 and 6 are removed, 113 tokens hit 64 with lengths [2, 4]."""
    from kvexact.reference.peers.vllm_hybrid import GroupSpec, stored_then_lookup

    specs = [GroupSpec(32), GroupSpec(16, 32)]
    t = list(range(160))
    got = [stored_then_lookup(specs, [t[:112]], removed, t[:n]) for removed, n in (([], 113), ([], 97),
                                                                                   ([(0, 1, 5), (0, 1, 6)], 113))]
    return [("hits of 113, 97, 113 after the removal", [h.hit_length for h in got], [96, 96, 64]),
            ("group lengths of 113, and of 113 after the removal", [[len(b) for b in got[i].blocks_by_group]
                                                                   for i in (0, 2)], [[3, 6], [2, 4]])]


PEER_CASES: dict[str, Case] = {"vllm s01": vllm_scenario_s01, "vllm event log": vllm_event_log,
                               "sglang event log": sglang_event_log, "vllm units": vllm_units,
                               "sglang units": sglang_units, "sglang paged": sglang_paged,
                               "vllm hybrid s17": vllm_hybrid_s17, "vllm adapters s01": vllm_adapters_s01,
                               "vllm multimodal s09": vllm_multimodal_s09, "sglang pool units": sglang_pool_units,
                               "vllm cap s16": vllm_cap_s16, "vllm hybrid s18": vllm_hybrid_s18}
