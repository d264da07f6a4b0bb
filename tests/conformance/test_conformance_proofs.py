"""z3 obligations: all proved within the deterministic rlimit, and the machinery can refute and report
the rlimit's exhaustion by name."""

from __future__ import annotations

import pytest

from kvexact.conformance import obligations, proofs
from kvexact.conformance.obligations import PROOF_RLIMIT, RLIMIT_SAFETY_FACTOR, ProofVerdict


def test_every_obligation_is_proved_within_the_rlimit():
    results = [obligations.discharge(ob) for ob in proofs.all_obligations()]
    assert results, "no obligations registered"
    bad = [r for r in results if r.verdict is not ProofVerdict.PROVED]
    assert not bad, bad
    names = [r.name for r in results]
    assert len(names) == len(set(names)), "duplicate obligation names"
    costliest = max(results, key=lambda r: r.rlimit_used)
    assert 0 < costliest.rlimit_used, "z3 reported no resource use"
    # the chosen limit keeps its safety factor over the costliest obligation
    assert costliest.rlimit_used * RLIMIT_SAFETY_FACTOR <= PROOF_RLIMIT, (costliest.name, costliest.rlimit_used)


def test_rlimit_use_does_not_depend_on_what_ran_before():
    """Each query runs in a fresh z3 context, so its count barely moves with what the process asked before
    (659,855 in a bare process, 659,869 after the other tests, z3 5.4.1) and never with the clock."""
    ob = next(o for o in proofs.all_obligations() if o.name == "vattention-offset-in-reservation")
    first = obligations.discharge(ob).rlimit_used
    for other in proofs.kernel_obligations():
        obligations.discharge(other)
    assert abs(obligations.discharge(ob).rlimit_used - first) <= first // 1000


def test_a_tiny_rlimit_is_the_named_unknown():
    """A proof that needs more than the rlimit allows comes back RLIMIT_EXHAUSTED, never proved."""
    ob = next(o for o in proofs.all_obligations() if o.name == "vattention-offset-in-reservation")
    r = obligations.discharge(ob, rlimit=100)
    assert r.verdict is ProofVerdict.RLIMIT_EXHAUSTED, r
    assert r.rlimit_used >= 100 and "rlimit 100" in r.detail
    assert obligations.discharge(ob).verdict is ProofVerdict.PROVED  # the same proof with the chosen limit


def test_a_wrong_layout_is_refuted():
    """A flat index that forgets the head stride collides: z3 must find the counterexample."""

    def build(z3):
        b1, h1, b2, h2 = z3.Ints("b1 h1 b2 h2")
        cons = [b1 >= 0, b2 >= 0, b1 < 4, b2 < 4, h1 >= 0, h1 < 2, h2 >= 0, h2 < 2]
        return cons, z3.Implies(b1 * 2 + h1 == b2 + h2, z3.And(b1 == b2, h1 == h2)), "forall"

    r = obligations.discharge(obligations.Obligation("bad-layout", "test", "forgets a stride", build))
    assert r.verdict is ProofVerdict.REFUTED and "counterexample" in r.detail


def test_missing_witness_is_refuted():
    def build(z3):
        x = z3.Int("x")
        return [x >= 0, x < 10], x * x == 2, "exists"

    assert obligations.discharge(obligations.Obligation("no-sqrt2", "test", "", build)).verdict is ProofVerdict.REFUTED


def test_a_hard_claim_with_a_small_rlimit_is_not_proved():
    """A non-linear claim z3 cannot settle within a small rlimit is the named unknown, never 'proved'."""

    def build(z3):
        a, b, c, n = z3.Ints("a b c n")
        cons = [a >= 1, b >= 1, c >= 1, n >= 3, n <= 40]
        return cons, a**n + b**n != c**n, "forall"

    r = obligations.discharge(obligations.Obligation("fermat", "test", "", build), rlimit=10_000)
    assert r.verdict is ProofVerdict.RLIMIT_EXHAUSTED, r


@pytest.mark.parametrize("bs,h,d", [(16, 8, 128), (1, 1, 16), (32, 4, 64)])
def test_layout_obligations_exist_for_supported_layouts(bs, h, d):
    names = {ob.name for ob in proofs.all_obligations()}
    assert f"layout-injective[bs={bs},h={h},d={d}]" in names


def test_an_incomplete_theory_is_the_other_named_unknown():
    """z3 giving up well inside the rlimit (real exponentiation) is UNKNOWN, not RLIMIT_EXHAUSTED."""

    def build(z3):
        r = z3.Real("r")
        return [], 2**r == 3, "exists"

    res = obligations.discharge(obligations.Obligation("log2-3", "test", "", build))
    assert res.verdict is ProofVerdict.UNKNOWN and res.rlimit_used < PROOF_RLIMIT, res


def test_prove_command_reports_rlimit_use_and_the_named_unknown(kvexact_cli, tmp_path):
    """``kvexact prove --rlimit N``: an obligation that spends N is 'unknown: rlimit exhausted' by name, exit
    1; the JSON gives each obligation's rlimit use beside the limit."""
    import json

    out = tmp_path / "p.json"
    code, text = kvexact_cli(["prove", "--match", "slot-mapping", "--json", str(out)]).code_and_text
    assert code == 0 and "1/1 proved; rlimit 7,000,000 per obligation" in text, text
    row = json.loads(out.read_text())[0]
    assert row["verdict"] == "proved" and row["rlimit"] == PROOF_RLIMIT and 0 < row["rlimit_used"] < PROOF_RLIMIT
    code, text = kvexact_cli(["prove", "--match", "slot-mapping", "--rlimit", "100"]).code_and_text
    text = " ".join(text.split())  # rich wraps the table and the failure lines
    assert code == 1 and "unknown: rlimit exhausted (RLIMIT_EXHAUSTED)" in text and "0/1 proved" in text, text
    code, text = kvexact_cli(["prove", "--rlimit", "0"]).code_and_text
    assert code == 2 and "--rlimit" in text
