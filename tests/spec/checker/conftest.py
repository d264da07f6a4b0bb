"""Fixtures shared by the checker's tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvexact.spec.checker.corpus import find_corpus


def _corpus(name: str, variable: str) -> Path:
    """The corpus folder ``name``; in CI (CI set) a missing corpus fails instead of skipping."""
    root = find_corpus(name)
    if root is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} not found in CI: shared/{name} beside the checkout, or {variable}")
        pytest.skip(f"{name} not found: set {variable}")
    return root


@pytest.fixture(scope="session")
def corpus_root() -> Path:
    """The tla-corpus folder (missing: a skip here, a failure in CI)."""
    return _corpus("tla-corpus", "KVEXACT_TLA_CORPUS")


@pytest.fixture(scope="session")
def examples_root() -> Path:
    """The tla-examples folder (tlaplus/Examples with TLC's results; missing: a skip here, a failure in CI)."""
    return _corpus("tla-examples", "KVEXACT_TLA_EXAMPLES")


@pytest.fixture(scope="session")
def tla2tools_jar() -> Path:
    """tla2tools.jar (TLA2TOOLS_JAR, else shared/tlc beside the checkout); missing: a skip here, a failure
    in CI."""
    from kvexact.spec.checker.sany import find_jar
    found = find_jar()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("tla2tools.jar not found in CI: shared/tlc beside the checkout, or TLA2TOOLS_JAR")
        pytest.skip("tla2tools.jar not found: set TLA2TOOLS_JAR")
    return found
