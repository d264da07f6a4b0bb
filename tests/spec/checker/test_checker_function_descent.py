"""``f[a]`` as an action conjunct, where TLC holds f as a lazy function: TLC enumerates f's body with its bound
names set to the arguments, so each disjunct and \\E witness inside is a path and a generated state.

This was the unreproduced PROPERTIES-model class of issue #35 (a public model: distinct states equal, 27,727
generated against TLC's 318,877): its VoteFor guard applies a LET-defined recursive function. Each model below
pins TLC's generated count, read from a TLC run of the same file (``-workers 1``); the last test runs TLC on
every model and compares, so a TLC that counts otherwise fails it too."""

from __future__ import annotations

import pytest

from kvexact.spec.checker.engine import check_model
from kvexact.spec.checker.result import Outcome
from kvexact.spec.tlc import run_tlc

HEAD = ("---- MODULE F ----\nEXTENDS Integers\nVARIABLES x\nS == {1, 2, 3}\n"
        "R[i \\in 0..3] == IF i = 0 THEN TRUE ELSE \\E j \\in S : j >= i /\\ R[i - 1]\n")
NEXT = "Init == x = 0\nNext == Act /\\ x' = x + 1\n"
CFG = "INIT Init\nNEXT Next\nCHECK_DEADLOCK FALSE\n"

# (name, the Act definition (and what it needs), TLC's generated states); every model has 4 distinct states.
# Two witnesses j >= 2 in S: 1 initial + 3 steps x 2 paths = 7; a record (no descent): 1 + 3 = 4.
NEXT_CASES = [
    ("let recursive-style function", "Act == LET g[i \\in S] == \\E j \\in S : j >= i /\\ x < 3 IN g[2]", 7),
    ("inline [i \\in S |-> e]", "Act == [i \\in S |-> \\E j \\in S : j >= i /\\ x < 3][2]", 7),
    ("state-level zero-arity definition", "F == [i \\in S |-> \\E j \\in S : j >= i /\\ x < 3]\nAct == F[2]", 7),
    ("state-level function definition", "H[i \\in S] == \\E j \\in S : j >= i /\\ x < 3\nAct == H[2]", 7),
    ("disjunction in the body", "D[i \\in S] == (i > 1 /\\ x < 3) \\/ (i > 0 /\\ x < 3)\nAct == D[2]", 7),
    ("LET constant function", "Act == LET g[i \\in S] == \\E j \\in S : j >= i IN g[2] /\\ x < 3", 7),
    ("operator returning a function", "Op(y) == [i \\in S |-> \\E j \\in S : j >= i /\\ y < 3]\nAct == Op(x)[2]", 7),
    ("two arguments", "M[i \\in S, j \\in S] == \\E k \\in S : k >= i /\\ k >= j /\\ x < 3\nAct == M[2, 1]", 7),
    # TLC evaluates a top-level constant definition once, at start-up, into a record: no descent
    ("constant zero-arity definition", "G == [i \\in S |-> \\E j \\in S : j >= i]\nAct == G[2] /\\ x < 3", 4),
    ("constant function definition", "K[i \\in S] == \\E j \\in S : j >= i\nAct == K[2] /\\ x < 3", 4),
    # ... except a recursive one, which stays lazy: R[2] has 2 x 3 paths, 1 + 3 x 6 = 19
    ("constant recursive definition", "Act == R[2] /\\ x < 3", 19),
    # every variable bound before f[a]: the rest is evaluated as booleans, one path
    ("after every variable is bound", "Act == TRUE\nNext2 == x' = x + 1 /\\ x < 3 /\\ R[2]", 4),
]

# Init mode evaluates f eagerly: only a recursive function (or one over an infinite domain) is lazy there.
INIT_CASES = [
    ("recursive function in Init", "Init == R[2] /\\ x = 0\nNext == x' = x", 7),
    ("LET function in Init", "Init == LET g[i \\in S] == \\E j \\in S : j >= i IN g[2] /\\ x = 0\nNext == x' = x", 2),
    ("constant function in Init", "K[i \\in S] == \\E j \\in S : j >= i\nInit == K[2] /\\ x = 0\nNext == x' = x", 2),
]


