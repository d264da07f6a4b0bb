"""The embedded explicit-state TLA+ model checker (TLC's semantics, pure Python).

Public interface: :func:`check_model`, :func:`load_model` (a :class:`Model` with ``check_step``),
:class:`StepVerdict`, :class:`ModelValue`, :func:`to_python`, :func:`from_python`.
"""

from kvexact.spec.checker.engine import check_loaded, check_model, simulate
from kvexact.spec.checker.model import Model, StepVerdict, evaluate, load_model
from kvexact.spec.checker.values import ModelValue, from_python, to_python

__all__ = ["check_model", "check_loaded", "simulate", "load_model", "Model", "StepVerdict", "ModelValue",
           "to_python", "from_python", "evaluate"]
