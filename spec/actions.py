"""The actions of each shipped spec, as the embedded checker derives them from ``Next`` (TLC's split).

Naming rule (DESIGN.md, "Steps are the spec's actions"): a spec action ``CowReserve`` has one reference
twin, the step ``cow_reserve`` (:func:`snake_case`). Nothing else names an action: the recorder, trace
validation and the gate read the action list and each action's parameters from here.
"""

from __future__ import annotations

import functools
import re

from kvexact.spec import spec_dir


def snake_case(action: str) -> str:
    """The reference step name of a spec action: ``CowReserve`` -> ``cow_reserve``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", action).lower()


@functools.cache
def spec_actions(spec: str) -> dict[str, tuple[str, ...]]:
    """Action name -> parameter names, for every action of the shipped ``spec``'s ``Next``, in order."""
    from kvexact.spec.checker import load_model

    model = load_model(spec_dir() / f"{spec}.tla", spec_dir() / f"{spec}.cfg")
    actions: dict[str, tuple[str, ...]] = {}
    for split in model.actions:
        if split.label not in actions:
            _kind, definition = model.root.lookup(split.label)
            actions[split.label] = tuple(name for name, _arity in definition.params)
    return actions


def action_of(spec: str, step: str) -> str | None:
    """The action of ``spec`` named ``step`` or whose reference step is ``step``; None when it has none."""
    for action in spec_actions(spec):
        if step in (action, snake_case(action)):
            return action
    return None
