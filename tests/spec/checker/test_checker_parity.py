"""TLC parity on specs the checker was not tuned on (issue 16): each case reproduces one disagreement in a
few lines, with the value or count TLC gives (derived by hand in the comment)."""

from __future__ import annotations

import json
import textwrap

import pytest
from tla_snippets import NOLOCK

from kvexact.spec.checker import check_model, evaluate
from kvexact.spec.checker.result import Outcome


def write_spec(folder, body: str, cfg: str, extra: dict | None = None, extends: str = "Naturals, FiniteSets"):
    """M.tla (EXTENDS ``extends`` and the body) with M.cfg, and extra files beside them."""
    spec = folder / "M.tla"
    spec.write_text(f"---- MODULE M ----\nEXTENDS {extends}\n{body}\n====\n")
    (folder / "M.cfg").write_text(cfg)
    for name, text in (extra or {}).items():
        (folder / name).write_text(text)
    return spec


def test_library_dir_and_env_variable(tmp_path, monkeypatch):
    """A module found only in a library folder: --lib (here lib=) or KVEXACT_TLA_LIB."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "Helpers.tla").write_text("---- MODULE Helpers ----\nTwice(n) == 2 * n\n====\n")
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    spec = write_spec(spec_dir, "VARIABLE x\nInit == x = Twice(3)\nNext == UNCHANGED x\n"
                      "Inv == x = 6", NOLOCK + "INVARIANT Inv\n", extends="Naturals, Helpers")
    r = check_model(spec)
    assert r.outcome is Outcome.PARSE and "module Helpers not found" in r.violation.message
    assert check_model(spec, lib=[lib]).outcome is Outcome.SUCCESS
    monkeypatch.setenv("KVEXACT_TLA_LIB", str(lib))
    assert check_model(spec).outcome is Outcome.SUCCESS


def test_proof_modules_load_and_are_ignored(tmp_path):
    """TLAPS and *Theorems modules on no path: loaded empty with a warning (their content is proofs)."""
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == UNCHANGED x\nTHEOREM Init => x = 0\n  BY SMT",
                      NOLOCK, extends="Naturals, TLAPS, FiniteSetTheorems")
    r = check_model(spec)
    assert r.outcome is Outcome.SUCCESS and r.distinct_states == 1
    assert any("TLAPS" in m and "proofs only" in m for m in r.messages)


@pytest.mark.parametrize("expr,value", [
    ("SumSet({1, 2, 3})", 6),
    ("Max({3, 1, 2}) + Min({3, 1, 2})", 4),
    ("FoldLeft(LAMBDA acc, x : acc * 10 + x, 0, <<1, 2, 3>>)", 123),
    ("FoldRight(LAMBDA x, acc : acc * 10 + x, <<1, 2, 3>>, 0)", 321),
    ("FoldSet(LAMBDA x, acc : acc * 10 + x, 0, {1, 2, 3})", 321),  # x1 = 1 is applied last
    ("MapThenFoldSet(LAMBDA x, y : x \\o y, <<>>, LAMBDA x : <<x>>, LAMBDA S : CHOOSE x \\in S : TRUE, {3, 1, 2})",
     (1, 2, 3)),
    ("Range([a |-> 1, b |-> 2])", frozenset({1, 2})),
    ("IsPrefix(<<1, 2>>, <<1, 2, 3>>) /\\ ~IsPrefix(<<2>>, <<1, 2>>)", True),
    ("Front(<<>>)", ()),  # SubSeq(s, 1, 0 - 1) is the empty sequence
    ("RemoveAt(<<1, 2, 3>>, 2)", (1, 3)),
    ("<<1, 2>> \\in BoundedSeq(Nat, 2) /\\ <<1, 2, 3>> \\notin BoundedSeq(Nat, 2)", True),
    ("Cardinality(kSubset(2, 1..4))", 6),
    ("AntiFunction(<<\"a\", \"b\">>)[\"b\"]", 2),
    ("FoldFunction(LAMBDA x, acc : acc \\o <<x>>, <<>>, <<1, 2, 3>>)", (3, 2, 1)),
])
def test_community_operators(expr, value):
    assert evaluate(expr, extends="Naturals, Sequences, FiniteSets, TLC, Functions, SequencesExt, "
                                  "FiniteSetsExt, Folds") == value


@pytest.mark.parametrize("expr,value", [
    ("12 & 10", 8), ("12 | 3", 15), ("12 ^^ 10", 6), ("Not(5)", 2), ("shiftR(12, 2)", 3),
])
def test_bitwise(expr, value):
    assert evaluate(expr, extends="Naturals, Bitwise") == value


@pytest.mark.parametrize("expr", [
    "AssertEq(1 + 1, 2)",
    "TLCModelValue(\"a\") = TLCModelValue(\"a\") /\\ TLCModelValue(\"a\") # TLCModelValue(\"b\")",
    "LET R == RandomSubset(2, 1..5) IN Cardinality(R) = 2 /\\ R \\subseteq 1..5",
    "RandomElement({3}) = 3",
    "LET T == RandomSetOfSubsets(3, 2, 1..4) IN T \\subseteq SUBSET (1..4) /\\ Cardinality(T) <= 3",
])
def test_tlc_modules_without_a_library(expr):
    """TLCExt and Randomization are TLC's own: found on no path (random results checked by their bounds)."""
    assert evaluate(expr, extends="Naturals, FiniteSets, TLC, TLCExt, Randomization") is True


