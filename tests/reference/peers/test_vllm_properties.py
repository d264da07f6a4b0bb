"""Stateful properties of the vLLM profile on random operation streams (prompts sharing prefixes).

Checked after every step: the pool self-check (queue membership <=> ref 0, keys consistent with the
map), ref counts = holders, a shared block is full for every holder, and exactness: every block a
request holds carries exactly that request's token prefix up to the block's end (contents are tracked
here, independently of the profile, as the tokens written into each block id). Lookups change nothing
and hit only blocks whose content is the prompt's prefix; failed allocations change nothing.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, initialize, invariant, rule

from kvexact.reference.peers.vllm_adapter import VllmAdapter
from kvexact.reference.peers.vllm_hashing import key_with_group

BLOCK = 4
PREFIXES = [(1, 1, 1, 1, 2, 2, 2, 2), (1, 1, 1, 1, 3, 3, 3, 3), (5, 5, 5, 5, 5, 5, 5, 5), ()]
TAILS = [(0, 1, 2, 3), (0, 1, 2, 3, 1), (2,)]  # repeated tails make whole-prompt repeats common
prompts = st.builds(lambda p, tail: p + tuple(tail), st.sampled_from(PREFIXES),
                    st.sampled_from(TAILS) | st.lists(st.integers(0, 3), min_size=1, max_size=9))


class VllmProfileMachine(RuleBasedStateMachine):
    requests = Bundle("requests")

    @initialize(num_blocks=st.integers(3, 10), caching=st.sampled_from([True, True, True, False]))
    def setup(self, num_blocks, caching):
        self.a = VllmAdapter(num_blocks, BLOCK, enable_caching=caching)
        self.content = {}
        self.counter = 0

    def _record_contents(self, rid):
        tokens = self.a.tokens_of(rid)
        for i, b in enumerate(self.a.blocks_of(rid)):
            expected = tokens[:min((i + 1) * BLOCK, len(tokens))]
            if self.a.ref_count(b) > 1:  # shared: its content was written by another request already
                assert self.content[b] == expected, f"block {b} shared with other content"
            self.content[b] = expected

    @rule(target=requests, prompt=prompts)
    def allocate(self, prompt):
        self.counter += 1
        rid = f"r{self.counter}"
        before = self.a.manager
        out = self.a.allocate(rid, prompt)
        if out is None:
            assert self.a.manager is before
            return rid  # not admitted; later rules on it are skipped
        assert out.num_hit_tokens % BLOCK == 0 and out.num_hit_tokens <= len(prompt) - 1
        for i, b in enumerate(out.hit_block_ids):
            assert self.content[b] == tuple(prompt[:(i + 1) * BLOCK]), "hit on a block with other content"
        self._record_contents(rid)
        return rid

    @rule(rid=requests, tokens=st.lists(st.integers(0, 3), min_size=1, max_size=6))
    def append(self, rid, tokens):
        if rid not in self.a.requests:
            return
        before = self.a.manager
        if self.a.append(rid, tokens) is None:
            assert self.a.manager is before
            return
        self._record_contents(rid)

    @rule(rid=consumes(requests))
    def free(self, rid):
        if rid in self.a.requests:
            self.a.free(rid)

    @rule(prompt=prompts)
    def lookup(self, prompt):
        before = self.a.manager
        hit = self.a.manager.get_computed_blocks(self.a.manager.make_request("probe", prompt))
        assert self.a.manager == before
        for i, b in enumerate(hit.block_ids):
            assert self.content[b] == tuple(prompt[:(i + 1) * BLOCK])

    @rule()
    def reset(self):
        ok = self.a.reset_prefix_cache()
        assert ok == (not self.a.requests)

    @invariant()
    def consistent(self):
        if not hasattr(self, "a"):
            return
        self.a.manager.check()
        for rid in self.a.requests:
            tokens = self.a.tokens_of(rid)
            blocks = self.a.blocks_of(rid)
            assert len(blocks) == -(-len(tokens) // BLOCK)
            for i, b in enumerate(blocks):
                assert self.content[b] == tokens[:min((i + 1) * BLOCK, len(tokens))]
                if self.a.ref_count(b) > 1:
                    assert len(tokens) >= (i + 1) * BLOCK, f"shared block {b} is partial for {rid}"
        hasher = self.a.manager.hasher
        for key, ids in self.a.manager.pool.cached.entries:
            for b in ids:  # a cached identity names exactly the full token prefix its block holds
                assert len(self.content[b]) % BLOCK == 0
                assert key == key_with_group(hasher.hashes(self.content[b])[-1], 0), f"stale key on block {b}"


TestVllmProfileMachine = VllmProfileMachine.TestCase
_active = settings()  # the loaded profile; this machine needs at least 100 examples to reach evictions
TestVllmProfileMachine.settings = settings(_active, max_examples=max(_active.max_examples, 100))
