"""The adapter-side golden cases (seed_cases_adapters.py, issue #25): each passes on the
reference, is registered, and fails, naming itself, on a mutant of reference/ that survived the
quick gate before it (the fresh seed-61 sample; cosmic-ray's mutated line applied to a copy of the module)."""

from __future__ import annotations

import pytest
import seed_cases_adapters
from golden import (  # one line replaced, as cosmic-ray writes it
    assert_cases_pass_and_are_registered,
    mutant_module,
    run_case,
)

from kvexact.reference import adapters
from kvexact.reference.peers import vllm_hybrid, vllm_pool


def test_every_adapter_case_passes_and_is_registered():
    assert_cases_pass_and_are_registered(seed_cases_adapters.CASES)


# (module, attribute to patch ("Class.attr" for a method), line before, line after, case): the seed-61 survivors
SURVIVORS = [
    (adapters, "project_cow_publication",
     'snap[x] = {"on": False, "tables": Fn({g: [] for g in groups}), "len": 0, "tokens": []}',
     'snap[x] = {"on": False, "tables": Fn({g: [] for g in groups}), "len": -1, "tokens": []}',
     "adapter idle projections"),
    (adapters, "project_kv_allocation", "if r in alloc.requests else alloc.ended.get(r, 0)",
     "if r in alloc.requests else alloc.ended.get(r, -1)", "adapter idle projections"),
    (adapters, "TraceRecorder._kv_history",
     'if len(kept) < len(old) and prev["ref"][g][b] == 1 and prev["ident"][g][b] == 0:',
     'if len(kept) < len(old) and prev["ref"][g][b] >= 1 and prev["ident"][g][b] == 0:', "adapter stale tail"),
    (adapters, "ReferenceAdapter.__init__", "config.row_bytes[g % len(config.row_bytes)]",
     "config.row_bytes[g - len(config.row_bytes)]", "adapter geometry"),
    (vllm_hybrid, "publish_request",
     "hit = find_longest_cache_hit(pool, specs, hashes, hash_block_size, num_tokens - 1).hit_length",
     "hit = find_longest_cache_hit(pool, specs, hashes, hash_block_size, num_tokens // 1).hit_length",
     "vllm hybrid duplicates s16"),
    (vllm_pool, "PoolState.check", "for b in range(1, self.num_blocks):", "for b in range( 2, self.num_blocks):",
     "vllm pool self-check"),
    # the named survivors of issue #25 (main d15a566): the delayed writer's tail and its fence
    (adapters, "ReferenceAdapter.truncate", "if old_tails and old_tails[-1] in released.freed_handles:",
     "if old_tails and old_tails[not 1] in released.freed_handles:", "adapter delayed writer"),
    (adapters, "ReferenceAdapter.stale_write",
     'if result.rejection in ("STALE_BLOCK_GENERATION", "HANDLE_NOT_OWNED"):',
     'if not result.rejection in ("STALE_BLOCK_GENERATION", "HANDLE_NOT_OWNED"):', "adapter delayed writer"),
    # survivors of the seed-1001 sample over reference.adapters (issue #25 exploration)
    (adapters, "_request_vars", "lens[r] = rec.context_tokens if rec else 0", "lens[r] = rec.context_tokens if rec else 1",
     "adapter idle projections"),
    (adapters, "ReferenceAdapter.start", "for j in range((len(prompt) - 1) // p):",
     "for j in range((len(prompt) - 1) * p):", "adapter prefix cap"),
    (adapters, "ReferenceAdapter.start", "for t in prompt[len(hit) * p:]]", "for t in prompt[len(hit) ** p:]]",
     "adapter prefix cap"),
    # neighbours in the projections and the recorder, which the spec-validated traces catch
    (adapters, "project_kv_allocation", "ref[g][b] = pool.refcount(b) - other[g].get(b, 0)",
     "ref[g][b] = pool.refcount(b) + other[g].get(b, 0)", "adapter traces"),
    (adapters, "project_kv_allocation", "rows[g][b] = 0 if pool.state_of(b) is BlockState.FREE else rec.valid_rows",
     "rows[g][b] = 0 if pool.state_of(b) is not BlockState.FREE else rec.valid_rows", "adapter traces"),
    (adapters, "project_kv_allocation", 'mine["phase"] = "ready" if open_txn.publication_state == "READY_TO_PUBLISH"',
     'mine["phase"] = "ready" if open_txn.publication_state != "READY_TO_PUBLISH"', "adapter traces"),
    (adapters, "project_cow_publication", "valid[g][b] = 0 if (not live or pending) else rec.valid_rows",
     "valid[g][b] = 0 if (live or pending) else rec.valid_rows", "adapter traces"),
    (adapters, "project_cow_publication", "pending = rec.reserved_by is not None and not validated",
     "pending = rec.reserved_by is not None or not validated", "adapter traces"),
    (adapters, "no_stale", '{"grp": min(groups), "block": NO_STALE_BLOCK, "gen": 0}',
     '{"grp": max(groups), "block": NO_STALE_BLOCK, "gen": 0}', "adapter traces"),
    (adapters, "ReferenceAdapter._publish", "self.positions[digest.hex()] = j + 1",
     "self.positions[digest.hex()] = j + 2", "adapter traces"),
    (adapters, "ReferenceAdapter._publish", "if tokens != self.stream[: len(tokens)]:",
     "if tokens == self.stream[: len(tokens)]:", "adapter traces"),
    # the seed-1010 sample over the five modules: the recorder's history variables (here: the snapshot a first reservation records)
    (adapters, "TraceRecorder._kv_history",
     'if action == "append_reserve" and prev["txn"][r]["phase"] == "idle":',
     'if action == "append_reserve" and prev["txn"][r]["phase"] != "idle":', "adapter traces"),
]


