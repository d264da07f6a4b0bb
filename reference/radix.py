"""The radix prefix index as an ownership ledger (seed 0x08, RadixAttention).

Invariants every committed state keeps (re-derived by :func:`check_state` after each transition):

* a non-root node owns one compressed edge ``(token_ids, slot_ids)`` with ``len(token_ids) ==
  len(slot_ids) > 0`` and a whole number of pages (0x08A); a child is selected by the first page of its
  edge (its first token at page size 1, a tuple of ``page_size`` tokens above), and siblings differ in it;
* the recorded ``lock_ref`` of every node equals the number of lock holders whose terminal node lies at
  or below it (0x08D), and never goes below zero (a lock underflow is a named rejection);
* the pool partition ``tree + private + free = pool`` holds with the three sets pairwise disjoint
  (0x08A), where private slots are request-owned and unpublished;
* every public transition returns ``(successor, receipt)`` and advances ``version`` by one; a rejected
  transition raises :class:`~kvexact.reference.rejections.Rejected` and leaves its input unchanged.

The index reports facts; it never orders the waiting queue (0x08G). The page size is one token by default
(the seed's teaching granularity); with ``page_size`` P > 1, as SGLang runs, a lookup and an insert see
only the key's whole pages, a match (and so a split) falls on a page boundary, and an unaligned tail stays
private to its request. Victim ranking is pluggable (:data:`lru`, the default, and :data:`fifo`).
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from kvexact.reference import formulas_seed as F
from kvexact.reference.rejections import Rejected

ROOT = 0


class RadixRejection(enum.Enum):
    """Every way a radix state, operation or receipt is refused (0x08I)."""

    MALFORMED_INPUT = "tokens and slots must be sequences of non-negative ints"
    TOKEN_SLOT_LENGTH_MISMATCH = "an edge or insert has unequal token and slot counts"
    EMPTY_EDGE = "a non-root node owns an empty edge"
    CHILD_SELECTOR_MISMATCH = "a child is filed under a token that is not its edge's first token"
    ORPHAN_NODE = "a node's parent does not list it as a child (or the parent is missing)"
    UNKNOWN_NODE = "no such node in the tree"
    LOCK_UNDERFLOW = "unlock of a node whose lock count is already zero"
    LOCK_COUNT_MISMATCH = "a recorded lock count differs from the count derived from lock holders"
    LOCKED_LEAF_EVICTION = "eviction of a leaf that a running request still locks"
    INTERNAL_NODE_EVICTION = "eviction of a node that still has children"
    ROOT_EVICTION = "the root owns no edge and is never evicted"
    NEGATIVE_EVICTION_TARGET = "an eviction target must be a non-negative token count"
    OWNED_SLOT_REUSE = "a slot already owned by the tree (or another request) is offered as new"
    SLOT_NOT_PRIVATE = "a slot offered for publication is not private to the publishing request"
    SLOT_NOT_FREE = "a reserved slot is not in the free set"
    SLOT_OUT_OF_POOL = "a slot id is outside the pool"
    DUPLICATE_INPUT_SLOT = "the same slot appears twice in one request's slot list"
    PARTITION_VIOLATION = "tree + private + free is not a disjoint cover of the pool"
    UNKNOWN_REQUEST = "no such request holds a lease or private slots"
    STALE_VERSION = "the operation or receipt was prepared against an older tree version"
    PATH_SLOT_MISMATCH = "a receipt's prefix slots differ from the slots on the tree path"
    SUFFIX_MISMATCH = "a receipt's suffix interval does not start at its matched length"
    RECEIPT_TAMPERED = "a receipt's fields do not hash to its receipt_sha256"
    POLICY_DECISION_FORBIDDEN = "the index handoff must not carry a scheduling decision"
    LEASE_ALREADY_HELD = "the request already holds a lock lease on the tree"
    BAD_PAGE_SIZE = "the page size must be a positive int"
    EDGE_NOT_PAGE_ALIGNED = "an edge does not hold a whole number of pages"


def _reject(reason: RadixRejection, detail: str) -> Rejected:
    return Rejected(reason, detail)


@attrs.frozen
class RadixNode:
    """One node; ``children`` maps the selector of each child's edge (:func:`selector`) to the child id."""

    node_id: int
    parent_id: int | None
    token_ids: tuple[int, ...]
    slot_ids: tuple[int, ...]
    children: Mapping[Any, int] = attrs.field(factory=dict, eq=True)
    lock_ref: int = 0
    last_access: int = 0
    created_at: int = 0


@attrs.frozen
class RequestEntry:
    """A request's view of the index: its locked terminal node and how many leading tokens it has
    already published into the tree (``cache_protected_len`` in the seed's pseudocode)."""

    request_id: str
    last_node_id: int
    protected_tokens: int
    request_generation: int = 0


