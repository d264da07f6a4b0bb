"""The state machines, the adapters, `kvexact conform` and `kvexact fuzz` (with a failing adapter)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from kvexact.conformance.adapter_border import load_factory
from kvexact.conformance.machines import ConformanceFailure
from kvexact.conformance.machines.allocator import machine_class
from kvexact.conformance.simple_runtime import SimpleRuntimeAllocator, faulty_no_cow
from kvexact.reference.adapters import AdapterConfig, AdapterError, check_adapter

FAST = settings(max_examples=6, stateful_step_count=20, deadline=None, derandomize=True, database=None)



@pytest.mark.parametrize("spec", ["KVAllocation", "CowPublication"])
def test_reference_machine_passes_and_exercises_the_paths(spec):
    machine = machine_class(spec)
    run_state_machine_as_test(machine, settings=settings(FAST, max_examples=12))
    stats = machine.stats
    assert stats["attention_checks"] > 0 and stats["trace_steps"] > 0
    if spec == "CowPublication":
        assert stats.get("device_copies", 0) > 0, "no copy-on-write was mirrored"
        assert stats.get("append_with_failure:ROLLED_BACK", 0) > 0
    else:
        assert stats.get("rule:cache", 0) > 0 and stats.get("truncate:ok", 0) > 0
        # truncation to a partial last block, and an append onto a cached tail that only its request maps
        assert stats.get("truncate:partial_tail", 0) > 0 and stats.get("append:copy_because_cached", 0) > 0, stats
        # prefix hits admitted through reference/prefix.py, read back through the kernels
        assert any(k.startswith("hit_tokens=") and k != "hit_tokens=0" for k in stats), stats
        assert stats.get("rule:lookup_under_foreign_scopes", 0) > 0
        assert stats.get("start:unauthorized:UNAUTHORIZED_TENANT", 0) > 0


def _machine_classes():
    """Every state machine of ``conformance/machines/`` (found by walking the package, so a new one is covered)."""
    import importlib
    import inspect
    import pkgutil

    from hypothesis.stateful import RuleBasedStateMachine

    from kvexact.conformance import machines

    found = {}
    for info in pkgutil.iter_modules(machines.__path__):
        module = importlib.import_module(f"{machines.__name__}.{info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, RuleBasedStateMachine) and cls.__module__ == module.__name__:
                found[name] = cls
    return found


def _rules(cls):
    return {n: getattr(cls, n).hypothesis_stateful_rule for n in dir(cls)
            if hasattr(getattr(cls, n, None), "hypothesis_stateful_rule")}


def _bundle_use(cls):
    """(rule, argument, bundle) for every argument drawn from a bundle, and (rule, bundle) for every target."""
    from hypothesis.stateful import Bundle

    rules = _rules(cls)
    drawn = {(n, a, s.name) for n, r in rules.items() for a, s in r.arguments.items() if isinstance(s, Bundle)}
    return drawn, {(n, t) for n, r in rules.items() for t in r.targets}


def test_no_rule_of_any_machine_draws_inside_its_body():
    """No rule of any machine takes ``st.data()``: every handle comes from a bundle or a rule argument."""
    classes = _machine_classes()
    assert set(classes) == {"AllocatorMachine", "RadixMachine", "VmmMachine", "RevocationMachine",
                            "SharedTailMachine", "PromptCacheMachine", "ChunkAttentionMachine", "HybridMachine"}, sorted(classes)
    drawing = sorted((c, n, a) for c, cls in classes.items() for n, r in _rules(cls).items()
                     for a, s in r.arguments.items() if repr(s) == "data()")
    assert not drawing


def test_allocator_rules_take_their_handles_from_bundles():
    """Every request and published prefix a rule of the allocator machine acts on comes from a bundle, and
    the rules that make them fill it."""
    from kvexact.conformance.machines.allocator import AllocatorMachine

    assert len(_rules(AllocatorMachine)) == 14, sorted(_rules(AllocatorMachine))
    drawn, filled = _bundle_use(AllocatorMachine)
    assert drawn == {("append", "req", "live"), ("append_with_injected_failure", "req", "live"),
                     ("release", "req", "live"), ("fork", "parent", "live"), ("fork_then_append", "parent", "live"),
                     ("truncate", "req", "live"), ("append_onto_cached_tail", "req", "live"),
                     ("cache", "req", "live"), ("start_on_cached_prefix", "prefix", "published"),
                     ("evict", "prefix", "published"), ("lookup_under_foreign_scopes", "published", "published")}
    assert filled == {("start", "live"), ("start_on_cached_prefix", "live"), ("release", "live"), ("fork", "live"),
                      ("fork_then_append", "live"), ("cache", "published"), ("append_onto_cached_tail", "published")}


def test_radix_and_vmm_rules_take_their_handles_from_bundles():
    """The radix machine's admitted requests and the Vmm machine's slots travel in bundles; the Vmm ``alloc``
    picks its inactive slot by a rule argument."""
    from kvexact.conformance.machines.radix import RadixMachine
    from kvexact.conformance.machines.vmm import VmmMachine

    assert _bundle_use(RadixMachine) == ({("decode", "rid", "requests"), ("finish", "rid", "requests"),
                                          ("cancel", "rid", "requests")}, {("admit", "requests")})
    assert _bundle_use(VmmMachine) == ({("grow", "slot", "live"), ("free", "slot", "live"),
                                        ("reclaim", "slot", "retained")}, {("alloc", "live"), ("free", "retained")})
    assert set(_rules(VmmMachine)["alloc"].arguments) == {"pick"}


def test_faulty_adapter_is_caught():
    machine = machine_class("CowPublication", sut_factory=faulty_no_cow)
    with pytest.raises(ConformanceFailure):
        run_state_machine_as_test(machine, settings=settings(FAST, max_examples=40, phases=[
            p for p in FAST.phases if p.name != "shrink"], report_multiple_bugs=False))


def test_an_adapter_whose_pool_misses_a_block_of_its_geometry_is_caught(monkeypatch):
    """The machines' pool is odd (7 blocks a group), so ``range(1, n | 1)`` for ``range(1, n + 1)`` drops a block."""
    from kvexact.conformance.machines.allocator import MACHINE_CONFIG

    assert MACHINE_CONFIG.blocks_per_group % 2 == 1
    monkeypatch.setattr(SimpleRuntimeAllocator, "block_ids",
                        lambda self, group: list(range(1, self.config.blocks_per_group | 1)))
    machine = machine_class("KVAllocation", sut_factory=SimpleRuntimeAllocator, check_kernels=False,
                            validate_trace=False)
    with pytest.raises(ConformanceFailure, match=r"block_ids\(0\) holds 6 distinct ids .* gives 7 blocks per group"):
        run_state_machine_as_test(machine, settings=FAST)


