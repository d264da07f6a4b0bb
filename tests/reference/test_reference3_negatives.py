"""The cumulative negative registry (0x0CG) and ``kvexact negatives``."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

from click.testing import CliRunner

from kvexact.reference import labs
from kvexact.reference import negatives_cmd as nc
from kvexact.reference.rejections import rejection_of

REFERENCE = pathlib.Path(labs.__file__).resolve().parents[1]


def test_labs_are_out_of_the_product_modules():
    """Only reference/labs/ registers cases, and importing every product module registers none."""
    product = sorted(p for p in REFERENCE.rglob("*.py") if "labs" not in p.parts and p.name != "rejections.py")
    assert [p.name for p in product if re.search(r"\bregister_negative\(", p.read_text())] == []
    names = [".".join(("kvexact.reference", *p.relative_to(REFERENCE).with_suffix("").parts)) for p in product
             if p.name != "__init__.py"]
    probe = (f"import importlib; [importlib.import_module(m) for m in {names!r}]; "
             "from kvexact.reference.rejections import negative_cases; print(len(negative_cases()))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


def test_every_registered_case_of_the_project_is_rejected_by_its_name():
    cases = labs.cases()
    assert len(cases) >= labs.SEED_TOTAL
    assert {c.section for c in cases} >= set(labs.SEED_COUNTS) | set(labs.DERIVED_COUNTS)
    bad = [(c.section, c.description, rejection_of(c.trigger), c.reason) for c in cases
           if rejection_of(c.trigger) is not c.reason]
    assert not bad, bad


def test_registering_twice_changes_nothing():
    before = len(labs.cases())
    labs.register_all()
    assert len(labs.cases()) == before


def test_seed_total_is_211():
    assert labs.SEED_TOTAL == 184 + 27 == 211


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
