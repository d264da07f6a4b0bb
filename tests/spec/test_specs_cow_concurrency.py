"""CowPublication with COW transactions of different requests in flight at once (Concurrent).

The concurrent model checks clean to exhaustion with the counts TLC reported for it; the bugs that only an
interleaving exposes survive the serialized model of the same constants (with exactly the states of the
unmutated spec there) and die in theirs (their kills are in tests/spec/test_specs_mutants.py); the two
interleaving witnesses are unreachable when transactions are serialized; the reference runs one transaction at
a time and refuses a second COW begin (and a fork) by name.
"""

from __future__ import annotations

import pytest

from kvexact.spec import SHIPPED_MODELS, spec_dir
from kvexact.spec.checker import check_model
from kvexact.spec.checker.cfg import parse_cfg
from kvexact.spec.checker.result import Outcome

pytestmark = pytest.mark.xdist_group("spec-cow-concurrency")

# TLC 2.19's counts for CowPublication.concurrent.cfg (kvexact check --engine tlc): distinct, generated, depth.
TLC_CONCURRENT = (3_211, 15_539, 21)
INTERLEAVING_MUTANTS = ("CowPublication_ReserveIgnoresOtherTxns", "CowPublication_LeaseOncePerSource",
                        "CowPublication_RollbackResetsEveryReservation")
# TLC's count for the unmutated spec at the mutants' constants with Concurrent = 1 (kvexact check --engine tlc).
SERIALIZED_DISTINCT = 1_743


def _serialized(tmp_path, cfg, name: str):
    """``cfg`` with Concurrent = 2 set back to 1."""
    text = cfg.read_text()
    assert text.count("Concurrent = 2") == 1
    out = tmp_path / f"{name}.serialized.cfg"
    out.write_text(text.replace("Concurrent = 2", "Concurrent = 1"))
    return out


def test_the_model_ships_and_differs_from_the_ci_model_only_where_it_says():
    ci, conc = (parse_cfg(spec_dir() / c) for c in ("CowPublication.cfg", "CowPublication.concurrent.cfg"))
    assert "CowPublication.concurrent.cfg" in SHIPPED_MODELS
    for other in ("CowPublication.deep.cfg", "CowPublication.liveness.cfg"):
        assert parse_cfg(spec_dir() / other).constants["Concurrent"] == 1
    assert ci.constants["Concurrent"] == 1 and conc.constants["Concurrent"] == 2
    changed = {k for k in ci.constants if ci.constants[k] != conc.constants[k]}
    assert changed == {"Groups", "Blocks", "Tokens", "Concurrent"}
    assert conc.invariants == ci.invariants and conc.properties == ci.properties == ["RefinesExactHistory"]
    assert {"ReservationsDisjoint", "ReservationsHoldTheirCopy"} <= set(ci.invariants)


def test_the_concurrent_model_checks_clean_to_exhaustion_with_tlcs_counts():
    r = check_model(spec_dir() / "CowPublication.tla", spec_dir() / "CowPublication.concurrent.cfg", coverage=False)
    assert r.outcome is Outcome.SUCCESS and r.exit_code == 0 and r.complete, r.violation
    assert (r.distinct_states, r.generated_states, r.depth) == TLC_CONCURRENT


def test_the_serialized_spec_has_the_states_every_interleaving_mutant_keeps(tmp_path):
    cfg = _serialized(tmp_path, spec_dir() / "mutants" / f"{INTERLEAVING_MUTANTS[0]}.cfg", "spec")
    r = check_model(spec_dir() / "CowPublication.tla", cfg, coverage=False)
    assert r.outcome is Outcome.SUCCESS and r.complete, r.violation
    assert r.distinct_states == SERIALIZED_DISTINCT


@pytest.mark.parametrize("name", INTERLEAVING_MUTANTS)
def test_an_interleaving_mutant_survives_the_serialized_model(tmp_path, name):
    cfg = _serialized(tmp_path, spec_dir() / "mutants" / f"{name}.cfg", name)
    r = check_model(spec_dir() / "mutants" / f"{name}.tla", cfg, coverage=False, lib=[spec_dir()])
    assert r.outcome is Outcome.SUCCESS and r.complete, r.violation
    assert r.distinct_states == SERIALIZED_DISTINCT


@pytest.mark.parametrize("name", ["CowPublication_RacingCows", "CowPublication_PublishDuringCopy"])
def test_an_interleaving_witness_is_unreachable_when_serialized(tmp_path, name):
    """The witness (reached at Concurrent = 2 in tests/spec/test_specs_mutants.py) holds everywhere at 1."""
    cfg = _serialized(tmp_path, spec_dir() / "witnesses" / f"{name}.cfg", name)
    r = check_model(spec_dir() / "CowPublication.tla", cfg, coverage=False)
    assert r.outcome is Outcome.SUCCESS and r.complete, r.violation


def test_the_reference_refuses_a_second_cow_transaction_in_flight_by_name():
    """The reference serializes COW transactions (docs/specs.md, "Concurrent transactions"): while d's COW
    append holds its source lease, a COW append of a (same shared tail) and a fork are TRANSACTION_IN_FLIGHT,
    and the open transaction is left as it was."""
    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import Allocator, AllocRejection
    from kvexact.reference.pool import GroupConfig, QueuePolicy
    from kvexact.reference.rejections import Rejected

    alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3]], policy=QueuePolicy.LOWEST_ID)
    alloc.append("a", 1)
    lifecycle.fork(alloc, "a", "d")
    t1 = alloc.begin("append", "d", ("cow",), (2,))
    alloc.cow_begin(t1)
    before = alloc.txns[t1]
    with pytest.raises(Rejected) as err:
        alloc.begin("append", "a", ("cow",), (3,))
    assert err.value.reason is AllocRejection.TRANSACTION_IN_FLIGHT
    with pytest.raises(Rejected) as err:
        lifecycle.fork(alloc, "a", "e")
    assert err.value.reason is AllocRejection.TRANSACTION_IN_FLIGHT
    assert list(alloc.txns.data) == [t1] and alloc.txns[t1] == before
    assert alloc.pools[0].refcount(1) == 3  # a's and d's maps and d's one source lease
