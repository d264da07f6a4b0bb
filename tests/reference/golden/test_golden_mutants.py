"""The golden cases bite: each named case fails on a mutant that survived an earlier mutation sample
(cosmic-ray's mutated line, applied to a copy of the module) or on a planted peer bug."""

from __future__ import annotations

import types

import golden
import pytest
from golden import mutant_module

from kvexact.reference import (
    adapters,
    allocator,
    blockmap,
    formulas,
    formulas_seed,
    hybrid,
    keys,
    ledgers,
    lifecycle,
    modules,
    prefix,
    prompt_cache,
    radix,
    revocation,
    sessions,
    shared_prefix,
    telemetry,
    translate,
    traversal,
    vmm,
)

# The three survivors of the first mutation sample (README, mutation testing) and the capped-hit branch of the
# prefix cache that no quick check executed.
SURVIVORS = [
    (radix, "check_state", "edges = [n for n in nodes.values() if n.node_id != ROOT]",
     "edges = [n for n in nodes.values() if n.node_id == ROOT]", "radix 0x08F: protected/evictable"),
    (radix, "check_state", "edges = [n for n in nodes.values() if n.node_id != ROOT]",
     "edges = [n for n in nodes.values() if n.node_id <= ROOT]", "radix 0x08F: protected/evictable"),
    (translate, "resolve_kv_address", "if not base <= address < end:", "if not base < address < end:",
     "translate 0x03F"),
    (ledgers, "compute_ledger", "unique_slots=len(unique_ids) * P,", "unique_slots=len(unique_ids) + P,",
     "ledger 0x0D: unique blocks, materialized rows, slots"),
    (ledgers, "compute_ledger", "unique_slots=len(unique_ids) * P,", "unique_slots=len(unique_ids) // P,",
     "ledger 0x0D: unique blocks, materialized rows, slots"),
]


# Survivors of the second sample (seed 1, 150 mutants, six checks; README, mutation testing).
SURVIVORS += [
    (keys, "_check_block_size", "block_size_tokens <= 0:", "block_size_tokens <= 1:", "keys 0x09B"),
    (traversal, "decode_traversal", "if T > request.context_length_tokens:",
     "if T is not request.context_length_tokens:", "traversal 0x0A: Rejected: TraversalRejection.READ_PAST_VISIBLE"),
    (traversal, "chunk_ledger", "logical_bytes=logical * row_bytes,", "logical_bytes=logical // row_bytes,",
     "traversal 0x0A: 0x0BI bytes"),
    (prefix, "PrefixCache.lookup", "not 0 <= req.semantic_match_tokens <= s_prompt",
     "not 0 != req.semantic_match_tokens <= s_prompt", "prefix 0x07: Rejected: PrefixRejection.SEMANTIC_MATCH_OUT_OF_RANGE"),
    (ledgers, "validate_fixture", "set(free) != pool - reachable", "set(free) > pool - reachable",
     "ledger 0x0D: free queue without idle block 107"),
    (vmm, "ledgers", "if s.active) * c.row_bytes * c.tensors", "if s.active) >> c.row_bytes * c.tensors",
     "vmm 0x06F: v23 mapped, active valid"),
    (shared_prefix, "merge_states", "math.exp(a.m - m), math.exp(b.m - m)", "math.exp(a.m + m), math.exp(b.m - m)",
     "shared prefix 0x0BA: merge(a, b)"),
    (shared_prefix, "merge_states", "a.l * ea + b.l * eb", "a.l - ea + b.l * eb", "shared prefix 0x0BA: merge(a, b)"),
    (shared_prefix, "draw_fixture", "if d_qk < 0 or d_v < 0:", "if d_qk < 0 or d_v < -1:",
     "shared prefix 0x0BA: a value width of -1"),
    (lifecycle, "truncate", "table_version=rec.table_version + 1,", "table_version=rec.table_version ** 1,",
     "allocator 0x05E: truncate(D, 32)"),
    (lifecycle, "cache_block", "if not 0 <= logical_block < len(table):", "if not 0 <= logical_block != len(table):",
     "allocator 0x05E: IndexError"),
]


