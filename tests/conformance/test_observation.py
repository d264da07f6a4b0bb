"""Observability through the adapter protocol: the promises of ``observe()`` (each refusal by name), and the
bugs the golden cases used to be the only ones to catch, planted one at a time in the vLLM and SGLang
profiles, the example runtime and the reference adapter, each caught by a machine with no golden case and
with the runtime's own self-check switched off."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from planting import planted_module

from kvexact.conformance import simple_runtime
from kvexact.conformance.machines import ConformanceFailure
from kvexact.conformance.machines.allocator import STREAM, machine_class
from kvexact.conformance.observation import (
    ObservationError,
    ObservationProblem,
    Observer,
    check_cow,
    check_queues,
    check_usage,
)
from kvexact.conformance.runner import machine_settings, run_machine

SGLANG = "kvexact.reference.peers.sglang_protocol:sglang_factory"
RUN = settings(machine_settings("ci", shrink=False), max_examples=25, stateful_step_count=30)


def _problem(fn, *args) -> ObservationProblem:
    with pytest.raises(ObservationError) as err:
        fn(*args)
    return err.value.problem


# ---- the promises, one refusal each ---------------------------------------------------------------------
def test_a_queue_that_drops_and_appends_at_its_ends_keeps_its_promises():
    check_queues({"q": {0: [1, 2, 3]}}, {"q": {0: [5, 1, 3, 4]}}, {0: {2}})


def test_a_queued_block_that_a_live_table_maps_is_refused():
    assert _problem(check_queues, {}, {"q": {0: [1, 2]}}, {0: {2}}) is ObservationProblem.QUEUED_WHILE_MAPPED


def test_a_block_queued_twice_is_refused():
    assert _problem(check_queues, {}, {"q": {0: [1, 1]}}, {}) is ObservationProblem.QUEUED_TWICE


def test_a_queue_that_reorders_what_it_kept_is_refused():
    assert _problem(check_queues, {"q": {0: [1, 2, 3]}}, {"q": {0: [2, 1, 3]}}, {}) is ObservationProblem.QUEUE_REORDERED


def test_a_block_released_into_the_middle_of_a_queue_is_refused():
    """LRU order: a released block joins at the tail (or head), never between blocks already queued."""
    problem = _problem(check_queues, {"q": {0: [1, 3]}}, {"q": {0: [1, 2, 3]}}, {})
    assert problem is ObservationProblem.JOINED_INSIDE_QUEUE


def test_cow_copy_validate_publish_in_order_passes_and_clears_the_destination():
    pending: dict = {}
    check_cow([("copy", 0, 4), ("validate", 0, 4), ("publish", 0, 4)], pending)
    assert pending == {}


def test_a_cow_copy_published_before_validation_is_refused():
    problem = _problem(check_cow, [("copy", 0, 4), ("publish", 0, 4), ("validate", 0, 4)], {})
    assert problem is ObservationProblem.PUBLISHED_BEFORE_VALIDATED


def test_a_cow_validation_before_the_copy_is_refused():
    assert _problem(check_cow, [("validate", 1, 2)], {}) is ObservationProblem.VALIDATED_BEFORE_COPIED


def test_usage_must_be_the_mapped_share_of_the_pool():
    check_usage({0: 0.5, 1: 0.0}, {0: {1, 2}, 1: set()}, {0: 4, 1: 4})
    assert _problem(check_usage, {0: 0.25}, {0: {1, 2}}, {0: 4}) == ObservationProblem.USAGE_NOT_MAPPED_SHARE
    assert _problem(check_usage, [0.5], {0: {1}}, {0: 2}) == ObservationProblem.NOT_AN_OBSERVATION
    assert _problem(check_usage, {0: "half"}, {0: {1}}, {0: 2}) == ObservationProblem.NOT_AN_OBSERVATION


def test_vllm_profile_usage_that_counts_the_null_block_is_caught(monkeypatch):
    """vLLM's ``usage`` with the planted bug: the null block counted as usable, so the share is understated."""
    from kvexact.reference.peers import vllm_pool as bp
    from kvexact.reference.peers import vllm_protocol

    monkeypatch.setattr(bp.PoolState, "usage", lambda self: 1.0 - self.num_free_blocks / self.num_blocks)
    machine = machine_class("KVAllocation", sut_factory=vllm_protocol.vllm_factory, check_kernels=False,
                            validate_trace=False)
    _fails_with(machine, ObservationProblem.USAGE_NOT_MAPPED_SHARE)


