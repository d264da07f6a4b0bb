"""``kvexact bench checker --engines``: the shape of the side-by-side table on a tiny model.

The counts are TLC's (three initial states, each with one successor: 6 generated, 3 distinct); no time
is asserted. The TLC case skips outside CI when no jar is found and fails in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = """---- MODULE Tiny ----
EXTENDS Naturals
VARIABLE x
Init == x \\in 0..2
Next == x' = (x + 1) % 3
Small == x < 3
====
"""


def _jar() -> str | None:
    for p in (os.environ.get("TLA2TOOLS_JAR", ""), str(ROOT.parent / "shared" / "tlc" / "tla2tools.jar")):
        if p and Path(p).is_file():
            return p
    if os.environ.get("CI"):
        pytest.fail("CI runs with TLC: no tla2tools.jar in TLA2TOOLS_JAR or the CI copy beside the clone")
    pytest.skip("no tla2tools.jar (TLA2TOOLS_JAR or the CI copy beside the clone); runs in CI")


def _tiny(tmp_path: Path) -> Path:
    (tmp_path / "Tiny.tla").write_text(TINY)
    (tmp_path / "Tiny.cfg").write_text("INIT Init\nNEXT Next\nINVARIANT Small\n")
    (tmp_path / "Tiny.deep.cfg").write_text("INIT Init\nNEXT Next\n")  # not a bench model: has a dot
    return tmp_path


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvexact.cli", "bench", "checker", *args],
                          capture_output=True, text=True, timeout=300)


def _row(stdout: str, model: str) -> list[str]:
    rows = [line for line in stdout.splitlines() if line.startswith(f"| {model} ")]
    assert len(rows) == 1, stdout
    return [c.strip() for c in rows[0].strip("|").split("|")]


def test_embedded_alone_gives_counts_and_a_rate(tmp_path):
    d = _tiny(tmp_path)
    r = _bench("--engines", "embedded", "--spec-dir", str(d), "--json", str(tmp_path / "out.json"))
    assert r.returncode == 0, r.stderr
    head = _row(r.stdout, "model")
    assert head == ["model", "embedded generated", "embedded distinct", "embedded CPU-s",
                    "embedded generated/CPU-s", "note"]
    cells = _row(r.stdout, "Tiny.cfg")
    assert cells[1:3] == ["6", "3"]
    assert "Tiny.deep.cfg" not in r.stdout
    doc = json.loads((tmp_path / "out.json").read_text())
    assert [m["model"] for m in doc["models"]] == ["Tiny.cfg"]
    assert doc["models"][0]["embedded"]["generated"] == 6 and doc["models"][0]["embedded"]["distinct"] == 3


def test_both_engines_side_by_side_with_the_ratio_and_the_setup(tmp_path):
    jar = _jar()
    d = _tiny(tmp_path)
    r = _bench("--engines", "embedded,tlc", "--spec-dir", str(d), "--tlc-jar", jar)
    assert r.returncode == 0, r.stderr
    assert "JVM start-up" in r.stdout and "-workers 1" in r.stdout
    head = _row(r.stdout, "model")
    assert head[-2:] == ["embedded / TLC", "note"] and "tlc generated/CPU-s" in head
    cells = dict(zip(head, _row(r.stdout, "Tiny.cfg"), strict=True))
    assert (cells["embedded generated"], cells["embedded distinct"]) == ("6", "3")
    assert (cells["tlc generated"], cells["tlc distinct"]) == ("6", "3")
    assert cells["note"] == ""
    ratio = cells["embedded / TLC"].split()[0]
    assert float(ratio) > 0


@pytest.mark.parametrize("engines", ["embedded,spin", "tlc,tlc", ""])
def test_a_bad_engine_list_is_a_usage_error(tmp_path, engines):
    r = _bench("--engines", engines, "--spec-dir", str(_tiny(tmp_path)))
    assert r.returncode == 2 and "--engines" in r.stderr and "Traceback" not in r.stderr


def test_a_folder_without_models_cannot_run(tmp_path):
    r = _bench("--engines", "embedded", "--spec-dir", str(tmp_path))
    assert r.returncode == 3 and "no NAME.cfg model" in r.stderr


def test_engines_that_disagree_fail_the_run():
    from kvexact.cli.bench_engines import EngineRun, disagreement

    same = {"embedded": EngineRun("success", 6, 3, 0.1), "tlc": EngineRun("success", 6, 3, 0.2)}
    assert disagreement(same) == ""
    other = {"embedded": EngineRun("success", 6, 3, 0.1), "tlc": EngineRun("success", 7, 3, 0.2)}
    assert "counts 6/3 vs 7/3" in disagreement(other)


def test_deep_models_with_a_bound_on_the_embedded_engine(tmp_path):
    d = _tiny(tmp_path)
    r = _bench("--engines", "embedded", "--spec-dir", str(d), "--models", "deep", "--max-states", "2")
    assert r.returncode == 0, r.stderr
    cells = _row(r.stdout, "Tiny.deep.cfg")
    assert cells[2] == "2" and "stopped at 2 distinct states" in cells[-1]
    assert "| Tiny.cfg " not in r.stdout