def test_graphs():
    g = "[node |-> {1, 2, 3}, edge |-> {<<1, 2>>, <<2, 3>>}]"
    assert evaluate(f"AreConnectedIn(1, 3, {g}) /\\ ~AreConnectedIn(3, 1, {g})", extends="Graphs") is True
    assert evaluate(f"IsTreeWithRoot({g}, 3)", extends="Graphs") is True
    ug = "[node |-> {1, 2, 3, 4}, edge |-> {{1, 2}, {2, 3}}]"
    assert evaluate(f"ConnectedComponents({ug})", extends="UndirectedGraphs") == frozenset(
        {frozenset({1, 2, 3}), frozenset({4})})


def test_native_operator_replaces_a_library_definition(tmp_path):
    """A library module named like a CommunityModule keeps its other definitions, evaluated from TLA+;
    operators implemented natively replace their definitions (as TLC's overrides do)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "Functions.tla").write_text("---- MODULE Functions ----\nEXTENDS Naturals\nRange(f) == {42}\n"
                                       "Twice(n) == 2 * n\n====\n")
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = Twice(Cardinality(Range(<<1, 2>>)))\n"
                      "Next == UNCHANGED x\nInv == x = 4", NOLOCK + "INVARIANT Inv\n",
                      extends="FiniteSets, Functions")
    assert check_model(spec, lib=[lib]).outcome is Outcome.SUCCESS


def test_second_module_in_the_file(tmp_path):
    """Modules after the first ==== (and modules nested inside one) are found by name."""
    spec = tmp_path / "M.tla"
    spec.write_text(textwrap.dedent("""\
        ---- MODULE M ----
        EXTENDS Naturals, Common
        ---- MODULE Inner ----
        Three == 3
        ====
        I == INSTANCE Inner
        VARIABLE x
        Init == x = One + I!Three
        Next == UNCHANGED x
        Inv == x = 4
        ====
        ---- MODULE Common ----
        One == 1
        ====
        """))
    (tmp_path / "M.cfg").write_text(NOLOCK + "INVARIANT Inv\n")
    assert check_model(spec).outcome is Outcome.SUCCESS


def test_instance_with_uses_cfg_constants(tmp_path):
    """I == INSTANCE Inner WITH y <- e, with e built from a cfg constant: the constant has its value."""
    spec = write_spec(tmp_path, "CONSTANT S\nVARIABLE x\nI == INSTANCE Inner WITH Y <- S \\cup {9}\n"
                      "Init == x = I!Size\nNext == UNCHANGED x\nInv == x = 3",
                      NOLOCK + "INVARIANT Inv\nCONSTANT S = {1, 2}\n",
                      extra={"Inner.tla": "---- MODULE Inner ----\nEXTENDS FiniteSets\nCONSTANT Y\n"
                                          "Size == Cardinality(Y)\n====\n"})
    assert check_model(spec).outcome is Outcome.SUCCESS


def test_cfg_constant_leaves_an_instanced_definition_of_the_same_name(tmp_path):
    """The cfg's Node = {...} assigns the root's CONSTANT Node; the INSTANCEd module's own definition
    Node == 0..2 keeps its body, also in a substitution compiled while the modules load (EWD998ChanID
    instances EWD998Chan, which instances EWD998 WITH a token built from its Node)."""
    spec = write_spec(tmp_path, "CONSTANT Node\nVARIABLE x\nI == INSTANCE Inner\n"
                      "Init == x = I!J!Count\nNext == UNCHANGED x\nInv == x = 3 /\\ Cardinality(Node) = 2",
                      NOLOCK + "INVARIANT Inv\nCONSTANT Node = {a, b}\n",
                      extra={"Inner.tla": "---- MODULE Inner ----\nEXTENDS Naturals\n"
                                          "Node == 0..2\nJ == INSTANCE Inner2 WITH Z <- Node\n====\n",
                             "Inner2.tla": "---- MODULE Inner2 ----\nEXTENDS FiniteSets\nCONSTANT Z\n"
                                           "Count == Cardinality(Z)\n====\n"})
    assert check_model(spec).outcome is Outcome.SUCCESS


def test_cfg_module_scoped_value(tmp_path):
    """C = [M] v replaces the definition C of module M (here an unbounded CHOOSE TLC cannot evaluate)."""
    spec = write_spec(tmp_path, "CONSTANT NH\nVARIABLE x\nN == INSTANCE Nano\nInit == x = N!NoHash\n"
                      "Next == UNCHANGED x\nInv == x = NH", NOLOCK + "INVARIANT Inv\nCONSTANTS\n  NH = nh\n"
                      "  NoHash = [Nano] nh\n",
                      extra={"Nano.tla": "---- MODULE Nano ----\nNoHash == CHOOSE h : h \\notin {1}\n====\n"})
    r = check_model(spec)
    assert r.outcome is Outcome.SUCCESS, r.violation


def test_cfg_assignment_to_an_undeclared_name_warns(tmp_path):
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == UNCHANGED x",
                      NOLOCK + "CONSTANTS\n  r1 = r1\n")
    r = check_model(spec)
    assert r.outcome is Outcome.SUCCESS and r.distinct_states == 1
    assert any("M.cfg:5:3: the cfg assigns r1" in m and "ignored" in m for m in r.messages)


def test_constant_only_spec_checks_assumptions(tmp_path):
    """No variables, no INIT/NEXT: TLC evaluates the ASSUMEs and reports 0 states."""
    body = "CONSTANT N\nASSUME N * 2 = 6"
    r = check_model(write_spec(tmp_path, body, "CONSTANT N = 3\n"))
    assert (r.outcome, r.generated_states, r.distinct_states) == (Outcome.SUCCESS, 0, 0)
    assert check_model(write_spec(tmp_path, body, "CONSTANT N = 4\n")).outcome is Outcome.ASSUMPTION


def test_evaluation_error_names_the_extended_module(tmp_path):
    """The error is at line 2 of Lib.tla (which M extends), not line 2 of M.tla."""
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = Bad\nNext == UNCHANGED x", NOLOCK,
                      extra={"Lib.tla": "---- MODULE Lib ----\nBad == <<1>>[2]\n====\n"}, extends="Lib")
    r = check_model(spec)
    assert r.outcome is Outcome.EVALUATION
    assert f"{tmp_path / 'Lib.tla'}:2:" in r.violation.message, r.violation.message


def test_tabs_are_columns(tmp_path):
    spec = write_spec(tmp_path, "VARIABLE x\nInit ==\t/\\ x = 0\n\t/\\ TRUE\nNext == UNCHANGED x", NOLOCK)
    assert check_model(spec).distinct_states == 1


def test_json_report_carries_the_process_exit_code(tmp_path):
    from click.testing import CliRunner

    from kvexact.cli.check import check
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == x' = x + 1", NOLOCK)
    out = tmp_path / "r.json"
    res = CliRunner().invoke(check, [str(spec), "--max-states", "5", "--json", str(out)], standalone_mode=False)
    assert res.return_value == 3
    d = json.loads(out.read_text())
    assert d["result"] == "incomplete" and d["exit_code"] == 3


# ----------------------------------------------------------------------------- precedence (SANY's table)

@pytest.mark.parametrize("expr,value", [
    ("UNION {{1}} \\cup {2}", frozenset({1, 2})),  # (UNION {{1}}) \cup {2}
    ("Cardinality(SUBSET {1} \\cup {2})", 3),  # {{}, {1}} \cup {2}
    ("Cardinality(SUBSET {1} \\cup {2} \\cup {3})", 4),
    ("DOMAIN <<5, 6>> \\cup {7}", frozenset({1, 2, 7})),
    ("SUBSET {1} \\ {{}} = {{1}}", True),
    ("~ 1 = 2", True),  # ~(1 = 2)
    ("- 2 ^ 2", -4),  # -(2^2)
    ("2 - 1 - 1", 0),  # left-associative
])
def test_prefix_precedence(expr, value):
    assert evaluate(expr) == value


def _grouping(node):
    """The operator tree as nested tuples (leaves: names)."""
    kind = type(node).__name__
    if kind == "Parentheses":
        return _grouping(node.expression)
    if kind == "OperatorApplication" and node.arguments:
        return (node.operator, *[_grouping(a) for a in node.arguments])
    if kind == "OperatorApplication":
        return node.operator
    return kind


def _body(text: str):
    from kvexact.spec.checker.compiler import parse_file_text
    tree = parse_file_text(f"---- MODULE P ----\nE == {text}\n====\n", "P.tla")[0]
    return _grouping(tree.units[0].definiens)


def test_whole_precedence_table_against_sany():
    """For every pair of operators whose SANY ranges do not overlap, the tighter one groups first:
    infix with infix (a O1 b O2 c, both orders) and prefix with infix (P a O b)."""
    from kvexact.spec.checker.syntax import INFIX, PREFIX
    skip = {"-+->", "\\cdot", ":=", "::=", "|-", "-|", "|=", "=|", "\\X", "\\times", "~>"}  # not parsed as infix
    infix = [op for op in INFIX if op not in skip]
    bad = []
    for o1 in infix:
        for o2 in infix:
            (l1, h1), (l2, h2) = INFIX[o1], INFIX[o2]
            if h1 < l2:  # o2 binds tighter: a o1 (b o2 c)
                want = (o1, "a", (o2, "b", "c"))
            elif h2 < l1:
                want = (o2, (o1, "a", "b"), "c")
            else:
                continue
            try:
                got = _body(f"a {o1} b {o2} c")
            except Exception as exc:  # noqa: BLE001 - report, don't stop
                got = repr(exc)
            if _norm(got) != _norm(want):
                bad.append((o1, o2, got))
    for p, (pl, ph) in PREFIX.items():
        if p in ("[]", "<>", "\\lnot", "\\neg"):
            continue
        for o in infix:
            lo, ho = INFIX[o]
            if ho < pl:
                want = (o, (p, "a"), "b")
            elif ph < lo:
                want = (p, (o, "a", "b"))
            else:
                continue
            got = _body(f"{p} a {o} b")
            if _norm(got) != _norm(want):
                bad.append((p, o, got))
    assert not bad, bad[:20]


def _norm(t):
    from kvexact.spec.checker.compiler import ALIASES
    if isinstance(t, tuple):
        return (ALIASES.get(t[0], t[0]), *[_norm(x) for x in t[1:]])
    return t


# ----------------------------------------------------------------------------- syntax errors in TLA+ terms

@pytest.mark.parametrize("body,where,words", [
    ("Init == x = (1 + 2\nNext == x' = 1", ":4:13", "'(' opened at line 4, column 13 is never closed"),
    ("Init == IF x = 0 THEN x = 1\nNext == x' = 1", ":4:", "IF ... THEN without ELSE"),
    ("Init == x = = 1\nNext == x' = 1", ":4:13", "an operand is missing"),
    ("Init == x = 0 /\\\nNext == x' = 1", ":4:15", "no right operand"),
])
def test_syntax_errors_read_as_tla(tmp_path, body, where, words):
    r = check_model(write_spec(tmp_path, "VARIABLE x\n" + body, NOLOCK))
    assert r.outcome is Outcome.PARSE and r.exit_code == 150
    msg = r.violation.message
    assert where in msg and words in msg, msg
    assert "DEF_SIG" not in msg and "EQ_LINE" not in msg


# ----------------------------------------------------------------------------- assignment through names

@pytest.mark.parametrize("defs,init,nxt", [
    # x cycles 0 -> 1 -> 2 -> 0: 3 distinct, 1 + 3 generated
    ("Snd(old, new) == new = (old + 1) % 3", "x = 0", "Snd(x, x')"),
    ("", "x = 0", "LET n == x' IN n = (x + 1) % 3"),
    ("XInit(v) == v = 0", "XInit(x)", "x' = (x + 1) % 3"),
    ("Step(v, w) == w \\in {(v + 1) % 3}", "x = 0", "Step(x, x')"),
    # an action passed as an argument (LockHS's NoStutter(NoHistoryChange(l0(self)))): laid out, not evaluated
    ("Guard(A) == x \\in 0..2 /\\ A\nKeep(A) == A /\\ TRUE\nInc(i) == x' = (x + i) % 3", "x = 0",
     "\\E i \\in {1} : Guard(Keep(Inc(i)))"),
])
def test_primed_assignment_through_parameters_and_let(tmp_path, defs, init, nxt):
    spec = write_spec(tmp_path, f"VARIABLE x\n{defs}\nInit == {init}\nNext == {nxt}", NOLOCK)
    r = check_model(spec)
    assert (r.outcome, r.distinct_states, r.generated_states) == (Outcome.SUCCESS, 3, 4), r.violation


# ----------------------------------------------------------------------------- infinite sets

@pytest.mark.parametrize("expr", [
    "-5 \\in Int \\union {-5} /\\ 7 \\in Int \\union {-5} /\\ \"a\" \\notin Int \\union {-5}",
    "[i \\in {0} |-> -5] \\in [{0} -> Int \\union {-5}]",
    "[i \\in {0} |-> 3] \\in UNION {[{0} -> Int]} /\\ [i \\in {1} |-> 3] \\notin UNION {[{0} -> Int]}",
    "4 \\in {n \\in Nat : n % 2 = 0} /\\ 3 \\notin {n \\in Nat : n % 2 = 0}",
    "<<1, -2>> \\in Seq(Nat \\cup {-2}) /\\ 2 \\in Nat \\cap Int /\\ [a |-> -1] \\in [a : Int]",
    "<<>> \\notin [Nat -> Nat] /\\ {1, 2} \\in SUBSET (Nat \\ {0})",
])
def test_membership_in_infinite_sets(expr):
    assert evaluate(expr, extends="Integers, Sequences") is True


def test_enumerating_an_infinite_set_is_an_evaluation_error(tmp_path):
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x \\in Nat \\cup {-1}\nNext == UNCHANGED x", NOLOCK,
                      extends="Integers")
    r = check_model(spec)
    assert r.outcome is Outcome.EVALUATION and "cannot enumerate" in r.violation.message


def test_instance_substitution_uses_an_override_defined_later(tmp_path):
    """C <- MCC where MCC is defined after the EXTENDS that instantiates with C (DieHardest's shape)."""
    spec = write_spec(tmp_path, "VARIABLE x\nMCC == {1, 2, 3}\nInit == x = I!Size\nNext == UNCHANGED x\n"
                      "Inv == x = 3", NOLOCK + "INVARIANT Inv\nCONSTANT C <- MCC\n",
                      extends="Naturals, Base",
                      extra={"Base.tla": "---- MODULE Base ----\nCONSTANT C\nI == INSTANCE Inner WITH Y <- C\n====\n",
                             "Inner.tla": "---- MODULE Inner ----\nEXTENDS FiniteSets\nCONSTANT Y\n"
                                          "Size == Cardinality(Y)\n====\n"})
    r = check_model(spec)
    assert r.outcome is Outcome.SUCCESS, r.violation


# ----------------------------------------------------------------------------- more of TLC's semantics

def test_assumptions_of_instantiated_modules_are_not_checked(tmp_path):
    """TLC checks the ASSUMEs of the root module and those it extends; an instantiated module's ASSUME
    (here one TLC could not even evaluate) is a theorem about the instance."""
    spec = write_spec(tmp_path, "VARIABLE x\nI == INSTANCE Inner\nInit == x = I!One\nNext == UNCHANGED x", NOLOCK,
                      extra={"Inner.tla": "---- MODULE Inner ----\nASSUME \\A y : y = y\nOne == 1\n====\n"})
    assert check_model(spec).outcome is Outcome.SUCCESS


def test_named_assumption_is_a_definition(tmp_path):
    spec = write_spec(tmp_path, "CONSTANT N\nASSUME Big == N > 2\nVARIABLE x\nInit == x = Big\nNext == UNCHANGED x\n"
                      "Inv == x", NOLOCK + "INVARIANT Inv\nCONSTANT N = 3\n")
    assert check_model(spec).outcome is Outcome.SUCCESS


def test_positional_subexpression(tmp_path):
    """Inv!2 is the second conjunct of Inv."""
    spec = write_spec(tmp_path, "VARIABLE x\nInv == /\\ x = 0\n       /\\ x < 5\nInit == x = 0\n"
                      "Next == x' = x + 1 /\\ Inv!2", NOLOCK + "INVARIANT Inv\n")
    r = check_model(spec)
    assert r.outcome is Outcome.SAFETY and r.violation.name == "Inv" and len(r.violation.trace) == 2


def test_instance_with_operator_substitution(tmp_path):
    """CONSTANT Leader(_) given by INSTANCE ... WITH Leader <- L (a definition) or a LAMBDA."""
    inner = "---- MODULE Inner ----\nEXTENDS Naturals\nCONSTANT Leader(_)\nTwice(r) == Leader(r) + Leader(r)\n====\n"
    spec = write_spec(tmp_path, "VARIABLE x\nL(r) == r * 10\nI == INSTANCE Inner WITH Leader <- L\n"
                      "J == INSTANCE Inner WITH Leader <- LAMBDA r : r + 1\nInit == x = I!Twice(2) + J!Twice(2)\n"
                      "Next == UNCHANGED x\nInv == x = 46", NOLOCK + "INVARIANT Inv\n", extra={"Inner.tla": inner})
    r = check_model(spec)
    assert r.outcome is Outcome.SUCCESS, r.violation


def test_let_instance_and_recursive_function_over_nat():
    assert evaluate("LET I == INSTANCE Naturals IN 2 + 3") == 5
    assert evaluate("LET f[n \\in Nat, b \\in BOOLEAN] == IF n = 0 THEN 1 ELSE 2 * f[n - 1, b] IN f[5, TRUE]") == 32


def test_tlc_level_and_registers(tmp_path):
    """TLCGet("level") is the level of the state being evaluated (initial states: 1)."""
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == x < 3 /\\ x' = x + 1\n"
                      "Inv == TLCGet(\"level\") = x + 1 /\\ TLCSet(1, x) /\\ TLCGet(1) = x", NOLOCK + "INVARIANT Inv\n",
                      extends="Naturals, TLC")
    r = check_model(spec)
    assert r.outcome is Outcome.SUCCESS and r.distinct_states == 4, r.violation


