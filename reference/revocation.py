"""Namespace isolation and revocation (seed 0x0CE): the reference twin of ``spec/NamespaceRevocation.tla``.

Every TLA+ action has a function of the same name in snake_case (``RevokeCancelLease(n, p)`` is
:func:`revoke_cancel_lease`), taking the same parameters. An action whose enabling condition is false is
refused by name (:class:`RevocationRejection`) and changes nothing; an enabled one returns the successor
state and a trace record ``{"action", "params", "state"}``: the spec's name of the action (from the
checker's list, :mod:`kvexact.spec.checker.model`), and :func:`project_state`, the spec's ten variables encoded
by :mod:`kvexact.spec.itf` (tenants and ``NoTenant`` are model values). The invariants of the spec have
Python twins (:data:`INVARIANTS`) evaluated on reference states. Lookup resolves the spec's ``CHOOSE`` to
the hit with the smallest block id.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from kvexact.reference.rejections import Rejected
from kvexact.spec import itf
from kvexact.spec.checker.model import action_of

SPEC = "NamespaceRevocation"
NO_TENANT = "NoTenant"
REV_STEPS = ("none", "stopped", "advanced", "invalidated", "drained", "released", "purged")
PHASES = ("idle", "arrived", "authorized", "hit", "miss", "leased", "executing", "computing", "written")


class RevocationRejection(enum.Enum):
    """The enabling condition of a spec action that does not hold."""

    WRONG_PHASE = "the request is not in the phase the action starts from"
    UNAUTHORIZED_PRINCIPAL = "the principal is not authorized for the namespace"
    ADMISSION_STOPPED = "the namespace is being revoked and admits no request"
    AUTHORIZED_REQUEST = "an authorized request of an admitting namespace is not rejected"
    STALE_GENERATION = "the request's namespace generation is no longer current"
    ENTRY_NOT_IN_INDEX = "the hit entry is no longer in the index"
    REQUEST_CURRENT = "a current request with a valid hit is not stale"
    BLOCK_OWNED = "the block has an owner"
    BLOCK_BUSY = "a lease holds the block"
    BLOCK_INDEXED = "an index entry still names the block"
    BLOCK_FREE = "the block has no owner to free"
    UNKNOWN_ENTRY = "no such index entry"
    ALREADY_OFFLOADED = "the external tier already holds a copy"
    REVOCATION_STEP_OUT_OF_ORDER = "a revocation step runs only after the previous one"
    REVOCATION_BOUND = "the model bound on revocations per namespace is reached"
    LEASE_NOT_REVOKED = "the request is not a live old-generation request of the namespace"
    LEASES_LIVE = "a live lease of the revoked generation remains"
    RECEIPTS_LIVE = "an executable receipt of the revoked generation remains"
    UNKNOWN_NAME = "no such tenant or block"


@attrs.frozen
class Req:
    phase: str = "idle"
    ns: str = NO_TENANT
    gen: int = 0
    block: int = 0
    authorized: bool = False


@attrs.frozen(order=True)
class Entry:
    ns: str
    gen: int
    block: int


@attrs.frozen(order=True)
class Held:
    p: str
    ns: str
    gen: int
    block: int


@attrs.frozen(order=True)
class Copy:
    ns: str
    gen: int


@attrs.frozen
class Owner:
    ns: str = NO_TENANT
    gen: int = 0


IDLE = Req()
NO_OWNER = Owner()


@attrs.frozen
class RevState:
    """The spec's variables plus its constants (tenants, blocks, MaxGen)."""

    tenants: tuple[str, ...]
    blocks: tuple[int, ...]
    max_gen: int
    ns_gen: Mapping[str, int]
    rev: Mapping[str, str]
    done: Mapping[str, int]
    req: Mapping[str, Req]
    index: frozenset[Entry]
    owner: Mapping[int, Owner]
    bytes_: Mapping[int, str]
    leases: frozenset[Held]
    receipts: frozenset[Held]
    external: frozenset[Copy]

    @classmethod
    def init(cls, tenants: Iterable[str] = ("t1", "t2"), blocks: Iterable[int] = (1, 2), max_gen: int = 1
             ) -> RevState:
        ts, bs = tuple(tenants), tuple(blocks)
        return cls(ts, bs, max_gen, {t: 0 for t in ts}, {t: "none" for t in ts}, {t: 0 for t in ts},
                   {t: IDLE for t in ts}, frozenset(), {b: NO_OWNER for b in bs}, {b: NO_TENANT for b in bs},
                   frozenset(), frozenset(), frozenset())


