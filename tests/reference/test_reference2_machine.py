"""Random operation sequences: the pool self-check after every committed operation, the digest unchanged
after every rejection or rollback, and the whole trace validated step by step against the spec."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule
from step_validation import validate

from kvexact.reference import lifecycle
from kvexact.reference.adapters import TraceRecorder
from kvexact.reference.allocator import Allocator
from kvexact.reference.handles import BlockHandle
from kvexact.reference.pool import GroupConfig, PoolRejection, QueuePolicy
from kvexact.reference.rejections import Rejected

GROUPS = [GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 2, 4)]


class _Base(RuleBasedStateMachine):
    requests: tuple[str, ...] = ()

    def live(self) -> list[str]:
        """Requests with at least one token (the specs' Release and Fork require len[r] > 0; the
        reference also ends or forks a live request truncated to zero tokens)."""
        return [r for r in self.requests if r in self.alloc.requests and self.alloc.requests[r].context_tokens]

    def idle(self) -> list[str]:
        return [r for r in self.requests if r not in self.alloc.requests]

    def attempt(self, fn):
        """Run one operation; a rejection must leave the digest exactly as it was."""
        before = self.alloc.digest()
        try:
            return fn()
        except Rejected as exc:
            assert self.alloc.digest() == before, exc
            self.rejections += 1
            return None
        finally:
            self.alloc.fault_after.clear()


class CowMachine(_Base):
    requests = ("a", "b", "c")

    def __init__(self):
        super().__init__()
        self.alloc = Allocator(GROUPS, [[1, 2, 3, 4], [1, 2, 3, 4]], check_every_op=True,
                               policy=QueuePolicy.LOWEST_ID)  # CowPublication's boundary takes the lowest
        self.rec = TraceRecorder("CowPublication", requests=self.requests, readers=("x", "y")).attach(self.alloc)
        self.rejections = 0

    @rule(r=st.sampled_from(requests), t=st.integers(1, 3),
          fault=st.sampled_from([None] * 6 + [("cow_reserve", 0), ("cow_reserve", 1), ("cow_copy", 1),
                                 ("cow_validate", None)]))
    def append(self, r, t, fault):
        if fault:
            self.alloc.fault_after.add(fault)
        receipt = self.attempt(lambda: self.alloc.append(r, t))
        if receipt is not None and receipt.outcome == "ROLLED_BACK":
            assert receipt.predecessor_digest == receipt.successor_digest

    @rule(data=st.data())
    def fork(self, data):
        if self.live() and self.idle():
            r, c = data.draw(st.sampled_from(self.live())), data.draw(st.sampled_from(self.idle()))
            self.attempt(lambda: lifecycle.fork(self.alloc, r, c))

    @rule(r=st.sampled_from(requests), c=st.sampled_from(requests))
    def fork_any(self, r, c):
        if r not in self.alloc.requests or self.alloc.requests[r].context_tokens:
            self.attempt(lambda: lifecycle.fork(self.alloc, r, c))

    @rule(data=st.data())
    def release(self, data):
        if self.live():
            r = data.draw(st.sampled_from(self.live()))
            self.attempt(lambda: lifecycle.release(self.alloc, r))

    @rule(x=st.sampled_from(("x", "y")), r=st.sampled_from(requests))
    def snapshot(self, x, r):
        self.attempt(lambda: lifecycle.reader_snapshot(self.alloc, x, r))

    @rule(x=st.sampled_from(("x", "y")))
    def reader_release(self, x):
        self.attempt(lambda: lifecycle.reader_release(self.alloc, x))

    def teardown(self):
        validate("CowPublication", self.rec, {
            "Groups": {0, 1}, "Blocks": {1, 2, 3, 4}, "Requests": set(self.requests), "Readers": {"x", "y"},
            "NoReq": "NoReq", "Tokens": {1, 2, 3}, "P": 2, "MaxTokens": 9, "Concurrent": 1},
            {*self.requests, "x", "y", "NoReq"})


class KvMachine(_Base):
    requests = ("r1", "r2", "r3")

    def __init__(self):
        super().__init__()
        self.alloc = Allocator(GROUPS, [[1, 2, 3], [1, 2, 3]], check_every_op=True)
        self.rec = TraceRecorder("KVAllocation", requests=self.requests).attach(self.alloc)
        self.rejections = 0

    def _length(self, r):
        return self.alloc.requests[r].context_tokens if r in self.alloc.requests else 0

    @rule(r=st.sampled_from(requests),
          fault=st.sampled_from([None] * 6 + [("append_reserve", 0), ("append_reserve", 1), ("append_write", None)]))
    def append(self, r, fault):
        if fault:
            self.alloc.fault_after.add(fault)
        self.attempt(lambda: self.alloc.append(r, 100 + self._length(r)))  # one shared token stream

    @rule(r=st.sampled_from(requests), j=st.integers(0, 2))
    def cache(self, r, j):
        self.attempt(lambda: lifecycle.cache_block(self.alloc, r, j, str(j + 1)))

    @rule(data=st.data())
    def cache_full_block(self, data):
        full = [(r, j) for r in self.live() for j in range(self._length(r) // 2)]
        if full:
            r, j = data.draw(st.sampled_from(full))
            self.attempt(lambda: lifecycle.cache_block(self.alloc, r, j, str(j + 1)))

    @rule(r=st.sampled_from(requests), k=st.integers(1, 2))
    def prefix_hit(self, r, k):
        self.attempt(lambda: lifecycle.prefix_hit(self.alloc, r, [str(i) for i in range(1, k + 1)]))

    @rule(data=st.data())
    def release(self, data):
        if self.live():
            r = data.draw(st.sampled_from(self.live()))
            self.attempt(lambda: lifecycle.release(self.alloc, r))

    @rule(r=st.sampled_from(requests), k=st.integers(0, 2))
    def truncate(self, r, k):
        self.attempt(lambda: lifecycle.truncate(self.alloc, r, k * 2) if k * 2 < self._length(r) else
                     lifecycle.truncate(self.alloc, r, 10**6))

    @rule(j=st.integers(1, 3))
    def evict(self, j):
        self.attempt(lambda: lifecycle.evict(self.alloc, str(j)))

    @rule()
    def stale_write(self):
        held = self.rec.stale  # the handle the spec's delayed writer holds
        if held["block"] == 0:
            return
        h = BlockHandle(held["grp"], held["grp"], held["block"], held["gen"])
        before = self.alloc.digest()
        try:
            lifecycle.delayed_write(self.alloc, h, 0, 1)
            raise AssertionError(f"{h} was accepted")
        except Rejected as exc:
            assert exc.reason in (PoolRejection.STALE_BLOCK_GENERATION, PoolRejection.HANDLE_NOT_OWNED)
        assert self.alloc.digest() == before

    def teardown(self):
        validate("KVAllocation", self.rec, {
            "Groups": {0, 1}, "Blocks": {1, 2, 3}, "Requests": set(self.requests), "NoReq": "NoReq", "P": 2,
            "MaxTokens": 7}, {*self.requests, "NoReq"})


TestCowMachine = CowMachine.TestCase
TestKvMachine = KvMachine.TestCase
# MaxTokens bounds the spec's parameter ranges (1..MaxBlocks): it must cover the longest request a
# 3- or 4-block pool can hold (6 or 8 tokens) and stay small, since the checker splits Next per value.
