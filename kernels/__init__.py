"""Triton kernels over a paged K/V pool (vLLM V1 layout) with float64 references.

Where they run is decided in one place, :mod:`kvexact.kernels.device`: every kernel module settles that
policy (CUDA natively when present, else the CPU under Triton's interpreter) before it imports Triton.
"""

import os as _os

if _os.environ.get("KVEXACT_KERNEL_MUTANT"):  # a hand-written kernel mutant (kvexact.kernels.mutants), tests only
    from kvexact.kernels import mutants as _mutants

    _mutants.install(_os.environ["KVEXACT_KERNEL_MUTANT"])
