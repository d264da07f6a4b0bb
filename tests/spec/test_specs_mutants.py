"""Every mutant dies of the invariant it names, every witness is reached, and the files are current."""

from __future__ import annotations

import re

import pytest

from kvexact.spec import spec_dir
from kvexact.spec.mutants import (
    LIVENESS_STATE_LIMIT,
    MUTANT_KILL_MAX,
    MUTANT_STATE_LIMIT,
    WITNESS_STATE_LIMIT,
    check_all,
    check_expected,
    discover_mutants,
    discover_witnesses,
    run_mutants,
)

MUTANTS = discover_mutants()
REFINEMENT = "RefinesExactHistory"  # the PROPERTY of the KVAllocation and CowPublication CI models
WITNESSES = discover_witnesses()
# The module's fixtures judge every mutant and witness (minutes): one xdist worker runs all its tests.
pytestmark = pytest.mark.xdist_group("spec-mutants")


@pytest.fixture(scope="module")
def mutant_verdicts():
    return {v.model.name: v for v in check_all(MUTANTS, workers=2)}


@pytest.fixture(scope="module")
def witness_verdicts():
    return {v.model.name: v for v in check_all(WITNESSES, workers=2, state_limit=WITNESS_STATE_LIMIT)}


def test_at_least_five_mutants_per_spec():
    per_spec: dict[str, int] = {}
    for m in MUTANTS:
        per_spec[m.name.split("_", 1)[0]] = per_spec.get(m.name.split("_", 1)[0], 0) + 1
    assert per_spec.keys() == {"KVAllocation", "CowPublication", "NamespaceRevocation", "RadixIndex", "VirtualMapping",
                               "HybridAllocation"}
    assert min(per_spec.values()) >= 5, per_spec


@pytest.mark.parametrize("name", [m.name for m in MUTANTS])
def test_mutant_is_killed_by_its_named_invariant_within_the_state_bound(mutant_verdicts, name):
    """Within MUTANT_STATE_LIMIT distinct states for an invariant; a temporal property is judged on the
    complete state graph, so a liveness mutant gets LIVENESS_STATE_LIMIT."""
    v = mutant_verdicts[name]
    assert v.killed, f"{name}: {v.outcome}: {v.detail}"
    limit = LIVENESS_STATE_LIMIT if v.model.is_property else MUTANT_STATE_LIMIT
    assert v.outcome == "killed" and 0 < v.distinct_states <= limit


def test_the_mutant_bound_is_derived_from_the_costliest_kill(mutant_verdicts):
    """MUTANT_KILL_MAX bounds every invariant kill measured (a new mutant that costs more must raise it, and
    the bound with it); the bound leaves four times that as room for spec changes."""
    assert max(v.distinct_states for v in mutant_verdicts.values() if not v.model.is_property) <= MUTANT_KILL_MAX
    assert MUTANT_STATE_LIMIT == 4 * MUTANT_KILL_MAX


