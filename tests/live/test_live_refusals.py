"""The live adapters refuse a missing or unsupported runtime by name, in one line (no runtime needed)."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

from kvexact.conformance.live import runtime
from kvexact.conformance.live.runtime import RuntimeRejection, UnsupportedRuntime


def _installed(package: str) -> bool:
    try:
        metadata.version(package)
    except metadata.PackageNotFoundError:
        return False
    return True


def test_unsupported_version_is_refused(monkeypatch):
    monkeypatch.setattr(runtime.metadata, "version", lambda package: "0.32.9")
    with pytest.raises(UnsupportedRuntime) as info:
        runtime.require("vllm")
    assert info.value.reason is RuntimeRejection.UNSUPPORTED_VERSION
    assert "found vllm 0.32.9" in str(info.value) and "0.33.0" in str(info.value)


def test_missing_runtime_is_refused(monkeypatch):
    def missing(package):
        raise metadata.PackageNotFoundError(package)

    monkeypatch.setattr(runtime.metadata, "version", missing)
    with pytest.raises(UnsupportedRuntime) as info:
        runtime.require("sglang")
    assert info.value.reason is RuntimeRejection.NOT_INSTALLED
    assert "scripts/runtime-env.sh" in str(info.value)


@pytest.mark.skipif(_installed("vllm"), reason="needs an environment without vLLM (the project's own)")
def test_cli_without_the_runtime_says_so_in_one_line():
    conform = subprocess.run([sys.executable, "-m", "kvexact.cli", "conform", "--adapter",
                              "kvexact.conformance.live.vllm:factory"], capture_output=True, text=True)
    assert conform.returncode == 2 and "vllm is not installed" in conform.stderr
    assert len(conform.stderr.strip().splitlines()) == 1
    diff = subprocess.run([sys.executable, "-m", "kvexact.cli", "diff", "vllm"],
                          capture_output=True, text=True)
    assert diff.returncode == 3 and "scripts/runtime-env.sh" in diff.stderr
    assert len(diff.stderr.strip().splitlines()) == 1
