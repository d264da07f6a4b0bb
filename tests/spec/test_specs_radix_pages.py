"""RadixIndex at SGLang's page sizes (issue 38): the shipped page-2 and page-3 models check clean, every action fires,
and the embedded engine reproduces TLC's counts (TLC 2.19 on these files: the oracle)."""

from __future__ import annotations

import pytest

from kvexact.gate.spec_checks import action_firings
from kvexact.spec import CI_STATE_BUDGET, SHIPPED_MODELS, spec_dir
from kvexact.spec.checker import check_model
from kvexact.spec.checker.cfg import parse_cfg
from kvexact.spec.checker.model import spec_actions
from kvexact.spec.checker.result import Outcome

pytestmark = pytest.mark.xdist_group("spec-models")

# (distinct, generated, depth), as TLC reported them for the CI models
TLC_COUNTS = {"page2": (10_377, 96_601, 21), "page3": (1_825, 16_349, 12)}


def test_the_page_models_are_shipped_with_their_page_size():
    for model, page in (("page2", 2), ("page3", 3), ("page2.deep", 2), ("page3.deep", 3)):
        assert f"RadixIndex.{model}.cfg" in SHIPPED_MODELS
        text = (spec_dir() / f"RadixIndex.{model}.cfg").read_text()
        assert f"PageSize = {page}\n" in text
        assert parse_cfg(spec_dir() / f"RadixIndex.{model}.cfg").invariants == \
            parse_cfg(spec_dir() / "RadixIndex.cfg").invariants


@pytest.mark.parametrize("model", sorted(TLC_COUNTS))
def test_the_page_model_checks_clean_with_tlcs_counts_and_every_action_fires(model):
    r = check_model(spec_dir() / "RadixIndex.tla", spec_dir() / f"RadixIndex.{model}.cfg", coverage=True)
    assert r.outcome is Outcome.SUCCESS and r.complete, r.violation
    assert (r.distinct_states, r.generated_states, r.depth) == TLC_COUNTS[model]
    assert r.distinct_states <= CI_STATE_BUDGET
    fired = action_firings(r.coverage)
    # at page size 3 a lookup that ends inside an edge needs a two-page (six-token) edge, beyond this model
    idle = {"Match"} if model == "page3" else set()
    assert {a for a in spec_actions("RadixIndex") if fired[a] == 0} == idle


@pytest.mark.parametrize("model", sorted(TLC_COUNTS))
def test_tlc_gives_the_same_counts_on_the_page_model(model, tlc_jar):
    from kvexact.spec.tlc import run_tlc

    r = run_tlc(spec_dir() / "RadixIndex.tla", spec_dir() / f"RadixIndex.{model}.cfg", tlc_jar, timeout_s=600)
    assert r.exit_code == 0, r.violation
    assert (r.distinct_states, r.generated_states, r.depth) == TLC_COUNTS[model]
