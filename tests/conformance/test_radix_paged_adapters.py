"""The adapter-driven Radix machine at page sizes 2 and 4 (``Radix@page2``, ``Radix@page4``), issue 38: the SGLang
profile (paged allocator, whole-page admission, decode into the row's last page) in lockstep with the normative
index at the same page size, and a page-size fault that only a paged run can show."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from kvexact.conformance.machines import ConformanceFailure
from kvexact.conformance.runner import MACHINES, build_machine, machine_settings, machines_for, run_machine
from kvexact.reference.adapters import AdapterError

SGLANG = "kvexact.reference.peers.sglang_protocol:sglang_factory"
OVERRUN = "kvexact.reference.peers.sglang_protocol:faulty_page_overrun"
NORMATIVE = "kvexact.reference.index:radix_factory"


def test_the_paged_radix_machines_are_machines_of_the_gate():
    assert {"Radix@page2", "Radix@page4"} <= set(MACHINES)
    assert machines_for(SGLANG) == ("Radix", "Radix@page2", "Radix@page4")
    assert machines_for(NORMATIVE) == ("Radix",)  # an adapter that lists no page sizes stays at page size 1
    with pytest.raises(AdapterError, match="the Radix@page2 machine takes none of that kind or page size"):
        build_machine("Radix@page2", NORMATIVE)


@pytest.mark.parametrize("spec, page", [("Radix@page2", 2), ("Radix@page4", 4)])
def test_the_sglang_profile_passes_the_paged_radix_machine(spec, page):
    run = run_machine(spec, SGLANG, settings(machine_settings("ci"), max_examples=12, stateful_step_count=30))
    assert run.passed, run.error
    stats = run.stats
    assert stats["attention_checks"] > 0 and stats.get("decode:ok", 0) > 0 and stats.get("evicted_slots", 0) > 0
    assert stats.get("trace_steps", 0) > 0  # validated against RadixIndex.tla with PageSize = page
    hits = [int(k.split("=")[1]) for k in stats if k.startswith("admit:hit=")]
    assert all(h % page == 0 for h in hits), hits  # matches are whole pages


def test_a_decode_past_the_last_page_is_caught_at_page_size_2():
    """The mutant writes a decoded token into the slot after its row's full last page (a page it never took):
    the pages it leaves free differ from the reference's."""
    machine = build_machine("Radix@page2", OVERRUN, check_kernels=False)
    no_shrink = settings(max_examples=60, stateful_step_count=30, deadline=None, derandomize=True, database=None,
                         phases=[p for p in settings().phases if p.name != "shrink"], report_multiple_bugs=False)
    with pytest.raises(ConformanceFailure, match="free slots|not a legal step"):
        run_state_machine_as_test(machine, settings=no_shrink)



@pytest.mark.parametrize("spec", ["Radix", "Radix@page2"])
def test_an_eviction_that_frees_past_the_tokens_asked_for_is_caught(monkeypatch, spec):
    """SGLang's evict frees whole unlocked leaves until the tokens asked for are freed, then stops. The planted bug
    starts its count at -1, so where the victims free exactly the tokens asked for it evicts one leaf more; every
    victim is still an unlocked leaf in LRU order, so only the stopping point shows it."""
    import sys

    from planting import planted_module

    from kvexact.reference.peers import sglang, sglang_adapter

    planted = planted_module(sglang, "        evicted = 0\n", "        evicted = -1\n")
    monkeypatch.setattr(sglang_adapter, "RadixCache", planted.RadixCache)
    monkeypatch.setitem(sys.modules, "kvexact.reference.peers.sglang", planted)
    run = run_machine(spec, SGLANG, settings(machine_settings("ci", shrink=False), max_examples=40,
                                             stateful_step_count=30), 0, check_kernels=False)
    assert not run.passed and "after" in run.error and "tokens were freed" in run.error, run.error[:400]
