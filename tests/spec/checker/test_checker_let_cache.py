"""A LET definition without arguments that reads the state (compiler._let_last) is evaluated once per
state object and values of the names bound around it, and shared by all its uses: a LET operator that
reads it, each conjunct of an action. Values are worked out by hand; ``Count`` is a Python operator that
records each call, so a test sees how often the LET body ran."""

from __future__ import annotations

from pathlib import Path

from tla_snippets import NOLOCK, write_spec

from kvexact.spec.checker import check_model
from kvexact.spec.checker.compiler import Compiler
from kvexact.spec.checker.result import Outcome


def compiled(expr: str, defs: str = ""):
    """The compiled function of ``expr`` (over the variables v and w) and the list of Count's calls."""
    calls: list = []

    def count(x):
        calls.append(x)
        return x
    comp = Compiler(Path("."), {"Count": count})
    text = (f"---- MODULE Expr ----\nEXTENDS Naturals, FiniteSets\nCONSTANTS Count(_)\nVARIABLES v, w\n{defs}\n"
            f"Value__ == {expr}\n====\n")
    root = comp.load_root(Path("<expr>"), text)
    b = root.lookup("Value__")
    assert b is not None
    fn, _ = comp.def_fn(b[1])
    return fn, calls


def test_a_let_read_by_a_let_operator_runs_once_per_state():
    fn, calls = compiled("LET base == Count(v * 10)\n    f(a) == base + a\nIN <<f(1), f(2), f(3), base>>")
    assert fn({"v": 2, "w": 0}, None, {}) == (21, 22, 23, 20)
    assert calls == [20]


def test_each_state_gets_its_own_value():
    fn, calls = compiled("LET base == Count(v * 10)\n    f(a) == base + a\nIN <<f(1), f(2)>>")
    assert fn({"v": 1, "w": 0}, None, {}) == (11, 12)
    assert fn({"v": 3, "w": 0}, None, {}) == (31, 32)
    assert fn({"v": 1, "w": 0}, None, {}) == (11, 12)  # an equal state in a new object: evaluated again
    assert calls == [10, 30, 10]


def test_a_let_under_a_binder_depends_on_the_bound_value():
    # one state, two (three) bindings of x: the LET's value must follow x, not the first binding
    fn, calls = compiled("{x \\in 1..3 : LET d == Count(v + x)\n    g(a) == d * a\nIN g(1) + g(2) > 6}")
    assert fn({"v": 1, "w": 0}, None, {}) == frozenset({2, 3})  # d = 2, 3, 4: 3d > 6 for x = 2, 3
    assert calls == [2, 3, 4]


def test_a_let_under_two_binders_follows_both():
    fn, calls = compiled("{<<x, y>> \\in (1..2) \\X (1..2) : LET d == Count(w + 10 * x + y)\n"
                         "    g(a) == d + a\nIN g(0) = g(1) - 1 /\\ d > 22}")
    assert fn({"v": 0, "w": 1}, None, {}) == frozenset({(2, 2)})  # d = w + 10x + y = 12, 13, 22, 23
    assert calls == [12, 13, 22, 23]


def test_a_let_inside_an_operator_called_with_two_arguments():
    defs = "Op(z) == LET d == Count(v + z)\n    g(a) == d - a\nIN g(0) + g(1)"
    fn, calls = compiled("<<Op(1), Op(2), Op(1)>>", defs)
    assert fn({"v": 5, "w": 0}, None, {}) == (11, 13, 11)
    assert sorted(set(calls)) == [6, 7]


