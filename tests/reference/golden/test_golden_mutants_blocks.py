"""The block-side golden cases (seed_cases_blocks.py): they pass on the reference, are
registered, and each fails, naming its case, on the mutants that survived the quick gate or ran
on lines no quick check executed (cosmic-ray's mutated line, applied to one function of a copy of its module)."""

from __future__ import annotations

import enum
import inspect
import types

import golden
import pytest
import seed_cases_blocks

from kvexact.reference import (
    adapters,
    allocator,
    blockmap,
    formulas,
    hybrid,
    ledgers,
    lifecycle,
    pool,
    prompt_cache,
    reuse_gate,
)
from kvexact.reference.allocator import Allocator, AllocRejection
from kvexact.reference.peers import (
    sglang,
    sglang_adapter,
    sglang_pool,
    sglang_sched,
    vllm_hashing,
    vllm_hybrid,
    vllm_pool,
    vllm_protocol,
    vllm_wire,
)
from kvexact.reference.pool import GroupConfig
from kvexact.reference.rejections import rejection_of


def patch_function(monkeypatch, module: types.ModuleType, name: str, before: str, after: str) -> None:
    """Replace ``module.name`` (a function, or ``Class.method``) by its copy with the one line ``before`` of that
    function replaced by ``after``; the copy's module keeps the real module's enums (the rejections compared by
    name)."""
    owner, _, attr = name.rpartition(".")
    target = getattr(module, owner) if owner else module
    function_source = inspect.getsource(inspect.unwrap(getattr(target, attr)))
    source = inspect.getsource(module)
    assert source.count(function_source) == 1 and function_source.count(before) == 1, (name, before)
    mutated = source.replace(function_source, function_source.replace(before, after))
    copy = types.ModuleType(module.__name__ + "_mutant")
    copy.__file__ = module.__file__
    with monkeypatch.context() as m:
        m.setattr(formulas, "REGISTRY", {})
        exec(compile(mutated, str(module.__file__), "exec"), copy.__dict__)
    for key, value in list(vars(copy).items()):
        if isinstance(value, type) and issubclass(value, enum.Enum) and isinstance(getattr(module, key, None), type):
            setattr(copy, key, getattr(module, key))
    new_target = getattr(copy, owner) if owner else copy
    monkeypatch.setattr(target, attr, getattr(new_target, attr))


def test_block_cases_pass_and_are_registered():
    assert set(seed_cases_blocks.CASES) <= set(golden.CASES)
    for name, case in seed_cases_blocks.CASES.items():
        rows = case()
        assert rows, name
        assert [(what, got) for what, got, expected in rows if got != expected] == [], name


def test_unknown_operation_is_refused_by_name_and_changes_nothing():
    alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3]])
    before = alloc.digest()
    assert rejection_of(lambda: alloc.run_txn("extend", "r", (1,))) is AllocRejection.UNKNOWN_OPERATION
    assert rejection_of(lambda: alloc.begin("extend", "r", ("alloc",), (1,))) is AllocRejection.UNKNOWN_OPERATION
    assert alloc.digest() == before and not alloc.txns


