"""Adapter-side cases of the golden tests (registered in :mod:`golden`): the
reference adapter's pool geometry, its projections onto the specs' variables (``reference/adapters.py``), and the
vLLM profile's block-pool self-check and hybrid publication (``reference/peers/vllm_pool.py``, ``vllm_hybrid.py``).

Invariant: each case returns ``(what, got, expected)`` rows whose expected values come from the specs
(``spec/KVAllocation.tla``, ``spec/CowPublication.tla``), from ``docs/peers/vllm.md``, from the documented contract of
the code under test (its docstrings), or from the arithmetic written beside them, never from the reference's own
output; a row that differs (or a case that raises) fails its golden test by name.
"""

from __future__ import annotations

from typing import Any

Rows = list[tuple[str, Any, Any]]


def adapter_geometry() -> Rows:
    """``AdapterConfig.row_bytes`` gives group g the row bytes ``row_bytes[g mod len(row_bytes)]`` (its docstring):
    3 groups over ``(8,)`` are 8, 8, 8 and 5 groups over ``(8, 4)`` are 8, 4, 8, 4, 8; such a reference adapter
    starts a 3-token request in 2-token blocks on ceil(3 / 2) = 2 blocks of every group. The defaults: 2-token
    blocks, 2 groups of 6 blocks (ids 1..6), row bytes (8, 4)."""
    from kvexact.reference import adapters as ad

    out: Rows = []
    for groups, row_bytes, expected in ((3, (8,), [8, 8, 8]), (5, (8, 4), [8, 4, 8, 4, 8])):
        a = ad.ReferenceAdapter(ad.AdapterConfig(num_groups=groups, row_bytes=row_bytes), spec=None)
        started = a.start("r", [1, 2, 3]).accepted
        out.append((f"{groups} groups over row bytes {row_bytes}: row bytes per group; 3 tokens started, blocks",
                    ([g.row_bytes for g in a.alloc.groups], started, [len(a.table("r", g)) for g in range(groups)]),
                    (expected, True, [2] * groups)))
    d = ad.ReferenceAdapter(ad.AdapterConfig(), spec=None)
    out.append(("the default config (AdapterConfig's defaults): block tokens, groups' row bytes, block ids of groups 0, 1",
                (d.config.block_tokens, [g.row_bytes for g in d.alloc.groups], list(d.block_ids(0)),
                 list(d.block_ids(1))), (2, [8, 4], [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6])))
    return out


def adapter_idle_projections() -> Rows:
    """The projections of requests and readers that hold nothing. CowPublication (line 74): a reader without a
    snapshot is ``NoSnap == [on |-> FALSE, tables |-> [g |-> <<>>], len |-> 0, tokens |-> <<>>]``, both one that
    never took a snapshot (y) and one whose snapshot was released (x, ``ReleaseSnapshot`` sets ``NoSnap``).
    KVAllocation's projection: ``rgen[r]`` counts r's ended lifetimes (reference/adapters.py; a re-admitted
    request starts one generation past its last ended one, reference/allocator.py): a request on its first
    lifetime 0, one released and started again 1, one released 1, one never started 0."""
    from kvexact.reference import adapters as ad
    from kvexact.reference import lifecycle

    no_snap: tuple[bool, dict[int, list[int]], int, list[int]] = (False, {0: [], 1: []}, 0, [])  # groups 0, 1
    cow = ad.ReferenceAdapter(ad.AdapterConfig(), spec=None)
    cow.start("r", [1, 2, 3])
    lifecycle.reader_snapshot(cow.alloc, "x", "r")
    held = ad.project_cow_publication(cow.alloc, ["r"], readers=["x", "y"])["snap"]
    lifecycle.reader_release(cow.alloc, "x")
    snap = ad.project_cow_publication(cow.alloc, ["r"], readers=["x", "y"])["snap"]
    kv = ad.ReferenceAdapter(ad.AdapterConfig(), spec=None)
    for rid, tokens in (("a", [1]), ("b", [2]), ("d", [4])):
        kv.start(rid, tokens)
    kv.release("b")
    kv.start("b", [3])
    kv.release("d")
    kv_state = ad.project_kv_allocation(kv.alloc, ["a", "b", "c", "d"])
    rgen = kv_state["rgen"]
    absent = [(dict(kv_state["tables"][r]), kv_state["len"][r], kv_state["tver"][r]) for r in "cd"]
    return [("reader x holding r's snapshot: on, len", (held["x"]["on"], held["x"]["len"]), (True, 3)),
            ("readers x (released) and y (never held): on, tables, len, tokens",
             [(s["on"], dict(s["tables"]), s["len"], s["tokens"]) for s in (snap["x"], snap["y"])], [no_snap] * 2),
            ("rgen of a (first lifetime), b (released, started again), c (never started), d (released)",
             [rgen[r] for r in "abcd"], [0, 1, 0, 1]),
            ("c (never started) and d (released): tables, len, tver (KVAllocation's Init: <<>>, 0, 0)", absent,
             [({0: [], 1: []}, 0, 0)] * 2)]


