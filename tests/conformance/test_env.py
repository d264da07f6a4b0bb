"""Profiles (the kernels' device policy is tested in tests/kernels/test_kernels_device_policy.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import settings

from kvexact.conformance import profiles


def test_profile_resolution(monkeypatch):
    monkeypatch.delenv("KVEXACT_PROFILE", raising=False)
    assert profiles.resolve_profile() == "ci"
    monkeypatch.setenv("KVEXACT_PROFILE", "fuzz")
    assert profiles.resolve_profile() == "fuzz"
    assert profiles.resolve_profile("dev") == "dev"
    monkeypatch.setenv("KVEXACT_PROFILE", "bogus")
    with pytest.raises(ValueError, match="bogus"):
        profiles.resolve_profile()


def test_ci_env_does_not_switch_profile():
    """With CI=true and KVEXACT_PROFILE=dev, the loaded profile is ours ('dev'), not Hypothesis' ci."""
    code = ("from kvexact.conformance.profiles import load_profile; from hypothesis import settings;"
            "load_profile(); print(settings().max_examples, settings().derandomize)")
    env = {**os.environ, "CI": "true", "KVEXACT_PROFILE": "dev"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(settings.get_profile("dev").max_examples), "False"]
