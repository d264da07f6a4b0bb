"""Finding the runtime a live adapter drives, and refusing one it was not written for.

Invariant: a live adapter module imports only after :func:`require` found the exact supported version;
otherwise importing it raises :class:`UnsupportedRuntime` (an ImportError, so ``--adapter`` reports it
as one line and exits 2). :func:`require` settles the kernels' device policy first: the runtimes import
Triton, whose library functions are built for the interpreter or the compiler at that import.
"""

from __future__ import annotations

import enum
from importlib import metadata

from kvexact.kernels import device
from kvexact.reference.rejections import Rejected

SUPPORTED = {"vllm": "0.33.0", "sglang": "0.5.23"}
BUILD_HINT = "build an environment with scripts/runtime-env.sh"


class RuntimeRejection(enum.Enum):
    """Why a live adapter refused the runtime it found."""

    NOT_INSTALLED = "the runtime's package is not importable here"
    UNSUPPORTED_VERSION = "the installed version is not the one the live adapter was written for"


class UnsupportedRuntime(Rejected, ImportError):
    """A live adapter cannot drive the runtime installed here."""


def require(package: str) -> str:
    """The installed version of ``package`` if it is the supported one; else :class:`UnsupportedRuntime`."""
    device.settle()  # before the runtime imports triton (TRITON_INTERPRET is read when triton builds tl.*)
    want = SUPPORTED[package]
    try:
        found = metadata.version(package)
    except metadata.PackageNotFoundError:
        raise UnsupportedRuntime(RuntimeRejection.NOT_INSTALLED,
                                 f"{package} is not installed; the live adapter needs {package}=={want} "
                                 f"({BUILD_HINT})") from None
    if found != want:
        raise UnsupportedRuntime(RuntimeRejection.UNSUPPORTED_VERSION,
                                 f"found {package} {found}; the live adapter supports {package}=={want} only")
    return found
