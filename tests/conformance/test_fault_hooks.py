"""The allocator machines hold the fault hooks of an adapter to their contracts (0x04F, 0x05E), on the SUT and
on the machines' own reference alike: an ``append_with_failure`` that is accepted reserved nothing, and after a
truncate that frees the first group's old tail the reference's delayed writer holds exactly that tail. A hook
that silently stops firing would otherwise pass in lockstep, since both sides run the same code."""

from __future__ import annotations

import pytest
from hypothesis import settings
from planting import planted_module

from kvexact.conformance.machines import allocator as machine
from kvexact.conformance.runner import machine_settings, run_machine
from kvexact.reference import adapters

FACTORY = "kvexact.reference.adapters:reference_factory"
PLANTED = {
    "fault never fires on an append": ('{("append_reserve", 0)', '{("append_reserve", -1)',
                                       "the fault fires after the first group's reservation"),
    "writer set from the wrong dropped block": ("old_tails[-1] in released", "old_tails[0] in released",
                                                "went back to the free pool, so the writer holds it"),
}


def _settings() -> settings:
    return settings(machine_settings("ci", shrink=False), max_examples=10, stateful_step_count=30)


@pytest.mark.parametrize("spec", ["KVAllocation", "CowPublication"])
def test_the_correct_reference_keeps_its_hooks(spec):
    run = run_machine(spec, FACTORY, _settings(), 0, check_kernels=False)
    assert run.passed, run.error
    assert run.stats.get("append_with_failure:ROLLED_BACK", 0) > 0


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_hook_that_stops_firing_is_caught_even_in_lockstep(monkeypatch, name):
    """The planted reference runs on both sides (the machines' reference and the adapter under test)."""
    original, mutated, says = PLANTED[name]
    planted = planted_module(adapters, original, mutated).ReferenceAdapter
    monkeypatch.setattr(adapters, "ReferenceAdapter", planted)
    monkeypatch.setattr(machine, "ReferenceAdapter", planted)
    run = run_machine("KVAllocation", FACTORY, _settings(), 0, check_kernels=False)  # the spec with truncate
    assert not run.passed
    assert run.error is not None and run.error.startswith("ConformanceFailure:") and says in run.error