def test_an_observation_that_is_not_a_dict_is_refused_by_name():
    assert _problem(Observer().step, [1, 2], {}) is ObservationProblem.NOT_AN_OBSERVATION
    assert _problem(Observer().step, {"cow": [("move", 0, 1)]}, {}) is ObservationProblem.NOT_AN_OBSERVATION


# ---- planted bugs, caught by the machines ---------------------------------------------------------------
def _fails_with(machine, problem: ObservationProblem) -> str:
    with pytest.raises(ConformanceFailure) as err:
        run_state_machine_as_test(machine, settings=RUN)
    assert problem.name in str(err.value), str(err.value)
    return str(err.value)


@pytest.mark.parametrize("spec", ["KVAllocation", "CowPublication"])
def test_correct_adapters_keep_their_observation_promises(spec):
    for factory in (None, simple_runtime.simple_runtime):
        machine = machine_class(spec, sut_factory=factory, check_kernels=False, validate_trace=False)
        run_state_machine_as_test(machine, settings=RUN)
        assert machine.stats.get("observation_checks", 0) > 100


def test_example_runtime_publishing_a_cow_copy_before_validating_it_is_caught(monkeypatch):
    """The example runtime maps the COW destination in the request's table before it validates the copy."""
    planted = planted_module(
        simple_runtime,
        '                self.cow_log.append(("validate", g, new))  # ... checks the copy is whole\n'
        '                table[-1] = new  # ... and only then publishes it in the request\'s table\n'
        '                self.cow_log.append(("publish", g, new))\n',
        '                table[-1] = new\n'
        '                self.cow_log.append(("publish", g, new))\n'
        '                self.cow_log.append(("validate", g, new))\n')
    monkeypatch.setattr(planted.SimpleRuntimeAllocator, "self_check", lambda self: None)
    machine = machine_class("CowPublication", sut_factory=planted.simple_runtime, check_kernels=False,
                            validate_trace=False)
    _fails_with(machine, ObservationProblem.PUBLISHED_BEFORE_VALIDATED)


def _touch_leaving_the_block_queued(pool, block_ids):
    """vLLM's ``touch`` with the planted bug: the reference is taken, the block stays in the free queue."""
    import attrs

    from kvexact.reference.peers import vllm_pool as bp

    ref = list(pool.ref_cnt)
    for block_id in block_ids:
        if block_id != bp.NULL_BLOCK_ID:
            ref[block_id] += 1
    return attrs.evolve(pool, ref_cnt=tuple(ref))


def test_vllm_profile_touch_that_leaves_the_block_in_the_free_queue_is_caught(monkeypatch):
    from kvexact.reference.peers import vllm_pool as bp
    from kvexact.reference.peers import vllm_protocol

    monkeypatch.setattr(bp, "touch", _touch_leaving_the_block_queued)
    monkeypatch.setattr(vllm_protocol.VllmProtocolAdapter, "self_check", lambda self: None)
    machine = machine_class("KVAllocation", sut_factory=vllm_protocol.vllm_factory, check_kernels=False,
                            validate_trace=False)
    _fails_with(machine, ObservationProblem.QUEUED_WHILE_MAPPED)


def test_vllm_profile_freeing_blocks_into_the_middle_of_the_queue_is_caught(monkeypatch):
    """LRU order broken: released blocks are filed by block id among the queued ones instead of joining an end."""
    import bisect

    import attrs

    from kvexact.reference.peers import vllm_pool as bp
    from kvexact.reference.peers import vllm_protocol

    real_free = bp.free_blocks

    def filed_by_id(pool, ordered_block_ids):
        freed = real_free(pool, ordered_block_ids)
        queue = list(pool.free.blocks)
        for block_id in freed.free.blocks:
            if block_id not in pool.free.blocks:
                bisect.insort(queue, block_id)
        return attrs.evolve(freed, free=bp.FreeQueue(queue))

    monkeypatch.setattr(bp, "free_blocks", filed_by_id)
    monkeypatch.setattr(vllm_protocol.VllmProtocolAdapter, "self_check", lambda self: None)
    machine = machine_class("KVAllocation", sut_factory=vllm_protocol.vllm_factory, check_kernels=False,
                            validate_trace=False)
    _fails_with(machine, ObservationProblem.JOINED_INSIDE_QUEUE)


