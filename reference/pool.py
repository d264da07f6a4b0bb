"""Block pool per cache group, with a journaled state store and an incremental state digest (0x04B, 0x05G).

Invariants kept here:

* every block of a pool is in exactly one of: the free+evictable queue (refcount 0, not reserved),
  referenced (refcount > 0, out of the queue), or reserved by an in-flight transaction;
* a block's generation advances each time it leaves the queue for a new owner, so a handle is valid
  only while its generation equals the block's current one (the ABA fence of 0x05F);
* a cache identity is a weak reference: it never counts towards the refcount; a zero-ref block with an
  identity is EVICTABLE, without one it is FREE, and both sit in the same queue;
* every write goes through a :class:`Journal`, so a transaction can be undone to an exact predecessor,
  and the state digest is maintained incrementally (no O(pool) work per operation).

The digest is SHA-256 over a canonical encoding: each stored cell ``(table, key, value)`` is encoded
with ``repr`` of plain values and hashed with SHA-256; the cells' hashes are summed modulo 2**256 (a
multiset hash, order-free and updatable in O(1)); the state digest is SHA-256 of a fixed tag plus that
sum. :meth:`Journal.recompute_digest` rebuilds it from scratch for the self-check.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterator
from typing import Any

import attrs

from kvexact.reference.handles import BlockHandle
from kvexact.reference.rejections import Rejected

_MOD = 1 << 256
_MISSING = object()
DIGEST_TAG = b"kvexact/allocator-state/v1"


class PoolRejection(enum.Enum):
    OUT_OF_MEMORY = "no free or evictable block left in this cache group's pool"
    STALE_BLOCK_GENERATION = "handle generation differs from the block's current generation (ABA)"
    HANDLE_NOT_OWNED = "handle names a block that went back to the free queue (retired handle)"
    FOREIGN_POOL_HANDLE = "handle names another pool or cache group"
    UNKNOWN_BLOCK = "block id is not provisioned in this pool"
    REFCOUNT_UNDERFLOW = "dropping a reference that the block does not hold"
    BLOCK_NOT_RESERVED = "block is not reserved by an in-flight transaction"
    BLOCK_NOT_QUEUED = "block is not in the free+evictable queue"
    BAD_POOL_CONFIG = "pool configuration is malformed"


class QueuePolicy(enum.Enum):
    """Which end of the free+evictable queue allocation takes from; released blocks join the tail."""

    LRU = "lru"  # take the head: least recently freed first (vLLM's free queue)
    MRU = "mru"  # take the tail: most recently freed first
    LOWEST_ID = "lowest-id"  # take the smallest queued block id: O(queue), for small models only
    # (CowPublication.tla's AppendBoundary takes the lowest free block)


def _cell_hash(table: str, key: Any, value: Any) -> int:
    data = f"{table}\x1f{key!r}\x1f{value!r}".encode()
    return int.from_bytes(hashlib.sha256(data).digest(), "big")


class Journal:
    """Undo log plus incremental digest shared by every :class:`JDict` of one allocator state."""

    def __init__(self) -> None:
        self.undo: list[tuple[JDict, Any, Any]] = []
        self.acc = 0
        self.tables: list[JDict] = []
        self.depth = 0
        self.writes = 0  # cells written (a deterministic work counter for the benchmark)

    def mark(self) -> int:
        return len(self.undo)

    def undo_to(self, mark: int) -> None:
        """Restore every cell written since ``mark`` (the digest follows exactly)."""
        while len(self.undo) > mark:
            table, key, old = self.undo.pop()
            table._raw_set(key, old)

    def forget(self) -> None:
        self.undo.clear()

    def digest(self) -> str:
        return hashlib.sha256(DIGEST_TAG + self.acc.to_bytes(32, "big")).hexdigest()

    def recompute_digest(self) -> str:
        acc = 0
        for table in self.tables:
            for key, value in table.data.items():
                acc = (acc + _cell_hash(table.name, key, value)) % _MOD
        return hashlib.sha256(DIGEST_TAG + acc.to_bytes(32, "big")).hexdigest()


class JDict:
    """A dict whose writes are journaled and folded into the journal's digest."""

    def __init__(self, journal: Journal, name: str) -> None:
        self.journal = journal
        self.name = name
        self.data: dict[Any, Any] = {}
        journal.tables.append(self)

    def _raw_set(self, key: Any, value: Any) -> None:
        old = self.data.get(key, _MISSING)
        if old is not _MISSING:
            self.journal.acc = (self.journal.acc - _cell_hash(self.name, key, old)) % _MOD
        if value is _MISSING:
            self.data.pop(key, None)
        else:
            self.data[key] = value
            self.journal.acc = (self.journal.acc + _cell_hash(self.name, key, value)) % _MOD

    def __setitem__(self, key: Any, value: Any) -> None:
        self.journal.writes += 1
        self.journal.undo.append((self, key, self.data.get(key, _MISSING)))
        self._raw_set(key, value)

    def __delitem__(self, key: Any) -> None:
        if key not in self.data:
            raise KeyError(key)
        self.journal.writes += 1
        self.journal.undo.append((self, key, self.data[key]))
        self._raw_set(key, _MISSING)

    def __getitem__(self, key: Any) -> Any:
        return self.data[key]

    def __contains__(self, key: Any) -> bool:
        return key in self.data

    def __len__(self) -> int:
        return len(self.data)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.data)

    def get(self, key: Any, default: Any = None) -> Any:
        return self.data.get(key, default)

    def items(self):
        return self.data.items()


