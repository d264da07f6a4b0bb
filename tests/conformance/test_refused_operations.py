"""The allocator machines' refused operations, sent alongside their rules: what the protocol refuses by name
(a release or fork of an id no live request holds, a fork onto itself or onto a live request, a start under a
live id, a truncate that keeps every token) must be refused by both sides, changing no live table."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from planting import planted_module

from kvexact.conformance import simple_runtime
from kvexact.conformance.machines import ConformanceFailure
from kvexact.conformance.machines.allocator import machine_class
from kvexact.conformance.runner import machine_settings
from kvexact.reference.adapters import AdapterConfig, ReferenceAdapter, reference_factory

RUN = settings(machine_settings("ci", shrink=False), max_examples=25, stateful_step_count=30)


def test_reference_adapter_refuses_a_start_under_a_live_id_and_changes_nothing():
    ref = ReferenceAdapter(AdapterConfig(), spec=None)
    assert ref.start("a", [1, 2, 3]).accepted
    before = (ref.digest(), ref.table("a", 0), ref.length("a"))
    result = ref.start("a", [1])
    assert (result.accepted, result.rejection) == (False, "DUPLICATE_REQUEST")
    assert (ref.digest(), ref.table("a", 0), ref.length("a")) == before


@pytest.mark.parametrize("spec", ["KVAllocation", "CowPublication"])
@pytest.mark.parametrize("factory", [None, reference_factory, simple_runtime.simple_runtime])
def test_correct_adapters_refuse_what_the_protocol_refuses(spec, factory):
    machine = machine_class(spec, sut_factory=factory, check_kernels=False, validate_trace=False)
    run_state_machine_as_test(machine, settings=RUN)
    refused = {k for k in machine.stats if k.split(":")[0] in ("release", "fork", "start", "truncate")
               and k.split(":")[-1] in ("UNKNOWN_REQUEST", "REQUEST_ALREADY_ENDED", "DUPLICATE_REQUEST",
                                        "FORK_ONTO_SELF", "TRUNCATE_NOT_SHORTER")}
    sent = {k: v for k, v in machine.stats.items() if k.startswith("refused:")}
    assert sum(sent.values()) > 10 and {"refused:start", "refused:release"} <= set(sent), sent
    assert len(refused) >= 2, refused


@pytest.mark.parametrize("original, mutated, spec, caught_as", [
    # a fork onto a live request overwrites its table: accepted where it must be refused
    ('        if child_id in self.tables:\n            return OpResult(False, "DUPLICATE_REQUEST")\n', "",
     "CowPublication", "accepted it"),
    # a fork onto itself falls through to the duplicate check: refused, but under the wrong name
    ('        if parent_id == child_id:\n            return OpResult(False, "FORK_ONTO_SELF")\n', "",
     "CowPublication", "reference's FORK_ONTO_SELF"),
])
def test_an_adapter_that_accepts_a_refused_operation_is_caught(original, mutated, spec, caught_as):
    planted = planted_module(simple_runtime, original, mutated)
    machine = machine_class(spec, sut_factory=planted.simple_runtime, check_kernels=False, validate_trace=False)
    with pytest.raises(ConformanceFailure) as err:
        run_state_machine_as_test(machine, settings=RUN)
    assert caught_as in str(err.value), str(err.value)
