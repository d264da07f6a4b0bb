"""SYMMETRY: one canonical fingerprint per state, as TLC computes it (the least fingerprint over the
permutations), on the fingerprint keys of values.canon.

Invariant: every state of an orbit (states equal up to a permutation of the symmetry set) gets the same
key, and states of different orbits get different keys: the key is the permuted state whose hash is
least (ties between different keys broken by a total order on keys), so it depends only on the
orbit. Permuting works on canon keys, remembering the permuted form of each shared sub-key.
"""

from __future__ import annotations

from typing import Any

from kvexact.spec.checker.values import Fcn, ModelValue

_MEMO_LIMIT = 300_000


class Symmetry:
    def __init__(self, perms: list):
        self.maps: list[dict] = []
        for p in perms:
            pairs = p.d.items() if type(p) is Fcn else ()
            mp = {k: v for k, v in pairs if type(k) is ModelValue and k is not v}
            if mp:  # the identity permutation adds nothing: the state itself is always a candidate
                self.maps.append(mp)
        self.memos: list[dict] = [{} for _ in self.maps]
        self.size = 0

    def key(self, base: tuple) -> Any:
        """The canonical key of a state whose (unpermuted) key is ``base``."""
        if self.size > _MEMO_LIMIT:
            for m in self.memos:
                m.clear()
            self.size = 0
        best, best_h = base, hash(base)
        for mp, memo in zip(self.maps, self.memos, strict=True):
            before = len(memo)
            c = _permute(base, mp, memo)
            self.size += len(memo) - before
            h = hash(c)
            if h < best_h or (h == best_h and c != best and _order(c) < _order(best)):
                best, best_h = c, h
        return best


def _permute(c: Any, mp: dict, memo: dict) -> Any:
    t = type(c)
    if t is ModelValue:
        return mp.get(c, c)
    if t is tuple or t is frozenset:
        hit = memo.get(id(c))
        if hit is not None:
            return hit[1]
        items = [_permute(x, mp, memo) for x in c]
        out = tuple(items) if t is tuple else frozenset(items)
        memo[id(c)] = (c, out)  # c is kept alive with its entry, so its id is not reused meanwhile
        return out
    return c


def _order(c: Any) -> Any:
    """A total order on canon keys (only used to break a tie between equal hashes)."""
    t = type(c)
    if t is tuple:
        return (3, tuple(_order(x) for x in c))
    if t is frozenset:
        return (4, tuple(sorted(_order(x) for x in c)))
    if t is ModelValue:
        return (2, c.name)
    if t is bool:
        return (0, int(c))
    if t is int:
        return (0, c)
    return (1, str(c))
