"""The device policy: where every tensor of the kernels, the state machines, the differential helpers and
the gate lives, and how Triton runs there.

Invariant: the policy settles once (:func:`settle`, called by every kernel module before it imports
Triton, and by every factory below). Settled on ``cuda``, ``TRITON_INTERPRET`` is cleared and Triton
compiles natively; settled on ``cpu``, ``TRITON_INTERPRET=1`` is set (this is the only place that sets it)
and the kernels run under Triton's interpreter. The default is ``cuda`` when torch sees a CUDA device and
the user did not set ``TRITON_INTERPRET=1``, else ``cpu``; :func:`select` (the subcommands' ``--device``)
overrides it before it settles, and ``KVEXACT_DEVICE`` carries a choice to subprocesses. Kernel-facing code
makes its tensors only through the factories below (``tests/kernels/test_kernels_device_policy.py``
enforces it), so a native kernel never sees a host pointer.

This module imports nothing but the standard library and torch (the bare GPU stack), and Triton only to check
one that is already imported; ``click_option`` imports click only when called.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from kvexact.kernels.errors import DeviceError, DeviceRejection

NAMES = ("cpu", "cuda")
ENV = "KVEXACT_DEVICE"
_chosen: str | None = None  # what select() asked for
_settled: str | None = None  # what the kernels were built for


def cuda_available() -> bool:
    """True when torch is importable and sees at least one CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def default_name() -> str:
    """``KVEXACT_DEVICE`` when set (how a choice reaches subprocesses), else ``cuda`` when present (and the
    interpreter was not forced by the user), else ``cpu``."""
    asked = os.environ.get(ENV)
    if asked:
        select(asked)
        return asked
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "cpu"
    return "cuda" if cuda_available() else "cpu"


def select(name: str | None) -> None:
    """Ask for ``cpu`` or ``cuda`` before the policy settles (None keeps the default).

    Raises :class:`DeviceError`: UNKNOWN_DEVICE, NO_CUDA, or ALREADY_SETTLED when the kernels were already
    built for the other device in this process."""
    global _chosen
    if name is None:
        return
    if name not in NAMES:
        raise DeviceError(DeviceRejection.UNKNOWN_DEVICE, f"--device {name!r}: expected one of {', '.join(NAMES)}")
    if name == "cuda" and not cuda_available():
        raise DeviceError(DeviceRejection.NO_CUDA, "--device cuda: torch sees no CUDA device here")
    if _settled is not None and _settled != name:
        raise DeviceError(DeviceRejection.ALREADY_SETTLED,
                          f"--device {name}: this process already runs the kernels on {_settled}")
    _chosen = name
    os.environ[ENV] = name  # subprocesses (the int64 probe, a benchmark) follow the same choice


def settle() -> str:
    """The device name, fixing it (and ``TRITON_INTERPRET``) on the first call.

    Raises :class:`DeviceError` TRITON_IMPORTED_FIRST when Triton was imported (by a runtime, an adapter)
    under the other mode: its own ``@triton.jit`` library functions (``tl.max``, ``tl.sum``...) were built
    then, and a kernel calling them would fail inside the interpreter or the compiler."""
    global _settled
    if _settled is None:
        name = _chosen or default_name()
        if runs_interpreted(name):
            os.environ["TRITON_INTERPRET"] = "1"
        else:
            os.environ.pop("TRITON_INTERPRET", None)
        _refuse_triton_built_for_other_mode(name)
        _settled = name
    return _settled


def runs_interpreted(name: str) -> bool:
    """Whether kernels built for the device ``name`` run under Triton's interpreter: only on the cpu."""
    return name == "cpu"


def _refuse_triton_built_for_other_mode(name: str) -> None:
    if "triton.language.standard" not in sys.modules:
        return
    from triton.language import standard
    from triton.runtime.interpreter import InterpretedFunction

    if isinstance(standard.max, InterpretedFunction) != (name == "cpu"):
        mode = "interpreter" if name == "cpu" else "compiler"
        raise DeviceError(DeviceRejection.TRITON_IMPORTED_FIRST,
                          f"triton was imported before kvexact chose the {name} device, so its library functions "
                          f"were not built for the {mode}; call kvexact.kernels.device.settle() before importing "
                          "anything that imports triton")


def interpreted() -> bool:
    """True when the kernels run under Triton's CPU interpreter."""
    return settle() == "cpu"


def device() -> Any:
    """The ``torch.device`` every kernel-facing tensor is made on."""
    import torch

    return torch.device(settle())


# ---- factories: the only way kernel-facing code makes a tensor ------------------------------------------


def tensor(data: Any, dtype: Any) -> Any:
    import torch

    return torch.tensor(data, dtype=dtype, device=device())


def full(shape: Any, value: float, dtype: Any = None) -> Any:
    import torch

    return torch.full(shape, value, dtype=dtype or torch.float32, device=device())


def zeros(shape: Any, dtype: Any = None) -> Any:
    import torch

    return torch.zeros(shape, dtype=dtype or torch.float32, device=device())


def empty(shape: Any, dtype: Any = None) -> Any:
    import torch

    return torch.empty(shape, dtype=dtype or torch.float32, device=device())


def arange(n: int, dtype: Any = None) -> Any:
    import torch

    return torch.arange(n, dtype=dtype or torch.int64, device=device())


def randn(shape: Any, generator: Any, dtype: Any = None) -> Any:
    """Standard normal float32 drawn on the host from ``generator`` (a seeded ``torch.Generator``), cast to
    ``dtype`` there, then moved: the same numbers on every device, so float64 oracles agree across devices."""
    import torch

    host = torch.randn(shape, generator=generator, dtype=torch.float32, device="cpu")
    return host.to(dtype or torch.float32).to(device())


def randperm(n: int, generator: Any) -> Any:
    """A permutation of ``range(n)`` (int64) drawn on the host from ``generator``, then moved."""
    import torch

    return torch.randperm(n, generator=generator, device="cpu").to(device())


def randn_native(shape: Any, dtype: Any, seed: int) -> Any:
    """Standard normal values drawn on the device itself (fast for benchmark-sized pools; unlike
    :func:`randn`, the numbers differ between devices)."""
    import torch

    torch.manual_seed(seed)
    return torch.randn(shape, dtype=dtype, device=device())


def generator(seed: int) -> Any:
    """A seeded host generator for :func:`randn`."""
    import torch

    return torch.Generator(device="cpu").manual_seed(seed)


def to_device(t: Any) -> Any:
    """``t`` on the policy's device (no copy when it is already there)."""
    return t.to(device())


def click_option(func: Any, expose: bool = False) -> Any:
    """``--device cpu|cuda`` for a click subcommand: applied while parsing (before the command imports any
    kernel); an impossible request is a one-line usage error (exit 2). With ``expose`` the command also
    receives the name asked for (None when not given) as ``device_name``."""
    import click

    def apply(ctx: Any, _param: Any, value: str | None) -> str | None:
        try:
            select(value)
        except DeviceError as exc:
            raise click.UsageError(exc.detail, ctx) from None
        return value

    return click.option("--device", "device_name", type=click.Choice(NAMES), default=None, is_eager=True,
                        expose_value=expose, callback=apply,
                        help="Where the kernels and their tensors run (default: cuda when present, else the "
                             "cpu under Triton's interpreter).")(func)
