"""Enumeration and counting rules (docs/checker.md, "Successor enumeration", "Counting rules", "Deadlock"), each on a spec written for it.
The expected counts are derived by hand in each case's comment: generated = initial states produced +
every successor of every explored state (duplicates included); distinct = states inserted."""

from __future__ import annotations

import pytest
from tla_snippets import NOLOCK, write_spec

from kvexact.spec.checker import check_model
from kvexact.spec.checker.result import Outcome

CASES = {
    # x=0 -> two x=1 successors (duplicates count); x=1 -> two x=1. gen 1+2+2=5, distinct 2, depth 2
    "disjunction emits duplicates": ("VARIABLE x\nInit == x = 0\nNext == x' = 1 \\/ x' = 1", NOLOCK,
                                     "success", 5, 2, 2),
    # each of 3 states has 3 successors: gen 1+9=10, distinct 3
    "x' \\in S branches": ("VARIABLE x\nInit == x = 0\nNext == x' \\in {0, 1, 2}", NOLOCK, "success", 10, 3, 2),
    # x' bound by \in, then x' = 1 is a test: one successor per state. gen 1+1+1=3, distinct 2
    "bound prime is a test": ("VARIABLE x\nInit == x = 0\nNext == x' \\in 0..2 /\\ x' = 1", NOLOCK,
                              "success", 3, 2, 2),
    # \E gives one branch per element: successors 1,0,1 of each state. gen 1+3+3=7, distinct 2
    "exists branches": ("VARIABLE x\nInit == x = 0\nNext == \\E i \\in 1..3 : x' = i % 2", NOLOCK,
                        "success", 7, 2, 2),
    # states (x,y) in 0..2 x 0..1: successors [x<2]+[y<1] summed = 4+3 = 7. gen 8, distinct 6, depth 4
    "UNCHANGED through tuples and definitions": (
        "VARIABLES x, y\nvx == <<x>>\nInit == x = 0 /\\ y = 0\n"
        "Next == (x < 2 /\\ x' = x + 1 /\\ UNCHANGED y) \\/ (y < 1 /\\ y' = y + 1 /\\ UNCHANGED vx)",
        NOLOCK, "success", 8, 6, 4),
    # [A]_x inside Next adds the stutter successor: x=0:2, x=1:2, x=2:1. gen 1+5=6, distinct 3, no deadlock
    "[A]_v adds the stutter successor": ("VARIABLE x\nInit == x = 0\nNext == [x < 2 /\\ x' = x + 1]_x",
                                         "INIT Init\nNEXT Next\n", "success", 6, 3, 3),
    # IF follows one branch: x=0 -> 1 successor, x=1 -> 2. gen 1+1+2=4, distinct 2
    "IF inside an action": ("VARIABLE x\nInit == x = 0\nNext == IF x = 0 THEN x' = 1 ELSE x' \\in {0, 1}",
                            NOLOCK, "success", 4, 2, 2),
    # CASE takes the first true arm only (7 is never reached): states 0,1,2, one successor each. gen 4
    "CASE first true arm": ("VARIABLE x\nInit == x = 0\nNext == CASE TRUE -> x' = (x + 1) % 3 [] TRUE -> x' = 7",
                            NOLOCK, "success", 4, 3, 3),
    # once x' is assigned, (TRUE \/ TRUE) is evaluated, not enumerated: 1 successor per state. gen 3
    "all-assigned fast path": ("VARIABLE x\nInit == x = 0\nNext == x' = (x + 1) % 2 /\\ (TRUE \\/ TRUE)",
                               NOLOCK, "success", 3, 2, 2),
    # \A is a conjunction over bindings: i=1 assigns x'=1, i=2 tests 1 \in {2,1}. gen 1+1+1=3, distinct 2
    "forall is a conjunction": ("VARIABLES x, y\nInit == x = 0 /\\ y = 0\n"
                                "Next == (\\A i \\in {1, 2} : x' \\in {i, 1}) /\\ UNCHANGED y", NOLOCK,
                                "success", 3, 2, 2),
    # Init produces x=1, x=2, x=1 (3 generated, 2 distinct); each state has 1 successor. gen 5, depth 1
    "Init duplicates": ("VARIABLE x\nInit == x \\in {1, 2} \\/ x = 1\nNext == UNCHANGED x", NOLOCK,
                        "success", 5, 2, 1),
    # CONSTRAINT x < 3: x=3 is generated (counted) but not inserted nor explored. gen 1+3=4, distinct 3
    "constraint": ("VARIABLE x\nInit == x = 0\nNext == x' = x + 1\nC == x < 3", NOLOCK + "CONSTRAINT C\n",
                   "success", 4, 3, 3),
    # CONSTRAINT reading x only, through an operator; the y-steps leave x as it was (the constraint holds as in
    # the parent). In the model: x in 0..2, y in 0..1 = 6 states, each with 2 successors: gen 1+12=13, depth 4
    "constraint on an unchanged variable": (
        "VARIABLES x, y\nInit == x = 0 /\\ y = 0\nNext == (x' = x + 1 /\\ y' = y) \\/ (y' = 1 - y /\\ x' = x)"
        "\nSmall(v) == v < 3\nC == Small(x)", NOLOCK + "CONSTRAINT C\n", "success", 13, 6, 4),
    # ACTION_CONSTRAINT x' >= x from Init x=1: x'=0 is generated but never inserted. gen 1+3+3=7, distinct 2
    "action constraint": ("VARIABLE x\nInit == x = 1\nNext == x' \\in 0..2\nAC == x' >= x",
                          NOLOCK + "ACTION_CONSTRAINT AC\n", "success", 7, 2, 2),
    # Init x=0 then x=1,2; x=2 has no successor: deadlock (on by default). gen 3, distinct 3
    "deadlock": ("VARIABLE x\nInit == x = 0\nNext == x < 2 /\\ x' = x + 1", "INIT Init\nNEXT Next\n",
                 "deadlock", 3, 3, 3),
    # the invariant is checked on the out-of-constraint state x=3 too: violation after gen 4
    "invariant on out-of-constraint state": (
        "VARIABLE x\nInit == x = 0\nNext == x' = x + 1\nC == x < 3\nInv == x # 3",
        NOLOCK + "CONSTRAINT C\nINVARIANT Inv\n", "safety", 4, 3, 3),
    # VIEW x: (0,0) -> (1,1) new; (1,1) -> (0,2) has view 0, already seen. gen 3, distinct 2
    "view": ("VARIABLES x, t\nInit == x = 0 /\\ t = 0\nNext == x' = (x + 1) % 2 /\\ t' = t + 1\nV == x",
             NOLOCK + "VIEW V\n", "success", 3, 2, 2),
    # SYMMETRY over {a, b}: the two initial states are one orbit. gen 2 + 1 = 3, distinct 1
    "symmetry": ("CONSTANT P\nVARIABLE x\nInit == x \\in P\nNext == UNCHANGED x\nSym == Permutations(P)",
                 NOLOCK + "CONSTANT P = {a, b}\nSYMMETRY Sym\n", "success", 3, 1, 1),
    # SPECIFICATION with fairness: Init/Next taken from Spec, WF ignored. 0,1,2 then stutter only
    "specification": ("VARIABLE x\nInit == x = 0\nNext == x < 2 /\\ x' = x + 1\nSpec == Init /\\ [][Next]_x "
                      "/\\ WF_x(Next)", "SPECIFICATION Spec\nCHECK_DEADLOCK FALSE\n", "success", 3, 3, 3),
    # a LET inside an action, with a RECURSIVE operator: x' = Sum(x) where Sum(n) = n + ... + 0, mod 4
    "LET and RECURSIVE in actions": (
        "VARIABLE x\nRECURSIVE S(_)\nS(n) == IF n = 0 THEN 0 ELSE n + S(n - 1)\nInit == x = 1\n"
        "Next == LET y == S(x) IN x' = (y + 1) % 4", NOLOCK, "success", 4, 3, 3),
}
# "LET and RECURSIVE": 1 -> S(1)+1=2 -> S(2)+1=4%4=0 -> S(0)+1=1 (seen): 3 distinct, gen 1+3=4


