"""Steps are named once: every action of the allocation specs has exactly one reference step, named for
it in snake_case, and no step goes by a second name."""

from __future__ import annotations

from collections import Counter

import pytest

from kvexact.reference import lifecycle
from kvexact.reference.allocator import Allocator
from kvexact.spec.checker.model import snake_case, spec_actions


def _steps() -> dict[str, object]:
    found = [(name, obj) for scope in (vars(Allocator), vars(lifecycle)) for name, obj in scope.items()
             if getattr(obj, "is_step", False)]
    return dict(found)


@pytest.mark.parametrize("spec", ["KVAllocation", "CowPublication"])
def test_every_action_has_a_step_of_its_name(spec):
    steps = _steps()
    missing = [a for a in spec_actions(spec) if snake_case(a) not in steps]
    assert missing == []


def test_no_step_has_a_second_name():
    names_per_step = Counter(id(obj) for scope in (vars(Allocator), vars(lifecycle)) for obj in scope.values()
                             if getattr(obj, "is_step", False))
    assert max(names_per_step.values()) == 1
    assert len(_steps()) == len(names_per_step)
