"""A cfg naming an identifier the module does not declare, decided as TLC decides (read from TLC runs on
these very files): `C = v` for an undeclared C is ignored (TLC: exit 0, 3 states; here a warning), while
`C <- Def` is refused (TLC: exit 151, "the identifier C does not appear in the specification")."""

from __future__ import annotations

import pytest

from kvexact.spec.checker.cfg import ConfigError
from kvexact.spec.checker.engine import check_model
from kvexact.spec.checker.model import load_model
from kvexact.spec.checker.result import Outcome
from kvexact.spec.tlc import run_tlc

SPEC = """---- MODULE U ----
EXTENDS Naturals
CONSTANT N
VARIABLE x
Init == x = 0
Next == x < N /\\ x' = x + 1
D == 3
====
"""
REST = "INIT Init\nNEXT Next\nCHECK_DEADLOCK FALSE\n"  # after `CONSTANT N = 2` and the case's line
CASES = {"assign": ("CONSTANT Missing = 5\n", Outcome.SUCCESS), "override": ("Missing <- D\n", Outcome.CONFIG),
         "constant-override": ("CONSTANT Missing <- D\n", Outcome.CONFIG)}


def _write(tmp_path, extra: str):
    (tmp_path / "U.tla").write_text(SPEC)
    (tmp_path / "U.cfg").write_text("CONSTANT N = 2\n" + extra + REST)
    return tmp_path / "U.tla"


def test_undeclared_assignment_is_ignored_with_a_warning(tmp_path):
    res = check_model(_write(tmp_path, CASES["assign"][0]))
    assert res.outcome is Outcome.SUCCESS and (res.generated_states, res.distinct_states) == (3, 3)
    assert any("the cfg assigns Missing" in m and "ignored" in m for m in res.messages)


@pytest.mark.parametrize("case", ["override", "constant-override"])
def test_undeclared_override_is_a_config_error(tmp_path, case):
    spec = _write(tmp_path, CASES[case][0])
    with pytest.raises(ConfigError, match="Missing <- D: the identifier Missing does not appear in the specification"):
        load_model(spec)
    assert check_model(spec).outcome is Outcome.CONFIG  # exit 151


@pytest.mark.tlc
@pytest.mark.parametrize("case", sorted(CASES))
def test_both_engines_decide_alike(tmp_path, case, tla2tools_jar):
    spec = _write(tmp_path, CASES[case][0])
    tlc = run_tlc(spec, None, str(tla2tools_jar))
    ours = check_model(spec)
    assert tlc.outcome is ours.outcome is CASES[case][1]
