"""The SGLang profile and the normative radix index (seed 0x08) on the same random operation streams.

Both start from a pool of slots 1..POOL. Each step is applied to both; after every step the test checks
what they share: matched lengths and prefix slots, insert prefix lengths and duplicates, the tree's
slot -> token-path map, the node boundaries, the pool partition (tree / private / free) and the
protected / evictable token counters. Eviction victims are chosen by the profile (SGLang's LRU) and
replayed on the normative index with ``evict_node``, which checks each is an unlocked leaf.

:class:`PagedProfileAgainstNormative` runs the same streams with a page size of 2 or 3 drawn per run:
SGLang's paged allocator and RadixCache against the normative index at that page size (admitted prompts
are whole pages, since the profile's admission allocates whole pages; inserts and checkpoints are not).
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kvexact.reference import radix
from kvexact.reference.peers.sglang_adapter import SGLangAdapter

POOL = 24
TOKENS = st.lists(st.integers(1, 3), min_size=1, max_size=7)


def normative_slot_tokens(state: radix.RadixState) -> dict[int, tuple]:
    out = {}
    for node in state.nodes.values():
        if node.node_id == radix.ROOT:
            continue
        above = state.path_tokens(node.parent_id)
        for i, slot in enumerate(node.slot_ids):
            out[slot] = ((None, None), above + node.token_ids[: i + 1])
    return out


class ProfileAgainstNormative(RuleBasedStateMachine):
    page = 1

    def __init__(self) -> None:
        super().__init__()
        self.start(1)

    def start(self, page: int) -> None:
        """Fresh profile and index; the paged allocator numbers its slots from page 1, so from ``page``."""
        self.page = page
        self.sg = SGLangAdapter(POOL, page_size=page)
        self.st = radix.RadixState.empty(POOL, first_slot_id=page, page_size=page)
        self.locks: list[tuple[int, int]] = []  # (profile lock id, normative node id)
        self.running: list[str] = []
        self.serial = 0

    def _rid(self) -> str:
        self.serial += 1
        return f"r{self.serial}"

    @rule(tokens=TOKENS)
    def insert(self, tokens):
        rid = self._rid()
        whole = -(-len(tokens) // self.page) * self.page  # the allocator hands out whole pages
        slots = self.sg.reserve(rid, whole)
        if slots is None:
            assert len(self.st.free_slot_ids) < whole
            return
        self.st, _ = radix.reserve(self.st, rid, slots)
        mine = self.sg.insert(tokens, slots[: len(tokens)], rid)
        self.st, theirs = radix.insert(self.st, tokens, slots[: len(tokens)], rid)
        assert mine.prefix_tokens == theirs.prefix_tokens
        assert mine.duplicate_slot_ids == theirs.duplicate_slot_ids
        if rid in self.st.private_slot_ids:
            self.st, _ = radix.release(self.st, rid)
        self.sg.release(rid)

    @rule(tokens=TOKENS)
    def match(self, tokens):
        mine = self.sg.match(tokens)
        self.st, theirs = radix.match(self.st, tokens)
        assert (mine.matched_tokens, mine.prefix_slot_ids) == (theirs.matched_tokens, theirs.prefix_slot_ids)

    @rule(tokens=TOKENS)
    def lock(self, tokens):
        mine = self.sg.lock(tokens)
        self.st, theirs = radix.match(self.st, tokens)
        assert mine.matched_tokens == theirs.matched_tokens
        self.st, _ = radix.lock(self.st, theirs.node_id)
        self.locks.append((mine.lock_id, theirs.node_id))

    @precondition(lambda self: self.locks)
    @rule(data=st.data())
    def unlock(self, data):
        lock_id, node_id = self.locks.pop(data.draw(st.integers(0, len(self.locks) - 1)))
        self.sg.unlock(lock_id)
        self.st, _ = radix.unlock(self.st, node_id)

    @rule(num_tokens=st.integers(0, 10))
    def evict(self, num_tokens):
        mine = self.sg.evict(num_tokens)
        released = 0
        for segment in mine.freed_slot_ids:
            victim = next(n.node_id for n in self.st.nodes.values() if n.slot_ids == segment)
            self.st, receipt = radix.evict_node(self.st, victim)
            released += receipt.released_tokens
        assert released == mine.released_tokens
        assert released >= num_tokens or check_leafless(self.st)

    @rule(tokens=TOKENS)
    def admit(self, tokens):
        self.admit_prompt(tokens)

    def admit_prompt(self, tokens):
        rid = self._rid()
        matched = self.sg.admit(rid, tokens)
        if matched is None:
            self.st, theirs = radix.match(self.st, tokens)
            assert len(self.st.free_slot_ids) < len(tokens) - theirs.matched_tokens
            return
        self.st, receipt = radix.match_and_lock(self.st, rid, 0, tokens)
        assert receipt.matched_tokens == matched
        new_slots = self.sg.private.get(rid, [])
        if new_slots:
            self.st, _ = radix.reserve(self.st, rid, new_slots)
        self.running.append(rid)

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def checkpoint(self, data):
        rid = data.draw(st.sampled_from(self.running))
        req = self.sg.requests[rid]
        old = req.cache_protected_len
        up_to = data.draw(st.integers(old, req.owned_len))
        row = self.sg.cache.req_to_token_pool.read(req.req_pool_idx, 0, req.owned_len)
        self.sg.checkpoint(rid, up_to)
        self.st, receipt = radix.publish_unfinished(self.st, rid, req.tokens()[old:up_to], row[old:up_to])
        assert self.st.requests[rid].protected_tokens == req.cache_protected_len == up_to - up_to % self.page

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def finish(self, data):
        rid = self.running.pop(data.draw(st.integers(0, len(self.running) - 1)))
        req = self.sg.requests[rid]
        row = self.sg.cache.req_to_token_pool.read(req.req_pool_idx, 0, req.owned_len)
        tokens = req.tokens()
        self.sg.finish(rid)
        self.st, _ = radix.cache_finished(self.st, rid, tokens, row)

    @invariant()
    def shared_observables_agree(self):
        report = radix.check_state(self.st)
        mine = self.sg.partition()
        assert mine.partition_holds and mine.i1_holds
        assert set(mine.tree_slot_ids) == self.st.tree_slot_ids()
        assert set(mine.free_slot_ids) == self.st.free_slot_ids
        assert set(mine.private_slot_ids) == self.st.all_private_slot_ids()
        assert (mine.protected_tokens, mine.evictable_tokens) == (report.protected_tokens,
                                                                  report.evictable_tokens)
        assert self.sg.slot_tokens() == normative_slot_tokens(self.st)
        self.sg.cache.check_invariants()


def check_leafless(state: radix.RadixState) -> bool:
    """No unlocked leaf is left (so an eviction that fell short of its target could do no more)."""
    return not any(n.node_id != radix.ROOT and n.lock_ref == 0 and not n.children for n in state.nodes.values())


class PagedProfileAgainstNormative(ProfileAgainstNormative):
    @initialize(page=st.sampled_from([2, 3]))
    def paged(self, page):
        self.start(page)

    @rule(data=st.data())
    def admit(self, data):  # type: ignore[override]
        tokens = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3 * self.page))
        if len(tokens) >= self.page:
            self.admit_prompt(tokens[: len(tokens) - len(tokens) % self.page])


TestProfileAgainstNormative = ProfileAgainstNormative.TestCase
# at least 100 streams even under the small ``ci`` profile (about 10 s); larger profiles keep their size
TestProfileAgainstNormative.settings = settings(settings(), max_examples=max(settings().max_examples, 100))
TestPagedProfileAgainstNormative = PagedProfileAgainstNormative.TestCase
TestPagedProfileAgainstNormative.settings = settings(settings(), max_examples=max(settings().max_examples, 60))