def test_vllm_profile_evicting_one_block_that_drops_its_duplicates_is_caught(monkeypatch):
    """vLLM's hash map with the planted bug: popping one of two blocks cached under the same hash drops the
    other's entry too, so a block a live request still maps stops being a hit. The profile declares that it
    caches every full block at allocation, so the machines hold each hit to what live requests map."""
    from kvexact.reference.peers import vllm_pool as bp
    from kvexact.reference.peers import vllm_protocol

    def pop(self, key, block_id):
        table = self.as_dict()
        if block_id not in table.get(key, ()):
            return self, None
        del table[key]  # the planted bug: the other blocks under ``key`` go too
        return bp.HashToBlockMap(tuple(table.items())), block_id

    def duplicate_then_evict_one(machine) -> None:
        """Two requests fill the same second block (a duplicate under one hash); the first is released and its
        copy reused by a long request, so it is evicted; a third asks for the prefix the second still maps."""
        stream = list(STREAM)
        a = machine._start("r0", stream[:3], "home")
        b = machine._start("r1", stream[:3], "home")
        machine._append(a, stream[3])
        machine._append(b, stream[3])  # both second blocks now full and cached under one hash
        machine._both("release", "r0")
        del machine.requests["r0"]
        free = machine.config.blocks_per_group - 2  # r1 maps two blocks
        machine._start("r2", [3] * (2 * free - 1), "home")  # takes every free block, the released duplicate included
        machine._both("release", "r2")
        del machine.requests["r2"]
        machine._start("r0", stream[:5], "home")  # r1 maps both blocks of this prefix: a 4-token hit

    planted = machine_class("KVAllocation", sut_factory=vllm_protocol.vllm_factory, check_kernels=False,
                            validate_trace=False)()
    monkeypatch.setattr(bp.HashToBlockMap, "pop", pop)
    monkeypatch.setattr(vllm_protocol.VllmProtocolAdapter, "self_check", lambda self: None)
    with pytest.raises(ConformanceFailure, match="must hit on them"):
        duplicate_then_evict_one(planted)
    monkeypatch.undo()
    correct = machine_class("KVAllocation", sut_factory=vllm_protocol.vllm_factory, check_kernels=False,
                            validate_trace=False)()
    duplicate_then_evict_one(correct)
    assert correct.stats.get("hit_tokens=4") == 1, correct.stats


def test_reference_adapter_touch_that_leaves_the_block_queued_is_caught(monkeypatch):
    """The reference adapter's pool takes a reference on a queued block without taking it out of the queue;
    its own self-check is off, so only the observation can tell."""
    from kvexact.reference import adapters
    from kvexact.reference.pool import BlockPool

    def incref(self, block_id):
        self.refs[block_id] = self.refcount(block_id) + 1

    monkeypatch.setattr(BlockPool, "incref", incref)
    monkeypatch.setattr(adapters.ReferenceAdapter, "self_check", lambda self: None)
    machine = machine_class("KVAllocation", sut_factory=adapters.reference_factory, check_kernels=False,
                            validate_trace=False)
    _fails_with(machine, ObservationProblem.QUEUED_WHILE_MAPPED)


def test_reference_adapter_prefix_hit_over_the_whole_prompt_is_caught():
    """The reference adapter's content-keyed start walks every full block of the prompt, not one token short
    of it, so a wholly cached prompt is served with nothing left to compute; the allocator machine holds
    every hit to 0x07A's chain (whole blocks, at most the prompt length minus one)."""
    from kvexact.reference import adapters

    planted = planted_module(adapters, "for j in range((len(prompt) - 1) // p):", "for j in range(len(prompt) // p):")
    machine = machine_class("KVAllocation", sut_factory=planted.reference_factory, check_kernels=False,
                            validate_trace=False)
    with pytest.raises(ConformanceFailure) as err:
        run_state_machine_as_test(machine, settings=RUN)
    assert "0x07A" in str(err.value) and "reused" in str(err.value), str(err.value)
    correct = machine_class("KVAllocation", sut_factory=adapters.reference_factory, check_kernels=False,
                            validate_trace=False)
    run_state_machine_as_test(correct, settings=RUN)
    assert any(k.startswith("hit_tokens=") and k != "hit_tokens=0" for k in correct.stats)