@pytest.mark.parametrize("module, name, before, after, case", SURVIVORS,
                         ids=lambda v: v if isinstance(v, str) and " " not in v else None)
def test_a_seed61_survivor_fails_its_adapter_case(monkeypatch, module, name, before, after, case):
    copy = mutant_module(monkeypatch, module, before, after)
    owner, _, attr = name.rpartition(".")
    target = getattr(module, owner) if owner else module
    replacement = getattr(getattr(copy, owner) if owner else copy, attr)
    monkeypatch.setattr(target, attr, replacement)
    result = run_case(case)
    assert result.passed is False, f"{case} passed with {after!r}"
    assert case in result.detail


def _stale_scenario_validation():
    """The 'adapter stale tail' scenario recorded by the reference and validated as KVAllocation steps."""
    from kvexact.conformance.trace import validate_recorded
    from kvexact.spec import spec_dir

    a = adapters.ReferenceAdapter(adapters.AdapterConfig(), requests=["r", "s"])
    a.start("r", [1, 2, 3, 4])
    a.cache("r")
    a.start("s", [1, 2, 3, 4, 5])
    a.evict((1, 2, 3, 4))
    a.truncate("r", 2)
    a.truncate("s", 2)
    constants = {"Groups": {0, 1}, "Blocks": set(range(1, 7)), "Requests": {"r", "s"}, "NoReq": "NoReq", "P": 2,
                 "MaxTokens": 32, "MaxGen": 64, "MaxEpoch": 64, "MaxVersion": 64, "Concurrent": 1,
                 "TailPolicy": "eager"}
    return validate_recorded(a.recorder, constants, spec_dir() / "KVAllocation.tla", spec_dir() / "KVAllocation.cfg")


def test_the_stale_tail_scenario_is_a_trace_of_kvallocation_and_the_mutant_is_not(monkeypatch):
    """The case's expected ``stale`` values are KVAllocation's: its recorded trace validates against the spec, and
    the recorder that sets ``stale`` for a dropped block still shared (ref 2) breaks the truncate step."""
    result = _stale_scenario_validation()
    assert result.ok, result.summary()
    assert result.actions["truncate"] == 2 and result.actions["evict"] >= 1
    _module, _name, before, after, _case = SURVIVORS[2]
    copy = mutant_module(monkeypatch, adapters, before, after)
    monkeypatch.setattr(adapters.TraceRecorder, "_kv_history", copy.TraceRecorder._kv_history)
    broken = _stale_scenario_validation()
    assert not broken.ok and broken.failure is not None and broken.failure.action == "truncate"


def _reader_scenario_validation():
    """r starts with 3 tokens, reader x snapshots r and releases it (reader y never takes one), recorded by the
    reference and validated as CowPublication steps."""
    from kvexact.conformance.trace import validate_recorded
    from kvexact.reference import lifecycle
    from kvexact.reference.pool import QueuePolicy
    from kvexact.spec import spec_dir

    a = adapters.ReferenceAdapter(adapters.AdapterConfig(), spec="CowPublication", requests=["r"],
                                  readers=["x", "y"], policy=QueuePolicy.LOWEST_ID)
    a.start("r", [1, 2, 3])
    lifecycle.reader_snapshot(a.alloc, "x", "r")
    lifecycle.reader_release(a.alloc, "x")
    constants = {"Groups": {0, 1}, "Blocks": set(range(1, 7)), "Requests": {"r"}, "NoReq": "NoReq", "P": 2,
                 "MaxTokens": 32, "MaxGen": 64, "MaxEpoch": 64, "MaxVersion": 64, "Readers": {"x", "y"},
                 "Tokens": {1, 2, 3}, "Concurrent": 1}
    return validate_recorded(a.recorder, constants, spec_dir() / "CowPublication.tla",
                             spec_dir() / "CowPublication.cfg")


def test_the_reader_scenario_is_a_trace_of_cowpublication_and_the_mutant_is_not(monkeypatch):
    """The case's NoSnap is CowPublication's: a snapshot taken and released validates against the spec, and a
    projection that gives a reader without a snapshot length -1 breaks it."""
    result = _reader_scenario_validation()
    assert result.ok, result.summary()
    assert result.actions["reader_snapshot"] == 1 and result.actions["reader_release"] == 1
    _module, _name, before, after, _case = SURVIVORS[0]
    copy = mutant_module(monkeypatch, adapters, before, after)
    monkeypatch.setattr(adapters, "project_cow_publication", copy.project_cow_publication)
    assert not _reader_scenario_validation().ok
