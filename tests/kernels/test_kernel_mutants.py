"""Every hand-written kernel mutant (kernels/mutants.py) is killed by its gate case and by its kernel test.

Bounded by cases: one subprocess per mutant runs the one quick ``kernels-differential`` case and the one kernel
test the mutant names, with ``KVEXACT_KERNEL_MUTANT`` set (under Triton's interpreter on the CPU here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kvexact.gate import kernel_checks
from kvexact.kernels import mutants

SCRIPT = """
import json, sys
import pytest
from kvexact.gate.kernel_checks import run_case
from kvexact.kernels import mutants
m = mutants.get(sys.argv[1])
installed = sys.modules["kvexact.kernels." + m.module].__file__.startswith("<kernel mutant")
passed, detail, _ = run_case(m.gate_case)
rc = pytest.main([m.test, "-q", "-p", "no:cacheprovider", "-x"])
print("RESULT " + json.dumps({"installed": installed, "gate_case_passed": passed, "test_rc": int(rc)}))
"""


def _env(name: str) -> dict[str, str]:
    return {**os.environ, mutants.ENV: name, "KVEXACT_DEVICE": "cpu"}


def test_every_mutant_patches_its_module_once_and_still_compiles():
    for m in mutants.MUTANTS:
        source = mutants.mutated_source(m)
        assert source != mutants.module_path(m).read_text(encoding="utf-8")
        assert m.mutated in source and m.original not in source
        compile(source, m.name, "exec")


def test_every_mutant_names_a_quick_gate_case_and_an_existing_kernel_test():
    quick = kernel_checks.case_names("quick")
    for m in mutants.MUTANTS:
        assert m.gate_case == "int64" or m.gate_case in quick, m
        path, _, test = m.test.partition("::")
        assert f"def {test}(" in open(path, encoding="utf-8").read(), m.test


def test_unknown_and_stale_mutants_are_rejected_by_name():
    with pytest.raises(mutants.KernelMutantError) as unknown:
        mutants.get("no-such-mutant")
    assert unknown.value.rejection is mutants.MutantRejection.UNKNOWN_MUTANT
    stale = mutants.KernelMutant("stale", "paged", "text that is not in paged.py", "x", "", "decode 0", "")
    with pytest.raises(mutants.KernelMutantError) as err:
        mutants.mutated_source(stale)
    assert err.value.rejection is mutants.MutantRejection.STALE_MUTANT


def test_installing_after_the_kernels_were_imported_is_rejected_by_name():
    import kvexact.kernels.paged  # noqa: F401

    with pytest.raises(mutants.KernelMutantError) as err:
        mutants.install("merge-weights")
    assert err.value.rejection is mutants.MutantRejection.ALREADY_IMPORTED


@pytest.mark.slow
@pytest.mark.parametrize("name", [m.name for m in mutants.MUTANTS if m.gate_case != "int64"])
def test_mutant_is_killed_by_its_gate_case_and_its_kernel_test(name):
    done = subprocess.run([sys.executable, "-c", SCRIPT, name], capture_output=True, text=True, env=_env(name),
                          timeout=900)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["installed"], result
    assert result["gate_case_passed"] is False, f"{name} survived its gate case"
    assert result["test_rc"] == 1, f"{name} survived {mutants.get(name).test} (pytest rc {result['test_rc']})"


def test_int64_cast_mutant_is_killed_by_the_overflow_probe():
    done = subprocess.run([sys.executable, "-m", "kvexact.kernels.overflow_probe", "1"], capture_output=True,
                          text=True, timeout=600, env=_env("block-id-int64-cast"))
    if done.returncode == 3:
        pytest.skip(f"this machine cannot reserve a >2^31-element pool: {done.stdout.strip()}")
    assert done.returncode != 0 and "OK" not in done.stdout, done.stdout