@pytest.mark.parametrize("touch_children", [True, False])
def test_sglang_profile_radix_walk_over_matching_into_an_edge_is_caught(monkeypatch, touch_children):
    """The walk skips the split when the mismatch is at an edge's last token, so the match runs one token
    into the edge (with and without the children's access times kept, which changes what LRU evicts and so
    which paths stay cached); the Radix machine's probe of cached paths forces the lookup that shows it, and
    the match length and slots are compared with the normative index."""
    from kvexact.reference.peers.sglang import RadixCache

    def walk(self, key):  # RadixCache._walk but for the one planted comparison
        now = self.clock()
        node = self.root_node
        node.last_access_time = now
        while len(key):
            child = node.children.get(key.child_key(self.page_size))
            if child is None:
                break
            if touch_children:
                child.last_access_time = now
            p = child.key.match(key, self.page_size)
            if p < len(child.key) - 1:  # the planted bug: should be ``p < len(child.key)``
                return self._split_node(child, p)
            node, key = child, key[p:]
        return node

    monkeypatch.setattr(RadixCache, "_walk", walk)
    run = run_machine("Radix", SGLANG, RUN, 0, check_kernels=False)
    assert not run.passed, run.examples
    assert "matched" in run.error and "the reference matched" in run.error, run.error



@pytest.mark.parametrize("planted, caught_as", [
    ("keeps_the_cache", "right after reset_prefix_cache()"),
    ("ignores_blocks_in_use", "must be refused exactly while a block is in use"),
])
def test_vllm_profile_reset_prefix_cache_bugs_are_caught(monkeypatch, planted, caught_as):
    """vLLM's ``reset_prefix_cache`` with a planted bug: it reports success but forgets nothing, or it resets
    while requests still hold blocks. The KVAllocation machine's reset rule holds it to both promises."""
    import attrs

    from kvexact.reference.peers import vllm_pool as bp
    from kvexact.reference.peers import vllm_protocol

    def reset(pool):
        if planted == "keeps_the_cache":  # success where it should, but the cached identities stay
            return pool, pool.num_free_blocks == pool.num_blocks - 1
        return attrs.evolve(pool, cached=bp.HashToBlockMap(), block_key=(None,) * pool.num_blocks), True

    monkeypatch.setattr(bp, "reset_prefix_cache", reset)
    monkeypatch.setattr(vllm_protocol.VllmProtocolAdapter, "self_check", lambda self: None)
    machine = machine_class("KVAllocation", sut_factory=vllm_protocol.vllm_factory, check_kernels=False,
                            validate_trace=False)
    with pytest.raises(ConformanceFailure) as err:
        run_state_machine_as_test(machine, settings=settings(RUN, max_examples=60))
    assert caught_as in str(err.value), str(err.value)
    monkeypatch.undo()
    correct = machine_class("KVAllocation", sut_factory=vllm_protocol.vllm_factory, check_kernels=False,
                            validate_trace=False)
    run_state_machine_as_test(correct, settings=RUN)
    assert correct.stats.get("reset_prefix_cache:ok", 0) and correct.stats.get("reset_prefix_cache:BLOCKS_IN_USE", 0)


def _unlock_keeps_edges_protected(monkeypatch) -> None:
    """Plant in the SGLang profile: an unlock moves an edge back to evictable only on its 2 -> 1 crossing, so a
    fully unlocked edge stays counted as protected (I1 still holds: the two counters keep their sum)."""
    from kvexact.reference.peers import sglang

    planted = planted_module(sglang, "if step < 0 and cur.lock_ref == 1:", "if step < 0 and cur.lock_ref == 2:")
    monkeypatch.setattr(sglang.RadixCache, "_lock_walk", planted.RadixCache._lock_walk)


def test_sglang_profile_unlock_that_keeps_edges_protected_is_caught_by_cache_sizes(monkeypatch):
    """The Radix machine holds an index's cache_sizes() (evictable, protected) to the normative tree's after every
    step, so a counter bug that no match, slot or eviction shows is caught."""
    _unlock_keeps_edges_protected(monkeypatch)
    run = run_machine("Radix", SGLANG, RUN, 0, check_kernels=False)
    assert not run.passed and "cache_sizes()" in run.error, run.error[:400]


