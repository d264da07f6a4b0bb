"""Peer profile: SGLang 0.5.23's ``RadixCache``, reproduced from docs/peers/sglang.md (§1-§5, §7).

A separate implementation from the normative index (``kvexact.reference.radix``): the tree is mutable,
as SGLang's is, because lookups themselves split nodes and callers hold node references for locks.
Results of every public call are frozen records. Invariants kept after every public call (§5):

- I1: ``evictable_size() + protected_size() == total_size()``;
- every non-root node has ``len(key) == len(value)`` and hangs under ``key.child_key(page_size)``;
- ``evictable_leaves`` holds exactly the unlocked (``lock_ref <= 0``) non-root nodes without children.

Behaviour that SGLang has and the normative index rejects is kept on purpose (an extra unlock drives
``lock_ref`` to -1 and leaves the sizes alone; ``insert`` keeps existing values and does not free the
caller's duplicates).
"""

from __future__ import annotations

import heapq
import itertools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from kvexact.reference.peers.sglang_events import EventRecorder
from kvexact.reference.peers.sglang_key import RadixKey, SGLangError, SGLangRejection, as_key
from kvexact.reference.peers.sglang_pool import ReqToTokenPool

__all__ = [
    "CounterClock", "TreeNode", "RadixCache", "MatchResult", "InsertResult", "LockResult", "TreeLock",
    "EVICTION_POLICIES", "Req", "PoolAccounting", "RadixKey",
]


class CounterClock:
    """Deterministic stand-in for ``time.monotonic``: each call returns the next integer (1, 2, ...)."""

    def __init__(self, start: int = 0):
        self.now = start

    def __call__(self) -> float:
        self.now += 1
        return self.now


class TreeNode:
    """One compressed edge: ``key`` units and ``value`` slots of equal length, plus lock and policy data."""

    __slots__ = ("children", "parent", "key", "value", "lock_ref", "last_access_time", "creation_time",
                 "hit_count", "priority", "id")

    def __init__(self, node_id: int, now: float, priority: int = 0):
        self.children: dict[Any, TreeNode] = {}
        self.parent: TreeNode | None = None
        self.key: RadixKey = RadixKey(())
        self.value: tuple[int, ...] | None = ()
        self.lock_ref = 0
        self.last_access_time = now
        self.creation_time = now
        self.hit_count = 0
        self.priority = priority
        self.id = node_id

    @property
    def evicted(self) -> bool:
        return self.value is None

    def __lt__(self, other: TreeNode) -> bool:
        return self.last_access_time < other.last_access_time

    def __repr__(self) -> str:
        return f"TreeNode(id={self.id}, key={list(self.key.units)}, lock_ref={self.lock_ref})"


def _lru(n: TreeNode) -> Any:
    return n.last_access_time


EVICTION_POLICIES: dict[str, Callable[[TreeNode], Any]] = {
    "lru": _lru,
    "lfu": lambda n: (n.hit_count, n.last_access_time),
    "fifo": lambda n: n.creation_time,
    "mru": lambda n: -n.last_access_time,
    "filo": lambda n: -n.creation_time,
    "priority": lambda n: (n.priority, n.last_access_time),
}
SLRU_THRESHOLD = 2


def eviction_priority(policy: str, slru_threshold: int = SLRU_THRESHOLD) -> Callable[[TreeNode], Any]:
    """The ranking of §4's table (smallest evicted first)."""
    if policy == "slru":
        return lambda n: (1 if n.hit_count >= slru_threshold else 0, n.last_access_time)
    if policy == "tlru":
        raise SGLangError(SGLangRejection.POLICY_NOT_REPRODUCED, "eviction policy 'tlru'")
    if policy not in EVICTION_POLICIES:
        raise SGLangError(SGLangRejection.UNKNOWN_EVICTION_POLICY,
                          f"eviction policy {policy!r}; known: {sorted(EVICTION_POLICIES) + ['slru']}")
    return EVICTION_POLICIES[policy]