# Not executed by any quick check in the seed-1 sample (lines no quick case ran), now run by a case that fails.
SURVIVORS += [
    (traversal, "RaggedTableLedger.padded_bytes", "return self.padded_cells * self.entry_bytes",
     "return self.padded_cells ** self.entry_bytes", "traversal 0x0A: 0x0AB int32 bytes"),
    (allocator, "AllocationReceipt.copy_traffic_bytes", "return 2 * self.copy_payload_bytes + self.append_write_bytes",
     "return 2 * self.copy_payload_bytes - self.append_write_bytes", "allocator 0x05E: 0x05A COW cost"),
    (shared_prefix, "max_abs_difference", "abs(x - y)", "abs(x + y)", "shared prefix 0x0BE: Hydragen and ChunkAttention"),
    (shared_prefix, "ledger", "row_bytes = (d_qk + d_v) * kv_elem_bytes", "row_bytes = (d_qk + d_v) & kv_elem_bytes",
     "shared prefix 0x0BE: 0x0BE pairs"),
    (shared_prefix, "regular_prefix_ledger", "logical = batch * shared_tokens + sum(suffix_tokens)",
     "logical = batch / shared_tokens + sum(suffix_tokens)", "shared prefix 0x0BE: 0x0BI rows"),
    (shared_prefix, "regular_prefix_ledger", "logical, unique, logical - unique, logical * row_bytes",
     "logical, unique, logical // unique, logical * row_bytes", "shared prefix 0x0BE: 0x0BI rows"),
    (shared_prefix, "regular_prefix_ledger", "(logical - unique) * row_bytes,", "(logical - unique) >> row_bytes,",
     "shared prefix 0x0BE: 0x0BI bytes"),
    (radix, "prefill_estimate", "compute = receipt.suffix_interval[1] - receipt.matched_tokens",
     "compute = receipt.suffix_interval[0] - receipt.matched_tokens", "radix 0x08F: 0x08G prefill"),
    (modules, "assemble_declared_prompt", "key=lambda s: s.position_ids[0] if s.position_ids else -1",
     "key=lambda s: s.position_ids[0] if not s.position_ids else -1", "prompt modules 0x0CB: items question"),
    (prompt_cache, "parse_schema", 'if c.tag == "union")):', 'if c.tag < "union")):',
     "prompt modules 0x0CB: Rejected: MarkupRejection.STRAY_TEXT"),
    (prompt_cache, "parse_schema", 'if child.tag == "module":', 'if child.tag != "module":',
     "prompt modules 0x0CB: Rejected: MarkupRejection.UNKNOWN_ELEMENT"),
    (prefix, "PrefixCache._tail_bundle", "self.alloc.pools[h.cache_group_id].blocks[h.block_id].generation !=",
     "self.alloc.pools[h.cache_group_id].blocks[h.block_id].generation <",
     "prefix 0x07: 0x07C A's tail block reused"),
    (vmm, "VmmConfig.tensor_index", "if kind not in TENSOR_KINDS or not 0 <= layer < self.layers:",
     "if kind not in TENSOR_KINDS and not 0 <= layer < self.layers:", "vmm 0x06F: ValueError"),  # X0 reaches .index
    (vmm, "VmmConfig.tensor_index", "if kind not in TENSOR_KINDS or not 0 <= layer < self.layers:",
     "if kind not in TENSOR_KINDS or not 0 <= layer is not self.layers:", "vmm 0x06F: K2, K3 and X0"),
    (adapters, "ReferenceAdapter._publish", "self.keys[tokens[: (j + 1) * p]] = digest.hex()",
     "self.keys[tokens[: (j & 1) * p]] = digest.hex()", "adapter protocol: 7 stream tokens published"),
    (hybrid, "converged_hit", "range(cap - cap % a, 0, -a)", "range(cap - cap / a, 0, -a)",
     "hybrid 0x07C: TypeError"),
    (hybrid, "HybridIndex.evict", "if c.get(tuple(prefix), 0) > 0:", "if c.get(tuple(prefix), 0) > 1:",
     "hybrid 0x07C: hit after the 16-token group's block 0 is evicted"),
]


def patch_mutant(monkeypatch, module: types.ModuleType, name: str, before: str, after: str) -> None:
    """Replace ``module.name`` (a function, or ``Class.method`` patched on its class) by its mutated copy."""
    owner, _, attr = name.rpartition(".")
    copy = mutant_module(monkeypatch, module, before, after)
    monkeypatch.setattr(getattr(module, owner) if owner else module, attr,
                        getattr(getattr(copy, owner) if owner else copy, attr))


