"""0x10A: the formula registry. Every formula has a golden seed value; the same code runs over z3."""

from fractions import Fraction

import pytest

from kvexact.reference import formulas
from kvexact.reference.formulas import INT_OPS, REGISTRY, Z3Ops, evaluate, formula
from kvexact.reference.formulas_all import load_all
from kvexact.reference.labs.formulas_golden import DERIVED, GOLDEN

load_all()


def _hash_checks():
    """The hash formulas have no numeric value: their contract is what the key distinguishes (0x07B, 0x07D)."""
    from kvexact.reference.keys import KeyInputs, hash_full_blocks

    h0 = evaluate("prefix.block_hash", parent=None, block_tokens=[1, 2], extra_keys=None)
    h1 = evaluate("prefix.block_hash", parent=h0, block_tokens=[3, 4], extra_keys=None)
    assert [h0, h1] == hash_full_blocks(KeyInputs(tokens=(1, 2, 3, 4)), 2)
    assert h1 != evaluate("prefix.block_hash", parent=None, block_tokens=[3, 4], extra_keys=None)  # parent binds
    two = evaluate("prefix.tail_hash", parent=h1, tail_tokens=[5, 6, 7], valid_rows=2, policy_id="p", extra_keys=None)
    three = evaluate("prefix.tail_hash", parent=h1, tail_tokens=[5, 6, 7], valid_rows=3, policy_id="p", extra_keys=None)
    other = evaluate("prefix.tail_hash", parent=h1, tail_tokens=[5, 6, 7], valid_rows=2, policy_id="q", extra_keys=None)
    assert len({two, three, other}) == 3  # valid rows and policy are part of the identity


CHECKS = {"prefix.block_hash": _hash_checks, "prefix.tail_hash": _hash_checks}


def _all_cases():
    for table in (GOLDEN, DERIVED):
        for fid, cases in table.items():
            for kwargs, expected in cases:
                yield fid, kwargs, expected


def unexercised(registry=REGISTRY) -> set[str]:
    """Registered ids that no case or check of this module evaluates (run from a clean exercise record)."""
    formulas.reset_exercised()
    for fid, kwargs, _ in _all_cases():
        evaluate(fid, **kwargs)
    for check in set(CHECKS.values()):
        check()
    return set(registry) - formulas.exercised()


def test_every_registered_formula_is_exercised_by_a_case():
    assert unexercised() == set()


def test_a_formula_without_a_case_is_reported():
    fresh = formula("test.unexercised", units="tokens", convention="x", location="0x02C")(lambda ops: 0)
    try:
        assert unexercised() == {"test.unexercised"}
    finally:
        del REGISTRY[fresh.id]


@pytest.mark.parametrize("fid", sorted(DERIVED))
def test_derived(fid):
    for kwargs, expected in DERIVED[fid]:
        assert evaluate(fid, INT_OPS, **kwargs) == expected, (fid, kwargs)


def test_hash_formulas():
    _hash_checks()


def _z3_value(z3, v):
    if isinstance(v, bool):
        return z3.BoolVal(v)
    if isinstance(v, int):
        return z3.IntVal(v)
    if isinstance(v, Fraction):
        return z3.RealVal(str(v))
    return [_z3_value(z3, x) for x in v]


STRUCTURAL = {"axis"}  # an index into a parameter list, not a quantity


def test_every_arithmetic_formula_has_the_same_value_over_z3():
    """The z3 form of each arithmetic formula proves the integer form's value on every case."""
    import z3

    arithmetic = {fid for fid, f in REGISTRY.items() if f.arithmetic}
    checked = set()
    for fid, kwargs, expected in _all_cases():
        if fid not in arithmetic:
            continue
        ops = Z3Ops()
        value = evaluate(fid, ops, **{k: v if k in STRUCTURAL else _z3_value(z3, v) for k, v in kwargs.items()})
        assert _prove(value == _z3_value(z3, expected), ops), (fid, kwargs)
        checked.add(fid)
    assert checked == arithmetic


@pytest.mark.parametrize("fid", sorted(GOLDEN))
def test_golden(fid):
    for kwargs, expected in GOLDEN[fid]:
        assert evaluate(fid, INT_OPS, **kwargs) == expected, (fid, kwargs)


def test_registry_metadata():
    for f in REGISTRY.values():
        assert f.units.strip() and f.convention.strip() and f.location.strip(), f.id
        assert f.location.startswith("0x"), f.id


def test_duplicate_id_and_missing_units_are_refused():
    with pytest.raises(ValueError, match="twice"):
        formula("ledger.pool_bytes", units="bytes", convention="x", location="0x02C")(lambda ops: 0)
    with pytest.raises(ValueError, match="units"):
        formula("test.no_units", units="", convention="x", location="0x02C")(lambda ops: 0)
    with pytest.raises(ValueError, match="units"):
        formula("test.no_convention", units="bytes", convention=" ", location="0x02C")(lambda ops: 0)
    assert "test.no_units" not in REGISTRY and "test.no_convention" not in REGISTRY


def test_wrong_arguments_are_a_clear_error():
    with pytest.raises(TypeError, match="ledger.pool_bytes"):
        evaluate("ledger.pool_bytes", pool_blocks=8)
    with pytest.raises(ValueError, match="divisor"):
        evaluate("ledger.request_blocks", rows_tokens=3, block_tokens=0)


# ---------------------------------------------------------------- the same code over z3


def _answer(claim, ops, *assumptions):
    """z3's answer to ``assumptions and side constraints and not claim``, within the proofs' rlimit."""
    import z3

    from kvexact.conformance.obligations import solve

    return solve([*assumptions, *ops.side, z3.Not(claim)])