@attrs.frozen(eq=True)
class RadixState:
    """A committed radix index plus the slot ledger of its pool."""

    pool_slot_ids: frozenset[int]
    nodes: Mapping[int, RadixNode]
    free_slot_ids: frozenset[int]
    private_slot_ids: Mapping[str, tuple[int, ...]]
    terminal_locks: Mapping[int, int]  # node id -> number of lock holders ending there
    requests: Mapping[str, RequestEntry]
    version: int = 0
    next_node_id: int = 1
    clock: int = 0
    page_size: int = 1

    @classmethod
    def empty(cls, pool_slots: int, first_slot_id: int = 0, page_size: int = 1) -> RadixState:
        """An empty tree over slots ``first_slot_id .. first_slot_id + pool_slots - 1``, all free."""
        if not isinstance(pool_slots, int) or pool_slots < 0 or first_slot_id < 0:
            raise _reject(RadixRejection.MALFORMED_INPUT, f"pool_slots={pool_slots!r}, first={first_slot_id!r}")
        if not isinstance(page_size, int) or isinstance(page_size, bool) or page_size < 1:
            raise _reject(RadixRejection.BAD_PAGE_SIZE, f"page_size={page_size!r}")
        pool = frozenset(range(first_slot_id, first_slot_id + pool_slots))
        root = RadixNode(ROOT, None, (), ())
        return cls(pool, {ROOT: root}, pool, {}, {}, {}, page_size=page_size)

    def aligned(self, n: int) -> int:
        """``n`` rounded down to whole pages."""
        return n - n % self.page_size

    # read-only views -------------------------------------------------------------------------
    def path(self, node_id: int) -> tuple[int, ...]:
        """Non-root node ids from the root down to ``node_id``."""
        if node_id not in self.nodes:
            raise _reject(RadixRejection.UNKNOWN_NODE, f"node {node_id}")
        out: list[int] = []
        cur: int | None = node_id
        while cur is not None and cur != ROOT:
            out.append(cur)
            cur = self.nodes[cur].parent_id
        return tuple(reversed(out))

    def path_tokens(self, node_id: int) -> tuple[int, ...]:
        return tuple(t for n in self.path(node_id) for t in self.nodes[n].token_ids)

    def path_slots(self, node_id: int) -> tuple[int, ...]:
        return tuple(s for n in self.path(node_id) for s in self.nodes[n].slot_ids)

    def tree_slot_ids(self) -> frozenset[int]:
        return frozenset(s for n in self.nodes.values() for s in n.slot_ids)

    def all_private_slot_ids(self) -> frozenset[int]:
        return frozenset(s for slots in self.private_slot_ids.values() for s in slots)

    def edges(self) -> dict[tuple[int, ...], tuple[int, ...]]:
        """Edge token segment -> slot segment, for every non-root node (handy in tests)."""
        return {n.token_ids: n.slot_ids for n in self.nodes.values() if n.node_id != ROOT}


# receipts ----------------------------------------------------------------------------------------
@attrs.frozen
class PartitionReport:
    """The re-derived ledgers of one state (0x08A, 0x08D)."""

    pool_slots: int
    tree_owned_slots: int
    private_slots: int
    free_slots: int
    protected_tokens: int
    evictable_tokens: int
    leaf_ready_tokens: int


@attrs.frozen
class MatchReceipt:
    node_id: int
    matched_tokens: int
    prefix_slot_ids: tuple[int, ...]
    path_node_ids: tuple[int, ...]
    split: bool
    predecessor_sha256: str = ""
    successor_sha256: str = ""


@attrs.frozen
class InsertReceipt:
    """``prefix_tokens`` were already cached; ``duplicate_slot_ids`` are the caller's copies of them."""

    prefix_tokens: int
    duplicate_slot_ids: tuple[int, ...]
    new_node_id: int | None
    terminal_node_id: int
    splits: int
    predecessor_sha256: str = ""
    successor_sha256: str = ""


@attrs.frozen
class EvictReceipt:
    target_tokens: int
    released_tokens: int
    evicted_node_ids: tuple[int, ...]
    freed_slot_ids: tuple[tuple[int, ...], ...]
    predecessor_sha256: str = ""
    successor_sha256: str = ""


@attrs.frozen
class RadixMutationReceipt:
    """One committed operation: predecessor and successor digests plus what the operation reports."""

    operation: str
    predecessor_sha256: str
    successor_sha256: str
    tree_version: int
    splits: int = 0
    duplicate_slot_ids: tuple[int, ...] = ()
    detail: Any = None


@attrs.frozen
class RadixSchedulerHandoffReceipt:
    """Immutable physical fact handed to the scheduler (0x08G); ``policy_decision`` is always None."""

    request_id: str
    request_generation: int
    tree_version: int
    tree_state_sha256: str
    matched_tokens: int
    prefix_slot_ids: tuple[int, ...]
    path_node_ids: tuple[int, ...]
    terminal_node_id: int
    suffix_interval: tuple[int, int]
    lock_lease_id: str
    lock_required_until_scheduler_disposition: bool
    scheduler_owner: Literal["M5.2"]
    policy_decision: None
    receipt_sha256: str


