"""The documentation site builds with ``mkdocs build --strict``: a broken link, a missing anchor or a page
left out of the nav fails the build, and so this test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(tmp_path: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config),
                           "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_mkdocs_build_strict_passes(tmp_path):
    done = build(tmp_path, ROOT / "mkdocs.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "glossary" / "index.html").is_file()
    assert not (ROOT / "site").exists() or "site/" in (ROOT / ".gitignore").read_text()


def test_a_broken_link_fails_the_strict_build(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [a page that does not exist](missing.md).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text("site_name: probe\ndocs_dir: docs\ntheme:\n  name: material\n")
    done = build(tmp_path, config)
    assert done.returncode != 0
    assert "missing.md" in done.stdout + done.stderr


def test_the_command_table_names_every_subcommand():
    """docs/getting-started.md's table of the ``kvexact`` command has a row for each registered subcommand."""
    import click

    from kvexact.cli import cli

    names = cli.list_commands(click.Context(cli))
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    table = page[page.index("| subcommand |"):]
    table = table[:table.index("\n\n")]
    assert len(names) >= 11
    assert sorted(name for name in names if f"`kvexact {name}" not in table) == []


def test_the_gate_page_states_the_registry_size():
    """docs/gate.md's figure for the negative registry is the number of cases registered today."""
    import re
    from pathlib import Path

    from kvexact.reference import labs

    labs.register_all()
    text = (Path(__file__).parent.parent / "docs" / "gate.md").read_text(encoding="utf-8")
    stated = re.search(r"\((\d+) registered", text)
    assert stated is not None, "docs/gate.md no longer states the registry size"
    assert int(stated.group(1)) == len(labs.cases(None))


def test_the_specs_page_counts_the_shipped_mutants():
    """docs/specs.md's mutant count, in total and per spec, is what spec/ ships."""
    import re
    from collections import Counter
    from pathlib import Path

    from kvexact.spec import _MUTANTS

    text = (Path(__file__).parent.parent / "docs" / "specs.md").read_text(encoding="utf-8")
    found = re.search(r"holds (\d+) seeded-bug mutants: (.*?)\. Each", text, re.S)
    assert found is not None, "docs/specs.md no longer states the mutant count"
    per_spec = {name: int(n) for n, name in re.findall(r"(\d+) of\s+(\w+)", found.group(2))}
    assert int(found.group(1)) == len(_MUTANTS)
    assert per_spec == dict(Counter(m.split("_")[0] for m in _MUTANTS))
