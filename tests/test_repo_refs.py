"""The repository explains itself: nothing in it points at a file outside it, every seed section id
it cites has a line in docs/glossary.md, and README.md stays a short front door."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "docs" / "glossary.md"

# References to files that are not in the repository: the sibling folder CI clones beside it, the design
# notes and research notes that used to live there.
OUTSIDE = re.compile(r"\.\./shared|DESIGN\.md|(?<![\w.-])notes/")
# The one reference allowed: where CI puts the TLC jar beside the clone (the runner's fallback location).
ALLOWED = ("../shared/tlc/tla2tools.jar",)
# Seed section ids: a chapter (two hex digits, up to 10) with an optional section letter (0x05, 0x05B, 0x10A).
SECTION_ID = re.compile(r"\b0x(?:0[0-9A-F]|10)[A-Z]?\b")
GLOSSARY_LINE = re.compile(r"^- \*\*(0x[0-9A-F]{2}[A-Z]?)\*\*: \S", re.MULTILINE)
SKIP_DIRS = {".git", ".venv", "site", "build", "__pycache__", ".hypothesis", ".mypy_cache", ".ruff_cache",
             ".pytest_cache"}


def tracked_files() -> list[Path]:
    """The files git tracks (the tree itself, less caches and environments, when git is not there)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        paths = [ROOT / p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        paths = [p for p in ROOT.rglob("*") if not SKIP_DIRS & set(p.relative_to(ROOT).parts)]
    return [p for p in paths if p.is_file()]


def text_of(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def outside_refs(text: str) -> list[str]:
    """Each line of ``text`` that points outside the repository, once the allowed jar path is removed."""
    found = []
    for line in text.splitlines():
        kept = line
        for allowed in ALLOWED:
            kept = kept.replace(allowed, "")
        if OUTSIDE.search(kept):
            found.append(line.strip())
    return found


def test_the_scanner_finds_each_kind_of_outside_reference_and_allows_only_the_jar():
    assert outside_refs('see DESIGN.md, "Counters"') == ['see DESIGN.md, "Counters"']
    assert outside_refs("(notes/vllm.md section 8)") == ["(notes/vllm.md section 8)"]
    assert outside_refs("expected values from `notes/`") == ["expected values from `notes/`"]
    assert outside_refs("--corpus ../shared/tla-examples") == ["--corpus ../shared/tla-examples"]
    assert outside_refs('jar = root / "../shared/tlc/tla2tools.jar"') == []
    assert outside_refs("../shared/tlc/tla2tools.jar and ../shared/seed") != []
    assert outside_refs("docs/peers/vllm.md and docs/design.md; release-notes/x.md") == []


def test_no_tracked_file_points_outside_the_repository():
    bad = []
    for path in tracked_files():
        if path.resolve() == Path(__file__).resolve():
            continue
        text = text_of(path)
        if text is not None:
            bad += [f"{path.relative_to(ROOT)}: {line[:120]}" for line in outside_refs(text)]
    assert bad == []


def cited_ids() -> dict[str, str]:
    """Each section id cited outside the glossary, with one file that cites it."""
    cited: dict[str, str] = {}
    for path in tracked_files() + sorted((ROOT / "docs").rglob("*.md")):
        if path == GLOSSARY:
            continue
        text = text_of(path)
        for sid in SECTION_ID.findall(text or ""):
            cited.setdefault(sid, str(path.relative_to(ROOT)))
    return cited


def test_the_id_pattern_reads_chapters_and_sections_but_not_other_hex():
    text = "0x05B and 0x0CE, chapter 0x08, 0x10A; not 0xFFZ, 0x1F, 0x05b or 0x05BC"
    assert SECTION_ID.findall(text) == ["0x05B", "0x0CE", "0x08", "0x10A"]


def test_every_cited_section_id_has_a_glossary_line():
    lines = GLOSSARY_LINE.findall(GLOSSARY.read_text(encoding="utf-8"))
    assert len(lines) == len(set(lines)), "an id has two glossary lines"
    cited = cited_ids()
    assert len(cited) >= 90  # the code cites about a hundred ids: a broken pattern would find few
    missing = {sid: where for sid, where in sorted(cited.items()) if sid not in set(lines)}
    assert missing == {}


README_MAX_LINES = 300


def test_the_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_MAX_LINES
    for command in ("bash scripts/gate.sh", "bash scripts/test.sh"):
        assert command in readme
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links, "the README links into the docs"
    assert [link for link in links if not (ROOT / link).is_file()] == []


@pytest.mark.parametrize("page", ["getting-started.md", "runtime.md", "gate.md", "specs.md", "checker.md",
                                  "reference.md", "kernels.md", "design.md", "peers/vllm.md",
                                  "peers/sglang.md", "glossary.md"])
def test_the_readme_links_each_main_docs_page(page):
    assert f"(docs/{page}" in (ROOT / "README.md").read_text(encoding="utf-8")
