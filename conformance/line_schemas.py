"""The JSON schemas of trace files (full traces: NDJSON lines and ITF documents; partial-trace lines: header,
action and vLLM event lines), the named reasons a trace file is refused, and their one-line errors.

Invariant: :func:`shape_error` returns None exactly when the document satisfies the schema; otherwise one
line naming where, the field and what is wrong. Every refusal of a trace file is a :class:`TraceInputError`
whose ``kind`` is a :class:`Rejection` member.
"""

from __future__ import annotations

import enum
from typing import Any

import jsonschema


class Rejection(enum.Enum):
    """Why a trace file was refused before anything was evaluated (or why it does not fit the spec)."""

    NO_SUCH_FILE = "no such file"
    NOT_A_FILE = "not a regular file"
    UNREADABLE = "the file cannot be read"
    NOT_TEXT = "not UTF-8 text"
    EMPTY = "no lines"
    NOT_JSON = "a line or the document is not JSON"
    TRUNCATED = "the trace is incomplete"
    BAD_FIELD = "a field is missing or has the wrong type"
    BAD_VALUE = "a value is not ITF JSON"
    MISSING_VARIABLE = "a state lacks a variable"
    EXTRA_VARIABLE = "a state has a variable the others (or the spec) lack"
    WRONG_SPEC = "the trace was recorded for another spec"


class TraceInputError(ValueError):
    """A trace file refused at the border: one line saying where and what; ``kind`` names the reason."""

    def __init__(self, message: str, kind: Rejection = Rejection.BAD_FIELD):
        # one line whatever the file holds: a newline in a field name is shown escaped
        super().__init__("".join(c if c.isprintable() else repr(c)[1:-1] for c in message))
        self.kind = kind


def _value_schema() -> dict[str, Any]:
    """An ITF value (:mod:`kvexact.spec.itf`): a boolean, integer, string, sequence, one of the
    ``#map``/``#set``/``#tup``/``#bigint``/``#unserializable`` forms, or a record, nested to any depth (anyOf
    stops at the first form that fits: the common ones come first)."""
    ref = {"$ref": "#/$defs/value"}
    seq = {"type": "array", "items": ref}

    def form(key: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "required": [key], "maxProperties": 1, "properties": {key: schema}}

    return {"$defs": {"value": {"anyOf": [
        {"type": ["boolean", "integer", "string"]},
        form("#map", {"type": "array", "items": {"type": "array", "prefixItems": [ref, ref], "minItems": 2,
                                                 "maxItems": 2}}),
        seq, form("#set", seq), form("#tup", seq), form("#bigint", {"type": "string", "pattern": "^-?[0-9]+$"}),
        form("#unserializable", {"type": "string"}),
        {"type": "object", "propertyNames": {"pattern": "^[^#]"}, "additionalProperties": ref},
    ]}}}


VALUE_DEFS = _value_schema()["$defs"]
VALUE_SCHEMA: dict[str, Any] = {"$defs": VALUE_DEFS, "$ref": "#/$defs/value"}
VALUES = {"type": "object", "additionalProperties": {"$ref": "#/$defs/value"}}  # name -> ITF value
ACTION_NAME = {"type": "string", "minLength": 1}

