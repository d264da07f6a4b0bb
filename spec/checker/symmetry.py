"""SYMMETRY: one canonical fingerprint per state, as TLC computes it (the least fingerprint over the
permutations), on the fingerprint keys of values.canon.

Invariant: every state of an orbit (states equal up to a permutation of the symmetry set) gets the same
key, and states of different orbits get different keys: the key is the permuted state whose hash is
least (ties between different keys broken by a total order on keys), so it depends only on the
orbit. A sub-key's images under all the permutations are computed together, once, and remembered by
value (a state's variables mostly repeat values seen before), so a state costs one look-up per
variable, the candidate tuples (built by zip) and their hashes.
"""

from __future__ import annotations

from typing import Any

from kvexact.spec.checker.values import Fcn, ModelValue

_MEMO_LIMIT = 100_000  # remembered sub-keys; the memo starts over beyond it (a cache, never a result)


class Symmetry:
    def __init__(self, perms: list):
        maps: list[dict] = []
        for p in perms:
            pairs = p.d.items() if type(p) is Fcn else ()
            mp = {k: v for k, v in pairs if type(k) is ModelValue and k is not v}
            if mp:  # the identity permutation adds nothing: the state itself is always a candidate
                maps.append(mp)
        self.n = len(maps)
        moved = {mv for mp in maps for mv in mp}
        self.mv_images: dict[ModelValue, tuple] = {mv: tuple(mp.get(mv, mv) for mp in maps) for mv in moved}
        self.memo: dict[Any, tuple | None] = {}
        self.maps = maps

    def key(self, base: tuple) -> Any:
        """The canonical key of a state whose (unpermuted) key is ``base``."""
        if self.n == 0:
            return base
        memo, n = self.memo, self.n
        if len(memo) > _MEMO_LIMIT:
            memo.clear()
        cols = []
        for x in base:
            try:
                img = memo[x]
            except KeyError:
                img = memo[x] = self._images(x)
            cols.append((x,) * n if img is None else img)
        cands = list(zip(*cols, strict=True))
        hs = list(map(hash, cands))
        best_h = min(hs)
        base_h = hash(base)
        if base_h < best_h:
            return base
        tied = {cands[i] for i, h in enumerate(hs) if h == best_h}
        if base_h == best_h:
            tied.add(base)
        return next(iter(tied)) if len(tied) == 1 else min(tied, key=_order)

    def _images(self, c: Any) -> tuple | None:
        """The images of canon key ``c`` under the permutations, in order; None when all are ``c``."""
        t = type(c)
        if t is ModelValue:
            return self.mv_images.get(c)
        if t is not tuple and t is not frozenset:
            return None
        memo = self.memo
        try:
            return memo[c]
        except KeyError:
            pass
        subs = [self._images(x) for x in c]
        out: tuple | None = None
        if any(s is not None for s in subs):
            n = self.n
            cols = [(x,) * n if s is None else s for x, s in zip(c, subs, strict=True)]
            out = tuple(zip(*cols, strict=True)) if t is tuple else tuple(map(frozenset, zip(*cols, strict=True)))
        memo[c] = out
        return out


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
