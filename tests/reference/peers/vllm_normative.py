"""The vLLM profile against the normative reference: the machine that drives both (the tests run it).

The vLLM profile and the normative reference (Reference II) on the same random operation streams.

Both are driven by one stream of admissions (prefix lookup, then the rest of the prompt), decode
appends and frees; prompts share prefixes over a small alphabet. The normative side is driven through
its own steps: ``lifecycle.lookup_all_groups`` per block under the logits cap (0x07), ``lifecycle.prefix_hit`` for the
hits, ``Allocator.allocate`` / ``append`` for the rest, ``lifecycle.cache_block`` for every full block (a key
names one block: a second block with the same content stays unkeyed), all inside one transaction.

Shared observables, compared after every step: hit lengths, which operations are accepted or refused
for lack of blocks, which request holds which content (the partition of (request, logical block) by
physical block), ref counts, and the set of cached contents. The two differ by design in which block
a release makes reusable first (docs/readme/vllm.md): once the cached-content sets differ (only
possible when a pool is short and evicts), the example goes on driving both but stops comparing them.
A roomy pool never evicts and must never diverge. Always checked, for each system on its own: the
self-checks, each live request's token history, and that right after a request's step the content of
each of its full blocks is cached (content recomputed after an eviction is published again).
"""

from __future__ import annotations

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, initialize, invariant, rule

from kvexact.reference.allocator import Allocator
from kvexact.reference.lifecycle import cache_block, lookup_all_groups, prefix_hit, release
from kvexact.reference.peers.vllm_adapter import VllmAdapter
from kvexact.reference.peers.vllm_hashing import key_with_group
from kvexact.reference.pool import GroupConfig, PoolRejection
from kvexact.reference.rejections import Rejected

BS = 4
ROOMY = 400
PREFIXES = [(1, 1, 1, 1, 2, 2, 2, 2), (1, 1, 1, 1, 3, 3, 3, 3), (5, 5, 5, 5, 5, 5, 5, 5), ()]
TAILS = [(0, 1, 2, 3), (0, 1, 2, 3, 1), (2,)]  # repeated tails make whole-prompt repeats common
prompts = st.builds(lambda p, tail: p + tuple(tail), st.sampled_from(PREFIXES),
                    st.sampled_from(TAILS) | st.lists(st.integers(0, 3), min_size=1, max_size=9))


def nkey(prefix: tuple[int, ...]) -> str:
    return "p" + ",".join(map(str, prefix))


