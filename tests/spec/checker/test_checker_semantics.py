"""SANY-level semantic errors the embedded front end refuses as SANY does (verdicts read from SANY on
these modules): a name used before its definition, self-reference without RECURSIVE, a name defined
twice in a module or a LET, an operator applied to the wrong number of arguments, an undefined name.
Each is a parse-class error (exit 150) naming file, line and column."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kvexact.cli.check import check
from kvexact.spec.checker.errors import ArityError, UndefinedError
from kvexact.spec.checker.frontend import front_end_error
from kvexact.spec.checker.sany import sany_verdicts
from kvexact.spec.checker.semantics import SemanticError

# (body, the error class the embedded front end raises, or None where SANY accepts the module)
CASES = {
    "uses_later": ("G == H\nH == 1", SemanticError),
    "self_reference": ("F == F + 1", SemanticError),
    "recursive_undeclared": ("F(n) == IF n = 0 THEN 0 ELSE F(n - 1)", SemanticError),
    "recursive_declared": ("RECURSIVE F(_)\nF(n) == IF n = 0 THEN 0 ELSE F(n - 1)", None),
    "recursive_function": ("f[n \\in Nat] == IF n = 0 THEN 0 ELSE f[n - 1]", None),
    "constant_later": ("G == N + 1\nCONSTANT N", SemanticError),
    "defined_twice": ("F == 1\nF == 2", SemanticError),
    "let_twice": ("G == LET a == 1\n         a == 2 IN a", SemanticError),
    "arity": ("F(a) == a + 1\nG == F(1, 2)", ArityError),
    "arity_missing": ("F(a) == a + 1\nG == F", ArityError),
    "undefined": ("G == H + 1", UndefinedError),
    "bound_name_reused_later": ("G == \\E H \\in {1} : H = 1\nH == 2", None),
    "variable_twice": ("VARIABLE y\nVARIABLE y", None),
    "higher_order": ("F(Op(_), x) == Op(x)\nG == F(LAMBDA a : a + 1, 2)", None),
    # a name bound again inside the scope of the same name (SANY: multiply-defined symbol)
    "exists_in_forall": ("S == {1}\nA == \\A g \\in S : \\E g \\in S : g = 1", SemanticError),
    "bound_of_its_own_name": ("S == {1}\nA == \\E x \\in {x \\in S : TRUE} : x = 1", None),
    "let_name_then_bound": ("S == {1}\nA == LET a == 1 IN \\E a \\in S : TRUE", SemanticError),
    "bound_then_let_name": ("S == {1}\nA == \\E x \\in S : LET x == 1 IN x = 1", SemanticError),
    "function_in_exists": ("S == {1}\nA == \\E x \\in S : [x \\in S |-> x] = [y \\in S |-> y]", SemanticError),
    "map_in_exists": ("S == {1}\nA == \\E x \\in S : {x : x \\in S} = S", SemanticError),
    "let_parameter_then_bound": ("S == {1}\nA == LET F(a) == a IN \\A a \\in S : F(a) > 0", None),
    "twice_in_one_list": ("S == {1}\nA == \\E x \\in S, x \\in S : TRUE", SemanticError),
    "function_parameter_rebound": ("S == {1}\nf[x \\in S] == \\E x \\in S : TRUE", SemanticError),
    "siblings": ("S == {1}\nA == (\\E x \\in S : TRUE) /\\ (\\E x \\in S : TRUE)", None),
    "choose_in_exists": ("S == {1}\nA == \\E x \\in S : CHOOSE x \\in S : TRUE", SemanticError),
    "let_parameter_in_exists": ("S == {1}\nA == \\E x \\in S : LET G(x) == x IN G(1) = 1", SemanticError),
    "tuple_in_exists": ("S == {1}\nA == \\E x \\in S : \\E <<x, y>> \\in S \\X S : TRUE", SemanticError),
    "lambda_in_exists": ("F(Op(_)) == Op(1)\nA == \\E x \\in {1} : F(LAMBDA x : x)", SemanticError),
}


def _write(folder, name: str, body: str):
    path = folder / f"{name}.tla"
    path.write_text(f"---- MODULE {name} ----\nEXTENDS Naturals\n{body}\n====\n")
    return path


@pytest.mark.parametrize("case", sorted(CASES))
def test_front_end_verdict(tmp_path, case):
    body, expected = CASES[case]
    err = front_end_error(_write(tmp_path, "M", body))
    if expected is None:
        assert err is None
    else:
        assert type(err) is expected and err.outcome == "parse"
        assert err.location.startswith(str(tmp_path / "M.tla") + ":")


def test_use_before_definition_exits_150_with_the_place(tmp_path):
    spec = _write(tmp_path, "M", "VARIABLE x\nInit == x = Start\nStart == 0\nNext == x' = x")
    (tmp_path / "M.cfg").write_text("INIT Init\nNEXT Next\n")
    res = CliRunner().invoke(check, [str(spec), "--engine", "embedded"], standalone_mode=False)
    assert res.return_value == 150
    assert "M.tla:4:13: Init uses Start, defined later (line 5)" in res.output


def test_a_rebinding_is_reported_where_sany_reports_it(tmp_path, tla2tools_jar):
    """The line and column of a multiply-defined bound name are SANY's."""
    cases = [c for c, (body, e) in CASES.items() if e is SemanticError and "\\E" in body and c != "uses_later"]
    files = {c: _write(tmp_path / c, "M", CASES[c][0]) for c in cases if (tmp_path / c).mkdir() is None}
    verdicts = sany_verdicts(list(files.values()), tla2tools_jar)
    for case, path in files.items():
        ours = front_end_error(path)
        assert ours is not None and "multiply-defined symbol" in str(ours), case
        line, col = ours.location.rsplit(":", 2)[1:]
        assert f"line {line}, col {col} " in verdicts[path].text, (case, verdicts[path].text, ours)


def test_cases_agree_with_sany(tmp_path, tla2tools_jar):
    files = {case: _write(tmp_path / case, "M", body) for case, (body, _) in CASES.items()
             if (tmp_path / case).mkdir() is None}
    verdicts = sany_verdicts(list(files.values()), tla2tools_jar)
    assert {c: verdicts[f].accepted for c, f in files.items()} == {c: e is None for c, (_, e) in CASES.items()}
