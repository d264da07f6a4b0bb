"""Every registered failure-lab case of Reference I is rejected with exactly its named reason."""

import collections

import pytest

from kvexact.reference import labs
from kvexact.reference.labs import reference1 as lab
from kvexact.reference.rejections import rejection_of

CASES = [c for c in labs.cases() if c.section in lab.SECTIONS]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.section}:{c.reason.name}:{c.description}")
def test_case_rejected_by_name(case):
    got = rejection_of(case.trigger)
    assert got is case.reason, f"{case.description}: expected {case.reason!r}, got {got!r}"


def test_each_lab_meets_the_seed_count():
    counts = collections.Counter(c.section for c in CASES)
    for section, minimum in lab.SEED_MINIMUM.items():
        assert counts[section] >= minimum, (section, counts[section], minimum)


def test_0x0D_names_the_seed_case():
    descriptions = {c.description for c in CASES if c.section == "0x0D"}
    assert "six request references counted as six unique blocks" in descriptions
