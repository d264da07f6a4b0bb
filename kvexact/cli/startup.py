"""A check the ``kvexact`` command makes before anything else: is ``kvexact`` the installed package?

A folder named ``kvexact`` (a clone of this repository, say) whose parent is on ``PYTHONPATH`` or
``sys.path`` is imported as a namespace package in place of an editable install's ``kvexact`` package; the
subpackages still resolve, so only the top level is missing (``__version__``).

Invariant: :func:`shadowing_folders` is empty exactly when ``import kvexact`` gave the package itself.
"""

from __future__ import annotations

import os
import sys

import kvexact


def shadowing_folders() -> list[str]:
    """The folders that stand in for the ``kvexact`` package (none when it is the real one)."""
    if hasattr(kvexact, "__version__"):
        return []
    return list(dict.fromkeys(str(p) for p in getattr(kvexact, "__path__", []))) or [repr(kvexact)]


def refuse_shadowed_package() -> None:
    """One line and exit 3 when a folder shadows the package (every command would fail otherwise)."""
    folders = shadowing_folders()
    if folders:
        parents = sorted({os.path.dirname(f) for f in folders})
        sys.stderr.write(f"kvexact: error: the folder {', '.join(folders)} shadows the installed kvexact package "
                         f"(its parent {', '.join(parents)} is on PYTHONPATH or sys.path, so Python imports the "
                         f"folder instead); remove {', '.join(parents)} from PYTHONPATH, or rename the folder\n")
        sys.exit(3)
