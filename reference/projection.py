"""Projection of the reference allocator onto the variables of ``spec/KVAllocation.tla`` and
``spec/CowPublication.tla``, and a trace recorder that keeps one record per spec action.

A projection is built of Python values: sets, :class:`~kvexact.spec.itf.Fn` for a TLA+ function, dicts
for records, lists for sequences, tuples, integers, and strings for model values (request ids, reader ids,
``NoReq``). The recorder keeps the checker's value of each (:func:`checker_value`), which trace validation
checks as it is; :func:`project_state` gives the ITF JSON of one state (Apalache's Informal Trace Format).

KVAllocation, variable by variable (``g`` a cache group id, ``b`` a block id of that group's pool):

* ``gen[g][b]``: the block record's generation.
* ``ref[g][b]``: references from committed request maps only (the pool refcount minus COW source leases,
  read leases and reader snapshots, which this spec does not model).
* ``ident[g][b]``: ``ident_of(cache_key)`` (by default ``int(key)``; the spec's identity j is the
  logical index of a full block of the shared token stream), 0 without a cache identity.
* ``rows[g][b]``: the block's written rows, 0 for a FREE block (refcount 0, no identity, unreserved):
  the spec resets rows when a block is freed; the reference keeps the bytes but they are dead.
* ``reserved[g]``: blocks reserved by the in-flight transaction.
* ``tables[r][g]``: the request's handles as ``[block, gen]`` records; ``<<>>`` for an absent request.
* ``len[r]``, ``tver[r]``: context tokens and table version (0 for an absent request).
* ``rgen[r]`` (not a variable of the current spec; projected for the record): ended lifetimes.
* ``epoch``: the allocator epoch.
* ``txn``: the in-flight boundary append (phase ``reserved`` until ``append_write``, then ``ready``; ``dest``
  the reserved blocks, ``prev`` the identity each reservation evicted); the recorder sets phase
  ``rolled_back`` after ``append_rollback`` until the next committed step.
* ``hist``, ``stale``: history variables, kept by :class:`TraceRecorder` (the snapshot before the first
  ``append_reserve``; ``[grp, block, gen]``, the first group's old tail that a ``truncate`` returned to the
  free pool, held by a delayed writer, ``NoStale`` (block 0) after ``stale_write_rejected``).

CowPublication:

* ``data[g][b]``: the rows written (token ids), ``<<>>`` for a block without references that is not
  reserved; ``valid[g][b]``: ``Len(data)`` except 0 for a COW destination before ``cow_validate``;
  ``bundle[g][b]``: the block's bundle epoch (0 when free or not yet validated).
* ``ref[g][b]``: the whole refcount (maps + reader snapshots + COW source leases).
* ``gen``, ``tables``, ``len``, ``tver``, ``epoch`` as above; ``tokens[r]``: the request's token history.
* ``txn``: the in-flight COW transaction (phase ``begun``/``validated``/``published``, ``tok``, ``rows``
  the predecessor's tail rows, ``src``/``dest`` per group, ``copied``/``written`` sets of groups).
* ``snap[x]``: reader snapshots; ``wrote``: the ``<<g, b>>`` pairs the step wrote.

Which records a spec keeps follows from its actions (the checker's list, :mod:`kvexact.spec.checker.model`)
and the nesting of the reference's steps, with no table: a step named for one of the spec's actions is
recorded with that action's parameters, unless a step enclosing it is also one of them (CowPublication
records ``append_boundary`` whole; KVAllocation records the ``append_reserve``, ``append_write`` and
``append_publish`` it encloses). A step the spec does not name is recorded with ``"in_spec": false``
(``allocate``, ``fork`` and ``cow_*`` in KVAllocation; ``cache_block``, ``prefix_hit``, ``evict``,
``truncate`` in CowPublication; ``retain_read``), unless it enclosed recorded steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kvexact.reference.allocator import Allocator
from kvexact.reference.pool import BlockState
from kvexact.spec import itf
from kvexact.spec.checker.model import snake_case, spec_actions
from kvexact.spec.checker.values import ModelValue, mk_fcn
from kvexact.spec.itf import Fn

SPECS = ("KVAllocation", "CowPublication")

NO_REQ = "NoReq"
NO_STALE_BLOCK = 0


def default_ident(key: str) -> int:
    return int(key)


def checker_value(value: Any, model_values: frozenset[str] | set[str]) -> Any:
    """The checker's value of a projection value: :class:`Fn` and dicts become functions (records keep their
    string keys), sets frozensets, lists and tuples sequences, a string named in ``model_values`` that model
    value. Invariant: equal to ``itf.decode(itf.encode_plain(value), model_values)``, with no JSON between."""
    t = type(value)
    if t is str:
        return ModelValue(value) if value in model_values else value
    if t is int or t is bool:
        return value
    if isinstance(value, Fn):
        return mk_fcn({checker_value(k, model_values): checker_value(v, model_values) for k, v in value.items()})
    if isinstance(value, dict):
        return mk_fcn({str(k): checker_value(v, model_values) for k, v in value.items()})
    if isinstance(value, (set, frozenset)):
        return frozenset(checker_value(v, model_values) for v in value)
    if isinstance(value, (list, tuple)):
        return tuple(checker_value(v, model_values) for v in value)
    return value


def _requests(alloc: Allocator, requests: Sequence[str] | None) -> list[str]:
    if requests is not None:
        return list(requests)
    return sorted(set(alloc.requests.data) | set(alloc.ended.data))


def _handle(h) -> dict:
    return {"block": h.block_id, "gen": h.generation}


def _other_refs(alloc: Allocator) -> list[dict[int, int]]:
    """References that are not request-map references: leases and reader snapshots."""
    out: list[dict[int, int]] = [{} for _ in alloc.groups]
    for h in alloc.leases.data.values():
        out[h.cache_group_id][h.block_id] = out[h.cache_group_id].get(h.block_id, 0) + 1
    for rec, _tokens in alloc.readers.data.values():
        for table in rec.tables:
            for h in table:
                out[h.cache_group_id][h.block_id] = out[h.cache_group_id].get(h.block_id, 0) + 1
    return out


def _all_blocks(alloc: Allocator) -> list[int]:
    """The union of every pool's block ids: the specs have one ``Blocks`` constant for all groups, so each
    group's functions range over the union (a block id a pool lacks projects as free, generation 0)."""
    return sorted({b for pool in alloc.pools for b in pool.blocks.data})


