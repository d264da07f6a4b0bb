"""A standard module's operator is defined only where its module is EXTENDed or INSTANCEd, as SANY has it:
``1..2`` needs Naturals (or Integers), the prefix minus ``-1`` and ``Int`` need Integers, ``Len`` needs
Sequences. Sequences, FiniteSets, TLC and Bags take Naturals in by LOCAL INSTANCE, so their users do not see
``..``. The embedded front end used to know every standard operator everywhere, so a module SANY rejects ran.
The verdicts below are SANY's on the same modules (the last test asks SANY)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kvexact.cli.check import check
from kvexact.spec.checker.errors import UndefinedError
from kvexact.spec.checker.frontend import front_end_error
from kvexact.spec.checker.sany import sany_verdicts

# (EXTENDS list, expression, does SANY accept the module?)
CASES = {
    "range_with_naturals": ("Naturals", "1..2", True),
    "range_with_sequences_only": ("Sequences", "1..2", False),
    "range_with_tlc_only": ("TLC", "1..2", False),
    "range_with_finitesets_only": ("FiniteSets", "1..2", False),
    "range_with_bags_only": ("Bags", "1..2", False),
    "range_without_extends": ("", "1..2", False),
    "prefix_minus_with_naturals": ("Naturals", "-1", False),
    "prefix_minus_with_integers": ("Integers", "-1", True),
    "binary_minus_with_naturals": ("Naturals", "3 - 1", True),
    "int_with_naturals": ("Naturals", "Int", False),
    "nat_with_integers": ("Integers", "Nat", True),
    "len_with_naturals": ("Naturals", "Len(<<>>)", False),
    "len_with_sequences": ("Sequences", "Len(<<>>)", True),
    "cardinality_without_finitesets": ("Naturals", "Cardinality({1})", False),
    "language_operators_without_extends": ("", "(SUBSET {1}) \\cup (UNION {{2}} \\ {3})", True),
    "operator_argument_without_module": ("Naturals", "LET F(Op(_)) == Op(<<1>>) IN F(Len)", False),
    "operator_argument_with_module": ("Sequences", "LET F(Op(_)) == Op(<<1>>) IN F(Len)", True),
}


def _write(folder, case: str):
    extends, expr, _ = CASES[case]
    folder.mkdir(exist_ok=True)
    head = f"EXTENDS {extends}\n" if extends else ""
    path = folder / "M.tla"
    path.write_text(f"---- MODULE M ----\n{head}VARIABLE x\nInit == x = 0\nNext == x' = x /\\ ({expr}) = ({expr})\n"
                    "====\n")
    (folder / "M.cfg").write_text("INIT Init\nNEXT Next\n")
    return path


@pytest.mark.parametrize("case", sorted(CASES))
def test_front_end_verdict(tmp_path, case):
    err = front_end_error(_write(tmp_path, case))
    if CASES[case][2]:
        assert err is None
    else:
        assert type(err) is UndefinedError and err.outcome == "parse"
        assert "neither EXTENDS nor INSTANCEs" in str(err)


def test_an_undefined_standard_operator_exits_150_naming_its_module(tmp_path):
    spec = _write(tmp_path, "len_with_naturals")
    res = CliRunner().invoke(check, [str(spec), "--engine", "embedded"], standalone_mode=False)
    assert res.return_value == 150
    assert "M.tla:5:" in res.output
    assert "undefined operator Len: it is defined in the standard module Sequences" in res.output


def test_an_instance_of_the_module_defines_its_operators(tmp_path):
    (tmp_path / "M.tla").write_text("---- MODULE M ----\nINSTANCE Sequences\nVARIABLE x\nInit == x = Len(<<1>>)\n"
                                    "Next == x' = x\n====\n")
    assert front_end_error(tmp_path / "M.tla") is None


def test_cases_agree_with_sany(tmp_path, tla2tools_jar):
    files = {case: _write(tmp_path / case, case) for case in CASES}
    verdicts = sany_verdicts(list(files.values()), tla2tools_jar)
    assert {c: verdicts[f].accepted for c, f in files.items()} == {c: accepted for c, (_, _, accepted) in CASES.items()}
