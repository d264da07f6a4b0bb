"""The generation fence through the adapter protocol (0x05F): an adapter that hands a freed block to a new
owner without advancing its generation is caught by `kvexact conform`, by the stale_writer rule; missing
optional methods are reported and their rules do not count as fired."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import settings

from kvexact.conformance.runner import machine_settings, run_machine, summary_line
from kvexact.conformance.simple_runtime import SimpleRuntimeAllocator, faulty_stale_generation
from kvexact.reference.adapters import AdapterConfig

FAULTY = "kvexact.conformance.simple_runtime:faulty_stale_generation"
CORRECT = "kvexact.conformance.simple_runtime:simple_runtime"


def _small(examples: int) -> settings:
    return settings(machine_settings("ci", shrink=False), max_examples=examples, stateful_step_count=30)


def test_the_faulty_adapter_really_reuses_a_generation():
    """The test adapter's bug, shown directly: after truncate and reuse, the old handle still passes."""
    cfg = AdapterConfig(num_groups=1, blocks_per_group=2)
    for adapter, accepted in ((faulty_stale_generation(cfg), True), (SimpleRuntimeAllocator(cfg), False)):
        assert adapter.start("a", [1, 2, 3]).accepted  # blocks 1, 2
        block = adapter.table("a", 0)[-1]
        handle = (0, block, adapter.generation(0, block))
        assert adapter.truncate("a", 2).accepted  # block 2 goes back to the free list
        assert adapter.stale_write(*handle).rejection == "HANDLE_NOT_OWNED"
        assert adapter.start("b", [3]).accepted and adapter.table("b", 0) == [block]  # reused
        assert adapter.stale_write(*handle).accepted is accepted


def test_conform_catches_a_reuse_without_generation_bump(kvexact_cli, tmp_path):
    """The ABA case needs a freed tail block to come round the pool to a new owner before the delayed writer
    presents its handle; at the ci profile (derandomized) the machine first meets it at example 34 (of 150)."""
    code, out = kvexact_cli(["conform", "--spec", "KVAllocation", "--adapter", FAULTY, "--examples", "150",
                             "--steps", "30", "--no-kernels", "--no-shrink",
                             "--out", str(tmp_path / "failures")]).code_and_text
    assert code == 1, out
    assert "FAILED" in out and "stale_writer:" in out and "faulty-stale-generation accepted" in out


def test_the_correct_runtime_passes_the_fence_and_reports_what_it_lacks():
    run = run_machine("KVAllocation", CORRECT, _small(12), check_kernels=False)
    assert run.passed, run.error
    assert run.stats.get("rule:stale_writer", 0) > 0  # the fence was exercised on the adapter
    assert "stale_writer" in run.rules_fired() and "generation" not in run.missing_methods()
    # the simple runtime has no cache(), evict() or append_with_failure(): reported, and not counted
    assert run.missing_methods() == ["append_with_failure", "cache"]
    assert not {"cache", "append_with_injected_failure"} & set(run.rules_fired())
    line = summary_line(run)
    assert "lacks optional methods append_with_failure, cache" in line
    assert f"rules={len(run.rules_fired())}/{len(run.rules)}" in line


def test_rules_of_the_other_spec_are_not_counted():
    """The KVAllocation machine has no fork rule to fire, so it is not among its rules at all."""
    run = run_machine("KVAllocation", None, _small(3), check_kernels=False)
    assert "fork" not in run.rules and "stale_writer" in run.rules
    run = run_machine("CowPublication", None, _small(3), check_kernels=False)
    assert "fork" in run.rules and "stale_writer" not in run.rules


@pytest.mark.parametrize("mutant", ["salt ignored by the key", "namespace scope ignored by the lookup"])
def test_the_machine_catches_a_prefix_cache_that_leaks_across_scopes(monkeypatch, mutant):
    """Two single-point bugs of reference/prefix.py and keys.py (the seed's 0x07B isolation): the
    KVAllocation machine's lookups under foreign scopes catch each."""
    from kvexact.reference import keys, prefix

    if mutant.startswith("salt"):
        original = keys.block_extra_keys
        monkeypatch.setattr(keys, "block_extra_keys", lambda inputs, start, stop: original(
            attrs.evolve(inputs, cache_salt=None), start, stop))
    else:
        monkeypatch.setattr(prefix.PrefixCache, "lookup", _scope_blind_lookup(prefix.PrefixCache.lookup))
    run = run_machine("KVAllocation", None, _small(25), check_kernels=False)
    assert not run.passed
    assert "cache isolation" in run.error, run.error



def _scope_blind_lookup(original):
    """PrefixCache.lookup that authorizes the caller, then probes the index as the home scope."""
    from kvexact.reference.namespaces import authorize_lookup

    def lookup(self, req, policy):
        authorize_lookup(self.registry, req.tenant_id, req.namespace_id, req.namespace_generation)
        return original(self, attrs.evolve(req, tenant_id="t0", namespace_id="home", namespace_generation=1), policy)

    return lookup