class Normative:
    """The scheduler-side driver of the normative allocator for one full-attention group."""

    def __init__(self, usable_blocks: int):
        self.alloc = Allocator([GroupConfig(0, 0, BS, 1)], [list(range(1, usable_blocks + 1))])
        self.content_of: dict[str, tuple[int, ...]] = {}  # every key ever bound -> the prefix it names

    def lookup(self, tokens: tuple[int, ...]) -> list[str]:
        keys = []
        for i in range((len(tokens) - 1) // BS):  # hits stop one token short of the prompt (0x07)
            key = nkey(tokens[:(i + 1) * BS])
            if lookup_all_groups(self.alloc, key) is None:
                break
            keys.append(key)
        return keys

    def _cache_full(self, rid: str, tokens: tuple[int, ...]) -> None:
        table = self.alloc.request(rid).tables[0]
        for i in range(len(tokens) // BS):
            key = nkey(tokens[:(i + 1) * BS])
            if self.alloc.pools[0].blocks[table[i].block_id].cache_key is None and \
                    self.alloc.index.get((0, key)) is None:
                cache_block(self.alloc, rid, i, key)
                self.content_of[key] = tokens[:(i + 1) * BS]

    def _run(self, fn) -> bool:
        try:
            self.alloc.transact(fn)
        except Rejected as exc:
            if exc.reason is PoolRejection.OUT_OF_MEMORY:
                return False
            raise
        return True

    def admit(self, rid: str, tokens: tuple[int, ...]) -> int | None:
        keys = self.lookup(tokens)

        def run() -> None:
            if keys:
                prefix_hit(self.alloc, rid, keys)
                for t in tokens[len(keys) * BS:]:
                    self.alloc.append(rid, t)
            else:
                self.alloc.allocate(rid, tokens)
            self._cache_full(rid, tokens)

        return len(keys) * BS if self._run(run) else None

    def append(self, rid: str, tokens: tuple[int, ...], all_tokens: tuple[int, ...]) -> bool:
        def run() -> None:
            for t in tokens:
                self.alloc.append(rid, t)
            self._cache_full(rid, all_tokens)

        return self._run(run)

    def blocks_of(self, rid: str) -> list[int]:
        return [h.block_id for h in self.alloc.request(rid).tables[0]]

    def cached_contents(self) -> set[tuple[int, ...]]:
        return {self.content_of[key] for (_g, key) in self.alloc.index.data}


def sharing(blocks_by_request: dict[str, list[int]]) -> set[frozenset[tuple[str, int]]]:
    """Which (request, logical block) pairs share one physical block, independent of block ids."""
    groups: dict[int, set[tuple[str, int]]] = {}
    for rid, blocks in blocks_by_request.items():
        for i, b in enumerate(blocks):
            groups.setdefault(b, set()).add((rid, i))
    return {frozenset(g) for g in groups.values()}


class VllmVsNormative(RuleBasedStateMachine):
    requests = Bundle("requests")
    normative_driver: type[Normative] = Normative

    @initialize(num_blocks=st.sampled_from([4, 5, 6, 8, 10, ROOMY]))
    def setup(self, num_blocks):
        self.v = VllmAdapter(num_blocks, BS)
        self.n = self.normative_driver(num_blocks - 1)  # vLLM's block 0 is the null block
        self.roomy = num_blocks == ROOMY
        self.vtok: dict[str, tuple[int, ...]] = {}  # live requests of each system and their tokens
        self.ntok: dict[str, tuple[int, ...]] = {}
        self.vkey_content: dict[bytes, tuple[int, ...]] = {}
        self.in_sync = True
        self.counter = 0

    def _learn(self, rid: str) -> None:
        if rid in self.vtok:
            tokens = self.vtok[rid]
            for i, h in enumerate(self.v.requests[rid].block_hashes):
                self.vkey_content[key_with_group(h, 0)] = tokens[:(i + 1) * BS]

    def _v_cached(self) -> set[tuple[int, ...]]:
        return {self.vkey_content[k] for k, _ids in self.v.manager.pool.cached.entries}

    def _full_blocks_cached(self, rid: str) -> None:
        """Both: right after a request's step, the content of each of its full blocks is cached."""
        for tokens, cached in ((self.vtok.get(rid), self._v_cached),
                               (self.ntok.get(rid), self.n.cached_contents)):
            if tokens is not None:
                have = cached()
                assert all(tokens[:(i + 1) * BS] in have for i in range(len(tokens) // BS)), f"{rid} not cached"

    @rule(target=requests, prompt=prompts)
    def admit(self, prompt):
        self.counter += 1
        rid = f"r{self.counter}"
        if self.in_sync:
            assert self.v.lookup(prompt) == len(self.n.lookup(prompt)) * BS, "lookup hit lengths differ"
        got_v = self.v.allocate(rid, prompt)
        got_n = self.n.admit(rid, prompt)
        if self.in_sync:
            assert (got_v is None) == (got_n is None), f"vLLM admitted: {got_v is not None}; normative: {got_n}"
            if got_v is not None:
                assert got_v.num_hit_tokens == got_n
                event("admitted with a hit" if got_n else "admitted without a hit")
            else:
                event("admission refused by both")
        if got_v is not None:
            self.vtok[rid] = tuple(prompt)
        if got_n is not None:
            self.ntok[rid] = tuple(prompt)
        self._learn(rid)
        self._full_blocks_cached(rid)
        return rid

    @rule(rid=requests, tokens=st.lists(st.integers(0, 3), min_size=1, max_size=6))
    def append(self, rid, tokens):
        got_v = self.v.append(rid, tokens) if rid in self.vtok else None
        got_n = self.n.append(rid, tuple(tokens), self.ntok[rid] + tuple(tokens)) if rid in self.ntok else False
        if self.in_sync:
            assert (got_v is None) == (not got_n), f"vLLM appended: {got_v is not None}; normative: {got_n}"
        if got_v is not None:
            self.vtok[rid] += tuple(tokens)
        if got_n:
            self.ntok[rid] += tuple(tokens)
        self._learn(rid)
        self._full_blocks_cached(rid)

    @rule(rid=consumes(requests))
    def free(self, rid):
        if rid in self.vtok:
            self.v.free(rid)
            del self.vtok[rid]
        if rid in self.ntok:
            release(self.n.alloc, rid)
            del self.ntok[rid]

    @invariant()
    def same_observables(self):
        if not hasattr(self, "v"):
            return
        self.n.alloc.self_check()
        self.v.manager.check()
        for rid, tokens in self.ntok.items():
            assert self.n.alloc.tokens_of(rid) == tokens
        for rid, tokens in self.vtok.items():
            assert self.v.tokens_of(rid) == tokens
        if not self.in_sync:
            return
        assert self.vtok == self.ntok
        v_blocks = {rid: list(self.v.blocks_of(rid)) for rid in self.vtok}
        n_blocks = {rid: self.n.blocks_of(rid) for rid in self.ntok}
        for rid in self.vtok:
            assert len(v_blocks[rid]) == len(n_blocks[rid])
            assert [self.v.ref_count(b) for b in v_blocks[rid]] == \
                [self.n.alloc.pools[0].refcount(b) for b in n_blocks[rid]], f"ref counts of {rid}"
        assert sharing(v_blocks) == sharing(n_blocks), "different requests share blocks"
        v_cached = self._v_cached()
        n_cached = self.n.cached_contents()
        if v_cached != n_cached:
            assert not self.roomy, f"a roomy pool diverged: {sorted(v_cached ^ n_cached)}"
            event("diverged by design: which released block is reused first")
            self.in_sync = False