def test_a_table_block_outside_the_adapters_pool_is_a_named_failure():
    from kvexact.conformance.mirror import DevicePool

    pool = DevicePool([[1, 2]], 2)
    with pytest.raises(ConformanceFailure, match=r"block 3 is not among the adapter's block_ids\(0\)"):
        pool.write(0, 3, 0, [1])


def test_wrong_attention_is_caught_by_numbers():
    """The faulty allocator without lockstep: the kernels' numbers alone expose the shared-tail write."""
    cfg = AdapterConfig(blocks_per_group=12)
    adapter = faulty_no_cow(cfg)
    from kvexact.conformance.mirror import DevicePool, mirror_step

    pool = DevicePool([adapter.block_ids(g) for g in range(cfg.num_groups)], cfg.block_tokens)
    hist = {"a": [1, 2, 3]}
    assert adapter.start("a", hist["a"]).accepted
    mirror_step(pool, (), [adapter.table("a", g) for g in range(2)], hist["a"], 0)
    assert adapter.fork("a", "b").accepted
    hist["b"] = list(hist["a"])
    for rid, tok in (("a", 1), ("b", 2)):
        n = len(hist[rid])
        result = adapter.append(rid, tok)
        assert result.accepted and result.copies == ()
        hist[rid].append(tok)
        mirror_step(pool, result.copies, [adapter.table(rid, g) for g in range(2)], hist[rid], n)
    tables = {r: [adapter.table(r, g) for g in range(2)] for r in hist}
    bad = pool.check_attention(tables, hist)
    assert {m.request for m in bad} == {"a"}  # b's write overwrote a's row in the shared tail
    correct = SimpleRuntimeAllocator(cfg)
    pool = DevicePool([correct.block_ids(g) for g in range(cfg.num_groups)], cfg.block_tokens)
    hist = {"a": [1, 2, 3]}
    correct.start("a", hist["a"])
    mirror_step(pool, (), [correct.table("a", g) for g in range(2)], hist["a"], 0)
    correct.fork("a", "b")
    hist["b"] = list(hist["a"])
    for rid, tok in (("a", 1), ("b", 2)):
        n = len(hist[rid])
        result = correct.append(rid, tok)
        hist[rid].append(tok)
        mirror_step(pool, result.copies, [correct.table(rid, g) for g in range(2)], hist[rid], n)
    assert pool.check_attention({r: [correct.table(r, g) for g in range(2)] for r in hist}, hist) == []
    assert pool.copies == 2


