"""What an allocator adapter's optional ``observe()`` shows, and the promises the machines hold it to.

``observe()`` returns a plain dict with either key (both optional):

* ``"queues"``: ``{name: {group: [block, ...]}}``, each queue listed head first: the blocks no request holds,
  in the order the runtime keeps them for reuse or eviction (vLLM's free queue, an LRU list of cached
  blocks, a plain free list);
* ``"cow"``: ``[(event, group, block), ...]``: the copy-on-write steps since the previous ``observe()``,
  in the order they happened, ``event`` one of ``"copy"`` (rows copied into ``block``), ``"validate"``
  (the copy checked complete) and ``"publish"`` (a request's table now maps ``block``);
* ``"usage"``: ``{group: fraction}``: the share of the group's blocks in use (vLLM's ``usage``), which must
  be the share that live requests' tables map.

Promises checked after every step (:func:`check`), each refusal named by :class:`ObservationProblem`:
a queued block is mapped by no live request's table and is queued once; a queue never reorders the blocks
it keeps, and takes new blocks only at its ends (so a touched block leaves it and a released one joins at
the head or the tail, never in between: the LRU order); a COW destination is published only after it was
copied and then validated; a reported usage is the mapped share of the pool.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

COW_EVENTS = ("copy", "validate", "publish")


class ObservationProblem(enum.Enum):
    NOT_AN_OBSERVATION = "observe() did not return a dict of queues and cow events"
    QUEUED_WHILE_MAPPED = "a queued block is mapped by a live request"
    QUEUED_TWICE = "a block is queued twice"
    QUEUE_REORDERED = "a queue reordered blocks it kept"
    JOINED_INSIDE_QUEUE = "a block joined a queue between blocks already in it"
    PUBLISHED_BEFORE_VALIDATED = "a COW destination was published before its copy was validated"
    VALIDATED_BEFORE_COPIED = "a COW destination was validated before it was copied"
    USAGE_NOT_MAPPED_SHARE = "the reported usage is not the share of the pool that live tables map"


class ObservationError(AssertionError):
    def __init__(self, problem: ObservationProblem, detail: str):
        super().__init__(f"{problem.name}: {problem.value}: {detail}")
        self.problem = problem


def queues_of(observation: Any) -> dict[str, dict[int, list[int]]]:
    """The observation's queues as ``{name: {group: [block, ...]}}``; refuses anything else by name."""
    if not isinstance(observation, Mapping):
        raise ObservationError(ObservationProblem.NOT_AN_OBSERVATION, f"got {type(observation).__name__}")
    queues = observation.get("queues", {})
    try:
        return {str(n): {int(g): [int(b) for b in q] for g, q in by_group.items()} for n, by_group in queues.items()}
    except (AttributeError, TypeError, ValueError) as exc:
        raise ObservationError(ObservationProblem.NOT_AN_OBSERVATION, f"queues {queues!r}: {exc}") from None


def _check_order(name: str, group: int, before: Sequence[int], after: Sequence[int]) -> None:
    """Blocks in both lists keep their order, and the blocks new in ``after`` sit at its ends only."""
    kept_before = [b for b in before if b in set(after)]
    kept_after = [b for b in after if b in set(before)]
    if kept_before != kept_after:
        raise ObservationError(ObservationProblem.QUEUE_REORDERED,
                               f"queue {name!r} group {group}: {list(before)} -> {list(after)}")
    if not kept_after:
        return
    first, last = after.index(kept_after[0]), after.index(kept_after[-1])
    inside = [b for b in after[first:last + 1] if b not in set(before)]
    if inside:
        raise ObservationError(ObservationProblem.JOINED_INSIDE_QUEUE,
                               f"queue {name!r} group {group}: {inside} joined inside, {list(before)} -> {list(after)}")


def check_queues(before: Mapping[str, Mapping[int, Sequence[int]]], after: Mapping[str, Mapping[int, Sequence[int]]],
                 mapped: Mapping[int, set[int]]) -> None:
    """The queue promises between two observations; ``mapped[g]``: the blocks live tables map in group g."""
    for name, by_group in after.items():
        for g, queue in by_group.items():
            if len(set(queue)) != len(queue):
                raise ObservationError(ObservationProblem.QUEUED_TWICE, f"queue {name!r} group {g}: {queue}")
            held = sorted(set(queue) & mapped.get(g, set()))
            if held:
                raise ObservationError(ObservationProblem.QUEUED_WHILE_MAPPED,
                                       f"queue {name!r} group {g} holds block(s) {held} that a live table maps")
            if g in before.get(name, {}):
                _check_order(name, g, before[name][g], queue)


def check_cow(events: Iterable[Any], pending: dict[tuple[int, int], str]) -> None:
    """COW events in order: copy, validate, then publish, per destination ``(group, block)``.
    ``pending`` carries each destination's last step across observations (updated in place)."""
    for event in events:
        try:
            kind, group, block = event
            key = (int(group), int(block))
        except (TypeError, ValueError):
            raise ObservationError(ObservationProblem.NOT_AN_OBSERVATION, f"cow event {event!r}") from None
        if kind not in COW_EVENTS:
            raise ObservationError(ObservationProblem.NOT_AN_OBSERVATION, f"cow event {event!r}")
        last = pending.get(key)
        if kind == "validate" and last != "copy":
            raise ObservationError(ObservationProblem.VALIDATED_BEFORE_COPIED, f"group {group} block {block}")
        if kind == "publish":
            if last != "validate":
                raise ObservationError(ObservationProblem.PUBLISHED_BEFORE_VALIDATED, f"group {group} block {block}"
                                       f" (last step before publication: {last or 'none'})")
            pending.pop(key)
            continue
        pending[key] = kind


def check_usage(usage: Any, mapped: Mapping[int, set[int]], sizes: Mapping[int, int]) -> None:
    """Each reported ``usage[g]`` equals the blocks live tables map in group g over the group's pool size."""
    try:
        shares = {int(g): float(u) for g, u in usage.items()}
    except (AttributeError, TypeError, ValueError):
        raise ObservationError(ObservationProblem.NOT_AN_OBSERVATION, f"usage {usage!r}") from None
    for g, share in shares.items():
        want = len(mapped.get(g, set())) / sizes[g] if sizes.get(g) else 0.0
        if abs(share - want) > 1e-9:
            raise ObservationError(ObservationProblem.USAGE_NOT_MAPPED_SHARE,
                                   f"group {g} reports {share:.4f}; live tables map {len(mapped.get(g, set()))} of "
                                   f"{sizes.get(g, 0)} blocks ({want:.4f})")


class Observer:
    """Holds an adapter's previous observation and checks each new one against it (one per machine run)."""

    def __init__(self) -> None:
        self.queues: dict[str, dict[int, list[int]]] = {}
        self.pending: dict[tuple[int, int], str] = {}
        self.checks = 0
        self.reports_usage = False  # the latest observation reported usage: every unmapped block is free

    def step(self, observation: Any, mapped: Mapping[int, set[int]], sizes: Mapping[int, int] | None = None) -> None:
        """Check one observation; ``sizes[g]``: the blocks of group g (needed for a reported usage)."""
        queues = queues_of(observation)
        check_queues(self.queues, queues, mapped)
        check_cow(observation.get("cow", ()), self.pending)
        if "usage" in observation:
            check_usage(observation["usage"], mapped, sizes or {})
        self.reports_usage = "usage" in observation
        self.queues = queues
        self.checks += 1
