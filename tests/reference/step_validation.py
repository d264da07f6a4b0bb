"""Helper the reference's trace tests share: a recorded reference trace checked step by step against a
shipped spec with the embedded checker's step API (each record must be a step of its named action)."""

from __future__ import annotations

import json
from pathlib import Path

from kvexact.reference.adapters import TraceRecorder
from kvexact.spec.checker.model import action_of
from kvexact.spec.itf import decode, plain

SPEC = Path(__file__).resolve().parents[2] / "spec"


_MODELS: dict = {}


def _model(spec: str, constants: dict):
    """The spec compiled with ``constants`` bound (compiled once per spec and constants)."""
    from kvexact.spec.checker.model import load_model
    from kvexact.spec.checker.values import ModelValue

    key = (spec, repr(sorted((k, sorted(v) if isinstance(v, set) else v) for k, v in constants.items())))
    if key in _MODELS:
        return _MODELS[key]
    overrides = {}
    for k, v in constants.items():
        if isinstance(v, (set, frozenset)):
            overrides[k] = frozenset(ModelValue(x) if isinstance(x, str) else x for x in v)
        else:
            overrides[k] = ModelValue(v) if isinstance(v, str) else v
    _MODELS[key] = load_model(SPEC / f"{spec}.tla", SPEC / f"{spec}.cfg", overrides)
    return _MODELS[key]


def validate(spec: str, rec: TraceRecorder, constants: dict, model_values: set[str]) -> list[str]:
    """The actions of ``rec``'s records, each checked as a step of its action; ``model_values`` must be the
    recorder's (its records hold checker values, with those names as model values), and each record must
    survive ITF JSON and back unchanged (what a trace file holds)."""
    model = _model(spec, constants)
    missing = set(model.variables) - set(rec.initial_state)
    assert not missing, f"{spec}.tla has variables the projection lacks: {sorted(missing)}"
    assert rec.model_values == model_values
    mvs = frozenset(model_values)
    for r in rec.records:
        text = json.loads(json.dumps({k: plain(v) for k, v in r["state"].items()}))
        assert {k: decode(v, mvs) for k, v in text.items()} == r["state"], r["action"]
    prev = rec.initial_state
    actions = []
    for r in rec.records:
        assert r.get("in_spec", True), r["action"]
        verdict = model.check_step(action_of(spec, r["action"]), prev, r["state"], r["params"])
        assert verdict.ok, (r["action"], r["params"], verdict)
        actions.append(r["action"])
        prev = r["state"]
    return actions