def selector(tokens: Sequence[int], page_size: int) -> Any:
    """The key a parent files a child edge under: its first token, or its first page as a tuple."""
    return tokens[0] if page_size == 1 else tuple(tokens[:page_size])


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def state_sha256(state: RadixState) -> str:
    """SHA-256 over a canonical encoding of the committed state (ids, edges, locks, ledgers, version)."""
    paged = {"page_size": state.page_size} if state.page_size > 1 else {}  # page size 1 keeps old digests
    return _sha({
        **paged,
        "pool": sorted(state.pool_slot_ids),
        "nodes": [[n.node_id, n.parent_id, list(n.token_ids), list(n.slot_ids), sorted(n.children.items()),
                   n.lock_ref] for n in sorted(state.nodes.values(), key=lambda n: n.node_id)],
        "free": sorted(state.free_slot_ids),
        "private": sorted((k, list(v)) for k, v in state.private_slot_ids.items()),
        "terminal_locks": sorted(state.terminal_locks.items()),
        "requests": sorted((r.request_id, r.last_node_id, r.protected_tokens) for r in state.requests.values()),
        "version": state.version,
    })


def handoff_fields_sha256(receipt: RadixSchedulerHandoffReceipt) -> str:
    """The digest a handoff receipt must carry: every field except ``receipt_sha256`` itself."""
    fields = attrs.asdict(receipt, recurse=False)
    fields.pop("receipt_sha256")
    return _sha({k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()})


# validation --------------------------------------------------------------------------------------
def cache_sizes(state: RadixState) -> tuple[int, int]:
    """``(evictable, protected)``: the cached tokens on edges no request locks, and on edges some request locks
    (SGLang's ``evictable_size()`` and ``protected_size()``; together, every token the tree holds)."""
    edges = [n for n in state.nodes.values() if n.node_id != ROOT]
    return (sum(len(n.token_ids) for n in edges if n.lock_ref == 0),
            sum(len(n.token_ids) for n in edges if n.lock_ref > 0))


def _ints(name: str, values: Sequence[int]) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise _reject(RadixRejection.MALFORMED_INPUT, f"{name} must be a sequence of ints, got {values!r}")
    out = tuple(values)
    for i, v in enumerate(out):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise _reject(RadixRejection.MALFORMED_INPUT, f"{name}[{i}] = {v!r} is not a non-negative int")
    return out


def check_state(state: RadixState) -> PartitionReport:
    """Re-derive selectors, edge lengths, path locks, slot disjointness and the pool partition."""
    nodes = state.nodes
    if ROOT not in nodes or nodes[ROOT].token_ids or nodes[ROOT].slot_ids:
        raise _reject(RadixRejection.EMPTY_EDGE, "the root must exist and own no edge")
    derived: dict[int, int] = {n: 0 for n in nodes}
    for node_id, holders in state.terminal_locks.items():
        if node_id not in nodes or holders < 0:
            raise _reject(RadixRejection.LOCK_COUNT_MISMATCH, f"terminal lock on node {node_id} x{holders}")
        for p in state.path(node_id):
            derived[p] += holders
    for n in nodes.values():
        for token, child_id in n.children.items():
            child = nodes.get(child_id)
            if child is None or child.parent_id != n.node_id:
                raise _reject(RadixRejection.ORPHAN_NODE, f"node {n.node_id} lists child {child_id}")
            if child.token_ids and selector(child.token_ids, state.page_size) != token:
                raise _reject(RadixRejection.CHILD_SELECTOR_MISMATCH,
                              f"node {child_id} filed under token {token}, edge {child.token_ids}")
    tree_slots: list[int] = []
    for n in nodes.values():
        if n.node_id == ROOT:
            continue
        if not n.token_ids:
            raise _reject(RadixRejection.EMPTY_EDGE, f"node {n.node_id}")
        if len(n.token_ids) != len(n.slot_ids):
            raise _reject(RadixRejection.TOKEN_SLOT_LENGTH_MISMATCH,
                          f"node {n.node_id}: {len(n.token_ids)} tokens, {len(n.slot_ids)} slots")
        if len(n.token_ids) % state.page_size:
            raise _reject(RadixRejection.EDGE_NOT_PAGE_ALIGNED,
                          f"node {n.node_id}: {len(n.token_ids)} tokens, page size {state.page_size}")
        parent = nodes.get(n.parent_id) if n.parent_id is not None else None
        if parent is None or parent.children.get(selector(n.token_ids, state.page_size)) != n.node_id:
            raise _reject(RadixRejection.ORPHAN_NODE, f"node {n.node_id} under parent {n.parent_id}")
        if n.lock_ref < 0:
            raise _reject(RadixRejection.LOCK_UNDERFLOW, f"node {n.node_id} lock_ref {n.lock_ref}")
        if n.lock_ref != derived[n.node_id]:
            raise _reject(RadixRejection.LOCK_COUNT_MISMATCH,
                          f"node {n.node_id}: recorded {n.lock_ref}, derived {derived[n.node_id]}")
        tree_slots.extend(n.slot_ids)
    private = [s for slots in state.private_slot_ids.values() for s in slots]
    tree_set, private_set = set(tree_slots), set(private)
    everything = tree_slots + private + list(state.free_slot_ids)
    if (len(tree_set) != len(tree_slots) or len(private_set) != len(private)
            or len(set(everything)) != len(everything) or set(everything) != set(state.pool_slot_ids)):
        raise _reject(RadixRejection.PARTITION_VIOLATION,
                      f"tree {len(tree_slots)} + private {len(private)} + free {len(state.free_slot_ids)} "
                      f"is not a disjoint cover of {len(state.pool_slot_ids)} pool slots")
    edges = [n for n in nodes.values() if n.node_id != ROOT]
    lengths, locks = [len(n.token_ids) for n in edges], [n.lock_ref for n in edges]
    protected = F.protected_tokens(edge_lengths=lengths, locks=locks)
    evictable = F.evictable_tokens(edge_lengths=lengths, locks=locks)
    leaf_ready = F.leaf_ready_tokens(edge_lengths=lengths, locks=locks, child_counts=[len(n.children) for n in edges])
    return PartitionReport(len(state.pool_slot_ids), len(tree_slots), len(private),
                           len(state.free_slot_ids), protected, evictable, leaf_ready)