@attrs.frozen(eq=False)
class MatchResult:
    """0.5.23's match result: the matched unit count and the (same) last node three times over."""

    device_prefix_len: int
    last_device_node: TreeNode
    last_host_node: TreeNode
    best_match_node: TreeNode


@attrs.frozen(eq=False)
class InsertResult:
    """``prefix_len``: units of the key that were already present; ``last_device_node``: deepest node
    (None when the cache is disabled, as 0.5.23's default ``InsertResult`` leaves it)."""

    prefix_len: int
    last_device_node: TreeNode | None


@attrs.frozen
class LockResult:
    """Change in evictable size caused by a lock walk (negative for inc, positive for dec)."""

    delta: int


@attrs.frozen(eq=False)
class TreeLock:
    """0.5.23's lock receipt: the node a holder pinned, path to the root included."""

    node: TreeNode


class RadixCache:
    """SGLang 0.5.23's radix prefix cache over an allocator (or none, as ``create_simulated`` allows)."""

    def __init__(self, page_size: int = 1, allocator: Any = None, req_to_token_pool: ReqToTokenPool | None = None,
                 disable: bool = False, is_eagle: bool = False, eviction_policy: str = "lru",
                 clock: Callable[[], float] | None = None, slru_threshold: int = SLRU_THRESHOLD,
                 kv_events: bool = False):
        if not isinstance(page_size, int) or page_size < 1:
            raise SGLangError(SGLangRejection.BAD_PAGE_SIZE, f"page_size={page_size!r}")
        self.page_size = page_size
        self.allocator = allocator
        self.req_to_token_pool = req_to_token_pool
        self.disable = disable
        self.is_eagle = is_eagle
        self.eviction_policy = "lru" if disable else eviction_policy.lower()
        self.priority_of = eviction_priority(self.eviction_policy, slru_threshold)
        self.clock = clock if clock is not None else CounterClock()
        self._ids = itertools.count()
        self.kv_events = EventRecorder(page_size, enabled=kv_events and not disable)
        self.reset()

    @classmethod
    def create_simulated(cls, disable: bool = False, mock_allocator: Any = None, page_size: int = 1,
                         clock: Callable[[], float] | None = None) -> RadixCache:
        """A cache without memory pools, as the scheduler's in-batch check and the unit tests use."""
        return cls(page_size=page_size, allocator=mock_allocator, disable=disable, clock=clock)

    # ---- nodes -----------------------------------------------------------------------------------
    def _new_node(self, priority: int = 0) -> TreeNode:
        return TreeNode(next(self._ids), self.clock(), priority)

    def reset(self) -> None:
        """A fresh root (empty key, empty value, lock 1, lowest priority); both counters zero."""
        self.root_node = self._new_node(priority=-sys.maxsize)
        self.root_node.lock_ref = 1
        self.evictable_size_ = 0
        self.protected_size_ = 0
        self.evictable_leaves: dict[TreeNode, None] = {}
        self.kv_events.record_all_cleared()

    def _prepare(self, key: RadixKey | Sequence[int]) -> RadixKey:
        key = as_key(key)
        if self.is_eagle:
            key = key.bigram_view()
        return key

    def cache_key(self, key: RadixKey | Sequence[int]) -> RadixKey:
        """The key as the tree stores it: bigram view under EAGLE, truncated to whole pages."""
        return self._prepare(key).page_aligned(self.page_size)

    # ---- match -----------------------------------------------------------------------------------
    def _empty_match(self) -> MatchResult:
        r = self.root_node
        return MatchResult(0, r, r, r)

    def match_prefix(self, key: RadixKey | Sequence[int]) -> MatchResult:
        """Longest cached page-aligned prefix; refreshes access times on the path and may split one node."""
        key = self._prepare(key)
        if self.disable or len(key) == 0:
            return self._empty_match()
        key = key.page_aligned(self.page_size)
        if len(key) == 0:
            return self._empty_match()
        node = self._walk(key)
        n = len(self.path_device_indices(node))
        return MatchResult(n, node, node, node)

    def touch_prefix(self, key: RadixKey | Sequence[int]) -> TreeNode:
        """The match walk for its side effects only (time refresh, split)."""
        return self.match_prefix(key).last_device_node

    def _walk(self, key: RadixKey) -> TreeNode:
        now = self.clock()
        node = self.root_node
        node.last_access_time = now
        while len(key):
            child = node.children.get(key.child_key(self.page_size))
            if child is None:
                break
            child.last_access_time = now
            p = child.key.match(key, self.page_size)
            if p < len(child.key):
                return self._split_node(child, p)
            node, key = child, key[p:]
        return node

    def path_device_indices(self, node: TreeNode) -> tuple[int, ...]:
        """The slots of the path root..node, concatenated top-down."""
        parts = []
        while node is not None and node is not self.root_node:
            parts.append(node.value or ())
            node = node.parent  # type: ignore[assignment]
        return tuple(s for part in reversed(parts) for s in part)

    def path_key_units(self, node: TreeNode) -> tuple:
        parts = []
        while node is not None and node is not self.root_node:
            parts.append(node.key.units)
            node = node.parent  # type: ignore[assignment]
        return tuple(u for part in reversed(parts) for u in part)

    def _split_node(self, child: TreeNode, p: int) -> TreeNode:
        """Cut ``child`` at ``p``: a new upper node takes ``key[:p]``/``value[:p]`` and copies the lock."""
        upper = self._new_node(priority=child.priority)
        parent = child.parent
        assert parent is not None and child.value is not None
        selector = child.key.child_key(self.page_size)
        upper.parent = parent
        upper.lock_ref = child.lock_ref
        upper.hit_count = child.hit_count
        upper.key, upper.value = child.key[:p], child.value[:p]
        child.key, child.value = child.key[p:], child.value[p:]
        child.parent = upper
        upper.children = {child.key.child_key(self.page_size): child}
        parent.children[selector] = upper
        return upper

    # ---- insert ----------------------------------------------------------------------------------
    def insert(self, key: RadixKey | Sequence[int], value: Sequence[int] | None = None, priority: int = 0,
               inserted_len: int = 0) -> InsertResult:
        """Add the page-aligned key; existing values win; returns how many units were already present."""
        if self.disable:
            return InsertResult(0, None)
        key = self._prepare(key)
        if value is None:
            value = [u[0] if key.is_bigram else u for u in key.units]
        key = key.page_aligned(self.page_size)
        vals = tuple(value[: len(key)])
        if len(vals) < len(key):
            raise SGLangError(SGLangRejection.VALUE_SHORTER_THAN_KEY,
                              f"{len(vals)} slots for a key of {len(key)} units")
        priority = priority or 0
        now = self.clock()
        node = self.root_node
        node.last_access_time = now
        node.priority = max(node.priority, priority)
        total, pos = 0, 0
        while len(key):
            child = node.children.get(key.child_key(self.page_size))
            if child is None:
                break
            child.last_access_time = now
            p = child.key.match(key, self.page_size)
            if p < len(child.key):
                child = self._split_node(child, p)
            child.priority = max(child.priority, priority)
            if pos + p > inserted_len:
                child.hit_count += 1
            total, pos, node = total + p, pos + p, child
            key, vals = key[p:], vals[p:]
        if len(key):
            leaf = self._new_node(priority=priority)
            leaf.parent, leaf.key, leaf.value = node, key, vals
            if pos + len(key) > inserted_len:
                leaf.hit_count += 1
            node.children[key.child_key(self.page_size)] = leaf
            self.evictable_size_ += len(key)
            self._update_leaf_status(node)
            self._update_leaf_status(leaf)
            self.kv_events.record_store(self.path_key_units(node), leaf.key.units)
            node = leaf
        return InsertResult(total, node)

    # ---- locks -----------------------------------------------------------------------------------
    def _lock_walk(self, node: TreeNode, step: int) -> int:
        delta = 0
        cur: TreeNode | None = node
        while cur is not self.root_node:
            if cur is None:
                raise SGLangError(SGLangRejection.FOREIGN_NODE, f"node {node.id} is not in this tree")
            if step > 0 and cur.lock_ref == 0:
                self.evictable_size_ -= len(cur.key)
                self.protected_size_ += len(cur.key)
                delta -= len(cur.key)
            if step < 0 and cur.lock_ref == 1:
                self.evictable_size_ += len(cur.key)
                self.protected_size_ -= len(cur.key)
                delta += len(cur.key)
            cur.lock_ref += step
            self._update_leaf_status(cur)
            cur = cur.parent
        return delta

    def inc_lock_ref(self, node: TreeNode) -> LockResult:
        """Pin the path node..root (root excluded); a 0->1 crossing moves the edge to protected."""
        return LockResult(0 if self.disable else self._lock_walk(node, +1))

    def dec_lock_ref(self, node: TreeNode) -> LockResult:
        """Unpin the path; a 1->0 crossing moves the edge back. No underflow guard (lock_ref may go -1)."""
        return LockResult(0 if self.disable else self._lock_walk(node, -1))

    def lock(self, node: TreeNode) -> TreeLock:
        self.inc_lock_ref(node)
        return TreeLock(node)

    def unlock(self, lock: TreeLock) -> LockResult:
        return self.dec_lock_ref(lock.node)

    # ---- evict -----------------------------------------------------------------------------------
    def evict(self, num_tokens: int) -> int:
        """Free whole unlocked leaves by policy until ``num_tokens`` are freed; returns the count freed."""
        if self.disable:
            return 0
        heap = [(self.priority_of(n), n) for n in self.evictable_leaves]
        heapq.heapify(heap)
        evicted = 0
        while evicted < num_tokens and heap:
            _, leaf = heapq.heappop(heap)
            value = leaf.value or ()
            if self.allocator is not None:
                self.allocator.free_segment(value, start_pos=0)
            evicted += len(value)
            self._delete_leaf(leaf)
            parent = leaf.parent
            if parent is not None and not parent.children and parent.lock_ref == 0:
                heapq.heappush(heap, (self.priority_of(parent), parent))
            self.kv_events.record_remove(self.path_key_units(parent) if parent else (), leaf.key.units)
        return evicted

    def _delete_leaf(self, node: TreeNode) -> None:
        """Unlink an evicted leaf; its parent must still hold it (0.5.23 asserts this)."""
        parent = node.parent
        assert parent is not None
        if parent.children.get(node.key.child_key(self.page_size)) is not node:
            raise SGLangError(SGLangRejection.LEAF_NOT_IN_TREE, f"node {node.id} is no child of node {parent.id}")
        parent.children.pop(node.key.child_key(self.page_size))
        self.evictable_size_ -= len(node.key)
        self.evictable_leaves.pop(node, None)
        self._update_leaf_status(parent)

    def _update_leaf_status(self, node: TreeNode) -> None:
        leafy = (node is not self.root_node and not node.evicted and node.lock_ref <= 0
                 and not any(not c.evicted for c in node.children.values()))
        if leafy:
            self.evictable_leaves.setdefault(node, None)
        else:
            self.evictable_leaves.pop(node, None)

    # ---- sizes -----------------------------------------------------------------------------------
    def evictable_size(self) -> int:
        return self.evictable_size_

    def protected_size(self) -> int:
        return self.protected_size_

    def nodes(self) -> list[TreeNode]:
        """Every non-root node reachable from the root, parents before children (insertion order)."""
        out: list[TreeNode] = []
        stack = list(reversed(list(self.root_node.children.values())))
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(reversed(list(n.children.values())))
        return out

    def total_size(self) -> int:
        return sum(len(n.value) for n in self.nodes() if n.value is not None)

    def sizes(self) -> tuple[int, int, int]:
        """The notes' size triple (total, evictable, protected)."""
        return (self.total_size(), self.evictable_size_, self.protected_size_)

    def all_values_flatten(self) -> tuple[int, ...]:
        return tuple(s for n in self.nodes() for s in (n.value or ()))

    def tree_slots(self) -> list[int]:
        """Every slot the tree owns (with repetitions, so that a duplicated slot shows up)."""
        return list(self.all_values_flatten())

    def pretty_print(self) -> str:
        lines = []

        def walk(node: TreeNode, depth: int) -> None:
            for child in node.children.values():
                lines.append(f"{'  ' * depth}{list(child.key.units)[:10]} r={child.lock_ref}")
                walk(child, depth + 1)

        walk(self.root_node, 0)
        lines.append(f"#tokens: {self.total_size()}")
        return "\n".join(lines)

    def check_invariants(self) -> None:
        """Assert I1, edge shape, selectors and the evictable-leaf set (used by the tests after each call)."""
        seen: dict[TreeNode, None] = {}
        for n in self.nodes():
            assert n.value is not None and len(n.key) == len(n.value), f"edge {n.id} key/value lengths"
            assert n.parent is not None and n.parent.children.get(n.key.child_key(self.page_size)) is n
            if n.lock_ref <= 0 and not n.children:
                seen[n] = None
        assert set(seen) == set(self.evictable_leaves), "evictable_leaves out of date"
        assert self.evictable_size_ + self.protected_size_ == self.total_size(), "I1"


