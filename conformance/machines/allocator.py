"""Hypothesis state machines: the reference allocator (or an adapter in its place) against the kernels.

:class:`AllocatorMachine` draws requests whose prompts share prefixes (a three-token alphabet and
two-token blocks, so hits, forks, copy-on-write and exhaustion happen often), applies each operation to
the system under test and, in lockstep, to the normative reference, and mirrors every accepted operation
onto a real paged pool through ``reshape_and_cache`` and ``copy_blocks``. ``check_attention`` (a rule, and
always at teardown) compares paged decode for every live request with float64 attention over the
request's logical history. Every reference step is recorded and, at teardown, validated as a step of
the spec (``KVAllocation`` or ``CowPublication``) by the embedded checker.

Rules take their handles from Hypothesis bundles: ``start``, ``fork`` and ``start_on_cached_prefix`` put
the new :class:`Request` into ``live`` (a new request takes the first free id), ``release`` consumes it,
and every other request rule draws from it (``append`` only a request that can grow, ``truncate`` only one
with more than a block); ``cache`` (and ``append_onto_cached_tail``, which publishes first) puts the
prefixes it keyed into ``published``, which ``evict``,
``start_on_cached_prefix`` and ``lookup_under_foreign_scopes`` draw from. No rule draws inside its body;
where a count depends on the request (the blocks kept by a truncate), a drawn integer picks it modulo.

Invariants checked after every step: the SUT's and the reference's self-checks (refcounts recomputed
from reachability, queue membership, partition), and a rejected operation leaves the reference digest
unchanged. Subclass :class:`AllocatorMachine` (set ``sut_factory``) to run it from a runtime's pytest.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    multiple,
    precondition,
    rule,
)

from kvexact.conformance.adapter_trace import finish_trace, start_trace
from kvexact.conformance.machines import (
    ConformanceFailure,
    counted_rule,
    failure_in_flight,
    lacks,
    not_applicable,
)
from kvexact.conformance.machines.kv_events import EventMirror
from kvexact.conformance.machines.room import MEMORY_REFUSALS, BlockPrefixes, append_need, start_need
from kvexact.conformance.mirror import DevicePool, mirror_step
from kvexact.conformance.observation import ObservationError, Observer
from kvexact.reference.adapters import AdapterConfig, LookupScope, OpResult, ReferenceAdapter, check_adapter
from kvexact.reference.pool import BlockState, QueuePolicy

ALPHABET = (1, 2, 3)
REQUEST_IDS = ("r0", "r1", "r2")
READERS = ("x",)
STREAM = tuple(ALPHABET[i % len(ALPHABET)] for i in range(64))  # the canonical stream: identity = position
MAX_TOKENS = 32  # the spec's MaxTokens guard; the machine keeps every request shorter
FENCED = ("STALE_BLOCK_GENERATION", "HANDLE_NOT_OWNED")  # how the generation fence refuses a delayed writer
# the home scope, under which the reference publishes, and lookups under another salt, LoRA or namespace:
# each of those must miss; a tenant outside the namespace is refused by name
SCOPES = {"home": LookupScope(), "salted": LookupScope(cache_salt="s1"), "lora": LookupScope(lora_name="l1"),
                  "other-namespace": LookupScope("t1", "other"), "unauthorized": LookupScope("t1", "home")}
# rules that only one spec's machine runs (their preconditions say so); every other rule runs in both
SPEC_ONLY = {"fork": "CowPublication", "fork_then_append": "CowPublication", "truncate": "KVAllocation",
             "append_onto_cached_tail": "KVAllocation",
             "cache": "KVAllocation", "evict": "KVAllocation", "stale_writer": "KVAllocation",
             "lookup_under_foreign_scopes": "KVAllocation", "start_on_cached_prefix": "KVAllocation"}
# a prompt: a prefix of the canonical stream (shared prefixes, hits) or any short token list
PROMPTS = st.one_of(st.integers(1, 7).map(lambda n: list(STREAM[:n])),
                    st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=5))
# rejection names an adapter may use for one another: one that does not remember ended requests calls a
# released id unknown
SYNONYMS = {"REQUEST_ALREADY_ENDED": "UNKNOWN_REQUEST"}
# the machines' pool: an odd number of blocks per group, so that pool arithmetic right only for even sizes
# (``n | 1`` for ``n + 1``, ``n ^ 1``) shows; two groups of two-token blocks
MACHINE_CONFIG = AdapterConfig(blocks_per_group=7)
# the pressure probe at the end of an example: full blocks of its prompt that a second start hits, and the three
# tokens of its prompts (outside ALPHABET, so no prefix of the example is reused)
PRESSURE_HIT_BLOCKS = 2
PRESSURE_TOKENS = (4, 5, 6)
BOUND = 64  # MaxGen, MaxEpoch, ...: state-space bounds of the model configs, lifted for traces


def _fresh(arg: Any) -> Any:
    """A request id as a new string object equal to ``arg`` (other arguments as they are): the SUT gets a new
    object at every call, so one that compares ids by identity (``is``) instead of by value fails."""
    return "".join(arg) if isinstance(arg, str) else arg


def _same_name(rejection: str | None) -> str | None:
    return SYNONYMS.get(rejection or "", rejection)


def spec_constants(spec: str, config: AdapterConfig) -> dict[str, Any]:
    """The spec's constants bound to the finite values this machine uses (bounds lifted out of the way)."""
    consts: dict[str, Any] = {
        "Groups": set(range(config.num_groups)), "Blocks": set(range(1, config.blocks_per_group + 1)),
        "Requests": set(REQUEST_IDS), "NoReq": "NoReq", "P": config.block_tokens,
        "MaxTokens": MAX_TOKENS, "MaxGen": BOUND, "MaxEpoch": BOUND, "MaxVersion": BOUND,
    }
    consts["Concurrent"] = 1  # the reference serializes transactions
    if spec == "KVAllocation":  # and copies shared tails
        consts["TailPolicy"] = "eager"
    else:
        consts["Readers"] = set(READERS)
        consts["Tokens"] = set(ALPHABET)
    return consts


@attrs.define(eq=False)
class Request:
    """A live request, the handle the ``live`` bundle holds: its id and its logical history (every token
    the system under test accepted for it, in order)."""

    rid: str
    tokens: list[int]
    block_tokens: int
    published_blocks: int = 0  # full blocks an accepted cache() of this request published (and it still maps)

    def growable(self) -> bool:
        return len(self.tokens) < MAX_TOKENS - 1

    def truncatable(self) -> bool:
        """More than one block's tokens: a truncate can free a whole tail block."""
        return len(self.tokens) > self.block_tokens

    def on_stream(self) -> bool:
        """A full block or more, all of it the canonical stream: ``cache`` publishes its full blocks."""
        return len(self.tokens) >= self.block_tokens and self.tokens == list(STREAM[: len(self.tokens)])


