"""SYMMETRY: one canonical fingerprint per state, on the fingerprint keys of values.canon.

TLC checks the group that the SYMMETRY set generates, not the set (``MVPerm.permutationSubgroup``
composes the given permutations until no new one appears), so ``Permutations(A) \\union
Permutations(B)`` also permutes A and B together; :class:`Symmetry` closes the set the same way.

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
_IMAGE_LIMIT = 2_000_000  # ... or beyond this many remembered images (sub-keys x permutations)


class Symmetry:
    def __init__(self, perms: list):
        maps: list[dict] = []
        for p in perms:
            pairs = p.d.items() if type(p) is Fcn else ()
            mp = {k: v for k, v in pairs if type(k) is ModelValue and k is not v}
            if mp:  # the identity permutation adds nothing: the state itself is always a candidate
                maps.append(mp)
        maps = closure(maps)
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
        if len(memo) > min(_MEMO_LIMIT, _IMAGE_LIMIT // n):
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
        if t is Fcn:  # a function of plain values, its own key (values._OWN): keys and values are permuted
            return self._fcn_images(c)
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

    def _fcn_images(self, c: Fcn) -> tuple | None:
        imgs = self.mv_images
        pairs = [(imgs.get(k) if type(k) is ModelValue else None, imgs.get(x) if type(x) is ModelValue else None, k, x)
                 for k, x in c.d.items()]
        if all(ik is None and ix is None for ik, ix, _, _ in pairs):
            return None
        return tuple(Fcn({(k if ik is None else ik[i]): (x if ix is None else ix[i]) for ik, ix, k, x in pairs})
                     for i in range(self.n))


def closure(maps: list[dict]) -> list[dict]:
    """The group the permutations (maps of the moved model values) generate, without the identity. Each
    given permutation not yet in the group becomes a generator, and the group so far is multiplied by
    the generators until nothing new appears: |group| x |generators| compositions (a set that is
    already a group, like Permutations(S), needs few generators)."""
    seen: set[frozenset] = {frozenset()}
    gens: list[dict] = []
    for mp in maps:
        g = frozenset(mp.items())
        if g in seen:
            continue
        gens.append(dict(g))
        todo = list(seen)
        while todo:
            x = dict(todo.pop())
            for h in gens:
                moved = x.keys() | h.keys()
                y = frozenset((v, w) for v in moved if (w := x.get(h.get(v, v), h.get(v, v))) is not v)
                if y not in seen:
                    seen.add(y)
                    todo.append(y)
    return [dict(p) for p in seen if p]


def _order(c: Any) -> Any:
    """A total order on canon keys (only used to break a tie between equal hashes)."""
    t = type(c)
    if t is tuple:
        return (3, tuple(_order(x) for x in c))
    if t is frozenset:
        return (4, tuple(sorted(_order(x) for x in c)))
    if t is ModelValue:
        return (2, c.name)
    if t is Fcn:
        return (5, tuple(sorted((_order(k), _order(x)) for k, x in c.d.items())))
    if t is bool:
        return (0, int(c))
    if t is int:
        return (0, c)
    return (1, str(c))
