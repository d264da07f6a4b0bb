"""Helpers the checker's tests share: a small spec and its cfg written into a test's folder."""

from __future__ import annotations

import textwrap
from pathlib import Path

NOLOCK = "INIT Init\nNEXT Next\nCHECK_DEADLOCK FALSE\n"


def write_spec(tmp_path: Path, body: str, cfg: str, name: str = "M", extra: dict | None = None) -> Path:
    """Writes `name`.tla (EXTENDS the standard modules, then `body`), its cfg and any `extra` files."""
    spec = tmp_path / f"{name}.tla"
    spec.write_text(f"---- MODULE {name} ----\nEXTENDS Naturals, Sequences, FiniteSets, TLC\n"
                    + textwrap.dedent(body) + "\n====\n")
    (tmp_path / f"{name}.cfg").write_text(textwrap.dedent(cfg))
    for fname, text in (extra or {}).items():
        (tmp_path / fname).write_text(textwrap.dedent(text))
    return spec
