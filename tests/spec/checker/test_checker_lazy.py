"""Lazily compiled split actions (``load_model(..., lazy_actions=True)``, what trace validation loads):
nothing of Next's split is compiled at load, the step API compiles none of it, and each split action,
compiled on first use, generates exactly the successors of the eagerly compiled one."""

from __future__ import annotations

import pytest
from test_checker_step import BODY  # Acquire(r) \/ Release(r) over R
from tla_snippets import write_spec

from kvexact.spec import spec_dir
from kvexact.spec.checker import load_model
from kvexact.spec.checker.model import SplitAction
from kvexact.spec.checker.values import canon

STATES = 60  # distinct states compared, breadth first from the initial ones


def _compiled(model) -> int:
    return sum("act" in vars(a) for a in model.actions)


def _successors(model, s: dict) -> list[list[tuple]]:
    """Per split action (in order), its successors of ``s`` as canon keys, duplicates included."""
    out = []
    for a in model.actions:
        found: list = []
        model.successors(s, a, found)
        out.append([tuple(canon(n[v]) for v in model.variables) for n in found])
    return out


def _compare(eager, lazy) -> int:
    """Breadth first over ``eager``'s states: both models give the same successors, action by action."""
    assert [(a.label, a.env) for a in lazy.actions] == [(a.label, a.env) for a in eager.actions]
    frontier: list = []
    eager.init_states(frontier.append)
    seen: set = set()
    compared = 0
    while frontier and compared < STATES:
        s = frontier.pop(0)
        if eager.key(s) in seen:
            continue
        seen.add(eager.key(s))
        by_action = _successors(eager, s)
        assert _successors(lazy, s) == by_action
        compared += 1
        for a in eager.actions:
            eager.successors(s, a, frontier)
    return compared


def test_lazy_split_actions_give_the_eager_successors_on_the_kvallocation_ci_model():
    spec, cfg = spec_dir() / "KVAllocation.tla", spec_dir() / "KVAllocation.cfg"
    eager = load_model(spec, cfg)
    lazy = load_model(spec, cfg, lazy_actions=True)
    assert len(lazy.actions) > 30 and _compiled(lazy) == 0 and _compiled(eager) == len(eager.actions)
    assert _compare(eager, lazy) == STATES
    assert _compiled(lazy) == len(lazy.actions)


def test_the_step_api_compiles_no_split_action(tmp_path):
    spec = write_spec(tmp_path, BODY, "INIT Init\nNEXT Next\nCONSTANT R = {1, 2, 3}\n")
    lazy = load_model(spec, lazy_actions=True)
    assert [a.label for a in lazy.actions] == ["Acquire", "Release"] * 3 and _compiled(lazy) == 0
    assert lazy.check_step("Acquire", {"held": set(), "free": {1, 2, 3}}, {"held": {2}, "free": {1, 3}},
                           params={"r": 2}).ok
    assert lazy.check_step("Release", {"held": {2}, "free": {1, 3}}, {"held": set(), "free": {1, 2, 3}}).params \
        == {"r": 2}
    assert _compiled(lazy) == 0
    assert _compare(load_model(spec), lazy) == 8  # every subset of R


def test_a_split_action_is_built_once_and_then_a_plain_attribute():
    built: list[int] = []
    split = SplitAction("A", "here", {}, build=lambda: built.append(1) or "act")
    assert "act" not in vars(split)
    assert (split.act, split.act, built, split.build) == ("act", "act", [1], None)
    with pytest.raises(AttributeError):
        _ = SplitAction("A", "here", {}).act  # neither act nor build