# internal mutation helpers (work on a mutable draft; the public functions commit) ------------------
@attrs.define
class _Draft:
    nodes: dict[int, RadixNode]
    free: set[int]
    private: dict[str, tuple[int, ...]]
    terminal_locks: dict[int, int]
    requests: dict[str, RequestEntry]
    next_node_id: int
    clock: int
    pool_slots: frozenset[int]
    page_size: int

    @classmethod
    def of(cls, s: RadixState) -> _Draft:
        return cls(dict(s.nodes), set(s.free_slot_ids), dict(s.private_slot_ids), dict(s.terminal_locks),
                   dict(s.requests), s.next_node_id, s.clock + 1, s.pool_slot_ids, s.page_size)

    def key(self, tokens: Sequence[int]) -> Any:
        return selector(tokens, self.page_size)

    def set(self, node: RadixNode) -> None:
        self.nodes[node.node_id] = node

    def path(self, node_id: int) -> list[int]:
        out = []
        cur: int | None = node_id
        while cur is not None and cur != ROOT:
            out.append(cur)
            cur = self.nodes[cur].parent_id
        return out[::-1]

    def split(self, child_id: int, m: int) -> int:
        """Split ``child``'s edge at ``m``: a new upper node takes ``[0:m]`` and the child's lock count."""
        child = self.nodes[child_id]
        parent = self.nodes[child.parent_id]  # type: ignore[index]
        upper_id = self.next_node_id
        self.next_node_id += 1
        upper = RadixNode(upper_id, parent.node_id, child.token_ids[:m], child.slot_ids[:m],
                          {self.key(child.token_ids[m:]): child_id}, child.lock_ref, self.clock, self.clock)
        self.set(upper)
        self.set(attrs.evolve(child, parent_id=upper_id, token_ids=child.token_ids[m:],
                              slot_ids=child.slot_ids[m:]))
        self.set(attrs.evolve(parent, children={**parent.children, self.key(child.token_ids): upper_id}))
        return upper_id

    def walk(self, tokens: tuple[int, ...]) -> tuple[int, int, int]:
        """Longest cached prefix of ``tokens``' whole pages, in whole pages; splits at most once (on a page
        boundary). Returns (node, matched, splits)."""
        tokens = tokens[: len(tokens) - len(tokens) % self.page_size]
        node_id, offset, splits = ROOT, 0, 0
        self.touch(ROOT)
        while offset < len(tokens):
            child_id = self.nodes[node_id].children.get(self.key(tokens[offset:]))
            if child_id is None:
                break
            edge = self.nodes[child_id].token_ids
            m = 0
            while m < len(edge) and offset + m < len(tokens) and edge[m] == tokens[offset + m]:
                m += 1
            m -= m % self.page_size  # the selector matched, so at least one whole page
            if m < len(edge):
                node_id = self.split(child_id, m)
                offset += m
                splits += 1
                break
            node_id = child_id
            self.touch(node_id)
            offset += m
        return node_id, offset, splits

    def touch(self, node_id: int) -> None:
        self.set(attrs.evolve(self.nodes[node_id], last_access=self.clock))

    def add_lock(self, node_id: int, delta: int) -> None:
        for p in self.path(node_id):
            n = self.nodes[p]
            if n.lock_ref + delta < 0:
                raise _reject(RadixRejection.LOCK_UNDERFLOW, f"node {p} lock_ref {n.lock_ref} - {-delta}")
            self.set(attrs.evolve(n, lock_ref=n.lock_ref + delta))
        if node_id != ROOT:
            count = self.terminal_locks.get(node_id, 0) + delta
            if count < 0:
                raise _reject(RadixRejection.LOCK_UNDERFLOW, f"no lock holder ends at node {node_id}")
            if count:
                self.terminal_locks[node_id] = count
            else:
                self.terminal_locks.pop(node_id, None)

    def owner_of_private(self, slot: int) -> str | None:
        for req, slots in self.private.items():
            if slot in slots:
                return req
        return None

    def release_private(self, request_id: str, slots: Iterable[int]) -> None:
        gone = set(slots)
        remaining = tuple(s for s in self.private.get(request_id, ()) if s not in gone)
        if remaining:
            self.private[request_id] = remaining
        else:
            self.private.pop(request_id, None)
        self.free |= gone

    def insert(self, tokens: tuple[int, ...], slots: tuple[int, ...], request_id: str | None
               ) -> InsertReceipt:
        """Insert ``tokens``' whole pages; positions already cached keep the tree's slots (the caller's are
        duplicates); the slots of an unaligned tail stay where they are (private to their request)."""
        if len(tokens) != len(slots):
            raise _reject(RadixRejection.TOKEN_SLOT_LENGTH_MISMATCH, f"{len(tokens)} tokens, {len(slots)} slots")
        if len(set(slots)) != len(slots):
            raise _reject(RadixRejection.DUPLICATE_INPUT_SLOT, f"slots {slots}")
        whole = len(tokens) - len(tokens) % self.page_size
        tokens, slots = tokens[:whole], slots[:whole]
        node_id, prefix, splits = self.walk(tokens)
        tree_prefix = tuple(s for p in self.path(node_id) for s in self.nodes[p].slot_ids)
        tree_owned = {s for n in self.nodes.values() for s in n.slot_ids}
        duplicates = []
        for i, s in enumerate(slots):
            if i < prefix and s == tree_prefix[i]:
                continue  # the request already referenced the tree's own slot: not a second owner
            owner = self.owner_of_private(s)
            if s in tree_owned or (owner is not None and request_id is not None and owner != request_id):
                raise _reject(RadixRejection.OWNED_SLOT_REUSE, f"slot {s} at position {i} is already owned")
            if s not in self.pool_slots or owner is None:
                raise _reject(RadixRejection.SLOT_NOT_PRIVATE,
                              f"slot {s} at position {i} is not private to {request_id or 'any request'}")
            if i < prefix:
                duplicates.append(s)
        new_id = None
        terminal = node_id
        if prefix < len(tokens):
            new_id = self.next_node_id
            self.next_node_id += 1
            self.set(RadixNode(new_id, node_id, tokens[prefix:], slots[prefix:], {}, 0, self.clock, self.clock))
            parent = self.nodes[node_id]
            self.set(attrs.evolve(parent, children={**parent.children, self.key(tokens[prefix:]): new_id}))
            for s in slots[prefix:]:
                owner = self.owner_of_private(s)
                assert owner is not None
                self.private[owner] = tuple(x for x in self.private[owner] if x != s)
                if not self.private[owner]:
                    del self.private[owner]
            terminal = new_id
        return InsertReceipt(prefix, tuple(duplicates), new_id, terminal, splits)

    def commit(self, s: RadixState) -> RadixState:
        succ = attrs.evolve(s, nodes=self.nodes, free_slot_ids=frozenset(self.free),
                            private_slot_ids=self.private, terminal_locks=self.terminal_locks,
                            requests=self.requests, version=s.version + 1,
                            next_node_id=self.next_node_id, clock=self.clock)
        check_state(succ)
        return succ


