"""The JSON schemas of partial-trace lines (header, action and vLLM event lines) and their one-line errors.

Invariant: :func:`shape_error` returns None exactly when the document satisfies the schema; otherwise one
line naming where, the field and what is wrong.
"""

from __future__ import annotations

from typing import Any

import jsonschema

NAMES = {"type": "array", "items": {"type": "string", "minLength": 1}}
HEADER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["kind", "spec"],
    "additionalProperties": False,
    "properties": {
        "kind": {"const": "partial"},
        "spec": {"type": "string", "minLength": 1},
        "constants": {"type": "object"},
        "model_values": NAMES,
        "init": {"type": "object"},
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
HASH = {"type": ["integer", "string"]}
LINE_SCHEMAS: dict[str, dict[str, Any]] = {
    "action": {
        "type": "object",
        "required": ["action"],
        "additionalProperties": False,
        "properties": {
            "action": {"oneOf": [{"type": "string", "minLength": 1}, NAMES]},
            "params": {"type": "object"},
            "state": {"type": "object"},
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


class PartialFormatError(ValueError):
    """A partial-trace file that does not fit the format: one line saying where and what."""


_VALIDATORS: dict[int, Any] = {}


def shape_error(schema: dict[str, Any], doc: Any, where: str, prefix: str = "") -> str | None:
    """``where: field F: message`` for the most relevant schema violation of ``doc``, or None."""
    validator = _VALIDATORS.get(id(schema))
    if validator is None:
        validator = _VALIDATORS[id(schema)] = jsonschema.Draft202012Validator(schema)
    if validator.is_valid(doc):
        return None
    err = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if err is None:
        return None
    path = "/".join(str(p) for p in err.absolute_path)
    field = prefix + path if (prefix or path) else "(the line)"
    return f"{where}: field {field}: {err.message}"
