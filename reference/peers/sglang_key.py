"""SGLang 0.5.23 radix keys (docs/peers/sglang.md §1), and the profile's named errors.

A key is a sequence of *units* (tokens, or token bigrams in EAGLE mode) plus two namespace strings.
Invariants: ``len(key)`` counts units; slicing keeps the namespaces; ``match`` is the longest common
prefix floored to the page size and is only defined between keys of one namespace and one unit mode.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import attrs

from kvexact.reference.rejections import Rejected


class SGLangRejection(enum.Enum):
    """What the profile refuses, each where SGLang 0.5.23 raises or asserts (plus bad-input guards)."""

    NAMESPACE_MISMATCH = "key match across different extra_key, cache_salt or bigram mode (ValueError)"
    KEY_INDEX_OUT_OF_RANGE = "integer index outside the key (IndexError)"
    BAD_TOKEN = "a token id that is not an int (input guard)"
    BAD_PAGE_SIZE = "page size below 1 (input guard)"
    UNKNOWN_EVICTION_POLICY = "eviction policy name SGLang does not know (ValueError)"
    POLICY_NOT_REPRODUCED = "tlru: exists in 0.5.23 but its semantics are not recorded in docs/peers/sglang.md"
    VALUE_SHORTER_THAN_KEY = "insert value has fewer slots than the aligned key has units (input guard)"
    FOREIGN_NODE = "lock walk left the tree: the node belongs to another tree (AssertionError)"
    REMATCH_SHORT = "checkpoint's re-match is shorter than the key it just inserted (AssertionError)"
    PAGE_MISALIGNED_ALLOC = "paged alloc of a token count that is not a page multiple (AssertionError)"
    PAGE_MISALIGNED_SEGMENT = "free_segment start position not on a page boundary (AssertionError)"
    NO_REQUEST_ROW = "request has no req_to_token row (input guard)"
    LEAF_NOT_IN_TREE = "evict popped a leaf its parent no longer holds, e.g. one unlocked after eviction (AssertionError)"


class SGLangError(Rejected, ValueError):
    """A named refusal of the SGLang profile; also a ValueError, as SGLang's own checks mostly are."""


def _check_token(tok: Any, where: str) -> int:
    if not isinstance(tok, int) or isinstance(tok, bool):
        raise SGLangError(SGLangRejection.BAD_TOKEN, f"{where}: token {tok!r} is not an int")
    return tok


@attrs.frozen(repr=False)
class RadixKey:
    """``units``: token ids, or ``(t[i], t[i+1])`` pairs when ``is_bigram``; namespaces travel with slices."""

    units: tuple
    extra_key: str | None = None
    cache_salt: str | None = None
    is_bigram: bool = False

    @classmethod
    def of(cls, token_ids: Iterable[int], extra_key: str | None = None, cache_salt: str | None = None,
           limit: int | None = None) -> RadixKey:
        """A plain key over raw tokens; ``limit`` caps the raw tokens used (0.5.23's ``limit``)."""
        toks = [_check_token(t, f"RadixKey token {i}") for i, t in enumerate(token_ids)]
        if limit is not None:
            toks = toks[:limit]
        return cls(tuple(toks), extra_key, cache_salt, False)

    def bigram_view(self) -> RadixKey:
        """EAGLE view: N raw tokens become N-1 pair units (a copy; SGLang flips the caller's key)."""
        if self.is_bigram:
            return self
        u = self.units
        return RadixKey(tuple(zip(u, u[1:], strict=False)), self.extra_key, self.cache_salt, True)

    def __len__(self) -> int:
        return len(self.units)

    def __iter__(self) -> Iterator:
        return iter(self.units)

    def __getitem__(self, idx: int | slice) -> RadixKey:
        if isinstance(idx, slice):
            return RadixKey(self.units[idx], self.extra_key, self.cache_salt, self.is_bigram)
        try:
            unit = self.units[idx]
        except IndexError:
            raise SGLangError(SGLangRejection.KEY_INDEX_OUT_OF_RANGE,
                              f"index {idx} of a key of length {len(self)}") from None
        return RadixKey((unit,), self.extra_key, self.cache_salt, self.is_bigram)

    def page_aligned(self, page_size: int) -> RadixKey:
        """The key truncated to a multiple of ``page_size`` units."""
        return self[: len(self) // page_size * page_size]

    def namespace(self) -> tuple[str | None, str | None, bool]:
        return (self.extra_key, self.cache_salt, self.is_bigram)

    def match(self, other: RadixKey, page_size: int = 1) -> int:
        """Exact longest common prefix of units, rounded down to a multiple of ``page_size``."""
        if self.namespace() != other.namespace():
            raise SGLangError(SGLangRejection.NAMESPACE_MISMATCH,
                              f"{self.namespace()} against {other.namespace()}")
        n = 0
        for a, b in zip(self.units, other.units, strict=False):
            if a != b:
                break
            n += 1
        return n // page_size * page_size

    def child_key(self, page_size: int = 1) -> Any:
        """The selector under which this key's node hangs from its parent (§1, "Child keys")."""
        plain = self.units[0] if page_size == 1 else tuple(self.units[:page_size])
        if self.cache_salt is not None:
            return ((self.extra_key, self.cache_salt), plain)
        if self.extra_key is not None:
            return (self.extra_key, plain)
        return plain

    def __repr__(self) -> str:
        preview = list(self.units[:10])
        more = "..." if len(self.units) > 10 else ""
        return f"RadixKey(extra_key={self.extra_key!r}, token_ids={preview}{more})"


def as_key(key: RadixKey | Sequence[int]) -> RadixKey:
    """Accept a RadixKey or a plain token sequence (no namespace)."""
    return key if isinstance(key, RadixKey) else RadixKey.of(key)