# ---- the request protocol of 0.5.23 (§3) ---------------------------------------------------------


@attrs.define(eq=False)
class Req:
    """The fields of SGLang's ``Req`` that the cache protocol reads and writes."""

    rid: str
    origin_input_ids: list[int]
    output_ids: list[int] = attrs.Factory(list)
    extra_key: str | None = None
    cache_salt: str | None = None
    priority: int = 0
    req_pool_idx: int | None = None
    prefix_indices: tuple[int, ...] = ()
    last_node: TreeNode | None = None
    tree_lock: TreeLock | None = None
    cache_protected_len: int = 0
    cache_inserted_len: int = 0
    num_matched_prefix_tokens: int = 0
    owned_len: int = 0
    logprob_start_len: int | None = None

    def tokens(self) -> list[int]:
        return list(self.origin_input_ids) + list(self.output_ids)

    def key(self, tokens: Sequence[int]) -> RadixKey:
        return RadixKey.of(tokens, self.extra_key, self.cache_salt)


def match_kv_cache(cache: RadixCache, req: Req) -> MatchResult:
    """Match the full key; cap only ``num_matched_prefix_tokens`` at input_len - 1 (and logprob start)."""
    result = cache.match_prefix(req.key(req.tokens()))
    req.prefix_indices = cache.path_device_indices(result.last_device_node)
    req.last_node = result.last_device_node
    req.cache_protected_len = len(req.prefix_indices)
    cap = len(req.tokens()) - 1
    if req.logprob_start_len is not None:
        cap = min(cap, req.logprob_start_len)
    req.num_matched_prefix_tokens = max(0, min(result.device_prefix_len, cap))
    return result


