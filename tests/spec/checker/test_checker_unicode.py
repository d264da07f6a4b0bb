"""TLA+'s Unicode spellings (``≜ ∀ ∈ ⟨⟩ ∧`` ...): the embedded front end reads each as the ASCII operator
SANY reads it as, keeps bullet alignment, leaves strings alone, rejects what SANY rejects, and a Unicode
spec checks exactly as its ASCII spelling (and, with TLC, as TLC checks it)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kvexact.cli.check import check
from kvexact.spec.checker.errors import ParseError
from kvexact.spec.checker.frontend import front_end_error
from kvexact.spec.checker.sany import sany_verdicts
from kvexact.spec.checker.unicode import SYNONYMS, to_ascii

# user-definable infix operators (defined in the module before use); the others are built in
_DEFINABLE = {"\\o", "\\oplus", "\\ominus", "\\otimes", "\\oslash", "\\odot", "\\uplus", "\\sqcap", "\\sqcup",
              "\\sqsubset", "\\sqsubseteq", "\\sqsupset", "\\sqsupseteq", "\\prec", "\\succ", "\\preceq",
              "\\succeq", "\\sim", "\\simeq", "\\approx", "\\cong", "\\asymp", "\\doteq", "\\ll", "\\gg",
              "\\propto", "\\star", "\\bullet", "\\bigcirc", "\\wr", "|-", "-|", "|=", "=|", ":=", "::=", "||",
              "!!", "??", "\\subset", "\\supset", "\\supseteq"}


def _use(sym: str) -> str:
    """Definitions that use ``sym`` where TLA+ allows its operator."""
    ascii_ = SYNONYMS[sym]
    if ascii_ in _DEFINABLE:
        return f"a {sym} b == a\nX == 1 {sym} 2\n"
    special = {
        "==": f"X {sym} 1\n", "\\A": f"X == {sym} v \\in {{1}} : v = 1\n",
        "\\E": f"X == {sym} v \\in {{1}} : v = 1\n", "<<": f"X == {sym}1, 2>>\n", ">>": f"X == <<1, 2{sym}\n",
        "|->": f"X == [v {sym} 1]\n", "->": f"X == [{{1}} {sym} {{2}}]\n", "~": f"X == {sym}TRUE\n",
        "[]": f"X == {sym}(x = 1)\n", "<>": f"X == {sym}(x = 1)\n", "~>": f"X == (x = 1) {sym} (x = 2)\n",
        "-+->": f"X == (x = 1) {sym} (x = 2)\n", "^+": f"a^+ == a\nX == 1{sym}\n",
        "\\in": f"X == 1 {sym} {{2}}\n", "\\notin": f"X == 1 {sym} {{2}}\n", "\\cdot": f"X == (x' = x) {sym} (x' = x)\n",
        "<-": "I == INSTANCE Inner WITH c \N{LEFTWARDS ARROW} 3\nX == I!Val\n",
        "...": f"a ... b == a\nX == 1 {sym} 2\n",
    }
    if ascii_ in special:
        return special[ascii_]
    if ascii_ in ("/\\", "\\/", "=>", "<=>", "\\equiv"):
        return f"X == TRUE {sym} FALSE\n"
    if ascii_ in ("\\subseteq", "\\cap", "\\cup", "\\X"):
        return f"X == {{1}} {sym} {{2}}\n"
    return f"X == 1 {sym} 2\n"


def _module(name: str, body: str) -> str:
    return f"---- MODULE {name} ----\nEXTENDS Integers\nVARIABLE x\n{body}====\n"


INNER = "---- MODULE Inner ----\nCONSTANT c\nVal == c\n====\n"
# symbols SANY does not read as synonyms: each must be rejected
NOT_SYNONYMS = {"naturals": "X == \N{DOUBLE-STRUCK CAPITAL N}\n", "top": "X == \N{DOWN TACK}\n",
                "double_forall": "X == \N{FOR ALL}\N{FOR ALL} v : v = x\n"}
ALIGNED = """P \N{DELTA EQUAL TO} \N{LOGICAL OR} \N{LOGICAL AND} FALSE
      \N{LOGICAL AND} TRUE
    \N{LOGICAL OR} TRUE
Q == \\/ /\\ FALSE
      /\\ TRUE
   \N{LOGICAL OR} TRUE