# (module, function, line before, line after (cosmic-ray's mutant), the failing case's name)
MUTANTS = [
    # survivors of the seed-4 / seed-5 samples (README, mutation testing)
    (lifecycle, "_drop", "if state is BlockState.FREE:", "if state is not BlockState.FREE:", "lifecycle release"),
    (allocator, "Allocator.begin", "if expected_epoch is not None and expected_epoch != self.epoch:",
     "if expected_epoch is not None and expected_epoch is not self.epoch:", "allocator epochs"),
    (adapters, "ReferenceAdapter._key", "str(len(self.keys) + 1)", "str(len(self.keys) | 1)", "adapter keys"),
    (vllm_hashing, "hash_function", "encode = _cbor_bytes if algo in", "encode = _cbor_bytes if not algo in",
     "vllm golden hashes"),
    (vllm_hybrid, "_trim_to_alignment", "len(blocks[0]) * block_size % alignment_tokens",
     "len(blocks[0]) >> block_size % alignment_tokens", "vllm hybrid alignment"),
    (vllm_hybrid, "publish_request", "cacheable = num_tokens - num_tokens %", "cacheable = num_tokens + num_tokens %",
     "vllm hybrid alignment"),
    # survivors of the fresh seed-12 sample over the block-side modules
    (allocator, "Allocator.self_check", "visible = min(p, rec.context_tokens - j * p)",
     "visible = min(p, rec.context_tokens - j >> p)", "allocator block sizes"),
    (allocator, "Allocator._new_txn_id", 'self.scalars["next_txn"] = n + 1', 'self.scalars["next_txn"] = n * 1',
     "allocator epochs"),
    (adapters, "ReferenceAdapter.__init__", "ids = list(range(1, config.blocks_per_group + 1))",
     "ids = list(range(1, config.blocks_per_group // 1))", "adapter keys"),
    (vllm_hybrid, "stored_then_lookup", "h, len(query) - 1)", "h, len(query) + 1)", "vllm hybrid alignment"),
    (vllm_pool, "new_pool", "if not isinstance(num_blocks, int) or isinstance(num_blocks, bool) or",
     "if not isinstance(num_blocks, int) and isinstance(num_blocks, bool) or", "vllm hybrid alignment"),
    # survivors of the fresh seed-22 sample, closed after it
    (sglang_sched, "lpm_order", "len(queue) > WAITING_QUEUE_PREFIX_MATCH_MAX", "len(queue) is WAITING_QUEUE_PREFIX_MATCH_MAX",
     "sglang orders and pools"),
    (adapters, "ReferenceAdapter.truncate", "if h.cache_group_id == 0]", "if h.cache_group_id != 0]", "adapter keys"),
    (lifecycle, "evict", "        if not out:", "        if not not out:", "allocator refusals"),
    (allocator, "Allocator.__init__", "epoch: int = 0,", "epoch: int = 1,", "allocator epochs"),
    # a survivor of the fresh seed-32 sample, closed after it
    (vllm_hashing, "external_hash", "& (2**64 - 1)", "& (2**64 - 2)", "vllm golden hashes"),
    # the rest of the fresh seed-32 sample's survivors, closed after it
    (ledgers, "cow_cost", "row_bytes: int = 64 * KIB)", "row_bytes: int = 64 + KIB)", "allocator block sizes"),
    (ledgers, "cow_cost", "row_bytes: int = 64 * KIB)", "row_bytes: int = 64 // KIB)", "allocator block sizes"),
    (sglang, "RadixCache.insert", "            if pos + p > inserted_len:", "            if pos + p >= inserted_len:",
     "sglang orders and pools"),
    (sglang_adapter, "SGLangAdapter.partition", "free = [p * ps + i for p in free", "free = [p * ps ^ i for p in free",
     "sglang orders and pools"),
    (sglang_pool, "ReqToTokenPool.write", "[start_pos:start_pos + len(slots)]", "[start_pos:start_pos - len(slots)]",
     "sglang orders and pools"),
    (hybrid, "HybridIndex.publish", "range(hit + g.block_size,", "range(hit | g.block_size,", "hybrid windows s17"),
    (allocator, "Allocator.self_check", "if len(rec.tables) != len(self.groups):",
     "if len(rec.tables) is not len(self.groups):", "allocator block sizes"),
    (allocator, "Allocator.self_check", "if len(table) != ceil_div(rec.context_tokens, p):",
     "if len(table) is not ceil_div(rec.context_tokens, p):", "allocator block sizes"),
    (allocator, "Allocator.self_check", "if len(pool.q_at) != len(pool.q_seq):",
     "if len(pool.q_at) is not len(pool.q_seq):", "allocator block sizes"),
    (pool, "BlockPool.__init__", "if len(set(block_ids)) != len(block_ids)", "if len(set(block_ids)) is not len(block_ids)",
     "allocator block sizes"),
    # the named refusal of an unknown operation
    (allocator, "check_operation", "if operation not in OPERATIONS:", "if operation in OPERATIONS:",
     "allocator epochs"),
    # lines no quick check executed
    (sglang, "pool_accounting", "uncached = sum(r.owned_len - r.cache_protected_len",
     "uncached = sum(r.owned_len + r.cache_protected_len", "sglang scenarios"),
    (reuse_gate, "reuse_or_recompute", "len(request.token_ids) - reused", "len(request.token_ids) + reused",
     "reuse gate 0x0CD"),
    (lifecycle, "retain_read", "is not BlockState.REFERENCED:", "is BlockState.REFERENCED:", "lifecycle leases"),
    (vllm_protocol, "VllmProtocolAdapter.admit", "request.num_tokens - hit.num_computed_tokens,",
     "request.num_tokens + hit.num_computed_tokens,", "vllm protocol adapter"),
    (hybrid, "CacheGroup.needed_blocks", "return range(max(0, stop - math.ceil((self.window - 1) / self.block_size)), stop)",
     "return range(max(0, stop - math.ceil((self.window + 1) / self.block_size)), stop)", "hybrid windows s17"),
    (hybrid, "CacheGroup.needed_blocks", "return range(max(0, stop - math.ceil((self.window - 1) / self.block_size)), stop)",
     "return range(max(1, stop - math.ceil((self.window - 1) / self.block_size)), stop)", "hybrid windows s17"),
    (hybrid, "CacheGroup.needed_blocks", "return range(max(0, stop - math.ceil((self.window - 1) / self.block_size)), stop)",
     "return range(max(0, stop - math.ceil((self.window ** 1) / self.block_size)), stop)", "hybrid windows s17"),
    # a count past 256 built at run time (third task)
    (lifecycle, "cache_block", "if logical_block == len(table) - 1 else", "if logical_block is len(table) - 1 else",
     "allocator block sizes"),
    # SGLang's token allocators and request table (docs/peers/sglang.md §7), lines no quick check executed
    (sglang_pool, "TokenToKVPoolAllocator.alloc", "        if need_slots > len(self.free_pages):",
     "        if need_slots >= len(self.free_pages):", "sglang orders and pools"),
    (sglang_pool, "TokenToKVPoolAllocator.alloc", "if self.need_sort and need_slots > len(self.free_pages):",
     "if self.need_sort and need_slots < len(self.free_pages):", "sglang orders and pools"),
    (sglang_pool, "TokenToKVPoolAllocator.free", "        if self._group is not None:", "        if self._group is None:",
     "sglang orders and pools"),
    (sglang_pool, "TokenToKVPoolAllocator.free", "        if self.freed_log is not None:",
     "        if self.freed_log is None:", "sglang orders and pools"),
    (sglang_pool, "PagedTokenToKVPoolAllocator.available_size", "* self.page_size", "// self.page_size",
     "sglang orders and pools"),
    (sglang_pool, "PagedTokenToKVPoolAllocator.alloc", "if need_slots % self.page_size:",
     "if need_slots * self.page_size:", "sglang orders and pools"),
    (sglang_pool, "PagedTokenToKVPoolAllocator.alloc", "return [p * self.page_size + i for p in pages",
     "return [p * self.page_size - i for p in pages", "sglang orders and pools"),
    (sglang_pool, "PagedTokenToKVPoolAllocator.free", "sorted({s // self.page_size for s in slots})",
     "sorted({s * self.page_size for s in slots})", "sglang orders and pools"),
    (sglang_pool, "PagedTokenToKVPoolAllocator.free_segment", "pages = [s // self.page_size for s in",
     "pages = [s % self.page_size for s in", "sglang orders and pools"),
    (sglang_pool, "PagedTokenToKVPoolAllocator.free_segment", "if self.freed_log is not None and self._group is None:",
     "if self.freed_log is not None or self._group is None:", "sglang orders and pools"),
    (sglang_pool, "PagedTokenToKVPoolAllocator._release_pages", "        if self.need_sort:",
     "        if not self.need_sort:", "sglang orders and pools"),
    (sglang_pool, "PagedTokenToKVPoolAllocator.free_group_end", "        if pages:", "        if not pages:",
     "sglang orders and pools"),
    (sglang_pool, "ReqToTokenPool.alloc", "if need_rows > len(self.free_slots):", "if need_rows >= len(self.free_slots):",
     "sglang orders and pools"),
    # vLLM's KV events on the wire and its ZMQ publisher (a loopback socket pair)
    (vllm_wire, "to_wire", "if isinstance(event, bp.BlockRemoved):", "if not isinstance(event, bp.BlockRemoved):",
     "peer units"),
    (vllm_wire, "encode_batch", "time.time() if ts is None else ts", "time.time() if ts is not None else ts",
     "peer units"),
    (vllm_wire, "encode_batch_json", "time.time() if ts is None else ts", "time.time() if ts is not None else ts",
     "peer units"),
    (vllm_wire, "Publisher.__init__", 'if endpoint.endswith(":*"):', 'if not endpoint.endswith(":*"):', "peer units"),
    (vllm_wire, "Publisher.wait_for_subscriber", "if not self._sock.poll(int(timeout_s * 1000)):",
     "if self._sock.poll(int(timeout_s * 1000)):", "peer units"),
    (vllm_wire, "Publisher.publish", 'self.seq.to_bytes(8, "big")', 'self.seq.to_bytes(9, "big")', "peer units"),
    (vllm_wire, "Publisher.publish", "self.seq += 1", "self.seq *= 1", "peer units"),
    # vLLM's block pool (docs/peers/vllm.md §5), lines no quick check executed
    (vllm_pool, "FreeQueue.popleft_n", "if n > len(self.blocks):", "if n < len(self.blocks):", "peer units"),
    (vllm_pool, "FreeQueue.remove", "if block_id not in self.blocks:", "if block_id in self.blocks:", "peer units"),
    (vllm_pool, "FreeQueue._check_absent", "if present or len(set(block_ids)) != len(block_ids):",
     "if present and len(set(block_ids)) != len(block_ids):", "peer units"),
    (vllm_pool, "_check_count", "or isinstance(n, bool) or", "or isinstance(n, bool) and", "peer units"),
    (vllm_pool, "HashToBlockMap.pop", "if block_id not in ids:", "if block_id in ids:", "peer units"),
    (vllm_pool, "HashToBlockMap.pop", "        if rest:", "        if not rest:", "peer units"),
    (vllm_pool, "PoolState.usage", "usable = self.num_blocks - 1", "usable = self.num_blocks + 1", "peer units"),
    (vllm_pool, "PoolState.usage", "0.0 if usable == 0 else", "0.0 if usable != 0 else", "peer units"),
    (vllm_pool, "_check_block", "not 0 <= block_id < pool.num_blocks", "not 0 <= block_id <= pool.num_blocks",
     "peer units"),
    (vllm_pool, "insert_cached", "if pool.block_key[block_id] is not None:", "if pool.block_key[block_id] is None:",
     "peer units"),
    (vllm_pool, "get_new_blocks", "if n > pool.num_free_blocks:", "if n < pool.num_free_blocks:", "peer units"),
    (vllm_pool, "touch", "if block_id == NULL_BLOCK_ID:", "if block_id != NULL_BLOCK_ID:", "peer units"),
    (vllm_pool, "free_blocks", "if block_id == NULL_BLOCK_ID:", "if block_id != NULL_BLOCK_ID:", "peer units"),
    (vllm_pool, "cache_full_blocks", "if num_cached_blocks >= num_full_blocks:",
     "if num_cached_blocks > num_full_blocks:", "peer units"),
    (vllm_pool, "cache_full_blocks", "if num_full_blocks > len(source.block_hashes) or",
     "if num_full_blocks > len(source.block_hashes) and", "peer units"),
    (vllm_pool, "cache_full_blocks", "if block_id == NULL_BLOCK_ID:", "if block_id != NULL_BLOCK_ID:", "peer units"),
    (vllm_pool, "reset_prefix_cache", "if pool.num_free_blocks != pool.num_blocks - 1:",
     "if pool.num_free_blocks == pool.num_blocks - 1:", "peer units"),
    # the trace recorder's KVAllocation history branches and refusals (reference/adapters.py)
    (adapters, "TraceRecorder.__init__", "if spec not in SPECS:", "if spec in SPECS:", "adapter projections"),
    (adapters, "TraceRecorder.snapshot", "if self.requests is None:", "if self.requests is not None:",
     "adapter projections"),
    (adapters, "TraceRecorder.record", "        if action in self.actions:", "        if action not in self.actions:",
     "adapter projections"),
    (adapters, "TraceRecorder._kv_history", "if action not in self.actions:", "if action in self.actions:",
     "adapter projections"),
    # a stutter keeps the history variables, the rollback's undone among them (it kept the rolled-back phase before
    # txn and hist were per request)
    (adapters, "TraceRecorder._kv_history", 'state["hist"], state["undone"] = prev["hist"], prev["undone"]',
     'state["hist"], state["undone"] = prev["hist"], state["undone"]', "adapter projections"),
    (adapters, "TraceRecorder._kv_history", 'if action == "append_rollback":', 'if action != "append_rollback":',
     "adapter projections"),
    (adapters, "TraceRecorder._kv_history", 'if action == "stale_write_rejected":',
     'if action != "stale_write_rejected":', "adapter projections"),
    (adapters, "TraceRecorder._kv_history", 'and prev["ref"][g][b] == 1 and', 'and prev["ref"][g][b] == 2 and',
     "adapter projections"),
    (adapters, "project_state", 'if spec == "CowPublication":', 'if spec != "CowPublication":',
     "adapter projections"),
    # a --adapter that cannot be used, named by its problem
    (adapters, "adapter_protocol", "if protocol not in PROTOCOLS:", "if protocol in PROTOCOLS:", "adapter keys"),
    (adapters, "check_adapter", 'if not isinstance(getattr(adapter, "config", None), AdapterConfig):',
     'if isinstance(getattr(adapter, "config", None), AdapterConfig):', "adapter keys"),
    (adapters, "check_methods", "    if not present:", "    if present:", "adapter keys"),
    (adapters, "check_methods", "if method not in present:", "if method in present:", "adapter keys"),
    (adapters, "check_methods", "if not callable(fn):", "if callable(fn):", "adapter keys"),
    (adapters, "ReferenceAdapter.cache", "if request_id not in self.alloc.requests:",
     "if request_id in self.alloc.requests:", "adapter keys"),
    (adapters, "ReferenceAdapter.evict", "        if key is None:", "        if key is not None:", "adapter keys"),
    (adapters, "ReferenceAdapter.start", "            elif not prompt:", "            elif prompt:", "adapter keys"),
    # survivors of the fresh seed-51 sample over reference/
    (allocator, "Allocator.self_check", "\n            refs[g][h.block_id] = refs[g].get(h.block_id, 0) + 1",
     "\n            refs[g][h.block_id] = refs[g].get(h.block_id, 0) | 1", "allocator checks 0x04F"),
    (allocator, "Allocator.self_check", "h.pool_id != pool.config.pool_id", "h.pool_id is not pool.config.pool_id",
     "allocator checks 0x04F"),
    (ledgers, "validate_fixture", "if len(set(free)) != len(free) or", "if len(set(free)) > len(free) or",
     "allocator checks 0x04F"),
    (lifecycle, "compensate", 'if receipt.outcome != "PUBLISHED":', 'if receipt.outcome > "PUBLISHED":',
     "allocator checks 0x04F"),
    # lines no quick check executed before (their conditions turned never-true, or the branch taken the other way)
    (allocator, "Allocator.__init__", "if not groups or len(groups) != len(block_ids):",
     "if not groups and len(groups) != len(block_ids):", "allocator paths 0x05C"),
    (allocator, "Allocator.validate_expected", "if expected_epoch is not None and expected_epoch != self.epoch:",
     "if expected_epoch is None and expected_epoch != self.epoch:", "allocator paths 0x05C"),
    (lifecycle, "delayed_write", '== "cow" else alloc.write_rows', '!= "cow" else alloc.write_rows',
     "allocator paths 0x05C"),
    (lifecycle, "reader_release", "if reader_id not in alloc.readers:", "if reader_id in alloc.readers:",
     "allocator paths 0x05C"),
    (ledgers, "cow_cost", "or shared_tokens < 0:", "or shared_tokens < -1:", "allocator paths 0x05C"),
    (ledgers, "external_fragmentation", "or e < 0:", "or e < -1:", "allocator paths 0x05C"),
    (ledgers, "reconcile", "if not hasattr(ledger, name):", "if hasattr(ledger, name):", "allocator paths 0x05C"),
    # 0x05C's steps out of order (lines no quick check executed before)
    (allocator, "Allocator._reserve", 'if txn.plan[group] in ("new", "cow") and',
     'if txn.plan[group] not in ("new", "cow") and', "allocator steps 0x05C"),
    (allocator, "Allocator.cow_begin", 'if txn.publication_state != "RESERVED" or "cow" not in txn.plan:',
     'if txn.publication_state != "RESERVED" and "cow" not in txn.plan:', "allocator steps 0x05C"),
    (allocator, "Allocator.cow_copy", 'if txn.plan[group] != "cow" or group in txn.copied_groups:',
     'if txn.plan[group] != "cow" and group in txn.copied_groups:', "allocator steps 0x05C"),
    (allocator, "Allocator.append_write", 'set(range(len(self.groups))) or txn.publication_state != "RESERVED":',
     'set(range(len(self.groups))) and txn.publication_state != "RESERVED":', "allocator steps 0x05C"),
    # the self-check's violations, each named (a corrupted state; lines no quick check executed before)
    (allocator, "Allocator.self_check", "if len(set(token_rows)) > 1:", "if len(set(token_rows)) > 2:",
     "allocator self-check"),
    (allocator, "Allocator.self_check", "if sum(roles) != 1:", "if sum(roles) > 1:", "allocator self-check"),
    (allocator, "Allocator.self_check", "if len(pool.q_at) != len(pool.q_seq):",
     "if len(pool.q_at) > len(pool.q_seq):", "allocator self-check"),
    # survivors of the fresh seed-111 sample, the golden tests as the killer
    (reuse_gate, "attempt", "if runtime.block_generations.get(_block(h)) != h.generation:",
     "if runtime.block_generations.get(_block(h)) < h.generation:", "reuse gate steps 0x0CD"),
    (reuse_gate, "attempt", "steps.append(STEPS[6])", "steps.append(STEPS[ 5])", "reuse gate steps 0x0CD"),
    (prompt_cache, "parse_schema", 'if root.tag != "schema":', 'if root.tag < "schema":', "prompt schema root 0x0CB"),
    # survivors of the fresh seed-131 sample (vmm:266 ``!=`` -> ``<`` is equivalent: a set is never longer than its list)
    (reuse_gate, "attempt", "if cand.semantic_digest != ex.semantic_digest:",
     "if cand.semantic_digest is not ex.semantic_digest:", "reuse gate equal values 0x0CD"),
    (reuse_gate, "attempt", "if leased.execution_snapshot_version != ex.execution_snapshot_version:",
     "if leased.execution_snapshot_version is not ex.execution_snapshot_version:", "reuse gate equal values 0x0CD"),
    (blockmap, "expansion_factor", "if allocator_block_tokens <= 0 or kernel_block_tokens <= 0:",
     "if allocator_block_tokens <= 0 or kernel_block_tokens <= 1:", "blockmap unit kernel block 0x0A"),
]


