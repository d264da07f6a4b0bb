"""The refinement models: KVAllocation and CowPublication each refine ExactHistory (their `*Exact.cfg`
models: the mapped invariant and PROPERTY RefinesExactHistory, i.e. ExactHistory's Init on the
initial states and its [][Next]_vars on every step), checked by the embedded engine; and a refinement
that fails: an ExactHistory whose histories never shrink (no Truncate, no Release steps), which
KVAllocation's Release does not refine."""

from __future__ import annotations

import shutil

import pytest

from kvexact.spec import CI_STATE_BUDGET, spec_dir
from kvexact.spec.checker import check_model
from kvexact.spec.checker.result import Outcome


@pytest.mark.parametrize("model", ["KVAllocationExact", "CowPublicationExact"])
def test_allocator_spec_refines_exact_history(model):
    r = check_model(spec_dir() / f"{model}.tla", spec_dir() / f"{model}.cfg", coverage=False)
    assert r.outcome is Outcome.SUCCESS and r.exit_code == 0 and r.complete, (model, r.violation)
    assert r.distinct_states <= CI_STATE_BUDGET, f"{model}.cfg has {r.distinct_states} states: keep it small"


def test_a_shrinking_step_the_abstract_spec_lacks_fails_the_refinement(tmp_path):
    for name in ("KVAllocation.tla", "KVAllocationExact.tla", "KVAllocationExact.cfg"):
        shutil.copy(spec_dir() / name, tmp_path / name)
    text = (spec_dir() / "ExactHistory.tla").read_text()
    for step in ("    \\/ \\E r \\in Requests, k \\in 0..MaxTokens : Truncate(r, k)\n",
                 "    \\/ \\E r \\in Requests : Release(r)\n"):
        assert step in text
        text = text.replace(step, "")
    (tmp_path / "ExactHistory.tla").write_text(text)
    r = check_model(tmp_path / "KVAllocationExact.tla", tmp_path / "KVAllocationExact.cfg", coverage=False)
    assert r.outcome is Outcome.LIVENESS and r.exit_code == 13, r.violation
    v = r.violation
    assert v.kind == "action-property" and v.name == "RefinesExactHistory" and v.loop is None
    assert v.trace[-1].action.startswith(("Release", "Truncate")), v.trace[-1].action