def test_a_kill_beyond_the_bound_is_not_a_kill(mutant_verdicts):
    costliest = max((v for v in mutant_verdicts.values() if not v.model.is_property), key=lambda v: v.distinct_states)
    v = check_expected(costliest.model, state_limit=costliest.distinct_states // 2)
    assert not v.killed and v.outcome == "not-within-bound", (v.outcome, v.detail)


def _liveness_model(m) -> bool:
    """A liveness mutant's cfg is its spec's liveness model (a refinement mutant's is the CI model)."""
    return m.is_property and m.invariant != REFINEMENT


def test_each_spec_has_a_liveness_mutant_killed_by_a_lasso(mutant_verdicts):
    live = {m.name.split("_", 1)[0]: m.name for m in MUTANTS if _liveness_model(m)}
    assert set(live) == {"KVAllocation", "CowPublication", "NamespaceRevocation"}
    for name in live.values():
        assert "temporal property" in mutant_verdicts[name].detail, mutant_verdicts[name].detail


def test_each_allocator_spec_has_a_refinement_mutant_killed_by_the_ci_property(mutant_verdicts):
    """A refinement mutant keeps every invariant but takes a step that is no ExactHistory step: only the CI
    model's PROPERTY RefinesExactHistory (an action property, exit 13) catches it."""
    from kvexact.spec.checker.cfg import parse_cfg

    refining = {m.name.split("_", 1)[0]: m for m in MUTANTS if m.invariant == REFINEMENT}
    assert set(refining) == {"KVAllocation", "CowPublication"}
    for spec, m in refining.items():
        assert parse_cfg(spec_dir() / f"{spec}.cfg").properties == [REFINEMENT]
        assert m.cfg.read_text().split("\n", 1)[1] == (spec_dir() / f"{spec}.cfg").read_text().split("\n", 1)[1]
        v = mutant_verdicts[m.name]
        assert v.killed and "action-property property RefinesExactHistory" in v.detail, v.detail


@pytest.mark.parametrize("name", [w.name for w in WITNESSES])
def test_witness_is_reached(witness_verdicts, name):
    v = witness_verdicts[name]
    assert v.killed, f"{name}: {v.outcome}: {v.detail}"
    assert 0 < v.distinct_states <= WITNESS_STATE_LIMIT


def test_witnesses_cover_cow_eviction_and_revocation():
    assert {w.name for w in WITNESSES} == {"CowPublication_CowPublished", "CowPublication_RacingCows",
                                           "CowPublication_PublishDuringCopy", "KVAllocation_EvictThenReuse",
                                           "KVAllocation_PartialTail", "KVAllocation_CachedPartialTail",
                                           "KVAllocation_RacingAppends", "KVAllocation_RollbackAfterRepublish",
                                           "KVAllocation_SharedPartialTail",
                                           "NamespaceRevocation_RevocationCompleted", "RadixIndex_SharedSplitLocked",
                                           "VirtualMapping_RetainedReuse"}


def test_named_invariant_is_checked_with_all_the_ci_invariants_in_their_order():
    """A mutant must not die of another invariant: its model checks every invariant of the CI model
    (a liveness mutant: every invariant and property of the spec's liveness model)."""
    for m in MUTANTS:
        spec = m.name.split("_", 1)[0]
        assert re.search(rf"^{m.invariant} ==", (spec_dir() / f"{spec}.tla").read_text(), re.M)
        model = spec_dir() / (f"{spec}.liveness.cfg" if _liveness_model(m) else f"{spec}.cfg")
        invariants = m.cfg.read_text().split("INVARIANTS", 1)[1].split()
        assert invariants == model.read_text().split("INVARIANTS", 1)[1].split()
        if m.is_property:
            from kvexact.spec.checker.cfg import parse_cfg
            assert m.invariant in parse_cfg(m.cfg).properties
        else:
            assert m.invariant in invariants


def test_mutant_files_are_current_with_the_specs(make_mutants):
    """spec/mutants/ is what scripts/make_mutants.py derives from today's specs (one edit each)."""
    rendered = make_mutants.render()
    on_disk = {p: p.read_text() for p in (spec_dir() / "mutants").iterdir() if p.suffix in {".tla", ".cfg"}}
    assert set(rendered) == set(on_disk)
    stale = [p.name for p, text in rendered.items() if on_disk[p] != text]
    assert stale == [], f"regenerate with: python scripts/make_mutants.py ({stale})"
    for m in MUTANTS:  # each mutant really differs from its spec beyond the module name and comment
        spec = m.name.split("_", 1)[0]
        body = m.spec.read_text().split("\n", 2)[2]
        assert body != (spec_dir() / f"{spec}.tla").read_text().split("\n", 1)[1]


def test_run_mutants_selects_and_reports_the_kill_rate():
    lines: list[str] = []
    code = run_mutants(select="KVAllocation_PublishOneGroup", echo=lines.append)
    assert code == 0
    assert lines[-1] == "Mutants killed: 1/1 (100%)"
    assert run_mutants(select="NoSuchMutant", echo=lines.append) == 3


def test_a_correct_spec_posing_as_a_mutant_survives_and_a_wrong_name_is_not_a_kill(tmp_path):
    from kvexact.spec.mutants import ExpectedViolation, check_expected

    spec = spec_dir() / "NamespaceRevocation.tla"
    survivor = ExpectedViolation("NR_correct", "mutant", spec, spec.with_suffix(".cfg"), "NoStaleBytes")
    v = check_expected(survivor)
    assert not v.killed and v.outcome == "survived", v.detail
    mutant = spec_dir() / "mutants" / "NamespaceRevocation_RecycleWithoutScrub.tla"
    misnamed = ExpectedViolation("NR_misnamed", "mutant", mutant, mutant.with_suffix(".cfg"), "RevocationComplete")
    v = check_expected(misnamed)
    assert not v.killed and v.outcome == "wrong-invariant"


def test_kvexact_check_mutants_exits_0_and_prints_the_kill_rate(kvexact_cli, monkeypatch, mutant_verdicts,
                                                                witness_verdicts):
    """``kvexact check --mutants`` judges every mutant, then every witness within WITNESS_STATE_LIMIT, and
    prints the kill rate. The verdicts are the ones this module's fixtures computed with the same code (the
    CLI would compute them again: about 100 s): the stand-in for check_all checks what the CLI asks for."""
    from kvexact.spec import mutants as mutants_module

    asked: list[tuple[list[str], int]] = []

    def judged(models, *, engine, tlc_jar, workers, state_limit=MUTANT_STATE_LIMIT, on_verdict=lambda _v: None):
        assert engine == "embedded" and tlc_jar is None and workers >= 2
        asked.append(([m.name for m in models], state_limit))
        verdicts = [{**mutant_verdicts, **witness_verdicts}[m.name] for m in models]
        for v in verdicts:
            on_verdict(v)
        return verdicts

    monkeypatch.setattr(mutants_module, "check_all", judged)
    code, text = kvexact_cli(["check", "--mutants"]).code_and_text
    assert code == 0, text
    assert asked == [([m.name for m in MUTANTS], MUTANT_STATE_LIMIT),
                     ([w.name for w in WITNESSES], WITNESS_STATE_LIMIT)]
    assert f"Mutants killed: {len(MUTANTS)}/{len(MUTANTS)} (100%)" in text
    assert f"Witnesses reached: {len(WITNESSES)}/{len(WITNESSES)}" in text
    assert sum(line.startswith("killed ") for line in text.splitlines()) == len(MUTANTS)


def test_the_quick_gate_searches_as_deep_as_the_costliest_kill():
    from kvexact.gate.spec_checks import QUICK_STATES

    assert QUICK_STATES >= MUTANT_KILL_MAX > 0