NAMES = {"type": "array", "items": {"type": "string", "minLength": 1}}
HEADER_SCHEMA: dict[str, Any] = {
    "$defs": VALUE_DEFS,
    "type": "object",
    "required": ["kind", "spec"],
    "additionalProperties": False,
    "properties": {
        "kind": {"const": "partial"},
        "spec": {"type": "string", "minLength": 1},
        "constants": VALUES,
        "model_values": NAMES,
        "init": VALUES,
        "internal": NAMES,
        "silent": NAMES,
        "internal_max": {"type": "integer", "minimum": 0},
        "mode": {"enum": ["exhaustive", "minimal"]},
        "events": {"enum": ["vllm"]},
        "blocks": {"type": "integer", "minimum": 1},
        "requests": {"type": "integer", "minimum": 1},
        "max_candidates": {"type": "integer", "minimum": 1},
    },
}
# a full trace in NDJSON: the header, one record per step, then the end line (which proves it complete)
TRACE_HEADER_SCHEMA: dict[str, Any] = {
    "$defs": VALUE_DEFS,
    "type": "object",
    "required": ["kind", "spec", "initial_state"],
    "properties": {
        "kind": {"const": "header"},
        "spec": {"type": "string", "minLength": 1},
        "constants": VALUES,
        "model_values": NAMES,
        "initial_state": {"type": "object", "minProperties": 1},  # values: VALUE_SCHEMA
    },
}
TRACE_RECORD_SCHEMA: dict[str, Any] = {
    "$defs": VALUE_DEFS,
    "type": "object",
    "required": ["action", "state"],
    "properties": {"action": ACTION_NAME, "params": VALUES, "state": {"type": "object"},  # values: VALUE_SCHEMA
                   "in_spec": {"type": "boolean"}},
}
TRACE_END_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["kind", "steps"],
    "additionalProperties": False,
    "properties": {"kind": {"const": "end"}, "steps": {"type": "integer", "minimum": 0}},
}
# a full trace in ITF: Apalache's document, the spec and constants in its #meta, the action in each state's
ITF_SCHEMA: dict[str, Any] = {
    "$defs": VALUE_DEFS,
    "type": "object",
    "required": ["#meta", "vars", "states"],
    "properties": {
        "#meta": {"type": "object", "required": ["spec"], "properties": {
            "spec": {"type": "string", "minLength": 1}, "constants": VALUES, "model_values": NAMES}},
        "vars": NAMES,
        "states": {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "required": ["#meta"],
            "properties": {"#meta": {"type": "object", "required": ["action"], "properties": {
                "action": ACTION_NAME, "params": VALUES, "in_spec": {"type": "boolean"}}}},
        }, "prefixItems": [{"type": "object", "properties": {"#meta": {"type": "object"}}}]},  # values: VALUE_SCHEMA
    },
}
HASH = {"type": ["integer", "string"]}
LINE_SCHEMAS: dict[str, dict[str, Any]] = {
    "action": {
        "$defs": VALUE_DEFS,
        "type": "object",
        "required": ["action"],
        "additionalProperties": False,
        "properties": {
            "action": {"oneOf": [{"type": "string", "minLength": 1}, NAMES]},
            "params": VALUES,
            "state": VALUES,
            "internal_max": {"type": "integer", "minimum": 0},
        },
    },
    "BlockStored": {
        "type": "object",
        "required": ["block_hashes", "parent_block_hash", "token_ids", "block_size"],
        "properties": {
            "block_hashes": {"type": "array", "items": HASH, "minItems": 1},
            "parent_block_hash": {"type": ["integer", "string", "null"]},
            "token_ids": {"type": "array"},  # only its length is read: one block_size per hash
            "block_size": {"type": "integer", "minimum": 1},
            "medium": {"type": ["string", "null"]},
            "group_idx": {"type": "integer", "minimum": 0},
        },
    },
    "BlockRemoved": {
        "type": "object",
        "required": ["block_hashes"],
        "properties": {
            "block_hashes": {"type": "array", "items": HASH, "minItems": 1},
            "medium": {"type": ["string", "null"]},
            "group_idx": {"type": "integer", "minimum": 0},
        },
    },
    "AllBlocksCleared": {"type": "object"},
    "event": {
        "type": "object",
        "required": ["event"],
        "additionalProperties": False,
        "properties": {"event": {"enum": ["BlockStored", "BlockRemoved", "AllBlocksCleared"]},
                       "fields": {"type": "object"}},
    },
}


class PartialFormatError(TraceInputError):
    """A partial-trace file that does not fit the format: one line saying where and what."""


_VALIDATORS: dict[int, Any] = {}
# JSON Schema counts 2.0 as an integer; a trace value must be a JSON integer (the decoder has no floats)
_STRICT = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=(
    jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, x: isinstance(x, int) and not isinstance(x, bool))))
_MAX_MESSAGE = 160


def shape_problem(schema: dict[str, Any], doc: Any, where: str, prefix: str = "") -> tuple[Rejection, str] | None:
    """(kind, ``where: field F: message``) for the most relevant schema violation of ``doc``, or None; the
    kind is BAD_VALUE when the violation is inside an ITF value form (``#bigint``, ``#map``, ...)."""
    validator = _VALIDATORS.get(id(schema))
    if validator is None:
        validator = _VALIDATORS[id(schema)] = _STRICT(schema)
    if validator.is_valid(doc):
        return None
    err = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if err is None:
        return None
    parts = [str(p) for p in err.absolute_path]
    whole = "(the line)"
    if len(parts) >= 2 and parts[0] == "states":  # an ITF document: name the trace state
        where, parts, whole = f"{where}: trace state {parts[1]}", parts[2:], "(the state)"
    path = "/".join(parts)
    field = (prefix + path).rstrip("/") if (prefix or path) else whole
    message = " ".join(err.message.split())
    if len(message) > _MAX_MESSAGE:
        message = message[:_MAX_MESSAGE] + "..."
    if schema is VALUE_SCHEMA or "anyOf" in err.absolute_schema_path:  # inside an ITF value (its only anyOf)
        kind = Rejection.BAD_VALUE
        if err.validator == "anyOf":
            message += " (an ITF value: boolean, integer, string, list, record, #map, #set, #tup, #bigint)"
    else:
        kind = Rejection.BAD_FIELD
    return kind, f"{where}: field {field}: {message}"


def shape_error(schema: dict[str, Any], doc: Any, where: str, prefix: str = "") -> str | None:
    """``where: field F: message`` for the most relevant schema violation of ``doc``, or None."""
    problem = shape_problem(schema, doc, where, prefix)
    return None if problem is None else problem[1]
