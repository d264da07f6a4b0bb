"""The SGLang 0.5.23 profile behind the prefix-index interface (``kvexact.reference.index.PrefixIndex``).

``--adapter kvexact.reference.peers.sglang_protocol:sglang_factory`` puts SGLang's radix cache, token
pool and request protocol in the Radix machine, in lockstep with the normative index
(``reference/radix.py``): admission is SGLang's ``admit`` (match, take a request row, allocate, lock the
last matched node), a decoded token takes one slot at the end of the row, ``finish`` is
``release_kv_cache`` (checkpoint the whole row, free duplicates, unlock) and ``cancel`` is
``release_kv_cache`` without the checkpoint. Eviction victims are SGLang's leaves in the order of the policy the
adapter runs (:func:`sglang_factory`: LRU, SGLang's default; :func:`sglang_policies_factory`: LRU at page size 1,
LFU at 2, SLRU at 4); the machine replays each on the normative index, which checks it is an unlocked leaf, and
holds it to the declared order.

:func:`faulty_unlocked_prefix` is a deliberately faulty variant (a mutant): it drops the lock on the
matched prefix right after admission, so SGLang may evict a prefix that a running request still reads.
The gate must catch it.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvexact.reference.index import IndexConfig
from kvexact.reference.peers.sglang import PoolAccounting, pool_accounting, release_kv_cache
from kvexact.reference.peers.sglang_adapter import SGLangAdapter

# the eviction policy sglang_policies_factory's profile runs at each page size of the Radix machines
POLICY_AT_PAGE_SIZE = {1: "lru", 2: "lfu", 4: "slru"}


class SGLangIndexAdapter:
    """``PrefixIndex`` over :class:`SGLangAdapter` (page size ``config.page_size``: the token allocator at 1, the
    paged allocator above), running SGLang's eviction ``policy`` (default: ``lru``, SGLang's default) and declaring
    it as its ``eviction_order``."""

    name = "sglang-0.5.23"
    eviction_order = "lru"  # SGLang's default eviction policy; an instance declares the policy it runs

    def __init__(self, config: IndexConfig, policy: str = "lru"):
        self.config = config
        if type(self).eviction_order is not None:
            self.eviction_order = policy
        self.sglang = SGLangAdapter(config.pool_slots, page_size=config.page_size, eviction_policy=policy,
                                    kv_events=True)

    def admit(self, request_id: str, tokens: Sequence[int]) -> int | None:
        return self.sglang.admit(request_id, tokens)

    def extend(self, request_id: str, token: int) -> bool:
        """Decode one token: its slot is written at the end of the request's row. At page size 1 it comes from the
        allocator; above, it is the next slot of the row's last page, or the first of a new page when the row
        ends on a page boundary (alloc_decode)."""
        req = self.sglang._req(request_id)
        pool = self.sglang.cache.req_to_token_pool
        assert pool is not None and req.req_pool_idx is not None
        page = self.config.page_size
        if page > 1 and req.owned_len % page:
            got: list[int] | None = [pool.read(req.req_pool_idx, req.owned_len - 1, req.owned_len)[0] + 1]
        else:
            page_slots = self.sglang.allocator.alloc(page)
            got = None if page_slots is None else page_slots[:1]
        if got is None:
            return False
        req.output_ids.append(token)
        pool.write(req.req_pool_idx, req.owned_len, got)
        req.owned_len += 1
        self.sglang.private.setdefault(request_id, []).extend(got)
        return True

    def finish(self, request_id: str) -> None:
        self.sglang.finish(request_id)

    def cancel(self, request_id: str) -> None:
        """Abort: free the private rest of the row and unlock, caching nothing."""
        req = self.sglang._req(request_id)
        release_kv_cache(self.sglang.cache, req, do_checkpoint=False)
        del self.sglang.requests[request_id]
        self.sglang.private.pop(request_id, None)

    def evict(self, num_tokens: int) -> Sequence[Sequence[int]]:
        return self.sglang.evict(num_tokens).freed_slot_ids

    def computed_prefix_tokens(self, request_id: str) -> int:
        """SGLang's ``num_matched_prefix_tokens``: the matched prefix, capped one token short of the prompt so the
        last prompt token is computed for its logits."""
        return self.sglang._req(request_id).num_matched_prefix_tokens

    def kv_events(self) -> list[dict]:
        """SGLang's KV events since the previous call (its recorder's queue, as a KV-aware router reads it)."""
        return self.sglang.cache.kv_events.take()

    def slot_ids(self, request_id: str) -> Sequence[int]:
        req = self.sglang._req(request_id)
        pool = self.sglang.cache.req_to_token_pool
        assert pool is not None and req.req_pool_idx is not None
        return pool.read(req.req_pool_idx, 0, req.owned_len)

    def free_slot_ids(self) -> Sequence[int]:
        return self.sglang.partition().free_slot_ids

    def self_check(self) -> None:
        """SGLang's own invariants (§5): edge shapes, the evictable-leaf set, I1, the slot partition and, at page
        size 1 (where a slot is a token), I2's accounting of the pool."""
        self.sglang.cache.check_invariants()
        p = self.sglang.partition()
        if not (p.partition_holds and p.i1_holds):
            raise AssertionError(f"SGLang profile: slot partition or I1 broken: {p}")
        if self.config.page_size == 1:
            accounting = self._accounting()
            if not accounting.holds:
                raise AssertionError(f"SGLang profile: I2 broken: {accounting}")

    def _accounting(self) -> PoolAccounting:
        running = [r for r in self.sglang.requests.values() if r.req_pool_idx is not None]
        return pool_accounting(self.sglang.cache, self.sglang.allocator, self.config.pool_slots, running)

    def cache_sizes(self) -> tuple[int, int]:
        """SGLang's ``evictable_size()`` and ``protected_size()``: the tree's unlocked and locked tokens."""
        accounting = self._accounting()
        return accounting.evictable_slots, accounting.protected_slots


