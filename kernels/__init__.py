"""Triton kernels over a paged K/V pool (vLLM V1 layout) with float64 references.

Importing this package first runs :mod:`kvexact.kernels._env`, which sets ``TRITON_INTERPRET=1``
when no CUDA device is present, so every kernel module below sees the right mode.
"""

from kvexact.kernels._env import INTERPRETED  # noqa: F401  (must run before any triton import)
