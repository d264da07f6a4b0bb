"""Named rejections of the kernel host wrappers (checked before any launch).

Invariant: a host wrapper either launches on inputs that satisfy its contract or raises
:class:`KernelInputError` carrying one :class:`KernelRejection` member and a detail naming the argument.
``KernelInputError`` is a :class:`kvexact.reference.rejections.Rejected` where that module imports (it needs
attrs); on a bare GPU stack without attrs it is a plain ``ValueError`` subclass with the same fields.
"""

from __future__ import annotations

import enum


class KernelRejection(enum.Enum):
    WRONG_DTYPE = "a tensor has a dtype the kernel does not accept"
    WRONG_SHAPE = "a tensor has the wrong rank or extent"
    WRONG_DEVICE = "tensors are on different devices"
    HEAD_GROUP_MISMATCH = "query heads are not a multiple of KV heads"
    NEGATIVE_LENGTH = "a sequence or chunk length is negative"
    BLOCK_TABLE_TOO_SHORT = "a block table has fewer entries than a length needs"
    BLOCK_ID_OUT_OF_RANGE = "a referenced block id is outside the pool"
    SLOT_OUT_OF_RANGE = "a slot is outside the pool and not -1"
    DUPLICATE_SLOT = "two tokens write the same slot in one launch"
    DUPLICATE_DESTINATION = "a block is the destination of two copies in one launch"
    DESTINATION_IS_SOURCE = "a block is both a source and a destination in one launch"
    NON_POSITIVE_SPLITS = "the number of splits must be positive"
    BAD_COVERAGE = "a chunk's sequence range is empty or outside the batch"
    PATH_NOT_COVERED = "a sequence's chunk path is empty where a query needs keys"


try:  # the project-wide exception, when the reference layer's dependencies are installed
    from kvexact.reference.rejections import Rejected as _Base
except ImportError:  # pragma: no cover - bare GPU stack without attrs

    class _Base(Exception):  # type: ignore[no-redef]
        def __init__(self, reason: enum.Enum, detail: str = ""):
            self.reason = reason
            self.detail = detail
            super().__init__(f"{type(reason).__name__}.{reason.name}: {detail}")


class KernelInputError(_Base, ValueError):
    """Bad input to a kernel host wrapper: ``reason`` names the rule, ``detail`` the argument."""

    def __init__(self, reason: KernelRejection, detail: str = ""):
        super().__init__(reason, detail)


class DeviceRejection(enum.Enum):
    UNKNOWN_DEVICE = "a device name other than cpu or cuda"
    NO_CUDA = "CUDA was asked for but torch sees no CUDA device"
    ALREADY_SETTLED = "the device was already chosen (and the kernels built for it) before this request"
    TRITON_IMPORTED_FIRST = "triton was imported under the other interpreter mode before the device settled"


class DeviceError(_Base, ValueError):
    """A device the policy cannot honour: ``reason`` names the rule, ``detail`` what was asked."""

    def __init__(self, reason: DeviceRejection, detail: str = ""):
        super().__init__(reason, detail)