def test_integer_in_boolean_is_not_true():
    """Python's 1 == True must not make 1 \\in BOOLEAN true (TLC cannot compare them: an error)."""
    from kvexact.spec.checker.values import EvalError
    assert evaluate("TRUE \\in BOOLEAN /\\ 2 \\notin {0, 1} /\\ 1 \\in {0, 1}") is True
    with pytest.raises(EvalError, match="compare"):
        evaluate("1 \\in BOOLEAN")
    with pytest.raises(EvalError, match="compare"):
        evaluate("FALSE \\in {0, 2}")


def test_symmetry_counts_orbits(tmp_path):
    """Three symmetric counters in 0..2: 27 states, 10 orbits (multisets). Each orbit's explored state has
    as many successors as counters below 2: 3+3+2+3+2+1+3+2+1+0 = 20, plus the initial state."""
    body = ("CONSTANT P\nVARIABLE cnt\nInit == cnt = [p \\in P |-> 0]\n"
            "Next == \\E p \\in P : cnt[p] < 2 /\\ cnt' = [cnt EXCEPT ![p] = @ + 1]\nSym == Permutations(P)")
    cfg = NOLOCK + "CONSTANT P = {a, b, c}\n"
    plain = check_model(write_spec(tmp_path, body, cfg, extends="Naturals, TLC"))
    assert (plain.distinct_states, plain.generated_states) == (27, 1 + 3 * 9 + 2 * 9 + 1 * 9 - 0)
    sym = check_model(write_spec(tmp_path, body, cfg + "SYMMETRY Sym\n", extends="Naturals, TLC"))
    assert (sym.outcome, sym.distinct_states, sym.generated_states, sym.depth) == (Outcome.SUCCESS, 10, 21, 7)


