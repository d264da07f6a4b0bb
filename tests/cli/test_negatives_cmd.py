"""``kvexact negatives``: counts by seed section, ``--run``, ``--strict``, usage errors."""

from __future__ import annotations

import re

from click.testing import CliRunner

from kvexact.cli import negatives as nc
from kvexact.reference import labs


def test_command_lists_sections_and_runs_every_case():
    result = CliRunner().invoke(nc.negatives, ["--run"], standalone_mode=False)
    assert result.exception is None, result.output
    assert result.return_value == 0
    assert "0x08I" in result.output and "0x06I" in result.output and "211" in result.output
    assert re.search(r"ran (\d+) cases: \1 rejected by name, 0 failed", result.output)


def test_command_flags_a_case_that_is_not_rejected(monkeypatch):
    from kvexact.reference import rejections
    from kvexact.reference.radix import RadixRejection

    case = rejections.NegativeCase("0x08I", RadixRejection.LOCK_UNDERFLOW, "accepted on purpose", lambda: None)
    monkeypatch.setitem(rejections._REGISTRY, ("0x08I", case.description), case)
    result = CliRunner().invoke(nc.negatives, ["--run", "--section", "0x08I"], standalone_mode=False)
    assert result.return_value == 1
    assert "accepted on purpose" in result.output


def test_strict_fails_when_a_section_is_short():
    result = CliRunner().invoke(nc.negatives, ["--strict", "--section", "0x0D"], standalone_mode=False)
    if len(labs.cases("0x0D")) < 14:
        assert result.return_value == 1
    else:
        assert result.return_value == 0


def test_bad_section_is_a_usage_error():
    result = CliRunner().invoke(nc.negatives, ["--section", "zz"])
    assert result.exit_code == 2
