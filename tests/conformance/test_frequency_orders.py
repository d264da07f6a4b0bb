"""Victim orders by frequency (``eviction_order = "lfu"`` / ``"slru"``) and the logits cap on the prompt tokens an
admitted request takes from the cache (``computed_prefix_tokens``): what the Radix machine holds an index to, the
SGLang profile passing, and planted faults named."""

from __future__ import annotations

import pytest

from kvexact.conformance.machines import ConformanceFailure
from kvexact.conformance.runner import build_machine, machine_settings, run_machine
from kvexact.reference.index import EVICTION_ORDERS, IndexConfig, RadixIndex, check_index
from kvexact.reference.peers.sglang_protocol import POLICY_AT_PAGE_SIZE, SGLangIndexAdapter, sglang_factory

POLICIES = "kvexact.reference.peers.sglang_protocol:sglang_policies_factory"


def machine_with(adapter_class, spec: str):
    """A ``spec`` Radix machine instance whose system under test is ``adapter_class`` running the policy
    ``sglang_policies_factory`` runs at that page size."""
    machine = build_machine(spec, None)
    machine.sut_factory = staticmethod(lambda config: adapter_class(config, POLICY_AT_PAGE_SIZE[config.page_size]))
    return machine()


class RanksByRecencyAlone(SGLangIndexAdapter):
    """Planted: declares the policy of its page size but ranks every victim least recently used first."""

    def __init__(self, config: IndexConfig, policy: str = "lru"):
        super().__init__(config, policy)
        self.sglang.cache.priority_of = lambda node: node.last_access_time


class ForgetsItsHits(SGLangIndexAdapter):
    """Planted: an insert through an existing edge counts no hit on it (a new leaf still counts one)."""

    def finish(self, request_id: str) -> None:
        before = {node: node.hit_count for node in self.sglang.cache.nodes()}
        super().finish(request_id)
        for node, hits in before.items():
            node.hit_count = hits


class UncappedComputedPrefix(SGLangIndexAdapter):
    """Planted: reports the whole match as taken from the cache, the last prompt token included."""

    def computed_prefix_tokens(self, request_id: str) -> int:
        return len(self.sglang._req(request_id).prefix_indices)


def _twice_then_once(m, page: int) -> None:
    """Cache a two-page path twice (two finished requests) and then a one-page path once (newer)."""
    hot = [1] * page + [2] * page
    for _ in range(2):
        m.finish_request(m.admit_prompt(hot))
    m.finish_request(m.admit_prompt([3] * page))


@pytest.mark.parametrize(("spec", "order"), [("Radix@page2", "lfu"), ("Radix@page4", "slru")])
def test_the_sglang_profile_evicts_the_leaf_cached_through_least_often(spec, order):
    m = machine_with(SGLangIndexAdapter, spec)
    assert m.sut.eviction_order == order == POLICY_AT_PAGE_SIZE[m.page]
    _twice_then_once(m, m.page)
    m.evict(m.page)
    assert m.stats[f"{order}:victim_rank_checked"] == 1
    assert [m.state.path_tokens(n) for n in m.state.nodes if n and not m.state.nodes[n].children] == \
        [tuple([1] * m.page + [2] * m.page)]


@pytest.mark.parametrize(("spec", "order"), [("Radix@page2", "LFU"), ("Radix@page4", "SLRU")])
@pytest.mark.parametrize("planted", [RanksByRecencyAlone, ForgetsItsHits], ids=["recency_alone", "forgets_hits"])
def test_a_frequency_order_bug_is_named(spec, order, planted):
    m = machine_with(planted, spec)
    _twice_then_once(m, m.page)
    with pytest.raises(ConformanceFailure, match=rf"declares {order} eviction but evicted slots .* \(rank 1: 2 "
                                                 r"finished requests cached through it\) while the unlocked leaf "
                                                 r".* ranks 0 \(1 finished requests\) \(0x08E\)"
                       if order == "SLRU" else
                       rf"declares {order} eviction but evicted slots .* \(rank 2: .*\) while the unlocked leaf "
                       r".* ranks 1 \(1 finished requests\) \(0x08E\)"):
        m.evict(m.page)


def test_a_frequency_bug_passes_without_the_declaration(monkeypatch):
    """Without ``eviction_order`` any unlocked leaf is a legal victim (0x08E: the ranking is policy)."""
    monkeypatch.setattr(SGLangIndexAdapter, "eviction_order", None)
    m = machine_with(RanksByRecencyAlone, "Radix@page2")
    assert getattr(m.sut, "eviction_order", None) is None
    _twice_then_once(m, m.page)
    m.evict(m.page)
    assert "lfu:victim_rank_checked" not in m.stats and m.stats["evicted_slots"] == 4