def adapter_stale_tail() -> Rows:
    """KVAllocation's ``Truncate(r, n)`` sets the history variable ``stale`` to r's old first-group tail only when
    that tail goes back to the free pool (``ref[g][b] = 1 /\\ ident[g][b] = 0``), else leaves ``stale`` as it was.
    In 2-token blocks: r (4 tokens, blocks 1, 2) publishes both blocks, s (5 tokens) hits them (4 tokens: the hit
    stops one token short of the prompt) and takes block 3, and evicting the 4-token prefix drops block 2's
    identity while r and s still map it (``Evict``: ref 2, ident 0). Truncating r to 2 tokens drops block 2, which
    s still holds: ``stale`` stays NoStale (block 0). Truncating s to 2 tokens then drops blocks 2 and 3; its tail,
    block 3 (ref 1, no identity, generation 1: allocated once), goes free and is ``stale``."""
    from kvexact.reference import adapters as ad

    a = ad.ReferenceAdapter(ad.AdapterConfig(), requests=["r", "s"])
    rec = a.recorder
    assert rec is not None
    a.start("r", [1, 2, 3, 4])
    a.cache("r")
    hit = a.start("s", [1, 2, 3, 4, 5]).hit_tokens
    evicted = a.evict((1, 2, 3, 4)).accepted
    tables = [a.table(x, 0) for x in ("r", "s")]
    a.truncate("r", 2)
    shared = rec.stale
    a.truncate("s", 2)
    return [("s's hit, eviction accepted, group 0 tables of r and s", (hit, evicted, tables),
             (4, True, [[1, 2], [1, 2, 3]])),
            ("stale after r's truncate drops block 2, still mapped by s", shared, {"grp": 0, "block": 0, "gen": 0}),
            ("stale after s's truncate drops its unshared tail", rec.stale, {"grp": 0, "block": 3, "gen": 1})]


def vllm_pool_self_check() -> Rows:
    """reference/peers/vllm_pool.py's invariant (docs/peers/vllm.md §1): block 0 is the null block, and every other
    block is in the free queue exactly when its ref count is 0. A fresh 4-block pool passes ``check``; the same
    pool with block 1 taken out of the queue at ref count 0, or with block 1 at ref count 1 still queued, fails
    it (AssertionError)."""
    import attrs

    from kvexact.reference.peers import vllm_pool as vp

    def fails(pool: Any) -> bool:
        try:
            pool.check()
        except AssertionError:
            return True
        return False

    fresh = vp.new_pool(4)
    return [("check fails: fresh pool; block 1 unqueued at ref 0; block 1 queued at ref 1",
             [fails(fresh), fails(attrs.evolve(fresh, free=vp.FreeQueue((2, 3)))),
              fails(attrs.evolve(fresh, ref_cnt=(0, 1, 0, 0)))], [False, True, True])]


def vllm_hybrid_duplicates_s16() -> Rows:
    """docs/peers/vllm.md scenario 16 with §1's duplicates (full attention, blocks of 16): after C48 is cached, the
    identical 48-token prompt hits only 32 tokens (the num_tokens - 1 cap), so its admission (``publish_request``)
    takes one fresh block for block 2 and caches it too: the key of block 2 then maps to two blocks (no
    de-duplication, as in scenarios 15 and 29). In a pool of 8 (7 usable) blocks that is 3 + 1 = 4 blocks taken,
    3 free, and the key of block 2 on blocks 3 and 4 (the queue hands out 1, 2, 3, then 4). Evicting block 2's
    first cached block leaves its duplicate, so C48 + [5] (49 tokens, cap 48) still hits 48."""
    from kvexact.reference.peers import vllm_hybrid as vh
    from kvexact.reference.peers import vllm_pool as vp
    from kvexact.reference.peers.vllm_hashing import BlockHasher, key_with_group

    c48 = [0] * 16 + [1] * 16 + [2] * 16
    hashes = BlockHasher(16).hashes(c48)
    specs = [vh.GroupSpec(16)]
    pool = vp.new_pool(8)
    for _ in range(2):
        pool = vh.publish_request(pool, specs, hashes, 16, 48)
    after = vh.stored_then_lookup(specs, [c48, c48], [(0, 0, 2)], [*c48, 5]).hit_length
    return [("C48 admitted twice: free blocks, blocks of block 2's key",
             (pool.num_free_blocks, pool.cached.as_dict().get(key_with_group(hashes[2], 0))), (7 - 4, (3, 4))),
            ("C48 + [5] after one block of block 2's key is evicted: hit", after, 48)]