def _draft(state: RadixState) -> _Draft:
    return _Draft.of(state)


def _committed(op: str, before: RadixState, d: _Draft, **kw: Any) -> tuple[RadixState, RadixMutationReceipt]:
    after = d.commit(before)
    return after, RadixMutationReceipt(op, state_sha256(before), state_sha256(after), after.version, **kw)


def _stamp(receipt: Any, before: RadixState, after: RadixState) -> Any:
    """Bind a receipt to the digests of the state it was applied to and the state it committed."""
    return attrs.evolve(receipt, predecessor_sha256=state_sha256(before), successor_sha256=state_sha256(after))


def _check_expected(state: RadixState, expected_version: int | None) -> None:
    if expected_version is not None and expected_version != state.version:
        raise _reject(RadixRejection.STALE_VERSION,
                      f"prepared against version {expected_version}, tree is at {state.version}")


def _node(state: RadixState, node_id: int) -> RadixNode:
    if not isinstance(node_id, int) or node_id not in state.nodes:
        raise _reject(RadixRejection.UNKNOWN_NODE, f"node {node_id!r}")
    return state.nodes[node_id]


# public transitions -----------------------------------------------------------------------------
def match(state: RadixState, tokens: Sequence[int], expected_version: int | None = None
          ) -> tuple[RadixState, MatchReceipt]:
    """Longest cached prefix; a match ending inside an edge splits it (a mutation, 0x08B)."""
    toks = _ints("tokens", tokens)
    _check_expected(state, expected_version)
    d = _draft(state)
    node_id, matched, splits = d.walk(toks)
    after = d.commit(state)
    return after, _stamp(MatchReceipt(node_id, matched, after.path_slots(node_id), after.path(node_id), bool(splits)),
                         state, after)


def reserve(state: RadixState, request_id: str, slot_ids: Sequence[int]
            ) -> tuple[RadixState, RadixMutationReceipt]:
    """Move free slots to ``request_id``'s private (unpublished) ledger."""
    slots = _ints("slot_ids", slot_ids)
    if len(set(slots)) != len(slots):
        raise _reject(RadixRejection.DUPLICATE_INPUT_SLOT, f"slots {slots}")
    for s in slots:
        if s not in state.pool_slot_ids:
            raise _reject(RadixRejection.SLOT_OUT_OF_POOL, f"slot {s}")
        if s not in state.free_slot_ids:
            raise _reject(RadixRejection.SLOT_NOT_FREE, f"slot {s}")
    d = _draft(state)
    d.free -= set(slots)
    d.private[request_id] = d.private.get(request_id, ()) + slots
    return _committed("reserve", state, d, detail=slots)


