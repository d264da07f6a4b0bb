"""The actions of a spec, as the embedded checker derives them from ``Next`` (TLC's split of it).

Naming rule (DESIGN.md, "Steps are the spec's actions"): a spec action ``CowReserve`` has one reference
twin, the step ``cow_reserve`` (:func:`snake_case`). Nothing else names an action: the recorder, trace
validation and the gate read the action list and each action's parameters from here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

from kvexact.spec import spec_dir


def snake_case(action: str) -> str:
    """The reference step name of a spec action: ``CowReserve`` -> ``cow_reserve``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", action).lower()


def model_actions(model: Any) -> dict[str, tuple[str, ...]]:
    """Action name -> parameter names, for every action of a loaded model's ``Next``, in order."""
    actions: dict[str, tuple[str, ...]] = {}
    for split in model.actions:
        if split.label not in actions:
            _kind, definition = model.root.lookup(split.label)
            actions[split.label] = tuple(name for name, _arity in definition.params)
    return actions


@functools.cache
def spec_actions(spec: str) -> dict[str, tuple[str, ...]]:
    """:func:`model_actions` of the shipped ``spec`` with its CI model."""
    from kvexact.spec.checker import load_model

    return model_actions(load_model(spec_dir() / f"{spec}.tla", spec_dir() / f"{spec}.cfg", lazy_actions=True))


def find_action(actions: Iterable[str], step: str) -> str | None:
    """The action named ``step``, or whose reference step is ``step``; None when there is none."""
    for action in actions:
        if step in (action, snake_case(action)):
            return action
    return None


def action_of(spec: str, step: str) -> str | None:
    """:func:`find_action` among the shipped ``spec``'s actions."""
    return find_action(spec_actions(spec), step)