# projection onto the spec's variables ----------------------------------------------------------
def _tla(v: Any, tenant_names: frozenset[str]) -> Any:
    """A reference value as a TLA+ value of the embedded checker (tenant names become model values)."""
    from kvexact.spec.checker.values import ModelValue, from_python

    if isinstance(v, (Req, Entry, Held, Copy, Owner)):
        return from_python({k: _tla(x, tenant_names) for k, x in attrs.asdict(v, recurse=False).items()})
    if isinstance(v, frozenset):
        return frozenset(_tla(x, tenant_names) for x in v)
    if isinstance(v, Mapping):
        return from_python({_tla(k, tenant_names): _tla(x, tenant_names) for k, x in v.items()})
    if isinstance(v, str) and (v in tenant_names or v == NO_TENANT):
        return ModelValue(v)
    return v


SPEC_VARIABLES = ("nsGen", "rev", "done", "req", "index", "owner", "bytes", "leases", "receipts", "external")


def project_tla(s: RevState) -> dict[str, Any]:
    """The ten variables of NamespaceRevocation.tla as checker values (for ``Model.check_step``)."""
    names = frozenset(s.tenants)
    values = (s.ns_gen, s.rev, s.done, s.req, s.index, s.owner, s.bytes_, s.leases, s.receipts, s.external)
    return {var: _tla(v, names) for var, v in zip(SPEC_VARIABLES, values, strict=True)}


def entry_tla(e: Entry) -> Any:
    """An index entry as a checker value (the parameter of EvictEntry and Offload)."""
    return _tla(e, frozenset({e.ns}))


def project_state(s: RevState) -> dict[str, Any]:
    """The ten variables of NamespaceRevocation.tla in ITF (``bytes`` is ``bytes_`` here)."""
    return {var: itf.encode(v) for var, v in project_tla(s).items()}


def param_tla(v: Any) -> Any:
    """An action parameter as a checker value (entries are records; tenants model values; blocks integers)."""
    from kvexact.spec.checker.values import ModelValue

    if isinstance(v, Entry):
        return entry_tla(v)
    return ModelValue(v) if isinstance(v, str) else v


def _record(step: Callable[..., Step], params: dict[str, Any], s: RevState) -> dict[str, Any]:
    """The trace record of one step: its spec action's name, its parameters and the state after it."""
    return {"action": action_of(SPEC, step.__name__), "params": {k: itf.encode(param_tla(v)) for k, v in params.items()},
            "state": project_state(s)}


# helpers mirroring the spec's definitions -------------------------------------------------------
def authz(p: str, n: str) -> bool:
    return p == n


def _lease(s: RevState, p: str) -> Held:
    r = s.req[p]
    return Held(p, r.ns, r.gen, r.block)


def _current(s: RevState, p: str) -> bool:
    r = s.req[p]
    return r.ns in s.ns_gen and r.gen == s.ns_gen[r.ns]


def _busy(s: RevState, b: int) -> bool:
    return any(lease.block == b for lease in s.leases)


def _old(s: RevState, n: str, g: int) -> bool:
    return g < s.ns_gen[n]


def _need(cond: bool, reason: RevocationRejection, detail: str) -> None:
    if not cond:
        raise Rejected(reason, detail)