def decode(state: RadixState, request_id: str, token: int, slot_id: int
           ) -> tuple[RadixState, RadixMutationReceipt]:
    """A running request appends one generated ``token``: its row goes to the free slot ``slot_id``, which
    joins the request's private tail (never a slot of the tree: cached rows are shared and immutable)."""
    (tok,) = _ints("token", (token,))
    if request_id not in state.requests:
        raise _reject(RadixRejection.UNKNOWN_REQUEST, f"{request_id!r} holds no lease")
    after, receipt = reserve(state, request_id, (slot_id,))
    return after, attrs.evolve(receipt, operation="decode", detail={"token": tok, "slot": slot_id})


def insert(state: RadixState, tokens: Sequence[int], slot_ids: Sequence[int], request_id: str | None = None,
           expected_version: int | None = None) -> tuple[RadixState, InsertReceipt]:
    """Publish private slots under ``tokens``; returns the cached prefix length so the caller can release
    its duplicate slots (they stay private to their request until released)."""
    toks, slots = _ints("tokens", tokens), _ints("slot_ids", slot_ids)
    _check_expected(state, expected_version)
    d = _draft(state)
    receipt = d.insert(toks, slots, request_id)
    after = d.commit(state)
    return after, _stamp(receipt, state, after)


def release(state: RadixState, request_id: str, slot_ids: Sequence[int] | None = None
            ) -> tuple[RadixState, RadixMutationReceipt]:
    """Return private slots of ``request_id`` (all of them by default) to the free set."""
    if request_id not in state.private_slot_ids:
        raise _reject(RadixRejection.UNKNOWN_REQUEST, f"{request_id!r} owns no private slots")
    owned = state.private_slot_ids[request_id]
    slots = owned if slot_ids is None else _ints("slot_ids", slot_ids)
    for s in slots:
        if s not in owned:
            raise _reject(RadixRejection.SLOT_NOT_PRIVATE, f"slot {s} is not private to {request_id!r}")
    d = _draft(state)
    d.release_private(request_id, slots)
    return _committed("release", state, d, detail=tuple(slots))


def lock(state: RadixState, node_id: int) -> tuple[RadixState, RadixMutationReceipt]:
    """One more lock holder ending at ``node_id``: every node on its path gains one reference."""
    _node(state, node_id)
    d = _draft(state)
    d.add_lock(node_id, +1)
    return _committed("lock", state, d, detail=node_id)


def unlock(state: RadixState, node_id: int) -> tuple[RadixState, RadixMutationReceipt]:
    """Drop one lock holder ending at ``node_id``; a count that would go below zero is rejected."""
    _node(state, node_id)
    d = _draft(state)
    d.add_lock(node_id, -1)
    return _committed("unlock", state, d, detail=node_id)


def lru(node: RadixNode) -> tuple[int, ...]:
    """Least recently used first (the paper's policy); ties by creation, then id."""
    return (node.last_access, node.created_at, node.node_id)


def fifo(node: RadixNode) -> tuple[int, ...]:
    return (node.created_at, node.node_id)


def _delete_leaf(d: _Draft, node_id: int) -> tuple[int, ...]:
    leaf = d.nodes.pop(node_id)
    parent = d.nodes[leaf.parent_id]  # type: ignore[index]
    d.set(attrs.evolve(parent, children={k: v for k, v in parent.children.items() if v != node_id}))
    d.free |= set(leaf.slot_ids)
    return leaf.slot_ids


def evict(state: RadixState, target_tokens: int, ranking: Callable[[RadixNode], Any] = lru
          ) -> tuple[RadixState, EvictReceipt]:
    """Free whole unlocked leaf edges in ranking order until ``target_tokens`` are released; a parent
    left childless and unlocked becomes a candidate in the same call (0x08E)."""
    if not isinstance(target_tokens, int) or isinstance(target_tokens, bool) or target_tokens < 0:
        raise _reject(RadixRejection.NEGATIVE_EVICTION_TARGET, f"target {target_tokens!r}")
    d = _draft(state)
    candidates = {n.node_id for n in d.nodes.values()
                  if n.node_id != ROOT and n.lock_ref == 0 and not n.children}
    released, order, freed = 0, [], []
    while released < target_tokens and candidates:
        victim = min(candidates, key=lambda i: ranking(d.nodes[i]))
        candidates.discard(victim)
        parent_id = d.nodes[victim].parent_id
        slots = _delete_leaf(d, victim)
        order.append(victim)
        freed.append(slots)
        released += len(slots)
        parent = d.nodes[parent_id]  # type: ignore[index]
        if parent.node_id != ROOT and not parent.children and parent.lock_ref == 0:
            candidates.add(parent.node_id)
    after = d.commit(state)
    return after, _stamp(EvictReceipt(target_tokens, released, tuple(order), tuple(freed)), state, after)


