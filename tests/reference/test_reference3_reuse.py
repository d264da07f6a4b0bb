"""Declared modules (0x0CB), session receipts (0x0CC) and the unified reuse gate (0x0CD, 0x0CG rule)."""

from __future__ import annotations

import attrs
import pytest

from kvexact.reference import labs
from kvexact.reference import modules as pm
from kvexact.reference import reuse_gate as g
from kvexact.reference import sessions as ss
from kvexact.reference.labs import modules as pm_lab
from kvexact.reference.labs import reuse_gate as g_lab
from kvexact.reference.labs import sessions as ss_lab
from kvexact.reference.rejections import Rejected, rejection_of


# ---- 0x0CB -----------------------------------------------------------------------------------------
def test_module_hit_is_the_conjunction_of_four_equalities():
    base = pm_lab.sample_receipt()
    assert pm.module_hit(base, base)
    for change in ({"token_ids": (501, 502, 504)}, {"position_ids": (4, 5, 6)}, {"schema_generation": 3},
                   {"semantic_manifest_digest": "sem-2"}):
        assert not pm.module_hit(base, attrs.evolve(base, **change)), change


def test_declared_prompt_assembles_in_position_order_with_gaps():
    lookups: list[str] = []
    cache = {("travel-plan", "city", "p0"): pm_lab.sample_receipt()}
    items = [pm.PromptItem("question", (7, 8), cached=False), pm.PromptItem("city", (501, 502, 503), True, "p0"),
             pm.PromptItem("system", (1, 2, 3, 4), cached=False)]
    segs = pm.assemble_declared_prompt("alice", "travel-plan", 2, items, pm_lab.SCHEMA, cache, pm_lab.NS, "sem-1", "lay-1",
                                       lookups)
    assert [s.module_id for s in segs] == ["system", "city", "question"]
    assert [s.source for s in segs] == ["compute", "cache", "compute"]
    positions = [p for s in segs for p in s.position_ids]
    assert positions == [0, 1, 2, 3, 6, 7, 8, 9, 10]  # discontinuous: 4 and 5 are the declared gap
    assert lookups == ["city"]


def test_no_module_lookup_happens_before_authorization():
    lookups: list[str] = []
    with pytest.raises(Rejected) as exc:
        pm.assemble_declared_prompt("mallory", "travel-plan", 2, [pm.PromptItem("city", (501, 502, 503), True, "p0")],
                                    pm_lab.SCHEMA, {}, pm_lab.NS, "sem-1", "lay-1", lookups)
    assert exc.value.reason is pm.ModuleRejection.UNAUTHORIZED_NAMESPACE and lookups == []


# ---- 0x0CC -----------------------------------------------------------------------------------------
def test_session_resume_prefills_only_new_tokens_when_compatible():
    plan = ss.plan_turn(ss_lab.RECEIPT, ss_lab.TURN)
    assert plan.resume and plan.prefill_tokens == ss_lab.TURN.new_tokens == 16
    assert ss.plan_turn(None, ss_lab.TURN).prefill_tokens == 120 + 16


def test_matching_session_id_alone_is_not_enough():
    plan = ss.plan_turn(ss_lab.RECEIPT, attrs.evolve(ss_lab.TURN, semantic_digest="sem-adapter-2"))
    assert not plan.resume and plan.prefill_tokens == 136 and plan.rejection is ss.SessionRejection.SEMANTIC_CHANGED


# ---- 0x0CD -----------------------------------------------------------------------------------------
def test_accepted_attempt_runs_the_ten_steps_in_order_and_releases_its_lease():
    out = g.run_transaction(g_lab.RUNTIME, g_lab.request("q1"))
    assert out.rejection is None and out.steps == g.STEPS and len(g.STEPS) == 10
    assert out.runtime.leases == {}
    ev = out.receipt.evidence
    assert (ev.namespace_generation, ev.semantic_digest, ev.layout_digest, ev.index_version, ev.tree_version,
            ev.pool_generations, ev.mapping_frontier_tokens, ev.execution_snapshot_version) == \
        (2, "sem-1", "lay-1", 7, 18, (5, 2), 32, 4)


