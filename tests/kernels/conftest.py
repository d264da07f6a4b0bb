"""Kernel tests run on the device policy's device: the CPU under Triton's interpreter here, CUDA natively
where one is present. Tests make tensors with plain torch calls, so on CUDA the session's default torch
device is the policy's (host-side generators are made on the same device); the float64 oracle still
computes on the host and answers on its inputs' device."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _policy_device():
    import torch

    from kvexact.kernels import device as dev

    if dev.device().type == "cuda":
        torch.set_default_device(dev.device())
    yield
