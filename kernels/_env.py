"""The one place that chooses how Triton kernels run.

Invariant: when no CUDA device is visible, ``TRITON_INTERPRET=1`` is set before any module of
``kvexact.kernels`` imports ``triton``; with CUDA present the kernels compile natively. A user may
force either mode by setting ``TRITON_INTERPRET`` themselves before importing kvexact.
"""

from __future__ import annotations

import os


def cuda_available() -> bool:
    """True when torch is importable and sees at least one CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def configure_triton() -> bool:
    """Set ``TRITON_INTERPRET=1`` when there is no CUDA device; return True when interpreting."""
    if "TRITON_INTERPRET" not in os.environ and not cuda_available():
        os.environ["TRITON_INTERPRET"] = "1"
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


INTERPRETED = configure_triton()
