"""Atomic writes: a reader sees the old complete file or the new one, never a part; no temporary is left."""

from __future__ import annotations

import pytest

from kvexact.spec.files import atomic_open, check_writable, write_atomic


def test_write_replaces_the_file_whole_and_leaves_nothing_else(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("old")
    write_atomic(path, "new text\n")
    write_atomic(tmp_path / "b.bin", b"\x00\x01")
    assert path.read_text() == "new text\n" and (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.bin", "r.json"]


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_an_error_or_ctrl_c_while_writing_keeps_the_old_file(tmp_path, error):
    path = tmp_path / "r.xml"
    path.write_text("<old/>")
    with pytest.raises(type(error)):
        with atomic_open(path) as fh:
            fh.write("<half")
            raise error
    assert path.read_text() == "<old/>"
    assert [p.name for p in tmp_path.iterdir()] == ["r.xml"]


def test_check_writable_names_the_problem_and_creates_nothing(tmp_path):
    assert check_writable(tmp_path / "r.json") is None
    assert list(tmp_path.iterdir()) == []
    assert "is a directory" in (check_writable(tmp_path) or "")
    assert "cannot write report" in (check_writable(tmp_path / "missing" / "r.json") or "")
