"""The counters of the specs reproduce the seed's worked traces (0x05B, 0x04F, 0x05E), step by step.

Each test builds the seed's states (handles, generations, versions, epoch as the seed prints them;
the blocks the seed does not show are reconstructed and say so) and asks the embedded checker's step
API whether each transition is a step of the named spec action. Counter values that differ from the
seed's rule (an epoch that advances on an in-place append, one that does not on a COW publication)
must be rejected, so these tests can fail.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from kvexact.spec import spec_dir
from kvexact.spec.checker import ModelValue, load_model

A, D, F, X, NOREQ = (ModelValue(n) for n in ("a", "d", "f", "x", "NoReq"))
G0_BLOCKS, G1_BLOCKS = (1000, 1001, 1002, 1003), (2000, 2001, 2002, 2003)
BLOCKS = G0_BLOCKS + G1_BLOCKS
P = 16

# The module's two models take most of its time to load: one xdist worker runs all its tests.
pytestmark = pytest.mark.xdist_group("spec-seed-traces")


def _cfg(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "seed.cfg"
    path.write_text(text)
    return path


def _set(state, path: tuple, value):
    """A copy of ``state`` with the value at ``path`` replaced (through dicts and tuples)."""
    if not path:
        return value
    key, rest = path[0], path[1:]
    if isinstance(state, tuple):
        return state[:key] + (_set(state[key], rest, value),) + state[key + 1:]
    new = dict(state)
    new[key] = _set(state[key], rest, value)
    return new


def _evolve(state: dict, *changes: tuple) -> dict:
    for *path, value in changes:
        state = _set(state, tuple(path), value)
    return state


def _h(block: int, gen: int) -> dict:
    return {"block": block, "gen": gen}


# ---------------------------------------------------------------------------------------------
# CowPublication: 0x05B, one complete two-group COW trace


@pytest.fixture(scope="module")
def cow_model(tmp_path_factory):
    tokens = "34, 35"  # the tokens appended in the trace (fewer constants: a faster model load)
    cfg = _cfg(tmp_path_factory.mktemp("cow"), f"""
CONSTANTS
    Groups = {{0, 1}}
    Blocks = {{{", ".join(map(str, BLOCKS))}}}
    Requests = {{a, d}}
    Readers = {{x}}
    NoReq = NoReq
    Tokens = {{{tokens}}}
    P = 16
    MaxTokens = 48
    MaxGen = 20
    MaxEpoch = 50
    MaxVersion = 10
    Concurrent = 1
