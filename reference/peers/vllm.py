"""Peer profile: vLLM 0.33.0's ``KVCacheManager`` for one full-attention cache group (``docs/peers/vllm.md``).

Separate from the normative reference ([design](../design.md), "Seed versus peers"): frozen records and pure
transitions that reproduce vLLM's observable behaviour (block ids, hit lengths, free-queue order, ref
counts, cache events). Out of scope here: sliding window, hybrid groups (their hit convergence and
publication are ``vllm_hybrid.py``), Mamba, EAGLE, KV connectors' external tokens, watermarks, encoder
tokens.

Invariants kept by the manager:
- a lookup (``get_computed_blocks``) changes nothing; hits are whole cached blocks, at most
  ``num_tokens - 1`` tokens by default, and stop at the first miss;
- ``allocate_slots`` either succeeds or returns no blocks and leaves the state exactly as it was;
  what it needs = new blocks + hit blocks that still sit in the free queue;
- a request's block list only grows until it is freed; full blocks of computed-or-scheduled tokens
  are cached at allocation time, lookahead slots never;
- ``free`` releases a request's blocks tail first.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import attrs

from kvexact.reference.peers import vllm_pool as bp
from kvexact.reference.peers.vllm_hashing import NO_EXTRAS, BlockHasher, HashAlgo, RequestExtras, none_hash
from kvexact.reference.rejections import Rejected

SPEC_KIND = "full_attention"
GROUP_ID = 0


class ManagerRejection(enum.Enum):
    """Why the manager refused an operation (the names vLLM's ValueErrors/None results stand for)."""

    NO_TOKENS_TO_SCHEDULE = "num_new_tokens == 0 and no computed tokens to adopt"
    INSUFFICIENT_BLOCKS = "allocate_slots needs more blocks than are free (vLLM returns None)"
    HITS_FOR_RUNNING_REQUEST = "prefix hits can only be adopted by a request's first allocation"
    BAD_ARGUMENT = "a token or block count is not a non-negative int"
    BAD_CONFIG = "num_blocks, block_size and max_model_len must be positive ints"
    UNKNOWN_REQUEST = "no such request"
    DUPLICATE_REQUEST = "the request id is already allocated"
    UNITARY_HASH_BLOCK_SIZE_MISMATCH = "one cache group with prefix caching hashes at its own block size"


def _non_negative(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise Rejected(ManagerRejection.BAD_ARGUMENT, f"{name}={value!r}")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@attrs.frozen
class VllmConfig:
    """The engine settings the profile depends on (``hash_seed`` stands for ``$PYTHONHASHSEED``)."""

    num_blocks: int
    block_size: int
    enable_caching: bool = True
    enable_kv_cache_events: bool = False
    hash_algo: HashAlgo = HashAlgo.SHA256
    hash_seed: str | None = None
    max_model_len: int = 1 << 30
    use_int_block_hashes: bool = True
    hash_block_size: int | None = None  # None: block_size (what the engine passes for one group)

    def __attrs_post_init__(self) -> None:
        for name in ("num_blocks", "block_size", "max_model_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise Rejected(ManagerRejection.BAD_CONFIG, f"{name}={value!r}")
        h = self.hash_block_size
        if h is not None and (not isinstance(h, int) or isinstance(h, bool) or h < 1):
            raise Rejected(ManagerRejection.BAD_CONFIG, f"hash_block_size={h!r}")
        if self.enable_caching and h is not None and h != self.block_size:
            # UnitaryKVCacheCoordinator asserts hash_block_size == block_size when caching is on
            raise Rejected(ManagerRejection.UNITARY_HASH_BLOCK_SIZE_MISMATCH,
                           f"hash_block_size={h}, block_size={self.block_size}")


@attrs.frozen
class VllmRequest:
    """A request as the manager sees it: tokens (prompt + output), its block hashes, computed tokens.

    ``block_hashes`` always covers every full block of ``all_token_ids`` (vLLM hashes at construction
    and after every appended output token).
    """

    request_id: str
    all_token_ids: tuple[int, ...]
    num_prompt_tokens: int
    extras: RequestExtras
    block_hashes: tuple[bytes, ...]
    block_extra_keys: tuple[tuple | None, ...]
    num_computed_tokens: int = 0
    skip_reading_prefix_cache: bool = False

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    def with_computed(self, num_computed_tokens: int) -> VllmRequest:
        _non_negative("num_computed_tokens", num_computed_tokens)
        return attrs.evolve(self, num_computed_tokens=num_computed_tokens)

    def append_output(self, hasher: BlockHasher, token_ids: Sequence[int]) -> VllmRequest:
        """Append output tokens and hash every block they complete (``append_output_token_ids``)."""
        tokens = self.all_token_ids + tuple(token_ids)
        hashes, keys = hasher.extend(tokens, self.extras, self.block_hashes, self.block_extra_keys)
        return attrs.evolve(self, all_token_ids=tokens, block_hashes=hashes, block_extra_keys=keys)

    def cache_source(self) -> bp.CacheSource:
        lora = self.extras.lora
        return bp.CacheSource(self.all_token_ids, self.block_hashes, self.block_extra_keys,
                              lora.adapter_id if lora else None, lora.name if lora else None)


@attrs.frozen
class ComputedBlocks:
    """What a lookup found: the hit blocks (group 0) and the hit length in tokens."""

    block_ids: tuple[int, ...]
    num_computed_tokens: int


NO_HIT = ComputedBlocks((), 0)


@attrs.frozen
class AllocateReceipt:
    """The outcome of ``allocate_slots``: the newly allocated blocks, or None (and a rejection name)."""

    block_ids: tuple[int, ...] | None
    num_required_blocks: int
    num_free_blocks: int
    newly_cached_block_ids: tuple[int, ...] = ()

    @property
    def rejection(self) -> ManagerRejection | None:
        return ManagerRejection.INSUFFICIENT_BLOCKS if self.block_ids is None else None


@attrs.frozen
class FreeReceipt:
    """The blocks a ``free`` released, in the order they were handed to the pool."""

    request_id: str
    freed_block_ids: tuple[int, ...]


def _pairs_set(pairs: tuple[tuple[str, Any], ...], key: str, value: Any) -> tuple[tuple[str, Any], ...]:
    table = dict(pairs)
    table[key] = value
    return tuple(table.items())


def _pairs_del(pairs: tuple[tuple[str, Any], ...], key: str) -> tuple[tuple[str, Any], ...]:
    return tuple((k, v) for k, v in pairs if k != key)


@attrs.frozen
class VllmKVCacheManager:
    """The manager's state: the pool, each running request's blocks and how many are cached."""

    config: VllmConfig
    hasher: BlockHasher
    pool: bp.PoolState
    req_blocks: tuple[tuple[str, tuple[int, ...]], ...] = ()
    num_cached_block: tuple[tuple[str, int], ...] = ()

    @classmethod
    def create(cls, config: VllmConfig) -> VllmKVCacheManager:
        hasher = BlockHasher(config.block_size, config.hash_algo, none_hash(config.hash_algo, config.hash_seed))
        pool = bp.new_pool(config.num_blocks, config.enable_caching, config.enable_kv_cache_events,
                           config.use_int_block_hashes)
        return cls(config, hasher, pool)

    # --- requests -----------------------------------------------------------------------------

    def make_request(self, request_id: str, prompt_token_ids: Sequence[int], extras: RequestExtras = NO_EXTRAS,
                     prompt_logprobs: bool = False, skip_reading_prefix_cache: bool | None = None) -> VllmRequest:
        """A new request, hashed at construction; prompt logprobs imply skipping cache reads."""
        tokens = tuple(prompt_token_ids)
        hashes, keys = self.hasher.extend(tokens, extras, (), ())
        skip = prompt_logprobs if skip_reading_prefix_cache is None else skip_reading_prefix_cache
        return VllmRequest(request_id, tokens, len(tokens), extras, hashes, keys, 0, skip)

    def blocks_of(self, request_id: str) -> tuple[int, ...]:
        return dict(self.req_blocks).get(request_id, ())

    def is_running(self, request_id: str) -> bool:
        """vLLM's test: the request has a cached-block count (it adopted hits or cached a block)."""
        return request_id in dict(self.num_cached_block)

    # --- lookup -------------------------------------------------------------------------------

    def get_computed_blocks(self, request: VllmRequest, max_cache_hit_length: int | None = None) -> ComputedBlocks:
        """The longest cached prefix of whole blocks, capped at ``num_tokens - 1`` unless a cap is given.

        Pure: no ref count, queue or map changes. Empty when caching is off or the request skips reads.
        """
        if not self.config.enable_caching or request.skip_reading_prefix_cache:
            return NO_HIT
        cap = request.num_tokens - 1 if max_cache_hit_length is None else max_cache_hit_length
        _non_negative("max_cache_hit_length", cap)
        hits: list[int] = []
        for block_hash in request.block_hashes[:cap // self.config.block_size]:
            found = bp.get_cached_block(self.pool, block_hash, (GROUP_ID,))
            if found is None:
                break
            hits.append(found[0])
        return ComputedBlocks(tuple(hits), len(hits) * self.config.block_size)

    # --- allocation ---------------------------------------------------------------------------

    def num_blocks_to_allocate(self, request_id: str, num_slots: int, new_computed: Sequence[int]) -> int:
        """New blocks needed to hold ``num_slots`` slots, plus hit blocks that still sit in the free queue."""
        held = len(self.blocks_of(request_id)) + len(new_computed)
        evictable = sum(1 for b in new_computed if b != bp.NULL_BLOCK_ID and self.pool.ref_cnt[b] == 0)
        return max(cdiv(num_slots, self.config.block_size) - held, 0) + evictable

    def allocate_slots(self, request: VllmRequest, num_new_tokens: int, num_new_computed_tokens: int = 0,
                       new_computed_blocks: Sequence[int] = (), num_lookahead_tokens: int = 0,
                       delay_cache_blocks: bool = False,
                       reserved_blocks: int = 0) -> tuple[VllmKVCacheManager, AllocateReceipt]:
        """Adopt the hits, allocate blocks for the new (and lookahead) slots, cache newly full blocks.

        On shortage the receipt carries ``block_ids=None`` and the manager returned is ``self``.
        """
        for name, value in (("num_new_tokens", num_new_tokens), ("num_new_computed_tokens", num_new_computed_tokens),
                            ("num_lookahead_tokens", num_lookahead_tokens), ("reserved_blocks", reserved_blocks)):
            _non_negative(name, value)
        if num_new_tokens == 0 and num_new_computed_tokens == 0:
            raise Rejected(ManagerRejection.NO_TOKENS_TO_SCHEDULE, f"request {request.request_id!r}")
        new_computed = tuple(new_computed_blocks)
        for block_id in new_computed:
            bp._check_block(self.pool, block_id)
        running = self.is_running(request.request_id)
        if new_computed and (running or self.blocks_of(request.request_id)):
            raise Rejected(ManagerRejection.HITS_FOR_RUNNING_REQUEST, f"request {request.request_id!r}")
        max_len = self.config.max_model_len
        total_computed = min(request.num_computed_tokens + num_new_computed_tokens, max_len)
        num_slots = min(total_computed + num_new_tokens + num_lookahead_tokens, max_len)
        required = self.num_blocks_to_allocate(request.request_id, num_slots, new_computed)
        free_now = self.pool.num_free_blocks
        if required > free_now - reserved_blocks:
            return self, AllocateReceipt(None, required, free_now)

        rid = request.request_id
        pool = self.pool
        blocks = self.blocks_of(rid)
        num_cached = dict(self.num_cached_block).get(rid, 0)
        if new_computed:
            pool = bp.touch(pool, new_computed)
            blocks, num_cached = new_computed, len(new_computed)
        pool, new_ids = bp.get_new_blocks(pool, max(cdiv(num_slots, self.config.block_size) - len(blocks), 0))
        blocks = blocks + new_ids
        newly_cached: tuple[int, ...] = ()
        if self.config.enable_caching and not delay_cache_blocks:
            num_tokens_to_cache = min(total_computed + num_new_tokens, request.num_tokens)
            num_full = min(num_tokens_to_cache, len(request.block_hashes) * self.config.block_size)
            num_full //= self.config.block_size
            if num_full > num_cached:
                pool = bp.cache_full_blocks(pool, request.cache_source(), blocks, num_cached, num_full,
                                            self.config.block_size, GROUP_ID)
                newly_cached = blocks[num_cached:num_full]
                num_cached = num_full
        # vLLM records a request's cached-block count only once it adopts hits or caches a block.
        tracked = running or bool(new_computed) or bool(newly_cached)
        counts = _pairs_set(self.num_cached_block, rid, num_cached) if tracked else self.num_cached_block
        manager = attrs.evolve(self, pool=pool, req_blocks=_pairs_set(self.req_blocks, rid, blocks),
                               num_cached_block=counts)
        return manager, AllocateReceipt(new_ids, required, free_now, newly_cached)

    def cache_blocks(self, request: VllmRequest, num_computed_tokens: int) -> VllmKVCacheManager:
        """Cache the request's full blocks up to ``num_computed_tokens`` (after a delayed allocation)."""
        _non_negative("num_computed_tokens", num_computed_tokens)
        rid = request.request_id
        if not self.config.enable_caching or not self.blocks_of(rid):
            return self
        blocks, num_cached = self.blocks_of(rid), dict(self.num_cached_block).get(rid, 0)
        num_full = min(num_computed_tokens, len(request.block_hashes) * self.config.block_size)
        num_full = min(num_full // self.config.block_size, len(blocks))
        if num_full <= num_cached:
            return self
        pool = bp.cache_full_blocks(self.pool, request.cache_source(), blocks, num_cached, num_full,
                                    self.config.block_size, GROUP_ID)
        return attrs.evolve(self, pool=pool, num_cached_block=_pairs_set(self.num_cached_block, rid, num_full))

    # --- release ------------------------------------------------------------------------------

    def free(self, request_id: str) -> tuple[VllmKVCacheManager, FreeReceipt]:
        """Release a request's blocks, tail block first; an unknown request is a no-op."""
        blocks = self.blocks_of(request_id)
        if not self.is_running(request_id) and not blocks:
            return self, FreeReceipt(request_id, ())
        order = tuple(reversed(blocks))
        manager = attrs.evolve(self, pool=bp.free_blocks(self.pool, order),
                               req_blocks=_pairs_del(self.req_blocks, request_id),
                               num_cached_block=_pairs_del(self.num_cached_block, request_id))
        return manager, FreeReceipt(request_id, order)

    def reset_prefix_cache(self) -> tuple[VllmKVCacheManager, bool]:
        """Forget every cached identity; refused (False, unchanged) while any block is in use."""
        pool, done = bp.reset_prefix_cache(self.pool)
        return attrs.evolve(self, pool=pool), done

    def evict_blocks(self, block_ids: Sequence[int]) -> VllmKVCacheManager:
        return attrs.evolve(self, pool=bp.evict_blocks(self.pool, block_ids))

    def take_events(self) -> tuple[VllmKVCacheManager, tuple[bp.KVEvent, ...]]:
        """Drain pending events; BlockStored events are stamped with the group's spec kind."""
        pool, events = bp.take_events(self.pool)
        stamped = tuple(attrs.evolve(e, kv_cache_spec_kind=SPEC_KIND) if isinstance(e, bp.BlockStored) else e
                        for e in events)
        return attrs.evolve(self, pool=pool), stamped

    def usage(self) -> float:
        return self.pool.usage()

    # --- observation --------------------------------------------------------------------------

    def project(self) -> dict[str, Any]:
        """A JSON-able snapshot: free queue, ref counts (non-zero), cached keys, request blocks."""
        return {
            "free_queue": list(self.pool.free.blocks),
            "ref_cnt": {str(b): n for b, n in enumerate(self.pool.ref_cnt) if n},
            "cached": {key.hex(): list(ids) for key, ids in self.pool.cached.entries},
            "requests": {rid: list(ids) for rid, ids in self.req_blocks},
            "num_cached_block": dict(self.num_cached_block),
        }

    def check(self) -> None:
        """Pool self-check plus: ref counts equal the number of running requests holding each block."""
        self.pool.check()
        held = [0] * self.config.num_blocks
        for _rid, ids in self.req_blocks:
            for b in ids:
                held[b] += 1
        for b in range(1, self.config.num_blocks):
            assert held[b] == self.pool.ref_cnt[b], f"block {b}: held {held[b]}, ref {self.pool.ref_cnt[b]}"
