"""Fixtures shared by the spec layer's tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def make_mutants():
    """``scripts/make_mutants.py`` (the generator of spec/mutants/), loaded from the source tree."""
    path = ROOT / "scripts" / "make_mutants.py"
    spec = importlib.util.spec_from_file_location("make_mutants", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
