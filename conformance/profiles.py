"""Hypothesis profiles ``ci``, ``dev`` and ``fuzz``, loaded explicitly.

Invariant: the active profile is the one named by a pytest option, a ``--profile`` flag or
``KVEXACT_PROFILE`` (default ``ci``); Hypothesis' own behaviour of loading its built-in ``ci``
profile when ``CI=true`` is set is overridden by always loading our choice explicitly.
"""

from __future__ import annotations

import os
from datetime import timedelta

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

PROFILE_NAMES = ("ci", "dev", "fuzz")
_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile(
    "ci", max_examples=25, stateful_step_count=30, deadline=None, derandomize=True,
    suppress_health_check=_SUPPRESS, print_blob=True, database=None,
)
# Every field that Hypothesis' own CI profile changes is set explicitly here, so CI=true changes nothing.
_DB_DIR = os.environ.get("KVEXACT_EXAMPLE_DB", ".hypothesis/examples")
settings.register_profile(
    "dev", max_examples=60, stateful_step_count=40, deadline=timedelta(seconds=5), derandomize=False,
    suppress_health_check=_SUPPRESS, print_blob=False, database=DirectoryBasedExampleDatabase(_DB_DIR),
)
settings.register_profile(
    "fuzz", max_examples=5_000, stateful_step_count=100, deadline=None, derandomize=False,
    suppress_health_check=_SUPPRESS, print_blob=True, database=DirectoryBasedExampleDatabase(_DB_DIR),
)


def resolve_profile(name: str | None = None) -> str:
    """The profile to use: an explicit name, else KVEXACT_PROFILE, else 'ci'. Raises on an unknown name."""
    chosen = name or os.environ.get("KVEXACT_PROFILE") or "ci"
    if chosen not in PROFILE_NAMES:
        raise ValueError(f"unknown Hypothesis profile {chosen!r}; choose one of {', '.join(PROFILE_NAMES)}")
    return chosen


def load_profile(name: str | None = None) -> str:
    """Load and return the resolved profile (always explicitly, whatever CI says)."""
    chosen = resolve_profile(name)
    settings.load_profile(chosen)
    return chosen


def profile_settings(name: str | None = None) -> settings:
    """The settings of one of our profiles, resolved as :func:`resolve_profile` does. Reading them through this
    module guarantees ours are registered: Hypothesis has a built-in ``ci`` profile of its own (100 examples of
    50 steps), which ``settings.get_profile("ci")`` returns in a process that never imported this module."""
    return settings.get_profile(resolve_profile(name))
