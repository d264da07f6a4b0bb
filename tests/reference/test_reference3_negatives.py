"""The cumulative negative registry (0x0CG): the labs register every case, and only the labs do."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

from kvexact.reference import labs
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
