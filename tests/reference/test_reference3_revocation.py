"""Namespace revocation (0x0CE): the reference twin of spec/NamespaceRevocation.tla."""

from __future__ import annotations

import pathlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvexact.reference import revocation as rv
from kvexact.reference.labs import revocation as rv_lab
from kvexact.reference.rejections import Rejected

SPEC = pathlib.Path(__file__).resolve().parents[2] / "spec" / "NamespaceRevocation.tla"


@pytest.fixture(scope="module")
def model():
    """The spec with its constants bound to the reference's: two tenants, both revocable, blocks {1, 2}."""
    from kvexact.spec.checker import ModelValue, load_model

    init = rv.RevState.init()
    tenants = frozenset(ModelValue(t) for t in init.tenants)
    return load_model(SPEC, None, {"Tenants": tenants, "Revocable": tenants, "Blocks": frozenset(init.blocks),
                                   "MaxGen": init.max_gen, "NoTenant": ModelValue(rv.NO_TENANT)})


def test_action_names_match_the_spec():
    """One step function per action of the spec's Next, named for it (snake_case); records carry the
    spec's name."""
    from kvexact.spec.checker.model import snake_case, spec_actions

    actions = spec_actions("NamespaceRevocation")
    assert {snake_case(a) for a in actions} == {fn.__name__ for fn in rv.STEPS}
    assert len(rv.STEPS) == len(actions)
    _, record = rv.arrive(rv.RevState.init(), "t1", "t1")
    assert record["action"] == "Arrive"


def test_projection_covers_exactly_the_spec_variables():
    text = SPEC.read_text()
    declared = re.search(r"VARIABLES(.*?)\n\nvars", text, re.S).group(1)
    names = re.findall(r"^\s+(\w+),?\s*\\\*", declared, re.M)
    assert tuple(names) == rv.SPEC_VARIABLES == tuple(rv.project_state(rv.RevState.init()))


def test_seven_steps_in_order_and_completion_leaves_nothing_of_the_old_generation():
    trace = rv_lab.seven_step_scenario()
    revoke = [r["action"] for r in trace if r["action"].startswith("Revoke")]
    assert revoke == ["RevokeStopAdmission", "RevokeAdvanceGeneration", "RevokeInvalidateIndex", "RevokeCancelLease",
                      "RevokeLeasesDrained", "RevokeReleaseBlocks", "RevokePurgeExternal", "RevokeComplete"]
    final = trace[-1]["state"]
    assert final["index"] == {"#set": []} and final["leases"] == {"#set": []}
    assert final["receipts"] == {"#set": []} and final["external"] == {"#set": []}
    done = {k["#unserializable"]: v for k, v in final["done"]["#map"]}
    assert done == {"t1": {"#bigint": "1"}, "t2": {"#bigint": "0"}}
    assert all(set(r) == {"action", "params", "state"} for r in trace)


def test_every_scenario_record_is_a_step_of_its_spec_action(model):
    s = rv.RevState.init()
    prev = rv.project_tla(s)
    plan = rv_lab.PUBLISH_T1 + [(rv.offload, (rv.Entry("t1", 0, 1),))] + rv_lab.LEASE_T1 + [(rv.execute, ("t1",))] \
        + rv_lab.REVOKE_T1
    for fn, args in plan:
        s, rec = fn(s, *args)
        cur = rv.project_tla(s)
        params = {"e": rv.entry_tla(args[0])} if rec["action"] == "Offload" else None
        verdict = model.check_step(rec["action"], prev, cur, params)
        assert verdict.ok, (rec["action"], verdict)
        prev = cur


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=25))
def test_random_walks_are_spec_steps_and_keep_every_invariant(model, choices):
    s = rv.RevState.init()
    for c in choices:
        options = rv.enabled_steps(s)
        if not options:
            break
        name, params, take = options[c % len(options)]
        before = rv.project_tla(s)
        s, rec = take()
        verdict = model.check_step(name, before, rv.project_tla(s), {k: rv.param_tla(v) for k, v in params.items()})
        assert verdict.ok, (name, params, verdict)
        for inv, holds in rv.INVARIANTS.items():
            assert holds(s), inv


def test_disabled_action_is_refused_by_name_and_changes_nothing():
    s = rv.RevState.init()
    with pytest.raises(Rejected) as exc:
        rv.revoke_purge_external(s, "t1")
    assert exc.value.reason is rv.RevocationRejection.REVOCATION_STEP_OUT_OF_ORDER
    assert s == rv.RevState.init()


def test_recycled_block_is_scrubbed_before_a_new_owner_sees_it():
    s = rv.play(rv.RevState.init(), rv_lab.PUBLISH_T1 + rv_lab.REVOKE_T1[:3] + [(rv.revoke_leases_drained, ("t1",)),
                                                                         (rv.revoke_release_blocks, ("t1",))])[0]
    assert s.bytes_[1] == "t1" and s.owner[1] == rv.NO_OWNER  # released, stale bytes still there
    s, _ = rv.play(s, [(rv.arrive, ("t2", "t2")), (rv.authorize, ("t2",)), (rv.lookup, ("t2",)),
                       (rv.allocate, ("t2", 1))])
    assert s.owner[1] == rv.Owner("t2", 0) and s.bytes_[1] == rv.NO_TENANT
    assert rv.no_stale_bytes(s)


def test_itf_projection_decodes_to_the_checkers_values():
    from kvexact.spec import itf

    s = rv.play(rv.RevState.init(), rv_lab.PUBLISH_T1 + rv_lab.LEASE_T1)[0]
    assert itf.decode_state(rv.project_state(s)) == rv.project_tla(s)


def test_reference_successors_equal_the_specs_over_a_breadth_first_prefix(model):
    """Both directions: the reference enables exactly the spec's steps (first 400 states in BFS order
    of the CI model, two tenants and two blocks)."""
    init = rv.RevState.init()
    seen = {model.key(rv.project_tla(init))}
    frontier = [init]
    explored = 0
    while frontier and explored < 400:
        s = frontier.pop(0)
        explored += 1
        tla = rv.project_tla(s)
        spec_successors = set()
        for action in model.actions:
            out: list = []
            model.successors(tla, action, out)
            spec_successors.update(model.key(n) for n in out)
        ours = {}
        for _name, _params, take in rv.enabled_steps(s):
            t = take()[0]
            ours[model.key(rv.project_tla(t))] = t
        assert set(ours) == spec_successors, f"state #{explored}"
        for key, t in ours.items():
            if key not in seen:
                seen.add(key)
                frontier.append(t)
    assert explored == 400
