"""The three CI models check clean with the embedded engine, and every action fires (non-vacuity)."""

from __future__ import annotations

import pytest

from kvexact.gate.spec_checks import LIVENESS_MODELS, SPECS, action_firings
from kvexact.spec import CI_STATE_BUDGET, SHIPPED_MODELS, spec_dir
from kvexact.spec.checker import check_model
from kvexact.spec.checker.cfg import parse_cfg
from kvexact.spec.checker.model import snake_case, spec_actions
from kvexact.spec.checker.result import Outcome

# Each CI model is checked once per worker that runs its tests: one xdist worker runs them all.
pytestmark = pytest.mark.xdist_group("spec-models")


@pytest.fixture(scope="module", params=SPECS)
def ci_result(request):
    spec = request.param
    return spec, check_model(spec_dir() / f"{spec}.tla", spec_dir() / f"{spec}.cfg", coverage=True)


def test_ci_model_has_no_error_and_completes(ci_result):
    spec, r = ci_result
    assert r.outcome is Outcome.SUCCESS and r.exit_code == 0, (spec, r.violation)
    assert r.complete
    assert r.distinct_states <= CI_STATE_BUDGET, (
        f"{spec}.cfg has {r.distinct_states:,} distinct states: a CI model has at most {CI_STATE_BUDGET:,} "
        "(move the larger model to a .deep.cfg)")


# CI models where every action also adds a new state within the CONSTRAINT, so the search goes on after it
# (a successor beyond the bound is checked but never explored). KVAllocation's AppendCopy needs its allowance in
# StateBound for that: a cached partial tail is reached at table version MaxVersion at the earliest.
EXPLORED_AFTER_EVERY_ACTION = ("KVAllocation",)


def test_every_action_of_the_ci_model_fires(ci_result):
    spec, r = ci_result
    fired = action_firings(r.coverage)
    assert set(fired) == set(spec_actions(spec)), "coverage and the checker's action list disagree"
    never = [a for a in spec_actions(spec) if fired[a] == 0]
    assert never == [], f"{spec}.cfg: actions that never fire: {never}"
    if spec in EXPLORED_AFTER_EVERY_ACTION:
        new: dict[str, int] = {}
        for label, counts in r.coverage.items():
            op = label.split("(", 1)[0].strip()
            new[op] = new.get(op, 0) + int(counts.get("new", 0))
        unexplored = [a for a in spec_actions(spec) if new[a] == 0]
        assert unexplored == [], f"{spec}.cfg: every successor of {unexplored} lies beyond the bound or was known"


def test_every_invariant_and_action_names_its_seed_section():
    """Each action operator and each invariant of the CI model has a comment naming a seed section."""
    import re

    for spec in SPECS:
        actions = spec_actions(spec)
        text = (spec_dir() / f"{spec}.tla").read_text()
        cfg = (spec_dir() / f"{spec}.cfg").read_text()
        invariants = cfg.split("INVARIANTS", 1)[1].split()
        for name in [*actions, *[i for i in invariants if i != "TypeOK"]]:
            m = re.search(rf"((?:\\\*[^\n]*\n)+){name}(\(| ==)", text)
            assert m, f"{spec}: {name} has no comment block right above its definition"
            assert re.search(r"0x0[0-9A-F]{1,2}", m.group(1)), f"{spec}: {name}'s comment names no seed section"


def test_house_style_type_ok_after_the_variables_and_a_theorem_per_invariant():
    """TypeOK comes right after the variables and their helpers (before Init), and every invariant of the CI
    model is stated as THEOREM Spec => []Inv (the refinement as THEOREM Spec => RefinesExactHistory)."""
    import re

    for spec in SPECS:
        text = (spec_dir() / f"{spec}.tla").read_text()
        assert text.index("\nVARIABLES") < text.index("\nTypeOK ==") < text.index("\nInit =="), spec
        invariants = (spec_dir() / f"{spec}.cfg").read_text().split("INVARIANTS", 1)[1].split()
        missing = [i for i in invariants if not re.search(rf"^THEOREM Spec => \[\]{i}$", text, re.M)]
        assert missing == [], (spec, missing)
        for prop in parse_cfg(spec_dir() / f"{spec}.cfg").properties:
            assert re.search(rf"^THEOREM Spec => {prop}$", text, re.M), (spec, prop)


def test_counters_rule_is_stated_at_the_top_of_each_allocation_spec():
    for spec in ("KVAllocation", "CowPublication"):
        head = (spec_dir() / f"{spec}.tla").read_text()[:4000]
        for fact in ("Counters", "epoch", "0x04F", "0x05B", "tver"):
            assert fact in head, (spec, fact)


def test_snake_case_names_of_reference_steps():
    assert snake_case("CowReserve") == "cow_reserve"
    assert snake_case("CopyOnWriteReserve") == "copy_on_write_reserve"
    assert snake_case("StaleWriteRejected") == "stale_write_rejected"


def test_shipped_models_exist():
    missing = [m for m in SHIPPED_MODELS if not (spec_dir() / m).is_file()]
    assert missing == []
    on_disk = {p.relative_to(spec_dir()).as_posix() for p in spec_dir().rglob("*")
               if p.suffix in {".tla", ".cfg"} and "checker" not in p.parts}
    assert on_disk == set(SHIPPED_MODELS)


LIVENESS = {"KVAllocation": "TxnEventuallyEnds", "CowPublication": "FreedBlockEventuallyReusable",
            "NamespaceRevocation": "RevocationEventuallyCompletes"}


def test_the_liveness_models_are_the_gates():
    assert set(LIVENESS) == set(LIVENESS_MODELS)


@pytest.mark.parametrize("spec", sorted(LIVENESS))
def test_liveness_model_holds_with_the_embedded_engine(spec):
    """<Spec>.liveness.cfg checks its temporal property under LiveSpec's fairness (each is broken by a
    liveness mutant in spec/mutants/, so the property is not vacuous)."""
    from kvexact.spec.checker.cfg import parse_cfg

    cfg = spec_dir() / f"{spec}.liveness.cfg"
    assert parse_cfg(cfg).properties == [LIVENESS[spec]]
    r = check_model(spec_dir() / f"{spec}.tla", cfg, coverage=False)
    assert r.outcome is Outcome.SUCCESS and r.exit_code == 0 and r.complete, (spec, r.violation)
    assert r.messages == ()
    assert r.distinct_states <= 10_000, f"{spec}.liveness.cfg has {r.distinct_states} states: keep it small"


def test_no_definition_redefines_a_standard_module_operator():
    """SANY (TLC's front end) rejects a module that redefines an operator of a module it extends."""
    import re

    standard = {"Nat", "Int", "Seq", "Len", "Append", "Head", "Tail", "SubSeq", "SelectSeq", "Cardinality",
                "IsFiniteSet", "Print", "PrintT", "Assert", "JavaTime", "Permutations", "SortSeq", "ToString",
                "TLCGet", "TLCSet", "TLCEval", "Any", "RandomElement"}
    for spec in (*SPECS, "ExactHistory"):
        text = (spec_dir() / f"{spec}.tla").read_text()
        defined = set(re.findall(r"^([A-Za-z_]\w*)(?:\([^)]*\))? ==", text, re.M))
        assert defined & standard == set(), (spec, defined & standard)