def _write(tmp_path, body: str):
    (tmp_path / "F.tla").write_text(HEAD + body + "\n====\n")
    next_name = "Next2" if "Next2" in body else "Next"
    (tmp_path / "F.cfg").write_text(CFG.replace("NEXT Next", f"NEXT {next_name}"))
    return tmp_path / "F.tla"


def _next_body(act: str) -> str:
    return act + "\n" + NEXT


@pytest.mark.parametrize(("name", "act", "generated"), NEXT_CASES, ids=[c[0] for c in NEXT_CASES])
def test_next_state_descent_counts_as_tlc(tmp_path, name, act, generated):
    res = check_model(_write(tmp_path, _next_body(act)))
    assert res.outcome is Outcome.SUCCESS, res.violation
    assert (res.generated_states, res.distinct_states) == (generated, 4)


@pytest.mark.parametrize(("name", "body", "generated"), INIT_CASES, ids=[c[0] for c in INIT_CASES])
def test_initial_state_descent_counts_as_tlc(tmp_path, name, body, generated):
    res = check_model(_write(tmp_path, body))
    assert res.outcome is Outcome.SUCCESS, res.violation
    assert (res.generated_states, res.distinct_states) == (generated, 1)


def test_an_argument_outside_the_domain_is_an_evaluation_error(tmp_path):
    """TLC: "Attempted to apply function ... to argument 4, which is not in the domain"."""
    res = check_model(_write(tmp_path, _next_body("Act == [i \\in S |-> \\E j \\in S : j >= i /\\ x < 3][4]")))
    assert res.outcome is Outcome.EVALUATION
    assert "outside its domain" in res.violation.message


def test_a_recursive_guard_like_a_ballot_safety_check(tmp_path):
    """The shape of the public model: a LET-defined recursive function of an operator's parameters, applied
    as a guard before the assignments; every quorum and earlier ballot that witnesses it is a path. TLC:
    2,041 generated, 49 distinct (``-workers 1``)."""
    body = ("VARIABLES bal\nQ == {{1, 2}, {2, 3}, {1, 3}}\n"
            "Safe(b) == LET SA[bb \\in 0..2] == \\/ bb = 0\n"
            "                                    \\/ \\E q \\in Q : \\E c \\in -1..(bb - 1) :\n"
            "                                         /\\ \\A a \\in q : bal[a] >= bb - 1\n"
            "                                         /\\ (c # -1) => SA[c]\n"
            "           IN SA[b]\n"
            "Init == x = 0 /\\ bal = [a \\in S |-> -1]\n"
            "Next == \\E a \\in S, b \\in 0..2 : /\\ bal[a] < b /\\ Safe(b)\n"
            "                                  /\\ bal' = [bal EXCEPT ![a] = b] /\\ UNCHANGED x\n")
    res = check_model(_write(tmp_path, body))
    assert res.outcome is Outcome.SUCCESS, res.violation
    assert (res.generated_states, res.distinct_states) == (2041, 49)


def test_tlc_counts_every_model_the_same(tmp_path, tlc_jar):
    """The pinned counts above against TLC itself, model by model (CI runs it; the jar is required there)."""
    bodies = ([_next_body(a) for _, a, _ in NEXT_CASES] + [b for _, b, _ in INIT_CASES])
    for i, body in enumerate(bodies):
        folder = tmp_path / f"m{i}"
        folder.mkdir()
        spec = _write(folder, body)
        tlc, embedded = run_tlc(spec, folder / "F.cfg", tlc_jar), check_model(spec)
        assert tlc.outcome is embedded.outcome is Outcome.SUCCESS, (body, tlc.violation)
        assert (tlc.generated_states, tlc.distinct_states) == (embedded.generated_states, embedded.distinct_states), body
