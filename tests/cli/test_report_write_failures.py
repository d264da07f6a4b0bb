"""A report that cannot be written fails the command (exit 3, one line naming the path) and leaves no partial
file; a device given as the report path (``/dev/null``, ``/dev/full``) is written in place, never removed
and replaced by a plain file. The devices here are made with mknod in a temporary folder (root only), so
the machine's own /dev is never touched."""

from __future__ import annotations

import errno
import os
import stat

import pytest

from kvexact.spec.files import WriteFailed, atomic_open, write_atomic

MODEL = """---- MODULE W ----
EXTENDS Naturals
VARIABLE x
Init == x = 0
Next == x < 2 /\\ x' = x + 1
====
"""


def _device(tmp_path, name: str, minor: int):
    """A character device like /dev/null (minor 3) or /dev/full (minor 7), or a skip without the right."""
    path = tmp_path / name
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except (PermissionError, OSError):
        pytest.skip("mknod needs root")
    return path


def _model(tmp_path):
    (tmp_path / "W.tla").write_text(MODEL)
    (tmp_path / "W.cfg").write_text("INIT Init\nNEXT Next\nCHECK_DEADLOCK FALSE\n")
    return tmp_path / "W.tla"


@pytest.mark.parametrize("command", [["gate", "--select", "formulas-golden", "--json"],
                                     ["gate", "--select", "formulas-golden", "--junit"],
                                     ["check", "--engine", "embedded", "MODEL", "--json"]])
def test_a_full_disk_fails_the_command_naming_the_path(kvexact_cli, tmp_path, command):
    full = _device(tmp_path, "full", 7)
    args = [str(_model(tmp_path)) if a == "MODEL" else a for a in command]
    code, text = kvexact_cli([*args, str(full)]).code_and_text
    assert code == 3, text
    assert f"kvexact: error: cannot write {full}: No space left on device" in text and "internal error" not in text
    assert stat.S_ISCHR(full.stat().st_mode)  # still the device
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary or probe left


def test_dev_null_as_the_report_path_stays_a_device(kvexact_cli, tmp_path):
    null = _device(tmp_path, "null", 3)
    code, text = kvexact_cli(["check", "--engine", "embedded", str(_model(tmp_path)), "--json", str(null)]).code_and_text
    assert code == 0, text
    assert stat.S_ISCHR(null.stat().st_mode)


def test_a_report_in_a_missing_folder_is_one_line_exit_3(kvexact_cli, tmp_path):
    target = tmp_path / "missing" / "r.json"
    code, text = kvexact_cli(["check", "--engine", "embedded", str(_model(tmp_path)), "--json", str(target)]).code_and_text
    assert code == 3, text
    assert f"kvexact: error: cannot write {target}: No such file or directory" in text and "internal error" not in text


def test_a_failing_flush_raises_write_failed_and_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    path.write_text("old")

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(WriteFailed, match=f"cannot write {path}: No space left on device"):
        write_atomic(path, "new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.json"]
    with pytest.raises(WriteFailed):
        with atomic_open(tmp_path / "missing" / "x"):
            pass
