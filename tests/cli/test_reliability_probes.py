"""Probes of issue 24 (part C): a bad profile, a bad fuzz budget, fuzz progress, a shadowing ``kvexact`` folder,
environment variables the docs do not name."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import pytest

from kvexact.cli import fuzz as fuzz_cmd
from kvexact.cli.startup import shadowing_folders


@pytest.mark.parametrize("command", [["conform", "--no-kernels", "--examples", "1", "--steps", "2"], ["gate", "--list"]])
def test_bogus_profile_is_a_usage_error_naming_the_profiles(kvexact_cli, monkeypatch, command):
    monkeypatch.setenv("KVEXACT_PROFILE", "bogus")
    code, text = kvexact_cli(command).code_and_text
    assert code == 2, text
    assert "internal error" not in text and "KVEXACT_PROFILE" in text and "'bogus'" in text
    assert all(name in text for name in ("'ci'", "'dev'", "'fuzz'")), text


@pytest.mark.parametrize("minutes", ["nan", "1e-9", "-1", "0", "inf"])
def test_fuzz_minutes_nan_tiny_or_negative_is_a_usage_error(kvexact_cli, minutes):
    code, text = kvexact_cli(["fuzz", "--minutes", minutes, "--spec", "Revocation"]).code_and_text
    assert code == 2, text
    assert "--minutes" in text and "at least 1/60" in text and "examples" not in text


def test_fuzz_progress_ticker_prints_while_the_block_runs(capsys):
    ticks: list[int] = []
    ticked_twice = threading.Event()

    def line() -> str:
        ticks.append(1)
        if len(ticks) >= 2:
            ticked_twice.set()
        return f"fuzz: ... tick {len(ticks)}"

    with fuzz_cmd._ticker(line, seconds=0.01):
        assert ticked_twice.wait(60)
    out = capsys.readouterr().out
    assert "fuzz: ... tick 1" in out and "fuzz: ... tick 2" in out
    count = len(ticks)
    threading.Event().wait(0.05)
    assert len(ticks) == count  # the ticker stopped with the block


def test_fuzz_prints_progress_lines_with_examples_steps_and_failures(kvexact_cli, monkeypatch, tmp_path):
    monkeypatch.setattr(fuzz_cmd, "PROGRESS_SECONDS", 0.01)
    code, text = kvexact_cli(["fuzz", "--minutes", "0.02", "--spec", "Revocation", "--examples-per-round", "2",
                              "--steps", "5", "--out", str(tmp_path)]).code_and_text
    assert code == 0, text
    progress = [line for line in text.splitlines() if line.startswith("fuzz: ... examples=")]
    assert progress, text
    assert "steps=" in progress[0] and "failures=0" in progress[0]


def test_a_clone_folder_named_kvexact_on_pythonpath_gives_a_clear_error(tmp_path):
    """An empty ``kvexact`` folder whose parent is on PYTHONPATH stands in for an editable install's package."""
    assert shadowing_folders() == []
    (tmp_path / "kvexact").mkdir()
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "kvexact.cli", "--version"], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "__version__" not in r.stderr
    assert f"the folder {tmp_path / 'kvexact'} shadows the installed kvexact package" in r.stderr
    assert f"remove {tmp_path} from PYTHONPATH" in r.stderr


def test_fuzz_budget_is_checked_after_every_example():
    """A spent budget ends the run after the example in progress (fuzz passes its deadline as stop_at)."""
    from hypothesis import settings

    from kvexact.conformance.runner import run_machine

    many = settings(max_examples=50, stateful_step_count=5, deadline=None, database=None, derandomize=True)
    run = run_machine("Revocation", None, many, stop_at=0.0)
    assert run.passed and run.examples == 1 and run.stats.get("failures", 0) == 0
    run = run_machine("Revocation", None, settings(many, max_examples=3))
    assert run.passed and run.examples >= 3



def test_every_environment_variable_the_code_reads_is_in_the_docs_table():
    """The probe "KVEXACT_TRACE_DIR is undocumented": every ``KVEXACT_*`` name in the installed packages'
    sources has a row in the environment-variable table of docs/getting-started.md."""
    import importlib.util
    from pathlib import Path

    names: set[str] = set()
    for package in ("kvexact", "kvexact.spec", "kvexact.reference", "kvexact.kernels", "kvexact.conformance"):
        found = importlib.util.find_spec(package)
        assert found is not None and found.submodule_search_locations, package
        for folder in found.submodule_search_locations:
            for path in Path(folder).rglob("*.py"):
                names |= set(re.findall(r"\bKVEXACT_[A-Z_]+\b", path.read_text(encoding="utf-8")))
    assert {"KVEXACT_TRACE_DIR", "KVEXACT_TRACE_ALWAYS", "KVEXACT_PROFILE"} <= names
    page = (Path(__file__).resolve().parents[2] / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert sorted(n for n in names if f"| `{n}` |" not in page) == []

