"""Step validation of the radix index reference against ``spec/RadixIndex.tla``.

:class:`RadixTraceRecorder` is told every committed reference step of the Radix machine (its name is its spec
action in snake_case) and records it with the projection of the successor state onto the spec's variables;
:meth:`RadixTraceRecorder.validate` checks every step as a step of its action (and every state against the CI
model's invariants) with the trace validator the allocator and Vmm machines use.

Projection, variable by variable (one namespace ``n1``; requests ``r1..`` in order of admission, a finished
one's name reused): ``tree`` has one spec node per reference node (path = its path's tokens, slots = its edge's
slots), ``lock`` its ``lock_ref``, ``free`` and ``priv`` the slot ledgers, ``evictable`` the unlocked edges'
tokens (the reference derives it, the spec keeps it incrementally). ``req`` (phase, prompt, matched tokens) is
kept here from the steps. Ids are renamed the way the spec's CHOOSEs (as the embedded checker evaluates them)
pick fresh ones: a new reference node gets the lowest unused spec node id, in order of creation; the slots a
``reserve`` or ``decode`` takes get the lowest free spec slots, in order. Renaming free slots among themselves
or giving fresh ids changes no state, so a wrong step still shows as one. One ``evict`` of k leaves is k
``EvictNode`` steps; a ``match`` that splits no edge changes no spec variable and is recorded as such.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvexact.reference import radix
from kvexact.spec import itf
from kvexact.spec.itf import Fn

SPEC = "RadixIndex"
NS = "n1"


class RadixTraceRecorder:
    """The reference's committed steps as RadixIndex actions; ``step`` after each one."""

    spec = SPEC

    def __init__(self, state: radix.RadixState, requests: int, max_len: int) -> None:
        self.page_size = state.page_size
        self.requests = [f"r{i}" for i in range(1, requests + 1)]
        self.max_len = max_len
        self.slots = sorted(state.pool_slot_ids)
        self.max_nodes = len(self.slots) // state.page_size + 1
        self.slot_of = {s: i for i, s in enumerate(self.slots, start=1)}  # reference slot -> spec slot
        self.node_of: dict[int, int] = {}  # reference node -> spec node
        self.req_of: dict[str, str] = {}  # reference request -> spec request
        self.req: dict[str, dict[str, Any]] = {r: _idle() for r in self.requests}
        self.initial_state = self.project(state)
        self.records: list[dict[str, Any]] = []

    def constants(self) -> dict[str, Any]:
        return {"Namespaces": {NS}, "Requests": set(self.requests), "Tokens": set(range(1, 4)),
                "Slots": set(self.slot_of.values()), "MaxNodes": self.max_nodes, "MaxLen": self.max_len,
                "Prompts": {(1,)}, "NoNs": "NoNs", "PageSize": self.page_size}

    def model_values(self) -> list[str]:
        return [NS, "NoNs", *self.requests]

    # ---- projection ------------------------------------------------------------------------------
    def _name_nodes(self, state: radix.RadixState) -> None:
        """Forget evicted nodes; give new ones the lowest unused spec ids, oldest first."""
        self.node_of = {n: v for n, v in self.node_of.items() if n in state.nodes}
        used = set(self.node_of.values())
        for n in sorted(state.nodes):
            if n != radix.ROOT and n not in self.node_of:
                v = min(set(range(1, self.max_nodes + 1)) - used)
                self.node_of[n] = v
                used.add(v)

    def _take_slots(self, before: radix.RadixState, taken: tuple[int, ...]) -> None:
        """Rename free slots so that ``taken`` (free before, in order) are the lowest free spec slots."""
        if not all(s in before.free_slot_ids for s in taken):
            return  # not a legal take: left as it is, so the step fails validation
        lowest = sorted(self.slot_of[s] for s in before.free_slot_ids)[: len(taken)]
        owner = {v: s for s, v in self.slot_of.items()}
        for s, v in zip(taken, lowest, strict=True):
            other = owner[v]
            self.slot_of[other], self.slot_of[s] = self.slot_of[s], v
            owner[self.slot_of[other]], owner[v] = other, s

    def project(self, state: radix.RadixState) -> dict[str, Any]:
        """The ITF values of the spec's variables."""
        self._name_nodes(state)
        spec_node = {v: n for n, v in self.node_of.items()}
        tree, lock = {}, {}
        for v in range(1, self.max_nodes + 1):
            node = state.nodes.get(spec_node.get(v, radix.ROOT))
            live = node is not None and node.node_id != radix.ROOT
            tree[v] = {"ns": NS if live else "NoNs", "path": list(state.path_tokens(node.node_id)) if live else [],
                       "slots": [self.slot_of[s] for s in node.slot_ids] if live else []}
            lock[v] = node.lock_ref if live else 0
        priv: dict[str, list[int]] = {r: [] for r in self.requests}
        for rid, slots in state.private_slot_ids.items():
            priv[self.req_of[rid]] = [self.slot_of[s] for s in slots]
        req = {}
        for r in self.requests:
            entry = next((e for rid, e in state.requests.items() if self.req_of.get(rid) == r), None)
            node = 0 if entry is None or entry.last_node_id == radix.ROOT else self.node_of[entry.last_node_id]
            req[r] = {**self.req[r], "node": node}
        evictable = sum(len(n.slot_ids) for n in state.nodes.values() if n.node_id != radix.ROOT and not n.lock_ref)
        return itf.encode_plain({"tree": Fn(tree), "lock": Fn(lock), "free": {self.slot_of[s] for s in state.free_slot_ids},
                                 "priv": Fn(priv), "req": Fn(req), "evictable": evictable})

    # ---- steps -----------------------------------------------------------------------------------
    def _add(self, action: str, params: dict[str, Any], after: radix.RadixState, in_spec: bool = True) -> None:
        rec = {"action": action, "params": itf.encode_plain(params), "state": self.project(after)}
        if not in_spec:
            rec["in_spec"] = False
        self.records.append(rec)

    def step(self, op: str, before: radix.RadixState, after: radix.RadixState, args: tuple, receipt: Any) -> None:
        """Record the reference step ``op(before, *args) -> (after, receipt)``."""
        if op == "evict":  # one EvictNode per victim, leaf first
            for victim in receipt.evicted_node_ids:
                v = self.node_of[victim]
                before, _ = radix.evict_node(before, victim)
                self._add("evict_node", {"v": v}, before)
            return
        if op == "evict_node":
            self._add(op, {"v": self.node_of[args[0]]}, after)
            return
        if op == "match":
            split = set(after.nodes) != set(before.nodes)
            self._add(op, {"n": NS, "q": list(args[0])}, after, in_spec=split)
            return
        if op == "match_and_lock":
            rid, _gen, prompt = args
            r = next(r for r in self.requests if self.req[r]["phase"] == "idle" and r not in self.req_of.values())
            self.req_of[rid] = r
            self.req[r] = {"phase": "matched", "ns": NS, "q": list(prompt), "m": receipt.matched_tokens}
            self._add(op, {"r": r, "n": NS, "q": list(prompt)}, after)
            return
        r = self.req_of[args[0]]
        params: dict[str, Any] = {"r": r}
        if op == "reserve":
            self._take_slots(before, tuple(args[1]))
            self.req[r]["phase"] = "reserved"
        elif op == "decode":
            self._take_slots(before, (args[2],))
            self.req[r]["q"].append(args[1])
            self.req[r]["phase"] = "reserved"
            params["t"] = args[1]
        elif op in ("cache_finished", "release_request"):
            self.req[r] = _idle()
        self._add(op, params, after)
        if args[0] not in after.requests and args[0] not in after.private_slot_ids:
            del self.req_of[args[0]]  # its spec name is free again

    def validate(self, out: Path | None = None) -> Any:
        """The trace validator's verdict on the recorded steps (``out``: also write the trace there)."""
        from kvexact.conformance.trace import trace_from_recorder, validate, write_itf
        from kvexact.spec import spec_dir

        trace = trace_from_recorder(self, self.constants(), self.model_values())
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            write_itf(trace, out / f"{SPEC}.itf.json")
        return validate(trace, spec_dir() / f"{SPEC}.tla", spec_dir() / f"{SPEC}.cfg")


def _idle() -> dict[str, Any]:
    return {"phase": "idle", "ns": "NoNs", "q": [], "m": 0}