@pytest.mark.parametrize("module, name, before, after, case", SURVIVORS, ids=lambda v: getattr(v, "__name__", None))
def test_a_former_survivor_fails_its_golden_case_by_case(monkeypatch, module, name, before, after, case):
    patch_mutant(monkeypatch, module, name, before, after)
    result = golden.run_case(case.split(":")[0])
    assert result.passed is False
    assert case in result.detail, result.detail


def test_the_prefix_caps_hit_branch_mutant_fails_its_golden_case(monkeypatch):
    copy = mutant_module(monkeypatch, prefix, "        if req.requires_logits:\n            runtime = full_hit_tokens_capped",
                         "        if not req.requires_logits:\n            runtime = full_hit_tokens_capped")
    monkeypatch.setattr(prefix.PrefixCache, "lookup", copy.PrefixCache.lookup)
    result = golden.run_case("prefix 0x07")
    assert result.passed is False and "prefix 0x07: 0x09C P=8 without logits" in result.detail, result.detail


def test_a_receipt_invariant_inverted_fails_its_golden_case(monkeypatch):
    """Machine-line survivor revocation (NoReceiptAfterRevocation's `>=` -> `<`): the 0x0CE scenario's receipt."""
    from kvexact.reference import revocation

    copy = mutant_module(monkeypatch, revocation, "return all(x.gen >= s.done[x.ns] for x in s.receipts)",
                         "return all(x.gen < s.done[x.ns] for x in s.receipts)")
    monkeypatch.setitem(revocation.INVARIANTS, "NoReceiptAfterRevocation", copy.no_receipt_after_revocation)
    result = golden.run_case("revocation 0x0CE")
    assert result.passed is False, result.detail
    assert "revocation 0x0CE: invariants broken in some state = ['NoReceiptAfterRevocation']" in result.detail


def test_a_cache_salt_ignored_by_the_key_fails_its_golden_case(monkeypatch):
    from kvexact.reference import keys

    real = keys.hash_full_blocks
    monkeypatch.setattr(prefix, "hash_full_blocks",
                        lambda inputs, *a, **k: real(keys.KeyInputs(inputs.tokens), *a, **k))
    result = golden.run_case("prefix 0x07")
    assert result.passed is False and "another cache salt" in result.detail, result.detail


def test_an_alert_on_one_condition_fails_its_golden_case(monkeypatch):
    from kvexact.reference import telemetry

    monkeypatch.setattr(telemetry, "evaluate_alerts", lambda *a, **k: ("allocator_exhaustion",))
    result = golden.run_case("telemetry 0x0CF")
    assert result.passed is False and "telemetry 0x0CF: alerts, free 0 only" in result.detail


def _drop_first(kind: str, events: list) -> list:
    i = next(i for i, e in enumerate(events) if e["type"] == kind)
    return events[:i] + events[i + 1:]


def test_an_sglang_log_missing_a_store_fails_its_golden_case(monkeypatch):
    from kvexact.reference.peers import sglang_stream

    real = sglang_stream.random_event_log
    monkeypatch.setattr(sglang_stream, "random_event_log", lambda *a, **k: _drop_first("BlockStored", real(*a, **k)))
    result = golden.run_case("sglang event log")
    assert result.passed is False and "sglang event log" in result.detail, result.detail


def test_a_vllm_log_missing_a_store_fails_its_golden_case(monkeypatch):
    from kvexact.reference.peers import vllm_pool, vllm_wire

    real = vllm_wire.random_stream_log

    def dropped(*a, **k):  # the log without its first BlockStored
        batches = [list(batch) for batch in real(*a, **k)]
        i, j = next((i, j) for i, b in enumerate(batches) for j, e in enumerate(b) if isinstance(e, vllm_pool.BlockStored))
        del batches[i][j]
        return [tuple(b) for b in batches]

    monkeypatch.setattr(vllm_wire, "random_stream_log", dropped)
    result = golden.run_case("vllm event log")
    assert result.passed is False and "vllm event log" in result.detail, result.detail


def test_a_floor_division_in_partition_output_fails_its_golden_formula(monkeypatch):
    """Survivor formulas_seed (O_p = u_p / l_p with // ): the golden case 1.0 / 2.0 = 0.5 kills it."""
    copy = mutant_module(monkeypatch, formulas_seed, "return tuple(u / denominator for u in numerator)",
                         "return tuple(u // denominator for u in numerator)")
    monkeypatch.setitem(formulas.REGISTRY, "attn.partition_output", copy.partition_output)
    assert golden.formula_mismatches("attn.partition_output")


