"""The prefix-index adapter protocol: the SGLang profile in the Radix machine, in lockstep with the
normative index, and the faults the lockstep must name (a mutant, a refusal with room left, a short
eviction, a victim that is no tree node, a leaked slot)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from kvexact.conformance.machines import ConformanceFailure
from kvexact.conformance.runner import build_machine, machine_settings, machines_for, run_machine
from kvexact.reference.adapters import AdapterError, AdapterProblem, adapter_protocol
from kvexact.reference.index import IndexConfig, PrefixIndex, RadixIndex, check_index
from kvexact.reference.peers.sglang_protocol import SGLangIndexAdapter, faulty_unlocked_prefix, sglang_factory

SGLANG = "kvexact.reference.peers.sglang_protocol:sglang_factory"
FAULTY = "kvexact.reference.peers.sglang_protocol:faulty_unlocked_prefix"
NORMATIVE = "kvexact.reference.index:radix_factory"


def machine_with(adapter_class):
    """A Radix machine instance whose system under test is ``adapter_class(IndexConfig())``."""
    machine = build_machine("Radix", None)
    machine.sut_factory = staticmethod(adapter_class)
    return machine()


def test_sglang_profile_passes_the_radix_machine_in_lockstep():
    run = run_machine("Radix", SGLANG, settings(machine_settings("ci"), max_examples=20, stateful_step_count=30))
    assert run.passed, run.error
    stats = run.stats
    assert stats["attention_checks"] > 0 and stats.get("evicted_slots", 0) > 0 and stats.get("decode:ok", 0) > 0
    assert any(k.startswith("admit:hit=") and k != "admit:hit=0" for k in stats), stats
    assert set(run.rules_fired()) == set(run.rules), run.rules_fired()


def test_the_normative_index_plugs_in_through_the_same_interface():
    """One prefix-index interface: the normative radix index behind it, as the system under test, passes
    the Radix machine in lockstep with the reference."""
    assert isinstance(RadixIndex(IndexConfig()), PrefixIndex) and machines_for(NORMATIVE) == ("Radix",)
    run = run_machine("Radix", NORMATIVE, settings(machine_settings("ci"), max_examples=10, stateful_step_count=30))
    assert run.passed, run.error
    assert run.stats["attention_checks"] > 0 and run.stats.get("evicted_slots", 0) > 0


def test_the_unlocked_prefix_mutant_is_caught():
    """Caught by the unsafe eviction it allows, or earlier: its cache_sizes() count the dropped lock's path as
    evictable while the reference's tree still protects it."""
    machine = build_machine("Radix", FAULTY)
    no_shrink = settings(max_examples=60, stateful_step_count=30, deadline=None, derandomize=True, database=None,
                         phases=[p for p in settings().phases if p.name != "shrink"], report_multiple_bugs=False)
    with pytest.raises(ConformanceFailure, match="LOCKED_LEAF_EVICTION|differs from float64|cache_sizes"):
        run_state_machine_as_test(machine, settings=no_shrink)


def test_lockstep_follows_an_edge_the_sut_split():
    """SGLang re-inserts a finished prompt and splits its edge there; the reference follows the split."""
    m = machine_with(SGLangIndexAdapter)
    m.admit([1, 2])
    slot = m._sut_extend("q0", 3)
    m.live["q0"][0].append(3)
    m.live["q0"][1].append(slot)
    m.finish_request("q0")
    m.evict(1)  # SGLang evicts the decoded token's slot alone, below the prompt's split
    assert m.stats.get("edges_split_to_follow", 0) == 1 and m.stats["evicted_slots"] == 1
    m.index_partition_holds()
    m.sut_free_slots_match()
    m.sut_rows_match()


class RefusesWithRoom(SGLangIndexAdapter):
    name = "refuses-with-room"

    def admit(self, request_id, tokens):
        return None


class EvictsNothing(SGLangIndexAdapter):
    name = "evicts-nothing"

    def evict(self, num_tokens):
        return []


class EvictsHalfAnEdge(SGLangIndexAdapter):
    name = "evicts-a-slot-inside-an-edge"

    def evict(self, num_tokens):
        slots = sorted(s for run in super().evict(num_tokens) for s in run)
        return [slots[:1]] if slots else []


class LeaksOnCancel(SGLangIndexAdapter):
    name = "leaks-on-cancel"

    def cancel(self, request_id):
        self.sglang.requests.pop(request_id)
        self.sglang.private.pop(request_id, None)