def _open_txn(alloc: Allocator):
    return next(iter(alloc.txns.data.values()), None)


def _request_vars(alloc: Allocator, requests: list[str]) -> tuple[Fn, Fn, Fn]:
    tables, lens, tvers = Fn(), Fn(), Fn()
    for r in requests:
        rec = alloc.requests.get(r)
        tables[r] = Fn({g: [_handle(h) for h in rec.tables[g]] if rec else [] for g in range(len(alloc.groups))})
        lens[r] = rec.context_tokens if rec else 0
        tvers[r] = rec.table_version if rec else 0
    return tables, lens, tvers


def project_kv_allocation(alloc: Allocator, requests: Sequence[str] | None = None,
                          ident_of: Callable[[str], int] = default_ident,
                          wrote: Iterable[tuple[int, int]] = ()) -> dict[str, Any]:
    """The KVAllocation variables (history variables at their idle values; ``wroteCached`` from the blocks
    the step wrote, ``wrote``)."""
    reqs = _requests(alloc, requests)
    other = _other_refs(alloc)
    gen, ref, ident, rows, reserved, queued = Fn(), Fn(), Fn(), Fn(), Fn(), Fn()
    blocks = _all_blocks(alloc)
    for g, pool in enumerate(alloc.pools):
        gen[g], ref[g], ident[g], rows[g] = Fn(), Fn(), Fn(), Fn()
        reserved[g] = set()
        # the free+evictable queue; a block id the group does not have is never taken, as if queued
        queued[g] = set(pool.queue_order()) | {b for b in blocks if b not in pool.blocks}
        for b in blocks:
            if b not in pool.blocks:
                gen[g][b] = ref[g][b] = ident[g][b] = rows[g][b] = 0
                continue
            rec = pool.blocks[b]
            gen[g][b] = rec.generation
            ref[g][b] = pool.refcount(b) - other[g].get(b, 0)
            ident[g][b] = ident_of(rec.cache_key) if rec.cache_key is not None else 0
            rows[g][b] = 0 if pool.state_of(b) is BlockState.FREE else rec.valid_rows
            if rec.reserved_by is not None:
                reserved[g].add(b)
    tables, lens, tvers = _request_vars(alloc, reqs)
    rgen = Fn({r: (alloc.requests[r].request_generation - 1) if r in alloc.requests else alloc.ended.get(r, 0)
               for r in reqs})
    groups = range(len(alloc.groups))
    txn: dict[str, Any] = {"phase": "idle", "req": NO_REQ, "dest": Fn({g: 0 for g in groups}),
                           "prev": Fn({g: 0 for g in groups})}
    open_txn = _open_txn(alloc)
    if open_txn is not None and "new" in open_txn.plan:
        txn["phase"] = "ready" if open_txn.publication_state == "READY_TO_PUBLISH" else "reserved"
        txn["req"] = open_txn.request_id
        for h, key in zip(open_txn.reserved_handles, open_txn.evicted_keys, strict=True):
            txn["dest"][h.cache_group_id] = h.block_id
            txn["prev"][h.cache_group_id] = ident_of(key) if key is not None else 0
    state = {"gen": gen, "ref": ref, "ident": ident, "rows": rows, "reserved": reserved, "tables": tables,
             "len": lens, "tver": tvers, "rgen": rgen, "epoch": alloc.epoch, "txn": txn, "pool": queued}
    state["hist"] = init_snapshot(state)
    state["stale"] = no_stale(groups)
    state["wroteCached"] = {(g, b) for g, b in wrote if ident[g][b] != 0}
    return state