def test_named_theorem_and_tlc_config(tmp_path):
    """LEMMA Name == e is a definition; TLCGet("config") describes this run (breadth-first, one worker)."""
    spec = write_spec(tmp_path, "LEMMA Small == \\A n \\in 1..3 : n < 4\n"
                      "ASSUME TLCGet(\"config\").mode = \"bfs\" /\\ TLCGet(\"config\").worker = 1\n"
                      "VARIABLE x\nInit == x = Small\nNext == UNCHANGED x\nInv == x", NOLOCK + "INVARIANT Inv\n",
                      extends="Naturals, TLC")
    assert check_model(spec).outcome is Outcome.SUCCESS


def test_bags_module():
    b = "BagOfAll(LAMBDA x : x % 2, SetToBag({1, 2, 3}))"
    assert evaluate(f"{b}[1] = 2 /\\ {b}[0] = 1 /\\ DOMAIN {b} = {{0, 1}}", extends="Naturals, Bags") is True
    assert evaluate("Cardinality(SubBag(SetToBag({1, 2})))", extends="Naturals, Bags, FiniteSets") == 4


def test_deeply_nested_binders_compile_once_per_level(tmp_path, monkeypatch):
    """24 nested \\E (an SDP_Verification shape): each level's body is compiled once, not once per path
    (the generated code and the closures share the binders' scope), and Python's limit of 20 nested
    blocks in generated code falls back to the closures."""
    from kvexact.spec.checker import codegen
    calls = []
    real = codegen.FastGen.code

    def counted(self, node, scope):
        calls.append(1)
        assert len(calls) < 2000, "the generated code recompiles nested bodies"  # fail fast, never hang
        return real(self, node, scope)
    monkeypatch.setattr(codegen.FastGen, "code", counted)
    nest = "".join(f"\\E a{i} \\in {{0}} : " for i in range(24))
    spec = write_spec(tmp_path, f"VARIABLE x\nInit == x = 0\nNext == {nest}x' = 1 - x\n"
                      f"Inv == {nest.replace('E', 'A')}x \\in {{0, 1}}", NOLOCK + "INVARIANT Inv\n")
    r = check_model(spec)
    assert (r.outcome, r.distinct_states, r.generated_states) == (Outcome.SUCCESS, 2, 3), r.violation