def test_a_refusal_with_free_slots_left_is_named():
    m = machine_with(RefusesWithRoom)
    with pytest.raises(ConformanceFailure, match="refused admission of q0 for lack of slots"):
        m.admit([1, 2, 3])


@pytest.mark.parametrize(("adapter_class", "tokens", "message"), [
    (EvictsNothing, 2, "evicted 0 of 2 tokens while unlocked leaves were left"),
    (EvictsHalfAnEdge, 3, "no node of the reference's tree ends with exactly these"),
])
def test_a_wrong_eviction_is_named(adapter_class, tokens, message):
    m = machine_with(adapter_class)
    m.admit([1, 2, 3])
    m.finish_request("q0")
    with pytest.raises(ConformanceFailure, match=message):
        m.evict(tokens)


def test_a_leaked_slot_is_named_by_the_free_set_check():
    m = machine_with(LeaksOnCancel)
    m.admit([1, 2, 3])
    m.cancel_request("q0")
    with pytest.raises(ConformanceFailure, match="free slots"):
        m.sut_free_slots_match()


def test_protocol_declaration_and_missing_methods():
    assert adapter_protocol(sglang_factory) == adapter_protocol(faulty_unlocked_prefix) == "prefix-index"
    assert machines_for(SGLANG) == ("Radix", "Radix@page2", "Radix@page4")
    assert machines_for("kvexact.conformance.simple_runtime:simple_runtime") == ("KVAllocation", "CowPublication")
    check_index(sglang_factory(IndexConfig()))
    with pytest.raises(AdapterError, match=r"no method extend\(\)"):
        check_index(type("Half", (), {"admit": lambda self: None, "config": IndexConfig()})())

    def bogus(config):
        return None

    bogus.adapter_protocol = "kv-store"  # type: ignore[attr-defined]
    with pytest.raises(AdapterError, match="declares protocol 'kv-store'"):
        adapter_protocol(bogus)
    with pytest.raises(AdapterError, match="the Vmm machine takes none of that kind"):
        build_machine("Vmm", SGLANG)
    with pytest.raises(AdapterError, match="the Radix machine takes none of that kind"):
        build_machine("Radix", "kvexact.conformance.simple_runtime:simple_runtime")


def test_conform_with_an_index_adapter(kvexact_cli):
    code, out = kvexact_cli(["conform", "--adapter", SGLANG, "--examples", "3", "--steps", "10"]).code_and_text
    assert code == 0, out
    assert "Radix machine" in out and "KVAllocation" not in out and "sglang_factory passed" in out
    code, out = kvexact_cli(["conform", "--spec", "KVAllocation", "--adapter", SGLANG]).code_and_text
    assert code == 2 and "prefix-index adapter" in out
    code, out = kvexact_cli(["gate", "--select", "negative-registry", "--adapter", "kvexact.conformance.nope:f"]).code_and_text
    assert code == 2 and "cannot import" in out


@pytest.mark.slow
def test_fuzz_of_the_radix_machine_leaves_a_reproduction_that_fails_again(tmp_path):
    out = tmp_path / "failures"
    # fuzz stops at the first failure (here: in round 1, seeded); the budget is only a guard, large enough
    # that a busy machine still reaches that example
    r = subprocess.run([sys.executable, "-m", "kvexact.cli", "fuzz", "--minutes", "60",
                        "--adapter", FAULTY, "--out", str(out), "--examples-per-round", "60", "--steps", "30",
                        "--no-shrink"], capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "(Radix)" in r.stdout and "reproduction written" in r.stdout
    repros = sorted(out.glob("test_repro_Radix_*.py"))
    assert len(repros) == 1
    trace = out / "Radix.adapter.itf.json"  # the adapter's own calls, not the reference's steps
    assert f"ITF trace of the adapter's steps in the failing example: {trace}" in r.stdout
    assert json.loads(trace.read_text())["#meta"]["adapter"] == "faulty-unlocked-prefix"
    replay = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(repros[0])],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert replay.returncode == 1, replay.stdout
    assert "1 failed" in replay.stdout and "ConformanceFailure" in replay.stdout


@pytest.mark.parametrize("spec", ["Radix", "Vmm"])
def test_no_kernels_runs_the_ledger_checks_only(spec):
    run = run_machine(spec, None, settings(machine_settings("ci"), max_examples=5, stateful_step_count=10),
                      check_kernels=False)
    assert run.passed, run.error
    assert run.steps > 0 and run.stats.get("attention_checks", 0) == 0


