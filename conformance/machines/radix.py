"""The state machine of the radix index, with shared-prefix attention.

:class:`RadixMachine` drives the normative radix index (``reference/radix.py``) the way a runtime does:
admit (match and lock, reserve the missing slots, write their rows), decode, finish (cache the path,
duplicates freed), cancel and evict, mirrored onto a one-token-per-slot K/V pool; every slot that
becomes free is poisoned with NaN, so a request reading an evicted or released slot fails. Attention is
checked for every live request through paged decode and, for requests sharing a slot prefix, through
``shared_prefix_attention`` (Hydragen), both against float64 attention over the request's tokens.

Without an adapter a run may fix the index's page size (``page_size`` on the class; SGLang runs pages above
one token): matches, splits and cached paths are then whole pages and a request's unaligned tail is
released when it finishes; every step still passes the index's own checks (edges of whole pages filed
under their first page, locks, the pool partition). A prefix-index adapter is driven at the same page size
(``IndexConfig.page_size``; slot ids then start at the page size, page 0 being padding, as SGLang's paged pool
numbers them): it takes whole pages, so the free slots compared are those of pages no live request touches, and
a refusal must find the reference short of whole free pages.

With a prefix-index adapter (``sut_factory``, see :class:`~kvexact.reference.index.PrefixIndex`)
the system under test makes every choice (slots, eviction victims) and the normative index follows it in
lockstep and judges it: matched lengths and prefix slots must agree, a refusal must be one the reference
would make (the pool really short), every victim must be an unlocked leaf of the reference's tree, an
eviction may stop short only when no unlocked leaf is left, and the free sets must be equal after every
step. The device pool is written through the adapter's rows, so a wrong slot also shows up as wrong numbers.
With ``KVEXACT_TRACE_DIR`` set, a failing example also leaves ``Radix.adapter.itf.json``: the adapter's own
calls, its answers, rows and free slots after each, beside the normative index's answer and free slots
(:mod:`kvexact.conformance.adapter_trace`).
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

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

from kvexact.conformance.adapter_trace import INDEX_FIELDS, finish_trace, start_trace
from kvexact.conformance.machines import ConformanceFailure, counted_rule, failure_in_flight
from kvexact.conformance.machines.kv_events import EventMirror, page_prefixes
from kvexact.conformance.machines.radix_trace import RadixTraceRecorder
from kvexact.conformance.mirror import DevicePool, expected_attention, max_error, query_row
from kvexact.kernels import device as policy
from kvexact.reference import radix
from kvexact.reference.index import IndexConfig, check_index
from kvexact.reference.rejections import Rejected

POOL_SLOTS = 16
FIRST_SLOT = 1  # slot ids 1..POOL_SLOTS, as SGLang numbers them (its slot 0 is padding)
MAX_LIVE = 4
SLRU_PROTECTED_AT = 2  # the frequency from which an ``slru`` index keeps a leaf in its protected segment (SGLang's)
PROBES = ("whole", "one_short", "last_changed", "inside_edge")  # how a probe leaves a cached path
ALPHABET = (1, 2, 3)
TOLERANCE = 2e-4


class RadixMachine(RuleBasedStateMachine):
    requests = Bundle("requests")  # ids of live requests, from their admit to their finish or cancel
    stats: ClassVar[dict[str, int]] = {}
    sut_factory: ClassVar[Callable[[IndexConfig], Any] | None] = None
    check_kernels: ClassVar[bool] = True  # False: no device pool, no attention checks (ledgers only)
    page_size: ClassVar[int] = 1  # the normative index's (and the adapter's) page size
    validate_trace: ClassVar[bool] = True  # every reference step validated against spec/RadixIndex.tla

    def __init__(self) -> None:
        super().__init__()
        page = self.page
        first = FIRST_SLOT if self.sut_factory is None or page == 1 else page  # a paged adapter's page 0 is padding
        self.state = radix.RadixState.empty(POOL_SLOTS, first_slot_id=first, page_size=page)
        self.trace = RadixTraceRecorder(self.state, MAX_LIVE, POOL_SLOTS) if self.validate_trace else None
        self.sut: Any = None
        if self.sut_factory is not None:
            self.sut = type(self).sut_factory(IndexConfig(POOL_SLOTS, page_size=page))  # type: ignore[misc]
            check_index(self.sut)
        self.adapter_trace = start_trace("Radix", self.sut, INDEX_FIELDS)  # the adapter's own calls
        self._admitting: str | None = None  # a request the adapter admitted that is not live yet
        if self.check_kernels:  # one token per slot; slot ids are block ids (slot 0 is padding)
            self.device = DevicePool([range(first + POOL_SLOTS)], block_tokens=1)
        self.live: dict[str, tuple[list[int], list[int]]] = {}  # request -> (tokens, slots)
        self.next_id = 0
        self.probes = 0  # probes sent after finishes (their variant and cut rotate with it)
        self.finishes = 0  # finishes so far (every other one finishes a twin too)
        # where the SUT's record of use may differ from the reference's (slot -> the reference clock of the op):
        # the SUT may have used the slot later (a refused admission's lookup, a split's lower half) or earlier
        # (a split the reference made only to follow the SUT's own)
        self.maybe_used_later: dict[int, int] = {}
        self.maybe_used_earlier: dict[int, int] = {}
        self.kv_mirror: EventMirror | None = None  # the SUT's KV events replayed, when it offers kv_events()
        self.kv_checks = 0  # invariant checks so far: the step after which events are replayed
        # slot -> finished requests whose cached path covered it since it was last cached (a leaf's frequency for
        # the lfu and slru victim orders: SGLang's hit_count, equal along an edge)
        self.hits: dict[int, int] = {}
        self._count("examples")

    @property
    def page(self) -> int:
        return self.page_size

    def _free_pages_slots(self) -> list[int]:
        """The reference's free slots in pages no live request touches (at page size 1, every free slot): what a
        paged runtime counts as free, the unused end of a request's last page being the request's."""
        free = self.state.free_slot_ids
        if self.page == 1:
            return sorted(free)
        page = self.page
        return sorted(s for s in free if all(s // page * page + i in free for i in range(page)))

    def _count(self, name: str, n: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    def _apply(self, op: Any, *args: Any) -> Any:
        """Apply a radix transition (recorded for step validation); poison every slot it returned to the
        free set."""
        before = self.state
        free_before = set(self.state.free_slot_ids)
        self.state, receipt = op(self.state, *args)
        self._mark(self.maybe_used_later, _split_lower_halves(before, self.state), self.state.clock)
        if self.trace is not None:
            self.trace.step(op.__name__, before, self.state, args, receipt)
        newly_free = sorted(set(self.state.free_slot_ids) - free_before)
        for slot in newly_free:
            self.hits.pop(slot, None)
        if newly_free:
            self._write(newly_free, None)
        return receipt

    def _follow(self, what: str, op: Any, *args: Any) -> Any:
        """Replay the system under test's step on the reference; a refusal there is the SUT's bug."""
        try:
            return self._apply(op, *args)
        except Rejected as exc:
            self._note(f"refused {what}: {exc.reason.name}")
            raise ConformanceFailure(f"{self.sut.name}: {what} is not a legal step of the normative index: "
                                     f"{exc.reason.name} ({exc})") from None

    def _write(self, slots: list[int], prefixes: list[list[int]] | None) -> None:
        """Write the rows of ``prefixes`` (None: NaN poison) into ``slots`` through the mirror."""
        if not self.check_kernels:
            return
        if prefixes is None:
            self.device.poison(0, slots)
            return
        for slot, prefix in zip(slots, prefixes, strict=True):
            self.device.write(0, slot, 0, prefix)

    def _free_slots(self, n: int) -> list[int] | None:
        """The n lowest free slots (evicting unlocked leaves when short), or None when the pool cannot."""
        short = n - len(self.state.free_slot_ids)
        if short > 0:
            receipt = self._apply(radix.evict, short)
            self._count("evicted_slots", receipt.released_tokens)
        if len(self.state.free_slot_ids) < n:
            return None
        return sorted(self.state.free_slot_ids)[:n]

    # ---- the system under test's choices, judged by the reference ---------------------------------
    def _call(self, op: str, *args: Any) -> Any:
        """Call the SUT's ``op`` and record the call, its answer and (before it) the previous call's state."""
        self._observe()
        answer = getattr(self.sut, op)(*args)
        if op == "evict":  # read once here and once by the machine
            answer = [list(run) for run in answer]
        if self.adapter_trace is not None:
            self.adapter_trace.record(op, args, answer=_answer_text(op, answer))
        return answer

    def _note(self, reference_answer: str) -> None:
        if self.adapter_trace is not None:
            self.adapter_trace.note(reference_answer=reference_answer)

    def _observe(self) -> None:
        """The adapter's rows and free slots, and the reference's free slots, after the latest call."""
        if self.adapter_trace is None:
            return
        held = sorted({*self.live, *([self._admitting] if self._admitting else [])})
        self.adapter_trace.observe(rows={r: [int(s) for s in self.sut.slot_ids(r)] for r in held},
                                   free_slots=sorted(int(s) for s in self.sut.free_slot_ids()),
                                   reference_free_slots=sorted(self.state.free_slot_ids))

    def _sut_evict(self, num_tokens: int) -> None:
        """Let the SUT evict; replay each victim on the reference (which checks it is an unlocked leaf)."""
        released = 0
        for run in self._call("evict", num_tokens):
            run = tuple(int(s) for s in run)
            if released >= num_tokens:
                raise ConformanceFailure(f"{self.sut.name} evict({num_tokens}) went on to evict slots {list(run)} after "
                                         f"{released} tokens were freed: eviction frees leaves only until the tokens "
                                         "asked for are freed")
            node = self._node_holding(run)
            if node is None:
                raise ConformanceFailure(f"{self.sut.name} evicted slots {list(run)}: no node of the reference's "
                                         "tree ends with exactly these")
            self._check_victim_order(node)
            self._follow(f"evicting slots {list(run)}", radix.evict_node, node)
            released += len(run)
        self._count("evicted_slots", released)
        if released < num_tokens and _unlocked_leaves(self.state):
            self._note(f"unlocked leaves left: {_unlocked_leaves(self.state)}")
            raise ConformanceFailure(f"{self.sut.name} evicted {released} of {num_tokens} tokens while unlocked "
                                     f"leaves were left: {_unlocked_leaves(self.state)}")

    def _mark(self, marks: dict[int, int], slots: set[int], clock: int) -> None:
        for slot in slots:
            marks[slot] = clock

    def _frequency_rank(self, order: str, node_id: int) -> int:
        """The first part of a victim's rank under ``lfu`` (its frequency) or ``slru`` (1 in the protected segment,
        a frequency of ``SLRU_PROTECTED_AT`` or more, else 0); the frequency is that of the edge's last slot."""
        hits = self.hits.get(self.state.nodes[node_id].slot_ids[-1], 0)
        return hits if order == "lfu" else int(hits >= SLRU_PROTECTED_AT)

    def _check_victim_order(self, victim: int) -> None:
        """Hold a victim to the order the adapter declares (``eviction_order``; none: any unlocked leaf). Under
        ``lfu`` and ``slru`` no unlocked leaf may rank lower (fewer finished requests cached through it since it was
        cached), and among the leaves of the victim's rank it must be least recently used; under ``lru`` it must be
        least recently used among all unlocked leaves."""
        order = getattr(self.sut, "eviction_order", None)
        if order is None:
            return
        among = None
        if order in ("lfu", "slru"):
            nodes = self.state.nodes
            rank = self._frequency_rank(order, victim)
            lower = sorted((self._frequency_rank(order, u), u) for u in _unlocked_leaves(self.state)
                           if u != victim and self._frequency_rank(order, u) < rank)
            if lower:
                low, leaf = lower[0]
                hits = self.hits.get
                raise self._out_of_order(victim, leaf, "lowest-ranked",
                                         f"rank {rank}: {hits(nodes[victim].slot_ids[-1], 0)} finished requests "
                                         "cached through it", f"ranks {low} ({hits(nodes[leaf].slot_ids[-1], 0)} "
                                         "finished requests)")
            self._count(f"{order}:victim_rank_checked")
            among = {u for u in _unlocked_leaves(self.state) if self._frequency_rank(order, u) == rank}
        self._check_least_recently_used(victim, among)

    def _check_least_recently_used(self, victim: int, among: set[int] | None = None) -> None:
        """The victim is the unlocked leaf used least recently (0x08E), of all unlocked leaves or of ``among``: no
        other such leaf may have been used strictly before it. Use is a lookup or an insert that walks into the edge,
        as the reference's clock records it. Where the two sides may have recorded a use differently
        (``maybe_used_later``, ``maybe_used_earlier``), the node is not compared; ties may go either way."""
        nodes = self.state.nodes
        used = nodes[victim].last_access
        if _marked(self.maybe_used_earlier, nodes[victim], at_or_after=True):
            self._count("lru:victim_not_compared")
            return
        older = sorted((nodes[u].last_access, u) for u in _unlocked_leaves(self.state)
                       if u != victim and nodes[u].last_access < used and (among is None or u in among)
                       and not _marked(self.maybe_used_later, nodes[u], at_or_after=False))
        if older:
            time, leaf = older[0]
            raise self._out_of_order(victim, leaf, "least recently used", f"last used at step {used}",
                                     f"was last used earlier (step {time})")
        self._count("lru:victim_checked")

    def _out_of_order(self, victim: int, leaf: int, which: str, about_victim: str, about_leaf: str) -> ConformanceFailure:
        """The failure of a victim that its declared order ranks after the unlocked ``leaf`` (noted in the trace)."""
        nodes = self.state.nodes
        self._note(f"{which} unlocked leaf: slots {list(nodes[leaf].slot_ids)}")
        return ConformanceFailure(
            f"{self.sut.name} declares {str(self.sut.eviction_order).upper()} eviction but evicted slots "
            f"{list(nodes[victim].slot_ids)} ({about_victim}) while the unlocked leaf at slots "
            f"{list(nodes[leaf].slot_ids)} {about_leaf} (0x08E)")

    def _node_holding(self, run: tuple[int, ...]) -> int | None:
        """The reference node whose slots are ``run``. Where the SUT split an edge the reference kept
        whole (SGLang splits at the prompt boundary when it re-inserts a finished prompt), the reference
        makes the same split with a lookup that ends there: a split changes no cached content."""
        for n in self.state.nodes.values():
            if n.node_id == radix.ROOT or n.slot_ids[-len(run):] != run:
                continue
            if len(n.slot_ids) > len(run):
                keep = len(n.slot_ids) - len(run)
                self._apply(radix.match, self.state.path_tokens(n.parent_id) + n.token_ids[:keep])
                self._mark(self.maybe_used_earlier, _touched(self.state), self.state.clock)
                self._count("edges_split_to_follow")
                return self._node_holding(run)
            return n.node_id
        return None

    def _agree_short(self, what: str, need: int) -> None:
        """The SUT refused for lack of slots: the reference must be short of ``need`` free slots too (in whole
        free pages, at a page size above one)."""
        free = len(self._free_pages_slots())
        need = -(-need // self.page) * self.page
        self._note(f"{free} free for {need} needed")
        if free >= need:
            raise ConformanceFailure(f"{self.sut.name} refused {what} for lack of slots, but the reference "
                                     f"has {free} free for the {need} needed")

    def _admission_need(self, prompt: list[int]) -> int:
        """Slots a refused admission needed. The reference's match is looked at, not committed: a match that
        ends inside an edge splits it, and the SUT's refused admission may have left its edge whole."""
        return len(prompt) - radix.match(self.state, prompt)[1].matched_tokens

    def _sut_admit(self, rid: str, prompt: list[int]) -> tuple[int, list[int]] | None:
        """(matched tokens, row) of an admission the SUT made (evicting once when short), or None."""
        matched = self._call("admit", rid, prompt)
        if matched is None:
            self._agree_short(f"admission of {rid}", self._admission_need(prompt))
            looked, _ = radix.match(self.state, prompt)  # the SUT may have looked the prompt up before refusing
            self._mark(self.maybe_used_later, _touched(looked) | _split_lower_halves(self.state, looked), looked.clock)
            self._sut_evict(len(prompt))
            matched = self._call("admit", rid, prompt)
            if matched is None:
                self._agree_short(f"admission of {rid}", self._admission_need(prompt))
                return None
        self._admitting = rid
        receipt = self._follow(f"admitting {rid}", radix.match_and_lock, rid, 0, prompt)
        self._note(f"matched {receipt.matched_tokens}")
        row = [int(s) for s in self.sut.slot_ids(rid)]
        if (matched, tuple(row[:matched])) != (receipt.matched_tokens, tuple(receipt.prefix_slot_ids)):
            raise ConformanceFailure(f"{self.sut.name} matched {matched} tokens at slots {row[:matched]}; the "
                                     f"reference matched {receipt.matched_tokens} at {list(receipt.prefix_slot_ids)}")
        if len(row) != len(prompt):
            raise ConformanceFailure(f"{self.sut.name}: row of {rid} has {len(row)} slots for {len(prompt)} tokens")
        self._check_logits_cap(rid, matched, len(prompt))
        self._follow(f"reserving slots {row[matched:]} for {rid}", radix.reserve, rid, row[matched:])
        return matched, row

    def _check_logits_cap(self, rid: str, matched: int, prompt_tokens: int) -> None:
        """When the SUT offers ``computed_prefix_tokens``: an admitted request takes ``min(matched, prompt - 1)``
        prompt tokens from the cache, so that its last prompt token is computed for the next token's logits (0x07A's
        cap); a runtime may round that down to a whole page, nothing else."""
        computed = getattr(self.sut, "computed_prefix_tokens", None)
        if computed is None:
            return
        got = int(computed(rid))
        cap = min(matched, prompt_tokens - 1)
        whole = cap - cap % self.page
        if got not in (cap, whole):
            rounded = f" (or {whole}, in whole pages)" if whole != cap else ""
            raise ConformanceFailure(
                f"{self.sut.name} takes {got} prompt tokens of {rid} from the cache; with {matched} of its "
                f"{prompt_tokens} prompt tokens matched it must take {cap}{rounded}: the last prompt token is "
                "computed for its logits (0x07A)")
        self._count("logits_cap:checked")

    def _sut_extend(self, rid: str, token: int) -> int | None:
        """The slot the SUT gave one decoded token of ``rid`` (evicting once when short), or None."""
        _tokens, slots = self.live[rid]
        if not self._call("extend", rid, token):
            if len(slots) % self.page:
                raise ConformanceFailure(f"{self.sut.name} refused a decode slot for {rid} with room left in "
                                         f"its last page (row {slots})")
            self._agree_short(f"a decode slot for {rid}", 1)
            self._sut_evict(1)
            if not self._call("extend", rid, token):
                self._agree_short(f"a decode slot for {rid}", 1)
                return None
        row = [int(s) for s in self.sut.slot_ids(rid)]
        if row[:-1] != slots or len(row) != len(slots) + 1:
            raise ConformanceFailure(f"{self.sut.name}: decoding one token of {rid} turned row {slots} into {row}")
        self._follow(f"decoding {token} of {rid} into slot {row[-1]}", radix.decode, rid, token, row[-1])
        return row[-1]

    # ---- rules ------------------------------------------------------------------------------------
    @precondition(lambda self: len(self.live) < MAX_LIVE)
    @rule(target=requests, prompt=st.one_of(st.integers(1, 6).map(lambda n: [ALPHABET[i % 3] for i in range(n)]),
                           st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=6)))
    @counted_rule
    def admit(self, prompt: list[int]) -> Any:
        """Match and lock the prompt's cached prefix, reserve and write the rest; the admitted request's id
        joins ``requests`` (none when the pool cannot hold it)."""
        rid = self.admit_prompt(prompt)
        return multiple() if rid is None else rid

    def _probe(self, path: list[int]) -> None:
        """Admit, then cancel, a prompt that ends where a walk that matches too far would go wrong (0x08B), made
        from a ``path`` just cached: the path itself (the logits cap stops the match one token before its end),
        the path one token short, its last token changed, or the path cut inside and continued with a token it
        does not hold. The variant and the cut rotate with each probe, so no draw is added to the machine's.
        The match length and slots are compared as in ``admit``, so an over-matching walk is forced out."""
        variant = PROBES[self.probes % len(PROBES)]
        cut = 1 + (self.probes // len(PROBES)) % max(1, len(path) - 1)
        self.probes += 1
        if variant == "whole":
            prompt = path
        elif variant == "one_short":
            prompt = path[:-1]
        else:
            keep = len(path) - 1 if variant == "last_changed" or len(path) < 2 else cut
            prompt = path[:keep] + [next(a for a in ALPHABET if a != path[keep])]
        if not prompt or len(self.live) >= MAX_LIVE:
            self._count(f"probe:{variant}:skipped")
            return
        rid = self.admit_prompt(prompt)
        self._count(f"probe:{variant}:{'admitted' if rid is not None else 'pool_exhausted'}")
        if rid is not None:
            self.cancel_request(rid)

    def _frequency_probe(self, path: list[int]) -> None:
        """Under a declared ``lfu`` or ``slru`` order, after a finish: send the finished ``path`` again as a new
        request and finish it (the path is now cached through twice), cache a one-page prompt that starts no cached
        path (cached through once, and the newest leaf), then evict one token (a leaf). Least recently used would take an
        older leaf; a frequency ranking must take a leaf cached through once, so a runtime that counts its hits
        wrongly, or ranks by recency alone, is forced out. Nothing is drawn, so the machine's draws are
        unchanged."""
        if getattr(self.sut, "eviction_order", None) not in ("lfu", "slru") or len(self.live) >= MAX_LIVE:
            return
        again = self.admit_prompt(path)
        if again is None:
            self._count("frequency_probe:pool_exhausted")
            return
        self.finish_request(again)
        starts = {self.state.nodes[c].token_ids[: self.page] for c in self.state.nodes[radix.ROOT].children.values()}
        prompt = next((list(p) for p in itertools.product(ALPHABET, repeat=self.page) if p not in starts), None)
        if prompt is None:
            self._count("frequency_probe:skipped")
            return
        rid = self.admit_prompt(prompt)
        if rid is None:
            self._count("frequency_probe:pool_exhausted")
            return
        self.finish_request(rid)
        self._sut_evict(1)  # one token: a whole leaf goes, so an eviction that does not stop once freed shows too
        self._count("frequency_probe:evicted")

    def admit_prompt(self, prompt: list[int]) -> str | None:
        """Admit ``prompt`` as a new request on the SUT (compared with the reference) or the reference: its id,
        or None when the pool cannot hold it."""
        rid = f"q{self.next_id}"
        self.next_id += 1
        if self.sut is not None:
            admitted = self._sut_admit(rid, prompt)
            if admitted is None:
                self._count("admit:pool_exhausted")
                return None
            matched, row = admitted
            if row[matched:]:
                self._write(row[matched:], [prompt[: i + 1] for i in range(matched, len(prompt))])
            self.live[rid] = (list(prompt), row)
            self._admitting = None
            self._count(f"admit:hit={matched}")
            return rid
        nodes_before = len(self.state.nodes)
        receipt = self._apply(radix.match_and_lock, rid, 0, prompt)
        if len(self.state.nodes) > nodes_before:  # the match ended inside an edge, which it split (0x08B)
            self._count("admit:split_inside_edge")
        prefix = list(receipt.prefix_slot_ids)
        if receipt.matched_tokens != len(prefix) or receipt.matched_tokens > len(prompt):
            raise ConformanceFailure(f"handoff receipt: {receipt.matched_tokens} tokens but slots {prefix}")
        new = self._free_slots(len(prompt) - receipt.matched_tokens)
        if new is None:
            self._apply(radix.release_request, rid)
            self._count("admit:pool_exhausted")
            return None
        self._apply(radix.reserve, rid, new)
        if new:
            self._write(new, [prompt[: i + 1] for i in range(receipt.matched_tokens, len(prompt))])
        self.live[rid] = (list(prompt), prefix + new)
        self._count(f"admit:hit={receipt.matched_tokens}")
        if receipt.matched_tokens and self.state.page_size > 1:
            self._count("admit:paged_hit")
        return rid

    @precondition(lambda self: bool(self.live))
    @rule(rid=requests, token=st.sampled_from(ALPHABET))
    @counted_rule
    def decode(self, rid: str, token: int) -> None:
        tokens, slots = self.live[rid]
        if self.sut is not None:
            slot = self._sut_extend(rid, token)
            new = None if slot is None else [slot]
        else:
            new = self._free_slots(1)
            if new is not None:
                self._apply(radix.decode, rid, token, new[0])
        if new is None:
            self._count("decode:pool_exhausted")
            return
        tokens.append(token)
        slots.extend(new)
        self._write(new, [list(tokens)])
        self._count("decode:ok")

    @precondition(lambda self: bool(self.live))
    @rule(rid=consumes(requests))
    @counted_rule
    def finish(self, rid: str) -> None:
        """Finish the request (its path is cached), then probe the path (``_probe``). Every other finish first
        admits a twin of the request (a copy of its tokens, as when two users send one prompt at once) and
        finishes it right after: the twin computed again the tokens the request had not cached, so they are
        duplicates when it finishes, and its finish must free every one of them (the free sets are compared
        after it). The twins rotate with the finishes, so no draw is added to the machine's."""
        tokens = list(self.live[rid][0])
        twin = None
        if self.finishes % 2 and len(self.live) < MAX_LIVE:
            twin = self.admit_prompt(tokens)
            self._count(f"twin:{'admitted' if twin is not None else 'pool_exhausted'}")
        self.finishes += 1
        self.finish_request(rid)
        if twin is not None:
            self.finish_request(twin)
        self._probe(tokens)
        self._frequency_probe(tokens)

    def finish_request(self, rid: str) -> None:
        """Cache the live request's path (duplicates freed, lock dropped), on the SUT and the reference."""
        self._observe()  # the previous call's state, while rid still counts as live
        tokens, slots = self.live.pop(rid)
        if self.sut is not None:
            self._call("finish", rid)
            receipt = self._follow(f"finishing {rid}", radix.cache_finished, rid, tokens, slots)
        else:
            receipt = self._apply(radix.cache_finished, rid, tokens, slots)
        self._count("finish:duplicates_released", len(receipt.duplicate_slot_ids))
        for slot in _cached_path_slots(self.state, tokens):
            self.hits[slot] = self.hits.get(slot, 0) + 1

    @precondition(lambda self: bool(self.live))
    @rule(rid=consumes(requests))
    @counted_rule
    def cancel(self, rid: str) -> None:
        self.cancel_request(rid)

    def cancel_request(self, rid: str) -> None:
        """Drop the live request without caching: private slots freed, lock dropped."""
        self._observe()
        self.live.pop(rid)
        if self.sut is not None:
            self._call("cancel", rid)
            self._follow(f"cancelling {rid}", radix.release_request, rid)
        else:
            self._apply(radix.release_request, rid)

    @rule(tokens=st.integers(1, 6))
    @counted_rule
    def evict(self, tokens: int) -> None:
        if self.sut is not None:
            self._sut_evict(tokens)
            return
        receipt = self._apply(radix.evict, tokens)
        self._count("evicted_slots", receipt.released_tokens)

    @rule()
    @counted_rule
    def lock_underflow_is_rejected(self) -> None:
        """An unlock below zero is a named rejection that changes nothing (0x08I)."""
        before = radix.state_sha256(self.state)
        try:
            radix.unlock(self.state, radix.ROOT)
        except Rejected as exc:
            if exc.reason is not radix.RadixRejection.LOCK_UNDERFLOW and self.state.nodes[radix.ROOT].lock_ref == 0:
                raise ConformanceFailure(f"root unlock rejected as {exc.reason}") from None
        if radix.state_sha256(self.state) != before:
            raise ConformanceFailure("a rejected unlock changed the tree")

    @rule()
    @counted_rule
    def check_attention(self) -> None:
        """Paged decode over every live row, and shared-prefix attention over the rows' common slot prefix,
        against float64 attention over each request's tokens."""
        import torch

        from kvexact.kernels.shared import shared_prefix_attention

        if not self.live or not self.check_kernels:
            return
        names = sorted(self.live)
        bad = self.device.check_attention({r: [self.live[r][1]] for r in names}, {r: self.live[r][0] for r in names})
        if bad:
            m = bad[0]
            raise ConformanceFailure(f"paged attention of {m.request} differs from float64 (max error "
                                     f"{m.max_abs_error:.3g}); tokens {self.live[m.request][0]}, slots "
                                     f"{self.live[m.request][1]}")
        common = _common_prefix([self.live[r][1] for r in names])
        if len(names) >= 2 and common:
            width = max(len(self.live[r][1]) for r in names)
            lens = policy.tensor([len(self.live[r][0]) for r in names], torch.int32)
            q = torch.stack([query_row(r, len(self.live[r][0])) for r in names])
            suffix = policy.zeros((len(names), max(1, width - common)), torch.int32)
            for i, r in enumerate(names):
                rest = self.live[r][1][common:]
                if rest:
                    suffix[i, : len(rest)] = policy.tensor(rest, torch.int32)
            out = shared_prefix_attention(q, self.device.k[0], self.device.v[0],
                                          policy.tensor(self.live[names[0]][1][:common], torch.int32),
                                          common, suffix, lens - common)
            for i, r in enumerate(names):
                err = max_error(out[i], expected_attention(q[i], self.live[r][0]))
                if not math.isfinite(err) or err > TOLERANCE:
                    raise ConformanceFailure(f"shared-prefix attention of {r} differs from float64 (max error "
                                             f"{err:.3g}); tokens {self.live[r][0]}, slots {self.live[r][1]}")
            self._count("shared_prefix_checks")
        self._count("attention_checks")

    @invariant()
    def index_partition_holds(self) -> None:
        """The reference index's own checks, and tree + private + free = pool (0x08)."""
        self._count("steps")
        report = radix.check_state(self.state)  # raises, by name, on any broken invariant
        if report.tree_owned_slots + report.private_slots + report.free_slots != report.pool_slots:
            raise ConformanceFailure(f"tree + private + free != pool: {report}")

    @invariant()
    def sut_free_slots_match(self) -> None:
        """The system under test frees exactly the slots the reference frees."""
        if self.sut is None:
            return
        theirs = sorted(int(s) for s in self.sut.free_slot_ids())
        if theirs != self._free_pages_slots():
            raise ConformanceFailure(f"{self.sut.name} free slots {theirs} != the reference's "
                                     f"{self._free_pages_slots()}")
        sizes = getattr(self.sut, "cache_sizes", None)  # optional: the tree's evictable and protected tokens
        if sizes is not None:
            got, expected = tuple(int(n) for n in sizes()), radix.cache_sizes(self.state)
            if got != expected:
                raise ConformanceFailure(f"{self.sut.name} cache_sizes() (evictable, protected) = {got}; the "
                                         f"reference's tree holds {expected} (I2, 0x08D)")

    @invariant()
    def kv_events_match_the_tree(self) -> None:
        """When the system under test offers ``kv_events()``: its events replay
        (:mod:`~kvexact.conformance.machines.kv_events`) and leave stored exactly the whole-page prefixes of the
        paths the reference's tree caches (in lockstep, the paths the system under test caches)."""
        take = getattr(self.sut, "kv_events", None) if self.sut is not None else None
        if not callable(take):
            return
        if self.kv_mirror is None:
            self.kv_mirror = EventMirror(1, self.sut.name)  # one pool: SGLang's events name no group
        self.kv_checks += 1
        step = f"step {self.kv_checks - 1} of the example"
        self.kv_mirror.apply(list(take()), step)
        self._count("kv_events:replayed")
        paths = [self.state.path_tokens(n) for n in self.state.nodes if n != radix.ROOT]
        self.kv_mirror.compare(self.kv_mirror.prefixes(0), page_prefixes(paths, self.page), step)

    @invariant()
    def sut_rows_match(self) -> None:
        """Every live request's row in the system under test is the one the machine follows."""
        if self.sut is None:
            return
        for rid, (_, slots) in self.live.items():
            row = [int(s) for s in self.sut.slot_ids(rid)]
            if row != slots:
                raise ConformanceFailure(f"{self.sut.name}: row of {rid} is {row}, expected {slots}")

    @invariant()
    def sut_is_consistent(self) -> None:
        """The system under test's own self-check."""
        if self.sut is not None:
            self.sut.self_check()

    def teardown(self) -> None:
        failed = failure_in_flight() is not None
        try:
            self.check_attention()
        except BaseException:
            failed = True
            raise
        finally:
            finish_trace(self.adapter_trace, failed, self._observe)
            self.validate_steps()

    def validate_steps(self) -> None:
        """Every reference step so far is a step of its RadixIndex action (KVEXACT_TRACE_DIR: the trace is
        written there when it fails)."""
        if self.trace is None:
            return
        result = self.trace.validate()
        self._count("trace_steps", result.steps)
        if not result.ok:
            out = os.environ.get("KVEXACT_TRACE_DIR")
            if out:
                self.trace.validate(Path(out))
            raise ConformanceFailure(f"RadixIndex: {result.summary()}")


def _unlocked_leaves(state: radix.RadixState) -> list[int]:
    return [n.node_id for n in state.nodes.values()
            if n.node_id != radix.ROOT and n.lock_ref == 0 and not n.children]


def _cached_path_slots(state: radix.RadixState, tokens: list[int]) -> list[int]:
    """The slots of the cached path that holds ``tokens``' whole pages (a finished request's, after its finish)."""
    want = tuple(tokens[: state.aligned(len(tokens))])
    node, offset, out = radix.ROOT, 0, []
    while offset < len(want):
        child = next((c for c in state.nodes[node].children.values()
                      if state.nodes[c].token_ids[: len(want) - offset] == want[offset:offset + len(state.nodes[c].token_ids)]),
                     None)
        if child is None:
            break
        edge = state.nodes[child]
        take = min(len(edge.token_ids), len(want) - offset)
        out.extend(edge.slot_ids[:take])
        node, offset = child, offset + take
    return out


def _split_lower_halves(before: radix.RadixState, after: radix.RadixState) -> set[int]:
    """The slots of edges a step cut short (the lower half of a split): SGLang refreshes such an edge's use, the
    normative index does not."""
    return {s for i, n in after.nodes.items() if i in before.nodes
            and len(n.slot_ids) < len(before.nodes[i].slot_ids) for s in n.slot_ids}


def _touched(state: radix.RadixState) -> set[int]:
    """The slots of the edges the state's latest step marked as used."""
    return {s for n in state.nodes.values() if n.node_id != radix.ROOT and n.last_access == state.clock
            for s in n.slot_ids}


def _marked(marks: dict[int, int], node: radix.RadixNode, at_or_after: bool) -> bool:
    """Whether a mark on one of the node's slots is later than (``at_or_after``: at or after) its last use."""
    return any(m > node.last_access or (at_or_after and m == node.last_access)
               for m in (marks.get(s) for s in node.slot_ids) if m is not None)


def _common_prefix(rows: list[list[int]]) -> int:
    n = min(len(r) for r in rows)
    for i in range(n):
        if any(r[i] != rows[0][i] for r in rows):
            return i
    return n


def _answer_text(op: str, answer: Any) -> str:
    """A prefix-index call's answer as the adapter trace shows it."""
    if op == "admit":
        return "refused: pool short" if answer is None else f"matched {int(answer)}"
    if op == "extend":
        return "granted" if answer else "refused: pool short"
    if op == "evict":
        return f"evicted {[[int(s) for s in run] for run in answer]}"
    return ""
