"""The hybrid-cache adapter protocol: the Hybrid machine drives an adapter in lockstep with the normative
hybrid prefix cache. The reference and the vLLM profile pass; mutants whose hit trusts one group or skips
the lcm alignment are caught through the adapter path; the protocol routes only to the Hybrid machine."""

from __future__ import annotations

import pytest
from hypothesis import settings

from kvexact.conformance.machines import ConformanceFailure
from kvexact.conformance.runner import build_machine, machine_settings, machines_for, run_machine
from kvexact.reference.adapters import AdapterError, AdapterProblem, adapter_protocol
from kvexact.reference.hybrid_adapter import HybridCache, HybridCacheConfig, check_hybrid, hybrid_factory
from kvexact.reference.peers.vllm_hybrid_cache import vllm_hybrid_factory

REFERENCE = "kvexact.reference.hybrid_adapter:hybrid_factory"
PROFILE = "kvexact.reference.peers.vllm_hybrid_cache:vllm_hybrid_factory"
ONE_GROUP = "kvexact.conformance.faulty_hybrid:faulty_one_group"
UNALIGNED = "kvexact.conformance.faulty_hybrid:faulty_unaligned"


def _run(adapter, examples=30, shrink=False):
    return run_machine("Hybrid", adapter, settings(machine_settings("ci", shrink=shrink), max_examples=examples,
                                                   stateful_step_count=30), seed=38)


def _machine(factory):
    machine = build_machine("Hybrid", None)
    machine.sut_factory = staticmethod(factory)
    return machine()


@pytest.mark.parametrize("adapter", [REFERENCE, PROFILE])
def test_reference_and_vllm_profile_pass_the_hybrid_machine_in_lockstep(adapter):
    run = _run(adapter)
    assert run.passed, run.error
    stats = run.stats
    assert stats["mixed_sizes"] and stats["hash_finer_than_a_group"] and stats["hits"], stats
    assert {"admit", "append", "release", "evict", "lookup", "lookup_seen"} <= set(run.rules_fired()), stats


@pytest.mark.parametrize(("adapter", "name"), [(ONE_GROUP, "faulty-one-group"), (UNALIGNED, "faulty-unaligned")])
def test_a_faulty_hybrid_adapter_is_caught_naming_the_step(adapter, name):
    run = _run(adapter, examples=60)
    assert not run.passed
    assert "ConformanceFailure" in run.error and f"{name}: " in run.error and "the reference" in run.error, run.error


def test_one_group_mutant_is_caught_where_group_1_lost_the_prefix():
    """Groups of 2 and 4 tokens hashed at 2: once group 1 drops [0, 1, 0, 1], the hit for a 5-token query
    is 0 (no group-1 block), though group 0 still holds 4 tokens."""
    from kvexact.conformance.faulty_hybrid import faulty_one_group

    m = _machine(faulty_one_group)
    m.configure(2, 4, 1)
    m.admit([0, 1, 0, 1, 1], False)
    m.lookup_seen(0, 5, [])  # both say 4
    m.release(0)
    m.evict(1, 0)
    with pytest.raises(ConformanceFailure, match=r"faulty-one-group: lookup\(\[0, 1, 0, 1, 1\]\) gave 4, the "
                                                 r"reference 0"):
        m.lookup_seen(0, 5, [])


def test_unaligned_mutant_is_caught_on_a_hit_inside_a_block():
    """Groups of 1 and 2 tokens (lcm 2): a 3-token prompt caches 2 tokens; a query of those 2 plus one
    more hits 2, but the one-token prompt's own prefix [0] hits 0 in the reference, 1 unaligned."""
    from kvexact.conformance.faulty_hybrid import faulty_unaligned

    m = _machine(faulty_unaligned)
    m.configure(1, 2, 0)
    m.admit([0, 0, 1], False)
    m.lookup_seen(0, 3, [])  # 2 == 2
    with pytest.raises(ConformanceFailure, match=r"faulty-unaligned: lookup\(\[0, 0\]\) gave 1, the reference 0"):
        m.lookup_seen(0, 2, [])


def test_evict_with_an_adapter_spares_prefixes_a_running_request_starts_with():
    m = _machine(hybrid_factory)
    m.configure(2, 2, 0)
    m.admit([1, 1, 0], False)
    m.evict(0, 0)
    assert m.stats["nothing_evictable"] == 1 and m.held[0] == {(1, 1)}
    m.release(0)
    m.evict(0, 0)
    assert m.held[0] == set()


def test_the_protocol_routes_to_the_hybrid_machine_only():
    for factory in (hybrid_factory, vllm_hybrid_factory):
        assert adapter_protocol(factory) == "hybrid-cache"
        adapter = factory(HybridCacheConfig((4, 2), 2, 16))
        assert isinstance(adapter, HybridCache)
        check_hybrid(adapter)
    assert machines_for(REFERENCE) == ("Hybrid",)
    for spec in ("KVAllocation", "Radix", "Radix@page2"):
        with pytest.raises(AdapterError, match="is a hybrid-cache adapter; the .* machine takes none") as e:
            build_machine(spec, REFERENCE)
        assert e.value.problem is AdapterProblem.WRONG_MACHINE
    for adapter in ("kvexact.conformance.simple_runtime:simple_runtime", "kvexact.reference.index:radix_factory"):
        with pytest.raises(AdapterError) as e:
            build_machine("Hybrid", adapter)
        assert e.value.problem is AdapterProblem.WRONG_MACHINE


def test_a_hybrid_adapter_without_a_method_is_refused_by_name():
    class NoEvict:
        config = HybridCacheConfig()

        def admit(self, request_id, prompt): ...
        def append(self, request_id, token): ...
        def free(self, request_id): ...
        def lookup(self, prompt): ...
        def self_check(self): ...

    with pytest.raises(AdapterError, match=r"has no method evict\(\)") as e:
        check_hybrid(NoEvict())
    assert e.value.problem is AdapterProblem.MISSING_METHOD



def test_a_short_group_pool_refuses_admission_and_append_in_the_reference_adapter():
    """Groups of 1 and 2 tokens with 3 blocks each: a 4-token prompt needs 4 group-0 blocks (refused), a
    3-token one fits (3 + 2 blocks), then its 4th token needs a 4th group-0 block (refused)."""
    cache = hybrid_factory(HybridCacheConfig((1, 2), 1, 3))
    assert cache.admit("a", [0, 1, 0, 1]) is None
    assert cache.lookup([0, 1, 0, 1]) == 0
    assert cache.admit("b", [0, 1, 0]) == 0
    assert cache.append("b", 1) is False
    cache.self_check()
    assert cache.lookup([0, 1, 0]) == 2  # b's A-aligned prefix [0, 1] is cached; its 3rd token is not
    cache.free("b")
    cache.self_check()


def test_the_vllm_profile_shares_one_pool_between_the_groups():
    """vLLM's groups draw on one pool (3 blocks a group: 6 usable): a 3-token prompt takes 3 + 2 blocks,
    its 4th token 1 more (group 1's second block is full only at 4), its 5th would need 2 (refused)."""
    cache = vllm_hybrid_factory(HybridCacheConfig((1, 2), 1, 3))
    assert cache.admit("a", [0, 1, 0, 1, 0, 1, 0]) is None
    assert cache.admit("b", [0, 1, 0]) == 0
    assert cache.append("b", 1) is True
    assert cache.append("b", 0) is False
    cache.self_check()
    assert cache.lookup([0, 1, 0, 1, 1]) == 4
    cache.free("b")
    cache.self_check()
