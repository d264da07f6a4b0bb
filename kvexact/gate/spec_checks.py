"""Gate checks of the shipped specs: each CI model, the mutants, the witnesses.

Invariant: TLC is the authority when its jar is found (``kvexact check``'s resolution): a CI-model check
then fails unless TLC checks the whole model with no error, at every level. At ``full`` and ``deep`` the
embedded engine must also finish the whole model without a violation, fire every action of the spec's
Next (:func:`kvexact.spec.checker.model.spec_actions`), and agree with TLC on the result, distinct
states and states generated (the ``--engine both`` cross-check). At ``quick`` the embedded engine
searches the first :data:`QUICK_STATES` distinct states breadth-first and passes when they hold no
violation. A liveness check (``full`` and ``deep``) passes only when the spec's liveness model (its
temporal property under LiveSpec's fairness) completes with exit 0. The mutant check passes only at a
100% kill rate by every engine present (invariants and temporal properties; at ``quick``: the first
mutant of each spec), the witness check only when every witness is reached.
"""

from __future__ import annotations

import concurrent.futures

from kvexact.gate.framework import CheckCouldNotRun, CheckResult, GateCheck, GateContext, Verdict
from kvexact.spec import spec_dir
from kvexact.spec.checker.model import spec_actions
from kvexact.spec.mutants import MUTANT_KILL_MAX

SPECS = ("KVAllocation", "CowPublication", "NamespaceRevocation", "RadixIndex", "VirtualMapping", "HybridAllocation")
# The quick level's search of each CI model: as many states as the costliest kill of a shipped mutant
# needs (kvexact.spec.mutants.MUTANT_KILL_MAX), so a bug of each seeded kind would show at that depth too.
QUICK_STATES = MUTANT_KILL_MAX

# The specs with a liveness model, <Spec>.liveness.cfg (a temporal property under LiveSpec's fairness).
LIVENESS_MODELS = ("KVAllocation", "CowPublication", "NamespaceRevocation")


def action_firings(coverage: dict[str, dict[str, int]]) -> dict[str, int]:
    """Times each action operator fired, summed over its parameter instances (``Op(x=1)`` -> ``Op``)."""
    fired: dict[str, int] = {}
    for label, counts in coverage.items():
        op = label.split("(", 1)[0].strip()
        fired[op] = fired.get(op, 0) + int(counts.get("fired", 0))
    return fired


def _tlc_run(ctx: GateContext, tla, cfg, what: str):
    """TLC's result for one model, or None when no jar was found; TLC failing to run at all is a check
    that could not run (never a pass)."""
    if not ctx.tlc_jar:
        return None
    from kvexact.spec.tlc import TlcFailed, TlcUnavailable, run_tlc

    ctx.status(f"TLC: {what}")
    try:
        return run_tlc(tla, cfg, ctx.tlc_jar, workers=1)
    except (TlcUnavailable, TlcFailed) as exc:
        raise CheckCouldNotRun(f"{what}: TLC could not run: {exc}") from None


def _model_check(spec: str):
    def run(ctx: GateContext) -> CheckResult:
        from kvexact.spec.checker import check_model

        bound = QUICK_STATES if ctx.level == "quick" else None
        tla, cfg = spec_dir() / f"{spec}.tla", spec_dir() / f"{spec}.cfg"
        # TLC, the authority, always checks the whole model; it runs in its own process, so the embedded
        # engine's search runs beside it (a thread only waits on the child) and the check takes the longer of two
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            tlc_job = pool.submit(_tlc_run, ctx, tla, cfg, f"{spec}.cfg")
            ctx.status(f"model-checking {spec}.cfg" + (f" (first {bound:,} states)" if bound else ""))
            r = check_model(tla, cfg, coverage=True, max_states=bound)
            t = tlc_job.result()
        figures: dict = {}
        if t is not None:
            figures["tlc"] = {"result": t.outcome.value, "distinct_states": t.distinct_states,
                              "generated_states": t.generated_states, "seconds": round(t.seconds, 2)}
            if t.exit_code != 0:
                what = f"{t.violation.kind} {t.violation.name}: {t.violation.message}" if t.violation else ""
                return CheckResult(Verdict.FAILED, figures, f"{spec}.cfg: TLC: {t.outcome.value} (exit "
                                   f"{t.exit_code}): {what}", states=t.distinct_states)
        figures.update({"distinct_states": r.distinct_states, "generated_states": r.generated_states,
                        "depth": r.depth, "complete": r.complete, "seconds": round(r.seconds, 2)})
        states = r.distinct_states
        if r.violation is not None or (not r.complete and bound is None) or r.exit_code != 0:
            what = f"{r.violation.kind} {r.violation.name}: {r.violation.message}" if r.violation else \
                "the search did not complete"
            return CheckResult(Verdict.FAILED, figures, f"{spec}.cfg: {r.outcome.value}: {what}", states=states)
        fired = action_firings(r.coverage)
        actions = spec_actions(spec)
        never = [a for a in actions if fired.get(a, 0) == 0]
        unknown = sorted(set(fired) - set(actions))
        figures["actions"], figures["actions_fired"] = len(actions), len(actions) - len(never)
        tlc_note = "" if t is None else f"; TLC: no error in the whole model ({t.distinct_states:,} distinct states)"
        if not r.complete:
            return CheckResult(Verdict.PASSED, figures, f"{spec}.cfg: no error in the first {states:,} distinct "
                               f"states (breadth-first, depth {r.depth}){tlc_note}; --level full checks the whole "
                               "model with both engines", states=states)
        if never or unknown:
            return CheckResult(Verdict.FAILED, figures, f"{spec}.cfg: actions never fired: {never or 'none'}; "
                               f"unlisted: {unknown or 'none'}", states=states)
        detail = f"{spec}.cfg: no error, {r.distinct_states:,} distinct states, every action fired"
        if t is not None:
            if (t.outcome, t.distinct_states, t.generated_states) != (r.outcome, r.distinct_states,
                                                                      r.generated_states):
                return CheckResult(Verdict.FAILED, figures, f"{detail}; the engines disagree: TLC "
                                   f"{t.outcome.value}, {t.distinct_states} distinct, {t.generated_states} "
                                   f"generated; embedded {r.outcome.value}, {r.distinct_states} distinct, "
                                   f"{r.generated_states} generated", states=states)
            detail += "; TLC agrees (result, distinct and generated states)"
        return CheckResult(Verdict.PASSED, figures, detail, states=states)

    return run


