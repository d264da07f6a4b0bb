"""The profile alone under random request streams: §5's invariants I1, I2, I3 and the tree's shape,
over page sizes 1, 2 and 4, EAGLE bigram keys, namespaces and every reproduced eviction policy."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kvexact.reference.peers.sglang import pool_accounting
from kvexact.reference.peers.sglang_adapter import SGLangAdapter

POOL = 32
CONFIGS = st.sampled_from([
    (1, "lru", False), (2, "lru", False), (4, "fifo", False), (1, "lfu", True), (1, "priority", False),
    (2, "slru", False), (1, "mru", False), (1, "filo", True),
])
NAMESPACES = st.sampled_from([(None, None), ("lora-a", None), ("lora-a", "salt")])


class ProfileInvariants(RuleBasedStateMachine):
    @initialize(config=CONFIGS)
    def setup(self, config):
        self.page_size, policy, eagle = config
        self.sg = SGLangAdapter(POOL, page_size=self.page_size, eviction_policy=policy, is_eagle=eagle)
        self.running: list[str] = []
        self.locks: list[int] = []
        self.serial = 0

    @rule(pages=st.lists(st.lists(st.integers(1, 2), min_size=4, max_size=4), min_size=1, max_size=3),
          ns=NAMESPACES, priority=st.integers(0, 2))
    def admit(self, pages, ns, priority):
        tokens = [t for page in pages for t in page[: self.page_size]]
        self.serial += 1
        rid = f"r{self.serial}"
        if self.sg.admit(rid, tokens, extra_key=ns[0], cache_salt=ns[1], priority=priority) is not None:
            self.running.append(rid)

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def checkpoint(self, data):
        rid = data.draw(st.sampled_from(self.running))
        req = self.sg.requests[rid]
        # up_to counts raw tokens; under EAGLE the protected length counts bigrams (raw - 1)
        lowest = req.cache_protected_len + (1 if self.sg.cache.is_eagle and req.cache_protected_len else 0)
        up_to = data.draw(st.integers(lowest, req.owned_len))
        self.sg.checkpoint(rid, up_to)

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def finish(self, data):
        rid = self.running.pop(data.draw(st.integers(0, len(self.running) - 1)))
        self.sg.finish(rid)

    @rule(tokens=st.lists(st.integers(1, 2), min_size=0, max_size=9), ns=NAMESPACES)
    def match(self, tokens, ns):
        got = self.sg.match(tokens, extra_key=ns[0], cache_salt=ns[1])
        assert got.matched_tokens % self.page_size == 0
        assert len(got.prefix_slot_ids) == got.matched_tokens

    @rule(tokens=st.lists(st.integers(1, 2), min_size=1, max_size=9))
    def lock(self, tokens):
        self.locks.append(self.sg.lock(tokens).lock_id)

    @precondition(lambda self: self.locks)
    @rule(data=st.data())
    def unlock(self, data):
        self.sg.unlock(self.locks.pop(data.draw(st.integers(0, len(self.locks) - 1))))

    @rule(num_tokens=st.integers(0, 12))
    def evict(self, num_tokens):
        before = self.sg.partition()
        available = self.sg.allocator.available_size()
        got = self.sg.evict(num_tokens)
        after = self.sg.partition()
        assert got.released_tokens == sum(len(s) for s in got.freed_slot_ids)
        assert before.evictable_tokens - after.evictable_tokens == got.released_tokens  # I3
        if self.page_size == 1:
            assert self.sg.allocator.available_size() - available == got.released_tokens  # I3
        if got.released_tokens < num_tokens:
            assert not self.sg.cache.evictable_leaves

    @invariant()
    def invariants_hold(self):
        if not hasattr(self, "sg"):
            return
        p = self.sg.partition()
        assert p.partition_holds, "tree + private + free is not a disjoint cover of the pool"
        assert p.i1_holds
        running = [self.sg.requests[r] for r in self.running]
        usable = len(p.pool_slot_ids)
        assert pool_accounting(self.sg.cache, self.sg.allocator, usable, running).holds  # I2
        self.sg.cache.check_invariants()


TestProfileInvariants = ProfileInvariants.TestCase
# at least 100 streams even under the small ``ci`` profile (about 10 s); larger profiles keep their size
TestProfileInvariants.settings = settings(settings(), max_examples=max(settings().max_examples, 100))