def adapter_delayed_writer() -> Rows:
    """``ReferenceAdapter.delayed_writer`` (its docstring, 0x05E/0x05F) is the handle of the first group's old tail
    that the last truncate returned to the free pool, until the fence refuses it. In 2-token blocks r (4 tokens)
    holds blocks 1, 2 (ceil(4 / 2) = 2; the fresh queue hands out 1, 2, 3) of generation 1 (allocated once); its
    fork c maps them too; r appends 2 tokens into block 3. r truncated to 1 token keeps ceil(1 / 2) = 1 block
    and drops blocks 2 (c still maps it: not freed) and 3 (freed): the old tail is the LAST dropped block of
    group 0, (group 0, block 3, generation 1). c truncated to 1 token then drops block 2, now freed: c's old
    tail (0, 2, 1) is the writer. A write through a handle of s's live block is refused WRONG_STEP_FOR_PATH (not
    a fence refusal: the writer stays); the writer's own handle on block 2 is refused by the fence (block 2
    free again, or handed out again at generation 2) and the writer is gone."""
    from kvexact.reference import adapters as ad

    def writer(a: Any) -> Any:
        h = a.delayed_writer
        return None if h is None else (h.cache_group_id, h.block_id, h.generation)

    a = ad.ReferenceAdapter(ad.AdapterConfig(), spec=None)
    a.start("r", [1, 2, 3, 4])
    a.fork("r", "c")
    a.append("r", 5)
    a.append("r", 6)
    grown = (writer(a), a.table("r", 0), a.table("c", 0))
    a.truncate("r", 1)
    tail = (writer(a), a.table("r", 0), a.table("r", 1))
    a.truncate("c", 1)
    shared = writer(a)
    a.start("s", [7, 8])
    live = a.table("s", 0)[0]
    refused = a.stale_write(0, live, a.generation(0, live)).rejection
    after_live = writer(a)
    fenced = a.stale_write(0, 2, 1).rejection
    return [("writer, r's and c's group 0 tables after r grew to 6 tokens", grown, (None, [1, 2, 3], [1, 2])),
            ("writer, r's tables in groups 0 and 1 after r's truncate to 1 token", tail, ((0, 3, 1), [1], [1])),
            ("writer after c's truncate to 1 token frees block 2", shared, (0, 2, 1)),
            ("write through s's live block: rejection, writer after", (refused, after_live),
             ("WRONG_STEP_FOR_PATH", (0, 2, 1))),
            ("the writer's own handle on block 2: a fence refusal; writer after",
             (fenced in ("STALE_BLOCK_GENERATION", "HANDLE_NOT_OWNED"), writer(a)), (True, None))]

