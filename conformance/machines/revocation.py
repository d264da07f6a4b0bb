"""The state machine of namespace revocation: random enabled steps of the reference twin of
``spec/NamespaceRevocation.tla`` (revocations mid-flight included), and revocations of a namespace while a
request holds a prefix hit from it (``revoke_during_hit``); each step must be a step of the spec's action of
the same name, and each of the spec's invariants must hold after every step. A ``Lookup`` step that leaves its
request holding a hit returns the request into the Hypothesis bundle ``holders``; ``revoke_during_hit``
consumes one (a holder that has left its hit since, or whose namespace is no longer revocable, is counted as
``revoke_during_hit:stale`` and left alone).
"""

from __future__ import annotations

from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, multiple, rule

from kvexact.conformance.machines import ConformanceFailure, counted_rule
from kvexact.reference.rejections import Rejected

HIT_PHASES = ("hit", "leased", "executing")  # a request holding a prefix hit: found, leased, or executing on it


def _spec_invariant(name: str, counts_steps: bool = False) -> Any:
    """An ``@invariant`` of the machine: the reference twin of the spec's invariant ``name`` holds (the
    first one also counts the machine's steps)."""

    def holds(self: RevocationMachine) -> None:
        if counts_steps:
            self._count("steps")
        if not self.rv.INVARIANTS[name](self.state):
            raise ConformanceFailure(f"invariant {name} broken")

    holds.__name__ = name
    holds.__doc__ = f"The spec's {name} holds after every step."
    return invariant()(holds)


class RevocationMachine(RuleBasedStateMachine):
    """Random enabled steps of the revocation twin, each checked as a step of its spec action."""

    holders = Bundle("holders")  # requests a Lookup left holding a prefix hit
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
                "MaxGen": init.max_gen, "NoTenant": ModelValue(rv.NO_TENANT)}, lazy_actions=True)
        return cls._model

    @rule(target=holders, choice=st.integers(0, 10_000))
    @counted_rule
    def step(self, choice: int) -> Any:
        """One enabled step of the twin; a request that a Lookup left holding a hit joins ``holders``."""
        options = self.rv.enabled_steps(self.state)
        if not options:
            return multiple()
        name, params, take = options[choice % len(options)]
        self._take(name, params, take)
        p = params.get("p")
        return p if name == "Lookup" and p in self._hit_holders() else multiple()

    def _take(self, name: str, params: dict[str, Any], take: Any) -> None:
        """Take one step of the twin and check it as a step of the spec's action ``name``."""
        before = self.rv.project_tla(self.state)
        self.state, _ = take()
        tla_params = {k: self.rv.param_tla(v) for k, v in params.items()}
        verdict = self.model().check_step(name, before, self.rv.project_tla(self.state), tla_params)
        if not verdict.ok:
            raise ConformanceFailure(f"{name}{params} is not a step of the spec: {verdict.failed}")
        self._count(name)

    def _apply(self, step: Any, params: dict[str, Any]) -> None:
        from kvexact.spec.checker.model import action_of

        self._take(action_of(self.rv.SPEC, step.__name__), params, lambda: step(self.state, *params.values()))

    def _hit_holders(self) -> list[str]:
        """Requests holding a prefix hit from a namespace that may still be revoked (under the MaxGen bound)."""
        s = self.state
        return sorted(p for p, r in s.req.items()
                      if r.phase in HIT_PHASES and s.rev[r.ns] == "none" and s.ns_gen[r.ns] < s.max_gen)

    @rule(p=consumes(holders), advance=st.sampled_from((2, 1, 0)))
    @counted_rule
    def revoke_during_hit(self, p: str, advance: int) -> None:
        """Revoke the namespace of a request that holds a prefix hit from it (0x0CE in the middle of 0x0CD),
        every step checked against the spec: once the generation advances, an unleased hit can no longer be
        leased (STALE_GENERATION) and is rejected as stale; a lease or receipt is cancelled; the revocation
        then completes with the holder idle."""
        rv = self.rv
        if p not in self._hit_holders():
            self._count("revoke_during_hit:stale")
            return
        for _ in range(advance):  # lease the hit, execute on it
            take = {"hit": rv.acquire_lease, "leased": rv.execute}.get(self.state.req[p].phase)
            if take is None:
                break
            try:
                take(self.state, p)
            except Rejected:  # the hit entry was evicted meanwhile: the holder stays where it is
                break
            self._apply(take, {"p": p})
        n, phase = self.state.req[p].ns, self.state.req[p].phase
        self._count(f"revoke_mid_hit:{phase}")
        self._apply(rv.revoke_stop_admission, {"n": n})
        self._apply(rv.revoke_advance_generation, {"n": n})
        if phase == "hit":
            try:
                rv.acquire_lease(self.state, p)
            except Rejected as exc:
                if exc.reason is not rv.RevocationRejection.STALE_GENERATION:
                    raise ConformanceFailure(f"revoke_during_hit: {p}'s lease was refused as {exc.reason.name}, "
                                             "expected STALE_GENERATION") from None
            else:
                raise ConformanceFailure(f"revoke_during_hit: {p} leased a hit of {n}'s revoked generation")
            self._apply(rv.stale_request_rejected, {"p": p})
        self._apply(rv.revoke_invalidate_index, {"n": n})
        for q in sorted(self.state.tenants):
            r = self.state.req[q]
            if r.ns == n and r.phase in ("leased", "executing", "computing", "written") and r.gen < self.state.ns_gen[n]:
                self._apply(rv.revoke_cancel_lease, {"n": n, "p": q})
        for step in (rv.revoke_leases_drained, rv.revoke_release_blocks, rv.revoke_purge_external,
                     rv.revoke_complete):
            self._apply(step, {"n": n})
        if self.state.req[p].phase != "idle" or self.state.done[n] != self.state.ns_gen[n]:
            raise ConformanceFailure(f"revoke_during_hit: after revoking {n}, {p} is {self.state.req[p].phase} "
                                     f"and completion is at {self.state.done[n]}")

    no_lookup_before_auth = _spec_invariant("NoLookupBeforeAuth", counts_steps=True)
    no_cross_namespace_hit = _spec_invariant("NoCrossNamespaceHit")
    no_receipt_after_revocation = _spec_invariant("NoReceiptAfterRevocation")
    revocation_complete = _spec_invariant("RevocationComplete")
    no_stale_bytes = _spec_invariant("NoStaleBytes")
    receipts_leased = _spec_invariant("ReceiptsLeased")
