"""0x05G: every malformed transition is rejected by name and leaves the state digest unchanged."""

from __future__ import annotations

import pytest

from kvexact.reference import labs
from kvexact.reference.allocator import SelfCheckFailed
from kvexact.reference.labs import allocator as fixtures
from kvexact.reference.rejections import Rejected

CASES = labs.cases("0x05G")


def test_at_least_22_distinct_cases():
    assert len(CASES) >= 22
    assert len({c.reason for c in CASES}) >= 22


@pytest.mark.parametrize("case", CASES, ids=[c.description for c in CASES])
def test_case_rejected_by_name_with_digest_unchanged(case):
    # fixtures.expect_unchanged raises SelfCheckFailed (not Rejected) if the digest moved
    with pytest.raises(Rejected) as exc:
        case.trigger()
    assert exc.value.reason is case.reason, exc.value


def test_expect_unchanged_catches_a_leaking_rejection():
    from kvexact.reference.allocator import AllocRejection

    alloc = fixtures.fixture_0x05b_forked(check_every_op=False)

    def leaky(a):
        a.scalars["epoch"] = 99  # a write outside any transaction, then a rejection
        raise Rejected(AllocRejection.EPOCH_MISMATCH, "leaky")

    with pytest.raises(SelfCheckFailed):
        fixtures.expect_unchanged(alloc, leaky)
