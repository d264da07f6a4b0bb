"""The refinements: KVAllocation and CowPublication each refine ExactHistory, checked as PROPERTY
RefinesExactHistory of their CI models (ExactHistory's Init on the initial states and its [][Next]_vars on
every step; tests/spec/test_specs_models.py checks the CI models clean, the refinement mutants of
spec/mutants/ break it alone); and a refinement that fails: an ExactHistory whose histories never shrink
(no Truncate, no Release steps), which KVAllocation's Release does not refine."""

from __future__ import annotations

import shutil

import pytest

from kvexact.spec import spec_dir
from kvexact.spec.checker import check_model
from kvexact.spec.checker.cfg import parse_cfg
from kvexact.spec.checker.result import Outcome


@pytest.mark.parametrize("spec", ["KVAllocation", "CowPublication"])
def test_the_ci_model_checks_the_refinement(spec):
    assert parse_cfg(spec_dir() / f"{spec}.cfg").properties == ["RefinesExactHistory"]
    text = (spec_dir() / f"{spec}.tla").read_text()
    assert "EH == INSTANCE ExactHistory WITH" in text and "RefinesExactHistory == EH!Spec" in text


def test_a_shrinking_step_the_abstract_spec_lacks_fails_the_refinement(tmp_path):
    for name in ("KVAllocation.tla", "KVAllocation.cfg"):
        shutil.copy(spec_dir() / name, tmp_path / name)
    text = (spec_dir() / "ExactHistory.tla").read_text()
    for step in ("    \\/ \\E r \\in Requests, k \\in 0..MaxTokens : Truncate(r, k)\n",
                 "    \\/ \\E r \\in Requests : Release(r)\n"):
        assert step in text
        text = text.replace(step, "")
    (tmp_path / "ExactHistory.tla").write_text(text)
    r = check_model(tmp_path / "KVAllocation.tla", tmp_path / "KVAllocation.cfg", coverage=False)
    assert r.outcome is Outcome.LIVENESS and r.exit_code == 13, r.violation
    v = r.violation
    assert v.kind == "action-property" and v.name == "RefinesExactHistory" and v.loop is None
    assert v.trace[-1].action.startswith(("Release", "Truncate")), v.trace[-1].action
