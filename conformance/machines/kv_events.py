"""A runtime's KV-cache events, replayed while a machine runs.

A KV-aware router rebuilds a runtime's prefix cache from its events (vLLM's and SGLang's ``BlockStored``,
``BlockRemoved`` and ``AllBlocksCleared``). An adapter that offers ``kv_events()`` (the events since its previous
call, each handed over once, as objects of those class names or as maps with a ``type`` field) promises what such
a router relies on, and the machines check it after every step: replaying every event so far leaves stored
exactly the token prefixes the cache holds.

:class:`EventMirror` replays the events of each cache group (``group_idx``, 0 when absent). A stored hash stands
for its parent's prefix (the empty prefix under ``None``) followed by its own ``block_size`` tokens; a hash
stored twice (two blocks of one prefix, which vLLM allows) stays stored until it is removed as often;
``AllBlocksCleared`` empties every group. Invariant: ``prefixes(g)`` is the set of prefixes of the hashes of
group ``g`` stored and not yet removed.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from kvexact.conformance.machines import ConformanceFailure

KINDS = ("BlockStored", "BlockRemoved", "AllBlocksCleared")
FIELDS = ("block_hashes", "parent_block_hash", "token_ids", "block_size", "group_idx")


class EventProblem(enum.Enum):
    NOT_AN_EVENT = "not a BlockStored, BlockRemoved or AllBlocksCleared event"
    UNKNOWN_PARENT = "a stored block's parent hash is not stored"
    UNKNOWN_HASH = "a removed hash is not stored"
    TOKEN_COUNT = "token_ids does not hold block_size tokens per stored hash"
    HASH_AT_TWO_PREFIXES = "one hash stands for two different prefixes"
    UNKNOWN_GROUP = "group_idx names no cache group"
    DISAGREES_WITH_CACHE = "the prefixes the events leave stored are not the ones the cache holds"


class KVEventFailure(ConformanceFailure):
    """A runtime's events that a router would misread; ``problem`` names how."""

    def __init__(self, problem: EventProblem, detail: str):
        super().__init__(f"KV events: {problem.value}: {detail}")
        self.problem = problem


def _kind_and_fields(event: Any) -> tuple[Any, dict[str, Any]]:
    if isinstance(event, dict):
        return event.get("type"), event
    return type(event).__name__, {name: getattr(event, name) for name in FIELDS if hasattr(event, name)}


def _hash(h: Any) -> Any:
    return tuple(h) if isinstance(h, list) else h


def _show(prefixes: Iterable[tuple[int, ...]]) -> str:
    return ", ".join(str(list(p)) for p in sorted(prefixes)[:6]) or "none"


class EventMirror:
    """The stored prefixes of each cache group, as the events so far leave them (see the module docstring)."""

    def __init__(self, num_groups: int, who: str):
        self.who = who
        self.prefix_of: list[dict[Any, tuple[int, ...]]] = [{} for _ in range(num_groups)]
        self.stored: list[Counter[Any]] = [Counter() for _ in range(num_groups)]
        self.events = 0

    def apply(self, events: Sequence[Any], step: str) -> None:
        """Replay ``events`` (those ``step`` produced); a :class:`KVEventFailure` names the first that cannot be."""
        for event in events:
            self.events += 1
            where = f"{self.who}, event {self.events} (after {step})"
            kind, fields = _kind_and_fields(event)
            if kind not in KINDS:
                raise KVEventFailure(EventProblem.NOT_AN_EVENT, f"{where}: {str(event)[:120]}")
            if kind == "AllBlocksCleared":
                for counts in self.stored:
                    counts.clear()
                continue
            group = fields.get("group_idx") or 0
            if not 0 <= group < len(self.stored):
                raise KVEventFailure(EventProblem.UNKNOWN_GROUP, f"{where}: group_idx {group!r}")
            hashes = [_hash(h) for h in fields["block_hashes"]]
            if kind == "BlockStored":
                self._store(group, hashes, fields, where)
            else:
                self._remove(group, hashes, where)

    def _store(self, group: int, hashes: list[Any], fields: dict[str, Any], where: str) -> None:
        tokens, size = [int(t) for t in fields["token_ids"]], fields["block_size"]
        if not isinstance(size, int) or size < 1 or len(tokens) != len(hashes) * size:
            raise KVEventFailure(EventProblem.TOKEN_COUNT, f"{where}: {len(tokens)} token ids for {len(hashes)} "
                                                           f"hash(es) of block_size {size!r}")
        parent = _hash(fields.get("parent_block_hash"))
        if parent is not None and not self.stored[group][parent]:
            raise KVEventFailure(EventProblem.UNKNOWN_PARENT, f"{where}: parent hash {parent!r} in group {group}")
        prefix = () if parent is None else self.prefix_of[group][parent]
        for k, h in enumerate(hashes):
            prefix = prefix + tuple(tokens[k * size:(k + 1) * size])
            known = self.prefix_of[group].get(h)
            if known is not None and known != prefix:
                raise KVEventFailure(EventProblem.HASH_AT_TWO_PREFIXES,
                                     f"{where}: hash {h!r} stood for {list(known)}, now for {list(prefix)}")
            self.prefix_of[group][h] = prefix
            self.stored[group][h] += 1

    def _remove(self, group: int, hashes: list[Any], where: str) -> None:
        for h in hashes:
            if not self.stored[group][h]:
                raise KVEventFailure(EventProblem.UNKNOWN_HASH, f"{where}: hash {h!r} in group {group}")
            self.stored[group][h] -= 1

    def prefixes(self, group: int) -> set[tuple[int, ...]]:
        return {self.prefix_of[group][h] for h, n in self.stored[group].items() if n}

    def held_by_every_group(self) -> set[tuple[int, ...]]:
        """The prefixes every group's events leave stored (what a hit in every group can find)."""
        return set.intersection(*(self.prefixes(g) for g in range(len(self.stored))))

    def compare(self, stored: set[tuple[int, ...]], cached: set[tuple[int, ...]], step: str) -> None:
        """Fail unless the prefixes the events leave ``stored`` are the ``cached`` ones the cache holds."""
        if stored != cached:
            raise KVEventFailure(EventProblem.DISAGREES_WITH_CACHE,
                                 f"{self.who}, after {step}: stored by the events but not cached: "
                                 f"{_show(stored - cached)}; cached but not stored: {_show(cached - stored)}")


def page_prefixes(paths: Iterable[Sequence[int]], page: int) -> set[tuple[int, ...]]:
    """Every whole-page prefix of the cached token ``paths`` (what SGLang's events store: one hash per page)."""
    return {tuple(path[:k * page]) for path in paths for k in range(1, len(path) // page + 1)}