class UnlockedPrefixAdapter(SGLangIndexAdapter):
    """Mutant: forgets the lock on the matched prefix after admission (its eviction is then unsafe)."""

    name = "faulty-unlocked-prefix"

    def admit(self, request_id: str, tokens: Sequence[int]) -> int | None:
        matched = super().admit(request_id, tokens)
        req = self.sglang.requests.get(request_id)
        if matched is not None and req is not None and req.tree_lock is not None:
            self.sglang.cache.unlock(req.tree_lock)
            req.tree_lock = None
        return matched


class PageOverrunAdapter(SGLangIndexAdapter):
    """Mutant (page size > 1): a decoded token always takes the slot after the row's last one, even when the row
    ends on a page boundary, so it writes into a page it never allocated."""

    name = "faulty-page-overrun"

    def extend(self, request_id: str, token: int) -> bool:
        req = self.sglang._req(request_id)
        pool = self.sglang.cache.req_to_token_pool
        assert pool is not None and req.req_pool_idx is not None
        if self.config.page_size == 1 or req.owned_len % self.config.page_size:
            return super().extend(request_id, token)
        got = [pool.read(req.req_pool_idx, req.owned_len - 1, req.owned_len)[0] + 1]
        req.output_ids.append(token)
        pool.write(req.req_pool_idx, req.owned_len, got)
        req.owned_len += 1
        self.sglang.private.setdefault(request_id, []).extend(got)
        return True


def faulty_page_overrun(config: IndexConfig) -> PageOverrunAdapter:
    """``--adapter kvexact.reference.peers.sglang_protocol:faulty_page_overrun`` (must be caught at page 2 or 4)."""
    return PageOverrunAdapter(config)


def sglang_factory(config: IndexConfig) -> SGLangIndexAdapter:
    """``--adapter kvexact.reference.peers.sglang_protocol:sglang_factory``: SGLang's default configuration (LRU at
    every page size), the one ``kvexact diff sglang`` compares with the live runtime."""
    return SGLangIndexAdapter(config)


def sglang_policies_factory(config: IndexConfig) -> SGLangIndexAdapter:
    """``--adapter kvexact.reference.peers.sglang_protocol:sglang_policies_factory``: the profile running one of
    SGLang's eviction policies per page size (:data:`POLICY_AT_PAGE_SIZE`: LRU at 1, LFU at 2, SLRU at 4), so that the
    three Radix machines reach each ranking they check; the gate's ``adapter-sglang-index`` runs this one."""
    return SGLangIndexAdapter(config, POLICY_AT_PAGE_SIZE.get(config.page_size, "lru"))


def faulty_unlocked_prefix(config: IndexConfig) -> UnlockedPrefixAdapter:
    """``--adapter kvexact.reference.peers.sglang_protocol:faulty_unlocked_prefix`` (must be caught)."""
    return UnlockedPrefixAdapter(config)


sglang_factory.adapter_protocol = "prefix-index"  # type: ignore[attr-defined]
sglang_factory.page_sizes = (1, 2, 4)  # type: ignore[attr-defined]  # the Radix@page2/@page4 machines too
sglang_policies_factory.adapter_protocol = "prefix-index"  # type: ignore[attr-defined]
sglang_policies_factory.page_sizes = (1, 2, 4)  # type: ignore[attr-defined]
faulty_unlocked_prefix.adapter_protocol = "prefix-index"  # type: ignore[attr-defined]
faulty_page_overrun.adapter_protocol = "prefix-index"  # type: ignore[attr-defined]
faulty_page_overrun.page_sizes = (2, 4)  # type: ignore[attr-defined]
