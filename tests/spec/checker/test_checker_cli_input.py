"""`kvexact check` with input that is not a spec, or bounds that are not positive: a usage error (exit 2)
with one line and the Rejection's name, never UnicodeDecodeError/IsADirectoryError or exit 3 (issue 24, B)."""

from __future__ import annotations

import pytest
from tla_snippets import NOLOCK, write_spec

from kvexact.conformance.line_schemas import Rejection


def one_usage_line(kvexact_cli, args: list[str], *fragments: str) -> str:
    code, out = kvexact_cli(["check", *args]).code_and_text
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, out
    assert "Traceback" not in out and "internal error" not in out
    assert "UnicodeDecodeError" not in out and "IsADirectoryError" not in out
    for fragment in fragments:
        assert fragment in lines[0], (fragment, out)
    return lines[0]


@pytest.mark.parametrize("name, content, kind", [
    ("random.tla", bytes(range(128, 256)) * 16, Rejection.NOT_TEXT),
    ("binary.tla", b"\x7fELF\x02\x01\x01\x00\xff\xfe" + bytes(64), Rejection.NOT_TEXT),
])
def test_check_binary_or_random_spec(tmp_path, kvexact_cli, name, content, kind):
    path = tmp_path / name
    path.write_bytes(content)
    one_usage_line(kvexact_cli, [str(path)], name, "not UTF-8 text", kind.name)


def test_check_directory_spec(tmp_path, kvexact_cli):
    one_usage_line(kvexact_cli, [str(tmp_path)], "not a regular file", Rejection.NOT_A_FILE.name)


def test_check_missing_spec(tmp_path, kvexact_cli):
    one_usage_line(kvexact_cli, [str(tmp_path / "Nope.tla")], "Nope.tla: no such file",
                   Rejection.NO_SUCH_FILE.name)


def test_check_directory_or_binary_config(tmp_path, kvexact_cli):
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == x' = 1 - x", NOLOCK)
    one_usage_line(kvexact_cli, [str(spec), "--config", str(tmp_path)], Rejection.NOT_A_FILE.name)
    cfg = tmp_path / "bin.cfg"
    cfg.write_bytes(b"\xff\xfe\x00")
    one_usage_line(kvexact_cli, [str(spec), "--config", str(cfg)], "bin.cfg", Rejection.NOT_TEXT.name)


@pytest.mark.parametrize("flag, value", [("--max-states", "-5"), ("--max-states", "0"), ("--max-depth", "-1"),
                                         ("--max-depth", "0"), ("--depth", "0"), ("--num", "-3")])
def test_check_non_positive_bound(tmp_path, kvexact_cli, flag, value):
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == x' = 1 - x", NOLOCK)
    one_usage_line(kvexact_cli, [str(spec), flag, value], flag, value)


def test_check_a_good_spec_still_runs(tmp_path, kvexact_cli):
    """The border checks let a real spec through (the usage errors above are not a blanket refusal)."""
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == x' = 1 - x", NOLOCK)
    code, out = kvexact_cli(["check", str(spec), "--max-states", "5"]).code_and_text
    assert code == 0 and "No error has been found" in out, out
