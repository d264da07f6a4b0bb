"""Classes the generated-spec campaign found, each pinned with TLC's counts read from a TLC run on the
same model (`-workers 1`): the embedded engine's statistics at a violation or error must be TLC's."""

from __future__ import annotations

from kvexact.spec.checker.engine import check_model
from kvexact.spec.checker.result import Outcome

HEAD = "---- MODULE G ----\nEXTENDS Naturals, Sequences, FiniteSets, TLC\nCONSTANT P\n"


def _run(tmp_path, body: str, cfg: str):
    (tmp_path / "G.tla").write_text(HEAD + body + "\n====\n")
    (tmp_path / "G.cfg").write_text(cfg)
    return check_model(tmp_path / "G.tla")


def test_violation_stops_counting_at_the_violating_successor(tmp_path):
    """Two successors of the initial state both violate Inv: TLC stops at the first (2 generated, 2
    distinct), not after generating both (3)."""
    res = _run(tmp_path, "VARIABLES g, s\nInit == g = [p \\in P |-> 0] /\\ s = {1}\n"
                         "Next == \\E p \\in P : g' = [g EXCEPT ![p] = 1 - @] /\\ s' = {v + 1 : v \\in s}\n"
                         "Inv == 1 \\in s", "CONSTANT P = {p1, p2}\nINIT Init\nNEXT Next\nINVARIANT Inv\n")
    assert res.outcome is Outcome.SAFETY and (res.generated_states, res.distinct_states) == (2, 2)


def test_evaluation_error_keeps_the_successors_of_earlier_actions(tmp_path):
    """A0 and A1 complete before A2 fails: TLC counts their successors (4 generated, 3 distinct, depth 2)."""
    res = _run(tmp_path, "VARIABLES b, s\nOops == CHOOSE v \\in {} : TRUE\nInit == b \\in BOOLEAN /\\ s = {1}\n"
                         "A0 == s' = s \\ {1} /\\ UNCHANGED b\nA1 == UNCHANGED <<b, s>>\n"
                         "A2 == b' = ~b /\\ s' = s /\\ Oops = 1\nNext == A0 \\/ A1 \\/ A2",
               "CONSTANT P = {p1}\nINIT Init\nNEXT Next\n")
    assert res.outcome is Outcome.EVALUATION and "CHOOSE" in res.violation.message
    assert (res.generated_states, res.distinct_states, res.depth) == (4, 3, 2)
