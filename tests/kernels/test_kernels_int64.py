"""int64 addressing of paged decode: a pool of more than 2^31 elements read through a block table whose
second page is the pool's last block, in a subprocess (a wrap can kill the process)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _probe(flag: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "kvexact.kernels.overflow_probe", flag],
                          capture_output=True, text=True, timeout=300)
    if done.returncode == 3:
        pytest.skip(f"this machine cannot reserve a >2^31-element pool: {done.stdout.strip()}")
    return done


def test_decode_reads_the_last_block_of_a_pool_beyond_2_31_elements():
    done = _probe("1")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert done.stdout.strip() == "OK"


def test_the_same_probe_fails_without_the_decode_kernels_int64_cast():
    """Only the decode's cast of loaded block ids is off (the rows are written by the shipped write kernel):
    the probe exercises that cast, so removing it fails the gate's int64 check."""
    done = _probe("0")
    assert done.returncode != 0, done.stdout  # SIGSEGV (-11) or WRONG (1): the cast is what makes it pass
    assert "OK" not in done.stdout


NO_OVERCOMMIT = """
import sys
from kvexact.kernels import device, overflow_probe

def refuse(*args, **kwargs):
    raise RuntimeError("simulated: anonymous memory cannot be overcommitted")

device.empty = refuse
sys.exit(overflow_probe.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("cast", ["1", "0"])
def test_without_overcommit_the_probe_maps_a_sparse_file_and_still_decides_the_cast(cast):
    """Where anonymous memory cannot be overcommitted, the CPU probe maps sparse files instead of skipping:
    it passes with the cast and fails without it."""
    from kvexact.kernels import device as dev

    if dev.device().type != "cpu":
        pytest.skip("the sparse-file pool is the CPU's fallback")
    done = subprocess.run([sys.executable, "-c", NO_OVERCOMMIT, cast], capture_output=True, text=True, timeout=300)
    assert "CANNOT-RUN" not in done.stdout, done.stdout
    if cast == "1":
        assert done.returncode == 0 and done.stdout.strip() == "OK", done.stdout + done.stderr[-2000:]
    else:
        assert done.returncode != 0 and "OK" not in done.stdout, done.stdout
