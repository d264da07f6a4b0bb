"""State machines for the radix index (with shared-prefix attention) and for namespace revocation.

:class:`RadixMachine` drives the normative radix index (``reference/radix.py``) the way a runtime does:
admit (match and lock, reserve the missing slots, write their rows), decode, finish (cache the path,
duplicates freed), cancel and evict, mirrored onto a one-token-per-slot K/V pool; every slot that
becomes free is poisoned with NaN, so a request reading an evicted or released slot fails. Attention is
checked for every live request through paged decode and, for requests sharing a slot prefix, through
``shared_prefix_attention`` (Hydragen), both against float64 attention over the request's tokens.

:class:`RevocationMachine` takes random enabled steps of the reference twin of
``spec/NamespaceRevocation.tla`` (including revocations mid-flight); each step must be a step of the
spec's action of the same name, and the spec's invariants must hold after every step.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvexact.conformance.device import HEAD_DIM, NUM_KV_HEADS, kv_row, query_row
from kvexact.conformance.machines import ConformanceFailure
from kvexact.reference import radix
from kvexact.reference.rejections import Rejected

POOL_SLOTS = 16
MAX_LIVE = 4
ALPHABET = (1, 2, 3)


class RadixMachine(RuleBasedStateMachine):
    stats: ClassVar[dict[str, int]] = {}

    def __init__(self) -> None:
        import torch

        super().__init__()
        self.state = radix.RadixState.empty(POOL_SLOTS, first_slot_id=0)
        self.k = torch.full((POOL_SLOTS, 1, NUM_KV_HEADS, HEAD_DIM), math.nan)
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

    def _write(self, slots: list[int], prefixes: list[list[int]] | None) -> None:
        import torch

        from kvexact.kernels.paged import reshape_and_cache

        if prefixes is None:
            keys = torch.full((len(slots), NUM_KV_HEADS, HEAD_DIM), math.nan)
            values = keys.clone()
        else:
            rows = [kv_row(p, 0) for p in prefixes]
            keys = torch.stack([r[0] for r in rows])
            values = torch.stack([r[1] for r in rows])
        reshape_and_cache(keys, values, self.k, self.v, torch.tensor(slots, dtype=torch.int64))

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

    @precondition(lambda self: len(self.live) < MAX_LIVE)
    @rule(prompt=st.one_of(st.integers(1, 6).map(lambda n: [ALPHABET[i % 3] for i in range(n)]),
                           st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=6)))
    def admit(self, prompt: list[int]) -> None:
        rid = f"q{self.next_id}"
        self.next_id += 1
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
    def decode(self, data: st.DataObject, token: int) -> None:
        rid = data.draw(st.sampled_from(sorted(self.live)), label="request")
        tokens, slots = self.live[rid]
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
    def finish(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.live)), label="request")
        tokens, slots = self.live.pop(rid)
        receipt = self._apply(radix.cache_finished, rid, tokens, slots)
        self._count("finish:duplicates_released", len(receipt.duplicate_slot_ids))

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.live)), label="request")
        self.live.pop(rid)
        self._apply(radix.release_request, rid)

    @rule(tokens=st.integers(1, 6))
    def evict(self, tokens: int) -> None:
        receipt = self._apply(radix.evict, tokens)
        self._count("evicted_slots", receipt.released_tokens)

    @rule()
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
    def check_attention(self) -> None:
        import torch

        from kvexact.kernels.paged import paged_decode_attention
        from kvexact.kernels.reference import attention_f64
        from kvexact.kernels.shared import shared_prefix_attention

        if not self.live:
            return
        names = sorted(self.live)
        width = max(len(self.live[r][1]) for r in names)
        table = torch.zeros((len(names), width), dtype=torch.int32)
        for i, r in enumerate(names):
            table[i, : len(self.live[r][1])] = torch.tensor(self.live[r][1], dtype=torch.int32)
        lens = torch.tensor([len(self.live[r][0]) for r in names], dtype=torch.int32)
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
            suffix = torch.zeros((len(names), max(1, width - common)), dtype=torch.int32)
            for i, r in enumerate(names):
                rest = self.live[r][1][common:]
                if rest:
                    suffix[i, : len(rest)] = torch.tensor(rest, dtype=torch.int32)
            out = shared_prefix_attention(q, self.k, self.v, torch.tensor(self.live[names[0]][1][:common],
                                                                           dtype=torch.int32),
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

    def teardown(self) -> None:
        self.check_attention()


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
        self.stats["examples"] = self.stats.get("examples", 0) + 1

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
    def step(self, choice: int) -> None:
        from kvexact.spec.checker import ModelValue

        options = self.rv.enabled_steps(self.state)
        if not options:
            return
        name, params, take = options[choice % len(options)]
        before = self.rv.project_tla(self.state)
        self.state, _ = take()
        tla_params = {k: self.rv.entry_tla(v) if isinstance(v, self.rv.Entry) else
                      ModelValue(v) if isinstance(v, str) else v for k, v in params.items()}
        verdict = self.model().check_step(name, before, self.rv.project_tla(self.state), tla_params)
        if not verdict.ok:
            raise ConformanceFailure(f"{name}{params} is not a step of the spec: {verdict.failed}")
        self.stats[name] = self.stats.get(name, 0) + 1

    @invariant()
    def spec_invariants(self) -> None:
        for name, holds in self.rv.INVARIANTS.items():
            if not holds(self.state):
                raise ConformanceFailure(f"invariant {name} broken")