# Peer-profile survivors of the seed-1 sample, each killed by a case of peer-event-logs (run alone: a failed case
# fails the whole check).
PEER_SURVIVORS = [
    ("sglang", "match_kv_cache", "cap = len(req.tokens()) - 1", "cap = len(req.tokens()) - 2", "sglang units"),
    ("sglang", "RadixCache._lock_walk", "if step > 0 and cur.lock_ref == 0:", "if step > 0 and cur.lock_ref == 1:",
     "sglang units"),
    ("vllm_hashing", "key_with_group", "not isinstance(group_id, int) or not 0 <= group_id",
     "not isinstance(group_id, int) and not 0 <= group_id", "vllm units"),
    ("vllm", "VllmKVCacheManager.allocate_slots", "if num_new_tokens == 0 and num_new_computed_tokens == 0:",
     "if num_new_tokens == -1 and num_new_computed_tokens == 0:", "vllm units"),
]

# Not executed by any quick check in the seed-1 sample, now run by a peer case that fails.
PEER_SURVIVORS += [
    ("sglang_pool", "PagedTokenToKVPoolAllocator._release_pages", "self.free_pages = pages + self.free_pages",
     "self.free_pages = pages ^ self.free_pages", "sglang paged"),
    ("sglang_pool", "PagedTokenToKVPoolAllocator.available_size",
     "return (len(self.free_pages) + len(self.release_pages)) * self.page_size",
     "return (len(self.free_pages) + len(self.release_pages)) - self.page_size", "sglang paged"),
    ("sglang_pool", "PagedTokenToKVPoolAllocator.available_size",
     "return (len(self.free_pages) + len(self.release_pages)) * self.page_size",
     "return (len(self.free_pages) + len(self.release_pages)) + self.page_size", "sglang paged"),
    ("sglang_adapter", "SGLangAdapter.partition", "universe = [p * ps + i for p",
     "universe = [p * ps << i for p", "sglang paged"),
    ("sglang_adapter", "SGLangAdapter.partition", "universe = [p * ps + i for p",
     "universe = [p * ps % i for p", "sglang paged"),
    ("sglang_adapter", "SGLangAdapter.slot_tokens", "for i, slot in enumerate(node.value or ()):",
     "for i, slot in []:", "sglang paged"),
    ("sglang_sched", "compute_prefix_matches", "IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD = 32",
     "IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD = 33", "sglang paged"),
    ("vllm_adapter", "AllocateOutcome.block_ids", "return self.hit_block_ids + self.new_block_ids",
     "return self.hit_block_ids * self.new_block_ids", "vllm adapters s01"),
    ("vllm_protocol", "VllmProtocolAdapter.admit", "request = self.managers[0].make_request(request_id, prompt)",
     "request = self.managers[1].make_request(request_id, prompt)", "vllm adapters s01"),
    ("vllm_hybrid", "evict_block", "if index < len(view) else None", "if index is len(view) else None",
     "vllm hybrid s17"),
    ("vllm_hybrid", "stored_then_lookup", "new_pool(2 + sum(len(t) // h for t in stored) * len(specs))",
     "new_pool(2 + sum(len(t) // h for t in stored) + len(specs))", "vllm hybrid s17"),
]


@pytest.mark.parametrize("peer, name, before, after, case", PEER_SURVIVORS)
def test_a_former_peer_survivor_fails_its_peer_case(monkeypatch, peer, name, before, after, case):
    import importlib

    patch_mutant(monkeypatch, importlib.import_module(f"kvexact.reference.peers.{peer}"), name, before, after)
    result = golden.run_case(case)
    assert result.passed is False and case in result.detail, result.detail


def test_an_adapter_append_arity_of_one_fails_its_golden_case(monkeypatch):
    """Survivor adapters (REQUIRED_METHODS append 2 -> 1): the reference adapter is then refused."""
    from kvexact.reference import adapters

    monkeypatch.setitem(adapters.REQUIRED_METHODS, "append", 1)
    result = golden.run_case("adapter protocol")
    assert result.passed is False and "adapter protocol: reference adapter" in result.detail, result.detail


@pytest.mark.parametrize("after, passed", [('if txn.publication_state != "PUBLISHED":', True),
                                           ('if txn.publication_state > "PUBLISHED":', False)])