def _liveness_check(spec: str):
    def run(ctx: GateContext) -> CheckResult:
        from kvexact.spec.checker import check_model

        ctx.status(f"model-checking {spec}.liveness.cfg")
        r = check_model(spec_dir() / f"{spec}.tla", spec_dir() / f"{spec}.liveness.cfg", coverage=False)
        figures = {"distinct_states": r.distinct_states, "generated_states": r.generated_states,
                   "seconds": round(r.seconds, 2)}
        if r.exit_code != 0 or not r.complete or r.violation is not None:
            what = f"{r.violation.kind} {r.violation.name}: {r.violation.message}" if r.violation else \
                "the search did not complete (temporal properties unchecked)"
            return CheckResult(Verdict.FAILED, figures, f"{spec}.liveness.cfg: {r.outcome.value}: {what}")
        return CheckResult(Verdict.PASSED, figures,
                           f"{spec}.liveness.cfg: its temporal property holds, {r.distinct_states:,} distinct states")

    return run


def _expected_violations(kind: str):
    def run(ctx: GateContext) -> CheckResult:
        from kvexact.spec.mutants import (
            MUTANT_STATE_LIMIT,
            WITNESS_STATE_LIMIT,
            ExpectedViolation,
            check_all,
            discover_mutants,
            discover_witnesses,
        )

        models = discover_mutants() if kind == "mutant" else discover_witnesses()
        if not models:
            raise CheckCouldNotRun(f"no {kind} models found under {spec_dir()}")
        if kind == "mutant" and ctx.level == "quick":  # a sample: the first mutant of each spec
            firsts: dict[str, ExpectedViolation] = {}
            for m in models:
                firsts.setdefault(m.name.split("_", 1)[0], m)
            models = list(firsts.values())
        ctx.status(f"checking {len(models)} {kind}s")
        limit = MUTANT_STATE_LIMIT if kind == "mutant" else WITNESS_STATE_LIMIT
        verdicts = check_all(models, workers=2, state_limit=limit)
        tlc_verdicts = []
        if ctx.tlc_jar:  # TLC must reach the same verdict on every model (it has no state bound)
            ctx.status(f"TLC: checking {len(models)} {kind}s")
            tlc_verdicts = check_all(models, engine="tlc", tlc_jar=ctx.tlc_jar, workers=2)
        ok = sum(v.killed for v in verdicts)
        figures = {"models": len(models), "engines": 2 if ctx.tlc_jar else 1, "killed" if kind == "mutant" else "reached": ok,
                   "kill_rate" if kind == "mutant" else "reach_rate": round(ok / len(models), 3),
                   "state_limit": limit, "most_states": max(v.distinct_states for v in verdicts),
                   "slowest_s": round(max(v.seconds for v in verdicts), 2)}
        states = sum(v.distinct_states for v in verdicts)
        if tlc_verdicts:
            figures["tlc_" + ("killed" if kind == "mutant" else "reached")] = sum(v.killed for v in tlc_verdicts)
        bad = [f"{v.model.name}: {v.outcome} ({v.detail})" for v in verdicts if not v.killed]
        bad += [f"{v.model.name}: TLC: {v.outcome} ({v.detail})" for v in tlc_verdicts if not v.killed]
        if bad:
            return CheckResult(Verdict.FAILED, figures, "; ".join(bad), states=states)
        by = " by the embedded engine and TLC" if ctx.tlc_jar else ""
        return CheckResult(Verdict.PASSED, figures, f"{ok}/{len(models)} {kind} models violated as expected{by}",
                           states=states)

    return run


CHECKS = [
    *(GateCheck(f"spec-{spec}", "spec", f"{spec}.cfg checks with no error and every action fires (quick: "
                "its first states, breadth-first)", _model_check(spec)) for spec in SPECS),
    *(GateCheck(f"spec-{spec}-liveness", "spec", f"{spec}.liveness.cfg: its temporal property holds under "
                "LiveSpec's fairness", _liveness_check(spec), level="full") for spec in LIVENESS_MODELS),
    GateCheck("spec-mutants", "spec", "every seeded-bug mutant dies of its named invariant (a liveness mutant: "
              "of its temporal property, on the complete state graph) within the state bound (quick: the first "
              "mutant of each spec)", _expected_violations("mutant")),
    GateCheck("spec-witnesses", "spec", "every negated witness (COW publication, eviction then reuse, "
              "completed revocation, split under two leases, retained mapping reuse) is violated",
              _expected_violations("witness"), level="full"),
]