def _tenant(s: RevState, *names: str) -> None:
    for name in names:
        _need(name in s.tenants, RevocationRejection.UNKNOWN_NAME, f"tenant {name!r}")


def _phase(s: RevState, p: str, *phases: str) -> Req:
    _tenant(s, p)
    r = s.req[p]
    _need(r.phase in phases, RevocationRejection.WRONG_PHASE, f"{p} is {r.phase}, needs {'/'.join(phases)}")
    return r


def _set_req(s: RevState, p: str, r: Req) -> Mapping[str, Req]:
    return {**s.req, p: r}


Step = tuple[RevState, dict[str, Any]]


# request actions ----------------------------------------------------------------------------------
def arrive(s: RevState, p: str, n: str) -> Step:
    _tenant(s, n)
    _phase(s, p, "idle")
    t = attrs.evolve(s, req=_set_req(s, p, Req("arrived", n)))
    return t, _record(arrive, {"p": p, "n": n}, t)


def authorize(s: RevState, p: str) -> Step:
    r = _phase(s, p, "arrived")
    _need(authz(p, r.ns), RevocationRejection.UNAUTHORIZED_PRINCIPAL, f"{p} for {r.ns}")
    _need(s.rev[r.ns] == "none", RevocationRejection.ADMISSION_STOPPED, f"{r.ns} is {s.rev[r.ns]}")
    t = attrs.evolve(s, req=_set_req(s, p, attrs.evolve(r, phase="authorized", authorized=True, gen=s.ns_gen[r.ns])))
    return t, _record(authorize, {"p": p}, t)


def authorization_rejected(s: RevState, p: str) -> Step:
    r = _phase(s, p, "arrived")
    _need(not authz(p, r.ns) or s.rev[r.ns] != "none", RevocationRejection.AUTHORIZED_REQUEST, p)
    t = attrs.evolve(s, req=_set_req(s, p, IDLE))
    return t, _record(authorization_rejected, {"p": p}, t)


def lookup(s: RevState, p: str) -> Step:
    r = _phase(s, p, "authorized")
    _need(_current(s, p), RevocationRejection.STALE_GENERATION, f"{p}@{r.gen}")
    hits = sorted(e for e in s.index if e.ns == r.ns and e.gen == r.gen)
    new = attrs.evolve(r, phase="hit", block=hits[0].block) if hits else attrs.evolve(r, phase="miss")
    t = attrs.evolve(s, req=_set_req(s, p, new))
    return t, _record(lookup, {"p": p}, t)


def acquire_lease(s: RevState, p: str) -> Step:
    r = _phase(s, p, "hit")
    _need(_current(s, p), RevocationRejection.STALE_GENERATION, f"{p}@{r.gen}")
    _need(Entry(r.ns, r.gen, r.block) in s.index, RevocationRejection.ENTRY_NOT_IN_INDEX, f"{r.ns}@{r.gen}/{r.block}")
    t = attrs.evolve(s, leases=s.leases | {_lease(s, p)}, req=_set_req(s, p, attrs.evolve(r, phase="leased")))
    return t, _record(acquire_lease, {"p": p}, t)


def stale_request_rejected(s: RevState, p: str) -> Step:
    r = _phase(s, p, "authorized", "hit", "miss")
    stale = not _current(s, p) or (r.phase == "hit" and Entry(r.ns, r.gen, r.block) not in s.index)
    _need(stale, RevocationRejection.REQUEST_CURRENT, p)
    t = attrs.evolve(s, req=_set_req(s, p, IDLE))
    return t, _record(stale_request_rejected, {"p": p}, t)


def execute(s: RevState, p: str) -> Step:
    r = _phase(s, p, "leased")
    _need(_current(s, p), RevocationRejection.STALE_GENERATION, f"{p}@{r.gen}")
    t = attrs.evolve(s, receipts=s.receipts | {_lease(s, p)}, req=_set_req(s, p, attrs.evolve(r, phase="executing")))
    return t, _record(execute, {"p": p}, t)