def test_the_frequency_probe_forces_out_a_recency_ranking():
    """At the gate's size the machine's own draws rarely leave two leaves of different frequency at an eviction; the
    probe after each finish makes them, so a profile ranking by recency alone fails the run."""
    size = machine_settings("ci", 10, 30, shrink=False)
    good = run_machine("Radix@page2", POLICIES, size, 0)
    assert good.passed, good.error
    assert good.stats["frequency_probe:evicted"] > 0 and good.stats["lfu:victim_rank_checked"] > 0
    machine = build_machine("Radix@page2", None)
    machine.sut_factory = staticmethod(lambda config: RanksByRecencyAlone(config, "lfu"))
    with pytest.raises(ConformanceFailure, match="declares LFU eviction"):
        from hypothesis.stateful import run_state_machine_as_test

        run_state_machine_as_test(machine, settings=size)


def test_frequency_orders_are_declarable_and_others_still_refused():
    assert EVICTION_ORDERS == ("lru", "lfu", "slru")

    class Slru(RadixIndex):
        eviction_order = "slru"

    class Fifo(RadixIndex):
        eviction_order = "fifo"

    check_index(Slru(IndexConfig()))
    with pytest.raises(Exception, match=r"eviction_order='fifo'.*machines check lru, lfu, slru"):
        check_index(Fifo(IndexConfig()))


def test_the_logits_cap_holds_on_the_sglang_profile():
    m = machine_with(SGLangIndexAdapter, "Radix")
    m.finish_request(m.admit_prompt([1, 2, 3]))
    m.cancel_request(m.admit_prompt([1, 2, 3]))
    m.cancel_request(m.admit_prompt([1, 2, 3, 1]))
    assert m.stats["logits_cap:checked"] == 3


def test_a_computed_prefix_without_the_logits_cap_is_named():
    m = machine_with(UncappedComputedPrefix, "Radix")
    m.finish_request(m.admit_prompt([1, 2, 3]))
    m.cancel_request(m.admit_prompt([1, 2, 3, 1]))  # a match shorter than the prompt: no cap to apply
    with pytest.raises(ConformanceFailure, match=r"takes 3 prompt tokens of q2 from the cache; with 3 of its 3 prompt "
                                                 r"tokens matched it must take 2: .*logits \(0x07A\)"):
        m.admit_prompt([1, 2, 3])


def test_the_default_factory_runs_lru_at_every_page_size_as_the_live_runtime_does():
    """``sglang_factory`` is SGLang's default configuration, which ``kvexact diff sglang`` compares with the live
    runtime; only ``sglang_policies_factory`` (the gate's) varies the policy."""
    from kvexact.reference.peers.sglang_protocol import sglang_policies_factory

    for page in (1, 2, 4):
        assert sglang_factory(IndexConfig(16, page_size=page)).sglang.cache.eviction_policy == "lru"
        policy = sglang_policies_factory(IndexConfig(16, page_size=page))
        assert policy.eviction_order == policy.sglang.cache.eviction_policy == POLICY_AT_PAGE_SIZE[page]


class StopsOnlyOnTheExactCount(SGLangIndexAdapter):
    """Planted: evicts leaf after leaf until exactly ``num_tokens`` are freed (``!=`` for ``<``), so a leaf larger than
    what is left to free makes it go on."""

    def evict(self, num_tokens: int):
        runs, freed = [], 0
        while freed != num_tokens:
            got = self.sglang.evict(1).freed_slot_ids
            if not got:
                break
            runs.extend(got)
            freed += sum(len(run) for run in got)
        return runs


def test_the_frequency_probe_evicts_one_token_so_an_eviction_that_does_not_stop_shows():
    """The probe asks for one token, less than the page a leaf frees, so an eviction loop that stops only on the exact
    count goes on to a second leaf, which the machine names."""
    m = machine_with(StopsOnlyOnTheExactCount, "Radix@page2")
    path = [1, 1, 2, 2]
    m.finish_request(m.admit_prompt(path))
    with pytest.raises(ConformanceFailure, match=r"evict\(1\) went on to evict slots .* after 2 tokens were freed"):
        m._frequency_probe(path)
    good = machine_with(SGLangIndexAdapter, "Radix@page2")
    good.finish_request(good.admit_prompt(path))
    good._frequency_probe(path)
    assert good.stats["frequency_probe:evicted"] == 1 and good.stats["evicted_slots"] == 2
