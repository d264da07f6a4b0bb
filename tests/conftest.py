"""Test-suite setup: load the Hypothesis profile explicitly (``--kvexact-profile`` or KVEXACT_PROFILE)."""

from __future__ import annotations

from kvexact.conformance.profiles import PROFILE_NAMES, load_profile


def pytest_addoption(parser):
    parser.addoption("--kvexact-profile", choices=PROFILE_NAMES, default=None,
                     help="Hypothesis profile: ci, dev or fuzz (default: KVEXACT_PROFILE or ci)")


def pytest_configure(config):
    chosen = load_profile(config.getoption("--kvexact-profile"))
    config.stash_profile = chosen  # type: ignore[attr-defined]


def pytest_collection_modifyitems(config, items):
    """``gpu`` tests need CUDA: without it they are skipped, with the reason (everything else runs on the
    device policy's device, whichever is present)."""
    if not any("gpu" in item.keywords for item in items):
        return
    from kvexact.kernels.device import cuda_available

    if cuda_available():
        return
    import pytest

    skip = pytest.mark.skip(reason="needs a CUDA device (none is visible; the kernels run under Triton's CPU "
                                   "interpreter here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    return f"kvexact hypothesis profile: {getattr(config, 'stash_profile', '?')}"
