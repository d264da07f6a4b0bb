"""The hybrid-groups machine: an allocator with two cache groups of drawn block sizes, hashed at a drawn
hash block size that divides both (0x01A, 0x03B), behind ``reference/hybrid_prefix.py``'s cache.

Every lookup's hit must equal the declarative convergence of ``reference/hybrid.py`` (the largest multiple of
lcm(P_g) below the cap that every group serves) computed over a shadow of the token prefixes each group
caches, which the machine keeps itself (publication adds a request's A-aligned prefixes, eviction removes
one); a lookup changes nothing; an admitted request holds exactly its prompt with ``ceil(n / P_g)`` blocks
per group; the allocator's own checks hold after every step. The pools are large enough that no block is
ever reused while the example runs (the rules stop allocating before), so no identity leaves the cache
unseen by the shadow.

With a hybrid-cache adapter (``sut_factory``, see :class:`~kvexact.reference.hybrid_adapter.HybridCache`)
the machine builds it from the drawn :class:`~kvexact.reference.hybrid_adapter.HybridCacheConfig` and drives
it in lockstep with the reference: an adapter caches as it allocates (vLLM's rule), so the reference
publishes after every admission and append; every admission, probe lookup, append and eviction must give
the reference's answer, else a :class:`ConformanceFailure` names the step. Eviction then takes only
prefixes no running request starts with (such a request's own copy would be keyed again by the
reference's next publication, while a runtime that caches as it allocates never re-caches a block).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kvexact.conformance.machines import ConformanceFailure, counted_rule, not_applicable
from kvexact.reference import lifecycle
from kvexact.reference.allocator import Allocator
from kvexact.reference.hybrid import CacheGroup, cached_blocks, converged_hit
from kvexact.reference.hybrid_adapter import HybridCacheConfig, check_hybrid
from kvexact.reference.hybrid_prefix import HybridPrefixCache
from kvexact.reference.keys import KeyInputs
from kvexact.reference.pool import GroupConfig

SIZES = (1, 2, 3, 4, 6, 8)
POOL = 200  # blocks per group; allocation stops MARGIN tokens before a group could need a reused block
MARGIN = 12
PROMPTS = st.lists(st.integers(0, 1), min_size=1, max_size=MARGIN)


class HybridMachine(RuleBasedStateMachine):
    stats: ClassVar[dict[str, int]] = {}
    sut_factory: ClassVar[Callable[[HybridCacheConfig], Any] | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.running: dict[str, list[int]] = {}
        self.written = 0  # tokens appended so far: each reserves at most one block per group
        self.next_id = 0
        self.seen: list[list[int]] = []  # every admitted prompt: later lookups revisit their prefixes
        self.sut: Any = None
        self._count("examples")

    def _count(self, name: str, n: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    @initialize(p1=st.sampled_from(SIZES), p2=st.sampled_from(SIZES), pick=st.integers(0, 7))
    def configure(self, p1: int, p2: int, pick: int) -> None:
        """Two groups of block sizes p1 and p2 (often different), hashed at a divisor of their gcd."""
        g = math.gcd(p1, p2)
        divisors = [d for d in range(1, g + 1) if g % d == 0]
        h = divisors[pick % len(divisors)]
        alloc = Allocator([GroupConfig(0, 0, p1, 8), GroupConfig(1, 1, p2, 8)], [range(1, POOL + 1)] * 2)
        self.cache = HybridPrefixCache(alloc, h)
        if self.sut_factory is not None:
            self.sut = type(self).sut_factory(HybridCacheConfig((p1, p2), h, POOL))  # type: ignore[misc]
            check_hybrid(self.sut)
        self.groups = (CacheGroup(p1), CacheGroup(p2))
        self.held: list[set[tuple[int, ...]]] = [set(), set()]  # per group: the token prefixes it caches
        self._count("mixed_sizes" if p1 != p2 else "equal_sizes")
        self._count("hash_finer_than_a_group" if h < max(p1, p2) else "hash_equals_blocks")

    def _expected_hit(self, query: list[int]) -> int:
        held = [cached_blocks(g, query, prefixes) for g, prefixes in zip(self.groups, self.held, strict=True)]
        return converged_hit(self.groups, held, len(query) - 1)

    def _lookup(self, rid: str, query: list[int]):
        before = self.cache.alloc.digest()
        r = self.cache.lookup(rid, KeyInputs(query))
        if self.cache.alloc.digest() != before:
            raise ConformanceFailure(f"lookup of {query} changed the allocator")
        want = self._expected_hit(query)
        if r.hit_tokens != want:
            raise ConformanceFailure(f"hit {r.hit_tokens} for {query}, expected {want} (groups "
                                     f"{[g.block_size for g in self.groups]}, hash {self.cache.hash_block_tokens})")
        if [len(h) for h in r.group_handles] != [want // g.block_size for g in self.groups]:
            raise ConformanceFailure(f"hit {want} maps {[len(h) for h in r.group_handles]} blocks per group")
        self._count("hits" if want else "misses")
        return r

    def _agree(self, what: str, got: Any, want: Any) -> None:
        """The adapter's answer to ``what`` must be the reference's."""
        if got != want:
            raise ConformanceFailure(f"{self.sut.name}: {what} gave {got!r}, the reference {want!r} (groups "
                                     f"{[g.block_size for g in self.groups]}, hash {self.cache.hash_block_tokens})")

    def _check_request(self, rid: str) -> None:
        rec = self.cache.alloc.request(rid)
        tokens = self.running[rid]
        if self.cache.alloc.tokens_of(rid) != tuple(tokens):
            raise ConformanceFailure(f"{rid} holds {self.cache.alloc.tokens_of(rid)}, not {tokens}")
        if [len(t) for t in rec.tables] != [-(-len(tokens) // g.block_size) for g in self.groups]:
            raise ConformanceFailure(f"{rid}: {[len(t) for t in rec.tables]} blocks per group for {len(tokens)} tokens")

    def _publish(self, rid: str) -> None:
        tokens = self.running[rid]
        self.cache.publish(rid, KeyInputs(tokens))
        stop = len(tokens) - len(tokens) % self.cache.alignment_tokens
        for g, held in zip(self.groups, self.held, strict=True):
            held.update(tuple(tokens[:end]) for end in range(g.block_size, stop + 1, g.block_size))

    def _room(self, n: int) -> bool:
        return self.written + n <= POOL - MARGIN

    @rule(prompt=PROMPTS, publish=st.booleans())
    @counted_rule
    def admit(self, prompt: list[int], publish: bool) -> None:
        """Look the prompt up, admit it through its hit, optionally publish it."""
        if not self._room(len(prompt)):
            self._count("pool_spent")
            return
        rid = f"r{self.next_id}"
        self.next_id += 1
        receipt = self._lookup(rid, prompt)
        self.cache.admit(receipt, prompt)
        self.written += len(prompt)
        self.running[rid] = list(prompt)
        self.seen.append(list(prompt))
        self._check_request(rid)
        if self.sut is not None:
            self._agree(f"admit({rid!r}, {prompt})", self.sut.admit(rid, prompt), receipt.hit_tokens)
        if publish or self.sut is not None:
            self._publish(rid)

    @precondition(lambda self: bool(self.running))
    @rule(pick=st.integers(0, 99), token=st.integers(0, 1))
    @counted_rule
    def append(self, pick: int, token: int) -> None:
        if not self._room(1):
            self._count("pool_spent")
            return
        rid = sorted(self.running)[pick % len(self.running)]
        self.cache.alloc.append(rid, token)
        self.written += 1
        self.running[rid].append(token)
        self._check_request(rid)
        if self.sut is not None:
            self._agree(f"append({rid!r}, {token})", self.sut.append(rid, token), True)
            self._publish(rid)

    @precondition(lambda self: bool(self.running))
    @rule(pick=st.integers(0, 99))
    @counted_rule
    def publish(self, pick: int) -> None:
        self._publish(sorted(self.running)[pick % len(self.running)])

    @precondition(lambda self: bool(self.running))
    @rule(pick=st.integers(0, 99))
    @counted_rule
    def release(self, pick: int) -> None:
        rid = sorted(self.running)[pick % len(self.running)]
        lifecycle.release(self.cache.alloc, rid)
        del self.running[rid]
        if self.sut is not None:
            self.sut.free(rid)

    def _evictable(self, group: int) -> list[tuple[int, ...]]:
        """The group's cached prefixes the rule may drop (with an adapter: none a running request starts with)."""
        held = sorted(self.held[group])
        if self.sut is None:
            return held
        return [p for p in held if not any(tuple(t[:len(p)]) == p for t in self.running.values())]

    @precondition(lambda self: any(self.held))
    @rule(group=st.integers(0, 1), pick=st.integers(0, 999))
    @counted_rule
    def evict(self, group: int, pick: int) -> None:
        """Drop one cached prefix of a group: the cache must hold it, and no longer afterwards."""
        if not self._evictable(group):
            group = 1 - group
        choices = self._evictable(group)
        if not choices:
            not_applicable(self, "nothing_evictable")
            return
        prefix = choices[pick % len(choices)]
        key = self.cache.group_keys(KeyInputs(prefix))[group][-1]
        if self.cache.evict(group, key) is None:
            raise ConformanceFailure(f"group {group} should cache {prefix} but holds no block for it")
        self.held[group].discard(prefix)
        if self.sut is not None:
            self._agree(f"evict({group}, {list(prefix)})", self.sut.evict(group, list(prefix)), True)

    @rule(query=PROMPTS)
    @counted_rule
    def lookup(self, query: list[int]) -> None:
        self._probe(query)

    def _probe(self, query: list[int]) -> None:
        r = self._lookup("probe", query)
        if self.sut is not None:
            self._agree(f"lookup({query})", self.sut.lookup(query), r.hit_tokens)

    @precondition(lambda self: bool(self.seen))
    @rule(pick=st.integers(0, 99), cut=st.integers(0, MARGIN), extra=st.lists(st.integers(0, 1), max_size=3))
    @counted_rule
    def lookup_seen(self, pick: int, cut: int, extra: list[int]) -> None:
        """Look up a cut of an admitted prompt, maybe extended: the prefixes the groups share or lost."""
        base = self.seen[pick % len(self.seen)]
        self._probe((base[:cut] + extra) or [0])

    @invariant()
    def allocator_consistent(self) -> None:
        self._count("steps")
        if hasattr(self, "cache"):
            self.cache.alloc.self_check()
        if self.sut is not None:
            self.sut.self_check()