INIT Init
NEXT Next
""")
    return load_model(spec_dir() / "CowPublication.tla", cfg)


def _cow_a_at_33() -> dict:
    """A predecessor (0x05B): context 33, table_version 5, tail g0=1002@9, g1=2002@12, 1 row, refs 1;
    epoch 43. Reconstructed: A's two full blocks 1000/1001 and 2000/2001 (generation 1), token id of
    position i is i, bundle stamps 10, 20, 43 (the tail bundle was published at epoch 43), free
    destinations 1003@11 and 2003@5 (so that reserving them gives the seed's 1003@12 and 2003@6)."""
    gen = {0: {b: 0 for b in BLOCKS}, 1: {b: 0 for b in BLOCKS}}
    gen[0].update({1000: 1, 1001: 1, 1002: 9, 1003: 11})
    gen[1].update({2000: 1, 2001: 1, 2002: 12, 2003: 5})
    data: dict = {g: {b: () for b in BLOCKS} for g in (0, 1)}
    valid: dict = {g: {b: 0 for b in BLOCKS} for g in (0, 1)}
    ref: dict = {g: {b: 0 for b in BLOCKS} for g in (0, 1)}
    bundle: dict = {g: {b: 0 for b in BLOCKS} for g in (0, 1)}
    for g, blocks in ((0, G0_BLOCKS), (1, G1_BLOCKS)):
        for i, (b, rows, stamp) in enumerate(zip(blocks[:3], (16, 16, 1), (10, 20, 43), strict=True)):
            data[g][b] = tuple(range(i * P + 1, i * P + rows + 1))
            valid[g][b] = rows
            ref[g][b] = 1
            bundle[g][b] = stamp
    tables = {A: {g: tuple(_h(b, gen[g][b]) for b in blocks[:3]) for g, blocks in ((0, G0_BLOCKS),
                                                                                   (1, G1_BLOCKS))},
              D: {0: (), 1: ()}}
    no_snap = {"on": False, "tables": {0: (), 1: ()}, "len": 0, "tokens": ()}
    return {"data": data, "valid": valid, "ref": ref, "gen": gen, "bundle": bundle, "tables": tables,
            "len": {A: 33, D: 0}, "tokens": {A: tuple(range(1, 34)), D: ()}, "tver": {A: 5, D: 0},
            "epoch": 43, "txn": {A: _idle_txn(), D: _idle_txn()}, "snap": {X: no_snap}, "wrote": frozenset()}


def _idle_txn() -> dict:
    return {"phase": "idle", "tok": 0, "rows": 0, "src": {0: 0, 1: 0}, "dest": {0: 0, 1: 0},
            "copied": frozenset(), "written": frozenset()}


def _step(model, action: str, s: dict, successor: dict, **params):
    verdict = model.check_step(action, s, successor, params or None)
    assert verdict.ok, f"{action}: not a step: {verdict.failed} at {verdict.location}"
    return successor


def test_0x05B_two_group_cow_trace(cow_model):
    m = cow_model
    s0 = _cow_a_at_33()
    # A appends privately at token 33 (offset 1): context 34, version 5 -> 6, epoch stays 43.
    s1 = _evolve(s0, ("data", 0, 1002, (33, 34)), ("data", 1, 2002, (33, 34)), ("valid", 0, 1002, 2),
                 ("valid", 1, 2002, 2), ("len", A, 34), ("tokens", A, tuple(range(1, 35))), ("tver", A, 6),
                 ("wrote", frozenset({(0, 1002), (1, 2002)})))
    _step(m, "AppendInPlace", s0, s1, r=A, t=34)
    # Fork A to D: every mapped handle gains one strong reference (refs 2); D is published at version 1.
    s2 = _evolve(s1, ("tables", D, copy.deepcopy(s1["tables"][A])), ("len", D, 34),
                 ("tokens", D, tuple(range(1, 35))), ("tver", D, 1), ("wrote", frozenset()))
    for g, blocks in ((0, G0_BLOCKS), (1, G1_BLOCKS)):
        for b in blocks[:3]:
            s2 = _set(s2, ("ref", g, b), 2)
    _step(m, "Fork", s1, s2, r=A, c=D)
    # D appends token 35 at offset 2: the shared tail needs a COW transaction.
    txn = _idle_txn() | {"phase": "begun", "tok": 35, "rows": 2, "src": {0: 1002, 1: 2002}}
    s3 = _evolve(s2, ("txn", D, txn), ("ref", 0, 1002, 3), ("ref", 1, 2002, 3))
    _step(m, "CowBegin", s2, s3, r=D, t=35)
    s4 = _evolve(s3, ("gen", 0, 1003, 12), ("txn", D, "dest", 0, 1003))
    _step(m, "CowReserve", s3, s4, r=D, g=0, b=1003)
    s5 = _evolve(s4, ("gen", 1, 2003, 6), ("txn", D, "dest", 1, 2003))
    _step(m, "CowReserve", s4, s5, r=D, g=1, b=2003)
    s = s5
    for g, dst in ((0, 1003), (1, 2003)):  # copy rows [0, 2), then append row 2, per group
        c = _evolve(s, ("data", g, dst, (33, 34)), ("txn", D, "copied", s["txn"][D]["copied"] | {g}),
                    ("wrote", frozenset({(g, dst)})))
        _step(m, "CowCopy", s, c, r=D, g=g)
        w = _evolve(c, ("data", g, dst, (33, 34, 35)), ("txn", D, "written", c["txn"][D]["written"] | {g}))
        _step(m, "CowWrite", c, w, r=D, g=g)
        s = w
    s8 = _evolve(s, ("valid", 0, 1003, 3), ("valid", 1, 2003, 3), ("bundle", 0, 1003, 44),
                 ("bundle", 1, 2003, 44), ("txn", D, "phase", "validated"), ("wrote", frozenset()))
    _step(m, "CowValidate", s, s8, r=D)
    # Publish: D tail g0=1003@12, g1=2003@6, rows 3; context 35, version 1 -> 2; epoch 43 -> 44.
    s9 = _evolve(s8, ("tables", D, 0, 2, _h(1003, 12)), ("tables", D, 1, 2, _h(2003, 6)),
                 ("ref", 0, 1003, 1), ("ref", 1, 2003, 1), ("ref", 0, 1002, 2), ("ref", 1, 2002, 2),
                 ("len", D, 35), ("tokens", D, tuple(range(1, 36))), ("tver", D, 2), ("epoch", 44),
                 ("txn", D, "phase", "published"))
    _step(m, "CowPublish", s8, s9, r=D)
    # Release the source leases: old tail refs 2 -> 1.
    s10 = _evolve(s9, ("ref", 0, 1002, 1), ("ref", 1, 2002, 1), ("txn", D, _idle_txn()))
    _step(m, "CowReleaseSources", s9, s10, r=D)
    # The counter rule is not vacuous: other counter values are not steps of these actions.
    assert not m.check_step("CowPublish", s8, _set(s9, ("epoch",), 43), {"r": D}).ok
    assert not m.check_step("CowPublish", s8, _set(s9, ("tver", D), 3), {"r": D}).ok
    assert not m.check_step("AppendInPlace", s0, _set(s1, ("epoch",), 44), {"r": A, "t": 34}).ok
    assert not m.check_step("CowReserve", s3, _set(s4, ("gen", 0, 1003), 11), {"r": D, "g": 0, "b": 1003}).ok


# ---------------------------------------------------------------------------------------------
# KVAllocation: 0x04F rollback boundary, 0x05E truncate / reuse / stale writer / release / touch / evict

G = ModelValue("g")
KV_REQUESTS = (A, D, F, G)


@pytest.fixture(scope="module")
def kv_model(tmp_path_factory):
    cfg = _cfg(tmp_path_factory.mktemp("kv"), f"""
CONSTANTS
    Groups = {{0, 1}}
    Blocks = {{{", ".join(map(str, BLOCKS))}}}
    Requests = {{a, d, f, g}}
    NoReq = NoReq
    P = 16
    MaxTokens = 48
    MaxGen = 20
    MaxEpoch = 50
    MaxVersion = 10
    Concurrent = 1
    TailPolicy = "eager"
INIT Init
NEXT Next
""")
    return load_model(spec_dir() / "KVAllocation.tla", cfg)


def _per_block(value) -> dict:
    return {g: {b: value for b in BLOCKS} for g in (0, 1)}


def _kv_idle_txn() -> dict:
    return {"phase": "idle", "dest": {0: 0, 1: 0}, "prev": {0: 0, 1: 0}, "alone": True}


def _kv_reserved_txn(dest0: int) -> dict:
    """A boundary append that reserved dest0 in group 0 first (nothing evicted, nothing else ran since)."""
    return {"phase": "reserved", "dest": {0: dest0, 1: 0}, "prev": {0: 0, 1: 0}, "alone": True}


def _kv_init_snapshot() -> dict:
    return {"gen": _per_block(0), "ref": _per_block(0), "ident": _per_block(0), "rows": _per_block(0),
            "reserved": {0: frozenset(), 1: frozenset()}, "tables": {r: {0: (), 1: ()} for r in KV_REQUESTS},
            "len": {r: 0 for r in KV_REQUESTS}, "tver": {r: 0 for r in KV_REQUESTS}, "epoch": 0}


COMMITTED = ("gen", "ref", "ident", "rows", "reserved", "tables", "len", "tver", "epoch")
NO_STALE = {"grp": 0, "block": 0, "gen": 0}


def _kv_after_cow() -> dict:
    """The committed state after 0x05B: A [1000@1, 1001@1, 1002@9] at 34 tokens (version 6), D
    [1000@1, 1001@1, 1003@12] at 35 tokens (version 2), group 1 alike with 2000..2003, epoch 44.
    Reconstructed: the two full prefix blocks carry cached identities 1 and 2 (0x05E's "cached block
    0" and "cached block 1")."""
    gen, ref, ident, rows = _per_block(0), _per_block(0), _per_block(0), _per_block(0)
    for g, (b0, b1, tail_a, tail_d), (ga, gd) in ((0, G0_BLOCKS, (9, 12)), (1, G1_BLOCKS, (12, 6))):
        gen[g].update({b0: 1, b1: 1, tail_a: ga, tail_d: gd})
        ref[g].update({b0: 2, b1: 2, tail_a: 1, tail_d: 1})
        ident[g].update({b0: 1, b1: 2})
        rows[g].update({b0: 16, b1: 16, tail_a: 2, tail_d: 3})
    tables = {A: {0: (_h(1000, 1), _h(1001, 1), _h(1002, 9)), 1: (_h(2000, 1), _h(2001, 1), _h(2002, 12))},
              D: {0: (_h(1000, 1), _h(1001, 1), _h(1003, 12)), 1: (_h(2000, 1), _h(2001, 1), _h(2003, 6))},
              F: {0: (), 1: ()}, G: {0: (), 1: ()}}
    return {"gen": gen, "ref": ref, "ident": ident, "rows": rows, "reserved": {0: frozenset(), 1: frozenset()},
            "tables": tables, "len": {A: 34, D: 35, F: 0, G: 0}, "tver": {A: 6, D: 2, F: 0, G: 0}, "epoch": 44,
            "txn": {r: _kv_idle_txn() for r in KV_REQUESTS}, "hist": {r: _kv_init_snapshot() for r in KV_REQUESTS},
            "undone": {"on": False, "before": _kv_init_snapshot()}, "stale": NO_STALE, "pool": _queued(gen, ref, {}),
            "wroteCached": frozenset(), "sharedStep": False}


def _queued(gen: dict, ref: dict, reserved: dict) -> dict:
    """0x04B, 0x05E: the free+evictable queue of each group: blocks with refcount 0, not reserved."""
    return {g: frozenset(b for b in gen[g] if ref[g][b] == 0 and b not in reserved.get(g, ())) for g in gen}


def _kv_evolve(state: dict, *changes: tuple) -> dict:
    """A KVAllocation successor: the changes, then the free queue the seed's rule gives."""
    s = _evolve(state, *changes)
    return s | {"pool": _queued(s["gen"], s["ref"], s["reserved"])}


def _kv_set(state: dict, path: tuple, value) -> dict:
    return _kv_evolve(state, (*path, value))


def _snapshot(state: dict) -> dict:
    return {k: state[k] for k in COMMITTED}


def test_0x04F_failure_between_group_reservations_restores_the_predecessor(kv_model):
    m = kv_model
    s0 = _kv_set(_kv_after_cow(), ("epoch",), 43)  # the checked trace's epoch before the failed append
    # Reconstructed predecessor: D has not copied yet (it still maps A's tail), so 1003 and 2003 are free
    # at generations 12 and 6; F's boundary append reserves the group-0 destination first.
    s0 = _kv_evolve(s0, ("ref", 0, 1003, 0), ("rows", 0, 1003, 0), ("tables", D, 0, 2, _h(1002, 9)),
                 ("ref", 0, 1002, 2), ("tables", D, 1, 2, _h(2002, 12)), ("ref", 1, 2002, 2),
                 ("ref", 1, 2003, 0), ("rows", 1, 2003, 0), ("len", D, 34))
    s1 = _kv_evolve(s0, ("hist", F, _snapshot(s0)), ("gen", 0, 1003, 13), ("reserved", 0, frozenset({1003})),
                 ("txn", F, _kv_reserved_txn(1003)))
    _step(m, "AppendReserve", s0, s1, r=F, g=0, b=1003)
    # Injected failure before group 1 is reserved: the reservation returns, no request changes, the
    # epoch stays 43, and the committed state is exactly the predecessor's.
    s2 = _kv_evolve(s1, ("gen", 0, 1003, 12), ("reserved", 0, frozenset()), ("txn", F, _kv_idle_txn()),
                 ("hist", F, _kv_init_snapshot()), ("undone", {"on": True, "before": _snapshot(s0)}))
    _step(m, "AppendRollback", s1, s2, r=F)
    assert _snapshot(s2) == _snapshot(s0) == s2["undone"]["before"] and s2["epoch"] == 43
    # Keeping the advanced generation is not a rollback of this spec.
    assert not m.check_step("AppendRollback", s1, _kv_set(s2, ("gen", 0, 1003), 13), {"r": F}).ok


def test_0x05E_truncate_reuse_stale_writer_release_touch_evict(kv_model):
    m = kv_model
    s0 = _kv_after_cow()
    # truncate(D, 32): only D's suffix bundle goes; 1003@12 and 2003@6 return to the free queues; the
    # delayed D writer still holds 1003@12.
    s1 = _kv_evolve(s0, ("tables", D, {0: s0["tables"][D][0][:2], 1: s0["tables"][D][1][:2]}), ("len", D, 32),
                 ("tver", D, 3), ("ref", 0, 1003, 0), ("ref", 1, 2003, 0), ("rows", 0, 1003, 0),
                 ("rows", 1, 2003, 0), ("ref", 0, 1000, 2), ("stale", {"grp": 0, "block": 1003, "gen": 12}))
    _step(m, "Truncate", s0, s1, r=D, n=32)
    # allocate(F): reuses those block ids with generations 1003@13 and 2003@7.
    s2 = _kv_evolve(s1, ("hist", F, _snapshot(s1)), ("gen", 0, 1003, 13), ("reserved", 0, frozenset({1003})),
                 ("txn", F, _kv_reserved_txn(1003)))
    _step(m, "AppendReserve", s1, s2, r=F, g=0, b=1003)
    s3 = _kv_evolve(s2, ("gen", 1, 2003, 7), ("reserved", 1, frozenset({2003})), ("txn", F, "dest", 1, 2003))
    _step(m, "AppendReserve", s2, s3, r=F, g=1, b=2003)
    s4 = _kv_evolve(s3, ("rows", 0, 1003, 1), ("rows", 1, 2003, 1), ("txn", F, "phase", "ready"))
    _step(m, "AppendWrite", s3, s4, r=F)
    s5 = _kv_evolve(s4, ("tables", F, {0: (_h(1003, 13),), 1: (_h(2003, 7),)}), ("ref", 0, 1003, 1),
                 ("ref", 1, 2003, 1), ("reserved", {0: frozenset(), 1: frozenset()}), ("len", F, 1),
                 ("tver", F, 1), ("epoch", 45), ("txn", F, _kv_idle_txn()), ("hist", F, _kv_init_snapshot()))
    _step(m, "AppendPublish", s4, s5, r=F)
    # The stale D writer holding @12 is rejected (its generation is not the block's 13).
    s6 = _kv_set(s5, ("stale",), NO_STALE)
    _step(m, "StaleWriteRejected", s5, s6)
    assert not m.check_step("StaleWriteRejected", _kv_set(s5, ("gen", 0, 1003), 12),
                            _kv_evolve(s6, ("gen", 0, 1003, 12))).ok  # a current generation is not stale
    # release(A), then release(D): the full cached prefix blocks become EVICTABLE, not identity-free;
    # A's uncached tail 1002/2002 becomes free.
    s7 = _kv_evolve(s6, ("tables", A, {0: (), 1: ()}), ("len", A, 0), ("tver", A, 0), ("ref", 0, 1000, 1),
                 ("ref", 0, 1001, 1), ("ref", 1, 2000, 1), ("ref", 1, 2001, 1), ("ref", 0, 1002, 0),
                 ("ref", 1, 2002, 0), ("rows", 0, 1002, 0), ("rows", 1, 2002, 0))
    _step(m, "Release", s6, s7, r=A)
    s8 = _kv_evolve(s7, ("tables", D, {0: (), 1: ()}), ("len", D, 0), ("tver", D, 0), ("ref", 0, 1000, 0),
                 ("ref", 0, 1001, 0), ("ref", 1, 2000, 0), ("ref", 1, 2001, 0))
    _step(m, "Release", s7, s8, r=D)
    assert s8["ident"][0][1000] == 1 and s8["rows"][0][1000] == 16  # evictable keeps identity and rows
    # touch(G, cached block 0): the zero-ref cached blocks leave the free queue; refs 0 -> 1; G's map
    # is published; no generation changes.
    s9 = _kv_evolve(s8, ("tables", G, {0: (_h(1000, 1),), 1: (_h(2000, 1),)}), ("ref", 0, 1000, 1),
                 ("ref", 1, 2000, 1), ("len", G, 16), ("tver", G, 1))
    _step(m, "PrefixHit", s8, s9, r=G, k=1)
    # evict(cached block 1): removes the weak identity (the block becomes free) ...
    s10 = _kv_evolve(s9, ("ident", 0, 1001, 0), ("rows", 0, 1001, 0))
    _step(m, "Evict", s9, s10, g=0, b=1001)
    # ... and evicting a mapped block's identity does not revoke the live mapping.
    s11 = _kv_set(s10, ("ident", 0, 1000), 0)
    _step(m, "Evict", s10, s11, g=0, b=1000)
    assert s11["tables"][G][0] == (_h(1000, 1),) and s11["rows"][0][1000] == 16