def test_releasing_cow_sources_before_publication_fails_its_golden_case(monkeypatch, after, passed):
    """Survivor allocator (cow_release_sources' `!= "PUBLISHED"` -> `>`: a BEGUN transaction passes); the
    unchanged copy is the control (the copy's names resolve to the real rejection enum)."""
    from kvexact.reference import allocator

    copy = mutant_module(monkeypatch, allocator, 'if txn.publication_state != "PUBLISHED":', after)
    copy.AllocRejection = allocator.AllocRejection
    monkeypatch.setattr(allocator.Allocator, "cow_release_sources", copy.Allocator.cow_release_sources)
    result = golden.run_case("allocator 0x05E")
    assert result.passed is passed, result.detail
    if not passed:
        assert "allocator 0x05E: COW sources released while the copy is in flight" in result.detail, result.detail


# Survivors of the fresh seed-3 sample (README, mutation testing, fourth round): bad input no case fed, a constant
# no case read, a line no quick case ran; each now fails its golden case by case.
SURVIVORS += [
    (keys, "KeyInputs.__attrs_post_init__", "if f.start_token < 0 or f.length_tokens <= 0",
     "if not f.start_token < 0 or f.length_tokens <= 0",
     "keys 0x09B: a feature over tokens [0, 2) of 3 rejected as = <KeyRejection.FEATURE_OUT_OF_RANGE"),
    (keys, "KeyInputs.__attrs_post_init__", "len(self.prompt_embed_rows) != n:", "len(self.prompt_embed_rows) < n:",
     "keys 0x09B: 4 embedding rows for 3 tokens rejected as = None"),
    (keys, "matching_full_blocks", "            break\n        n += 1", "            continue\n        n += 1",
     "keys 0x09B: blocks after the first difference"),
    (sessions, "check_resume", "if receipt.covered_interval != (0, turn.history_tokens):",
     "if receipt.covered_interval < (0, turn.history_tokens):", "inputs refused: 0x0CG receipt covering [0, 140)"),
    (sessions, "plan_turn", "return ResumePlan(False, turn.history_tokens + turn.new_tokens, exc.reason)",
     "return ResumePlan(False, turn.history_tokens / turn.new_tokens, exc.reason)", "inputs refused: 0x0CG plans"),
    (modules, "check_module", "if cached.position_ids != expected.position_ids:",
     "if cached.position_ids < expected.position_ids:", "inputs refused: 0x0CB module cached at 7..9"),
    (vmm, "step_sync", "ready before use.\"\"\"\n    if target_tokens > state.config.max_tokens:",
     "ready before use.\"\"\"\n    if target_tokens >= state.config.max_tokens:",
     "inputs refused: 0x06D sync to T_max"),
]


def test_a_vattention_page_group_off_by_a_kib_fails_its_golden_case(monkeypatch):
    """Survivor traversal (64 KiB -> 65 KiB in VATTENTION_PAGE_GROUPS_BYTES, a default argument): 0x0BJ's rows."""
    copy = mutant_module(monkeypatch, traversal, "VATTENTION_PAGE_GROUPS_BYTES = (64 * KIB,",
                         "VATTENTION_PAGE_GROUPS_BYTES = (65 * KIB,")
    monkeypatch.setattr(traversal, "page_group_staircase", copy.page_group_staircase)
    result = golden.run_case("traversal 0x0A")
    assert result.passed is False and "traversal 0x0A: Rejected: TraversalRejection.PAGE_GROUP_NOT_MULTIPLE" in result.detail


PEER_SURVIVORS += [
    ("sglang", "RadixCache._lock_walk", "if step < 0 and cur.lock_ref == 1:", "if step < 0 and cur.lock_ref >= 1:",
     "sglang units"),
    ("sglang_key", "_check_token", "if not isinstance(tok, int) or isinstance(tok, bool):",
     "if not isinstance(tok, int) and isinstance(tok, bool):", "sglang units"),
]


