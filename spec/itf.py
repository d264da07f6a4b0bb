"""Traces in Apalache's Informal Trace Format (ITF): the one place values and documents are encoded and
decoded, for the checker's counterexamples, the reference's trace records and trace validation.

Two encodings of values, both read back by :func:`decode`:

* :func:`encode` writes a checker value the way Apalache does: integers ``{"#bigint": "n"}``, model values
  ``{"#unserializable": name}``, sequences and tuples as lists, sets ``{"#set": [...]}`` in TLC's order,
  records as objects, other functions ``{"#map": [[k, v], ...]}``.
* :func:`encode_plain` writes a projection built of Python values: integers and model values (by name)
  as plain JSON, tuples ``{"#tup": [...]}``, lists as sequences, sets sorted by their JSON text, dicts as
  records, and :class:`Fn` (a TLA+ function) as ``#map``; :func:`plain` writes a checker value (what the
  reference's recorder keeps) in the same plain form, when a trace is written to a file.

Invariant: ``decode(encode(v)) == v`` for every finite checker value, and ``decode`` of
``encode_plain(x)`` equals ``from_python`` of ``x`` with model values named in ``model_values``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from kvexact.spec.checker.values import (
    Fcn,
    LazyFcn,
    LazySet,
    ModelValue,
    from_python,
    order_key,
    ordered_elements,
)

FORMAT = "ITF"
FORMAT_DESCRIPTION = "https://apalache-mc.org/docs/adr/015adr-trace.html"


class ITFError(ValueError):
    """A document that is not an ITF trace: says what is missing."""


class Fn(dict):
    """A TLA+ function in a Python projection (encoded as ``#map``), as opposed to a record (a plain dict)."""


def encode(v: Any) -> Any:
    """ITF JSON of a checker value (or of a value parsed from TLC's output)."""
    t = type(v)
    if t is bool or t is str:
        return v
    if t is int:
        return {"#bigint": str(v)}
    if t is ModelValue:
        return {"#unserializable": v.name}
    if t is tuple:
        return [encode(x) for x in v]
    if t is frozenset or isinstance(v, LazySet):
        return {"#set": [encode(x) for x in ordered_elements(v)]}
    if t is Fcn:
        if v.d and all(type(k) is str for k in v.d):
            return {k: encode(x) for k, x in sorted(v.d.items())}
        return {"#map": [[encode(k), encode(x)] for k, x in sorted(v.d.items(), key=lambda kv: order_key(kv[0]))]}
    if t is LazyFcn:
        return encode(v.materialize())
    if isinstance(v, dict):  # values parsed from TLC's output
        if v and all(isinstance(k, str) for k in v):
            return {str(k): encode(x) for k, x in v.items()}
        return {"#map": [[encode(k), encode(x)] for k, x in v.items()]}
    if isinstance(v, str):
        return str(v)
    if isinstance(v, (frozenset, set)):
        return {"#set": [encode(x) for x in v]}
    return {"#unserializable": repr(v)}


def encode_plain(value: Any) -> Any:
    """ITF JSON of a Python projection value (integers as JSON numbers)."""
    if isinstance(value, Fn):
        return {"#map": [[encode_plain(k), encode_plain(v)] for k, v in value.items()]}
    if isinstance(value, dict):
        return {str(k): encode_plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        items = [encode_plain(v) for v in value]
        return {"#set": sorted(items, key=lambda v: json.dumps(v, sort_keys=True))}
    if isinstance(value, tuple):
        return {"#tup": [encode_plain(v) for v in value]}
    if isinstance(value, list):
        return [encode_plain(v) for v in value]
    return value


def plain(v: Any) -> Any:
    """ITF JSON of a checker value in the plain form :func:`encode_plain` writes (integers as JSON numbers,
    model values by name, sets sorted by their JSON text), with sequences and tuples as lists and functions
    over strings as records. Already-plain JSON comes back equal, so a recorder's records may be either.
    Invariant: ``decode(plain(v), names) == v`` where ``names`` holds the name of every model value in ``v``."""
    t = type(v)
    if t is int or t is bool or t is str:
        return v
    if t is ModelValue:
        return v.name
    if t is tuple or t is list:
        return [plain(x) for x in v]
    if t is frozenset or t is set:
        return {"#set": sorted((plain(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True))}
    if t is Fcn:
        if all(type(k) is str for k in v.d):
            return {k: plain(x) for k, x in v.d.items()}
        return {"#map": [[plain(k), plain(x)] for k, x in sorted(v.d.items(), key=lambda kv: order_key(kv[0]))]}
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    return v


def decode(value: Any, model_values: frozenset[str] = frozenset()) -> Any:
    """ITF JSON -> the checker's value; a string named in ``model_values`` is that model value."""
    if isinstance(value, dict):
        if "#set" in value:
            return frozenset(decode(x, model_values) for x in value["#set"])
        if "#map" in value:
            return from_python({decode(k, model_values): decode(x, model_values) for k, x in value["#map"]})
        if "#tup" in value:
            return tuple(decode(x, model_values) for x in value["#tup"])
        if "#bigint" in value:
            return int(value["#bigint"])
        if "#unserializable" in value and len(value) == 1:
            return ModelValue(value["#unserializable"])
        return from_python({k: decode(x, model_values) for k, x in value.items()})
    if isinstance(value, list):
        return tuple(decode(x, model_values) for x in value)
    if isinstance(value, str) and value in model_values:
        return ModelValue(value)
    return value


def decode_state(state: dict[str, Any], model_values: Iterable[str] = ()) -> dict[str, Any]:
    """Every variable of an ITF state decoded (see :func:`decode`)."""
    mvs = frozenset(model_values)
    return {k: decode(v, mvs) for k, v in state.items()}


def document(states: Sequence[tuple[dict[str, Any], dict[str, Any]]], variables: Sequence[str],
             meta: dict[str, Any]) -> dict[str, Any]:
    """An ITF document from ``(state meta, encoded variables)`` pairs; ``meta`` joins the format fields."""
    return {"#meta": {"format": FORMAT, "format-description": FORMAT_DESCRIPTION, **meta},
            "vars": list(variables), "states": [{"#meta": m, **s} for m, s in states]}


def read_document(doc: Any) -> tuple[dict[str, Any], list[tuple[dict[str, Any], dict[str, Any]]]]:
    """``(document meta, [(state meta, encoded variables), ...])`` of a parsed ITF document."""
    if not isinstance(doc, dict) or not isinstance(doc.get("states"), list) or not doc["states"]:
        raise ITFError("an ITF trace needs a non-empty 'states' list")
    states = []
    for i, s in enumerate(doc["states"]):
        if not isinstance(s, dict):
            raise ITFError(f"state {i} is not a JSON object")
        states.append((s.get("#meta", {}), {k: v for k, v in s.items() if k != "#meta"}))
    return doc.get("#meta", {}), states