def test_without_cache_sizes_the_same_counter_bug_passes(monkeypatch):
    """The same planted bug in an index that does not offer cache_sizes(): nothing else observes the counters
    (the check above is what catches it)."""
    from kvexact.reference.peers.sglang_protocol import SGLangIndexAdapter

    _unlock_keeps_edges_protected(monkeypatch)
    monkeypatch.delattr(SGLangIndexAdapter, "cache_sizes")
    run = run_machine("Radix", SGLANG, RUN, 0, check_kernels=False)
    assert run.passed, run.error[:400]


DELAYED = "kvexact.reference.peers.vllm_protocol:vllm_delayed_caching_factory"


def _cache_blocks_one_short(monkeypatch) -> None:
    """Plant in the vLLM profile: delayed caching (``cache_blocks``) leaves the last full computed block uncached."""
    from kvexact.reference.peers import vllm

    planted = planted_module(vllm, "num_full = min(num_full // self.config.block_size, len(blocks))",
                             "num_full = min(num_full // self.config.block_size - 1, len(blocks))")
    monkeypatch.setattr(vllm.VllmKVCacheManager, "cache_blocks", planted.VllmKVCacheManager.cache_blocks)


def test_vllm_delayed_caching_that_leaves_a_published_block_uncached_is_caught(monkeypatch):
    """The delayed-caching profile declares keeps_published_blocks: a start must hit on the full blocks an accepted
    cache() published while a live request still maps them. Caching one block short is caught that way."""
    from kvexact.reference.peers.vllm_protocol import DelayedCachingAdapter

    _cache_blocks_one_short(monkeypatch)
    monkeypatch.setattr(DelayedCachingAdapter, "cached_prefixes", None)  # which would catch it first
    run = run_machine("KVAllocation", DELAYED, RUN, 0, check_kernels=False)
    assert not run.passed and "published by an accepted cache()" in run.error, run.error[:400]


def test_vllm_delayed_caching_one_block_short_is_caught_by_cached_prefixes(monkeypatch):
    _cache_blocks_one_short(monkeypatch)
    run = run_machine("KVAllocation", DELAYED, RUN, 0, check_kernels=False)
    assert not run.passed and "cached_prefixes() lacks" in run.error, run.error[:400]


def test_the_correct_delayed_caching_profile_passes_and_hits():
    run = run_machine("KVAllocation", DELAYED, RUN, 0, check_kernels=False)
    assert run.passed, run.error[:400]
    assert run.stats.get("cache:ok", 0) > 0 and any(k.startswith("hit_tokens=") and k != "hit_tokens=0"
                                                     for k in run.stats), run.stats


def test_without_the_declaration_caching_one_block_short_passes(monkeypatch):
    """The same planted bug with keeps_published_blocks off: a missing hit is legal for a runtime that may evict
    published blocks, so nothing else catches it."""
    from kvexact.reference.peers.vllm_protocol import DelayedCachingAdapter

    _cache_blocks_one_short(monkeypatch)
    monkeypatch.setattr(DelayedCachingAdapter, "keeps_published_blocks", False)
    monkeypatch.setattr(DelayedCachingAdapter, "cached_prefixes", None)
    run = run_machine("KVAllocation", DELAYED, RUN, 0, check_kernels=False)
    assert run.passed, run.error[:400]


def test_vllm_profile_that_allocates_a_block_ahead_on_decode_is_caught():
    """0x09B's N_r,blocks: a live request maps exactly ceil(tokens / P) blocks in every group. A decode that asks
    vLLM for two new slots instead of one maps a block early at every block boundary; attention, usage and the
    queues all stay consistent with the adapter's own tables, so the table size shows it. (Its reported usage is
    withheld here: with it, the decode that needs no block but is refused on a full pool is caught first, as a
    refusal with room, tests/conformance/test_room.py.)"""
    from kvexact.reference.peers import vllm_protocol

    planted = planted_module(vllm_protocol,
                             "allocate_slots(grown, 1, delay_cache_blocks=self.delay_cache_blocks)",
                             "allocate_slots(grown, 2, delay_cache_blocks=self.delay_cache_blocks)")
    correct_observe = planted.VllmProtocolAdapter.observe
    planted.VllmProtocolAdapter.observe = lambda self: {"queues": correct_observe(self)["queues"]}
    machine = machine_class("KVAllocation", sut_factory=planted.vllm_factory, check_kernels=False,
                            validate_trace=False)
    with pytest.raises(ConformanceFailure, match=r"0x09B"):
        run_state_machine_as_test(machine, settings=RUN)