"""


def _probe_files(tmp_path):
    (tmp_path / "Inner.tla").write_text(INNER)
    files = {}
    for i, sym in enumerate(SYNONYMS):
        path = tmp_path / f"U{i}.tla"
        path.write_text(_module(f"U{i}", _use(sym)))
        files[path] = sym
    for name, body in NOT_SYNONYMS.items():
        path = tmp_path / f"N_{name}.tla"
        path.write_text(_module(f"N_{name}", body))
        files[path] = name
    path = tmp_path / "Aligned.tla"
    path.write_text(_module("Aligned", ALIGNED))
    files[path] = "alignment"
    return files


def test_every_synonym_is_accepted_and_the_others_rejected(tmp_path):
    files = _probe_files(tmp_path)
    verdicts = {files[p]: front_end_error(p) for p in files}
    assert [s for s in SYNONYMS if verdicts[s] is not None] == []
    assert [n for n in NOT_SYNONYMS if verdicts[n] is None] == []
    assert verdicts["alignment"] is None


def test_front_end_agrees_with_sany_on_unicode(tmp_path, tla2tools_jar):
    files = _probe_files(tmp_path)
    sany = sany_verdicts(list(files), tla2tools_jar)
    wrong = [f"{files[p]}: SANY {sany[p].first_error() or 'accepts'}; embedded {front_end_error(p) or 'accepts'}"
             for p in files if (front_end_error(p) is None) != sany[p].accepted]
    assert wrong == []
    assert sum(not sany[p].accepted for p in files) == len(NOT_SYNONYMS)


def test_strings_and_comments_keep_their_symbols():
    text = 'S \N{DELTA EQUAL TO} "a \N{ELEMENT OF} b" (* \N{FOR ALL} *) \\* \N{LOGICAL AND}\n'
    out = to_ascii(text).text
    assert out.startswith("S ==")
    assert '"a \N{ELEMENT OF} b"' in out and "(* \N{FOR ALL} *)" in out and "\\* \N{LOGICAL AND}" in out


def test_bullets_stay_aligned_when_a_symbol_widens_a_line():
    text = "A \N{DELTA EQUAL TO} \N{LOGICAL AND} x\n    \N{LOGICAL AND} y\n    /\\ z\n"
    lines = to_ascii(text).text.split("\n")
    assert lines[0].index("/\\") == lines[1].index("/\\") == lines[2].index("/\\")


SPEC = """---- MODULE Uni ----
EXTENDS Naturals
VARIABLES x, y
vars \N{DELTA EQUAL TO} \N{MATHEMATICAL LEFT ANGLE BRACKET}x, y\N{MATHEMATICAL RIGHT ANGLE BRACKET}
Init \N{DELTA EQUAL TO} \N{LOGICAL AND} x = 0
       \N{LOGICAL AND} y \N{ELEMENT OF} {0, 1}
Inc \N{DELTA EQUAL TO} \N{LOGICAL AND} x < 3
      \N{LOGICAL AND} x' = x + 1
      \N{LOGICAL AND} UNCHANGED y
Flip \N{DELTA EQUAL TO} \N{LOGICAL AND} \N{THERE EXISTS} v \N{ELEMENT OF} {0, 1} : v \N{NOT EQUAL TO} y \N{LOGICAL AND} y' = v
       \N{LOGICAL AND} x' = x
Next \N{DELTA EQUAL TO} Inc \N{LOGICAL OR} Flip
Spec \N{DELTA EQUAL TO} Init \N{LOGICAL AND} \N{WHITE SQUARE}[Next]_vars \N{LOGICAL AND} WF_vars(Inc)
TypeOK \N{DELTA EQUAL TO} \N{FOR ALL} v \N{ELEMENT OF} {x} : v \N{ELEMENT OF} 0\N{TWO DOT LEADER}3 \N{LOGICAL AND} \N{NOT SIGN}(y \N{NOT AN ELEMENT OF} {0, 1})
Small \N{DELTA EQUAL TO} x \N{LESS-THAN OR EQUAL TO} 2
Live \N{DELTA EQUAL TO} \N{WHITE DIAMOND}(x = 3)
====
"""
CFG = "SPECIFICATION Spec\nINVARIANT TypeOK\nPROPERTY Live\n"


def _check(tmp_path, name, text, cfg, *extra):
    (tmp_path / f"{name}.tla").write_text(text.replace("MODULE Uni", f"MODULE {name}"))
    (tmp_path / f"{name}.cfg").write_text(cfg)
    res = CliRunner().invoke(check, [str(tmp_path / f"{name}.tla"), "--json", str(tmp_path / f"{name}.json"),
                                     *extra], standalone_mode=False)
    import json
    return res.return_value, json.loads((tmp_path / f"{name}.json").read_text()), res.output


def _ascii(text: str) -> str:
    for sym, rep in SYNONYMS.items():
        text = text.replace(sym, rep if not rep[-1].isalpha() else rep + " ")
    return text


@pytest.mark.parametrize("cfg, code", [(CFG, 0), (CFG.replace("TypeOK", "Small"), 12)])
def test_unicode_spec_checks_as_its_ascii_spelling(tmp_path, cfg, code):
    rc_u, uni, _ = _check(tmp_path, "UniU", SPEC, cfg, "--engine", "embedded")
    rc_a, asc, _ = _check(tmp_path, "UniA", _ascii(SPEC), cfg, "--engine", "embedded")
    assert "\N{DELTA EQUAL TO}" not in _ascii(SPEC)
    assert rc_u == rc_a == code
    keys = ("result", "distinct_states", "generated_states", "depth")
    assert {k: uni[k] for k in keys} == {k: asc[k] for k in keys}
    assert uni["distinct_states"] > 1


def test_unicode_spec_agrees_with_tlc(tmp_path, tlc_jar):
    rc, _, output = _check(tmp_path, "UniT", SPEC, CFG, "--engine", "both", "--tlc-jar", tlc_jar)
    assert rc == 0, output


def test_syntax_error_column_is_the_column_as_written(tmp_path):
    text = _module("Err", "X \N{DELTA EQUAL TO} \N{FOR ALL} v \N{ELEMENT OF} {1} : v = = 1\n")
    path = tmp_path / "Err.tla"
    path.write_text(text)
    err = front_end_error(path)
    assert isinstance(err, ParseError)
    line = text.split("\n")[3]
    assert err.location.endswith(f":4:{line.rindex('=') + 1}"), err.location
