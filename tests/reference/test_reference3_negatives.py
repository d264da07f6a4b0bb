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
    assert {c.section for c in cases} >= set(labs.SEED_COUNTS) | set(labs.UNSTATED_LABS)
    bad = [(c.section, c.description, rejection_of(c.trigger), c.reason) for c in cases
           if rejection_of(c.trigger) is not c.reason]
    assert not bad, bad


def test_registering_twice_changes_nothing():
    before = len(labs.cases())
    labs.register_all()
    assert len(labs.cases()) == before


def test_seed_total_is_211():
    assert labs.SEED_TOTAL == 184 + 27 == 211


def test_a_reason_repeats_in_a_section_only_as_a_listed_distinct_variant():
    repeated = labs.repeated_reasons()
    assert set(repeated) == set(labs.DISTINCT_VARIANTS), set(repeated) ^ set(labs.DISTINCT_VARIANTS)


def test_no_case_is_registered_twice_across_sections():
    seen: dict[tuple[str, str], str] = {}
    for c in labs.cases():
        key = (f"{type(c.reason).__name__}.{c.reason.name}", c.description)
        assert key not in seen, (key, seen.get(key), c.section)
        seen[key] = c.section


def test_a_new_repeat_is_reported(monkeypatch):
    from kvexact.reference import rejections
    from kvexact.reference.shared_prefix import SharedPrefixRejection

    case = rejections.NegativeCase("0x0BH", SharedPrefixRejection.WIDTH_MISMATCH, "query row of width 3", lambda: None)
    monkeypatch.setitem(rejections._REGISTRY, ("0x0BH", case.description), case)
    assert ("0x0BH", "SharedPrefixRejection.WIDTH_MISMATCH") in labs.repeated_reasons()
