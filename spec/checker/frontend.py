"""The embedded checker's front end on its own (no cfg): parse every module a file needs, check SANY's
precedence rules, resolve every name, and report the first error as SANY would refuse the file.

Invariant: ``front_end_error`` returns None exactly when the embedded engine can load the file's root
module and compile every definition reachable from it without a parse or undefined-name error; errors
the engine raises only while evaluating (values, unsupported constructs) do not count as rejections.
"""

from __future__ import annotations

from pathlib import Path

from kvexact.spec.checker.compiler import Compiler, Scope
from kvexact.spec.checker.errors import ArityError, ParseError, SpecError, UndefinedError
from kvexact.spec.checker.values import EvalError


def _compile_all(comp: Compiler, root: Scope) -> None:
    """Compile every definition once (as ``Model._resolve_all``), re-raising name and parse errors."""
    seen: set[int] = set()
    todo = [root]
    while todo:
        scope = todo.pop()
        for b in list(scope.names.values()):
            if id(b[1]) in seen:
                continue
            seen.add(id(b[1]))
            if b[0] == "def":
                try:
                    comp.def_fn(b[1])
                except (UndefinedError, ParseError, ArityError):
                    raise
                except (SpecError, EvalError, RecursionError):
                    b[1].compiling = False
            elif b[0] == "instance":
                todo.append(b[1])


def front_end_error(path: str | Path, lib_dirs: list[Path] | None = None) -> SpecError | None:
    """The error that stops the front end on ``path`` (None: the file is accepted)."""
    path = Path(path)
    comp = Compiler(path.parent, {}, lib_dirs=list(lib_dirs or []))
    try:
        root = comp.load_root(path)
        _compile_all(comp, root)
    except (ParseError, UndefinedError, ArityError) as exc:
        return exc
    except SpecError:  # a construct the engine does not load: not a SANY-level verdict
        return None
    return None
