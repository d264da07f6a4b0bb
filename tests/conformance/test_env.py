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


def test_machine_settings_are_ours_in_a_process_that_imported_only_the_runner():
    """Hypothesis has a ``ci`` profile of its own (100 examples of 50 steps). A process that reaches the runner
    without importing the profiles module (a gate worker, a script) must still get our ``ci``: a gate check
    gave 16 examples in a worker and 6 in the gate's own process before."""
    code = ("from kvexact.conformance.runner import machine_settings; s = machine_settings('ci');"
            "print(s.max_examples, s.stateful_step_count)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    ours = settings.get_profile("ci")
    assert out.stdout.split() == [str(ours.max_examples), str(ours.stateful_step_count)]