def test_cache_sizes_count_unlocked_and_locked_tree_tokens():
    """cache_sizes() = (tokens on edges no request locks, tokens on edges some request locks), for the normative
    index and the SGLang profile alike: one finished 3-token prompt is 3 evictable tokens; a request that matches
    it locks all 3; once that request (4 tokens) finishes, its 4 tokens are cached and unlocked."""
    for index in (RadixIndex(IndexConfig()), sglang_factory(IndexConfig())):
        assert tuple(index.cache_sizes()) == (0, 0)
        index.admit("a", [1, 2, 3])
        assert tuple(index.cache_sizes()) == (0, 0)  # a running request's tokens are not in the tree yet
        index.finish("a")
        assert tuple(index.cache_sizes()) == (3, 0)
        assert index.admit("b", [1, 2, 3, 4]) == 3
        assert tuple(index.cache_sizes()) == (0, 3)
        index.finish("b")
        assert tuple(index.cache_sizes()) == (4, 0)


def test_cache_sizes_of_the_wrong_signature_is_refused_by_name():
    class TakesAnArgument(RadixIndex):
        def cache_sizes(self, group):  # type: ignore[override]
            return (0, 0)

    with pytest.raises(AdapterError, match=r"cache_sizes.*cannot be called with 0") as err:
        check_index(TakesAnArgument(IndexConfig()))
    assert err.value.problem is AdapterProblem.METHOD_SIGNATURE


class EvictsMostRecentlyUsed(SGLangIndexAdapter):
    """Declares LRU (inherited) but ranks victims most recently used first."""
    name = "evicts-most-recently-used"

    def __init__(self, config):
        super().__init__(config)
        self.sglang.cache.priority_of = lambda node: -node.last_access_time


def _two_leaves_then_a_hit_on_the_older(m) -> None:
    """Cache [1, 2] (older) and [3] (newer), then admit and cancel [1, 2, 3], a lookup that walks into [1, 2]: the
    least recently used unlocked leaf is now [3]."""
    for prompt in ([1, 2], [3]):
        rid = m.admit_prompt(prompt)
        m.finish_request(rid)
    m.cancel_request(m.admit_prompt([1, 2, 3]))


def test_an_lru_adapter_that_evicts_the_most_recently_used_leaf_is_named():
    m = machine_with(EvictsMostRecentlyUsed)
    _two_leaves_then_a_hit_on_the_older(m)
    with pytest.raises(ConformanceFailure, match=r"declares LRU eviction but evicted slots \[1, 2\].*unlocked leaf "
                                                 r"at slots \[3\] was last used earlier"):
        m.evict(1)


def test_the_sglang_profile_evicts_the_least_recently_used_leaf():
    m = machine_with(SGLangIndexAdapter)
    _two_leaves_then_a_hit_on_the_older(m)
    m.evict(1)
    assert m.stats["lru:victim_checked"] == 1 and m.stats["evicted_slots"] == 1
    assert sorted(m.state.tree_slot_ids()) == [1, 2]


def test_a_refused_admission_lookup_may_refresh_a_leaf():
    """SGLang looks a prompt up before it finds the pool short, which refreshes the matched leaf; the normative
    index refuses without a lookup. The machine does not hold such a leaf against the victim SGLang then picks."""
    m = machine_with(SGLangIndexAdapter)
    for prompt in ([1, 2], [3]):
        m.finish_request(m.admit_prompt(prompt))
    assert m.admit_prompt([2] * 13) is not None  # the pool is now full
    assert m.admit_prompt([1, 2, 1]) is not None  # refused, [3] and then [1, 2] evicted, admitted
    assert m.stats["lru:victim_checked"] == 2 and m.stats["evicted_slots"] == 3


def test_an_lru_bug_passes_without_the_declaration(monkeypatch):
    """The same most-recently-used ranking passes when the adapter does not declare eviction_order: any unlocked
    leaf is a legal victim (the victim ranking is policy, 0x08E)."""
    monkeypatch.setattr(SGLangIndexAdapter, "eviction_order", None)
    m = machine_with(EvictsMostRecentlyUsed)
    _two_leaves_then_a_hit_on_the_older(m)
    m.evict(1)
    assert "lru:victim_checked" not in m.stats and sorted(m.state.tree_slot_ids()) == [3]


def test_an_unknown_eviction_order_is_refused_by_name():
    class MostRecentFirst(RadixIndex):
        eviction_order = "mru"

    with pytest.raises(AdapterError, match=r"eviction_order='mru'.*machines check lru") as err:
        check_index(MostRecentFirst(IndexConfig()))
    assert err.value.problem is AdapterProblem.BAD_DECLARATION
