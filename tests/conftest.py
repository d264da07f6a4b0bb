"""Test-suite setup: load the Hypothesis profile explicitly (``--kvexact-profile`` or KVEXACT_PROFILE)."""

from __future__ import annotations

from kvexact.conformance.profiles import PROFILE_NAMES, load_profile


def pytest_addoption(parser):
    parser.addoption("--kvexact-profile", choices=PROFILE_NAMES, default=None,
                     help="Hypothesis profile: ci, dev or fuzz (default: KVEXACT_PROFILE or ci)")


def pytest_configure(config):
    chosen = load_profile(config.getoption("--kvexact-profile"))
    config.stash_profile = chosen  # type: ignore[attr-defined]


def pytest_report_header(config):
    return f"kvexact hypothesis profile: {getattr(config, 'stash_profile', '?')}"
