"""The conformance layer's gate checks: z3 obligations, the state machines (reference, an adapter, the
faulty adapter that must be caught), and the negative-case registry.

Invariant: the machines run :data:`MACHINE_SIZES` examples and steps per machine at each gate level (None:
the profile's own; the adapter checks :data:`QUICK_ADAPTER_SIZE` at ``quick``); a faulty adapter is run without shrinking, so only its verdict and the examples it
took count.
"""

from __future__ import annotations

from kvexact.gate.framework import CheckCouldNotRun, CheckResult, GateCheck, GateContext, Verdict

FAULTY_ADAPTER = "kvexact.conformance.simple_runtime:faulty_no_cow"
SIMPLE_ADAPTER = "kvexact.conformance.simple_runtime:simple_runtime"
REFERENCE_ADAPTER = "kvexact.reference.adapters:reference_factory"
SGLANG_INDEX_ADAPTER = "kvexact.reference.peers.sglang_protocol:sglang_policies_factory"  # LRU, LFU, SLRU
VLLM_ADAPTER = "kvexact.reference.peers.vllm_protocol:vllm_factory"
VLLM_DELAYED_ADAPTER = "kvexact.reference.peers.vllm_protocol:vllm_delayed_caching_factory"
FAULTY_INDEX_ADAPTER = "kvexact.reference.peers.sglang_protocol:faulty_unlocked_prefix"
VLLM_HYBRID_ADAPTER = "kvexact.reference.peers.vllm_hybrid_cache:vllm_hybrid_factory"
FAULTY_HYBRID_ADAPTER = "kvexact.conformance.faulty_hybrid:faulty_one_group"
# (examples, steps) per machine at each level; (None, None): the Hypothesis profile's (ci: 25 x 30)
MACHINE_SIZES: dict[str, tuple[int | None, int | None]] = {"quick": (5, 15), "full": (None, None),
                                                          "deep": (60, 40)}
# the adapter checks at the quick level (the SGLang index's in the quick gate, a Radix step costs little; the full
# level's adapter checks run at this size only when `kvexact bench mutation --target adapter` runs them at quick)
QUICK_ADAPTER_SIZE = (10, 30)


def z3_obligations(ctx: GateContext) -> CheckResult:
    """Every obligation must be proved within z3's deterministic resource limit; a refutation or an 'unknown'
    (the rlimit's exhaustion included) fails the check. The figures carry each obligation's rlimit use."""
    try:
        import z3  # noqa: F401
    except ImportError as exc:
        raise CheckCouldNotRun("z3-solver is not installed") from exc
    from kvexact.conformance.obligations import PROOF_RLIMIT, ProofVerdict, discharge
    from kvexact.conformance.proofs import all_obligations

    results = []
    for ob in all_obligations():
        ctx.status(ob.name)
        results.append(discharge(ob))
    bad = [r for r in results if r.verdict is not ProofVerdict.PROVED]
    figures = {"obligations": len(results), "proved": len(results) - len(bad),
               "slowest_s": round(max((r.seconds for r in results), default=0.0), 3), "rlimit": PROOF_RLIMIT,
               "rlimit_used_max": max((r.rlimit_used for r in results), default=0),
               "rlimit_used": {r.name: r.rlimit_used for r in results}}
    if bad:
        return CheckResult(Verdict.FAILED, figures, "; ".join(f"{r.name}: {r.verdict.value}" for r in bad))
    return CheckResult(Verdict.PASSED, figures)


def _kernels_or_skip() -> None:
    try:
        import kvexact.kernels.paged  # noqa: F401
    except ImportError as exc:
        raise CheckCouldNotRun(f"the kernels cannot be imported ({exc}); install the kernels extra") from exc


def _settings(ctx: GateContext, shrink: bool = True, quick_size: tuple[int, int] | None = None):
    from kvexact.conformance.runner import machine_settings

    size = quick_size if ctx.level == "quick" and quick_size is not None else MACHINE_SIZES[ctx.level]
    return machine_settings(ctx.profile, *size, shrink=shrink)


