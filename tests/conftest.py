"""Test-suite setup: load the Hypothesis profile explicitly (``--kvexact-profile`` or KVEXACT_PROFILE), and
the fixtures every layer's tests share."""

from __future__ import annotations

import os
from typing import NamedTuple

import pytest

from kvexact.conformance.profiles import PROFILE_NAMES, load_profile


def pytest_addoption(parser):
    parser.addoption("--kvexact-profile", choices=PROFILE_NAMES, default=None,
                     help="Hypothesis profile: ci, dev or fuzz (default: KVEXACT_PROFILE or ci)")


def pytest_configure(config):
    chosen = load_profile(config.getoption("--kvexact-profile"))
    config.stash_profile = chosen  # type: ignore[attr-defined]


def pytest_collection_modifyitems(config, items):
    """Long work first: ``slow`` tests and the xdist groups (modules whose fixtures check whole models) start
    before the short tests, so with ``-n 2 --dist loadgroup`` no long test is left to run alone at the end
    (a stable sort: the order is otherwise the collection's, the same on every worker).

    ``gpu`` tests need CUDA: without it they are skipped, with the reason (everything else runs on the
    device policy's device, whichever is present)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None and
               item.get_closest_marker("xdist_group") is None)
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


class CliResult(NamedTuple):
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err

    @property
    def code_and_text(self) -> tuple[int, str]:
        return self.code, self.text


@pytest.fixture
def kvexact_cli(capsys):
    """Run ``kvexact ARGS`` in this process, as the console script does: its exit code and output."""
    from kvexact.cli import main

    def run(args: list[str]) -> CliResult:
        with pytest.raises(SystemExit) as exc:
            main(args)
        captured = capsys.readouterr()
        return CliResult(exc.value.code, captured.out, captured.err)

    return run


# ------------------------------------------------------------------------------------------- TLC

# The CLI's default engine is auto (TLC when Java and its jar are present). Tests written against the
# embedded engine's behaviour run it by default; a test of auto clears this (monkeypatch.delenv).
os.environ.setdefault("KVEXACT_ENGINE", "embedded")


def require_tlc() -> str:
    """The TLC jar (resolved as ``kvexact check`` resolves it) for a test that needs real TLC and Java.

    Outside CI a missing jar or Java skips the test; in CI (``CI=true``) it fails it, because CI must run
    every TLC test."""
    from kvexact.spec.tlc import TlcUnavailable, find_jar, java_executable

    try:
        jar = find_jar().path
        java_executable()
    except TlcUnavailable as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must run the TLC tests: {exc}")
        pytest.skip(f"needs TLC: {exc}")
    return jar


@pytest.fixture(scope="session")
def tlc_jar() -> str:
    """The TLC jar; see :func:`require_tlc` (skips outside CI only, fails in CI when it is missing)."""
    return require_tlc()