@pytest.mark.parametrize("name", list(CASES))
def test_enumeration_rule(tmp_path, name):
    body, cfg, result, generated, distinct, depth = CASES[name]
    r = check_model(write_spec(tmp_path, body, cfg))
    assert r.outcome.value == result, (r.violation, r.messages)
    assert (r.generated_states, r.distinct_states, r.depth) == (generated, distinct, depth)


def test_instance_with_substitution_and_named_instance(tmp_path):
    """C == INSTANCE Counter WITH c <- k, Max <- 2: k goes 0,1,2 (gen 1+2=3, distinct 3)."""
    counter = """\
        ---- MODULE Counter ----
        EXTENDS Naturals
        CONSTANT Max
        VARIABLE c
        Inc == c < Max /\\ c' = c + 1
        ====
        """
    spec = write_spec(tmp_path, "VARIABLE k\nC == INSTANCE Counter WITH c <- k, Max <- 2\nInit == k = 0\n"
                      "Next == C!Inc", NOLOCK, extra={"Counter.tla": counter})
    r = check_model(spec)
    assert (r.outcome, r.generated_states, r.distinct_states) == (Outcome.SUCCESS, 3, 3)


def test_operator_override_in_cfg(tmp_path):
    """Seq <- Bounded: x ranges over sequences of {1} of length <= 2: <<>>, <<1>>, <<1,1>> (3 init)."""
    spec = write_spec(tmp_path, "VARIABLE x\nBounded(S) == UNION {[1..n -> S] : n \\in 0..2}\n"
                      "Init == x \\in Seq({1})\nNext == UNCHANGED x",
                      NOLOCK + "CONSTANT Seq <- Bounded\n")
    r = check_model(spec)
    assert (r.generated_states, r.distinct_states) == (3 + 3, 3)


