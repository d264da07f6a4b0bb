"""Planting a bug in a module for a test: a copy of the module with one single-point edit of its source."""

from __future__ import annotations

import types


def planted_module(module: types.ModuleType, original: str, mutated: str) -> types.ModuleType:
    """A copy of ``module`` with ``original`` (which must occur exactly once) replaced by ``mutated``."""
    source = open(module.__file__, encoding="utf-8").read()  # type: ignore[arg-type]
    assert source.count(original) == 1, original
    planted = types.ModuleType(module.__name__ + "_planted")
    exec(compile(source.replace(original, mutated), module.__file__, "exec"), planted.__dict__)  # type: ignore[arg-type]
    return planted