def evict_node(state: RadixState, node_id: int) -> tuple[RadixState, EvictReceipt]:
    """Evict one named node: it must be an unlocked leaf (a checked victim chosen by an outside policy)."""
    node = _node(state, node_id)
    if node_id == ROOT:
        raise _reject(RadixRejection.ROOT_EVICTION, "node 0")
    if node.children:
        raise _reject(RadixRejection.INTERNAL_NODE_EVICTION, f"node {node_id} has {len(node.children)} children")
    if node.lock_ref:
        raise _reject(RadixRejection.LOCKED_LEAF_EVICTION, f"node {node_id} lock_ref {node.lock_ref}")
    d = _draft(state)
    slots = _delete_leaf(d, node_id)
    after = d.commit(state)
    return after, _stamp(EvictReceipt(len(slots), len(slots), (node_id,), (slots,)), state, after)


# request-level transactions ---------------------------------------------------------------------
def publish_unfinished(state: RadixState, request_id: str, append_tokens: Sequence[int],
                       append_slot_ids: Sequence[int], expected_version: int | None = None
                       ) -> tuple[RadixState, RadixMutationReceipt]:
    """Publish a running request's new rows and move its lock to the new terminal node (0x08C, r07).

    One transaction: reserve (free slots) -> insert the request's full path -> free its duplicate
    copies -> rematch the full path -> move the lock. A request seen for the first time starts at the
    root with nothing published. ``append_tokens`` follow the request's published (protected) prefix: at
    page size > 1 an unaligned tail is not published, stays private, and is passed again next time.
    """
    toks, slots = _ints("append_tokens", append_tokens), _ints("append_slot_ids", append_slot_ids)
    _check_expected(state, expected_version)
    if len(toks) != len(slots):
        raise _reject(RadixRejection.TOKEN_SLOT_LENGTH_MISMATCH, f"{len(toks)} tokens, {len(slots)} slots")
    entry = state.requests.get(request_id, RequestEntry(request_id, ROOT, 0))
    d = _draft(state)
    mine = set(d.private.get(request_id, ()))
    to_reserve = [s for s in slots if s not in mine]
    for s in to_reserve:
        if s not in state.pool_slot_ids:
            raise _reject(RadixRejection.SLOT_OUT_OF_POOL, f"slot {s}")
        if s not in d.free:
            raise _reject(RadixRejection.OWNED_SLOT_REUSE, f"slot {s} is not free")
    d.free -= set(to_reserve)
    d.private[request_id] = d.private.get(request_id, ()) + tuple(to_reserve)
    full_tokens = state.path_tokens(entry.last_node_id) + toks
    full_slots = state.path_slots(entry.last_node_id) + slots
    ins = d.insert(full_tokens, full_slots, request_id)
    d.release_private(request_id, ins.duplicate_slot_ids)
    new_last, matched, resplit = d.walk(full_tokens)
    if matched != state.aligned(len(full_tokens)) or resplit:
        raise _reject(RadixRejection.PATH_SLOT_MISMATCH, f"rematch covered {matched} of {len(full_tokens)}")
    if request_id in state.requests:
        d.add_lock(entry.last_node_id, -1)
    d.add_lock(new_last, +1)
    d.requests[request_id] = attrs.evolve(entry, last_node_id=new_last, protected_tokens=matched)
    return _committed("publish_unfinished", state, d, splits=ins.splits, duplicate_slot_ids=ins.duplicate_slot_ids,
                      detail={"old_last_node": entry.last_node_id, "new_last_node": new_last,
                              "prefix_tokens": ins.prefix_tokens})


def cache_finished(state: RadixState, request_id: str, tokens: Sequence[int], slot_ids: Sequence[int]
                   ) -> tuple[RadixState, RadixMutationReceipt]:
    """A finished producer publishes its rows: the suffix joins the tree, the duplicate copies of the
    cached prefix and any leftover private slots return to the pool, and its lock (if any) is dropped."""
    toks, slots = _ints("tokens", tokens), _ints("slot_ids", slot_ids)
    d = _draft(state)
    ins = d.insert(toks, slots, request_id)
    d.release_private(request_id, d.private.get(request_id, ()))
    entry = d.requests.pop(request_id, None)
    if entry is not None:
        d.add_lock(entry.last_node_id, -1)
    return _committed("cache_finished", state, d, splits=ins.splits, duplicate_slot_ids=ins.duplicate_slot_ids,
                      detail={"prefix_tokens": ins.prefix_tokens, "new_node": ins.new_node_id})


def release_request(state: RadixState, request_id: str) -> tuple[RadixState, RadixMutationReceipt]:
    """End a request's lease: drop its lock and return its private slots."""
    if request_id not in state.requests and request_id not in state.private_slot_ids:
        raise _reject(RadixRejection.UNKNOWN_REQUEST, f"{request_id!r}")
    d = _draft(state)
    entry = d.requests.pop(request_id, None)
    if entry is not None:
        d.add_lock(entry.last_node_id, -1)
    d.release_private(request_id, d.private.get(request_id, ()))
    return _committed("release_request", state, d, detail=request_id)