def finish(s: RevState, p: str) -> Step:
    _phase(s, p, "leased", "executing")
    held = _lease(s, p)
    t = attrs.evolve(s, receipts=s.receipts - {held}, leases=s.leases - {held}, req=_set_req(s, p, IDLE))
    return t, _record(finish, {"p": p}, t)


def allocate(s: RevState, p: str, b: int) -> Step:
    r = _phase(s, p, "miss")
    _need(b in s.blocks, RevocationRejection.UNKNOWN_NAME, f"block {b!r}")
    _need(_current(s, p), RevocationRejection.STALE_GENERATION, f"{p}@{r.gen}")
    _need(s.owner[b] == NO_OWNER, RevocationRejection.BLOCK_OWNED, f"block {b} owned by {s.owner[b]}")
    _need(not _busy(s, b), RevocationRejection.BLOCK_BUSY, f"block {b}")
    t = attrs.evolve(s, owner={**s.owner, b: Owner(r.ns, r.gen)}, bytes_={**s.bytes_, b: NO_TENANT},
                     req=_set_req(s, p, attrs.evolve(r, phase="computing", block=b)),
                     leases=s.leases | {Held(p, r.ns, r.gen, b)})
    return t, _record(allocate, {"p": p, "b": b}, t)


def write_block(s: RevState, p: str) -> Step:
    r = _phase(s, p, "computing")
    t = attrs.evolve(s, bytes_={**s.bytes_, r.block: r.ns}, req=_set_req(s, p, attrs.evolve(r, phase="written")))
    return t, _record(write_block, {"p": p}, t)


def publish_entry(s: RevState, p: str) -> Step:
    r = _phase(s, p, "written")
    index = s.index | {Entry(r.ns, r.gen, r.block)} if _current(s, p) else s.index
    t = attrs.evolve(s, index=index, leases=s.leases - {_lease(s, p)}, req=_set_req(s, p, IDLE))
    return t, _record(publish_entry, {"p": p}, t)


def evict_entry(s: RevState, e: Entry) -> Step:
    _need(e in s.index, RevocationRejection.UNKNOWN_ENTRY, str(e))
    t = attrs.evolve(s, index=s.index - {e})
    return t, _record(evict_entry, {"e": e}, t)


def free_block(s: RevState, b: int) -> Step:
    _need(b in s.blocks, RevocationRejection.UNKNOWN_NAME, f"block {b!r}")
    _need(s.owner[b] != NO_OWNER, RevocationRejection.BLOCK_FREE, f"block {b}")
    _need(not _busy(s, b), RevocationRejection.BLOCK_BUSY, f"block {b}")
    _need(all(e.block != b for e in s.index), RevocationRejection.BLOCK_INDEXED, f"block {b}")
    t = attrs.evolve(s, owner={**s.owner, b: NO_OWNER})
    return t, _record(free_block, {"b": b}, t)


def offload(s: RevState, e: Entry) -> Step:
    _need(e in s.index, RevocationRejection.UNKNOWN_ENTRY, str(e))
    _need(Copy(e.ns, e.gen) not in s.external, RevocationRejection.ALREADY_OFFLOADED, str(e))
    t = attrs.evolve(s, external=s.external | {Copy(e.ns, e.gen)})
    return t, _record(offload, {"e": e}, t)


# the seven revocation steps -------------------------------------------------------------------------
def _at_step(s: RevState, n: str, step: str) -> None:
    _tenant(s, n)
    _need(s.rev[n] == step, RevocationRejection.REVOCATION_STEP_OUT_OF_ORDER, f"{n} is at {s.rev[n]}, needs {step}")