def test_properties_are_checked_not_passed_over(tmp_path):
    """x stays 0 forever: <>(x = 0) holds, <>(x = 1) is violated (exit 13); neither is a warning."""
    body = "VARIABLE x\nInit == x = 0\nNext == UNCHANGED x\nLive == <>(x = 0)\nDead == <>(x = 1)"
    r = check_model(write_spec(tmp_path, body, NOLOCK + "PROPERTY Live\n"))
    assert r.outcome is Outcome.SUCCESS and r.complete and r.messages == ()
    r = check_model(write_spec(tmp_path, body, NOLOCK + "PROPERTY Dead\n"))
    assert r.outcome is Outcome.LIVENESS and r.exit_code == 13 and r.violation.name == "Dead"


def test_die_hard_shortest_trace(corpus_root):
    """DieHard: the shortest behavior reaching big = 4 has 7 states (BFS)."""
    r = check_model(corpus_root / "DieHard__DieHard" / "DieHard.tla")
    assert r.outcome is Outcome.SAFETY and r.exit_code == 12
    assert r.violation.name == "NotSolved" and len(r.violation.trace) == 7
    assert r.violation.trace[-1].values["big"] == 4
    assert r.violation.trace[0].action == "Initial predicate"


def test_coverage_lists_actions_that_never_fire(tmp_path):
    """A fires from x=0 only (1 successor, new); B never fires."""
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nA == x = 0 /\\ x' = 1\nB == x = 5 /\\ x' = 0\n"
                      "Next == A \\/ B", NOLOCK)
    r = check_model(spec, coverage=True)
    assert r.coverage == {"A": {"fired": 1, "new": 1}, "B": {"fired": 0, "new": 0}}