def admit(cache: RadixCache, allocator: Any, req: Req) -> bool:
    """Scheduler admission: match, lock the last node, take a row, allocate and write the rest.

    Returns False, changing nothing, when there is no row or not enough slots."""
    pool = cache.req_to_token_pool
    assert pool is not None
    match_kv_cache(cache, req)
    rows = pool.alloc(1)
    if rows is None:
        return False
    need = len(req.tokens()) - len(req.prefix_indices)
    # the prefix is whole pages, so the rest starts a page: whole pages are taken and the row uses their first
    # ``need`` slots (alloc_extend's pages; the unused end of the last page stays the request's)
    page = allocator.page_size
    got = allocator.alloc(-(-need // page) * page) if need else []
    slots = None if got is None else got[:need]
    if slots is None:
        pool.free(rows[0])
        return False
    req.req_pool_idx = rows[0]
    pool.write(req.req_pool_idx, 0, list(req.prefix_indices) + list(slots))
    req.owned_len = len(req.tokens())
    assert req.last_node is not None
    req.tree_lock = cache.lock(req.last_node)
    return True


def _row(cache: RadixCache, req: Req) -> list[int]:
    if req.req_pool_idx is None or cache.req_to_token_pool is None:
        raise SGLangError(SGLangRejection.NO_REQUEST_ROW, f"request {req.rid}")
    return cache.req_to_token_pool.req_to_token[req.req_pool_idx]


def checkpoint(cache: RadixCache, req: Req, up_to: int) -> None:
    """Publish ``tokens[:up_to]``: insert, free the request's duplicates, re-match, rewrite the row,
    advance ``cache_protected_len`` and move the lock to the new last node."""
    if cache.disable:
        return
    row = _row(cache, req)
    tokens = req.tokens()[:up_to]
    key = cache.cache_key(req.key(tokens))
    values = row[: len(key)]
    res = cache.insert(key, values, priority=req.priority, inserted_len=req.cache_inserted_len)
    if res.prefix_len > req.cache_protected_len:
        cache.allocator.free_segment(row[req.cache_protected_len:res.prefix_len],
                                     start_pos=req.cache_protected_len)
    prompt_units = len(cache.cache_key(req.key(req.origin_input_ids[:up_to])))
    if 0 < prompt_units < len(key):
        cache.insert(key[:prompt_units], values, priority=req.priority + 1, inserted_len=prompt_units)
    m = cache.match_prefix(key)
    if m.device_prefix_len != len(key):
        raise SGLangError(SGLangRejection.REMATCH_SHORT, f"matched {m.device_prefix_len} of {len(key)}")
    new_indices = cache.path_device_indices(m.last_device_node)
    row[req.cache_protected_len:len(key)] = list(new_indices[req.cache_protected_len:])
    req.cache_protected_len = len(key)
    req.cache_inserted_len = len(key)
    if req.tree_lock is not None:
        cache.unlock(req.tree_lock)
    req.tree_lock = cache.lock(m.last_device_node)
    req.last_node = m.last_device_node
    req.prefix_indices = tuple(new_indices) + tuple(row[len(key):up_to])


def release_kv_cache(cache: RadixCache, req: Req, do_checkpoint: bool = True) -> None:
    """Finish a request: checkpoint up to ``owned_len``, free its private rest, unlock, free its row."""
    if do_checkpoint:
        checkpoint(cache, req, req.owned_len)
    row = _row(cache, req)
    rest = row[req.cache_protected_len:req.owned_len]
    if rest:
        cache.allocator.free_segment(rest, start_pos=req.cache_protected_len)
    if req.tree_lock is not None:
        cache.unlock(req.tree_lock)
        req.tree_lock = None
    assert cache.req_to_token_pool is not None and req.req_pool_idx is not None
    cache.req_to_token_pool.free(req.req_pool_idx)
    req.req_pool_idx = None


@attrs.frozen
class PoolAccounting:
    """I2 (§5): ``available + evictable + protected + session_held + uncached == pool size``."""

    available_slots: int
    evictable_slots: int
    protected_slots: int
    session_held_slots: int
    uncached_slots: int
    pool_slots: int

    @property
    def holds(self) -> bool:
        return (self.available_slots + self.evictable_slots + self.protected_slots
                + self.session_held_slots + self.uncached_slots) == self.pool_slots


def pool_accounting(cache: RadixCache, allocator: Any, pool_slots: int,
                    running: Sequence[Req] = ()) -> PoolAccounting:
    """The I2 terms; ``uncached`` is what running requests own beyond their tree-protected prefix."""
    uncached = sum(r.owned_len - r.cache_protected_len for r in running if r.req_pool_idx is not None)
    return PoolAccounting(allocator.available_size(), cache.evictable_size_, cache.protected_size_, 0,
                          uncached, pool_slots)