def adapter_prefix_cap() -> Rows:
    """``ReferenceAdapter.start`` (its docstring, 0x07A's logits cap): a start maps the longest cached chain of full
    blocks, capped one token short of the prompt, i.e. at most (n - 1) // P blocks of an n-token prompt. In
    2-token blocks r (1, 2, 3, 4) publishes both its blocks; then the same 4 tokens hit (4 - 1) // 2 = 1 block (2
    tokens), r's 4 tokens plus one hit both (4), 2 tokens hit none ((2 - 1) // 2 = 0), 3 tokens hit 1 block (2);
    every hit maps r's blocks (block 1, then 2) and the rest of the prompt is appended (the request's length is its
    prompt's; ceil(n / 2) blocks in every group)."""
    from kvexact.reference import adapters as ad

    a = ad.ReferenceAdapter(ad.AdapterConfig(), spec=None)
    a.start("r", [1, 2, 3, 4])
    a.cache("r")
    got = []
    for rid, prompt in (("s", [1, 2, 3, 4]), ("t", [1, 2, 3, 4, 5]), ("u", [1, 2]), ("v", [1, 2, 3])):
        result = a.start(rid, prompt)
        got.append((result.accepted, result.hit_tokens, a.table(rid, 0)[:result.hit_tokens // 2], a.length(rid),
                    len(a.table(rid, 1))))
    return [("starts of 1 2 3 4 / 1 2 3 4 5 / 1 2 / 1 2 3: accepted, hit tokens, hit blocks, length, group 1 blocks",
             got, [(True, 2, [1], 4, 2), (True, 4, [1, 2], 5, 3), (True, 0, [], 2, 1), (True, 2, [1], 3, 2)]),
            *_adapter_evicted_prefix()]


def _adapter_evicted_prefix() -> Rows:
    """Refusals (an empty prompt has nothing to append: EMPTY_APPEND; caching an unknown request; evicting a prefix
    never published: CACHE_IDENTITY_MISSING), then r (1, 2, 3, 4) cached and its 4-token prefix evicted: only
    (1, 2) stays cached, so s (1, 2, 3, 4, 5) hits 2 tokens (r's block 1) and takes two fresh blocks; caching s
    publishes the 4-token prefix again."""
    from kvexact.reference import adapters as ad

    a = ad.ReferenceAdapter(ad.AdapterConfig(), spec=None)
    refused = [(r.accepted, r.rejection) for r in (a.start("e", []), a.cache("zz"), a.evict((9, 9)))]
    a.start("r", [1, 2, 3, 4])
    a.cache("r")
    cached = a.cached_prefixes()
    a.evict((1, 2, 3, 4))
    after = a.cached_prefixes()
    hit = a.start("s", [1, 2, 3, 4, 5]).hit_tokens
    s_table = a.table("s", 0)
    a.cache("s")
    return [("empty start, cache of an unknown request, evict of an unpublished prefix", refused,
             [(False, "EMPTY_APPEND"), (False, "UNKNOWN_REQUEST"), (False, "CACHE_IDENTITY_MISSING")]),
            ("cached prefixes after r's cache; after its 4-token prefix is evicted", (cached, after),
             ([(1, 2), (1, 2, 3, 4)], [(1, 2)])),
            ("s's hit, s's first block, s's cache: cached prefixes", (hit, s_table[0], a.cached_prefixes()),
             (2, 1, [(1, 2), (1, 2, 3, 4)]))]


_KV_CONSTANTS = {"Groups": {0, 1}, "Blocks": set(range(1, 7)), "NoReq": "NoReq", "P": 2, "MaxTokens": 32,
                 "MaxGen": 64, "MaxEpoch": 64, "MaxVersion": 64, "Concurrent": 1, "TailPolicy": "eager"}


def _spec_verdict(adapter: Any, spec: str, constants: dict[str, Any]) -> Any:
    """The adapter's recorded trace validated step by step against ``spec/<spec>.tla`` (the embedded checker)."""
    from kvexact.conformance.trace import validate_recorded
    from kvexact.spec import spec_dir

    v = validate_recorded(adapter.recorder, constants, spec_dir() / f"{spec}.tla", spec_dir() / f"{spec}.cfg")
    return v.ok, v.steps, dict(v.actions), v.failure


def adapter_traces() -> Rows:
    """The reference's recorded traces are traces of the specs (the embedded checker is the oracle of every
    projected variable and of the recorder's history variables). KVAllocation, 2-token blocks: r starts (1, 2, 3),
    appends 4, caches its 2 full blocks, fails an append of 6 (fault after the first group's reservation: rolled
    back), appends 6; s (1, 2, 3, 4, 5) hits 4 tokens; the 4-token prefix is evicted; r and s truncated to 1 and 2
    tokens; the delayed writer's handle refused; a reader x snapshots r (a reference KVAllocation does not
    count: its steps stutter); s released and started again on (7); x releases its snapshot. Appends crossing a block
    boundary: r's 1, 3, 6, s's 5 and 7 (5, one append_reserve per group each: 10, plus the rolled-back one's
    first: 11; one write and one publication each); in place: r's 2 and 4; every step recorded counts, x's two
    stuttering ones too (33 + 2). CowPublication (lowest free block
    first): r starts (1, 2, 3), c forks r and appends 4 into the shared partial block 2: a copy-on-write to
    block 3 in both groups (one begin, validate, publish, source release; a reserve, copy and write per group);
    r appends 5 in place (block 2 is r's alone again); reader x snapshots c; c is released; r's failed append
    of 6 and its append of 6 (a boundary); x releases its snapshot; r is released."""
    from kvexact.reference import adapters as ad
    from kvexact.reference import lifecycle
    from kvexact.reference.pool import QueuePolicy
    from kvexact.spec import itf

    kv = ad.ReferenceAdapter(ad.AdapterConfig(), requests=["r", "s", "u"])  # the stream scenario's (one model)
    kv_ops = [kv.start("r", [1, 2, 3]), kv.append("r", 4), kv.cache("r"), kv.append_with_failure("r", 6),
              kv.append("r", 6), kv.start("s", [1, 2, 3, 4, 5]), kv.evict((1, 2, 3, 4)), kv.truncate("r", 1),
              kv.truncate("s", 2)]
    writer = kv.delayed_writer
    kv_ops.append(kv.stale_write(0, writer.block_id, writer.generation) if writer else None)
    lifecycle.reader_snapshot(kv.alloc, "x", "r")
    kv_ops += [kv.release("s"), kv.start("s", [7])]
    lifecycle.reader_release(kv.alloc, "x")
    cow = ad.ReferenceAdapter(ad.AdapterConfig(), spec="CowPublication", requests=["r", "c"], readers=["x", "y"],
                              policy=QueuePolicy.LOWEST_ID)
    cow_ops = [cow.start("r", [1, 2, 3]), cow.fork("r", "c"), cow.append("c", 4), cow.append("r", 5)]
    lifecycle.reader_snapshot(cow.alloc, "x", "c")
    cow_ops += [cow.release("c"), cow.append_with_failure("r", 6), cow.append("r", 6)]
    states = (ad.project_state(kv.alloc, requests=["r", "s", "u"]),
              itf.encode_plain(ad.project_kv_allocation(kv.alloc, ["r", "s", "u"])))
    cow_now = (ad.project_state(cow.alloc, "CowPublication", ["r", "c"], ["x", "y"]),
               itf.encode_plain(ad.project_cow_publication(cow.alloc, ["r", "c"], ["x", "y"])))
    lifecycle.reader_release(cow.alloc, "x")
    cow_ops.append(cow.release("r"))
    ok = (True, None, 0, ())
    return [("KVAllocation scenario: results (accepted, rejection, hit, copies)",
             [None if r is None else (r.accepted, r.rejection, r.hit_tokens, r.copies) for r in kv_ops],
             [ok, ok, ok, (False, "ROLLED_BACK", 0, ()), ok, (True, None, 4, ()), ok, ok, ok,
              (False, "HANDLE_NOT_OWNED", 0, ()), ok, ok]),
            ("KVAllocation scenario against the spec: valid, steps, actions, failure",
             _spec_verdict(kv, "KVAllocation", {**_KV_CONSTANTS, "Requests": {"r", "s", "u"}}),
             (True, 35, {"append_reserve": 11, "append_write": 5, "append_publish": 5, "append_in_place": 2,
                         "cache_block": 2, "append_rollback": 1, "prefix_hit": 1, "evict": 2, "truncate": 2,
                         "stale_write_rejected": 1, "reader_snapshot": 1, "release": 1, "reader_release": 1}, None)),
            ("CowPublication scenario: results (accepted, rejection, hit, copies)",
             [(r.accepted, r.rejection, r.hit_tokens, r.copies) for r in cow_ops],
             [ok, ok, (True, None, 0, ((0, 2, 3), (1, 2, 3))), ok, ok, (False, "ROLLED_BACK", 0, ()), ok, ok]),
            ("CowPublication scenario against the spec: valid, steps, actions, failure",
             _spec_verdict(cow, "CowPublication", {**_KV_CONSTANTS, "Requests": {"r", "c"}, "Readers": {"x", "y"},
                                                   "Tokens": set(range(1, 7))}),
             (True, 20, {"append_boundary": 3, "append_in_place": 2, "fork": 1, "cow_begin": 1, "cow_reserve": 2,
                         "cow_copy": 2, "cow_write": 2, "cow_validate": 1, "cow_publish": 1, "cow_release_sources": 1,
                         "reader_snapshot": 1, "release": 2, "reader_release": 1}, None)),
            ("project_state (its docstring: the ITF encoding of the spec's variables; KVAllocation by default) of the "
             "KVAllocation scenario's end; of the CowPublication one while x holds its snapshot: equal, x on",
             (states[0] == states[1], cow_now[0] == cow_now[1], cow_now[0]["snap"]["#map"][0][1]["on"]),
             (True, True, True)),
            *_adapter_stream_trace(), *_adapter_txn_after_rollback()]


def _adapter_txn_after_rollback() -> Rows:
    """The projection's ``txn[r]`` and ``undone`` (module docstring): a boundary append in flight is phase
    ``reserved``; after ``append_rollback`` the recorder keeps ``undone`` on until the next spec step. After r's
    failed append of 3, a lease (a step outside the spec) keeps r idle and ``undone`` on; once a boundary append
    of 3 is begun (plan new in both groups, nothing reserved yet), a lease records r's append in flight: phase
    ``reserved`` (``undone`` still on: the lease is no spec step)."""
    from kvexact.reference import adapters as ad
    from kvexact.reference import lifecycle
    from kvexact.spec.checker.values import ModelValue

    a = ad.ReferenceAdapter(ad.AdapterConfig(), requests=["r"])
    rec = a.recorder
    assert rec is not None
    a.start("r", [1, 2])
    a.append_with_failure("r", 3)
    head = a.alloc.request("r").tables[0][0]
    lifecycle.retain_read(a.alloc, head)
    idle = rec.records[-1]["state"]
    a.alloc.begin("append", "r", ("new", "new"), (3,))
    lifecycle.retain_read(a.alloc, head)
    open_txn = rec.records[-1]["state"]
    R = ModelValue("r")  # request ids are model values in the records
    return [("after a rollback, a lease with no transaction in flight, one with a boundary append begun: "
             "r's phase, undone on",
             [(s["txn"].d[R].d["phase"], s["undone"].d["on"]) for s in (idle, open_txn)],
             [("idle", True), ("reserved", True)])]


def _adapter_stream_trace() -> Rows:
    """KVAllocation's position identity: over the stream 1..8 (2-token blocks, 6 blocks a group) only requests that
    follow the stream publish, each full block under its 1-based position. r (1..5) publishes positions 1, 2; u
    (9, 9, 9) publishes nothing; s (1..6) hits 4 tokens and publishes position 3; s's append of 7 needs a 7th
    block (r 3 + u 2 + s's one fresh block hold all 6): OUT_OF_MEMORY; evicting (1..4) drops position 2 in both
    groups; r is released. Steps: boundaries r 1, 3, 5, u 1, 3, s 5 (6 x 2 reserves, 6 writes, 6 publications),
    in place r 2, 4, u 2, s 6 (4), 3 cache_block, 1 prefix_hit, 2 evict, 1 release: 35."""
    from kvexact.reference import adapters as ad

    a = ad.ReferenceAdapter(ad.AdapterConfig(), requests=["r", "s", "u"], stream=list(range(1, 9)))
    ok = (True, None, 0)
    ops = [a.start("r", [1, 2, 3, 4, 5]), a.cache("r"), a.start("u", [9, 9, 9]), a.cache("u"),
           a.start("s", [1, 2, 3, 4, 5, 6]), a.append("s", 7), a.cache("s")]
    positions = sorted(a.positions.values())
    ops += [a.evict((1, 2, 3, 4)), a.release("r")]
    return [("stream scenario: results (accepted, rejection, hit); positions published",
             ([(r.accepted, r.rejection, r.hit_tokens) for r in ops], positions),
             ([ok, ok, ok, ok, (True, None, 4), (False, "OUT_OF_MEMORY", 0), ok, ok, ok], [1, 2, 3])),
            ("stream scenario: cached prefixes after the eviction", a.cached_prefixes(), [(1, 2), (1, 2, 3, 4, 5, 6)]),
            ("stream scenario against KVAllocation: valid, steps, actions, failure",
             _spec_verdict(a, "KVAllocation", {**_KV_CONSTANTS, "Requests": {"r", "s", "u"}}),
             (True, 35, {"append_reserve": 12, "append_write": 6, "append_publish": 6, "append_in_place": 4,
                         "cache_block": 3, "prefix_hit": 1, "evict": 2, "release": 1}, None))]


CASES = {"adapter geometry": adapter_geometry, "adapter idle projections": adapter_idle_projections,
         "adapter stale tail": adapter_stale_tail, "vllm pool self-check": vllm_pool_self_check,
         "vllm hybrid duplicates s16": vllm_hybrid_duplicates_s16,
         "adapter delayed writer": adapter_delayed_writer, "adapter prefix cap": adapter_prefix_cap,
         "adapter traces": adapter_traces}
