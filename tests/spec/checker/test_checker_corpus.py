"""The whole TLA+ corpus, once: TLC's result for every model and, for successes, exactly TLC's distinct
and generated counts (depth is only reported). Slow: 30-130 s on the shared 2-core machine, most of it GameOfLife."""

from __future__ import annotations

import pytest

from kvexact.spec.checker.corpus import Verdict, run_corpus
from kvexact.spec.checker.result import Outcome


def _counts_match(row) -> bool:
    """TLC's result and counts (temporal properties included)."""
    return row.verdict is Verdict.MATCH


@pytest.mark.slow
def test_corpus_matches_tlc(corpus_root):
    root = corpus_root
    rows = run_corpus(root, workers=1)
    assert len(rows) == 15
    bad = [f"{r.id}: {r.why}" for r in rows if not _counts_match(r)]
    assert not bad, bad
    diehard = next(r for r in rows if r.id == "DieHard__DieHard").result
    assert diehard.outcome is Outcome.SAFETY and diehard.violation.name == "NotSolved"
    assert len(diehard.violation.trace) == 7


def test_corpus_small_models_match_tlc(corpus_root):
    """The quick part of the corpus, so a plain unit run also compares with TLC."""
    root = corpus_root
    quick = ["SpecifyingSystems__HourClock__HourClock", "CigaretteSmokers__CigaretteSmokers",
             "transaction_commit__TwoPhase", "chang_roberts__MCChangRoberts", "echo__MCEcho",
             "SpecifyingSystems__TLC__MCAlternatingBit", "Majority__MCMajority", "DieHard__DieHard"]
    rows = run_corpus(root, workers=1, only=quick)
    assert [r.id for r in rows if not _counts_match(r)] == []
    assert len(rows) == len(quick)


# A fixed sample of tla-examples (119 models; the whole corpus runs in `kvexact bench checker --corpus`,
# not in CI): quick models that exercise what issue 16 added, each with TLC's recorded result and counts.
EXAMPLES_SAMPLE = [
    "CarTalkPuzzle__CarTalkPuzzle.toolbox__Model_1__MC",  # constant-only spec: ASSUMEs, 0 states
    "SpecifyingSystems__SimpleMath__SimpleMath",  # constant-only spec
    "dag-consensus__BlockDagTest",  # INSTANCE WITH Leader <- Leader (operator constant), named ASSUMEs
    "DieHard__MCDieHardest",  # Functions, FiniteSetsExt, TLCGet("config"), cfg override defined later
    "NanoBlockchain__MCNanoSmall",  # cfg C = [M] v, Bags, an instance ASSUME TLC does not evaluate
    "Paxos__MCConsensus",  # TLAPS and FiniteSetTheorems from the library folder
    "LearnProofs__MCFindHighest",  # TLAPS
    "SpecifyingSystems__CachingMemory__MCInternalMemory",  # x' passed to an operator parameter
    "SpecifyingSystems__FIFO__MCInnerFIFO",  # instances
    "MissionariesAndCannibals__MissionariesAndCannibals",  # safety failure
    "Majority__MCMajority",
]


def test_tla_examples_sample_matches_tlc(examples_root):
    rows = run_corpus(examples_root, only=EXAMPLES_SAMPLE)
    assert len(rows) == len(EXAMPLES_SAMPLE)
    assert [f"{r.id}: {r.verdict.value} {r.why}" for r in rows if not _counts_match(r)] == []