def test_lease_is_held_between_acquire_and_release():
    rt, receipt = g.acquire_executable_reuse(g_lab.RUNTIME, g_lab.request("q1"))
    assert rt.leases == {receipt.lease_id: g_lab.REFS}
    rt2, steps = g.execute_and_release(rt, receipt)
    assert rt2.leases == {} and steps[-2:] == ("execute", "release_or_publish")


def test_unauthorized_attempt_performs_no_lookup():
    out = g.attempt(g_lab.RUNTIME, g_lab.request(principal="mallory"))
    assert out.rejection is g.ReuseRejection.UNAUTHORIZED_PRINCIPAL
    assert out.lookups == 0 and out.steps == ("authorize_namespace",)


def test_pending_async_map_is_awaited_before_the_snapshot():
    rt = attrs.evolve(g_lab.RUNTIME, ready_mapping_frontier_tokens=16)
    out = g.attempt(rt, g_lab.request())
    assert out.rejection is None and out.receipt.evidence.mapping_frontier_tokens == 48
    assert out.steps.index("wait_mapping") < out.steps.index("freeze_snapshot")


@pytest.mark.parametrize("runtime_change, request_change, reason", [
    ({}, {"principal": "mallory"}, "UNAUTHORIZED_PRINCIPAL"),
    ({"block_generations": {(0, 0, 3): 6, (0, 0, 7): 2}}, {}, "STALE_POOL_GENERATION"),
    ({"tree_version": 19}, {}, "STALE_TREE_VERSION"),
    ({"index_version": 9}, {}, "STALE_INDEX_VERSION"),
    ({"execution_snapshot_version": 5}, {}, "STALE_EXECUTION_SNAPSHOT"),
    ({}, {"namespace_generation": 1}, "STALE_NAMESPACE_GENERATION"),
])
def test_fallback_recomputes_rather_than_reusing_a_stale_or_unauthorized_object(runtime_change, request_change,
                                                                                 reason):
    rt = attrs.evolve(g_lab.RUNTIME, **runtime_change)
    after, decision = g.reuse_or_recompute(rt, g_lab.request("q", **request_change))
    assert decision.mode == "recompute" and decision.receipt is None
    assert decision.rejection is g.ReuseRejection[reason]
    assert decision.prefill_tokens == 40  # every token recomputed
    assert after.leases == {}  # nothing of the stale object stays leased


def test_fresh_object_is_reused():
    _, decision = g.reuse_or_recompute(g_lab.RUNTIME, g_lab.request("q"))
    assert decision.mode == "reuse" and decision.prefill_tokens == 40 - 32


def test_loop_11_cases_are_at_least_27_and_rejected_by_name():

    cases = labs.cases("0x0CG")
    assert len(cases) >= 27
    for case in cases:
        assert rejection_of(case.trigger) is case.reason, case.description


def test_salt_separates_keys_but_does_not_authorize():
    toks = tuple(range(100, 132))
    a = g.concrete_key("salt-a", "sem-1", "lay-1", toks)
    assert a == g.concrete_key("salt-a", "sem-1", "lay-1", toks)
    assert a != g.concrete_key("salt-b", "sem-1", "lay-1", toks)
    cand = attrs.evolve(g_lab.CANDIDATE, concrete_key=a)
    rt = attrs.evolve(g_lab.RUNTIME, index={("ns-a", a): cand})
    # knowing the salted key is not authorization: rejected before any lookup
    out = g.attempt(rt, g_lab.request(principal="mallory", key=a))
    assert out.rejection is g.ReuseRejection.UNAUTHORIZED_PRINCIPAL and out.lookups == 0
    assert g.attempt(rt, g_lab.request(key=a)).rejection is None
