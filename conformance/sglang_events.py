"""SGLang's KV events (``KVCacheEventRecorder``, 0.5.23), validated against ``RadixIndex``.

The mapping (hashes are opaque identities; the reader is vLLM's, since SGLang publishes the same event
classes as tagged maps in ``[ts, events, rank]`` batches):

- a hash stands for one path of the tree: the path of its parent (``()`` for ``None``) and one more spec
  token, the hash's rank among the children its parent had when it was first stored. A spec token is a
  whole page (SGLang matches and stores whole pages), so ``RadixIndex``'s page size 1 covers any page size.
- ``BlockStored`` h1..hk is one checkpoint per hash: unlogged steps (``ReleaseRequest``, ``MatchAndLock``,
  ``Reserve``, ``PublishUnfinished``) reach a state whose cached paths hold everything cached before and
  h1..hi, and nothing but h1..hk more (SGLang merges the stores of consecutive inserts into one event).
- ``BlockRemoved`` is a list of whole nodes, leaf first (0.5.23 records one per evicted node and merges
  consecutive ones); a node is a maximal run of hashes each the child of the one before (a node evicted
  after another is never its child: only leaves are evicted). Each node is one ``EvictNode`` that removes
  exactly its paths, after up to ``internal_max`` unlogged ``ReleaseRequest``/``MatchAndLock`` steps (a
  match may split an edge first: a split records nothing).
- ``AllBlocksCleared`` (``reset``) is a checkpoint reached by releases and evictions with nothing cached
  (at most one release per request and one eviction per cached path).
- constants: one namespace, ``Requests`` r1..rN, ``Tokens`` the ranks used, ``Prompts`` every stored path,
  ``MaxLen`` the deepest path, ``MaxNodes`` the most paths cached at once plus one, ``Slots`` enough for
  every stored path and one prompt.

The search drops, inside a store's internal steps, states that can no longer pass its check
(:func:`_store_prune`), and deduplicates candidates by :func:`radix_view`; every check also has a TLA+ form,
so :func:`write_event_module` writes the log as a generated trace spec for TLC.
"""

from __future__ import annotations

import enum
import functools
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kvexact.conformance.partial_trace import Expect, PartialResult, Search, Unmapped
from kvexact.conformance.vllm_events import (
    EventFormatError,
    KVEvent,
    load_log,
    normalize,
)
from kvexact.spec.checker.values import canon, fmt

STORE_STEPS = ("ReleaseRequest", "MatchAndLock", "Reserve", "PublishUnfinished")
SPLIT_STEPS = ("ReleaseRequest", "MatchAndLock")


class SglangEventRejection(enum.Enum):
    """Why an event cannot be expressed in ``RadixIndex`` (reported before any spec step is tried)."""

    UNKNOWN_PARENT = "the parent hash was never stored"
    UNKNOWN_HASH = "a removed hash was never stored"
    HASH_AT_TWO_PATHS = "one hash stored under two different parents"
    BLOCK_SIZE_CHANGED = "block_size differs from the log's first BlockStored"
    TOKEN_COUNT = "token_ids does not hold block_size tokens per stored hash"
    OTHER_MEDIUM = "the event names a medium other than GPU: the mapping models the device tree"
    STORED_WHILE_CACHED = "a stored hash is cached already: SGLang records a store only for a new node"
    REMOVED_NOT_CACHED = "a removed hash is not cached"


Path_ = tuple[int, ...]


def cached_paths(s: dict) -> frozenset[Path_]:
    """Every path the tree caches: all prefixes of every node's path."""
    from kvexact.spec.checker.values import apply_fcn

    out: set[Path_] = set()
    for node in s["tree"]:
        path = apply_fcn(node, "path")
        out.update(tuple(path[:k]) for k in range(1, len(path) + 1))
    return frozenset(out)


def radix_view(s: dict) -> Any:
    """The state up to renaming node ids, slots and requests: the live nodes' (namespace, path, edge length,
    lock count), each request's (phase, namespace, prompt, locked path, match, private slots) and the free
    and evictable counts. Every action commutes with such a renaming (its CHOOSEs pick among interchangeable
    ids), and the mapping's checks read only paths, so states with one view have the same futures."""
    from kvexact.spec.checker.values import apply_fcn, fcn_items

    tree, lock = s["tree"], s["lock"]
    nodes = []
    for v, node in fcn_items(tree):
        if apply_fcn(node, "path"):
            nodes.append((canon(apply_fcn(node, "ns")), tuple(apply_fcn(node, "path")),
                          len(apply_fcn(node, "slots")), apply_fcn(lock, v)))
    reqs = []
    for r, rq in fcn_items(s["req"]):
        v = apply_fcn(rq, "node")
        reqs.append((apply_fcn(rq, "phase"), canon(apply_fcn(rq, "ns")), tuple(apply_fcn(rq, "q")),
                     tuple(apply_fcn(apply_fcn(tree, v), "path")) if v else (), apply_fcn(rq, "m"),
                     len(apply_fcn(s["priv"], r))))
    return tuple(sorted(nodes)), tuple(sorted(reqs)), len(s["free"]), s["evictable"]