def test_an_action_with_a_state_reading_let_used_in_several_conjuncts(tmp_path):
    # DropRefs-like: nc is a LET that reads the state and the action's parameter i; freed(b) reads it for
    # every b. From c = <<2, 1>> each step drops one reference; a block left at 0 gets z[b] = 0.
    body = """
    VARIABLES c, z
    Drop(i) ==
        LET nc == [j \\in 1..2 |-> IF j = i THEN c[j] - 1 ELSE c[j]]
            freed(b) == nc[b] = 0
        IN /\\ c[i] > 0
           /\\ c' = nc
           /\\ z' = [b \\in 1..2 |-> IF freed(b) THEN 0 ELSE z[b]]
    Init == c = <<2, 1>> /\\ z = <<7, 8>>
    Next == \\E i \\in 1..2 : Drop(i)
    Inv == \\A b \\in 1..2 : (c[b] = 0) <=> (z[b] = 0)
    """
    spec = write_spec(tmp_path, body, NOLOCK + "INVARIANT Inv\n")
    r = check_model(spec, spec.with_suffix(".cfg"), coverage=False)
    assert r.outcome == Outcome.SUCCESS
    # states: c in {<<2,1>>, <<1,1>>, <<2,0>>, <<1,0>>, <<0,1>>, <<0,0>>}, z determined by c
    assert r.distinct_states == 6
    # successors: <<2,1>>: 2; <<1,1>>: 2; <<2,0>>: 1; <<1,0>>: 1; <<0,1>>: 1; <<0,0>>: 0; plus 1 initial
    assert r.generated_states == 8


def test_an_action_forall_guard_over_a_conjunction(tmp_path):
    # the \A reads no primed variable: a guard. d may be chosen when every g in 1..2 has g + d > 2 and
    # g * d # 4: d = 2 fails (2 * 2 = 4), d = 1 fails (1 + 1 = 2), d = 3 holds: x goes 0 -> 3 only
    body = """
    VARIABLES x
    Init == x = 0
    Next == \\E d \\in 1..3 : /\\ \\A g \\in 1..2 : /\\ g + d > 2
                                                 /\\ g * d # 4
                               /\\ x' = d
    """
    spec = write_spec(tmp_path, body, NOLOCK)
    r = check_model(spec, spec.with_suffix(".cfg"), coverage=False)
    assert r.outcome == Outcome.SUCCESS
    assert (r.distinct_states, r.generated_states) == (2, 3)  # {0, 3}; 0 -> 3, 3 -> 3


def test_an_action_forall_guard_with_a_non_boolean_body_reports_the_conjunct(tmp_path):
    body = """
    VARIABLES x
    Init == x = 0
    Next == /\\ \\A g \\in 1..2 : /\\ g > 0
                                /\\ IF g = 2 THEN 7 ELSE TRUE
            /\\ x' = 1
    """
    spec = write_spec(tmp_path, body, NOLOCK)
    r = check_model(spec, spec.with_suffix(".cfg"), coverage=False)
    assert r.outcome == Outcome.EVALUATION
    assert r.violation is not None and "non-boolean value 7" in r.violation.message


def state_level(defs: str):
    """The function of ``Value__ == W`` (W a state-level definition in ``defs``, over VARIABLES a, b),
    compiled with the variables each definition reads known, as a model compiles it; and Count's calls."""
    from kvexact.spec.checker.reads import state_reads
    calls: list = []

    def count(x):
        calls.append(x)
        return x
    comp = Compiler(Path("."), {"Count": count})
    comp.state_reads = state_reads
    text = (f"---- MODULE Expr ----\nEXTENDS Naturals, Sequences\nCONSTANTS Count(_)\nVARIABLES a, b\n{defs}\n"
            "Value__ == W\n====\n")
    root = comp.load_root(Path("<expr>"), text)
    b = root.lookup("Value__")
    assert b is not None
    fn, _ = comp.def_fn(b[1])
    return fn, calls


def test_a_state_level_definition_is_shared_by_states_that_agree_on_what_it_reads():
    fn, calls = state_level("W == Count(Len(a)) + 1")
    assert fn({"a": (1, 2), "b": 0}, None, {}) == 3
    assert fn({"a": (1, 2), "b": 7}, None, {}) == 3  # another state, an equal a (another object): shared
    assert fn({"a": (1, 2, 3), "b": 7}, None, {}) == 4
    assert calls == [2, 3]


def test_the_memo_by_value_tells_true_from_one():
    fn, calls = state_level("W == Count(<<a>>)")
    assert fn({"a": 1, "b": 0}, None, {}) == (1,)
    v = fn({"a": True, "b": 0}, None, {})  # Python holds True == 1: the memo must not
    assert v == (True,) and type(v[0]) is bool
    assert len(calls) == 2


def test_a_definition_that_reads_every_variable_is_evaluated_per_state():
    fn, calls = state_level("W == Count(a + b)")
    assert fn({"a": 1, "b": 2}, None, {}) == 3
    assert fn({"a": 1, "b": 2}, None, {}) == 3
    assert calls == [3, 3]
