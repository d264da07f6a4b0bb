"""PROPERTY models of the tla-examples corpus (tlaplus/Examples with TLC's recorded results): the
small ones, checked with the embedded engine, give TLC's result and, for successes, TLC's distinct
and generated counts. The whole list (70 models, some of them minutes long) runs in the gate check
``checker-properties``; docs/results/checker-corpus.md lists every model's result."""

from __future__ import annotations

from kvexact.spec.checker.corpus import run_corpus

# Liveness under WF/SF, leads-to, []<>, <>[], refinement through INSTANCE (with fairness), a lasso
# that TLC reports (MCRealTimeHourClock) and a safety failure found before the temporal check.
QUICK = ["SpecifyingSystems__Liveness__LiveHourClock", "SpecifyingSystems__RealTime__MCRealTimeHourClock",
         "SpecifyingSystems__HourClock__HourClock2", "ewd840__EWD840", "ewd840__SyncTerminationDetection",
         "chang_roberts__MCChangRoberts", "DiningPhilosophers__DiningPhilosophers", "Prisoners__Prisoners",
         "Prisoners_Single_Switch__PrisonerLightUnknown", "Prisoners_Single_Switch__PrisonerSolo",
         "glowingRaccoon__clean", "glowingRaccoon__stages", "glowingRaccoon__product", "barriers__Barrier",
         "Moving_Cat_Puzzle__CatEvenBoxes", "N-Queens__QueensPluscal.toolbox__FourQueens__MC",
         "SpecifyingSystems__TLC__MCAlternatingBit"]


def test_small_property_models_give_tlcs_result(examples_root):
    rows = run_corpus(examples_root, only=QUICK)
    assert len(rows) == len(QUICK)
    assert all(r.expected["has_property"] for r in rows)
    assert [f"{r.id}: {r.why}" for r in rows if not r.ok] == []
    lasso = next(r for r in rows if r.id == "SpecifyingSystems__RealTime__MCRealTimeHourClock").result
    assert lasso.exit_code == 13 and lasso.violation.kind == "temporal" and lasso.violation.loop is not None


# Models that disagreed with TLC in earlier corpus runs: SDP_Attack_Spec's actions nest more than
# Python's 20 blocks (the code generator's fallback), the other two evaluate ENABLED inside an action
# or a property. Each must now give TLC's result (and counts, for the successes).
FORMER_DISAGREEMENTS = ["MultiCarElevator__ElevatorSafetySmall", "SDP_Verification__SDP_Attack_Spec__MC",
                        "YoYo__MCYoYoPruning"]  # in corpus.json's order


def test_former_disagreements_give_tlcs_result(examples_root):
    rows = run_corpus(examples_root, only=FORMER_DISAGREEMENTS)
    assert [r.id for r in rows] == FORMER_DISAGREEMENTS
    assert [f"{r.id}: {r.why}" for r in rows if not r.ok] == []
    assert [r.result_word for r in rows] == ["success", "safety failure", "success"]