def test_reference_adapter_that_under_reports_its_hit_is_caught():
    """The reference adapter (content-keyed reuse) with the planted bug: it reuses the cached blocks but reports a
    hit of len(hit) >> P tokens (0 here), so its table maps a live request's cached block past the reported hit.
    Rows past a hit go into blocks of the request's own; the machine catches the block shared past it (with
    cached_prefixes() and the keeps_published_blocks floor withheld, which would catch the short hit first)."""
    from kvexact.reference import adapters

    planted = planted_module(adapters, "return OpResult(True, None, len(hit) * p, ",
                             "return OpResult(True, None, len(hit) >> p, ")

    def without_cached_prefixes(config):
        adapter = planted.reference_factory(config)
        adapter.cached_prefixes = None
        adapter.keeps_published_blocks = False
        return adapter

    machine = machine_class("KVAllocation", sut_factory=without_cached_prefixes, check_kernels=False,
                            validate_trace=False)
    with pytest.raises(ConformanceFailure, match=r"past the hit that other live requests map"):
        run_state_machine_as_test(machine, settings=RUN)


def test_vllm_delayed_caching_that_caches_but_reports_a_refusal_is_caught(monkeypatch):
    """Off lockstep a refused cache() is not compared by name; but a SUT that declares keeps_published_blocks promises
    that cache() publishes, so refusing the cache() of a live request the reference cached is caught by name."""
    from kvexact.reference.adapters import OpResult
    from kvexact.reference.peers.vllm_protocol import DelayedCachingAdapter

    correct = DelayedCachingAdapter.cache

    def caches_then_refuses(self, request_id):
        correct(self, request_id)
        return OpResult(False, "CACHE_FAILED")

    monkeypatch.setattr(DelayedCachingAdapter, "cache", caches_then_refuses)
    run = run_machine("KVAllocation", DELAYED, RUN, 0, check_kernels=False)
    assert not run.passed and "declares keeps_published_blocks" in run.error, run.error[:400]


REFERENCE = "kvexact.reference.adapters:reference_factory"


def _plant_in_reference_adapter(monkeypatch, method: str, original: str, mutated: str) -> None:
    from kvexact.reference import adapters

    planted = planted_module(adapters, original, mutated)
    monkeypatch.setattr(adapters.ReferenceAdapter, method, getattr(planted.ReferenceAdapter, method))


def test_reference_adapter_start_that_stops_a_block_short_of_its_cache_is_caught(monkeypatch):
    """The reference adapter offers cached_prefixes(): a home start must hit exactly the longest chain of whole blocks
    it holds. A lookup that never tries the chain's last block under-reports a legal-looking hit."""
    _plant_in_reference_adapter(monkeypatch, "start", "for j in range((len(prompt) - 1) // p):",
                                "for j in range((len(prompt) - 1) // p - 1):")
    run = run_machine("KVAllocation", REFERENCE, RUN, 0, check_kernels=False)
    assert not run.passed and "but its cached_prefixes() held" in run.error, run.error[:400]


def test_reference_adapter_cache_that_leaves_the_last_block_unpublished_is_caught(monkeypatch):
    _plant_in_reference_adapter(monkeypatch, "cache", "for j in range(len(tokens) // p):",
                                "for j in range(len(tokens) // p - 1):")
    run = run_machine("KVAllocation", REFERENCE, RUN, 0, check_kernels=False)
    assert not run.passed and "but its cached_prefixes() lacks" in run.error, run.error[:400]


def test_without_cached_prefixes_a_start_that_stops_short_passes(monkeypatch):
    """The same short lookup passes when the adapter offers neither cached_prefixes() nor the keeps_published_blocks
    declaration (whose floor catches it too): a shorter hit is legal for a runtime that may have evicted the rest,
    and no other check sees it."""
    from kvexact.reference.adapters import reference_factory

    _plant_in_reference_adapter(monkeypatch, "start", "for j in range((len(prompt) - 1) // p):",
                                "for j in range((len(prompt) - 1) // p - 1):")

    def without_cached_prefixes(config):
        adapter = reference_factory(config)
        adapter.cached_prefixes = None  # not callable: the machines treat it as not offered
        adapter.keeps_published_blocks = False
        return adapter

    machine = machine_class("KVAllocation", sut_factory=without_cached_prefixes, check_kernels=False)
    run_state_machine_as_test(machine, settings=RUN)


