"""Helper the reference's trace tests share: a recorded reference trace checked step by step against a
shipped spec with the embedded checker's step API (each record must be a step of its named action)."""

from __future__ import annotations

import json
from pathlib import Path

from kvexact.reference.projection import TraceRecorder
from kvexact.spec.checker.model import action_of
from kvexact.spec.itf import decode

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
    model = _model(spec, constants)
    missing = set(model.variables) - set(rec.initial_state)
    assert not missing, f"{spec}.tla has variables the projection lacks: {sorted(missing)}"
    json.dumps(rec.records)  # plain JSON values only
    prev = {k: decode(v, model_values) for k, v in rec.initial_state.items()}
    actions = []
    for r in rec.records:
        assert r.get("in_spec", True), r["action"]
        state = {k: decode(v, model_values) for k, v in r["state"].items()}
        params = {k: decode(v, model_values) for k, v in r["params"].items()}
        verdict = model.check_step(action_of(spec, r["action"]), prev, state, params)
        assert verdict.ok, (r["action"], params, verdict)
        actions.append(r["action"])
        prev = state
    return actions