def revoke_stop_admission(s: RevState, n: str) -> Step:
    """Step 1: stop admitting requests to generation g."""
    _at_step(s, n, "none")
    _need(s.ns_gen[n] < s.max_gen, RevocationRejection.REVOCATION_BOUND, f"{n}@{s.ns_gen[n]}")
    t = attrs.evolve(s, rev={**s.rev, n: "stopped"})
    return t, _record(revoke_stop_admission, {"n": n}, t)


def revoke_advance_generation(s: RevState, n: str) -> Step:
    """Step 2: advance the authorized namespace generation to g+1."""
    _at_step(s, n, "stopped")
    t = attrs.evolve(s, ns_gen={**s.ns_gen, n: s.ns_gen[n] + 1}, rev={**s.rev, n: "advanced"})
    return t, _record(revoke_advance_generation, {"n": n}, t)


def revoke_invalidate_index(s: RevState, n: str) -> Step:
    """Step 3: invalidate index candidates from the old generation."""
    _at_step(s, n, "advanced")
    t = attrs.evolve(s, index=frozenset(e for e in s.index if not (e.ns == n and _old(s, n, e.gen))),
                     rev={**s.rev, n: "invalidated"})
    return t, _record(revoke_invalidate_index, {"n": n}, t)


def revoke_cancel_lease(s: RevState, n: str, p: str) -> Step:
    """Step 4 (cancel): end one live old-generation request of ``n``, dropping its lease and receipt."""
    _at_step(s, n, "invalidated")
    _tenant(s, p)
    r = s.req[p]
    _need(r.ns == n and r.phase in ("leased", "executing", "computing", "written") and _old(s, n, r.gen),
          RevocationRejection.LEASE_NOT_REVOKED, f"{p}: {r.phase} {r.ns}@{r.gen}")
    held = _lease(s, p)
    t = attrs.evolve(s, leases=s.leases - {held}, receipts=s.receipts - {held}, req=_set_req(s, p, IDLE))
    return t, _record(revoke_cancel_lease, {"n": n, "p": p}, t)


def revoke_leases_drained(s: RevState, n: str) -> Step:
    """Step 4 (wait): no live lease of the old generation remains."""
    _at_step(s, n, "invalidated")
    live = [x for x in s.leases if x.ns == n and _old(s, n, x.gen)]
    _need(not live, RevocationRejection.LEASES_LIVE, f"{len(live)} old leases of {n}")
    t = attrs.evolve(s, rev={**s.rev, n: "drained"})
    return t, _record(revoke_leases_drained, {"n": n}, t)


def revoke_release_blocks(s: RevState, n: str) -> Step:
    """Step 5: release the old generation's physical objects (bytes stay until the next scrub)."""
    _at_step(s, n, "drained")
    owner = {b: NO_OWNER if o.ns == n and _old(s, n, o.gen) else o for b, o in s.owner.items()}
    t = attrs.evolve(s, owner=owner, rev={**s.rev, n: "released"})
    return t, _record(revoke_release_blocks, {"n": n}, t)


def revoke_purge_external(s: RevState, n: str) -> Step:
    """Step 6: remove external-tier copies through the M5.5 directory."""
    _at_step(s, n, "released")
    t = attrs.evolve(s, external=frozenset(c for c in s.external if not (c.ns == n and _old(s, n, c.gen))),
                     rev={**s.rev, n: "purged"})
    return t, _record(revoke_purge_external, {"n": n}, t)


def revoke_complete(s: RevState, n: str) -> Step:
    """Step 7: emit completion only when no executable receipt from the old generation remains."""
    _at_step(s, n, "purged")
    live = [x for x in s.receipts if x.ns == n and _old(s, n, x.gen)]
    _need(not live, RevocationRejection.RECEIPTS_LIVE, f"{len(live)} old receipts of {n}")
    t = attrs.evolve(s, done={**s.done, n: s.ns_gen[n]}, rev={**s.rev, n: "none"})
    return t, _record(revoke_complete, {"n": n}, t)


