"""Fixtures shared by the checker's tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvexact.spec.checker.corpus import find_corpus


@pytest.fixture(scope="session")
def corpus_root() -> Path:
    """The tla-corpus folder; in CI (CI=true) a missing corpus fails instead of skipping."""
    root = find_corpus()
    if root is None:
        if os.environ.get("CI"):
            pytest.fail("tla-corpus not found in CI: shared/tla-corpus beside the checkout, or KVEXACT_TLA_CORPUS")
        pytest.skip("tla-corpus not found: set KVEXACT_TLA_CORPUS")
    return root