def test_adapter_loading_errors():
    with pytest.raises(AdapterError, match="MODULE:FACTORY"):
        load_factory("no_colon")
    with pytest.raises(AdapterError, match="cannot import"):
        load_factory("kvexact.no_such_module:f")
    with pytest.raises(AdapterError, match="no callable 'nope'"):
        load_factory("kvexact.conformance.simple_runtime:nope")
    with pytest.raises(AdapterError, match="object is not an adapter of the allocator protocol"):
        check_adapter(object())
    with pytest.raises(AdapterError, match=r"no method block_ids\(\)"):
        check_adapter(type("NoBlockIds", (SimpleRuntimeAllocator,), {"block_ids": None})(AdapterConfig()))


def test_conform_command(kvexact_cli, tmp_path):
    code, out = kvexact_cli(["conform", "--spec", "CowPublication", "--examples", "3", "--steps", "10"]).code_and_text
    assert code == 0 and "passed" in out and "examples=" in out
    code, out = kvexact_cli(["conform", "--adapter", "bogus"]).code_and_text
    assert code == 2 and "MODULE:FACTORY" in out
    code, out = kvexact_cli(["conform", "--spec", "CowPublication", "--examples", "30", "--steps", "20", "--no-shrink",
                         "--out", str(tmp_path), "--adapter", "kvexact.conformance.simple_runtime:faulty_no_cow"]
                        ).code_and_text
    assert code == 1 and "FAILED" in out


@pytest.mark.slow
def test_fuzz_failure_leaves_a_reproduction_that_fails_again(tmp_path):
    out = tmp_path / "failures"
    # fuzz stops at the first failure (here: in round 1, seeded); the budget is only a guard, large enough
    # that a busy machine still reaches that example
    r = subprocess.run([sys.executable, "-m", "kvexact.cli", "fuzz", "--minutes", "60", "--spec",
                        "CowPublication", "--adapter", "kvexact.conformance.simple_runtime:faulty_no_cow",
                        "--out", str(out), "--examples-per-round", "40", "--steps", "20", "--no-shrink"],
                       capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "fuzz: round 1" in r.stdout and "reproduction written" in r.stdout
    repros = sorted(out.glob("test_repro_CowPublication_*.py"))
    assert len(repros) == 1
    assert (out / "CowPublication.itf.json").is_file()
    replay = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(repros[0])],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert replay.returncode == 1, replay.stdout
    assert "1 failed" in replay.stdout


def test_fuzz_bad_input(kvexact_cli):
    code, out = kvexact_cli(["fuzz", "--minutes", "0"]).code_and_text
    assert code == 2 and "--minutes" in out
    code, out = kvexact_cli(["fuzz", "--minutes", "1", "--adapter", "x:y"]).code_and_text
    assert code == 2 and "cannot import" in out


@pytest.mark.parametrize("name", ["Radix", "Vmm", "Revocation"])
def test_radix_and_revocation_machines(name):
    from kvexact.conformance.runner import machine_settings, run_machine

    run = run_machine(name, None, settings(machine_settings("ci"), max_examples=10, stateful_step_count=25))
    assert run.passed, run.error
    if name == "Radix":
        assert run.stats["attention_checks"] > 0 and run.stats.get("evicted_slots", 0) > 0
        assert any(k.startswith("admit:hit=") and k != "admit:hit=0" for k in run.stats), run.stats
        assert run.stats.get("admit:split_inside_edge", 0) > 0  # a match that ends inside an edge
        assert run.stats.get("trace_steps", 0) > 0  # every reference step validated against RadixIndex.tla
    elif name == "Vmm":
        assert run.stats["read_checks"] > 0 and run.stats.get("await_mapping:ok", 0) > 0
        assert run.stats["attention_checks"] > 0 and run.stats.get("free_reqid:poisoned_handles", 0) > 0
        assert run.stats.get("write_before_await:MAPPING_NOT_READY", 0) > 0
        assert run.stats.get("trace_steps", 0) > 0  # every reference step validated against VirtualMapping.tla
    else:
        assert run.stats.get("RevokeComplete", 0) > 0
        # a namespace revoked while a request holds a prefix hit from it (found, leased or executing)
        assert sum(run.stats.get(f"revoke_mid_hit:{ph}", 0) for ph in ("hit", "leased", "executing")) > 0, run.stats