def _show(paths: Iterable[Path_], names: dict[Path_, Any]) -> str:
    return "{" + ", ".join(str(names.get(p, p)) for p in sorted(paths)) + "}"


class SglangMapping:
    """Turns SGLang events into :class:`Expect` steps; tracks each hash's path and the cached paths."""

    def __init__(self, requests: int, internal_max: int = 4):
        self.requests = requests
        self.internal_max = internal_max
        self.path: dict[Any, Path_] = {}
        self.name: dict[Path_, Any] = {}  # path -> its hash
        self.children: dict[Path_, int] = {}
        self.cached: set[Path_] = set()
        self.block_size: int | None = None

    def _unmapped(self, ev: KVEvent, where: str, why: SglangEventRejection, detail: str) -> Unmapped:
        return Unmapped(ev.index, where, f"{why.name}: {detail}")

    def _place(self, ev: KVEvent, where: str, h: Any, above: Path_) -> Path_:
        known = self.path.get(h)
        if known is not None:
            if known[:-1] != above:
                raise self._unmapped(ev, where, SglangEventRejection.HASH_AT_TWO_PATHS,
                                     f"hash {h} was stored under parent {self.name.get(known[:-1])}, now under "
                                     f"{self.name.get(above)}")
            return known
        rank = self.children[above] = self.children.get(above, 0) + 1
        path = above + (rank,)
        self.path[h], self.name[path] = path, h
        return path

    def expects(self, ev: KVEvent, where: str) -> Iterator[Expect]:
        if ev.kind != "AllBlocksCleared" and ev.medium not in (None, "GPU"):
            raise self._unmapped(ev, where, SglangEventRejection.OTHER_MEDIUM, f"medium {ev.medium!r}")
        if ev.kind == "BlockStored":
            yield from self._stored(ev, where)
        elif ev.kind == "BlockRemoved":
            yield from self._removed(ev, where)
        else:
            # each release frees a request, each eviction removes at least one cached path
            yield Expect(where, (), internal=("ReleaseRequest", "EvictNode"),
                         internal_max=self.requests + len(self.cached), check=_nothing_cached,
                         check_key="cleared", tla="CachedPaths(tree') = {}", source=ev.index,
                         describe="AllBlocksCleared: nothing cached")
            self.cached.clear()

    def _stored(self, ev: KVEvent, where: str) -> Iterator[Expect]:
        if self.block_size is None:
            self.block_size = ev.block_size
        if ev.block_size != self.block_size:
            raise self._unmapped(ev, where, SglangEventRejection.BLOCK_SIZE_CHANGED,
                                 f"block_size {ev.block_size}, the log began with {self.block_size}")
        if ev.num_tokens != len(ev.hashes) * ev.block_size:
            raise self._unmapped(ev, where, SglangEventRejection.TOKEN_COUNT,
                                 f"{ev.num_tokens} token ids for {len(ev.hashes)} hash(es) of {ev.block_size}")
        if ev.parent is None:
            above: Path_ = ()
        elif ev.parent in self.path:
            above = self.path[ev.parent]
        else:
            raise self._unmapped(ev, where, SglangEventRejection.UNKNOWN_PARENT, f"parent hash {ev.parent}")
        paths = []
        for h in ev.hashes:
            above = self._place(ev, where, h, above)
            if above in self.cached or above in paths:
                raise self._unmapped(ev, where, SglangEventRejection.STORED_WHILE_CACHED, f"hash {h}")
            paths.append(above)
        before = frozenset(self.cached)
        allowed = before | frozenset(paths)
        for i, (h, p) in enumerate(zip(ev.hashes, paths, strict=True)):
            need = before | frozenset(paths[:i + 1])
            yield Expect(where, (), internal=STORE_STEPS, internal_max=self.internal_max,
                         check=self._store_check(need, allowed), check_key=("store", ev.index, i),
                         prune=_store_prune(need, allowed), source=ev.index,
                         tla=f"{fmt(need)} \\subseteq CachedPaths(tree') /\\ CachedPaths(tree') \\subseteq {fmt(allowed)}",
                         describe=f"BlockStored hash {h} = path {p}")
        self.cached |= set(paths)

    def _store_check(self, need: frozenset, allowed: frozenset):
        def check(s: dict, n: dict) -> str | None:
            have = cached_paths(n)
            if not need <= have:
                return f"path(s) {_show(need - have, self.name)} not cached after the insert"
            if not have <= allowed:
                return f"the insert also caches {_show(have - allowed, self.name)}, which no event stored"
            return None
        return check

    def _removed(self, ev: KVEvent, where: str) -> Iterator[Expect]:
        for h in ev.hashes:
            if h not in self.path:
                raise self._unmapped(ev, where, SglangEventRejection.UNKNOWN_HASH, f"hash {h}")
            if self.path[h] not in self.cached or list(ev.hashes).count(h) > 1:
                raise self._unmapped(ev, where, SglangEventRejection.REMOVED_NOT_CACHED, f"hash {h}")
        nodes: list[list[Any]] = []
        for h in ev.hashes:
            if nodes and self.path[h][:-1] == self.path[nodes[-1][-1]]:
                nodes[-1].append(h)
            else:
                nodes.append([h])
        for node in nodes:
            paths = frozenset(self.path[h] for h in node)
            yield Expect(where, ("EvictNode",), internal=SPLIT_STEPS, internal_max=self.internal_max,
                         check=self._remove_check(node, paths), check_key=("remove", paths), source=ev.index,
                         tla=f"CachedPaths(tree) \\ CachedPaths(tree') = {fmt(paths)}",
                         describe=f"BlockRemoved node {node}")
            self.cached -= paths

    def _remove_check(self, node: list[Any], paths: frozenset):
        def check(s: dict, n: dict) -> str | None:
            before, after = cached_paths(s), cached_paths(n)
            if before - after != paths:
                return (f"the evicted node held {_show(before - after, self.name)}; the event removes "
                        f"{_show(paths, self.name)}")
            return None
        return check


