"""The peer-profile and adapter golden cases (seed_cases_peers.py, issue #25): each passes
on the reference, is registered, and fails, naming itself, on a mutant of reference/ that
survived the quick gate in the fresh seed-51 sample (cosmic-ray's mutated line applied to a copy of the module)."""

from __future__ import annotations

import golden
import pytest
import seed_cases_peers
from golden import mutant_module, run_case  # one line replaced, as cosmic-ray writes it

from kvexact.reference import adapters
from kvexact.reference.peers import (
    sglang,
    sglang_adapter,
    sglang_events,
    sglang_key,
    sglang_pool,
    sglang_protocol,
    sglang_sched,
    sglang_stream,
    vllm,
    vllm_adapter,
    vllm_groups,
    vllm_hashing,
    vllm_hybrid,
    vllm_pool,
    vllm_wire,
)


def test_every_peer_case_passes_and_is_registered():
    assert len(seed_cases_peers.CASES) == 18
    assert set(seed_cases_peers.CASES) <= set(golden.CASES)
    for name in seed_cases_peers.CASES:
        result = run_case(name)
        assert result.passed, result.detail


_ADMIT = "            _, receipts = px.admit(self.prefix, receipt, prompt, policy)  # type: ignore[arg-type]\n"

# (module, attribute to patch ("Class.attr" for a method), line before, line after, the failing case)
SURVIVORS = [
    (sglang, "RadixCache.check_invariants",
     'assert self.evictable_size_ + self.protected_size_ == self.total_size(), "I1"',
     'assert self.evictable_size_ + self.protected_size_ >= self.total_size(), "I1"', "sglang tree checks"),
    (sglang_adapter, "SGLangAdapter.project", "list(n.value or ())", "list(n.value and ())", "sglang tree checks"),
    # the subclass is replaced whole: its admit calls super(), bound to the copy's class
    (sglang_protocol, "UnlockedPrefixAdapter",
     "if matched is not None and req is not None and req.tree_lock is not None:",
     "if not matched is not None and req is not None and req.tree_lock is not None:", "sglang tree checks"),
    (vllm_adapter, "VllmAdapter.allocate",
     "request, request.num_tokens - hit.num_computed_tokens, hit.num_computed_tokens, hit.block_ids)",
     "request, request.num_tokens ^ hit.num_computed_tokens, hit.num_computed_tokens, hit.block_ids)",
     "vllm hit arithmetic"),
    (vllm_hybrid, "publish_request", "for block_hash in view[hit // spec.block_size:cacheable // spec.block_size]:",
     "for block_hash in view[hit % spec.block_size:cacheable // spec.block_size]:", "vllm hit arithmetic"),
    (vllm_wire, "random_stream_log", "n, k = running[rid], rng.randrange(1, 4)",
     "n, k = running[rid], rng.randrange( 2, 4)", "stream workloads"),
    (adapters, "project_kv_allocation",
     'mine["phase"] = "ready" if open_txn.publication_state == "READY_TO_PUBLISH" else "reserved"',
     'mine["phase"] = "ready" if open_txn.publication_state <= "READY_TO_PUBLISH" else "reserved"',
     "adapter transactions"),
    # survivors of a sample restricted to reference.peers.* and reference.adapters (seed 61, 24 mutants, the six
    # quick checks before machines), closed after it
    (vllm_hashing, "MMFeature.__attrs_post_init__", "if self.offset < 0 or self.length <= 0:",
     "if self.offset < 0 or self.length == 0:", "scopes and refusals"),
    (sglang_stream, "random_event_log", "over = cache.total_size() - capacity_pages * page_size",
     "over = cache.total_size() / capacity_pages * page_size", "stream workloads"),
    # cosmic-ray's ExceptionReplacer catches CosmicRayTestingException instead, an exception nothing raises
    (adapters, "ReferenceAdapter._start_through_prefix_cache", _ADMIT + "        except Rejected as exc:",
     _ADMIT + "        except ArithmeticError as exc:", "scopes and refusals"),
    # survivors of a second such sample (seed 71, 30 mutants), closed after it
    (vllm_hashing, "_mm_keys", "if last.offset + last.length <= start:", "if last.offset | last.length <= start:",
     "scopes and refusals"),
    (vllm_pool, "PoolState.check", "for b in range(1, self.num_blocks):", "for b in range( 2, self.num_blocks):",
     "scopes and refusals"),
    (sglang, "RadixCache.insert", "            if pos + p > inserted_len:", "            if pos | p > inserted_len:",
     "sglang tree checks"),
    (vllm_pool, "_check_block", "not in 0..{pool.num_blocks - 1}", "not in 0..{pool.num_blocks | 1}",
     "scopes and refusals"),
    (vllm_wire, "random_stream_log", "elif roll < 0.7 and running:", "elif roll >= 0.7 and running:",
     "stream workloads"),
    (sglang_stream, "random_event_log", "        if over > 0:", "        if over == 0:", "stream workloads"),
    # a survivor of a third such sample (seed 81, 30 mutants), closed after it
    (adapters, "ReferenceAdapter._key", "str(len(self.keys) + 1)", "str(len(self.keys) * 1)", "adapter transactions"),
    # killed since the sample by the block side's "peer units" (a float timeout: `^` raises TypeError)
    (vllm_wire, "Publisher.wait_for_subscriber", "if not self._sock.poll(int(timeout_s * 1000)):",
     "if not self._sock.poll(int(timeout_s ^ 1000)):", "peer units"),
    # named survivors of issue #25 (i25k), closed by "pinned defaults and refusals"
    (vllm, "VllmKVCacheManager.free", "if not self.is_running(request_id) and not blocks:",
     "if not not self.is_running(request_id) and not blocks:", "pinned defaults and refusals"),
    (sglang, "Req", "    num_matched_prefix_tokens: int = 0", "    num_matched_prefix_tokens: int = 1",
     "pinned defaults and refusals"),
    (sglang, "RadixCache.check_invariants", "and len(n.key) == len(n.value), f", "and len(n.key) <= len(n.value), f",
     "pinned defaults and refusals"),
    (vllm_pool, "_check_block", "or not 0 <= block_id < pool.num_blocks:", "or not 0 <= block_id is not pool.num_blocks:",
     "pinned defaults and refusals"),
    # survivors of i25k's exploration samples (seeds 1001+), closed by the pinned cases
    (vllm_hybrid, "_trim_to_alignment", "while block_size != alignment_tokens and", "while block_size >= alignment_tokens and",
     "vllm hybrid finders"),
    (vllm_hybrid, "_trim_to_alignment", "len(blocks[0]) * block_size % alignment_tokens:",
     "len(blocks[0]) & block_size % alignment_tokens:", "vllm hybrid finders"),
    # one mutant per pinned case, of the families the cases were written against
    (vllm_hashing, "split_key", "if len(key) <= GROUP_ID_BYTES:", "if len(key) < GROUP_ID_BYTES:",
     "vllm hashing pinned"),
    (vllm_pool, "PoolState.usage", "return 0.0 if usable == 0 else", "return 0.0 if usable == 1 else",
     "vllm pool pinned"),
    (sglang, "RadixCache._lock_walk", "if step > 0 and cur.lock_ref == 0:", "if step > 1 and cur.lock_ref == 0:",
     "sglang tree pinned"),
    (vllm_groups, "VllmGroups.block_ids", "return list(range(1, self.config.blocks_per_group + 1))",
     "return list(range(2, self.config.blocks_per_group + 1))", "vllm adapters pinned"),
    (vllm_wire, "random_stream_log", "n = rng.randrange(1, stream_tokens - 2)",
     "n = rng.randrange(1, stream_tokens - 3)", "stream log contract"),
    (vllm, "VllmKVCacheManager.num_blocks_to_allocate", "and self.pool.ref_cnt[b] == 0)",
     "and self.pool.ref_cnt[b] == 1)", "vllm manager scenarios"),
    (sglang_pool, "PagedTokenToKVPoolAllocator.available_size",
     "return (len(self.free_pages) + len(self.release_pages)) * self.page_size",
     "return (len(self.free_pages) + len(self.release_pages)) / self.page_size", "sglang pools pinned"),
    (sglang_events, "EventRecorder.enqueue", 'and event["parent_block_hash"] == tail["block_hashes"][-1]:',
     'and event["parent_block_hash"] != tail["block_hashes"][-1]:', "sglang keys events orders"),
    (sglang_adapter, "SGLangAdapter.__init__", "self._lock_ids = itertools.count(1)",
     "self._lock_ids = itertools.count(2)", "sglang adapters pinned"),
    (sglang, "match_kv_cache", "    cap = len(req.tokens()) - 1", "    cap = len(req.tokens()) - 2",
     "sglang protocol pinned"),
    (vllm_hashing, "_mm_keys", "        if start >= item.offset + item.length:", "        if start > item.offset + item.length:",
     "peer odds and ends"),
    # survivors of i25k's seed-1004 sample over reference.peers.sglang
    (sglang, "checkpoint", "if 0 < prompt_units < len(key):", "if 1 < prompt_units < len(key):",
     "sglang protocol pinned"),
    (sglang, "checkpoint", "priority=req.priority + 1, inserted_len=prompt_units)",
     "priority=req.priority + 2, inserted_len=prompt_units)", "sglang protocol pinned"),
    (vllm_hybrid, "find_longest_cache_hit", "buckets.sort(key=lambda b: b[0].sliding_window is not None)",
     "buckets.sort(key=lambda b: b[0].sliding_window is None)", "vllm hybrid finders"),
    (sglang, "eviction_priority", "1 if n.hit_count >= slru_threshold else 0", "1 if n.hit_count > slru_threshold else 0",
     "sglang tree pinned"),
    # a survivor of i25k's seed-1005 sample over reference.peers.*
    (sglang_pool, "PagedTokenToKVPoolAllocator.free_segment", "        if start_pos % self.page_size:\n            raise "
     "SGLangError(SGLangRejection.PAGE_MISALIGNED_SEGMENT,\n                              f\"start_pos {start_pos} with page "
     "size {self.page_size}\")\n        if not len(slots):", "        if start_pos / self.page_size:\n            raise "
     "SGLangError(SGLangRejection.PAGE_MISALIGNED_SEGMENT,\n                              f\"start_pos {start_pos} with page "
     "size {self.page_size}\")\n        if not len(slots):", "sglang pools pinned"),
    (sglang, "RadixCache.match_prefix", "if self.disable or len(key) == 0:", "if self.disable or len(key) == 1:",
     "sglang tree pinned"),
    (sglang, "RadixCache.evict", "and not parent.children and parent.lock_ref == 0:",
     "and not parent.children and parent.lock_ref <= 0:", "sglang adapters pinned"),
    # a survivor of i25k's seed-1006 sample over reference.peers.*
    (vllm, "VllmKVCacheManager.allocate_slots", "max(cdiv(num_slots, self.config.block_size) - len(blocks), 0))",
     "max(cdiv(num_slots, self.config.block_size) - len(blocks), -1))", "vllm manager scenarios"),
    # survivors of i25k's seed-1007 sample over reference.peers.*
    (vllm_wire, "random_stream_log", "n = rng.randrange(1, stream_tokens - 2)", "n = rng.randrange(1, stream_tokens ^ 2)",
     "stream log contract"),
    (sglang, "RadixCache.insert", "            if p < len(child.key):\n                child = self._split_node(child, p)",
     "            if p is not len(child.key):\n                child = self._split_node(child, p)", "sglang tree pinned"),
    # identity for equality on values built at run time
    (sglang_events, "EventRecorder.enqueue", 'and event["parent_block_hash"] == tail["block_hashes"][-1]:',
     'and event["parent_block_hash"] is tail["block_hashes"][-1]:', "sglang keys events orders"),
    (sglang_key, "RadixKey.match", "            if a != b:", "            if a is not b:", "sglang keys events orders"),
    (sglang_sched, "compute_prefix_matches", "if check_threshold != -1 and", "if check_threshold != 0 and",
     "sglang keys events orders"),
    (sglang, "RadixCache.insert", "if pos + len(key) > inserted_len:", "if pos + len(key) is not inserted_len:",
     "sglang tree pinned"),
    (vllm, "VllmKVCacheManager.check", "assert held[b] == self.pool.ref_cnt[b],", "assert held[b] <= self.pool.ref_cnt[b],",
     "vllm manager scenarios"),
    # a survivor of the fresh seed-91 sample (i25n): the reset drawn with probability 0.7 instead of 0.3
    (sglang_stream, "random_event_log", "elif rng.random() < 0.3:", "elif rng.random() >= 0.3:",
     "stream workloads"),
    # its neighbours in the operation mix (i25n)
    (sglang_stream, "random_event_log", "elif op < 0.65:", "elif op < 0.75:", "stream workloads"),
    (sglang_stream, "random_event_log", "if op < 0.45:", "if op <= 0.4:", "stream workloads"),
    (sglang_stream, "random_event_log", "elif op < 0.9:", "elif op < 0.95:", "stream workloads"),
]


@pytest.mark.parametrize("module, name, before, after, case", SURVIVORS,
                         ids=[f"{m.__name__.rsplit('.', 1)[-1]}.{n}" for m, n, *_ in SURVIVORS])
def test_a_former_survivor_fails_its_peer_case(monkeypatch, module, name, before, after, case):
    copy = mutant_module(monkeypatch, module, before, after)
    owner, _, attr = name.rpartition(".")
    target = getattr(module, owner) if owner else module
    monkeypatch.setattr(target, attr, getattr(getattr(copy, owner) if owner else copy, attr))
    result = run_case(case)
    assert result.passed is False, f"{case} passed with {after!r}"
    assert case in result.detail


def test_the_faulty_prefix_index_is_caught_by_its_case_only_through_the_lock():
    """The sound index passed in the faulty one's place fails the case (the lock is then kept)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(sglang_protocol, "UnlockedPrefixAdapter", sglang_protocol.SGLangIndexAdapter)
        result = run_case("sglang tree checks")
    assert result.passed is False and "lock dropped" in result.detail