@pytest.mark.parametrize("page", [2, 3])
def test_radix_machine_with_pages(page):
    """The Radix machine over a paged normative index: hits of whole pages, splits, finishes and evictions."""
    from kvexact.conformance.machines.radix import RadixMachine
    from kvexact.conformance.runner import machine_settings

    machine = type("PagedRadix", (RadixMachine,), {"stats": {}, "page_size": page})
    run_state_machine_as_test(machine, settings=settings(machine_settings("ci"), max_examples=10,
                                                         stateful_step_count=25))
    stats = machine.stats
    # a hit of whole pages, directed (the derandomized draws meet one only now and then)
    m = machine()
    m.finish(m.admit([1, 2, 3, 1, 2, 3]))
    m.admit([1, 2, 3, 1, 2, 3, 1])
    m.check_attention()
    assert stats.get("admit:paged_hit", 0) > 0 and stats.get("admit:hit=6", 0) > 0, stats
    assert stats["attention_checks"] > 0, stats
    assert stats.get("rule:finish", 0) > 0, stats
    assert stats.get("trace_steps", 0) > 0, stats  # validated against RadixIndex.tla with PageSize = page
    assert not any(k.startswith("admit:hit=") and int(k.split("=")[1]) % page for k in stats), stats


def test_radix_machine_catches_a_stale_slot():
    """Poisoned (freed) slots are NaN: a table that still points at an evicted slot fails the check."""
    from kvexact.conformance.machines.radix import RadixMachine

    m = RadixMachine()
    m.admit([1, 2, 3])
    rid = next(iter(m.live))
    m.live[rid][1][0] = sorted(m.state.free_slot_ids)[0]  # corrupt: point at a free (poisoned) slot
    with pytest.raises(ConformanceFailure, match="differs from float64"):
        m.check_attention()


def test_vmm_machine_catches_a_wrong_translation(monkeypatch):
    """A translation that ignores the slot reads another request's bytes: check_reads must fail."""
    from kvexact.conformance.machines.vmm import VmmMachine
    from kvexact.reference import vmm

    m = VmmMachine()
    for slot in (0, 1):
        m.alloc_slot(slot)
        m.grow_slot(slot, 2, asynchronous=slot == 1)
    m.check_reads()
    real = vmm.translate
    monkeypatch.setattr(vmm, "translate", lambda st, k, layer, slot, t, h, d: real(st, k, layer, 0, t, h, d))
    with pytest.raises(ConformanceFailure, match="reads"):
        m.check_reads()


def _started_machine():
    machine = machine_class("KVAllocation")()
    assert machine.ref.start("r1", [1, 2, 3]).accepted
    return machine