# More seed-3 survivors: a receipt's kept bundles and its alignment test, an alert and the exported totals no case
# read, the radix digest's page-size field.
SURVIVORS += [
    (prefix, "PrefixCache.lookup", "kept = full_blocks + (1 if partial_rows else 0)",
     "kept = full_blocks - (1 if partial_rows else 0)", "prefix 0x07: 0x09C partial tail: B's matched bundles"),
    (prefix, "verify_receipt", "if (run - partial) % p:", "if (run << partial) % p:",
     "prefix 0x07: 0x07 verify: B's receipt, one claiming 7 partial rows"),
    (telemetry, "evaluate_alerts", '"reference_leak": cur.refcount_recorded - cur.refcount_derived != 0',
     '"reference_leak": cur.refcount_recorded >> cur.refcount_derived != 0',
     "telemetry 0x0CF: alerts, refs 10 recorded vs 9 derived"),
    (telemetry, "GranularityCounters._add", "self.totals[name] = self.totals.get(name, 0) + value",
     "self.totals[name] = self.totals.get(name, 0) ** value", "telemetry 0x0CF: 0x0BL table and chunk totals"),
    (radix, "state_sha256", 'paged = {"page_size": state.page_size} if state.page_size > 1 else {}',
     'paged = {"page_size": state.page_size} if state.page_size < 1 else {}',
     "radix 0x08F: state digests at page size 1 and 2 differ"),
]


def test_a_lease_on_another_handle_counted_fails_its_golden_formula(monkeypatch):
    """Seed-3 survivor formulas_seed (R(h)'s lease term `x == handle` -> `x > handle`): a lease on 1003 is no
    reference to 1002."""
    copy = mutant_module(monkeypatch, formulas_seed, "sum(1 for x in lease_handles if x == handle)",
                         "sum(1 for x in lease_handles if x > handle)")
    monkeypatch.setitem(formulas.REGISTRY, "alloc.refcount", copy.refcount)
    assert golden.formula_mismatches("alloc.refcount")

PEER_SURVIVORS += [
    ("vllm", "_pairs_del", "return tuple((k, v) for k, v in pairs if k != key)",
     "return tuple((k, v) for k, v in pairs if k > key)", "vllm s01"),
    ("vllm", "VllmKVCacheManager.num_blocks_to_allocate", "if b != bp.NULL_BLOCK_ID and self.pool.ref_cnt[b] == 0)",
     "if b == bp.NULL_BLOCK_ID and self.pool.ref_cnt[b] == 0)", "vllm s01"),
]

SURVIVORS += [
    (prompt_cache, "_number", "if default is not None and name not in node.attrs:",
     "if default is None and name not in node.attrs:", "prompt modules 0x0CB: TypeError"),
]

SURVIVORS += [
    (ledgers, "Ledger.identities", "self.logical_bytes + self.request_view_tail_bytes),",
     "self.logical_bytes * self.request_view_tail_bytes),", "ledger 0x0D: identities that do not hold"),
]


def test_a_request_view_tail_divided_by_the_row_fails_its_golden_case(monkeypatch):
    """Seed-3 survivor ledgers (block_size_cost's request-view tail `* row_bytes` -> `/`); the fixture module holds
    its own reference to the function, so both are patched (cosmic-ray edits the file, which both read)."""
    from kvexact.reference.labs import ledgers as ledgers_lab

    copy = mutant_module(monkeypatch, ledgers, "for t in lengths_tokens) * row_bytes,",
                         "for t in lengths_tokens) / row_bytes,")
    monkeypatch.setattr(ledgers_lab, "block_size_cost", copy.block_size_cost)
    result = golden.run_case("ledger 0x0D")
    assert result.passed is False
    assert "ledger 0x0D: 0x09B at P=16: request-view tail bytes" in result.detail, result.detail

# Seed-4 survivors (100 mutants, six checks; README, mutation testing): cosmic-ray's line, the case that now fails.
SURVIVORS += [
    (traversal, "chunk_ledger", "value_width: int = 128, output_scalar_bytes: int = 2, state_scalar_bytes: int = 4)",
     "value_width: int = 128, output_scalar_bytes: int = 3, state_scalar_bytes: int = 4)",
     "traversal 0x0A: 0x0BI partial state bytes"),
    (telemetry, "GranularityCounters.observe_vmm", "sum(s.ready_pages * state.config.page_tokens",
     "sum(s.ready_pages << state.config.page_tokens", "telemetry 0x0CF: 0x0BL VMM gauges"),
    (prefix, "PrefixCache.lookup", "entry.witness != tokens[j * p:(j + 1) * p]:",
     "entry.witness != tokens[j * p:(j + 1) // p]:", "prefix 0x07: Rejected: PrefixRejection.COLLISION_WITNESS_MISMATCH"),
    (prefix, "PrefixCache.lookup", "            n = 0\n", "            n = 1\n",
     "prefix 0x07: 0x09C partial tail, B's row 16 differs"),
    (allocator, "Allocator._receipt", "successor_digest=self.digest(), useful_new_rows=0, new_physical_blocks=0,",
     "successor_digest=self.digest(), useful_new_rows= 1, new_physical_blocks=0,",
     "allocator 0x05E: COW append rolled back"),
    (lifecycle, "prefix_hit", "request_generation=alloc.ended.get(request_id, 0) + 1, table_version=1,",
     "request_generation=alloc.ended.get(request_id, 0) | 1, table_version=1,",
     "allocator 0x05E: D re-admitted twice"),
]


