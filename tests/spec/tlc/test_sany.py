"""Every .tla under spec/ (models, mutants, the trace-history module) is valid TLA+: SANY parses it.

SANY is TLC's parser, so a module it rejects cannot be model-checked by TLC at all (TLC exits 150).
"""

from __future__ import annotations

from pathlib import Path

from kvexact.spec import spec_dir
from kvexact.spec.tlc import sany_parse


def shipped_modules() -> list[Path]:
    return sorted(spec_dir().rglob("*.tla"))


def test_every_shipped_module_parses_with_sany(tlc_jar):
    modules = shipped_modules()
    assert len(modules) >= 50  # five models, their mutants, ExactHistory
    run = sany_parse(modules, tlc_jar, timeout_s=600)
    assert run.exit_code == 0, (run.stdout + run.stderr)[-2000:]
    assert "Semantic processing of module KVAllocation_PublishOneGroup" in run.stdout


def test_sany_rejects_mixed_precedence_that_the_specs_once_had(tlc_jar, tmp_path):
    """`len % P + 1`: % and + have overlapping precedence ranges, so TLA+ requires parentheses; the
    oracle is SANY itself, run on the form the specs used before the fix and on the fixed form."""
    bad = tmp_path / "Mixed.tla"
    bad.write_text("---- MODULE Mixed ----\nEXTENDS Naturals\nP == 2\nT(n) == n % P + 1\n====\n")
    good = tmp_path / "Fixed.tla"
    good.write_text("---- MODULE Fixed ----\nEXTENDS Naturals\nP == 2\nT(n) == (n % P) + 1\n====\n")
    assert sany_parse([good], tlc_jar).exit_code == 0
    rejected = sany_parse([bad], tlc_jar)
    assert rejected.exit_code != 0 and "Mixed.tla" in rejected.stdout + rejected.stderr