# The allocator's appends with a block size per group (0x04E) as they were before the fix: a group at a boundary next
# to one appending in place crashed naming a destination the in-place group never had; next to a COW group, the
# boundary path's append_write ran after cow_begin and was refused, and publication wanted READY_TO_PUBLISH.
MIXED_PATH_BUGS = [
    ("Allocator._boundary_params", '"dest": {g: 0 if d is None else d.block_id for g, d in enumerate(dests)}}',
     '"dest": {g: d.block_id for g, d in enumerate(dests)}}'),
    ("Allocator._fill_steps", 'if "new" in txn.plan and not cow:', 'if "new" in txn.plan:'),
    ("Allocator._publish", 'if not cow and "new" in txn.plan and txn.publication_state != "READY_TO_PUBLISH":',
     'if "new" in txn.plan and txn.publication_state != "READY_TO_PUBLISH":'),
]


@pytest.mark.parametrize("name, before, after", MIXED_PATH_BUGS, ids=[n for n, _b, _a in MIXED_PATH_BUGS])
def test_the_mixed_path_append_bugs_fail_allocator_paths(monkeypatch, name, before, after):
    patch_function(monkeypatch, allocator, name, before, after)
    assert case_fails("allocator paths 0x05C")


def test_a_mixed_path_append_checks_the_new_blocks_frontier():
    """With a COW group, cow_validate also checks the boundary group's new block: a new block holding a row other
    than the appended token is refused (FRONTIER_NOT_VALID) before publication."""
    from kvexact.reference import lifecycle as lc

    alloc = Allocator([GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 4, 8)], [[1, 2, 3, 4]] * 2)
    alloc.allocate("r", [1, 2])
    lc.fork(alloc, "r", "s")
    txn = alloc.begin("append", "r", ("new", "cow"), (3,))
    alloc.cow_begin(txn)
    dest = alloc.append_reserve(txn, 0)
    alloc.cow_reserve(txn, 1)
    alloc.write_rows(txn, 0, dest, 0, (9,))
    alloc.cow_copy(txn, 1, 2)
    alloc.cow_write(txn, 1, alloc._destination(alloc._txn(txn), 1), 2, (3,))
    assert rejection_of(lambda: alloc.cow_validate(txn)) is AllocRejection.FRONTIER_NOT_VALID


@pytest.mark.parametrize("module, name, before, after, case", MUTANTS,
                         ids=lambda v: v if isinstance(v, str) and " " not in v else None)
def test_a_block_side_mutant_fails_its_golden_case(monkeypatch, module, name, before, after, case):
    patch_function(monkeypatch, module, name, before, after)
    assert case_fails(case), case


def case_fails(name: str) -> bool:
    """The named case of the golden cases raises or has a row whose value is not the expected one (the check's
    detail names only its first five mismatches)."""
    try:
        rows = golden.CASES[name]()
    except Exception:
        return True
    return any(got != expected for _what, got, expected in rows)


def test_compensate_refuses_an_unknown_operation_mutant_fails_its_golden_case(monkeypatch):
    patch_function(monkeypatch, lifecycle, "compensate", "    check_operation(receipt.operation)", "    pass")
    rows = golden.CASES["allocator epochs"]()
    wrong = [what for what, got, expected in rows if got != expected]
    assert "compensation of a published receipt of operation aaa rejected as" in wrong, wrong