class AllocatorMachine(RuleBasedStateMachine):
    """Allocator + prefix cache (spec ``KVAllocation``) or fork + COW (spec ``CowPublication``)."""

    live = Bundle("live")  # requests started or forked, until released
    published = Bundle("published")  # prefixes the cache rule keyed (they stay: evicted ones test the refusal)

    spec: ClassVar[str] = "KVAllocation"
    sut_factory: ClassVar[Callable[[AdapterConfig], Any] | None] = None  # None: the reference is the SUT
    config: ClassVar[AdapterConfig] = MACHINE_CONFIG
    check_kernels: ClassVar[bool] = True
    validate_trace: ClassVar[bool] = True
    stats: ClassVar[dict[str, int]] = {}

    def __init__(self) -> None:
        super().__init__()
        cfg = self.config
        self.ref = ReferenceAdapter(cfg, spec=self.spec if self.validate_trace else None,
                                    policy=QueuePolicy.LOWEST_ID if self.spec == "CowPublication" else QueuePolicy.LRU,
                                    stream=STREAM if self.spec == "KVAllocation" else None,
                                    requests=REQUEST_IDS, readers=READERS if self.spec == "CowPublication" else ())
        self.sut = self.sut_factory(cfg) if self.sut_factory is not None else None  # type: ignore[call-arg]
        if self.sut is not None:
            check_adapter(self.sut)
        self.target = self.sut if self.sut is not None else self.ref
        self.adapter_trace = start_trace(self.spec, self.sut)  # the adapter's own steps, when traces are written
        self.device = DevicePool([self._pool_of(g) for g in range(cfg.num_groups)], cfg.block_tokens)
        self.requests: dict[str, Request] = {}  # the live requests by id (the ``live`` bundle's handles)
        self.sut_delayed_writer: tuple[int, int, int] | None = None  # (group, block, generation) in the SUT
        self._projection_model: Any = None  # the spec's checker model, for the per-step invariants
        self.observer = Observer()  # the target's observe() (queues, COW steps), when it has one
        self.last_reference_result = OpResult(True)  # the reference's answer to the latest _both() call
        self.block_prefixes = BlockPrefixes(cfg.num_groups)  # what each SUT block last held full (room checks)
        self.kv_mirror = EventMirror(cfg.num_groups, self.sut.name) if self.sut is not None else None
        self.kv_checks = 0  # invariant checks so far: the step after which events are replayed
        self._count("examples")

    # ---- helpers -------------------------------------------------------------------------------------
    def _pool_of(self, group: int) -> list[int]:
        """The target's ``block_ids(group)``: ``blocks_per_group`` distinct ids, the geometry it was built with."""
        ids = list(self.target.block_ids(group))
        if len(set(ids)) != len(ids) or len(ids) != self.config.blocks_per_group:
            who = self.sut.name if self.sut is not None else "the reference"
            raise ConformanceFailure(f"{who}: block_ids({group}) holds {len(set(ids))} distinct ids ({len(ids)} in "
                                     f"all), but its config gives {self.config.blocks_per_group} blocks per group")
        return ids

    @property
    def histories(self) -> dict[str, list[int]]:
        """Each live request's logical history."""
        return {r: q.tokens for r, q in self.requests.items()}

    def _count(self, name: str) -> None:
        self.stats[name] = self.stats.get(name, 0) + 1

    def _both(self, op: str, *args: Any) -> OpResult:
        """Apply ``op`` to the reference and (in lockstep) the SUT; they must agree on acceptance."""
        self._observe()
        if self.sut is not None and not getattr(self.sut, "lockstep", True):
            self.block_prefixes.note({r: self._tables(r) for r in self.requests}, self.histories,
                                     self.config.block_tokens)
        before = self.ref.digest()
        ref_result: OpResult = getattr(self.ref, op)(*args)
        if not ref_result.accepted and self.ref.digest() != before:
            raise ConformanceFailure(f"reference {op}{args} was rejected ({ref_result.rejection}) but changed "
                                     "the state digest")
        self._count(f"{op}:{'ok' if ref_result.accepted else ref_result.rejection}")
        self.last_reference_result = ref_result
        if self.sut is None:
            return ref_result
        method = getattr(self.sut, op, None)
        if method is None:
            raise ConformanceFailure(f"{self.sut.name} has no {op}()")
        sut_result: OpResult = method(*(_fresh(a) for a in args))
        if self.adapter_trace is not None:
            self.adapter_trace.step(op, args, sut_result, ref_result)
        if getattr(self.sut, "lockstep", True):
            if sut_result.accepted != ref_result.accepted:
                raise ConformanceFailure(
                    f"{op}{args}: the reference {'accepted' if ref_result.accepted else 'rejected'} it "
                    f"({ref_result.rejection}) but {self.sut.name} "
                    f"{'accepted' if sut_result.accepted else 'rejected'} it ({sut_result.rejection})")
            if (not sut_result.accepted and sut_result.rejection is not None
                    and _same_name(sut_result.rejection) != _same_name(ref_result.rejection)):
                raise ConformanceFailure(f"{op}{args}: rejection {sut_result.rejection} != reference's "
                                         f"{ref_result.rejection}")
        return sut_result

    def _observe(self) -> None:
        """Record the adapter's (and the reference's) tables and lengths after its latest step."""
        if self.adapter_trace is None or not self.adapter_trace.steps:
            return
        live = sorted(self.histories)
        groups = range(self.config.num_groups)
        self.adapter_trace.observe(tables={r: [list(self.target.table(r, g)) for g in groups] for r in live},
                                   lengths={r: int(self.target.length(r)) for r in live},
                                   reference_tables={r: [list(self.ref.table(r, g)) for g in groups] for r in live})

    def _mapped(self, group: int) -> set[int]:
        """The target's blocks of ``group`` that live requests' tables map."""
        return {b for r in self.requests for b in self.target.table(r, group)}

    def _tables(self, rid: str) -> list[list[int]]:
        return [list(self.target.table(rid, g)) for g in range(self.config.num_groups)]

    def _supports(self, op: str) -> bool:
        """Whether the SUT has the optional method ``op``; a missing one is counted and reported."""
        return not lacks(self, self.sut, op)

    # ---- rules ---------------------------------------------------------------------------------------
    def _free_id(self) -> str:
        """The first request id no live request holds (ids are interchangeable names)."""
        return next(r for r in REQUEST_IDS if r not in self.requests)

    @precondition(lambda self: len(self.requests) < len(REQUEST_IDS))
    @rule(target=live, scope=st.sampled_from(("home", "home", *SCOPES)), prompt=PROMPTS,
          stream_tokens=st.integers(3, 7))
    @counted_rule
    def start(self, scope: str, prompt: list[int], stream_tokens: int) -> Any:
        """Start a request (foreign scopes only on the reference with a prefix cache); it joins ``live``."""
        if self.sut is not None or self.ref.prefix is None:
            scope = "home"
        if scope not in ("home", "unauthorized"):  # a foreign lookup of the stream the home scope publishes
            prompt = list(STREAM[:stream_tokens])
        if self.requests:  # a start under a live request's id is refused
            self._refuse("start", min(self.requests), list(STREAM[:1]))
        return self._start(self._free_id(), prompt, scope)

    @precondition(lambda self: self.spec == "KVAllocation" and len(self.requests) < len(REQUEST_IDS)
                  and bool(self.ref.cached_prefixes()))
    @rule(target=live, prefix=published, extra=st.integers(1, 2), scope=st.sampled_from(("home", "home", *SCOPES)))
    @counted_rule
    def start_on_cached_prefix(self, prefix: tuple[int, ...], extra: int, scope: str) -> Any:
        """Start a request whose prompt is a published prefix plus ``extra`` stream tokens: a prefix hit,
        admitted through the prefix cache (0x07C), its rows read through the kernels. A prefix evicted since
        it was published is counted (``start_on_cached_prefix:evicted_since``) and left alone."""
        if prefix not in self.ref.cached_prefixes():
            not_applicable(self, "start_on_cached_prefix:evicted_since")
            return multiple()
        return self._start(self._free_id(), list(STREAM[: len(prefix) + extra]),
                           scope if self.sut is None else "home")

    def _start(self, rid: str, prompt: list[int], scope: str) -> Any:
        findable = self._findable_prefix(prompt) if scope == "home" else None
        if scope == "home":
            result = self._both("start", rid, prompt)
        else:
            result = self._foreign_start(scope, rid, prompt)
        if not result.accepted:
            if scope == "home":
                self._refused_with_room(f"start({rid}, {prompt})", result,
                                        lambda g, mapped: start_need(prompt, self.config.block_tokens,
                                                                     self._chain_blocks(prompt), g,
                                                                     self.block_prefixes, mapped))
            return multiple()
        self._check_hit(rid, prompt, result.hit_tokens)
        if findable is not None and self.sut is not None and result.hit_tokens != findable:
            raise ConformanceFailure(f"start({rid}, {prompt}): {self.sut.name} reused {result.hit_tokens} cached tokens, "
                                     f"but its cached_prefixes() held the prompt's first {findable} tokens just before "
                                     "(0x07A: a hit is the longest chain of whole blocks the cache holds, short of the "
                                     "last prompt token)")
        floor = self._mapped_prefix(prompt)
        if self.sut is not None and result.hit_tokens < floor:
            raise ConformanceFailure(f"start({rid}, {prompt}): {self.sut.name} reused {result.hit_tokens} cached tokens, "
                                     f"but live requests map cached full blocks holding its first {floor} tokens "
                                     "(cached at allocation, or published by an accepted cache()); a runtime that "
                                     "keeps such blocks cached must hit on them (0x07A: S_runtime falls short of "
                                     "S_indexed)")
        self.requests[rid] = Request(rid, list(prompt), self.config.block_tokens)
        self._computed_blocks_are_private(rid, result.hit_tokens)
        mirror_step(self.device, result.copies, self._tables(rid), prompt, result.hit_tokens)
        self._count(f"hit_tokens={result.hit_tokens}")
        return self.requests[rid]

    def _computed_blocks_are_private(self, rid: str, hit: int) -> None:
        """A start writes the rows past its hit into blocks no other live request maps: only the blocks of the hit
        are reused, so a block shared with a live request that lies past the reported hit means the hit was
        under-reported (or a mapped block was handed out again)."""
        p = self.config.block_tokens
        others = [self._tables(r) for r in self.requests if r != rid]
        for g, table in enumerate(self._tables(rid)):
            shared = [b for b in table[hit // p:] if any(b in tables[g] for tables in others)]
            if shared:
                who = self.sut.name if self.sut is not None else "the reference"
                raise ConformanceFailure(f"start({rid}): {who} reported a hit of {hit} tokens, but its group-{g} table "
                                         f"maps blocks {shared} past the hit that other live requests map too; the rows "
                                         "a start computes go into blocks of its own")

    def _cached_prefixes(self) -> set[tuple[int, ...]] | None:
        """The SUT's own ``cached_prefixes()`` (optional: the full-block token prefixes its cache can hit on now)."""
        method = getattr(self.sut, "cached_prefixes", None) if self.sut is not None else None
        return None if not callable(method) else {tuple(int(t) for t in p) for p in method()}

    def _findable_prefix(self, prompt: list[int]) -> int | None:
        """Tokens of the longest chain of ``prompt``'s whole blocks (short of its last token) that the SUT's
        ``cached_prefixes()`` holds; None when the SUT does not offer it."""
        held = self._cached_prefixes()
        return None if held is None else self._held_chain(prompt, held)

    def _held_chain(self, prompt: list[int], held: set[tuple[int, ...]]) -> int:
        """Tokens of the longest chain of ``prompt``'s whole blocks, short of its last token, whose prefixes are all
        in ``held``."""
        p, blocks = self.config.block_tokens, 0
        while blocks < (len(prompt) - 1) // p and tuple(prompt[: (blocks + 1) * p]) in held:
            blocks += 1
        return blocks * p

    def _promised_blocks(self) -> dict[str, int] | None:
        """Per live request, how many of its leading full blocks the SUT's declaration promises stay cached while
        the request maps them: every full block for ``caches_at_allocation``, those an accepted ``cache()``
        published for ``keeps_published_blocks``; None when it declares neither (and for the reference)."""
        p = self.config.block_tokens
        if getattr(self.sut, "caches_at_allocation", False):
            return {q.rid: len(q.tokens) // p for q in self.requests.values()}
        if getattr(self.sut, "keeps_published_blocks", False):
            return {q.rid: q.published_blocks for q in self.requests.values()}
        return None

    def _promised_prefixes(self) -> set[tuple[int, ...]]:
        """The token prefixes of the full blocks :meth:`_promised_blocks` names (empty when it names none)."""
        p, promised = self.config.block_tokens, self._promised_blocks() or {}
        return {tuple(q.tokens[: (j + 1) * p]) for q in self.requests.values() for j in range(promised.get(q.rid, 0))}

    def _mapped_prefix(self, prompt: list[int]) -> int:
        """Tokens of ``prompt`` (whole blocks, at most all but its last token) that cached full blocks of live
        requests hold, which the runtime can never have evicted (:meth:`_promised_blocks`; none for a SUT that
        declares neither promise)."""
        return self._held_chain(prompt, self._promised_prefixes())

    def _check_hit(self, rid: str, prompt: list[int], hit: int) -> None:
        """A start's reused rows obey 0x07A's chain for a logits-producing request: whole blocks, and at least
        the prompt's last token computed (0 <= hit <= len(prompt) - 1, hit a multiple of the block size)."""
        p = self.config.block_tokens
        if hit < 0 or hit > len(prompt) - 1 or hit % p:
            who = self.sut.name if self.sut is not None else "the reference"
            raise ConformanceFailure(f"start({rid}, {prompt}): {who} reused {hit} cached tokens; a prefix hit must be "
                                     f"whole blocks of {p} and leave at least the last prompt token to compute "
                                     f"(at most {len(prompt) - 1 - (len(prompt) - 1) % p}; 0x07A)")

    def _foreign_start(self, scope: str, rid: str, prompt: list[int]) -> OpResult:
        """Start ``rid`` under a foreign scope: the home scope's cached blocks must stay invisible."""
        before = self.ref.digest()
        result = self.ref.start(rid, prompt, SCOPES[scope])
        self._count(f"start:{scope}:{'ok' if result.accepted else result.rejection}")
        if scope == "unauthorized":
            if result.accepted or result.rejection != "UNAUTHORIZED_TENANT" or self.ref.digest() != before:
                raise ConformanceFailure(f"start: tenant t1 started {rid} in namespace home ({result}); it must "
                                         "be refused as UNAUTHORIZED_TENANT before any key is derived, changing nothing")
        elif result.hit_tokens:
            raise ConformanceFailure(f"start: a lookup of {prompt} under the {scope} scope hit {result.hit_tokens} "
                                     f"tokens, but only the home scope published: cache isolation is broken (0x07B)")
        return result

    def _append(self, req: Request, token: int, op: str = "append") -> OpResult:
        """Append ``token`` to ``req`` in lockstep and mirror the accepted step onto the device pool; a
        refused (or rolled-back) append must leave the request's tables as they were, and so must an accepted
        ``append_with_failure``, whose fault fires at the first reservation."""
        before, n = self._tables(req.rid), len(req.tokens)
        result = self._both(op, req.rid, token)
        if result.accepted and op == "append_with_failure" and self._tables(req.rid) != before:
            raise ConformanceFailure(
                f"append_with_failure({req.rid}, {token}): {self.target.name} accepted it and its tables went from "
                f"{before} to {self._tables(req.rid)}; the fault fires after the first group's reservation, so only "
                "an append that reserves nothing (an in-place write) may be accepted (0x04F)")
        if result.accepted:
            req.tokens.append(token)
            mirror_step(self.device, result.copies, self._tables(req.rid), req.tokens, n)
        elif self._tables(req.rid) != before:
            raise ConformanceFailure(f"{op}({req.rid}, {token}) was refused ({result.rejection}) but changed "
                                     f"{req.rid}'s tables")
        elif op == "append":
            others = [self._tables(r) for r in self.requests if r != req.rid]
            self._refused_with_room(f"append({req.rid}, {token})", result, lambda g, mapped: append_need(
                n, self.config.block_tokens, bool(before[g]) and any(before[g][-1] in t[g] for t in others)))
        return result

    def _refused_with_room(self, what: str, result: OpResult, need: Callable[[int, set[int]], int]) -> None:
        """Off lockstep, an adapter whose ``observe()`` reports ``usage`` (so every block no live table maps is
        free) may refuse for lack of blocks only when ``need(group, mapped)`` exceeds a group's unmapped blocks
        (:mod:`kvexact.conformance.machines.room`)."""
        if (self.sut is None or getattr(self.sut, "lockstep", True) or not self.observer.reports_usage
                or result.rejection not in MEMORY_REFUSALS):
            return
        self._count("refusals_for_blocks_checked")
        rooms = []
        for g in range(self.config.num_groups):
            mapped = self._mapped(g)
            free, wanted = len(self.sut.block_ids(g)) - len(mapped), need(g, mapped)
            if wanted > free:
                return
            rooms.append(f"group {g}: needs at most {wanted}, {free} unmapped")
        raise ConformanceFailure(f"{what}: {self.sut.name} refused it for lack of blocks ({result.rejection}), but "
                                 f"there is room ({'; '.join(rooms)}); its observe() reports usage, so every block "
                                 "no live table maps is free")

    def _chain_blocks(self, prompt: list[int]) -> int:
        """Blocks of ``prompt`` a start must hit: the chain the SUT's ``cached_prefixes()`` holds, or else the
        floor its declarations give (:meth:`_mapped_prefix`)."""
        findable = self._findable_prefix(prompt)
        return (self._mapped_prefix(prompt) if findable is None else findable) // self.config.block_tokens

    def _any(self, has: Callable[[Request], bool]) -> bool:
        """Some live request passes ``has`` (a filtered draw from ``live`` needs one)."""
        return any(has(q) for q in self.requests.values())

    @precondition(lambda self: self._any(Request.growable))
    @rule(req=live.filter(Request.growable), token=st.sampled_from((0, *ALPHABET)))
    @counted_rule
    def append(self, req: Request, token: int) -> None:
        """Append one token (0 draws the canonical stream's next token, so prefixes keep being shared)."""
        self._append(req, token or STREAM[len(req.tokens)])

    @precondition(lambda self: self._any(Request.growable))
    @rule(req=live.filter(Request.growable), token=st.sampled_from(ALPHABET))
    @counted_rule
    def append_with_injected_failure(self, req: Request, token: int) -> None:
        """A fault between group reservations (0x04F): a reserving append rolls back exactly."""
        if self._supports("append_with_failure"):
            self._append(req, token, "append_with_failure")

    @rule(target=live, req=consumes(live))
    @counted_rule
    def release(self, req: Request) -> Any:
        """Release the request; a refused release keeps it in ``live``."""
        if not self._both("release", req.rid).accepted:
            return req
        del self.requests[req.rid]
        self._refuse("release", req.rid)  # released: a second release is refused
        return multiple()

    def _reset_at_the_end(self) -> None:
        """At the end of an example, on a SUT off lockstep that offers ``reset_prefix_cache()`` (vLLM's): a reset
        is refused while a live request maps a block; with every request released it is accepted, and a start
        of the canonical stream then reuses nothing. Run after the steps, so it changes none of them."""
        sut = self.sut
        if (self.spec != "KVAllocation" or sut is None or getattr(sut, "lockstep", True)
                or not callable(getattr(sut, "reset_prefix_cache", None))):
            return
        for rid in [None, *sorted(self.requests)]:  # first with the live requests, then after releasing them
            if rid is not None:
                sut.release(rid)
                del self.requests[rid]
            in_use = any(block for r in self.requests for table in self._tables(r) for block in table)
            result = sut.reset_prefix_cache()
            self._count(f"reset_prefix_cache:{'ok' if result.accepted else result.rejection}")
            if result.accepted == in_use:
                raise ConformanceFailure(f"reset_prefix_cache() was {'accepted' if result.accepted else 'refused'} "
                                         f"while live requests {'held' if in_use else 'held no'} blocks: it must be "
                                         "refused exactly while a block is in use")
            if result.accepted:
                break
        probe = sut.start(REQUEST_IDS[0], list(STREAM[:7]))
        if probe.accepted and probe.hit_tokens:
            raise ConformanceFailure(f"start({REQUEST_IDS[0]}, {list(STREAM[:7])}): {sut.name} reused "
                                     f"{probe.hit_tokens} cached tokens right after reset_prefix_cache() forgot every "
                                     "cached prefix")
        if probe.accepted:
            sut.release(REQUEST_IDS[0])

    def _pressure_at_the_end(self) -> None:
        """At the end of an example, on a SUT off lockstep that declares ``caches_at_allocation`` (vLLM's): with
        every request released, start a fresh prompt of ``PRESSURE_HIT_BLOCKS`` full blocks and one token and release
        it (its full blocks stay cached, free and evictable), fill every other block with a second request, then
        start the first prompt again. Its hit blocks are the only unmapped ones and it needs one more, so it must
        be refused: a runtime that counts a hit block still in the free queue as already held over-accepts here.
        Run after the steps, so it changes none of them."""
        sut, cfg = self.sut, self.config
        if (self.spec != "KVAllocation" or sut is None or getattr(sut, "lockstep", True)
                or not getattr(sut, "caches_at_allocation", False)):
            return
        k, p, n = PRESSURE_HIT_BLOCKS, cfg.block_tokens, cfg.blocks_per_group
        if n < k + 2:
            not_applicable(self, "pressure_at_the_end:pool_too_small")
            return
        for rid in sorted(self.requests):
            sut.release(rid)
            del self.requests[rid]
        first, filler, again = REQUEST_IDS
        prompt = [PRESSURE_TOKENS[0]] * (k * p) + [PRESSURE_TOKENS[1]]
        steps = [(first, prompt), (filler, [PRESSURE_TOKENS[2]] * ((n - k) * p))]
        for i, (rid, tokens) in enumerate(steps):
            result = sut.start(rid, tokens)
            if not result.accepted:
                raise ConformanceFailure(f"start({rid}, {tokens}): {sut.name} refused it ({result.rejection}) with "
                                         f"no block of any group mapped; it needs {-(-len(tokens) // p)} of the {n}")
            if i == 0:
                sut.release(first)
        result = sut.start(again, prompt)
        self._count(f"pressure_at_the_end:{'ok' if result.accepted else result.rejection}")
        if result.accepted:
            raise ConformanceFailure(f"start({again}, {prompt}): {sut.name} accepted it (hit {result.hit_tokens} "
                                     f"tokens) while {filler} maps {n - k} of the {n} blocks of each group: it needs "
                                     f"{k + 1} blocks, its {k} hit blocks (free, evictable) and one more, and only "
                                     f"{k} are unmapped; a hit block still in the free queue must be counted as "
                                     "taken from it")
        sut.release(filler)

    def _fork(self, parent: Request) -> Request | None:
        """Fork ``parent`` into the first free id, after the forks the protocol refuses: onto the parent itself,
        onto another live request, and of an id no live request holds."""
        others = sorted(r for r in self.requests if r != parent.rid)
        free = [r for r in REQUEST_IDS if r not in self.requests]
        self._refuse("fork", parent.rid, parent.rid)
        if others:
            self._refuse("fork", parent.rid, others[0])
        if len(free) > 1:
            self._refuse("fork", free[1], free[0])
        child = self._free_id()
        if not (self._supports("fork") and self._both("fork", parent.rid, child).accepted):
            return None
        self.requests[child] = Request(child, list(parent.tokens), self.config.block_tokens)
        return self.requests[child]

    @precondition(lambda self: self.spec == "CowPublication" and len(self.requests) < len(REQUEST_IDS))
    @rule(target=live, parent=live)
    @counted_rule
    def fork(self, parent: Request) -> Any:
        child = self._fork(parent)
        return multiple() if child is None else child

    @precondition(lambda self: self.spec == "CowPublication" and len(self.requests) < len(REQUEST_IDS)
                  and self._any(Request.growable))
    @rule(target=live, parent=live.filter(Request.growable), token=st.sampled_from(ALPHABET),
          child_appends=st.booleans())
    @counted_rule
    def fork_then_append(self, parent: Request, token: int, child_appends: bool) -> Any:
        """Fork, then append to one side at once: a partial shared tail must be copied on write (0x05C)."""
        child = self._fork(parent)
        if child is None:
            return multiple()
        self._append(child if child_appends else parent, token)
        return child

    def _refuse(self, *call: Any) -> None:
        """An operation the protocol refuses by name, sent alongside a rule (no draw of its own, so the
        machine's draws stay as they were): both sides must refuse it (in lockstep, with the same name where
        the adapter gives one) and every live request's tables must stay as they were."""
        if call[0] not in ("start", "release") and not self._supports(call[0]):
            return
        live = sorted(self.requests)
        before = {r: self._tables(r) for r in live}
        result = self._both(*call)
        if result.accepted:
            raise ConformanceFailure(f"{call[0]}{call[1:]} was accepted; the protocol refuses it (an id no live "
                                     "request holds, a fork onto itself or a live request, a start under a live id, "
                                     "a truncate keeping every token, more tokens than it holds, or a negative count)")
        changed = [r for r in live if self._tables(r) != before[r]]
        if changed:
            raise ConformanceFailure(f"{call[0]}{call[1:]} was refused ({result.rejection}) but changed the tables of "
                                     f"{changed}")
        self._count(f"refused:{call[0]}")

    @precondition(lambda self: self.spec == "KVAllocation" and self._any(Request.truncatable))
    @rule(req=live.filter(Request.truncatable), keep_blocks=st.integers(0, MAX_TOKENS),
          rows_dropped=st.integers(0, MAX_TOKENS))
    @counted_rule
    def truncate(self, req: Request, keep_blocks: int, rows_dropped: int) -> None:
        """Keep a non-empty prefix of any token count: at least one whole block goes (a freed tail block, so a
        delayed writer), and a count inside the last kept block keeps it partial (the spec's Truncate(r, n)
        rounds the kept block count up). The two draws pick, modulo, among the counts the request allows."""
        p = self.config.block_tokens
        keep = p * (1 + keep_blocks % ((len(req.tokens) - 1) // p)) - rows_dropped % p
        if self._supports("truncate"):
            for keep_refused in (len(req.tokens), len(req.tokens) + 1, -1):  # every token, past the end, negative
                self._refuse("truncate", req.rid, keep_refused)
            self._truncate(req, keep)

    def _truncate(self, req: Request, keep: int) -> bool:
        writer_before, sut_tail = self.ref.delayed_writer, self._sut_tail_handle(req.rid)
        ref_tail = self.ref.alloc.request(req.rid).tables[0][-1]
        if not self._both("truncate", req.rid, keep).accepted:
            return False
        self._kept_after_truncate(req.rid, keep)
        freed = self.ref.alloc.pools[0].state_of(ref_tail.block_id) is BlockState.FREE
        if self.ref.delayed_writer != (ref_tail if freed else writer_before):
            raise ConformanceFailure(
                f"truncate({req.rid}, {keep}): the reference's delayed writer holds {self.ref.delayed_writer}; the "
                f"old tail {ref_tail} " + ("went back to the free pool, so the writer holds it (0x05E)" if freed
                                           else "was not freed, so the writer is unchanged (0x05E)"))
        del req.tokens[keep:]
        req.published_blocks = min(req.published_blocks, keep // self.config.block_tokens)
        if keep % self.config.block_tokens:
            self._count("truncate:partial_tail")
        if self.ref.delayed_writer is not None and self.ref.delayed_writer != writer_before:
            self.sut_delayed_writer = sut_tail  # the SUT's handle to the same freed tail block
        return True

    def _kept_after_truncate(self, rid: str, keep: int) -> None:
        """After an accepted truncate the SUT still holds the request, with exactly ``keep`` tokens (a truncate is
        not a release, 0x05E)."""
        if self.sut is None:
            return
        try:
            held = int(self.sut.length(rid))
        except Exception as exc:  # noqa: BLE001 - the adapter lost the request: say so by name
            raise ConformanceFailure(f"truncate({rid}, {keep}) was accepted, then {self.sut.name}.length({rid}) "
                                     f"raised {type(exc).__name__}: {exc}; a truncate keeps the request (0x05E)") from None
        if held != keep:
            raise ConformanceFailure(f"truncate({rid}, {keep}) was accepted but {self.sut.name} reports {held} "
                                     f"tokens for {rid} (0x05E)")

    def _cached_blocks(self, rid: str) -> list[int]:
        """The logical blocks (0-based) of ``rid`` that are published in the reference's prefix cache."""
        rec = self.ref.alloc.requests.get(rid)
        if rec is None:
            return []
        pool = self.ref.alloc.pools[0]
        return [j for j, h in enumerate(rec.tables[0]) if pool.blocks[h.block_id].cache_key is not None
                and (j + 1) * self.config.block_tokens <= rec.context_tokens]

    @precondition(lambda self: self.spec == "KVAllocation" and self.config.block_tokens > 1
                  and self._any(Request.on_stream))
    @rule(target=published, req=live.filter(Request.on_stream), block=st.integers(0, MAX_TOKENS),
          rows_kept=st.integers(0, MAX_TOKENS), token=st.sampled_from((0, *ALPHABET)))
    @counted_rule
    def append_onto_cached_tail(self, req: Request, block: int, rows_kept: int, token: int) -> Any:
        """Publish a request's full blocks (its history follows the stream, so they have cache keys), truncate
        it into one of them, then append: the tail is cached, so the append must copy on write even when no
        other request maps it (0x07D), and the cached block keeps its rows for the next hit. The draws pick,
        modulo, the block and the rows kept. The prefixes newly keyed join ``published``."""
        if not self._supports("cache"):
            return multiple()
        keyed = set(self.ref.keys)
        self._cache(req)
        new = multiple(*sorted(set(self.ref.keys) - keyed))
        cached = self._cached_blocks(req.rid)
        if not cached:
            not_applicable(self, "append_onto_cached_tail:none_cached")
            return new
        p = self.config.block_tokens
        keep = cached[block % len(cached)] * p + 1 + rows_kept % (p - 1)
        if not (self._supports("truncate") and self._truncate(req, keep)):
            return new
        pool, tail = self.ref.alloc.pools[0], self.ref.alloc.request(req.rid).tables[0][-1]
        alone = pool.refcount(tail.block_id) == 1
        result = self._append(req, token or STREAM[keep])
        if not result.accepted:
            return new
        if self.sut is None and not result.copies:
            raise ConformanceFailure(f"append_onto_cached_tail: {req.rid} appended in place onto its cached tail "
                                     f"{tail}: a block published in the prefix cache must be copied on write")
        self._count("append:copy_because_cached" if alone else "append:copy_because_shared")
        return new

    def _sut_tail_handle(self, rid: str) -> tuple[int, int, int] | None:
        """The SUT's handle (group 0, block, generation) to the request's last block, when it has one."""
        if self.sut is None or not callable(getattr(self.sut, "generation", None)):
            return None
        block = int(self.sut.table(rid, 0)[-1])
        return 0, block, int(self.sut.generation(0, block))

    @precondition(lambda self: self.spec == "KVAllocation")
    @rule(target=published, req=live)
    @counted_rule
    def cache(self, req: Request) -> Any:
        """Publish the request's full blocks; the prefixes newly keyed join ``published``."""
        before = set(self.ref.keys)
        if self._supports("cache"):
            self._cache(req)
        return multiple(*sorted(set(self.ref.keys) - before))

    def _cache(self, req: Request) -> None:
        """``cache()`` on both sides; once accepted, the request's full blocks count as published. A SUT that
        declares ``keeps_published_blocks`` may not refuse the cache() of a live request the reference accepted
        (off lockstep too): its promise is that cache() publishes."""
        result = self._both("cache", req.rid)
        if result.accepted:
            req.published_blocks = len(req.tokens) // self.config.block_tokens
            held = self._cached_prefixes()
            p = self.config.block_tokens
            missing = [] if held is None else [j for j in range(1, len(req.tokens) // p + 1)
                                               if tuple(req.tokens[: j * p]) not in held]
            if missing and self.sut is not None:
                raise ConformanceFailure(f"{self.sut.name} accepted cache({req.rid!r}) but its cached_prefixes() lacks "
                                         f"the request's first {missing[0] * p} tokens: cache() publishes every full "
                                         "block of the request")
        elif (self.sut is not None and getattr(self.sut, "keeps_published_blocks", False)
              and self.last_reference_result.accepted):
            raise ConformanceFailure(f"{self.sut.name} refused cache({req.rid!r}) ({result.rejection}) of a live "
                                     "request the reference cached; it declares keeps_published_blocks")

    @precondition(lambda self: self.spec == "KVAllocation")
    @rule(prefix=published)
    @counted_rule
    def evict(self, prefix: tuple[int, ...]) -> None:
        """Evict a published prefix (one evicted or reused since must be refused by name, changing nothing). An
        accepted evict drops the identity even of a block a live request maps (the mapping stays), so no request's
        published chain reaches past it any more (``_mapped_prefix``)."""
        if self._supports("evict"):
            result = self._both("evict", prefix)
            if result.accepted or self.last_reference_result.accepted:
                kept = len(prefix) // self.config.block_tokens - 1
                for req in self.requests.values():
                    if tuple(req.tokens[: len(prefix)]) == tuple(prefix):
                        req.published_blocks = min(req.published_blocks, kept)

    @precondition(lambda self: self.spec == "KVAllocation" and self.ref.delayed_writer is not None)
    @rule()
    @counted_rule
    def stale_writer(self) -> None:
        """The delayed writer presents its old handle (0x05F ABA) to the reference and, with the handle the
        SUT gave the same freed tail block, to the SUT: both must refuse it by name and change nothing,
        whether the block is still free or has been reused (generation advanced) since."""
        stale = self.ref.delayed_writer
        assert stale is not None
        before = self.ref.digest()
        result = self.ref.stale_write(stale.cache_group_id, stale.block_id, stale.generation)
        self._count(f"stale_write:{result.rejection or 'ok'}")
        if result.accepted or result.rejection not in FENCED or self.ref.digest() != before:
            raise ConformanceFailure(f"stale_writer: the reference did not fence {stale}: {result}")
        held, self.sut_delayed_writer = self.sut_delayed_writer, None
        if self.sut is None or not self._supports("generation") or not self._supports("stale_write"):
            return
        if held is None:
            raise ConformanceFailure("stale_writer: the SUT's handle to the freed tail block was not captured")
        g, block, gen = held
        digest: Callable[[], str] = getattr(self.sut, "digest", lambda: "")
        sut_before = digest()
        theirs: OpResult = self.sut.stale_write(g, block, gen)
        if theirs.accepted:
            raise ConformanceFailure(
                f"stale_writer: {self.sut.name} accepted a delayed write through its freed handle (group {g}, "
                f"block {block}, generation {gen}); the block's generation is {self.sut.generation(g, block)} "
                f"now, so a write through the old handle lands in whatever owns the block. The reference "
                f"refused it ({result.rejection}): a block must advance its generation when it leaves the "
                "free pool (0x05F, HandlesCurrent)")
        if theirs.rejection is not None and theirs.rejection not in FENCED:
            raise ConformanceFailure(f"stale_writer: {self.sut.name} refused the stale handle as "
                                     f"{theirs.rejection}, expected one of {', '.join(FENCED)}")
        if digest() != sut_before:
            raise ConformanceFailure(f"stale_writer: {self.sut.name} refused the stale handle but changed its state")

    @precondition(lambda self: self.ref.prefix is not None)
    @rule(published=published)
    @counted_rule
    def lookup_under_foreign_scopes(self, published: tuple[int, ...]) -> None:
        """Look a published prefix (and one more token) up under every scope (0x07B, 0x07F): another salt,
        LoRA or namespace must miss what the home scope hits; a foreign tenant is refused before any probe.
        An adapter answers through its optional ``lookup(prompt, scope)`` (a :class:`LookupScope`)."""
        if not self._supports("lookup"):
            return
        prompt = [*published, STREAM[len(published)]]
        home = self.target.lookup(prompt, SCOPES["home"])
        self._count(f"lookup:home_hit={home.hit_tokens}")
        for name, scope in SCOPES.items():
            if name == "home":
                continue
            probes = self.ref.prefix.probes  # type: ignore[union-attr]
            result = self.target.lookup(prompt, scope)
            if name == "unauthorized":
                if result.rejection != "UNAUTHORIZED_TENANT" or self.ref.prefix.probes != probes:  # type: ignore[union-attr]
                    raise ConformanceFailure(f"lookup_under_foreign_scopes: tenant t1 in namespace home got {result} "
                                             "(must be UNAUTHORIZED_TENANT, before any index probe)")
            elif not result.accepted or result.hit_tokens:
                raise ConformanceFailure(f"lookup_under_foreign_scopes: {prompt} under the {name} scope gave {result}; "
                                         f"the home scope hits {home.hit_tokens} tokens, the {name} scope must miss "
                                         "them all (cache isolation, 0x07B)")

    @rule()
    @counted_rule
    def check_attention(self) -> None:
        if not self.check_kernels:
            return
        tables = {r: self._tables(r) for r in self.histories}
        for r, h in self.histories.items():
            if self.target.length(r) != len(h):
                raise ConformanceFailure(f"{r}: the SUT's length {self.target.length(r)} != history {len(h)}")
        bad = self.device.check_attention(tables, self.histories)
        self._count("attention_checks")
        if bad:
            raise ConformanceFailure("paged decode differs from float64 attention over the logical history: "
                                     + "; ".join(f"{m.request} group {m.group}: max error {m.max_abs_error:.3g} "
                                                 f"({m.detail})" for m in bad))

    # ---- invariants and teardown ------------------------------------------------------------------------
    @invariant()
    def reference_is_consistent(self) -> None:
        """The reference's self-check: refcounts from reachability, queues, partition, digest."""
        self._count("steps")
        self.ref.self_check()

    @invariant()
    def pool_gauges_reconcile(self) -> None:
        """0x0CF: N_pool = free + evictable + live + reserved/copying, and recorded = derived references."""
        from kvexact.reference.rejections import Rejected
        from kvexact.reference.telemetry import allocator_pool_snapshot, reconcile_pool

        for g in range(len(self.ref.alloc.pools)):
            try:
                gauges = reconcile_pool(allocator_pool_snapshot(self.ref.alloc, g))
            except Rejected as exc:
                raise ConformanceFailure(f"group {g}: the pool gauges do not reconcile: {exc}") from None
            if gauges.refcount_delta or gauges.refcount_mismatched_blocks:
                raise ConformanceFailure(f"group {g}: recorded references {gauges.refcount_recorded} != derived "
                                         f"{gauges.refcount_derived} ({gauges.refcount_mismatched_blocks} blocks)")

    @invariant()
    def projection_keeps_the_spec_invariants(self) -> None:
        """The projection of the latest recorded step satisfies every invariant of the spec's cfg (TypeOK
        first)."""
        recorder = self.ref.recorder
        if not self.validate_trace or recorder is None:
            return
        from kvexact.conformance.trace import recorder_model
        from kvexact.spec import spec_dir

        if self._projection_model is None:
            self._projection_model = recorder_model(recorder, spec_constants(self.spec, self.config),
                                                    spec_dir() / f"{self.spec}.tla", spec_dir() / f"{self.spec}.cfg")
        latest = recorder.records[-1] if recorder.records else {"action": "Init", "state": recorder.initial_state}
        broken = self._projection_model.violated_invariant(latest["state"])  # the recorder keeps checker values
        if broken:
            raise ConformanceFailure(f"after {latest['action']} (step {len(recorder.records)}) the projection "
                                     f"breaks the spec's invariant {broken}")
        self._count("projection_checks")

    @invariant()
    def observation_keeps_its_promises(self) -> None:
        """When the target has ``observe()``: its queues hold no mapped block, keep their order and take new
        blocks at their ends only; a COW copy is published only after it was validated
        (:mod:`kvexact.conformance.observation`); a reported usage is the share of blocks live tables map."""
        observe = getattr(self.target, "observe", None)
        if not callable(observe):
            return
        groups = range(self.config.num_groups)
        mapped = {g: self._mapped(g) for g in groups}
        try:
            self.observer.step(observe(), mapped, {g: len(self.target.block_ids(g)) for g in groups})
        except ObservationError as exc:
            raise ConformanceFailure(f"{getattr(self.target, 'name', 'reference')} observe(): {exc}") from None
        self._count("observation_checks")

    @invariant()
    def kv_events_match_the_cache(self) -> None:
        """When the SUT offers ``kv_events()``: its events replay (:mod:`~kvexact.conformance.machines.kv_events`)
        and, when it offers ``cached_prefixes()`` too, leave stored in every group exactly the prefixes it holds."""
        take = getattr(self.sut, "kv_events", None) if self.sut is not None else None
        if not callable(take) or self.kv_mirror is None:
            return
        self.kv_checks += 1
        step = f"step {self.kv_checks - 1} of the example"
        self.kv_mirror.apply(list(take()), step)
        self._count("kv_events:replayed")
        held = self._cached_prefixes()
        if held is not None:
            self.kv_mirror.compare(self.kv_mirror.held_by_every_group(), held, step)

    @invariant()
    def cache_keeps_its_promises(self) -> None:
        """When the SUT offers ``cached_prefixes()`` and declares ``caches_at_allocation``: after every step it holds
        every full block of every live request (each was cached as soon as it was full, and a mapped block is never
        evicted). Not held against ``keeps_published_blocks``: a ``cache()`` of content already published under
        another block may publish nothing new, so which of a live request's blocks stay findable is the runtime's
        choice; its published blocks are held to a floor at each start only (:meth:`_mapped_prefix`)."""
        if self.sut is None or not getattr(self.sut, "caches_at_allocation", False):
            return
        held = self._cached_prefixes()
        if held is None:
            return
        missing = sorted(self._promised_prefixes() - held, key=lambda prefix: (len(prefix), prefix))
        if missing:
            owners = sorted(q.rid for q in self.requests.values() if tuple(q.tokens[: len(missing[0])]) == missing[0])
            raise ConformanceFailure(f"{self.sut.name} declares caches_at_allocation, but its cached_prefixes() lacks "
                                     f"the full block of {owners} holding tokens {list(missing[0])} ({len(missing)} "
                                     "block(s) missing in all): a full block is cached as soon as it is full and "
                                     "stays cached while a live request maps it")
        self._count("promised_blocks_checked")

    @invariant()
    def sut_is_consistent(self) -> None:
        """The system under test's own self-check, and its tables' sizes: every live request maps exactly
        ceil(tokens / P) blocks in each group (0x09B's N_r,blocks; blocks are allocated on demand, none ahead)."""
        if self.sut is None:
            return
        self.sut.self_check()
        p = self.config.block_tokens
        for req in self.requests.values():
            want = -(-len(req.tokens) // p)
            for g in range(self.config.num_groups):
                got = len(self.sut.table(req.rid, g))
                if got != want:
                    raise ConformanceFailure(f"{self.sut.name}: {req.rid} holds {len(req.tokens)} tokens but its "
                                             f"group-{g} table maps {got} blocks; a request maps exactly "
                                             f"ceil({len(req.tokens)} / {p}) = {want} (0x09B)")

    def _model_values(self) -> set[str]:
        return {*REQUEST_IDS, "NoReq", *(READERS if self.spec == "CowPublication" else ())}

    @classmethod
    def rule_names(cls) -> list[str]:
        """The rules this machine's spec can fire (the others' preconditions name the other spec)."""
        return sorted(n for n in dir(cls) if hasattr(getattr(cls, n, None), "hypothesis_stateful_rule")
                      and SPEC_ONLY.get(n, cls.spec) == cls.spec)

    def teardown(self) -> None:
        self.stats["steps"] = self.stats.get("steps", 0) - 1  # the invariant also ran once before any rule
        self.stats["device_writes"] = self.stats.get("device_writes", 0) + self.device.writes
        self.stats["device_copies"] = self.stats.get("device_copies", 0) + self.device.copies
        failing = failure_in_flight()
        first: BaseException | None = failing
        try:
            self.check_attention()
            if failing is None:
                self._reset_at_the_end()
                self._pressure_at_the_end()
        except BaseException as exc:  # still validate (and write) the trace, then report the first failure
            first = first or exc
        finish_trace(self.adapter_trace, first is not None, self._observe)
        try:
            if self.validate_trace and self.ref.recorder is not None:
                self._validate_trace()
        except BaseException as exc:
            first = first or exc
        super().teardown()
        if first is not None and first is not failing:
            raise first

    def _validate_trace(self) -> None:
        from kvexact.conformance.trace import trace_from_recorder, validate_recorded, write_itf, write_ndjson
        from kvexact.spec import spec_dir

        recorder = self.ref.recorder
        assert recorder is not None
        constants = spec_constants(self.spec, self.config)
        # every state's invariants were checked after its step (projection_keeps_the_spec_invariants): only
        # the steps remain; the records are checked as the recorder keeps them, ITF JSON only for a file
        result = validate_recorded(recorder, constants, spec_dir() / f"{self.spec}.tla",
                                   spec_dir() / f"{self.spec}.cfg", invariants=False)
        self.stats["trace_steps"] = self.stats.get("trace_steps", 0) + result.steps
        out = os.environ.get("KVEXACT_TRACE_DIR")
        if out and (not result.ok or os.environ.get("KVEXACT_TRACE_ALWAYS") == "1"):
            trace = trace_from_recorder(recorder, constants, self._model_values())
            Path(out).mkdir(parents=True, exist_ok=True)
            write_itf(trace, Path(out) / f"{self.spec}.itf.json")
            write_ndjson(trace, Path(out) / f"{self.spec}.ndjson")
        if not result.ok:
            raise ConformanceFailure(result.summary())


def machine_class(spec: str = "KVAllocation", sut_factory: Callable[[AdapterConfig], Any] | None = None,
                  check_kernels: bool = True, validate_trace: bool = True,
                  config: AdapterConfig | None = None) -> type[AllocatorMachine]:
    """A configured subclass of :class:`AllocatorMachine` (what ``conform``, ``fuzz`` and the gate run)."""
    return type(f"{spec}Machine", (AllocatorMachine,), {
        "spec": spec, "sut_factory": staticmethod(sut_factory) if sut_factory else None,
        "check_kernels": check_kernels, "validate_trace": validate_trace,
        "config": config or MACHINE_CONFIG, "stats": {},
    })