def _prove(claim, ops, *assumptions):
    """True when ``assumptions and side constraints imply claim`` (the negation is unsat within the
    deterministic rlimit ``PROOF_RLIMIT``, never a wall-clock timeout)."""
    return _answer(claim, ops, *assumptions).status == "unsat"


def test_z3_tail_is_below_one_block():
    import z3

    ops = Z3Ops()
    T, P = z3.Ints("T P")
    tail = formulas.REGISTRY["cost.request_tail_tokens"](ops, rows_tokens=T, block_tokens=P)
    assert _prove(z3.And(tail >= 0, tail < P), ops, T >= 0, P > 0)


def test_z3_capped_hit_bounds():
    import z3

    ops = Z3Ops()
    T, P = z3.Ints("T P")
    sem, idx = z3.Ints("sem idx")
    hit = evaluate("cost.full_hit_tokens_capped", ops, semantic_tokens=sem, indexed_tokens=idx, prompt_tokens=T,
                   block_tokens=P)
    bound = ops.minimum(sem, idx, T - 1)
    chain = evaluate("prefix.runtime_chain", ops, runtime_tokens=hit, semantic_tokens=sem, indexed_tokens=idx,
                     cap_tokens=T - 1, prompt_tokens=T)
    facts = (T >= 1, P > 0, sem >= 0, idx >= 0, sem <= T, idx <= T)
    assert _prove(z3.And(chain, hit > bound - P, ops.mod(hit, P) == 0), ops, *facts)
    gen = evaluate("cost.full_hit_tokens_gen", ops, rows_tokens=T, block_tokens=P)
    assert _prove(z3.Implies(z3.And(sem == T, idx == T), hit == gen), ops, *facts)  # 0x09B is the special case


def test_z3_cow_amplification_is_2r_plus_1():
    import z3

    ops = Z3Ops()
    r, b0, b1 = z3.Ints("r b0 b1")
    copy = evaluate("cow.copy_bytes", ops, tail_rows=r, group_row_bytes=[b0, b1])
    traffic = evaluate("cow.traffic_bytes", ops, copy_bytes=copy, group_row_bytes=[b0, b1])
    amp = evaluate("cow.amplification", ops, traffic_bytes=traffic, group_row_bytes=[b0, b1])
    assert _prove(amp == z3.ToReal(2 * r + 1), ops, r >= 0, b0 >= 1, b1 >= 1)


def test_z3_ledger_identities():
    import z3

    ops = Z3Ops()
    B, P, n_ref, n_unique = z3.Ints("B P n_ref n_unique")
    rows = z3.Ints("t0 t1 t2")
    valid = z3.Ints("v0 v1 v2")
    logical = evaluate("ledger.logical_ref_bytes", ops, rows_tokens=rows, row_bytes=B)
    paged = evaluate("ledger.paged_ref_bytes", ops, ref_blocks=n_ref, block_tokens=P, row_bytes=B)
    tail = evaluate("ledger.request_view_tail_bytes", ops, paged_bytes=paged, logical_bytes=logical)
    cap = evaluate("ledger.unique_capacity_bytes", ops, unique_blocks=3, block_tokens=P, row_bytes=B)
    mat = evaluate("ledger.unique_materialized_bytes", ops, valid_rows=valid, row_bytes=B)
    utail = evaluate("ledger.unique_tail_bytes", ops, valid_rows=valid, block_tokens=P, row_bytes=B)
    assert _prove(paged == logical + tail, ops)
    assert _prove(cap == mat + utail, ops)


def test_z3_slot_id_injective_for_P16():
    import z3

    ops = Z3Ops()
    s1, s2, t1, t2 = z3.Ints("s1 s2 t1 t2")
    o1 = evaluate("addr.token_offset", ops, token=t1, block_tokens=16)
    o2 = evaluate("addr.token_offset", ops, token=t2, block_tokens=16)
    id1 = evaluate("addr.slot_id", ops, physical_slot=s1, block_tokens=16, offset=o1)
    id2 = evaluate("addr.slot_id", ops, physical_slot=s2, block_tokens=16, offset=o2)
    assert _prove(z3.Implies(id1 == id2, z3.And(s1 == s2, o1 == o2)), ops, s1 >= 0, s2 >= 0, t1 >= 0, t2 >= 0)


def test_z3_can_refute_a_false_claim():
    import z3

    ops = Z3Ops()
    T, P = z3.Ints("T P")
    hit = evaluate("cost.full_hit_tokens", ops, rows_tokens=T, block_tokens=P)
    assert _answer(hit == T, ops, T >= 0, P > 0).status == "sat"  # only block-aligned lengths are fully hit


# ---------------------------------------------------------------- the seed's catalog (0x10A)


def test_catalog_and_registry_name_each_other():
    from kvexact.reference.formulas_seed import CATALOG, PROSE, seed_formula_ids

    named = seed_formula_ids() | set(PROSE)
    assert named == set(REGISTRY), named ^ set(REGISTRY)
    assert not seed_formula_ids() & set(PROSE)
    for e in CATALOG:
        assert bool(e.ids) != bool(e.none_because), e  # an id, or a reason for none, never both
        for fid in e.ids:
            assert e.section in REGISTRY[fid].location, (fid, e.section)


def test_catalog_counts():
    """Counted by hand in the seed: 111 display equations in 0x02A-0x0CF (41 sections); 5 are worked
    instances, 4 are record declarations and 1 a whole-state invariant; the other 101 name 109 formulas."""
    from kvexact.reference.formulas_seed import CATALOG, seed_formula_ids

    assert len(CATALOG) == 111
    assert len({e.section for e in CATALOG}) == 41
    assert sum(1 for e in CATALOG if not e.ids) == 10
    assert len(seed_formula_ids()) == 109
    assert [e.line for e in CATALOG] == sorted(e.line for e in CATALOG)
