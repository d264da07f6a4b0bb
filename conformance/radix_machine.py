"""State machines for the radix index (with shared-prefix attention) and for namespace revocation.

:class:`RadixMachine` drives the normative radix index (``reference/radix.py``) the way a runtime does:
admit (match and lock, reserve the missing slots, write their rows), decode, finish (cache the path,
duplicates freed), cancel and evict, mirrored onto a one-token-per-slot K/V pool; every slot that
becomes free is poisoned with NaN, so a request reading an evicted or released slot fails. Attention is
checked for every live request through paged decode and, for requests sharing a slot prefix, through
``shared_prefix_attention`` (Hydragen), both against float64 attention over the request's tokens.

With a prefix-index adapter (``sut_factory``, see :class:`~kvexact.conformance.adapters.PrefixIndexAdapter`)
the system under test makes every choice (slots, eviction victims) and the normative index follows it in
lockstep and judges it: matched lengths and prefix slots must agree, a refusal must be one the reference
would make (the pool really short), every victim must be an unlocked leaf of the reference's tree, an
eviction may stop short only when no unlocked leaf is left, and the free sets must be equal after every
step. The device pool is written through the adapter's rows, so a wrong slot also shows up as wrong numbers.

:class:`RevocationMachine` takes random enabled steps of the reference twin of
``spec/NamespaceRevocation.tla`` (including revocations mid-flight); each step must be a step of the
spec's action of the same name, and the spec's invariants must hold after every step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvexact.conformance.adapters import IndexConfig, check_index_adapter
from kvexact.conformance.device import HEAD_DIM, NUM_KV_HEADS, kv_row, query_row
from kvexact.conformance.machines import ConformanceFailure, counted_rule
from kvexact.kernels import device as policy
from kvexact.reference import radix
from kvexact.reference.rejections import Rejected

POOL_SLOTS = 16
FIRST_SLOT = 1  # slot ids 1..POOL_SLOTS, as SGLang numbers them (its slot 0 is padding)
MAX_LIVE = 4
ALPHABET = (1, 2, 3)


class RadixMachine(RuleBasedStateMachine):
    stats: ClassVar[dict[str, int]] = {}
    sut_factory: ClassVar[Callable[[IndexConfig], Any] | None] = None
    check_kernels: ClassVar[bool] = True  # False: no device pool, no attention checks (ledgers only)

    def __init__(self) -> None:
        super().__init__()
        self.state = radix.RadixState.empty(POOL_SLOTS, first_slot_id=FIRST_SLOT)
        self.sut: Any = None
        if self.sut_factory is not None:
            self.sut = type(self).sut_factory(IndexConfig(POOL_SLOTS))  # type: ignore[misc]
            check_index_adapter(self.sut)
        if self.check_kernels:
            import torch

            self.k = policy.full((FIRST_SLOT + POOL_SLOTS, 1, NUM_KV_HEADS, HEAD_DIM), math.nan)
            self.v = torch.full_like(self.k, math.nan)
        self.live: dict[str, tuple[list[int], list[int]]] = {}  # request -> (tokens, slots)
        self.next_id = 0
        self._count("examples")

    def _count(self, name: str, n: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    def _apply(self, op: Any, *args: Any) -> Any:
        """Apply a radix transition; poison every slot it returned to the free set."""
        free_before = set(self.state.free_slot_ids)
        self.state, receipt = op(self.state, *args)
        newly_free = sorted(set(self.state.free_slot_ids) - free_before)
        if newly_free:
            self._write(newly_free, None)
        return receipt

    def _follow(self, what: str, op: Any, *args: Any) -> Any:
        """Replay the system under test's step on the reference; a refusal there is the SUT's bug."""
        try:
            return self._apply(op, *args)
        except Rejected as exc:
            raise ConformanceFailure(f"{self.sut.name}: {what} is not a legal step of the normative index: "
                                     f"{exc.reason.name} ({exc})") from None

    def _write(self, slots: list[int], prefixes: list[list[int]] | None) -> None:
        """Write the rows of ``prefixes`` (None: NaN poison) into ``slots`` through ``reshape_and_cache``."""
        if not self.check_kernels:
            return
        import torch

        from kvexact.kernels.paged import reshape_and_cache

        if prefixes is None:
            keys = policy.full((len(slots), NUM_KV_HEADS, HEAD_DIM), math.nan)
            values = keys.clone()
        else:
            rows = [kv_row(p, 0) for p in prefixes]
            keys = torch.stack([r[0] for r in rows])
            values = torch.stack([r[1] for r in rows])
        reshape_and_cache(keys, values, self.k, self.v, policy.tensor(slots, torch.int64))

    def _take(self, rid: str, n: int) -> list[int] | None:
        """n free slots for rid (evicting unlocked leaves when short), or None when the pool cannot."""
        short = n - len(self.state.free_slot_ids)
        if short > 0:
            receipt = self._apply(radix.evict, short)
            self._count("evicted_slots", receipt.released_tokens)
        if len(self.state.free_slot_ids) < n:
            return None
        slots = sorted(self.state.free_slot_ids)[:n]
        if slots:
            self._apply(radix.reserve, rid, slots)
        return slots

    # ---- the system under test's choices, judged by the reference ---------------------------------
    def _sut_evict(self, num_tokens: int) -> None:
        """Let the SUT evict; replay each victim on the reference (which checks it is an unlocked leaf)."""
        released = 0
        for run in self.sut.evict(num_tokens):
            run = tuple(int(s) for s in run)
            node = self._node_holding(run)
            if node is None:
                raise ConformanceFailure(f"{self.sut.name} evicted slots {list(run)}: no node of the reference's "
                                         "tree ends with exactly these")
            self._follow(f"evicting slots {list(run)}", radix.evict_node, node)
            released += len(run)
        self._count("evicted_slots", released)
        if released < num_tokens and _unlocked_leaves(self.state):
            raise ConformanceFailure(f"{self.sut.name} evicted {released} of {num_tokens} tokens while unlocked "
                                     f"leaves were left: {_unlocked_leaves(self.state)}")

    def _node_holding(self, run: tuple[int, ...]) -> int | None:
        """The reference node whose slots are ``run``. Where the SUT split an edge the reference kept
        whole (SGLang splits at the prompt boundary when it re-inserts a finished prompt), the reference
        makes the same split with a lookup that ends there: a split changes no cached content."""
        for n in self.state.nodes.values():
            if n.node_id == radix.ROOT or n.slot_ids[-len(run):] != run:
                continue
            if len(n.slot_ids) > len(run):
                keep = len(n.slot_ids) - len(run)
                self.state, _ = radix.match(self.state, self.state.path_tokens(n.parent_id) + n.token_ids[:keep])
                self._count("edges_split_to_follow")
                return self._node_holding(run)
            return n.node_id
        return None

    def _agree_short(self, what: str, need: int) -> None:
        """The SUT refused for lack of slots: the reference must be short of ``need`` free slots too."""
        if len(self.state.free_slot_ids) >= need:
            raise ConformanceFailure(f"{self.sut.name} refused {what} for lack of slots, but the reference "
                                     f"has {len(self.state.free_slot_ids)} free for the {need} needed")

    def _admission_need(self, prompt: list[int]) -> int:
        """Slots a refused admission needed (the reference matches too, as the SUT's lookup did)."""
        self.state, m = radix.match(self.state, prompt)
        return len(prompt) - m.matched_tokens

    def _sut_admit(self, rid: str, prompt: list[int]) -> tuple[int, list[int]] | None:
        """(matched tokens, row) of an admission the SUT made (evicting once when short), or None."""
        matched = self.sut.admit(rid, prompt)
        if matched is None:
            self._agree_short(f"admission of {rid}", self._admission_need(prompt))
            self._sut_evict(len(prompt))
            matched = self.sut.admit(rid, prompt)
            if matched is None:
                self._agree_short(f"admission of {rid}", self._admission_need(prompt))
                return None
        receipt = self._follow(f"admitting {rid}", radix.match_and_lock, rid, 0, prompt)
        row = [int(s) for s in self.sut.slot_ids(rid)]
        if (matched, tuple(row[:matched])) != (receipt.matched_tokens, tuple(receipt.prefix_slot_ids)):
            raise ConformanceFailure(f"{self.sut.name} matched {matched} tokens at slots {row[:matched]}; the "
                                     f"reference matched {receipt.matched_tokens} at {list(receipt.prefix_slot_ids)}")
        if len(row) != len(prompt):
            raise ConformanceFailure(f"{self.sut.name}: row of {rid} has {len(row)} slots for {len(prompt)} tokens")
        if row[matched:]:
            self._follow(f"reserving slots {row[matched:]} for {rid}", radix.reserve, rid, row[matched:])
        return matched, row

    def _sut_extend(self, rid: str, token: int) -> int | None:
        """The slot the SUT gave one decoded token of ``rid`` (evicting once when short), or None."""
        _tokens, slots = self.live[rid]
        if not self.sut.extend(rid, token):
            self._agree_short(f"a decode slot for {rid}", 1)
            self._sut_evict(1)
            if not self.sut.extend(rid, token):
                self._agree_short(f"a decode slot for {rid}", 1)
                return None
        row = [int(s) for s in self.sut.slot_ids(rid)]
        if row[:-1] != slots or len(row) != len(slots) + 1:
            raise ConformanceFailure(f"{self.sut.name}: decoding one token of {rid} turned row {slots} into {row}")
        self._follow(f"reserving slot {row[-1]} for {rid}", radix.reserve, rid, row[-1:])
        return row[-1]

    # ---- rules ------------------------------------------------------------------------------------
    @precondition(lambda self: len(self.live) < MAX_LIVE)
    @rule(prompt=st.one_of(st.integers(1, 6).map(lambda n: [ALPHABET[i % 3] for i in range(n)]),
                           st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=6)))
    @counted_rule
    def admit(self, prompt: list[int]) -> None:
        rid = f"q{self.next_id}"
        self.next_id += 1
        if self.sut is not None:
            admitted = self._sut_admit(rid, prompt)
            if admitted is None:
                self._count("admit:pool_exhausted")
                return
            matched, row = admitted
            if row[matched:]:
                self._write(row[matched:], [prompt[: i + 1] for i in range(matched, len(prompt))])
            self.live[rid] = (list(prompt), row)
            self._count(f"admit:hit={matched}")
            return
        receipt = self._apply(radix.match_and_lock, rid, 0, prompt)
        prefix = list(receipt.prefix_slot_ids)
        if receipt.matched_tokens != len(prefix) or receipt.matched_tokens > len(prompt):
            raise ConformanceFailure(f"handoff receipt: {receipt.matched_tokens} tokens but slots {prefix}")
        new = self._take(rid, len(prompt) - receipt.matched_tokens)
        if new is None:
            self._apply(radix.release_request, rid)
            self._count("admit:pool_exhausted")
            return
        if new:
            self._write(new, [prompt[: i + 1] for i in range(receipt.matched_tokens, len(prompt))])
        self.live[rid] = (list(prompt), prefix + new)
        self._count(f"admit:hit={receipt.matched_tokens}")

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data(), token=st.sampled_from(ALPHABET))
    @counted_rule
    def decode(self, data: st.DataObject, token: int) -> None:
        rid = data.draw(st.sampled_from(sorted(self.live)), label="request")
        tokens, slots = self.live[rid]
        if self.sut is not None:
            slot = self._sut_extend(rid, token)
            new = None if slot is None else [slot]
        else:
            new = self._take(rid, 1)
        if new is None:
            self._count("decode:pool_exhausted")
            return
        tokens.append(token)
        slots.extend(new)
        self._write(new, [list(tokens)])
        self._count("decode:ok")

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    @counted_rule
    def finish(self, data: st.DataObject) -> None:
        self.finish_request(data.draw(st.sampled_from(sorted(self.live)), label="request"))

    def finish_request(self, rid: str) -> None:
        """Cache the live request's path (duplicates freed, lock dropped), on the SUT and the reference."""
        tokens, slots = self.live.pop(rid)
        if self.sut is not None:
            self.sut.finish(rid)
            receipt = self._follow(f"finishing {rid}", radix.cache_finished, rid, tokens, slots)
        else:
            receipt = self._apply(radix.cache_finished, rid, tokens, slots)
        self._count("finish:duplicates_released", len(receipt.duplicate_slot_ids))

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    @counted_rule
    def cancel(self, data: st.DataObject) -> None:
        self.cancel_request(data.draw(st.sampled_from(sorted(self.live)), label="request"))

    def cancel_request(self, rid: str) -> None:
        """Drop the live request without caching: private slots freed, lock dropped."""
        self.live.pop(rid)
        if self.sut is not None:
            self.sut.cancel(rid)
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
        import torch

        from kvexact.kernels.paged import paged_decode_attention
        from kvexact.kernels.reference import attention_f64
        from kvexact.kernels.shared import shared_prefix_attention

        if not self.live or not self.check_kernels:
            return
        names = sorted(self.live)
        width = max(len(self.live[r][1]) for r in names)
        table = policy.zeros((len(names), width), torch.int32)
        for i, r in enumerate(names):
            table[i, : len(self.live[r][1])] = policy.tensor(self.live[r][1], torch.int32)
        lens = policy.tensor([len(self.live[r][0]) for r in names], torch.int32)
        q = torch.stack([query_row(r, len(self.live[r][0])) for r in names])
        expected = []
        for i, r in enumerate(names):
            toks = self.live[r][0]
            rows = [kv_row(toks[: t + 1], 0) for t in range(len(toks))]
            expected.append(attention_f64(q[i], torch.stack([a for a, _ in rows]), torch.stack([b for _, b in rows]))[0])
        paged = paged_decode_attention(q, self.k, self.v, table, lens, num_splits=2)
        self._compare("paged", names, paged, expected)
        common = _common_prefix([self.live[r][1] for r in names])
        if len(names) >= 2 and common:
            suffix = policy.zeros((len(names), max(1, width - common)), torch.int32)
            for i, r in enumerate(names):
                rest = self.live[r][1][common:]
                if rest:
                    suffix[i, : len(rest)] = policy.tensor(rest, torch.int32)
            out = shared_prefix_attention(q, self.k, self.v, policy.tensor(self.live[names[0]][1][:common],
                                                                           torch.int32),
                                          common, suffix, lens - common)
            self._compare("shared-prefix", names, out, expected)
            self._count("shared_prefix_checks")
        self._count("attention_checks")

    def _compare(self, kind: str, names: list[str], out: Any, expected: list[Any]) -> None:
        for i, r in enumerate(names):
            err = float((out[i].double() - expected[i]).abs().max())
            if not math.isfinite(err) or err > 2e-4:
                raise ConformanceFailure(f"{kind} attention of {r} differs from float64 (max error {err:.3g}); "
                                         f"tokens {self.live[r][0]}, slots {self.live[r][1]}")

    @invariant()
    def partition_holds(self) -> None:
        self._count("steps")
        report = radix.check_state(self.state)  # raises, by name, on any broken invariant
        if report.tree_owned_slots + report.private_slots + report.free_slots != report.pool_slots:
            raise ConformanceFailure(f"tree + private + free != pool: {report}")
        if self.sut is not None:
            theirs = sorted(int(s) for s in self.sut.free_slot_ids())
            if theirs != sorted(self.state.free_slot_ids):
                raise ConformanceFailure(f"{self.sut.name} free slots {theirs} != the reference's "
                                         f"{sorted(self.state.free_slot_ids)}")
            for rid, (_, slots) in self.live.items():
                row = [int(s) for s in self.sut.slot_ids(rid)]
                if row != slots:
                    raise ConformanceFailure(f"{self.sut.name}: row of {rid} is {row}, expected {slots}")
            self.sut.self_check()

    def teardown(self) -> None:
        self.check_attention()


