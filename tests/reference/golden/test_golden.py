"""The golden tests: each case of :mod:`golden` gives the seed's worked numbers (or the peer profile's measured
ones) on the reference, one test per case, named by the case."""

from __future__ import annotations

import golden
import pytest


@pytest.mark.parametrize("name", list(golden.CASES))
def test_golden_case(name):
    assert golden.mismatches(name) == []


@pytest.mark.parametrize("fid", golden.formula_ids())
def test_golden_formula(fid):
    assert golden.formula_mismatches(fid) == []


def test_every_case_names_its_source():
    """A case cites a seed section id, or is a peer profile's case (its measured scenario or protocol), or pins a
    documented contract in its docstring."""
    undocumented = [n for n, case in golden.CASES.items() if not (case.__doc__ or "").strip()]
    assert undocumented == []
    assert len(golden.CASES) == len(golden.SEED_CASES) + len(golden.PEER_CASES) >= 129
    assert golden.sections("radix 0x08F") == ["0x08F", "0x08G"]


def test_a_failing_row_and_a_raising_case_are_named(monkeypatch):
    monkeypatch.setitem(golden.CASES, "planted", lambda: [("two", 1 + 1, 3), ("one", 1, 1)])
    assert golden.mismatches("planted") == ["planted: two = 2, expected 3"]
    monkeypatch.setitem(golden.CASES, "planted", lambda: 1 // 0)
    run = golden.run_case("planted")
    assert not run.passed and run.detail == "planted: ZeroDivisionError: integer division or modulo by zero"