def _run(ctx: GateContext, adapter: str | None, shrink: bool = True, everything: bool = False,
         quick_size: tuple[int, int] | None = None):
    """The machines ``adapter`` fits (with ``everything``: all machines, the reference where it does not)."""
    from kvexact.conformance.runner import MACHINES, machines_for, run_machine
    from kvexact.reference.adapters import AdapterError

    runs = []
    try:
        fits = machines_for(adapter)
        for spec in MACHINES if everything else fits:
            sut = adapter if spec in fits else None
            ctx.status(f"{spec} machine ({sut or 'reference'})")
            runs.append(run_machine(spec, sut, _settings(ctx, shrink, quick_size), ctx.seed,
                                    call_timeout=ctx.call_timeout))
    except AdapterError as exc:  # a broken adapter is no verdict on conformance
        raise CheckCouldNotRun(str(exc)) from None
    return runs


def _result(verdict: Verdict, runs, detail: str = "", **kw) -> CheckResult:
    return CheckResult(verdict, _figures(runs), detail, examples=sum(r.examples for r in runs), **kw)


def _figures(runs) -> dict:
    from kvexact.conformance.runner import stats_figures

    out: dict = {}
    for run in runs:
        for k, v in stats_figures(run).items():
            out[f"{run.spec}.{k}"] = v
        out[f"{run.spec}.seconds"] = round(run.seconds, 2)
    return out


def machines(ctx: GateContext) -> CheckResult:
    """Every machine of MACHINES at the gate's profile; ``--adapter`` is the system under test in the machines
    it fits, the reference in the others."""
    _kernels_or_skip()
    runs = _run(ctx, ctx.adapter, everything=True)
    failed = [r for r in runs if not r.passed]
    seeds = {"seed": ctx.seed, "profile": ctx.profile}
    if failed:
        return _result(Verdict.FAILED, runs, " | ".join(f"{r.spec}: {r.error[:600]}" for r in failed), seeds=seeds)
    return _result(Verdict.PASSED, runs, seeds=seeds)


def _adapter_passes(ctx: GateContext, adapter: str, quick_size: tuple[int, int] | None = None) -> CheckResult:
    """Every machine ``adapter`` fits, in lockstep with the reference: all must pass."""
    _kernels_or_skip()
    runs = _run(ctx, adapter, quick_size=quick_size or QUICK_ADAPTER_SIZE)
    failed = [r for r in runs if not r.passed]
    if failed:
        return _result(Verdict.FAILED, runs, " | ".join(r.error[:600] for r in failed))
    return _result(Verdict.PASSED, runs)


def _mutant_caught(ctx: GateContext, spec: str, adapter: str) -> CheckResult:
    """The ``spec`` machine must fail with the deliberately faulty ``adapter`` (no shrinking: only the
    verdict and the examples it took count)."""
    _kernels_or_skip()
    from kvexact.conformance.runner import machine_settings, run_machine

    run = run_machine(spec, adapter, machine_settings(ctx.profile, shrink=False), ctx.seed)
    figures = {"examples_until_caught": run.examples, "steps": run.steps}
    if run.passed:
        return CheckResult(Verdict.FAILED, figures, f"{adapter} survived the {spec} machine", examples=run.examples)
    return CheckResult(Verdict.PASSED, figures, f"caught: {run.error.splitlines()[0][:300]}", examples=run.examples)


def simple_runtime_adapter(ctx: GateContext) -> CheckResult:
    """The in-tree example runtime, in lockstep with the reference: it must pass."""
    return _adapter_passes(ctx, SIMPLE_ADAPTER)


def reference_adapter(ctx: GateContext) -> CheckResult:
    """The reference adapter as a system under test (``--adapter ...reference_factory``: content-keyed prefix
    reuse, no stream) in the allocator machines, its prefix hits held to 0x07A's chain: it must pass."""
    return _adapter_passes(ctx, REFERENCE_ADAPTER)


def vllm_profile_adapter(ctx: GateContext) -> CheckResult:
    """The vLLM profile in the allocator machines (not in lockstep: it caches at allocation), its free queue
    observed after every step: it must pass."""
    return _adapter_passes(ctx, VLLM_ADAPTER)


def vllm_delayed_caching_adapter(ctx: GateContext) -> CheckResult:
    """The vLLM profile with delayed caching (``delay_cache_blocks``: blocks cached only by ``cache()``) in the
    allocator machines: it must pass."""
    return _adapter_passes(ctx, VLLM_DELAYED_ADAPTER)


