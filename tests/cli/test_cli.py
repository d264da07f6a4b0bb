"""The command line: version, help, unknown subcommands, and exit codes without tracebacks."""

from __future__ import annotations

import subprocess
import sys

import kvexact


def run_kvexact(*args):
    return subprocess.run([sys.executable, "-m", "kvexact.cli", *args],
                          capture_output=True, text=True, timeout=120)


def test_version_and_help():
    r = run_kvexact("--version")
    assert r.returncode == 0 and kvexact.__version__ in r.stdout
    r = run_kvexact("--help")
    assert r.returncode == 0
    for sub in ("check", "prove", "conform", "fuzz", "gate", "bench"):
        assert sub in r.stdout


def test_unknown_subcommand_is_one_line_exit_2():
    r = run_kvexact("frobnicate")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "frobnicate" in r.stderr
    assert "Traceback" not in r.stderr


def test_bad_option_is_usage_error():
    r = run_kvexact("gate", "--seed", "not-a-number")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_a_missing_subcommand_module_is_an_internal_error_not_a_pass(monkeypatch, kvexact_cli):
    """No fallback for a module that "has not landed": its absence is reported in one line, exit 3."""
    from kvexact import cli

    monkeypatch.setitem(cli.COMMANDS, "check", "kvexact.spec.no_such_module:check")
    result = kvexact_cli(["check", "Foo.tla"])
    assert result.code == 3
    assert result.err.count("\n") == 1 and "No module named 'kvexact.spec.no_such_module'" in result.err
