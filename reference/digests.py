"""Canonical encoding and SHA-256 digests shared by manifests, keys and namespaces.

Invariant: ``canonical_bytes`` depends only on the value, never on field or dict insertion order;
tuples and lists encode alike, bytes encode as tagged hex, so equal values have equal digests.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Iterable
from typing import Any

import attrs


def _plain(value: Any) -> Any:
    """A JSON-encodable projection of ``value`` (attrs records become field-name maps)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        raise TypeError("floats are not canonical; use integers or strings")
    if isinstance(value, bytes):
        return {"$bytes": value.hex()}
    if isinstance(value, enum.Enum):
        return {"$enum": f"{type(value).__name__}.{value.name}"}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return {"$set": sorted((_plain(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if attrs.has(type(value)):
        return {f.name: _plain(getattr(value, f.name)) for f in attrs.fields(type(value))}
    raise TypeError(f"cannot encode {type(value).__name__} canonically")


def canonical_bytes(value: Any) -> bytes:
    """UTF-8 JSON with sorted keys and no whitespace: the one canonical encoding of the project."""
    return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sha256_hex(value: Any) -> str:
    """SHA-256 (hex) of the canonical encoding of ``value``."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


def as_tuple(values: Iterable[Any]) -> tuple[Any, ...]:
    """attrs converter: any iterable to a tuple (records stay hashable and immutable)."""
    return tuple(values)