def test_symmetry_24_permutations_with_memo_starting_over(tmp_path, monkeypatch):
    """Four symmetric bits and a set of the processes whose bit is set: 16 states, 5 orbits (how many bits
    are set). Most states are fixed by some permutations (tied candidates); the memo starts over at every state."""
    from kvexact.spec.checker import symmetry
    monkeypatch.setattr(symmetry, "_MEMO_LIMIT", 0)
    body = ("CONSTANT P\nVARIABLES b, on\nInit == b = [p \\in P |-> 0] /\\ on = {}\n"
            "Next == \\E p \\in P : b[p] = 0 /\\ b' = [b EXCEPT ![p] = 1] /\\ on' = on \\cup {p}\n"
            "Sym == Permutations(P)")
    cfg = NOLOCK + "CONSTANT P = {a, b, c, d}\n"
    plain = check_model(write_spec(tmp_path, body, cfg, extends="Naturals, TLC"))
    assert (plain.distinct_states, plain.generated_states) == (16, 1 + 4 + 12 + 12 + 4)
    sym = check_model(write_spec(tmp_path, body, cfg + "SYMMETRY Sym\n", extends="Naturals, TLC"))
    assert (sym.distinct_states, sym.generated_states, sym.depth) == (5, 1 + 4 + 3 + 2 + 1, 5)