SNAPSHOT_VARS = ("gen", "ref", "ident", "rows", "reserved", "tables", "len", "tver", "epoch")


def no_stale(groups: Iterable[int]) -> dict[str, int]:
    """KVAllocation's NoStale: no delayed writer (block 0) in the smallest group."""
    return {"grp": min(groups), "block": NO_STALE_BLOCK, "gen": 0}


def snapshot_of(state: dict[str, Any]) -> dict[str, Any]:
    return {k: state[k] for k in SNAPSHOT_VARS}


def init_snapshot(state: dict[str, Any]) -> dict[str, Any]:
    """KVAllocation's InitSnapshot over the domains of ``state``."""

    def zero_blocks(f: Fn) -> Fn:
        return Fn({g: Fn({b: 0 for b in f[g]}) for g in f})

    return {"gen": zero_blocks(state["gen"]), "ref": zero_blocks(state["gen"]),
            "ident": zero_blocks(state["gen"]), "rows": zero_blocks(state["gen"]),
            "reserved": Fn({g: set() for g in state["gen"]}),
            "tables": Fn({r: Fn({g: [] for g in state["gen"]}) for r in state["tables"]}),
            "len": Fn({r: 0 for r in state["len"]}), "tver": Fn({r: 0 for r in state["tver"]}), "epoch": 0}


