"""vLLM 0.33.0's ``BlockPool`` as frozen records and pure transitions (``docs/peers/vllm.md`` §1, §4, §5).

Invariants kept by every transition here:
- block 0 is the null block: never in the free queue, never hashed, its ref count not maintained;
- a block is in the free queue exactly when its ref count is 0 (and it is not the null block);
- allocation pops from the queue head; a popped block loses its cached identity (lazy eviction);
- freed blocks without a hash are prepended (reused first), hashed ones appended (evicted last), in
  the order given;
- a cached key maps to one or more blocks in insertion order; a lookup returns the first.
A failed transition raises :class:`Rejected` and leaves the (immutable) state it was given as it was.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from kvexact.reference.peers.vllm_hashing import external_hash, key_with_group, split_key, untagged
from kvexact.reference.rejections import Rejected

NULL_BLOCK_ID = 0


class PoolRejection(enum.Enum):
    """Why a block-pool operation was refused (vLLM raises ValueError/AssertionError for these)."""

    NO_FREE_BLOCKS = "popleft on an empty free queue"
    CANNOT_GET_FREE_BLOCKS = "fewer free blocks than requested"
    BLOCK_NOT_FREE = "the block is not in the free queue"
    BLOCK_ALREADY_FREE = "the block is already in the free queue"
    UNKNOWN_BLOCK = "block id outside the pool"
    BLOCK_ALREADY_HASHED = "a cached block cannot take a second hash"
    BLOCK_IN_USE = "a popped block still has references"
    BAD_POOL_SIZE = "a pool needs at least one block (the null block)"
    BAD_COUNT = "a block count must be a non-negative int"


# ---------------------------------------------------------------------------------------------
# The free queue


@attrs.frozen
class FreeQueue:
    """``FreeKVCacheBlockQueue``: block ids head -> tail; allocation takes the head."""

    blocks: tuple[int, ...] = attrs.field(default=(), converter=lambda ids: tuple(ids))

    def __len__(self) -> int:
        return len(self.blocks)

    def popleft(self) -> tuple[FreeQueue, int]:
        if not self.blocks:
            raise Rejected(PoolRejection.NO_FREE_BLOCKS, "No free blocks available")
        return FreeQueue(self.blocks[1:]), self.blocks[0]

    def popleft_n(self, n: int) -> tuple[FreeQueue, tuple[int, ...]]:
        _check_count(n)
        if n > len(self.blocks):
            raise Rejected(PoolRejection.CANNOT_GET_FREE_BLOCKS, f"popleft_n({n}) with {len(self.blocks)} free")
        return FreeQueue(self.blocks[n:]), self.blocks[:n]

    def remove(self, block_id: int) -> FreeQueue:
        if block_id not in self.blocks:
            raise Rejected(PoolRejection.BLOCK_NOT_FREE, f"remove({block_id})")
        return FreeQueue(tuple(b for b in self.blocks if b != block_id))

    def append(self, block_id: int) -> FreeQueue:
        return self.append_n((block_id,))

    def append_n(self, block_ids: Sequence[int]) -> FreeQueue:
        self._check_absent(block_ids)
        return FreeQueue(self.blocks + tuple(block_ids))

    def prepend_n(self, block_ids: Sequence[int]) -> FreeQueue:
        """The given blocks, in their order, in front of the old head."""
        self._check_absent(block_ids)
        return FreeQueue(tuple(block_ids) + self.blocks)

    def _check_absent(self, block_ids: Sequence[int]) -> None:
        present = [b for b in block_ids if b in self.blocks]
        if present or len(set(block_ids)) != len(block_ids):
            raise Rejected(PoolRejection.BLOCK_ALREADY_FREE, f"blocks {list(block_ids)} (present: {present})")


def _check_count(n: Any) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise Rejected(PoolRejection.BAD_COUNT, f"count {n!r}")


# ---------------------------------------------------------------------------------------------
# The prefix-cache map


@attrs.frozen
class HashToBlockMap:
    """``BlockHashToBlockMap``: key -> block ids in insertion order (duplicates kept, not merged)."""

    entries: tuple[tuple[bytes, tuple[int, ...]], ...] = ()

    def __len__(self) -> int:
        return len(self.entries)

    def as_dict(self) -> dict[bytes, tuple[int, ...]]:
        return dict(self.entries)

    def get_one(self, key: bytes) -> int | None:
        """The single block of ``key``, or the first inserted of its duplicates; None on a miss."""
        ids = self.as_dict().get(key)
        return ids[0] if ids else None

    def insert(self, key: bytes, block_id: int) -> HashToBlockMap:
        table = self.as_dict()
        table[key] = table.get(key, ()) + (block_id,)
        return HashToBlockMap(tuple(table.items()))

    def pop(self, key: bytes, block_id: int) -> tuple[HashToBlockMap, int | None]:
        """Remove ``block_id`` under ``key``; a non-matching id leaves the entry and returns None."""
        table = self.as_dict()
        ids = table.get(key, ())
        if block_id not in ids:
            return self, None
        rest = tuple(b for b in ids if b != block_id)
        if rest:
            table[key] = rest
        else:
            del table[key]
        return HashToBlockMap(tuple(table.items())), block_id


# ---------------------------------------------------------------------------------------------
# KV events


@attrs.frozen
class BlockStored:
    block_hashes: tuple[int | bytes, ...]
    parent_block_hash: int | bytes | None
    token_ids: tuple[int, ...]
    block_size: int
    lora_id: int | None
    lora_name: str | None
    extra_keys: tuple[tuple | None, ...]
    group_idx: int
    medium: str = "GPU"
    kv_cache_spec_kind: str | None = None


@attrs.frozen
class BlockRemoved:
    block_hashes: tuple[int | bytes, ...]
    group_idx: int
    medium: str = "GPU"


@attrs.frozen
class AllBlocksCleared:
    pass


KVEvent = BlockStored | BlockRemoved | AllBlocksCleared


# ---------------------------------------------------------------------------------------------
# The pool


@attrs.frozen
class PoolState:
    """One ``BlockPool``: ref counts, block keys, the free queue, the prefix-cache map, pending events."""

    num_blocks: int
    enable_caching: bool
    enable_events: bool
    use_int_block_hashes: bool
    ref_cnt: tuple[int, ...]
    block_key: tuple[bytes | None, ...]
    free: FreeQueue
    cached: HashToBlockMap
    events: tuple[KVEvent, ...] = ()

    @property
    def num_free_blocks(self) -> int:
        return len(self.free)

    def usage(self) -> float:
        """``1 - free / (num_blocks - 1)``: the fraction of usable blocks (null block excluded) in use."""
        usable = self.num_blocks - 1
        return 0.0 if usable == 0 else 1.0 - self.num_free_blocks / usable

    def check(self) -> None:
        """Self-check of the invariants in the module docstring (raises AssertionError)."""
        assert NULL_BLOCK_ID not in self.free.blocks and self.block_key[NULL_BLOCK_ID] is None
        for b in range(1, self.num_blocks):
            assert (self.ref_cnt[b] == 0) == (b in self.free.blocks), f"block {b}"
        keyed = {b: k for k, ids in self.cached.entries for b in ids}
        for b in range(self.num_blocks):
            assert keyed.get(b) == self.block_key[b], f"block {b} key"


def new_pool(num_blocks: int, enable_caching: bool = True, enable_events: bool = False,
             use_int_block_hashes: bool = True) -> PoolState:
    """A fresh pool: queue ``[1 .. num_blocks-1]`` (block 0 popped as the null block)."""
    if not isinstance(num_blocks, int) or isinstance(num_blocks, bool) or num_blocks < 1:
        raise Rejected(PoolRejection.BAD_POOL_SIZE, f"num_blocks={num_blocks!r}")
    return PoolState(
        num_blocks=num_blocks, enable_caching=enable_caching, enable_events=enable_events,
        use_int_block_hashes=use_int_block_hashes, ref_cnt=(0,) * num_blocks,
        block_key=(None,) * num_blocks, free=FreeQueue(range(1, num_blocks)), cached=HashToBlockMap())


def _check_block(pool: PoolState, block_id: Any) -> None:
    if not isinstance(block_id, int) or isinstance(block_id, bool) or not 0 <= block_id < pool.num_blocks:
        raise Rejected(PoolRejection.UNKNOWN_BLOCK, f"block {block_id!r} not in 0..{pool.num_blocks - 1}")


def _set(values: tuple, index: int, value: Any) -> tuple:
    return values[:index] + (value,) + values[index + 1:]


def _emit(pool: PoolState, *events: KVEvent) -> tuple[KVEvent, ...]:
    return pool.events + events if pool.enable_events else pool.events


def _ext(pool: PoolState, block_hash: bytes) -> int | bytes:
    return external_hash(block_hash, pool.use_int_block_hashes)


def get_cached_block(pool: PoolState, block_hash: bytes, group_ids: Sequence[int]) -> tuple[int, ...] | None:
    """The first cached block of ``block_hash`` in each group, or None unless every group has one."""
    found = []
    for group_id in group_ids:
        block_id = pool.cached.get_one(key_with_group(block_hash, group_id))
        if block_id is None:
            return None
        found.append(block_id)
    return tuple(found)


def insert_cached(pool: PoolState, block_id: int, key: bytes) -> PoolState:
    """Register ``block_id`` under ``key`` (``set_block_hash`` + map insert); no event."""
    _check_block(pool, block_id)
    if pool.block_key[block_id] is not None:
        raise Rejected(PoolRejection.BLOCK_ALREADY_HASHED, f"block {block_id}")
    return attrs.evolve(pool, block_key=_set(pool.block_key, block_id, key),
                        cached=pool.cached.insert(key, block_id))


def maybe_evict_cached_block(pool: PoolState, block_id: int) -> tuple[PoolState, bool]:
    """Drop ``block_id``'s cached identity (map entry and block hash), one BlockRemoved event.

    Ref counts and the free queue are untouched; a block without a hash is left as it is (False).
    """
    _check_block(pool, block_id)
    key = pool.block_key[block_id]
    if key is None:
        return pool, False
    cached, popped = pool.cached.pop(key, block_id)
    block_hash, group_id = split_key(key)
    events = _emit(pool, BlockRemoved((_ext(pool, block_hash),), group_id)) if popped is not None else pool.events
    pool = attrs.evolve(pool, cached=cached, block_key=_set(pool.block_key, block_id, None), events=events)
    return pool, popped is not None


def get_new_blocks(pool: PoolState, n: int) -> tuple[PoolState, tuple[int, ...]]:
    """Pop ``n`` blocks from the queue head, evict their cached identities, set their ref counts to 1."""
    _check_count(n)
    if n > pool.num_free_blocks:
        raise Rejected(PoolRejection.CANNOT_GET_FREE_BLOCKS, f"Cannot get {n} free blocks from the pool")
    free, popped = pool.free.popleft_n(n)
    pool = attrs.evolve(pool, free=free)
    ref = list(pool.ref_cnt)
    for block_id in popped:
        if pool.enable_caching:
            pool, _ = maybe_evict_cached_block(pool, block_id)
        if ref[block_id] != 0:
            raise Rejected(PoolRejection.BLOCK_IN_USE, f"block {block_id} popped with ref_cnt {ref[block_id]}")
        ref[block_id] = 1
    return attrs.evolve(pool, ref_cnt=tuple(ref)), popped


def touch(pool: PoolState, block_ids: Iterable[int]) -> PoolState:
    """Take one more reference on each block; a block at ref 0 leaves the free queue. Skips the null block."""
    ref, free = list(pool.ref_cnt), pool.free
    for block_id in block_ids:
        _check_block(pool, block_id)
        if block_id == NULL_BLOCK_ID:
            continue
        if ref[block_id] == 0:
            free = free.remove(block_id)
        ref[block_id] += 1
    return attrs.evolve(pool, ref_cnt=tuple(ref), free=free)


def free_blocks(pool: PoolState, ordered_block_ids: Iterable[int]) -> PoolState:
    """Drop one reference per block, walking in the given order; blocks reaching 0 re-enter the queue.

    Unhashed blocks (or any block with caching off) are prepended in walk order; hashed blocks are
    appended in walk order; hashes are kept (a freed cached block stays hit-able until popped).
    """
    ref = list(pool.ref_cnt)
    front: list[int] = []
    back: list[int] = []
    for block_id in ordered_block_ids:
        _check_block(pool, block_id)
        if block_id == NULL_BLOCK_ID:
            continue
        if ref[block_id] == 0:
            raise Rejected(PoolRejection.BLOCK_ALREADY_FREE, f"free of block {block_id} at ref_cnt 0")
        ref[block_id] -= 1
        if ref[block_id] == 0:
            hashed = pool.enable_caching and pool.block_key[block_id] is not None
            (back if hashed else front).append(block_id)
    return attrs.evolve(pool, ref_cnt=tuple(ref), free=pool.free.prepend_n(front).append_n(back))


@attrs.frozen
class CacheSource:
    """What ``cache_full_blocks`` reads from the request: its tokens, block hashes, extra keys, LoRA."""

    token_ids: tuple[int, ...]
    block_hashes: tuple[bytes, ...]
    block_extra_keys: tuple[tuple | None, ...]
    lora_id: int | None = None
    lora_name: str | None = None


def cache_full_blocks(pool: PoolState, source: CacheSource, block_ids: Sequence[int], num_cached_blocks: int,
                      num_full_blocks: int, block_size: int, group_id: int = 0) -> PoolState:
    """Register blocks ``[num_cached_blocks, num_full_blocks)`` of a request under its hashes.

    Null blocks are skipped. One BlockStored event per call (parent = hash of block
    ``num_cached_blocks - 1`` or None); nothing happens when there is no new full block.
    """
    if num_cached_blocks >= num_full_blocks:
        return pool
    if num_full_blocks > len(source.block_hashes) or num_full_blocks > len(block_ids):
        raise Rejected(PoolRejection.BAD_COUNT,
                       f"num_full_blocks={num_full_blocks} with {len(source.block_hashes)} hashes, "
                       f"{len(block_ids)} blocks")
    events = pool.events
    for index in range(num_cached_blocks, num_full_blocks):
        block_id = block_ids[index]
        if block_id == NULL_BLOCK_ID:
            continue
        pool = insert_cached(pool, block_id, key_with_group(source.block_hashes[index], group_id))
    if pool.enable_events:
        parent = source.block_hashes[num_cached_blocks - 1] if num_cached_blocks > 0 else None
        stored = BlockStored(
            block_hashes=tuple(_ext(pool, h) for h in source.block_hashes[num_cached_blocks:num_full_blocks]),
            parent_block_hash=None if parent is None else _ext(pool, parent),
            token_ids=tuple(source.token_ids[num_cached_blocks * block_size:num_full_blocks * block_size]),
            block_size=block_size, lora_id=source.lora_id, lora_name=source.lora_name,
            extra_keys=tuple(untagged(k) for k in source.block_extra_keys[num_cached_blocks:num_full_blocks]),
            group_idx=group_id)
        events = events + (stored,)
    return attrs.evolve(pool, events=events)


def evict_blocks(pool: PoolState, block_ids: Iterable[int]) -> PoolState:
    """The KV-connector hook: drop the cached identities of these blocks; refs and queue untouched."""
    for block_id in block_ids:
        pool, _ = maybe_evict_cached_block(pool, block_id)
    return pool


def reset_prefix_cache(pool: PoolState) -> tuple[PoolState, bool]:
    """Clear every cached identity, only when no block is in use; queue order unchanged.

    Returns False (state unchanged) while any block is referenced; emits AllBlocksCleared on success.
    """
    if pool.num_free_blocks != pool.num_blocks - 1:
        return pool, False
    pool = attrs.evolve(pool, cached=HashToBlockMap(), block_key=(None,) * pool.num_blocks,
                        events=_emit(pool, AllBlocksCleared()))
    return pool, True


def take_events(pool: PoolState) -> tuple[PoolState, tuple[KVEvent, ...]]:
    """Drain the pending events."""
    return attrs.evolve(pool, events=()), pool.events