def _vllm_lookup_skips_evictable_blocks(monkeypatch) -> None:
    """Plant in the vLLM profile: a prefix lookup that stops at the first cached block no request holds (it sits in
    the free queue, evictable), as if the free queue were not searched."""
    from kvexact.reference.peers import vllm

    planted = planted_module(vllm, "            if found is None:\n                break",
                             "            if found is None or self.pool.ref_cnt[found[0]] == 0:\n                break")
    monkeypatch.setattr(vllm.VllmKVCacheManager, "get_computed_blocks", planted.VllmKVCacheManager.get_computed_blocks)


def test_vllm_lookup_that_skips_evictable_cached_blocks_is_caught_by_cached_prefixes(monkeypatch):
    """The floor of caches_at_allocation counts only blocks live requests map; the profile's cached_prefixes() also
    holds released, still cached blocks, and a start must hit all of the chain it holds."""
    _vllm_lookup_skips_evictable_blocks(monkeypatch)
    run = run_machine("KVAllocation", "kvexact.reference.peers.vllm_protocol:vllm_factory", RUN, 0,
                      check_kernels=False)
    assert not run.passed and "but its cached_prefixes() held" in run.error, run.error[:400]



@pytest.mark.parametrize("mutated", ["if not 0 != keep_tokens < self.lengths[request_id]:",
                                     "if not 0 <= keep_tokens != self.lengths[request_id]:"])
def test_example_runtime_truncate_that_accepts_a_negative_or_longer_count_is_caught(monkeypatch, mutated):
    """Round 6's survivors: the example runtime's truncate bound weakened so that a negative count, or one past the
    request's length, is accepted. The truncate rule sends both, beside every real truncate, and both must be refused
    with the tables unchanged."""
    planted = planted_module(simple_runtime, "if not 0 <= keep_tokens < self.lengths[request_id]:", mutated)
    monkeypatch.setattr(simple_runtime.SimpleRuntimeAllocator, "truncate", planted.SimpleRuntimeAllocator.truncate)
    run = run_machine("KVAllocation", "kvexact.conformance.simple_runtime:simple_runtime", RUN, 0, check_kernels=False)
    assert not run.passed and "truncate(" in run.error, run.error[:400]
    assert "the protocol refuses it" in run.error or "the reference rejected it" in run.error, run.error[:400]


def test_reference_adapter_that_caches_but_reports_a_refusal_is_caught(monkeypatch):
    """The reference adapter under test declares keeps_published_blocks (a published block a live request maps has a
    reference, so it is never evicted): a cache() that publishes and then reports a refusal is caught off lockstep."""
    from kvexact.reference import adapters
    from kvexact.reference.adapters import OpResult

    assert adapters.reference_factory(adapters.AdapterConfig()).keeps_published_blocks
    correct = adapters.ReferenceAdapter.cache

    def caches_then_refuses(self, request_id):
        result = correct(self, request_id)
        return OpResult(False, "CACHE_FAILED") if result.accepted and self.prefix is None else result

    monkeypatch.setattr(adapters.ReferenceAdapter, "cache", caches_then_refuses)
    run = run_machine("KVAllocation", "kvexact.reference.adapters:reference_factory", RUN, 0, check_kernels=False)
    assert not run.passed and "declares keeps_published_blocks" in run.error, run.error[:400]


def test_an_explicit_evict_of_a_mapped_published_block_lowers_the_hit_floor():
    """An accepted ``evict(prefix)`` drops the identity even of a block a live request maps (the mapping stays),
    so a correct adapter that declares ``keeps_published_blocks`` then misses that prefix: the floor on its hits
    must not count the evicted block (the machine once required the hit and failed the correct reference)."""
    from kvexact.reference import adapters

    machine = machine_class("KVAllocation", sut_factory=adapters.reference_factory, check_kernels=False,
                            validate_trace=False)()
    p = machine.config.block_tokens
    prompt = [1, 2, 3, 1, 2, 3][: 2 * p + 1]
    live = machine._start("r0", prompt, "home")
    machine.cache(live)
    assert machine._mapped_prefix(prompt + [9]) == 2 * p
    machine.evict(tuple(prompt[:p]))
    assert machine._mapped_prefix(prompt + [9]) == 0
    machine._start("r1", prompt + [9], "home")  # the correct adapter hits nothing now, and passes
    machine.teardown()