def project_cow_publication(alloc: Allocator, requests: Sequence[str] | None = None,
                            readers: Sequence[str] = (), wrote: Iterable[tuple[int, int]] = ()
                            ) -> dict[str, Any]:
    """The CowPublication variables."""
    reqs = _requests(alloc, requests)
    open_txn = _open_txn(alloc)
    cow_txn = open_txn if open_txn is not None and "cow" in open_txn.plan else None
    validated = cow_txn is not None and cow_txn.publication_state in ("VALIDATED", "PUBLISHED")
    data, valid, ref, gen, bundle = Fn(), Fn(), Fn(), Fn(), Fn()
    blocks = _all_blocks(alloc)
    for g, pool in enumerate(alloc.pools):
        data[g], valid[g], ref[g], gen[g], bundle[g] = Fn(), Fn(), Fn(), Fn(), Fn()
        for b in blocks:
            if b not in pool.blocks:
                data[g][b], valid[g][b], ref[g][b], gen[g][b], bundle[g][b] = [], 0, 0, 0, 0
                continue
            rec = pool.blocks[b]
            live = pool.refcount(b) > 0 or rec.reserved_by is not None
            pending = rec.reserved_by is not None and not validated
            data[g][b] = list(rec.rows) if live else []
            valid[g][b] = 0 if (not live or pending) else rec.valid_rows
            bundle[g][b] = 0 if (not live or pending) else rec.bundle_epoch
            ref[g][b] = pool.refcount(b)
            gen[g][b] = rec.generation
    tables, lens, tvers = _request_vars(alloc, reqs)
    tokens = Fn({r: list(alloc.tokens_of(r)) if r in alloc.requests else [] for r in reqs})
    groups = range(len(alloc.groups))
    txn: dict[str, Any] = {"phase": "idle", "req": NO_REQ, "tok": 0, "rows": 0, "src": Fn({g: 0 for g in groups}),
                           "dest": Fn({g: 0 for g in groups}), "copied": set(), "written": set()}
    if cow_txn is not None and cow_txn.publication_state in ("BEGUN", "VALIDATED", "PUBLISHED"):
        txn["phase"] = {"BEGUN": "begun", "VALIDATED": "validated", "PUBLISHED": "published"}[
            cow_txn.publication_state]
        txn.update(req=cow_txn.request_id, tok=cow_txn.new_tokens[0], rows=cow_txn.source_tail_rows,
                   copied=set(cow_txn.copied_groups), written=set(cow_txn.written_groups))
        for g, h in enumerate(cow_txn.touched_handles):
            txn["src"][g] = h.block_id
        for h in cow_txn.reserved_handles:
            txn["dest"][h.cache_group_id] = h.block_id
    snap = Fn()
    for x in readers:
        held = alloc.readers.get(x)
        if held is None:
            snap[x] = {"on": False, "tables": Fn({g: [] for g in groups}), "len": 0, "tokens": []}
        else:
            rec, toks = held
            snap[x] = {"on": True, "tables": Fn({g: [_handle(h) for h in rec.tables[g]] for g in groups}),
                       "len": rec.context_tokens, "tokens": list(toks)}
    return {"data": data, "valid": valid, "ref": ref, "gen": gen, "bundle": bundle, "tables": tables,
            "len": lens, "tokens": tokens, "tver": tvers, "epoch": alloc.epoch, "txn": txn, "snap": snap,
            "wrote": {(g, b) for g, b in wrote}}