# The fewest internal steps before request r's next PublishUnfinished, by its phase (the spec's guards:
# Release from any phase but idle, MatchAndLock from idle, Reserve from matched, PublishUnfinished from
# reserved); a request whose prompt is cached already, or would cache a path the event does not allow,
# must start over.
_TO_PUBLISH = {"reserved": 1, "matched": 2, "idle": 3}


def _store_prune(need: frozenset, allowed: frozenset):
    """A state that caches a path the event does not allow is dead (``STORE_STEPS`` never uncache); one that
    lacks a needed path needs a publication, at least :data:`_TO_PUBLISH` steps away."""
    def prune(n: dict, left: int) -> bool:
        from kvexact.spec.checker.values import apply_fcn, fcn_items

        have = cached_paths(n)
        if not have <= allowed:
            return True
        if need <= have:
            return False
        best = 4
        for _r, rq in fcn_items(n["req"]):
            phase, q = apply_fcn(rq, "phase"), tuple(apply_fcn(rq, "q"))
            steps = _TO_PUBLISH.get(phase, 4)
            if steps < 3 and (q in have or not all(q[:k] in allowed for k in range(1, len(q) + 1))):
                steps = 4
            best = min(best, steps)
        return best > left
    return prune


def _nothing_cached(s: dict, n: dict) -> str | None:
    left = cached_paths(n)
    return f"paths {sorted(left)} are still cached" if left else None


def dry_run(events: list[tuple[str, KVEvent]]) -> tuple[set[Path_], int, int]:
    """(every stored path, the most paths cached at once, the largest rank) of a log, read leniently."""
    m = SglangMapping(1)
    peak = 0
    try:
        for where, ev in events:
            for _ in m.expects(ev, where):
                pass
            peak = max(peak, len(m.cached))
    except Unmapped:
        pass
    return set(m.path.values()), peak, max(m.children.values(), default=1)


def radix_constants(requests: int, tokens: int, slots: int, max_nodes: int, max_len: int,
                    prompts: frozenset[Path_]) -> dict[str, Any]:
    from kvexact.spec.checker import ModelValue

    return {"Namespaces": frozenset({ModelValue("n1")}), "NoNs": ModelValue("NoNs"),
            "Requests": frozenset(ModelValue(f"r{i}") for i in range(1, requests + 1)),
            "Tokens": frozenset(range(1, tokens + 1)), "Slots": frozenset(range(1, slots + 1)),
            "MaxNodes": max_nodes, "MaxLen": max_len, "Prompts": prompts, "PageSize": 1}