def test_max_states_and_depth_are_incomplete(tmp_path):
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == x' = x + 1", NOLOCK)
    r = check_model(spec, max_states=5)
    assert r.outcome is Outcome.SUCCESS and not r.complete and r.distinct_states == 5
    r = check_model(spec, max_depth=3)
    assert not r.complete and r.depth == 3


def test_workers_give_the_same_counts(tmp_path):
    """x, y in 0..49: 2,500 states at depth 1 (enough for the parallel path); 1 successor each."""
    spec = write_spec(tmp_path, "VARIABLES x, y\nInit == x \\in 0..49 /\\ y \\in 0..49\nNext == UNCHANGED <<x, y>>",
                      NOLOCK)
    one = check_model(spec, workers=1)
    two = check_model(spec, workers=2)
    assert (one.generated_states, one.distinct_states) == (5000, 2500)
    assert (two.generated_states, two.distinct_states) == (5000, 2500)


def test_subseteq_enumerates_subsets(tmp_path):
    """x' \\subseteq {1, 2} branches over the 4 subsets: each of the 4 states has 4 successors.
    gen 1 + 16 = 17, distinct 4 (Init {} plus {1}, {2}, {1, 2})."""
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = {}\nNext == x' \\subseteq {1, 2}", NOLOCK)
    r = check_model(spec)
    assert (r.generated_states, r.distinct_states, r.depth) == (17, 4, 2)


def test_fingerprints_keep_kinds_apart(tmp_path):
    """TRUE and 1, {1} and <<1>> are four different states (Init: 4 generated, 4 distinct)."""
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 1 \\/ x = TRUE \\/ x = {1} \\/ x = <<1>>\n"
                      "Next == UNCHANGED x", NOLOCK)
    r = check_model(spec)
    assert (r.generated_states, r.distinct_states) == (8, 4)


def test_parallel_level_finds_the_same_violation(tmp_path):
    """3,000 initial states (a parallel level); x = 4500 is reached in one step from x = 1500:
    both modes report Inv violated with a 2-state trace ending in x = 4500."""
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x \\in 0..2999\nNext == x < 3000 /\\ x' = x + 3000\n"
                      "Inv == x # 4500", NOLOCK + "INVARIANT Inv\n")
    for workers in (1, 2):
        r = check_model(spec, workers=workers)
        assert r.outcome is Outcome.SAFETY and r.violation.name == "Inv"
        assert [s.values["x"] for s in r.violation.trace] == [1500, 4500]


def test_parallel_level_reports_evaluation_errors(tmp_path):
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x \\in 0..2999\nNext == x' = [i \\in 0..2998 |-> i][x]",
                      NOLOCK)
    r = check_model(spec, workers=2)
    assert r.exit_code == 75 and "outside its domain" in r.violation.message
    assert [s.values["x"] for s in r.violation.trace] == [2999]


def test_parameterized_instance(tmp_path):
    """C(v, m) == INSTANCE Counter WITH c <- v, Max <- m; a counts to 2 and b to 1 independently:
    states (a, b) in 0..2 x 0..1 = 6 distinct; successors [a<2] + [b<1] summed = 4 + 3 = 7; gen 8."""
    counter = """\
        ---- MODULE Counter ----
        EXTENDS Naturals
        CONSTANT Max
        VARIABLE c
        Inc == c < Max /\\ c' = c + 1
        ====
        """
    body = ("VARIABLES a, b\nC(v, m) == INSTANCE Counter WITH c <- v, Max <- m\nInit == a = 0 /\\ b = 0\n"
            "Next == (C(a, 2)!Inc /\\ UNCHANGED b) \\/ (C(b, 1)!Inc /\\ UNCHANGED a)")
    r = check_model(write_spec(tmp_path, body, NOLOCK, extra={"Counter.tla": counter}))
    assert (r.outcome, r.generated_states, r.distinct_states) == (Outcome.SUCCESS, 8, 6)
