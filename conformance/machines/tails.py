"""The SharedTail machine: prefix hits under both partial-tail policies (0x07D) against the reference allocator.

Requests are published with the partial-tail prefix policy and admitted from random prefixes of one another
(a small token alphabet at P = 4, so hits end inside blocks), under ``eager`` or ``shared``; they append
(``tails.append_shared``), are released (``hand_over``: a holder of a published tail, one of two when it can), and published
tails are withdrawn. After every step:

* the allocator's self-check holds (refcounts equal references, every block in one role, digest);
* every live request reads back exactly the tokens the machine gave it;
* every published partial tail whose block is still current holds its witness rows: no write, in place or
  through a shared mapping, ever changed the rows a published key names.
"""

from __future__ import annotations

from typing import ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvexact.conformance.machines import ConformanceFailure, counted_rule, not_applicable
from kvexact.reference.rejections import Rejected

P = 4
TOKENS = st.integers(1, 3)


class SharedTailMachine(RuleBasedStateMachine):
    """Publish, admit (eager or shared), append, release and unpublish; the reference checked each step."""

    stats: ClassVar[dict[str, int]] = {}

    def __init__(self) -> None:
        from kvexact.reference import prefix as px
        from kvexact.reference.labs import prefix as lab

        super().__init__()
        self.lab = lab
        self.policy = px.PrefixPolicy(block_tokens=P, partial_tail=True)
        self.cache = lab.fixture_cache(P, blocks_per_group=24, check_every_op=True)
        self.alloc = self.cache.alloc
        self.tokens: dict[str, tuple[int, ...]] = {}
        self.next_id = 0
        self._count("examples")

    def _count(self, name: str, n: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    def _new_id(self) -> str:
        self.next_id += 1
        return f"r{self.next_id}"

    def _out_of_memory(self, exc: Rejected, before: str) -> None:
        """A full pool is the one refusal the machine expects; it must leave the allocator unchanged."""
        if exc.reason.name != "OUT_OF_MEMORY":
            raise exc
        if self.alloc.digest() != before:
            raise ConformanceFailure(f"a refused operation changed the allocator: {exc}")
        not_applicable(self, "out_of_memory")

    def _pick(self, choice: int) -> str | None:
        live = sorted(self.tokens)
        return live[choice % len(live)] if live else None

    @precondition(lambda self: len(self.tokens) < 2)
    @rule(tokens=st.lists(TOKENS, min_size=1, max_size=11))
    @counted_rule
    def publish(self, tokens: list[int]) -> None:
        """Allocate a new request and publish its full blocks and partial tail (while none or one is live)."""
        from kvexact.reference.keys import KeyInputs

        rid, before = self._new_id(), self.alloc.digest()
        try:
            self.alloc.allocate(rid, tokens)
        except Rejected as exc:
            return self._out_of_memory(exc, before)
        self.tokens[rid] = tuple(tokens)
        self.cache.publish(rid, KeyInputs(tuple(tokens)), self.lab.NAMESPACE, 0, self.policy)

    @precondition(lambda self: bool(self.tokens))
    @rule(choice=st.integers(0, 99), cut=st.integers(0, 11),
          suffix=st.one_of(st.just([]), st.lists(TOKENS, min_size=1, max_size=4)),
          logits=st.booleans(), shared=st.booleans())
    @counted_rule
    def admit(self, choice: int, cut: int, suffix: list[int], logits: bool, shared: bool) -> None:
        """Admit a prompt that extends a prefix (``cut`` rows, modulo its length + 1) of a live request, under
        the eager or the shared policy."""
        source = self._pick(choice)
        if source is None:
            return not_applicable(self, "admit:no_request")
        have = self.tokens[source]
        prompt = (*have[:cut % (len(have) + 1)], *suffix)
        if not prompt:
            return not_applicable(self, "admit:empty")
        self._admit(prompt, logits, shared)

    def _admit(self, prompt: tuple[int, ...], logits: bool, shared: bool) -> None:
        """Look ``prompt`` up and admit it under the eager or the shared policy."""
        from kvexact.reference import prefix as px

        rid, before = self._new_id(), self.alloc.digest()
        receipt = self.cache.lookup(self.lab.request(rid, prompt, requires_logits=logits), self.policy)
        if self.alloc.digest() != before:
            raise ConformanceFailure("a lookup changed the allocator")
        try:
            rec, receipts = px.admit(self.cache, receipt, prompt, self.policy, "shared" if shared else "eager")
        except Rejected as exc:
            return self._out_of_memory(exc, before)
        self.tokens[rid] = prompt
        if shared:  # rows past the hit that the shared tail already held: not written
            self._count("rows_shared", len(prompt) - receipt.runtime_hit_tokens - len(receipts))
        if receipt.copy_valid_partial_rows:
            self._count("shared_tail_hits" if shared else "eager_tail_hits")
        if shared and rec.tables[0] and receipt.copy_valid_partial_rows and rec.tables[0][-1] in (
                h for r, t in self.tokens.items() if r != rid for h in self.alloc.request(r).tables[0]):
            self._count("tail_still_shared")

    @precondition(lambda self: any(len(t) % P for t in self.tokens.values()))
    @rule(choice=st.integers(0, 99), rows=st.integers(1, P - 1), logits=st.booleans())
    @counted_rule
    def share_tail(self, choice: int, rows: int, logits: bool) -> None:
        """Admit, under the shared policy, a prompt that ends ``rows`` rows into a live request's partial tail
        (at most its length): the case where a tail is shared with rows past the new request's frontier."""
        live = sorted(r for r, t in self.tokens.items() if len(t) % P)
        have = self.tokens[live[choice % len(live)]]
        full = len(have) - len(have) % P
        self._admit(have[:min(len(have), full + rows)], logits, True)

    @precondition(lambda self: bool(self.tokens))
    @rule(choice=st.integers(0, 99), token=st.one_of(st.just(0), TOKENS))
    @counted_rule
    def append(self, choice: int, token: int) -> None:
        """One row through the shared-policy append: over a row the tail holds, else the allocator's append.
        Token 0 stands for the row the request's tail block holds next (1 when it holds none)."""
        from kvexact.reference import tails

        rid = self._pick(choice)
        if rid is None:
            return not_applicable(self, "append:no_request")
        if token == 0:
            rec = self.alloc.request(rid)
            rows = self.alloc.pools[0].blocks[rec.tables[0][-1].block_id].rows
            visible = self.alloc.tail_rows(rec, 0)
            token = rows[visible] if visible < len(rows) else 1
        before = self.alloc.digest()
        try:
            receipt = tails.append_shared(self.alloc, rid, token)
        except Rejected as exc:
            return self._out_of_memory(exc, before)
        self.tokens[rid] = (*self.tokens[rid], token)
        if receipt is None:
            self._count("rows_shared")
        elif "cow" in receipt.paths:
            self._count("copies_on_write")

    @precondition(lambda self: bool(self.tokens))
    @rule(choice=st.integers(0, 99))
    @counted_rule
    def release(self, choice: int) -> None:
        """End a request: its references go; a pinned tail keeps its block."""
        from kvexact.reference import lifecycle

        rid = self._pick(choice)
        if rid is None:
            return not_applicable(self, "release:no_request")
        lifecycle.release(self.alloc, rid)
        del self.tokens[rid]

    def _tail_owners(self) -> tuple[list[str], list[str]]:
        """Live requests that map a published tail's block: those another live request maps too, and all."""
        maps = {rid: set(self.alloc.request(rid).tables[0]) for rid in self.tokens}
        tails = [tables[0][-1] for tables in self.cache._tail_blocks.values()]
        holders = sorted(rid for rid, mapped in maps.items() if any(t in mapped for t in tails))
        shared = [rid for rid in holders if any(t in maps[rid] and any(t in m for r, m in maps.items() if r != rid)
                                                for t in tails)]
        return shared, holders

    @precondition(lambda self: bool(self._tail_owners()[1]))
    @rule(choice=st.integers(0, 99))
    @counted_rule
    def hand_over(self, choice: int) -> None:
        """Release a live holder of a published tail, one that shares it with another live request when
        there is one (that one is left holding the tail, and the pin); three times in four the oldest."""
        from kvexact.reference import lifecycle

        shared, holders = self._tail_owners()
        order = sorted(shared or holders, key=lambda r: int(r[1:]))  # the oldest first: usually the publisher
        rid = order[0] if choice % 4 else order[choice // 4 % len(order)]
        self._count("hand_over:shared" if shared else "hand_over:sole")
        lifecycle.release(self.alloc, rid)
        del self.tokens[rid]

    @precondition(lambda self: bool(self.cache._tail_blocks))
    @rule(choice=st.integers(0, 99))
    @counted_rule
    def unpublish(self, choice: int) -> None:
        """Withdraw a published partial tail (its pin, if any, is dropped)."""
        from kvexact.reference import tails

        keys = sorted(self.cache._tail_blocks)
        if not keys:
            return not_applicable(self, "unpublish:none")
        tails.unpublish_tail(self.cache, keys[choice % len(keys)])

    @invariant()
    def allocator_consistent(self) -> None:
        """The allocator's self-check holds and every request reads back its own tokens."""
        self._count("steps")
        self.alloc.self_check()
        for rid, want in self.tokens.items():
            have = self.alloc.tokens_of(rid)
            if have != want:
                raise ConformanceFailure(f"{rid} reads {have}, it was given {want}")

    @invariant()
    def published_tails_unchanged(self) -> None:
        """A published partial tail whose block is current still holds the rows its key names."""
        for key, tables in self.cache._tail_blocks.items():
            entry = self.cache.entries[key]
            for table in tables:
                h = table[-1]
                block = self.alloc.pools[h.cache_group_id].blocks[h.block_id]
                if block.generation == h.generation and block.rows[:entry.valid_rows] != entry.witness:
                    raise ConformanceFailure(f"published tail {key[:12]} in {h} holds "
                                             f"{block.rows[:entry.valid_rows]}, its key names {entry.witness}")

    @classmethod
    def rule_names(cls) -> list[str]:
        return ["admit", "append", "hand_over", "publish", "release", "share_tail", "unpublish"]
