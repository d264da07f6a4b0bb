"""KVAllocation with transactions in flight at once (Concurrent) and the shared partial-tail policy (TailPolicy).

The concurrent and shared models check clean to exhaustion with the counts TLC reported for them; the bugs
that only an interleaving (or only the shared policy) exposes survive the serialized model of the same
constants and die in theirs (their kills are in tests/spec/test_specs_mutants.py); the witnesses show each
interleaving is reached; the reference runs one transaction at a time and refuses a second by name.
"""

from __future__ import annotations

import pytest

from kvexact.spec import SHIPPED_MODELS, spec_dir
from kvexact.spec.checker import check_model
from kvexact.spec.checker.cfg import parse_cfg
from kvexact.spec.checker.result import Outcome

pytestmark = pytest.mark.xdist_group("spec-concurrency")

# TLC 2.19's counts (distinct, generated) for the two models (kvexact check --engine tlc).
TLC_COUNTS = {"KVAllocation.concurrent.cfg": (4_994, 24_181), "KVAllocation.shared.cfg": (2_278, 9_645)}
INTERLEAVING_MUTANTS = ("KVAllocation_ReserveIgnoresOtherTxns", "KVAllocation_RollbackRestoresRepublished",
                        "KVAllocation_PublishDropsOtherReservations")


def _constants(cfg: str) -> dict:
    return parse_cfg(spec_dir() / cfg).constants


def test_the_models_ship_and_differ_from_the_ci_model_only_where_they_say():
    ci, conc, shared = (_constants(c) for c in ("KVAllocation.cfg", "KVAllocation.concurrent.cfg",
                                                "KVAllocation.shared.cfg"))
    assert {"KVAllocation.concurrent.cfg", "KVAllocation.shared.cfg"} <= set(SHIPPED_MODELS)
    assert (ci["Concurrent"], ci["TailPolicy"]) == (1, "eager")
    assert (conc["Concurrent"], conc["TailPolicy"]) == (2, "eager")
    assert (shared["Concurrent"], shared["TailPolicy"]) == (1, "shared")
    ci_invariants = parse_cfg(spec_dir() / "KVAllocation.cfg").invariants
    assert "ReservationsDisjoint" in ci_invariants
    for cfg in TLC_COUNTS:
        parsed = parse_cfg(spec_dir() / cfg)
        assert parsed.invariants == ci_invariants and parsed.properties == ["RefinesExactHistory"]


@pytest.mark.parametrize("cfg", sorted(TLC_COUNTS))
def test_the_model_checks_clean_to_exhaustion_with_tlcs_counts(cfg):
    r = check_model(spec_dir() / "KVAllocation.tla", spec_dir() / cfg, coverage=False)
    assert r.outcome is Outcome.SUCCESS and r.exit_code == 0 and r.complete, r.violation
    assert (r.distinct_states, r.generated_states) == TLC_COUNTS[cfg]


def _serialized(tmp_path, name: str, old: str, new: str):
    """The mutant's own model with one constant set back (e.g. Concurrent = 2 -> 1)."""
    cfg = spec_dir() / "mutants" / f"{name}.cfg"
    text = cfg.read_text()
    assert text.count(old) == 1
    out = tmp_path / f"{name}.cfg"
    out.write_text(text.replace(old, new))
    return out


@pytest.mark.parametrize("name", INTERLEAVING_MUTANTS)
def test_an_interleaving_mutant_survives_the_serialized_model(tmp_path, name):
    cfg = _serialized(tmp_path, name, "Concurrent = 2", "Concurrent = 1")
    r = check_model(spec_dir() / "mutants" / f"{name}.tla", cfg, coverage=False, lib=[spec_dir()])
    assert r.outcome is Outcome.SUCCESS and r.complete, r.violation
    assert r.distinct_states == 398  # TLC's count for the mutants' constants with Concurrent = 1


def test_the_shared_tail_mutant_survives_the_eager_policy(tmp_path):
    name = "KVAllocation_ShareWritesInPlace"
    cfg = _serialized(tmp_path, name, 'TailPolicy = "shared"', 'TailPolicy = "eager"')
    r = check_model(spec_dir() / "mutants" / f"{name}.tla", cfg, coverage=False, lib=[spec_dir()])
    assert r.outcome is Outcome.SUCCESS and r.complete, r.violation


def test_the_reference_refuses_a_second_transaction_in_flight_by_name():
    """The reference serializes transactions (docs/specs.md, "Concurrent transactions"): a second begin while
    one is open is TRANSACTION_IN_FLIGHT, for another request too, and leaves the open one as it was."""
    from kvexact.reference.allocator import Allocator, AllocRejection
    from kvexact.reference.pool import GroupConfig
    from kvexact.reference.rejections import Rejected

    alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2]])
    t1 = alloc.begin("allocate", "r1", ("alloc",), (1,))
    with pytest.raises(Rejected) as err:
        alloc.begin("allocate", "r2", ("alloc",), (1,))
    assert err.value.reason is AllocRejection.TRANSACTION_IN_FLIGHT
    assert list(alloc.txns.data) == [t1]
