"""The command line: version, help, unknown subcommands, and exit codes without tracebacks."""

from __future__ import annotations

import subprocess
import sys

import kvexact


def kvexact_cli(*args):
    return subprocess.run([sys.executable, "-m", "kvexact.conformance.cli", *args],
                          capture_output=True, text=True, timeout=120)


def test_version_and_help():
    r = kvexact_cli("--version")
    assert r.returncode == 0 and kvexact.__version__ in r.stdout
    r = kvexact_cli("--help")
    assert r.returncode == 0
    for sub in ("check", "prove", "conform", "fuzz", "gate", "bench"):
        assert sub in r.stdout


def test_unknown_subcommand_is_one_line_exit_2():
    r = kvexact_cli("frobnicate")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "frobnicate" in r.stderr
    assert "Traceback" not in r.stderr


def test_bad_option_is_usage_error():
    r = kvexact_cli("gate", "--seed", "not-a-number")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_missing_layer_says_so_and_exits_3(monkeypatch):
    from kvexact.conformance import cli

    monkeypatch.setitem(cli.COMMANDS, "check", "kvexact.spec.no_such_module:check")
    try:
        cli.main(["check", "Foo.tla"])
    except SystemExit as exc:
        assert exc.code == 3
    else:
        raise AssertionError("expected SystemExit")