def test_pool_gauges_reconcile_on_the_live_reference_and_catch_a_wrong_refcount():
    from kvexact.reference.telemetry import allocator_pool_snapshot, reconcile_pool

    m = _started_machine()
    cfg = m.config
    for g in range(cfg.num_groups):
        gauges = reconcile_pool(allocator_pool_snapshot(m.ref.alloc, g))
        used = -(-3 // cfg.block_tokens)  # three tokens in blocks of block_tokens
        assert dict(gauges.blocks_by_state) == {"free": cfg.blocks_per_group - used, "evictable": 0, "live": used,
                                                "reserved_or_copying": 0}
        assert gauges.refcount_recorded == gauges.refcount_derived == used
    m.pool_gauges_reconcile()
    block = next(iter(m.ref.alloc.pools[1].refs))
    m.ref.alloc.pools[1].refs[block] += 1  # a reference nobody holds
    with pytest.raises(ConformanceFailure, match="group 1: recorded references 3 != derived 2"):
        m.pool_gauges_reconcile()


def test_the_projection_is_checked_against_the_specs_invariants_after_every_step():
    from kvexact.conformance.machines.allocator import spec_constants
    from kvexact.conformance.trace import trace_from_recorder, validate
    from kvexact.spec import spec_dir
    from kvexact.spec.checker.values import from_python, to_python

    m = _started_machine()
    m.projection_keeps_the_spec_invariants()
    assert m.stats["projection_checks"] >= 1
    state = m.ref.recorder.records[-1]["state"]  # checker values: rows[g] is a sequence over Blocks 1..n
    rows = to_python(state["rows"])
    rows[0] = (99, *rows[0][1:])  # more valid rows than a block holds: outside TypeOK's 0..P
    state["rows"] = from_python(rows)
    with pytest.raises(ConformanceFailure, match="breaks the spec's invariant TypeOK"):
        m.projection_keeps_the_spec_invariants()
    trace = trace_from_recorder(m.ref.recorder, spec_constants("KVAllocation", m.config), m._model_values())
    result = validate(trace, spec_dir() / "KVAllocation.tla", spec_dir() / "KVAllocation.cfg")
    assert not result.ok and "invariant TypeOK does not hold after the step" in result.summary()


def test_radix_reference_step_names_are_the_spec_actions():
    """Every step the Radix machine records is named after a RadixIndex action (snake_case)."""
    from kvexact.conformance.machines.radix import RadixMachine
    from kvexact.spec.checker.model import snake_case, spec_actions

    m = type("R", (RadixMachine,), {"stats": {}, "check_kernels": False})()
    m.admit([1, 2, 3])
    m.admit([1, 2, 1])
    m.decode("q0", 3)
    m.finish_request("q0")
    m.cancel_request("q1")
    m.evict(6)
    steps = {r["action"] for r in m.trace.records}
    assert steps == {"match_and_lock", "reserve", "decode", "cache_finished", "release_request", "evict_node"}
    assert steps <= {snake_case(a) for a in spec_actions("RadixIndex")}
    m.teardown()
    assert m.stats["trace_steps"] == len(m.trace.records)


def _cache_finished_keeping_the_lock(state, request_id, tokens, slot_ids):
    """cache_finished without dropping the request's lock: the reference's own checks pass (the lock count
    still matches a holder), the spec's CacheFinished step does not."""
    from kvexact.reference import radix

    d = radix._draft(state)
    ins = d.insert(tuple(tokens), tuple(slot_ids), request_id)
    d.release_private(request_id, d.private.get(request_id, ()))
    d.requests.pop(request_id, None)
    return radix._committed("cache_finished", state, d, splits=ins.splits, duplicate_slot_ids=ins.duplicate_slot_ids)


def _decode_into_anothers_tail(state, request_id, token, slot_id):
    """decode that files the new slot under another request's private tail: the pool partition holds, the
    spec's Decode step (the slot joins the decoding request's tail) does not."""
    from kvexact.reference import radix

    other = next(r for r in sorted(state.private_slot_ids) if r != request_id)
    after, receipt = radix.reserve(state, other, (slot_id,))
    return after, receipt


@pytest.mark.parametrize(("step", "bug", "at"), [("cache_finished", _cache_finished_keeping_the_lock, 6),
                                                 ("decode", _decode_into_anothers_tail, 5)])
def test_a_planted_wrong_radix_step_is_caught_at_its_step(monkeypatch, step, bug, at):
    """A wrong normative index step that its own checks accept is caught by the step validation, at that step
    (the steps before it are right, even the buggy finish of a lease on the root)."""
    from kvexact.conformance.machines.radix import RadixMachine
    from kvexact.reference import radix

    monkeypatch.setattr(bug, "__name__", step)  # the machine records a step by its function's name
    monkeypatch.setattr(radix, step, bug)
    m = type("R", (RadixMachine,), {"stats": {}, "check_kernels": False})()
    m.admit([1, 2, 3])  # steps 1-2: match_and_lock, reserve
    if step == "decode":
        m.admit([2, 2])  # steps 3-4
        m.decode("q1", 3)  # step 5: the slot is filed under q0
    else:
        m.finish_request("q0")  # step 3 (a lease on the root holds no lock to keep)
        m.admit([1, 2])  # steps 4-5: a hit of two tokens (a split), locked, nothing to reserve
        m.finish_request("q1")  # step 6: keeps the lock on the node of [1, 2]
    m.index_partition_holds()  # the reference's own checks pass
    with pytest.raises(ConformanceFailure, match=rf"RadixIndex: trace leaves the spec at step {at} \({step}"):
        m.teardown()