def faulty_adapter_caught(ctx: GateContext) -> CheckResult:
    """The deliberately faulty allocator (no copy-on-write) must be caught by the COW machine."""
    return _mutant_caught(ctx, "CowPublication", FAULTY_ADAPTER)


def sglang_index_adapter(ctx: GateContext) -> CheckResult:
    """The SGLang profile in the Radix machines (page sizes 1, 2 and 4, running SGLang's LRU, LFU and SLRU policies
    there, each declared), in lockstep with the normative index: it must pass. At ``quick`` they run :data:`QUICK_ADAPTER_SIZE`: at the machines' quick size a Radix run admits
    only a few requests and finishes one, so the index's insert walk and its eviction were barely reached."""
    return _adapter_passes(ctx, SGLANG_INDEX_ADAPTER)


def faulty_index_caught(ctx: GateContext) -> CheckResult:
    """The deliberately faulty prefix index (drops the lock on a matched prefix) must be caught."""
    return _mutant_caught(ctx, "Radix", FAULTY_INDEX_ADAPTER)


def vllm_hybrid_adapter(ctx: GateContext) -> CheckResult:
    """The vLLM profile's hybrid coordinator in the Hybrid machine, in lockstep with the normative cache."""
    return _adapter_passes(ctx, VLLM_HYBRID_ADAPTER)


def faulty_hybrid_caught(ctx: GateContext) -> CheckResult:
    """The deliberately faulty hybrid cache (its hit trusts group 0 alone) must be caught."""
    return _mutant_caught(ctx, "Hybrid", FAULTY_HYBRID_ADAPTER)


def negative_registry(ctx: GateContext) -> CheckResult:
    """Every registered failure-lab case is rejected by its name; the registry covers the seed's count."""
    from kvexact.reference import labs
    from kvexact.reference.rejections import failures

    cases = labs.cases()
    bad = failures(cases)
    figures = {"registered": len(cases), "seed_count": labs.SEED_TOTAL, "not_rejected_by_name": len(bad),
               "sections": len({c.section for c in cases})}
    problems = [f"{c.section} {c.description}: {why}" for c, why in bad[:10]]
    if len(cases) < labs.SEED_TOTAL:
        problems.append(f"only {len(cases)} cases registered, the seed counts {labs.SEED_TOTAL}")
    if problems:
        return CheckResult(Verdict.FAILED, figures, "; ".join(problems))
    return CheckResult(Verdict.PASSED, figures)


CHECKS = [
    GateCheck("z3-obligations", "conformance", "z3 proof obligations (unknown fails)", z3_obligations),
    GateCheck("negative-registry", "reference", "every failure-lab case rejected by its name", negative_registry),
    GateCheck("machines", "conformance", "state machines: reference (or --adapter) vs kernels vs specs", machines),
    GateCheck("adapter-simple-runtime", "conformance", "the example runtime adapter passes in lockstep",
              simple_runtime_adapter, level="full"),
    GateCheck("adapter-reference", "conformance", "the reference adapter passes the allocator machines as a "
              "system under test", reference_adapter, level="full"),
    GateCheck("adapter-vllm-profile", "conformance", "the vLLM profile passes the allocator machines",
              vllm_profile_adapter, level="full"),
    GateCheck("adapter-vllm-delayed-caching", "conformance", "the vLLM profile with delayed caching (blocks "
              "cached by cache() only) passes the allocator machines", vllm_delayed_caching_adapter, level="full"),
    GateCheck("adapter-faulty-caught", "conformance", "the faulty no-COW adapter is caught",
              faulty_adapter_caught),
    GateCheck("adapter-sglang-index", "conformance", "the SGLang profile passes the Radix machine in lockstep",
              sglang_index_adapter),
    GateCheck("adapter-faulty-index-caught", "conformance", "the faulty unlocked-prefix index is caught",
              faulty_index_caught),
    GateCheck("adapter-vllm-hybrid-profile", "conformance", "the vLLM hybrid profile passes the Hybrid machine "
              "in lockstep", vllm_hybrid_adapter, level="full"),
    GateCheck("adapter-faulty-hybrid-caught", "conformance", "the faulty one-group hybrid cache is caught",
              faulty_hybrid_caught, level="full"),
]