def test_random_element_in_a_constant_definition_is_drawn_once(tmp_path):
    """TLC evaluates a zero-arity constant definition once, at startup (SpecProcessor's constant
    definitions), so `E == RandomElement(...)` has one value for the whole run: one state."""
    spec = write_spec(tmp_path, "VARIABLE x\nE == RandomElement(1..1000)\nInit == x = E\nNext == x' = E", NOLOCK,
                      extends="Naturals, TLC")
    r = check_model(spec)
    assert r.outcome is Outcome.SUCCESS and (r.distinct_states, r.generated_states) == (1, 2)


def test_a_recursive_function_over_constants_is_a_constant(tmp_path):
    """`f[i \\in S] == ... f[i-1] ...` reads only constants: its self-reference is the function being
    defined, not a state, so the definition is a constant (evaluated once, as TLC does at startup;
    EWD998ChanID's nat2node re-ran a CHOOSE over [Node -> Node] on every use). A LET inside the body
    that reads f (IsSimpleCycle's `seq == F[i-1]`) still evaluates."""
    from kvexact.spec.checker.model import load_model
    spec = write_spec(tmp_path, "f[i \\in 0..3] == IF i = 0 THEN 1 ELSE 2 * f[i-1]\n"
                      "Last(S) == LET F[i \\in 1..Cardinality(S)] == IF i = 1 THEN <<0>>\n"
                      "                 ELSE LET seq == F[i-1] IN <<Head(seq) + 1>> \\o seq\n"
                      "           IN F[Cardinality(S)]\n"
                      "VARIABLE x\nInit == x = f[3]\nNext == UNCHANGED x\nInv == Last({7, 8, 9}) = <<2, 1, 0>>",
                      NOLOCK + "INVARIANT Inv\n", extends="Naturals, Sequences, FiniteSets")
    m = load_model(spec)
    b = m.comp.resolve("f", m.comp.root)
    fn, deps = m.comp.def_fn(b[1])
    assert deps == frozenset()
    r = check_model(spec)
    assert (r.outcome, r.distinct_states) == (Outcome.SUCCESS, 1), r.violation
    assert m.comp.def_fn(m.comp.resolve("Last", m.comp.root)[1])[1] == frozenset({"S"})  # no state read