@functools.lru_cache(maxsize=8)
def radix_model(*args: Any) -> Any:
    """``RadixIndex`` with the mapping's constants (module doc; the arguments are :func:`radix_constants`')."""
    from kvexact.spec import spec_dir
    from kvexact.spec.checker import load_model

    with tempfile.TemporaryDirectory(prefix="kvexact-sglang-") as tmp:
        cfg = Path(tmp) / "RadixEvents.cfg"
        cfg.write_text("INIT Init\nNEXT Next\n")
        return load_model(spec_dir() / "RadixIndex.tla", cfg, radix_constants(*args), lazy_actions=True)


def _model_args(events: list[tuple[str, KVEvent]], requests: int) -> tuple:
    paths, peak, rank = dry_run(events)
    max_len = max((len(p) for p in paths), default=1)
    prompts = frozenset(paths) or frozenset({(1,)})
    return requests, rank, len(paths) + max_len + 1, peak + 1, max_len, prompts


def event_model(events: list[tuple[str, KVEvent]], requests: int = 1) -> Any:
    """``RadixIndex`` with the constants a normalized log needs (module doc)."""
    return radix_model(*_model_args(events, requests))


# The generated trace spec's check vocabulary: every path the tree caches (as ``cached_paths``).
TLA_DEFS = ("CachedPaths(nd) == UNION {{SubSeq(nd[v].path, 1, k) : k \\in 1..Len(nd[v].path)} : v \\in Nodes}",)


def write_event_module(raw_events: Iterable[tuple[str, Any]], out_dir: Path, requests: int = 1,
                       internal_max: int = 4) -> Path:
    """Write ``RadixIndexPartial.tla/.cfg`` (``partial_module.trace_spec`` over the mapping's steps, each check
    in its TLA+ form) and a copy of the spec into ``out_dir``; return the module path. Raises
    :class:`Unmapped` for an event the mapping refuses (the search refuses it at the same event)."""
    from kvexact.conformance.partial_module import trace_spec, write_generated
    from kvexact.spec import spec_dir

    events = list(normalize(raw_events))
    mapping = SglangMapping(requests, internal_max)
    steps = [step for where, ev in events for step in mapping.expects(ev, where)]
    args = _model_args(events, requests)
    fresh = ("n1", *(f"r{i}" for i in range(1, requests + 1)))
    consts = radix_constants(*args)
    # Prompts (a set of sequences) is a definition the cfg substitutes, which every TLC version reads
    module = trace_spec("RadixIndex", f"an SGLang event log ({len(events)} events)", radix_model(*args), steps,
                        STORE_STEPS, defs=(*TLA_DEFS, f"TracePrompts == {fmt(consts.pop('Prompts'))}"), fresh=fresh)
    return write_generated(spec_dir() / "RadixIndex.tla", module, consts, fresh, out_dir,
                           ("Prompts <- TracePrompts",))


def validate_events(raw_events: Iterable[tuple[str, Any]], requests: int = 1, internal_max: int = 4,
                    mode: str = "minimal", max_candidates: int = 100_000, prune: bool = True) -> PartialResult:
    """Validate an SGLang event log (``(where, raw event)`` pairs, e.g. ``read_events``) against ``RadixIndex``
    with up to ``requests`` requests holding leases at once (``prune=False``: without the stores' bounds, to
    compare costs)."""
    events = list(normalize(raw_events))
    mapping = SglangMapping(requests, internal_max)
    search = Search(event_model(events, requests), STORE_STEPS, (), view=radix_view if prune else None, mode=mode,
                    max_candidates=max_candidates, prune=prune)
    return search.run(step for where, ev in events for step in mapping.expects(ev, where))


def run_event_log(source: str | None, live: str | None, *, requests: int, internal_max: int, mode: str,
                  idle_s: float = 2.0, max_batches: int | None = None) -> tuple[int, str]:
    """(exit code, text) for ``kvexact validate-trace --events sglang``: 0 accepted, 1 rejected, 2 bad input."""
    try:
        raw = load_log(source, live, idle_s, max_batches)
        if not raw:
            return 3, f"validate-trace: no event batch arrived from {live} within {idle_s} s"
        result = validate_events(raw, requests, internal_max, mode)
    except EventFormatError as exc:
        return 2, f"validate-trace: {exc}"
    if result.ok:
        return 0, (f"SGLang event log accepted by RadixIndex: {len(raw)} events, {result.steps} spec steps; "
                   f"candidate states at most {result.max_candidates}")
    return 1, result.summary()
