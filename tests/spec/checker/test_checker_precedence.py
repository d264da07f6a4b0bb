"""The embedded front end refuses what SANY refuses: operators whose precedence ranges overlap, written
without parentheses (TLA+'s operator table), with file, line, column and both operators named; `kvexact
check` exits 150 as TLC does. The verdicts below were read from SANY (tla2tools.jar); the differential
tests compare with SANY itself where the jar is present."""

from __future__ import annotations

import pytest
import tla
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvexact.cli.check import check
from kvexact.spec.checker.compiler import parse_file_text
from kvexact.spec.checker.errors import ParseError
from kvexact.spec.checker.sany import sany_verdicts
from kvexact.spec.checker.syntax import PrecedenceConflict, check_precedence, regroup

# (expression, the pair SANY names, or None where SANY accepts it)
SANY_SAYS = [
    ("a % b + 1", ("%", "+")), ("(a % b) + 1", None), ("a + b * c", None), ("a \\/ b /\\ c", ("\\/", "/\\")),
    ("a = b = c", ("=", "=")), ("a - b + c", None), ("a + b - c", None), ("SUBSET a + b", ("SUBSET", "+")),
    ("-a + b", None), ("~a = b", None), ("[]P = Q", ("[]", "=")), ("a \\cup b \\union c", None),
    ("a \\cup b \\cap c", ("\\cup", "\\cap")), ("a \\X b \\X c", None), ("a * b / c", ("*", "/")),
    ("a / b / c", ("/", "/")), ("a .. b + 1", None), ("a => b => c", ("=>", "=>")), ("a^b^c", ("^", "^")),
    ("a^-b", ("^", "-")), ("a * -b", ("*", "-")), ("a + -b", None), ("a \\div b * c", ("\\div", "*")),
    ("a \\cup UNION b \\cup UNION c", None), ("SUBSET a \\X b", ("SUBSET", "\\X")), ("a % b % c", ("%", "%")),
    ("a %% b %% c", None), ("a || b + c", ("||", "+")), ("a \\cdot b + c", ("\\cdot", "+")),
    ("a \\in b \\in c", ("\\in", "\\in")), ("a # b = c", ("#", "=")), ("UNCHANGED x = y", ("UNCHANGED", "=")),
    ("ENABLED A \\/ B", None), ("a \\ b \\cup c", ("\\", "\\cup")), ("a :> b @@ c", None),
    ("a @@ b @@ c", None), ("a :> b :> c", (":>", ":>")), ("<>[]P => Q", None), ("a + - b * c", None),
]


def _conflict(expr: str) -> tuple[str, str] | None:
    try:
        check_precedence(regroup(tla.parse_expr(expr)))
    except PrecedenceConflict as exc:
        return exc.left, exc.right
    return None


@pytest.mark.parametrize(("expr", "expected"), SANY_SAYS)
def test_precedence_table_as_sany(expr, expected):
    assert _conflict(expr) == expected


def test_conflict_in_a_file_is_a_parse_error_at_the_operator(tmp_path):
    text = "---- MODULE M ----\nEXTENDS Naturals\nVARIABLE x\nInit == x = 0\nNext == x' = x % 3 + 1\n====\n"
    with pytest.raises(ParseError) as info:
        parse_file_text(text, str(tmp_path / "M.tla"))
    assert info.value.location.endswith("M.tla:5:20")
    assert "precedence conflict between % and +" in info.value.message
    assert info.value.outcome == "parse"


def test_check_exits_150_on_a_precedence_conflict(tmp_path):
    (tmp_path / "M.tla").write_text("---- MODULE M ----\nEXTENDS Naturals\nVARIABLE x\nInit == x = 0\n"
                                    "Next == x' = (x - 1) % 3 + 1\n====\n")
    (tmp_path / "M.cfg").write_text("INIT Init\nNEXT Next\n")
    res = CliRunner().invoke(check, [str(tmp_path / "M.tla"), "--engine", "embedded"], standalone_mode=False)
    assert res.return_value == 150
    assert "M.tla:5:26: precedence conflict between % and +" in res.output


# ----------------------------------------------------------------------------- differential with SANY

ATOMS = ["a", "b", "c", "(a)", "f[a]", "{a}"]
INFIXES = ["+", "-", "*", "/", "%", "^", "..", "=", "#", "<", "\\leq", "\\in", "\\subseteq", "\\cup", "\\cap",
           "\\", "\\X", "/\\", "\\/", "=>", "<=>", "~>", "\\o", "\\div", "@@", ":>", "\\cdot", "%%", "++", "||",
           "&", "**", "\\union", "#", "-+->"]
PREFIXES = ["~", "-", "SUBSET ", "UNION ", "DOMAIN ", "[]", "<>", "ENABLED ", "UNCHANGED "]


@st.composite
def _expressions(draw) -> str:
    """Flat operator chains (atoms, infix and prefix operators, an occasional parenthesised group)."""
    parts = []
    for i in range(draw(st.integers(2, 4))):
        if i:
            parts.append(f" {draw(st.sampled_from(INFIXES))} ")
        if draw(st.integers(0, 3)) == 0:
            parts.append(draw(st.sampled_from(PREFIXES)))
        parts.append(draw(st.sampled_from(ATOMS)))
    text = "".join(parts)
    if draw(st.booleans()):
        cut = draw(st.integers(0, max(0, len(parts) - 3)))
        if cut % 2 == 0 and cut + 3 <= len(parts):
            text = "".join(parts[:cut]) + "(" + "".join(parts[cut:cut + 3]) + ")" + "".join(parts[cut + 3:])
    return text


def _module(i: int, expr: str) -> str:
    return f"---- MODULE E{i} ----\nCONSTANTS a, b, c, f\nVARIABLE x\nOp == {expr}\n====\n"


def test_generated_expressions_agree_with_sany(tmp_path, tla2tools_jar):
    """SANY and the embedded parser on 150 generated operator chains: a precedence verdict each, equal."""
    exprs: list[str] = []

    @settings(max_examples=150, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(_expressions())
    def collect(expr):
        exprs.append(expr)

    collect()
    files, ours = [], {}
    for i, expr in enumerate(exprs):
        path = tmp_path / f"E{i}.tla"
        path.write_text(_module(i, expr))
        files.append(path)
        try:
            parse_file_text(path.read_text(), str(path))
            ours[path] = False
        except ParseError:
            ours[path] = True
    verdicts = sany_verdicts(files, tla2tools_jar)
    rejected = [p for p in files if verdicts[p].parse_error]
    assert 10 < len(rejected) < len(files) - 10  # the sample holds both kinds
    wrong = [(exprs[i], verdicts[p].first_error()) for i, p in enumerate(files)
             if (verdicts[p].parse_error) != ours[p]]
    assert wrong == []
