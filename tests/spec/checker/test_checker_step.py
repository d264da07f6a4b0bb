"""The step API for trace validation: is (s, s') a step of the named action, with which parameters,
and if not, which conjunct failed."""

from __future__ import annotations

from tla_snippets import write_spec

from kvexact.spec.checker import ModelValue, load_model, to_python
from kvexact.spec.checker.values import Fcn

BODY = """\
CONSTANT R
VARIABLES held, free
Init == held = {} /\\ free = R
Acquire(r) == /\\ r \\in free
              /\\ free' = free \\ {r}
              /\\ held' = held \\cup {r}
Release(r) == /\\ r \\in held
              /\\ held' = held \\ {r}
              /\\ free' = free \\cup {r}
Next == \\E r \\in R : Acquire(r) \\/ Release(r)
"""


def model(tmp_path, overrides=None):
    spec = write_spec(tmp_path, BODY, "INIT Init\nNEXT Next\nCONSTANT R = {r1, r2}\n")
    return load_model(spec, constant_overrides=overrides)


def test_step_found_with_parameters(tmp_path):
    m = model(tmp_path)
    r1, r2 = ModelValue("r1"), ModelValue("r2")
    v = m.check_step("Acquire", {"held": set(), "free": {r1, r2}}, {"held": {r2}, "free": {r1}})
    assert v.ok and v.action == "Acquire" and v.params == {"r": r2} and v.failed is None
    assert v.location.endswith(".tla:6:1")


def test_step_with_given_parameters(tmp_path):
    m = model(tmp_path)
    r1, r2 = ModelValue("r1"), ModelValue("r2")
    assert m.check_step("Acquire", {"held": set(), "free": {r1, r2}}, {"held": {r1}, "free": {r2}},
                        params={"r": r1}).ok
    v = m.check_step("Acquire", {"held": set(), "free": {r1, r2}}, {"held": {r1}, "free": {r2}},
                     params={"r": r2})
    assert not v.ok and "FALSE" in v.failed


def test_step_rejected_names_the_conjunct(tmp_path):
    """Releasing r1 when nothing is held: the first conjunct (r \\in held, line 9) is false."""
    m = model(tmp_path)
    r1, r2 = ModelValue("r1"), ModelValue("r2")
    v = m.check_step("Release", {"held": set(), "free": {r1, r2}}, {"held": set(), "free": {r1, r2}})
    assert not v.ok and v.failed is not None and ":9:" in v.failed and "FALSE" in v.failed


def test_constants_bound_from_a_trace(tmp_path):
    """R bound to the Python set {"a", "b", "c"} (strings seen in a trace)."""
    m = model(tmp_path, overrides={"R": {"a", "b", "c"}})
    v = m.check_step("Acquire", {"held": {"a"}, "free": {"b", "c"}}, {"held": {"a", "c"}, "free": {"b"}})
    assert v.ok and v.params == {"r": "c"}


def test_python_values_round_trip():
    from kvexact.spec.checker.values import from_python
    value = {"a": (1, 2), "b": frozenset({True})}
    tv = from_python(value)
    assert type(tv) is Fcn and to_python(tv) == value
    assert from_python([1, 2]) == (1, 2) and from_python({1: "x", 2: "y"}) == ("x", "y")


def test_load_without_cfg_for_trace_validation(tmp_path):
    spec = write_spec(tmp_path, BODY, "")
    (tmp_path / "M.cfg").unlink()
    m = load_model(spec, constant_overrides={"R": {1, 2}})
    assert m.check_step("Acquire", {"held": set(), "free": {1, 2}}, {"held": {1}, "free": {2}}).params == {"r": 1}