def _unlocked_leaves(state: radix.RadixState) -> list[int]:
    return [n.node_id for n in state.nodes.values()
            if n.node_id != radix.ROOT and n.lock_ref == 0 and not n.children]


def _common_prefix(rows: list[list[int]]) -> int:
    n = min(len(r) for r in rows)
    for i in range(n):
        if any(r[i] != rows[0][i] for r in rows):
            return i
    return n


class RevocationMachine(RuleBasedStateMachine):
    """Random enabled steps of the revocation twin, each checked as a step of its spec action."""

    stats: ClassVar[dict[str, int]] = {}
    _model: ClassVar[Any] = None

    def __init__(self) -> None:
        from kvexact.reference import revocation as rv

        super().__init__()
        self.rv = rv
        self.state = rv.RevState.init()
        self._count("examples")

    def _count(self, name: str, n: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    @classmethod
    def model(cls) -> Any:
        if cls._model is None:
            from kvexact.reference import revocation as rv
            from kvexact.spec import spec_dir
            from kvexact.spec.checker import ModelValue, load_model

            init = rv.RevState.init()
            tenants = frozenset(ModelValue(t) for t in init.tenants)
            cls._model = load_model(spec_dir() / "NamespaceRevocation.tla", None, {
                "Tenants": tenants, "Revocable": tenants, "Blocks": frozenset(init.blocks),
                "MaxGen": init.max_gen, "NoTenant": ModelValue(rv.NO_TENANT)})
        return cls._model

    @rule(choice=st.integers(0, 10_000))
    @counted_rule
    def step(self, choice: int) -> None:
        options = self.rv.enabled_steps(self.state)
        if not options:
            return
        name, params, take = options[choice % len(options)]
        before = self.rv.project_tla(self.state)
        self.state, _ = take()
        tla_params = {k: self.rv.param_tla(v) for k, v in params.items()}
        verdict = self.model().check_step(name, before, self.rv.project_tla(self.state), tla_params)
        if not verdict.ok:
            raise ConformanceFailure(f"{name}{params} is not a step of the spec: {verdict.failed}")
        self._count(name)

    @invariant()
    def spec_invariants(self) -> None:
        self._count("steps")
        for name, holds in self.rv.INVARIANTS.items():
            if not holds(self.state):
                raise ConformanceFailure(f"invariant {name} broken")