def match_and_lock(state: RadixState, request_id: str, request_generation: int, prompt_tokens: Sequence[int]
                   ) -> tuple[RadixState, RadixSchedulerHandoffReceipt]:
    """Match a waiting request, lock the matched path under a lease, and freeze the handoff receipt.
    The index reports the physical fact; it makes no scheduling decision (0x08G)."""
    toks = _ints("prompt_tokens", prompt_tokens)
    if request_id in state.requests:
        raise _reject(RadixRejection.LEASE_ALREADY_HELD, f"{request_id!r} already holds a lease")
    d = _draft(state)
    node_id, matched, _ = d.walk(toks)
    d.add_lock(node_id, +1)
    d.requests[request_id] = RequestEntry(request_id, node_id, matched, request_generation)
    after = d.commit(state)
    return after, _seal(RadixSchedulerHandoffReceipt(
        request_id=request_id, request_generation=request_generation, tree_version=after.version,
        tree_state_sha256=state_sha256(after), matched_tokens=matched, prefix_slot_ids=after.path_slots(node_id),
        path_node_ids=after.path(node_id), terminal_node_id=node_id, suffix_interval=(matched, len(toks)),
        lock_lease_id=f"lease-{request_id}-v{after.version}", lock_required_until_scheduler_disposition=True,
        scheduler_owner="M5.2", policy_decision=None, receipt_sha256=""))


def _seal(receipt: RadixSchedulerHandoffReceipt) -> RadixSchedulerHandoffReceipt:
    return attrs.evolve(receipt, receipt_sha256=handoff_fields_sha256(receipt))


def verify_handoff(state: RadixState, receipt: RadixSchedulerHandoffReceipt) -> None:
    """Accept a handoff receipt only if it is untampered, names no policy decision, agrees with the
    current tree path, and is either current or still protected by its lease."""
    if handoff_fields_sha256(receipt) != receipt.receipt_sha256:
        raise _reject(RadixRejection.RECEIPT_TAMPERED, f"receipt for {receipt.request_id!r}")
    if receipt.policy_decision is not None:
        raise _reject(RadixRejection.POLICY_DECISION_FORBIDDEN, f"{receipt.policy_decision!r}")
    start, stop = receipt.suffix_interval
    if start != receipt.matched_tokens or stop < start or len(receipt.prefix_slot_ids) != receipt.matched_tokens:
        raise _reject(RadixRejection.SUFFIX_MISMATCH,
                      f"suffix {receipt.suffix_interval} after {receipt.matched_tokens} matched tokens")
    entry = state.requests.get(receipt.request_id)
    locked = entry is not None and entry.last_node_id == receipt.terminal_node_id
    if receipt.tree_version != state.version and not locked:
        raise _reject(RadixRejection.STALE_VERSION,
                      f"unlocked receipt of version {receipt.tree_version}, tree at {state.version}")
    if receipt.terminal_node_id not in state.nodes:
        raise _reject(RadixRejection.STALE_VERSION, f"terminal node {receipt.terminal_node_id} is gone")
    if (state.path(receipt.terminal_node_id) != receipt.path_node_ids
            or state.path_slots(receipt.terminal_node_id) != receipt.prefix_slot_ids):
        raise _reject(RadixRejection.PATH_SLOT_MISMATCH, f"receipt for {receipt.request_id!r}")


__all__ = [
    "ROOT", "RadixRejection", "RadixNode", "selector", "RadixState", "RequestEntry", "PartitionReport", "MatchReceipt",
    "InsertReceipt", "EvictReceipt", "RadixMutationReceipt", "RadixSchedulerHandoffReceipt", "state_sha256",
    "handoff_fields_sha256", "check_state", "match", "reserve", "decode", "insert", "release", "lock", "unlock", "lru",
    "fifo", "evict", "evict_node", "publish_unfinished", "cache_finished", "release_request", "match_and_lock",
    "verify_handoff", "PrefillEstimate", "prefill_estimate",
]


@attrs.frozen
class PrefillEstimate:
    """The separate prefill and capacity estimates of 0x08G (the scheduler decides; the index reports)."""

    prompt_tokens_to_compute: int
    new_useful_kv_bytes: int
    new_physical_blocks: int
    new_physical_capacity_bytes: int


def prefill_estimate(receipt: RadixSchedulerHandoffReceipt, row_bytes: int, block_tokens: int,
                     free_private_tail_slots: int = 0) -> PrefillEstimate:
    """compute = S_prompt - matched; useful = compute * B_row; blocks = ceil(max(compute - tail, 0) / P)."""
    if row_bytes <= 0 or block_tokens <= 0 or free_private_tail_slots < 0:
        raise _reject(RadixRejection.MALFORMED_INPUT,
                      f"row_bytes={row_bytes}, block_tokens={block_tokens}, tail={free_private_tail_slots}")
    compute = receipt.suffix_interval[1] - receipt.matched_tokens
    blocks = -(-max(compute - free_private_tail_slots, 0) // block_tokens)
    return PrefillEstimate(compute, compute * row_bytes, blocks, blocks * block_tokens * row_bytes)