def test_an_unlisted_kernel_block_size_fails_its_golden_case(monkeypatch):
    """Seed-4 survivor traversal (LISTED_KERNEL_BLOCK_SIZES 64 -> 63): 63 does not divide the 512-token partition."""
    copy = mutant_module(monkeypatch, traversal, "LISTED_KERNEL_BLOCK_SIZES = (8, 16, 32, 64, 128)",
                         "LISTED_KERNEL_BLOCK_SIZES = (8, 16, 32, 63, 128)")
    monkeypatch.setattr(traversal, "geometry_table", copy.geometry_table)
    result = golden.run_case("traversal 0x0A")
    assert result.passed is False and "traversal 0x0A" in result.detail, result.detail


def test_cached_hashes_off_by_a_block_fails_its_golden_case(monkeypatch):
    """Seed-4 survivor ledgers (block_size_cost's cached hashes `// P` -> `- P`): 16 hashes instead of 2."""
    from kvexact.reference.labs import ledgers as ledgers_lab

    copy = mutant_module(monkeypatch, ledgers, "hashes = full_hit_tokens(rows_tokens=longest, block_tokens=P) // P",
                         "hashes = full_hit_tokens(rows_tokens=longest, block_tokens=P) - P")
    monkeypatch.setattr(ledgers_lab, "block_size_cost", copy.block_size_cost)
    result = golden.run_case("ledger 0x0D")
    assert result.passed is False
    assert "ledger 0x0D: 0x09B at P=16: cached hashes" in result.detail, result.detail


def test_a_funnel_compared_with_itself_fails_its_golden_case(monkeypatch):
    """Seed-4 survivor formulas_seed (funnel_monotone's `stage_counts[1:]` -> `[0:]`: every funnel monotone)."""
    copy = mutant_module(monkeypatch, formulas_seed, "zip(stage_counts, stage_counts[1:], strict=False)",
                         "zip(stage_counts, stage_counts[ 0:], strict=False)")
    monkeypatch.setitem(formulas.REGISTRY, "telemetry.funnel_monotone", copy.funnel_monotone)
    result = golden.run_case("telemetry 0x0CF")
    assert result.passed is False and "telemetry 0x0CF: N_req >= N_auth" in result.detail, result.detail


PEER_SURVIVORS += [
    ("vllm_hashing", "MMFeature.__attrs_post_init__", "if self.offset < 0 or self.length <= 0:",
     "if self.offset < 1 or self.length <= 0:", "vllm multimodal s09"),
    ("vllm_hashing", "_mm_keys", "if last.offset + last.length <= start:", "if last.offset * last.length <= start:",
     "vllm multimodal s09"),
    ("vllm_hashing", "_mm_keys", "if start >= item.offset + item.length:", "if start >= item.offset - item.length:",
     "vllm multimodal s09"),
    ("vllm_hashing", "_mm_keys", "if start >= item.offset + item.length:", "if start < item.offset + item.length:",
     "vllm multimodal s09"),
    ("vllm_pool", "PoolState.usage", "return 0.0 if usable == 0 else", "return 0.0 if not usable == 0 else",
     "vllm s01"),
    ("sglang_pool", "TokenToKVPoolAllocator.__init__", "def __init__(self, size_slots: int, need_sort: bool = False):",
     "def __init__(self, size_slots: int, need_sort: bool = True):", "sglang pool units"),
]

