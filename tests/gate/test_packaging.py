"""Packaging: the distribution installs non-editable with its data, and the self-test passes there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_selftest_passes_in_place():
    from kvexact.gate.framework import GateContext, Verdict
    from kvexact.gate.packaging import packaging_selftest

    result = packaging_selftest(GateContext())
    assert result.verdict is Verdict.PASSED, result.detail


@pytest.mark.slow
def test_installed_copy_ships_its_data(tmp_path):
    """A non-editable install carries every .tla/.cfg of spec/ and passes the self-test from elsewhere."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(ROOT)], check=True, timeout=600,
                   cwd=tmp_path)
    source_data = {p.relative_to(ROOT / "spec").as_posix() for p in (ROOT / "spec").rglob("*")
                   if p.suffix in {".tla", ".cfg"}}
    installed_spec = target / "kvexact" / "spec"
    installed_data = {p.relative_to(installed_spec).as_posix() for p in installed_spec.rglob("*")
                      if p.suffix in {".tla", ".cfg"}}
    assert source_data == installed_data
    probe = ("import kvexact.spec as s, kvexact.gate.packaging as t, kvexact.gate.framework as g;"
             "r = t.packaging_selftest(g.GateContext()); print(s.spec_dir()); print(r.verdict.value, r.detail)")
    # the editable finder sits after PathFinder on sys.meta_path, so the target on sys.path wins
    out = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {probe}"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    spec_dir_line, verdict_line = out.stdout.strip().splitlines()[-2:]
    assert spec_dir_line.startswith(str(target)), spec_dir_line
    assert verdict_line.startswith("passed"), verdict_line