STEPS: tuple[Callable[..., Step], ...] = (
    arrive, authorize, authorization_rejected, lookup, acquire_lease, stale_request_rejected, execute, finish,
    allocate, write_block, publish_entry, evict_entry, free_block, offload, revoke_stop_admission,
    revoke_advance_generation, revoke_invalidate_index, revoke_cancel_lease, revoke_leases_drained,
    revoke_release_blocks, revoke_purge_external, revoke_complete,
)


def enabled_steps(s: RevState) -> list[tuple[str, dict[str, Any], Callable[[], Step]]]:
    """Every (action, params) of the spec's Next that is enabled in ``s``, with a thunk that takes it."""
    out: list[tuple[str, dict[str, Any], Callable[[], Step]]] = []

    def offer(step: Callable[..., Step], params: dict[str, Any], *args: Any) -> None:
        try:
            step(s, *args)
        except Rejected:
            return
        out.append((action_of(SPEC, step.__name__), params, lambda: step(s, *args)))

    for p in s.tenants:
        for n in s.tenants:
            offer(arrive, {"p": p, "n": n}, p, n)
        for request_step in (authorize, authorization_rejected, lookup, acquire_lease, stale_request_rejected,
                             execute, finish, write_block, publish_entry):
            offer(request_step, {"p": p}, p)
        for b in s.blocks:
            offer(allocate, {"p": p, "b": b}, p, b)
    for e in sorted(s.index):
        offer(evict_entry, {"e": e}, e)
        offer(offload, {"e": e}, e)
    for b in s.blocks:
        offer(free_block, {"b": b}, b)
    for n in s.tenants:
        for revoke_step in (revoke_stop_admission, revoke_advance_generation, revoke_invalidate_index,
                            revoke_leases_drained, revoke_release_blocks, revoke_purge_external, revoke_complete):
            offer(revoke_step, {"n": n}, n)
        for p in s.tenants:
            offer(revoke_cancel_lease, {"n": n, "p": p}, n, p)
    return out


# invariants (twins of the spec's) ---------------------------------------------------------------
def no_lookup_before_auth(s: RevState) -> bool:
    return all(r.authorized and authz(p, r.ns) for p, r in s.req.items() if r.phase not in ("idle", "arrived"))


def no_cross_namespace_hit(s: RevState) -> bool:
    return all(s.owner[r.block] == Owner(r.ns, r.gen) for r in s.req.values() if r.phase in ("leased", "executing"))


def no_receipt_after_revocation(s: RevState) -> bool:
    return all(x.gen >= s.done[x.ns] for x in s.receipts)


def revocation_complete(s: RevState) -> bool:
    return (all(e.gen >= s.done[e.ns] for e in s.index) and all(x.gen >= s.done[x.ns] for x in s.leases)
            and all(c.gen >= s.done[c.ns] for c in s.external)
            and all(o.gen >= s.done[o.ns] for o in s.owner.values() if o.ns != NO_TENANT))


def no_stale_bytes(s: RevState) -> bool:
    return all(s.bytes_[b] in (NO_TENANT, o.ns) for b, o in s.owner.items() if o != NO_OWNER)


def receipts_leased(s: RevState) -> bool:
    return s.receipts <= s.leases


INVARIANTS: dict[str, Callable[[RevState], bool]] = {
    "NoLookupBeforeAuth": no_lookup_before_auth, "NoCrossNamespaceHit": no_cross_namespace_hit,
    "NoReceiptAfterRevocation": no_receipt_after_revocation, "RevocationComplete": revocation_complete,
    "NoStaleBytes": no_stale_bytes, "ReceiptsLeased": receipts_leased,
}


Plan = list[tuple[Callable[..., Step], tuple[Any, ...]]]


def play(s: RevState, plan: Plan) -> tuple[RevState, list[dict[str, Any]]]:
    """Apply ``plan`` (action function, parameters) in order; returns the final state and the records."""
    records = []
    for fn, args in plan:
        s, rec = fn(s, *args)
        records.append(rec)
    return s, records
