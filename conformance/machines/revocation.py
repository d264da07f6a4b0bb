"""The state machine of namespace revocation: random enabled steps of the reference twin of
``spec/NamespaceRevocation.tla`` (revocations mid-flight included); each step must be a step of the spec's
action of the same name, and each of the spec's invariants must hold after every step.
"""

from __future__ import annotations

from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kvexact.conformance.machines import ConformanceFailure, counted_rule


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

    no_lookup_before_auth = _spec_invariant("NoLookupBeforeAuth", counts_steps=True)
    no_cross_namespace_hit = _spec_invariant("NoCrossNamespaceHit")
    no_receipt_after_revocation = _spec_invariant("NoReceiptAfterRevocation")
    revocation_complete = _spec_invariant("RevocationComplete")
    no_stale_bytes = _spec_invariant("NoStaleBytes")
    receipts_leased = _spec_invariant("ReceiptsLeased")
