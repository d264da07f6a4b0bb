"""Hybrid cache groups (seed 0x07C): one prefix hit that every cache group can serve.

Invariant: with cache groups of block sizes ``P_g`` the hit length ``L`` is the largest multiple of
``A = lcm(P_g)`` with ``L <= cap`` that every group serves: a full-attention group serves ``L`` when all
its blocks ``j < L / P_g`` are cached; a sliding-window group of window ``W`` when the
``ceil((W - 1) / P_g)`` blocks just before ``L / P_g`` (those at index >= 0) are cached. ``L = 0`` is
always served. A digest present in one group but absent in another is not a partial hit (0x07C); the
groups must agree on one common frontier. Presence is by exact token prefix, never by hash; a
published prompt adds blocks only from its own converged hit up to its A-aligned length.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence

import attrs

from kvexact.reference.rejections import Rejected


class HybridRejection(enum.Enum):
    NO_GROUPS = "a hybrid lookup needs at least one cache group"
    BAD_BLOCK_SIZE = "a group's block size must be a positive integer"
    BAD_WINDOW = "a sliding window must span at least two tokens"
    NEGATIVE_CAP = "the hit cap must be non-negative"


@attrs.frozen
class CacheGroup:
    """A cache group: its block size and, for sliding-window attention, its window in tokens."""

    block_size: int
    window: int | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.block_size, int) or self.block_size < 1:
            raise Rejected(HybridRejection.BAD_BLOCK_SIZE, f"block size {self.block_size!r}")
        if self.window is not None and self.window < 2:
            raise Rejected(HybridRejection.BAD_WINDOW, f"window {self.window!r}")

    def needed_blocks(self, length: int) -> range:
        """The block indices this group must hold to serve a hit of ``length`` tokens."""
        stop = length // self.block_size
        if self.window is None:
            return range(stop)
        return range(max(0, stop - math.ceil((self.window - 1) / self.block_size)), stop)


def alignment(groups: Sequence[CacheGroup]) -> int:
    """A = lcm of the groups' block sizes: a common hit ends on a block boundary of every group."""
    if not groups:
        raise Rejected(HybridRejection.NO_GROUPS)
    return math.lcm(*(g.block_size for g in groups))


def converged_hit(groups: Sequence[CacheGroup], cached: Sequence[Iterable[int]], cap: int) -> int:
    """The largest A-aligned length <= ``cap`` that every group serves from its ``cached`` block indices."""
    a = alignment(groups)
    if cap < 0:
        raise Rejected(HybridRejection.NEGATIVE_CAP, f"cap {cap}")
    held = [frozenset(c) for c in cached]
    for length in range(cap - cap % a, 0, -a):
        if all(set(g.needed_blocks(length)) <= h for g, h in zip(groups, held, strict=True)):
            return length
    return 0


def cached_blocks(group: CacheGroup, query: Sequence[int], prefixes: Iterable[Sequence[int]]) -> frozenset[int]:
    """Block indices j of ``query`` whose token prefix ``query[:(j + 1) * P]`` this group holds."""
    held = {tuple(p) for p in prefixes}
    p = group.block_size
    return frozenset(j for j in range(len(query) // p) if tuple(query[:(j + 1) * p]) in held)


@attrs.frozen
class HybridIndex:
    """Cached blocks per group as a multiset of token prefixes (one count per physical block).

    Publishing a prompt reuses its own converged hit and adds one block per group for each block from
    that hit up to the prompt's A-aligned length (publication stops at a frontier all groups share)."""

    groups: tuple[CacheGroup, ...]
    counts: tuple[Mapping[tuple[int, ...], int], ...]

    @classmethod
    def empty(cls, groups: Sequence[CacheGroup]) -> HybridIndex:
        alignment(groups)
        return cls(tuple(groups), tuple({} for _ in groups))

    def lookup(self, query: Sequence[int]) -> int:
        """The converged hit of a logits-producing request (cap ``len(query) - 1``)."""
        held = [cached_blocks(g, query, [p for p, n in c.items() if n > 0])
                for g, c in zip(self.groups, self.counts, strict=True)]
        return converged_hit(self.groups, held, max(0, len(query) - 1))

    def publish(self, tokens: Sequence[int]) -> HybridIndex:
        hit, stop = self.lookup(tokens), len(tokens) - len(tokens) % alignment(self.groups)
        counts = []
        for g, c in zip(self.groups, self.counts, strict=True):
            c = dict(c)
            for end in range(hit + g.block_size, stop + 1, g.block_size):
                c[tuple(tokens[:end])] = c.get(tuple(tokens[:end]), 0) + 1
            counts.append(c)
        return attrs.evolve(self, counts=tuple(counts))

    def evict(self, group: int, prefix: Sequence[int]) -> HybridIndex:
        """Drop one block holding ``prefix`` in ``group`` (none held: nothing changes)."""
        c = dict(self.counts[group])
        if c.get(tuple(prefix), 0) > 0:
            c[tuple(prefix)] -= 1
        return attrs.evolve(self, counts=self.counts[:group] + (c,) + self.counts[group + 1:])
