"""Fairness reached through an instance (``S!Fair``, or the whole ``S!Spec``) in a SPECIFICATION: TLC reads
it as the spec's temporal part. Found on the public FiniteMonotonic MCCRDTGCounter model (``Spec == ... /\\
S!Fairness``), which the embedded engine refused ("fairness cannot be evaluated on states") and TLC checked
(585,401 generated, 50,000 distinct). Expected counts are TLC's, from runs of TLC (-workers 1) on these files."""

from __future__ import annotations

import subprocess

from kvexact.spec.checker.engine import check_model
from kvexact.spec.checker.result import Outcome
from kvexact.spec.tlc import java_executable, parse_tool_output

INNER = """---- MODULE Inner ----
EXTENDS Naturals
CONSTANT N
VARIABLE x
Inc(i) == x' = (x + i) % 3
Fair == \\A i \\in 1..N : WF_x(Inc(i))
ISpec == x = 0 /\\ [][\\E i \\in 1..N : Inc(i)]_x /\\ Fair
====
"""

# S!Fair as a conjunct: with WF on Inc(1) and Inc(2), the cycle 1 -> 2 -> 1 avoids 0 forever.
FAIR_CONJUNCT = """---- MODULE M ----
EXTENDS Naturals
VARIABLE x
S == INSTANCE Inner WITH N <- 2
Next == \\E i \\in 1..2 : S!Inc(i)
Spec == x = 0 /\\ [][Next]_x /\\ S!Fair
Live == []<>(x = 0)
====
"""

# The whole specification from the instance: Inc(1) alone cycles 0 -> 1 -> 2 -> 0 under WF.
WHOLE_SPEC = """---- MODULE M ----
EXTENDS Naturals
VARIABLE x
S == INSTANCE Inner WITH N <- 1
Spec == S!ISpec
Live == []<>(x = 0)
====
"""


def _model(tmp_path, text: str):
    (tmp_path / "Inner.tla").write_text(INNER)
    (tmp_path / "M.tla").write_text(text)
    (tmp_path / "M.cfg").write_text("SPECIFICATION Spec\nPROPERTY Live\n")
    return tmp_path / "M.tla"


def test_instance_fairness_conjunct_is_the_specs_fairness(tmp_path):
    res = check_model(_model(tmp_path, FAIR_CONJUNCT))
    assert res.outcome is Outcome.LIVENESS and res.violation.loop is not None
    assert (res.generated_states, res.distinct_states) == (7, 3)


def test_instance_specification_is_split_into_init_next_and_fairness(tmp_path):
    res = check_model(_model(tmp_path, WHOLE_SPEC))
    assert res.outcome is Outcome.SUCCESS
    assert (res.generated_states, res.distinct_states, res.depth) == (4, 3, 3)


def test_instance_fairness_agrees_with_tlc(tmp_path, tlc_jar):
    for i, text in enumerate([FAIR_CONJUNCT, WHOLE_SPEC]):
        d = tmp_path / str(i)
        d.mkdir()
        spec = _model(d, text)
        done = subprocess.run([java_executable(), "-cp", tlc_jar, "tlc2.TLC", "-tool", "-workers", "1",
                               "-metadir", str(d / "meta"), "-noTE", "-nowarning", "M.tla"],
                              cwd=d, capture_output=True, text=True, timeout=300)
        tlc, embedded = parse_tool_output(done.stdout, done.returncode), check_model(spec)
        assert tlc.outcome is embedded.outcome
        assert (tlc.generated_states, tlc.distinct_states) == (embedded.generated_states, embedded.distinct_states)
