"""z3 obligations: all proved, and the machinery can refute and report unknown."""

from __future__ import annotations

import pytest

from kvexact.conformance import obligations, proofs


def test_every_obligation_is_proved():
    results = [obligations.discharge(ob) for ob in proofs.all_obligations()]
    assert results, "no obligations registered"
    bad = [r for r in results if r.verdict != "proved"]
    assert not bad, bad
    names = [r.name for r in results]
    assert len(names) == len(set(names)), "duplicate obligation names"


def test_a_wrong_layout_is_refuted():
    """A flat index that forgets the head stride collides: z3 must find the counterexample."""

    def build(z3):
        b1, h1, b2, h2 = z3.Ints("b1 h1 b2 h2")
        cons = [b1 >= 0, b2 >= 0, b1 < 4, b2 < 4, h1 >= 0, h1 < 2, h2 >= 0, h2 < 2]
        return cons, z3.Implies(b1 * 2 + h1 == b2 + h2, z3.And(b1 == b2, h1 == h2)), "forall"

    r = obligations.discharge(obligations.Obligation("bad-layout", "test", "forgets a stride", build))
    assert r.verdict == "refuted" and "counterexample" in r.detail


def test_missing_witness_is_refuted():
    def build(z3):
        x = z3.Int("x")
        return [x >= 0, x < 10], x * x == 2, "exists"

    assert obligations.discharge(obligations.Obligation("no-sqrt2", "test", "", build)).verdict == "refuted"


def test_unknown_is_not_proved():
    """A non-linear claim that z3 cannot settle within 1 ms is reported 'unknown', never 'proved'."""

    def build(z3):
        a, b, c, n = z3.Ints("a b c n")
        cons = [a >= 1, b >= 1, c >= 1, n >= 3, n <= 40]
        return cons, a**n + b**n != c**n, "forall"

    r = obligations.discharge(obligations.Obligation("fermat", "test", "", build), timeout_ms=1)
    assert r.verdict in {"unknown", "refuted"}
    assert r.verdict != "proved"


@pytest.mark.parametrize("bs,h,d", [(16, 8, 128), (1, 1, 16), (32, 4, 64)])
def test_layout_obligations_exist_for_supported_layouts(bs, h, d):
    names = {ob.name for ob in proofs.all_obligations()}
    assert f"layout-injective[bs={bs},h={h},d={d}]" in names
