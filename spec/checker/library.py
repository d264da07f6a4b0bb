"""Where modules come from: the spec's folder, then the library folders (``--lib DIR``, repeatable, and
the ``KVEXACT_TLA_LIB`` environment variable, a path list like TLC's ``-DTLA-Library``), then the
modules this engine implements natively (builtins.py, community.py).

Invariant: a file may hold several modules (after the first ``====``) and modules nested inside a
module; every one of them is found by name, with line numbers that are those of the file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

ENV_VAR = "KVEXACT_TLA_LIB"

_HEADER = re.compile(r"^[ \t]*-{4,}[ \t]*MODULE[ \t]+(\w+)[ \t]*-{4,}", re.M)
_END = re.compile(r"^[ \t]*={4,}", re.M)


def library_dirs(extra: Iterable[str | Path] = ()) -> list[Path]:
    """The library folders: those given (in order), then those of $KVEXACT_TLA_LIB."""
    out = [Path(p) for p in extra]
    env = os.environ.get(ENV_VAR, "")
    out += [Path(p) for p in env.split(os.pathsep) if p]
    return out


def expand_tabs(text: str) -> str:
    """SANY reads a tab as moving to the next multiple of 8 columns; the parser rejects tabs."""
    return text.expandtabs(8) if "\t" in text else text


def split_modules(text: str) -> list[tuple[str, str]]:
    """The top-level modules of a file as (name, text), each text padded with the blank lines that
    precede it so that positions stay those of the file. Nested modules stay inside their parent."""
    out: list[tuple[str, str]] = []
    pos = 0
    while True:
        m = _HEADER.search(text, pos)
        if m is None:
            return out
        depth, scan = 1, m.end()
        while depth:
            h = _HEADER.search(text, scan)
            e = _END.search(text, scan)
            if e is None:
                end = len(text)
                break
            if h is not None and h.start() < e.start():
                depth += 1
                scan = h.end()
            else:
                depth -= 1
                scan = e.end()
                end = scan
        pad = "\n" * text.count("\n", 0, m.start())
        out.append((m.group(1), pad + text[m.start():end] + "\n"))
        pos = end


def find_module_file(name: str, folders: Iterable[Path]) -> Path | None:
    for folder in folders:
        p = folder / f"{name}.tla"
        if p.is_file():
            return p
    return None