SURVIVORS += [
    (radix, "prefill_estimate", "if row_bytes <= 0 or block_tokens <= 0 or free_private_tail_slots < 0:",
     "if row_bytes < 0 or block_tokens <= 0 or free_private_tail_slots < 0:", "radix 0x08F: 0x08G prefill at B_row 0"),
    (blockmap, "expand_block_table", "out.extend(range(b * q, b * q + q))", "out.extend(range(b * q, b >> q + q))",
     "traversal 0x0A: 0x0AC allocator [3, 7]"),
    (lifecycle, "compensate", 'if receipt.operation == "allocate":', 'if receipt.operation != "allocate":',
     "allocator 0x05E"),
    (revocation, "revocation_complete", "for e in s.index) and all(x.gen >= s.done[x.ns] for x in s.leases)",
     "for e in s.index) or all(x.gen >= s.done[x.ns] for x in s.leases)",
     "revocation 0x0CE: RevocationComplete with t1's gen-0 lease"),
]

PEER_SURVIVORS += [
    ("vllm", "VllmKVCacheManager.get_computed_blocks", "request.block_hashes[:cap // self.config.block_size]:",
     "request.block_hashes[:cap | self.config.block_size]:", "vllm cap s16"),
    ("vllm_hashing", "first_overlapping_item", "[item.offset + item.length for item in mm], start + 1)",
     "[item.offset >> item.length for item in mm], start + 1)", "vllm multimodal s09"),
]

SURVIVORS += [
    (vmm, "virtual_address", "if not (0 <= slot < config.request_slots and", "if not (0 is slot < config.request_slots and",
     "vmm 0x06F: Rejected: VmmRejection.COORDINATE_OUT_OF_RANGE"),
    (telemetry, "to_prometheus", ".replace(chr(10), chr(92) + 'n')}\")", ".replace(chr(10), chr(92) & 'n')}\")",
     "telemetry 0x0CF: TypeError"),
]

PEER_SURVIVORS += [
    ("vllm_hashing", "BlockHasher.extend", "keys, mm_idx = block_extra_keys(extras, start, start + size, mm_idx)",
     "keys, mm_idx = block_extra_keys(extras, start, start & size, mm_idx)", "vllm multimodal s09"),
    ("vllm_adapter", "project_kv_allocation", "rows[b] = max(rows[b], min(size, n - i * size))",
     "rows[b] = max(rows[b], min(size, n - i | size))", "vllm adapters s01"),
]

PEER_SURVIVORS += [
    ("vllm_hybrid", "sliding_window_hit", "and (i + 1) * block_size % alignment_tokens:",
     "and (i % 1) * block_size % alignment_tokens:", "vllm hybrid s18"),
]


# Survivors of the fresh seed-5 sample (README, mutation testing, sixth round), each failing a case written for it.
SURVIVORS += [
    (ledgers, "contiguous_fit", "return any(e >= candidate_bytes for e in free_extents_bytes)",
     "return any(e < candidate_bytes for e in free_extents_bytes)", "fragmentation 0x02F: contiguous fit"),
    (ledgers, "block_pool_fit", "block_bytes=block_bytes) <= free_blocks",
     "block_bytes=block_bytes) is not free_blocks", "fragmentation 0x02F: block-pool fit"),
]

PEER_SURVIVORS += [
    ("sglang_key", "RadixKey.match", "return n // page_size * page_size", "return n // page_size | page_size",
     "sglang units"),
]

SURVIVORS += [
    (lifecycle, "compensate", "successor_digest=alloc.digest(), useful_new_rows=0,",
     "successor_digest=alloc.digest(), useful_new_rows=1,", "allocator 0x05E: compensation of F's allocation"),
]

SURVIVORS += [
    (lifecycle, "drop_logical_block", "if not 0 <= logical_block < n:", "if not 0 is logical_block < n:",
     "allocator 0x05E"),
]

PEER_SURVIVORS += [
    ("vllm_hashing", "split_key", "if len(key) <= GROUP_ID_BYTES:", "if len(key) == GROUP_ID_BYTES:", "vllm units"),
]

SURVIVORS += [
    (revocation, "revocation_complete", "and all(x.gen >= s.done[x.ns] for x in s.leases)",
     "and all(x.gen == s.done[x.ns] for x in s.leases)", "revocation 0x0CE: RevocationComplete with a t1 lease"),
]

SURVIVORS += [
    (prefix, "PrefixCache.lookup", "useful_recompute_bytes=recompute * row_bytes,",
     "useful_recompute_bytes=recompute - row_bytes,", "prefix 0x07: 0x07E 48 tokens: useful recompute bytes"),
]