@attrs.frozen
class GroupConfig:
    """One cache group: its pool id, block size in tokens and local row bytes (0x04E)."""

    cache_group_id: int
    pool_id: int
    block_tokens: int
    row_bytes: int

    @property
    def block_bytes(self) -> int:
        return self.block_tokens * self.row_bytes


@attrs.frozen
class BlockRecord:
    """A provisioned block: current generation, written rows (token ids), weak cache key, reservation."""

    generation: int
    rows: tuple[int, ...] = ()
    cache_key: str | None = None
    reserved_by: str | None = None  # transaction id while RESERVED (unpublished)
    bundle_epoch: int = 0  # allocator epoch after the publication that created this block's bundle

    @property
    def valid_rows(self) -> int:
        return len(self.rows)


class BlockState(enum.Enum):
    FREE = "free"
    EVICTABLE = "evictable"
    RESERVED = "reserved"
    REFERENCED = "referenced"


class BlockPool:
    """The blocks of one cache group: records, derived refcounts and the free+evictable queue.

    The queue is two journaled maps (sequence number <-> block id) plus head/tail counters, so taking
    from either end and removing from the middle are O(1) amortized.
    """

    def __init__(self, journal: Journal, config: GroupConfig, block_ids: list[int],
                 generations: dict[int, int] | None = None, policy: QueuePolicy = QueuePolicy.LRU) -> None:
        if config.block_tokens <= 0 or config.row_bytes <= 0 or not block_ids:
            raise Rejected(PoolRejection.BAD_POOL_CONFIG, f"group {config.cache_group_id}: {config}")
        if len(set(block_ids)) != len(block_ids) or min(block_ids) < 0:
            raise Rejected(PoolRejection.BAD_POOL_CONFIG, f"group {config.cache_group_id}: duplicate or "
                           "negative block ids")
        self.config = config
        self.policy = policy
        g = config.cache_group_id
        self.blocks = JDict(journal, f"g{g}/blocks")
        self.refs = JDict(journal, f"g{g}/refs")  # block id -> refcount, only when > 0
        self.q_at = JDict(journal, f"g{g}/queue_at")  # seq -> block id
        self.q_seq = JDict(journal, f"g{g}/queue_seq")  # block id -> seq
        self.q_ends = JDict(journal, f"g{g}/queue_ends")  # "head" / "next" -> seq
        self.q_ends["head"] = 0
        self.q_ends["next"] = 0
        for b in block_ids:
            self.blocks[b] = BlockRecord(generation=(generations or {}).get(b, 0))
            self._enqueue(b)

    # ---- queries -----------------------------------------------------------------------------
    @property
    def group(self) -> int:
        return self.config.cache_group_id

    def handle(self, block_id: int) -> BlockHandle:
        return BlockHandle(self.config.pool_id, self.group, block_id, self.blocks[block_id].generation)

    def refcount(self, block_id: int) -> int:
        return self.refs.get(block_id, 0)

    def state_of(self, block_id: int) -> BlockState:
        rec = self.blocks[block_id]
        if rec.reserved_by is not None:
            return BlockState.RESERVED
        if self.refcount(block_id) > 0:
            return BlockState.REFERENCED
        return BlockState.EVICTABLE if rec.cache_key is not None else BlockState.FREE

    def queue_order(self) -> list[int]:
        """Block ids from head (next taken under LRU) to tail; O(queue) -- for tests and projection."""
        return [self.q_at[s] for s in sorted(self.q_at.data)]

    def num_queued(self) -> int:
        return len(self.q_at)

    def check_handle(self, handle: BlockHandle) -> BlockRecord:
        """The record a handle names, rejecting another pool's handle, an unknown block or a stale one."""
        if handle.pool_id != self.config.pool_id or handle.cache_group_id != self.group:
            raise Rejected(PoolRejection.FOREIGN_POOL_HANDLE, f"{handle} given to pool {self.config.pool_id} "
                           f"group {self.group}")
        rec = self.blocks.get(handle.block_id)
        if rec is None:
            raise Rejected(PoolRejection.UNKNOWN_BLOCK, f"{handle}")
        if rec.generation != handle.generation:
            raise Rejected(PoolRejection.STALE_BLOCK_GENERATION,
                           f"{handle} but block {handle.block_id} is at generation {rec.generation}")
        return rec

    # ---- queue -------------------------------------------------------------------------------
    def _enqueue(self, block_id: int) -> None:
        seq = self.q_ends["next"]
        self.q_at[seq] = block_id
        self.q_seq[block_id] = seq
        self.q_ends["next"] = seq + 1

    def _dequeue(self, block_id: int) -> None:
        seq = self.q_seq.get(block_id)
        if seq is None:
            raise Rejected(PoolRejection.BLOCK_NOT_QUEUED, f"block {block_id} of group {self.group}")
        del self.q_at[seq]
        del self.q_seq[block_id]

    def _take(self) -> int:
        if not len(self.q_at):
            raise Rejected(PoolRejection.OUT_OF_MEMORY, f"group {self.group} (pool {self.config.pool_id})")
        if self.policy is QueuePolicy.LOWEST_ID:
            block_id = min(self.q_seq.data)
            self._dequeue(block_id)
            return block_id
        if self.policy is QueuePolicy.LRU:
            seq = self.q_ends["head"]
            while seq not in self.q_at:
                seq += 1
            self.q_ends["head"] = seq
        else:
            seq = self.q_ends["next"] - 1
            while seq not in self.q_at:
                seq -= 1
            self.q_ends["next"] = seq  # holes above the new tail are gone for good
        block_id = self.q_at[seq]
        self._dequeue(block_id)
        return block_id

    # ---- transitions (called by the allocator inside a journaled transaction) ----------------
    def reserve(self, txn_id: str) -> tuple[BlockHandle, str | None]:
        """Take the policy's next queued block for ``txn_id``: generation + 1, rows cleared.

        Returns the new handle and the cache key the block lost (the caller drops the index entry).
        """
        block_id = self._take()
        rec = self.blocks[block_id]
        self.blocks[block_id] = BlockRecord(generation=rec.generation + 1, reserved_by=txn_id)
        return self.handle(block_id), rec.cache_key

    def publish_reserved(self, handle: BlockHandle, txn_id: str) -> None:
        rec = self.check_handle(handle)
        if rec.reserved_by != txn_id:
            raise Rejected(PoolRejection.BLOCK_NOT_RESERVED, f"{handle} by {txn_id}")
        self.blocks[handle.block_id] = attrs.evolve(rec, reserved_by=None)

    def set_rows(self, handle: BlockHandle, rows: tuple[int, ...]) -> None:
        rec = self.check_handle(handle)
        self.blocks[handle.block_id] = attrs.evolve(rec, rows=rows)

    def set_cache_key(self, block_id: int, key: str | None) -> None:
        self.blocks[block_id] = attrs.evolve(self.blocks[block_id], cache_key=key)

    def incref(self, block_id: int) -> None:
        """One more strong reference; a zero-ref queued block (FREE/EVICTABLE) leaves the queue."""
        n = self.refcount(block_id)
        if n == 0 and block_id in self.q_seq:
            self._dequeue(block_id)
        self.refs[block_id] = n + 1

    def decref(self, block_id: int) -> None:
        """One reference fewer; at zero the block joins the queue tail (identity kept: EVICTABLE)."""
        n = self.refcount(block_id)
        if n <= 0:
            raise Rejected(PoolRejection.REFCOUNT_UNDERFLOW, f"block {block_id} of group {self.group}")
        if n == 1:
            del self.refs[block_id]
            self._enqueue(block_id)
        else:
            self.refs[block_id] = n - 1