class TraceRecorder:
    """Collects ``{"action", "params", "state"}`` records for one spec while attached to an allocator.

    ``requests`` and ``readers`` fix the domains of the per-request and per-reader functions (the spec's
    ``Requests`` and ``Readers`` constants). History variables of KVAllocation are kept here. Parameters and
    states are the checker's values (:func:`checker_value`; request ids, reader ids and ``NoReq`` are model
    values), checked as they are; ITF JSON is written only with a trace file
    (:func:`kvexact.conformance.trace.trace_from_recorder`).
    """

    def __init__(self, spec: str, requests: Sequence[str] | None = None, readers: Sequence[str] = (),
                 ident_of: Callable[[str], int] = default_ident) -> None:
        if spec not in SPECS:
            raise ValueError(f"unknown spec {spec!r}; expected one of {sorted(SPECS)}")
        self.spec = spec
        self.actions = {snake_case(a): params for a, params in spec_actions(spec).items()}
        self.requests = None if requests is None else list(requests)
        self.readers = list(readers)
        self.ident_of = ident_of
        self.model_values = {*(self.requests or ()), *self.readers, NO_REQ}  # grows with the ids seen, unfixed
        self.records: list[dict[str, Any]] = []
        self.initial_state: dict[str, Any] | None = None
        self._last: dict[str, Any] | None = None

    def attach(self, alloc: Allocator) -> TraceRecorder:
        """Record the current state as the trace's first state and start recording ``alloc``'s steps."""
        alloc.recorder = self
        self._last = self.snapshot(alloc, ())
        self.initial_state = self._values(self._last)
        return self

    def _values(self, fields: dict[str, Any]) -> dict[str, Any]:
        return {k: checker_value(v, self.model_values) for k, v in fields.items()}

    @property
    def stale(self) -> dict[str, int]:
        """KVAllocation's history variable ``stale``: the handle a delayed writer holds (block 0: none)."""
        assert self._last is not None and self.spec == "KVAllocation"
        return dict(self._last["stale"])

    def snapshot(self, alloc: Allocator, wrote: Iterable[tuple[int, int]]) -> dict[str, Any]:
        if self.requests is None:
            self.model_values.update(_requests(alloc, None))
        if self.spec == "KVAllocation":
            return project_kv_allocation(alloc, self.requests, self.ident_of, wrote)
        return project_cow_publication(alloc, self.requests, self.readers, wrote)

    def record(self, path: tuple[str, ...], params: dict[str, Any], state: dict[str, Any],
               composite: bool = False) -> None:
        """Keep or fold the record of the step ``path[-1]`` (inside the steps ``path[:-1]``)."""
        action = path[-1]
        if any(outer in self.actions for outer in path[:-1]):
            return  # an enclosing step is this spec's action: its own record covers this step
        if action not in self.actions and composite:
            return  # a step of steps this spec records one by one
        if self.spec == "KVAllocation":
            state = self._kv_history(action, params, state)
        self._last = state
        entry: dict[str, Any]
        if action in self.actions:
            entry = {"action": action, "params": self._values({k: _fn(params[k]) for k in self.actions[action]}),
                     "state": self._values(state)}
        else:
            entry = {"action": action, "params": self._values({k: _fn(v) for k, v in params.items()}),
                     "state": self._values(state), "in_spec": False}
        self.records.append(entry)

    def _kv_history(self, action: str, params: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        prev = self._last if self._last is not None else state
        state = dict(state)
        stale = dict(prev["stale"])
        if action == "append_reserve":
            state["hist"] = snapshot_of(prev) if prev["txn"]["phase"] in ("idle", "rolled_back") else prev["hist"]
        elif action in ("append_write", "append_rollback", "stale_write_rejected"):
            state["hist"] = prev["hist"]
        if action == "append_rollback":
            state["txn"] = dict(state["txn"], phase="rolled_back")
        if action == "stale_write_rejected":
            state["txn"] = prev["txn"]
            stale = no_stale(state["gen"])
        if action not in self.actions:  # a stuttering step keeps the history variables as they were
            state["hist"] = prev["hist"]
            if prev["txn"]["phase"] == "rolled_back" and state["txn"]["phase"] == "idle":
                state["txn"] = prev["txn"]
        if action == "truncate":  # the delayed writer keeps the first group's old tail if it is dropped and freed
            g = min(state["gen"])
            old, kept = prev["tables"][params["r"]][g], state["tables"][params["r"]][g]
            b = old[-1]["block"]
            if len(kept) < len(old) and prev["ref"][g][b] == 1 and prev["ident"][g][b] == 0:
                stale = {"grp": g, "block": b, "gen": prev["gen"][g][b]}
        state["stale"] = stale
        return state


def _fn(value: Any) -> Any:
    if isinstance(value, dict) and value and all(isinstance(k, int) for k in value):
        return Fn(value)
    return value


def project_state(alloc: Allocator, spec: str = "KVAllocation", requests: Sequence[str] | None = None,
                  readers: Sequence[str] = (), ident_of: Callable[[str], int] = default_ident) -> dict[str, Any]:
    """The ITF-encoded values of ``spec``'s variables for the allocator's current state."""
    if spec == "KVAllocation":
        return itf.encode_plain(project_kv_allocation(alloc, requests, ident_of))
    if spec == "CowPublication":
        return itf.encode_plain(project_cow_publication(alloc, requests, readers))
    raise ValueError(f"unknown spec {spec!r}")
