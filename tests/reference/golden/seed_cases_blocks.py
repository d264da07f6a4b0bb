"""Block-side cases of the golden tests (registered in :mod:`golden`): the
allocator, its lifecycle steps, the adapter protocol's reference adapter, the hybrid index and the vLLM / SGLang
peer profiles' block bookkeeping.

Invariant: each case returns ``(what, got, expected)`` rows whose expected values come from the seed
(``0x0..`` sections), from ``docs/peers/vllm.md`` / ``docs/peers/sglang.md``, or from the arithmetic written beside them,
never from the reference's own output; a row that differs (or a case that raises) fails its golden test by name.
"""

from __future__ import annotations

from typing import Any

Rows = list[tuple[str, Any, Any]]


def allocator_epochs() -> Rows:
    """0x05C step 1: a transaction carries the allocator epoch it expects; the check is by value, so an epoch read
    back from a wire (a fresh integer object, here past CPython's small-int cache) is accepted when equal and
    refused (EPOCH_MISMATCH) when not; a transaction that reserves blocks advances the epoch by one (docs/design.md
    "Counters"). ``run_txn`` knows two
    operations, allocate and append (0x04E); any other name is refused by name (UNKNOWN_OPERATION), also in a
    receipt given to compensate (0x04F)."""
    import attrs

    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import Allocator, AllocRejection
    from kvexact.reference.pool import GroupConfig
    from kvexact.reference.rejections import rejection_of

    def fresh(n: int) -> int:
        return int(str(n))  # the same value, another object

    alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3, 4]], epoch=1000)
    first = alloc.allocate("r", (1, 2, 3, 4), expected_epoch=fresh(1000))  # two full 2-token blocks
    stale = rejection_of(lambda: alloc.append("r", 5, expected_epoch=fresh(1000)))
    second = alloc.append("r", 5, expected_epoch=fresh(1001))  # a boundary append: reserves a block
    unknown = [rejection_of(lambda op=op: alloc.run_txn(op, "r", (6,))) for op in ("aaa", "extend", "")]
    begun = rejection_of(lambda: alloc.begin("aaa", "q", ("alloc",), (1,)))
    renamed = rejection_of(lambda: lifecycle.compensate(alloc, attrs.evolve(second, operation="aaa")))
    fresh_default = Allocator([GroupConfig(0, 0, 2, 8)], [[1]]).epoch  # KVAllocation.tla's Init: epoch = 0
    return [("a new allocator's epoch (the spec's Init)", fresh_default, 0),
            ("allocate at a fresh 1000, then append at a fresh 1001: outcomes, epochs after",
             (first.outcome, first.allocator_epoch_after, second.outcome, second.allocator_epoch_after),
             ("PUBLISHED", 1001, "PUBLISHED", 1002)),
            ("append expecting the superseded epoch 1000 rejected as", stale, AllocRejection.EPOCH_MISMATCH),
            ("the two transactions' ids differ", first.transaction_id != second.transaction_id, True),
            ("operations aaa, extend and '' rejected as", unknown, [AllocRejection.UNKNOWN_OPERATION] * 3),
            ("begin of operation aaa rejected as", begun, AllocRejection.UNKNOWN_OPERATION),
            ("compensation of a published receipt of operation aaa rejected as", renamed,
             AllocRejection.UNKNOWN_OPERATION),
            ("r after the refused operations: context, epoch", (alloc.request("r").context_tokens, alloc.epoch),
             (5, 1002))]


def lifecycle_release() -> Rows:
    """0x05E: release drops every strong reference; a block nobody else holds goes back to the free queue, a cached
    full block becomes EVICTABLE instead. r holds 5 tokens in 2-token blocks (3 blocks a group, 2 groups) and its
    block 0 is cached: 2 x 2 = 4 handles freed, 2 evictable; a second request forked from r keeps every block, so
    releasing r then frees nothing."""
    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import Allocator
    from kvexact.reference.pool import GroupConfig

    def made() -> Allocator:
        alloc = Allocator([GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 2, 4)], [[1, 2, 3, 4, 5, 6]] * 2)
        alloc.allocate("r", [1, 2, 3, 4, 5])
        return alloc

    alloc = made()
    lifecycle.cache_block(alloc, "r", 0, "k0")
    r = alloc.request("r")
    out = lifecycle.release(alloc, "r")
    tables = [[h.block_id for h in t] for t in r.tables]
    forked = made()
    lifecycle.fork(forked, "r", "s")
    kept = lifecycle.release(forked, "r")
    return [("release r: freed, evictable handles (block id per group)",
             (sorted((h.cache_group_id, h.block_id) for h in out.freed_handles),
              sorted((h.cache_group_id, h.block_id) for h in out.evictable_handles)),
             (sorted((g, b) for g in (0, 1) for b in tables[g][1:]), [(0, tables[0][0]), (1, tables[1][0])])),
            ("release r with its fork s alive: freed, evictable", (kept.freed_handles, kept.evictable_handles),
             ((), ()))]


def allocator_refusals() -> Rows:
    """Named refusals of malformed steps (0x05G) and eviction (0x05E): an append writes exactly one row (none:
    EMPTY_APPEND, two: WRITE_OFFSET_MISMATCH); an append to a request that was never admitted, claiming table version
    3, is UNKNOWN_REQUEST; releasing a reader that holds nothing is LEASE_NOT_HELD; evicting a key nobody published is
    CACHE_IDENTITY_MISSING; evicting the published key of a released request's block drops the weak identity, and
    the block, with no reference left, is FREE."""
    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import Allocator, AllocRejection
    from kvexact.reference.pool import BlockState, GroupConfig
    from kvexact.reference.rejections import rejection_of

    alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3, 4]])
    alloc.allocate("r", [1, 2, 3, 4])
    lifecycle.cache_block(alloc, "r", 0, "k")
    b0 = alloc.request("r").tables[0][0].block_id
    lifecycle.release(alloc, "r")
    was = alloc.pools[0].state_of(b0)
    evicted = [h.block_id for h in lifecycle.evict(alloc, "k")]
    return [("append of no row, of two rows; append to never-admitted q at version 3 rejected as",
             [rejection_of(lambda: alloc.run_txn("append", "s", ())),
              rejection_of(lambda: alloc.run_txn("append", "s", (1, 2))),
              rejection_of(lambda: alloc.begin("append", "q", ("new",), (1,), expected_table_version=3))],
             [AllocRejection.EMPTY_APPEND, AllocRejection.WRITE_OFFSET_MISMATCH, AllocRejection.UNKNOWN_REQUEST]),
            ("reader release of x holding nothing; evict of key z rejected as",
             [rejection_of(lambda: lifecycle.reader_release(alloc, "x")),
              rejection_of(lambda: lifecycle.evict(alloc, "z"))],
             [AllocRejection.LEASE_NOT_HELD, AllocRejection.CACHE_IDENTITY_MISSING]),
            ("r's cached block 0 after release; evict k: evicted blocks, state after",
             (was, evicted, alloc.pools[0].state_of(b0)), (BlockState.EVICTABLE, [b0], BlockState.FREE))]


def allocator_block_sizes() -> Rows:
    """0x04E: each cache group holds ceil(n / P_g) blocks of its own size: 5 tokens in groups of 2- and 4-token blocks
    take 3 and 2 blocks, both groups expose the same 5 rows, and the allocator's self-check accepts the state; one
    more token fills group 0's last block in place and starts nothing new in group 1 (6 <= 2 x 4)."""
    from kvexact.reference.allocator import Allocator
    from kvexact.reference.ledgers import cow_cost
    from kvexact.reference.pool import GroupConfig

    alloc = Allocator([GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 4, 4)], [[1, 2, 3, 4]] * 2)
    alloc.allocate("r", [1, 2, 3, 4, 5])
    alloc.self_check()
    first = [len(t) for t in alloc.request("r").tables]
    alloc.append("r", 6)
    alloc.self_check()
    # 257 groups (a count past CPython's small-int cache, so two equal counts are two objects): the self-check
    # compares the tables per request with the groups by value and accepts one table a group
    many = Allocator([GroupConfig(g, g, 2, 8) for g in range(257)], [[1]] * 257)
    many.allocate("m", [7])
    many.self_check()
    # one group of 1-token blocks, 300 blocks: 257 tokens take 257 blocks and 43 stay queued; the self-check accepts
    # 300 queued blocks and then the 257-block table
    long = Allocator([GroupConfig(0, 0, 1, 8)], [list(range(1, 301))])
    long.self_check()  # 300 queued
    long.allocate("l2", list(range(257)))
    long.self_check()
    # 0x04E (a partial block has no identity): 601 tokens in 2-token blocks take 301 blocks, the last holding 1 of
    # 2 rows, so caching logical block 300 (the tail, both counts built at run time past the small-int cache) is
    # refused while block 299 (full) is accepted
    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import AllocRejection
    from kvexact.reference.rejections import rejection_of

    tail = Allocator([GroupConfig(0, 0, 2, 8)], [list(range(1, 302))])
    tail.allocate("t", list(range(601)))
    last = int("30" + "0")
    tail_rows = (rejection_of(lambda: lifecycle.cache_block(tail, "t", last, "tail")),
                 rejection_of(lambda: lifecycle.cache_block(tail, "t", last - 1, "full")))
    # 0x09C with the seed's B_row = 65,536 bytes (64 KiB a token, seed 0x02): P = 16, 20 shared tokens -> r = 4,
    # copy 2 r B_row = 524,288 bytes, destination P B_row = 1 MiB, capacity amplification 16 / 4 = 4
    cow = cow_cost(16)
    return [("blocks per group for 5 tokens; after a 6th", (first, [len(t) for t in alloc.request("r").tables]),
             ([3, 2], [3, 2])),
            ("tokens of r", list(alloc.tokens_of("r")), [1, 2, 3, 4, 5, 6]),
            ("257 groups: tables of m", len(many.request("m").tables), 257),
            ("300 1-token blocks: blocks of l2 (257 tokens)", len(long.request("l2").tables[0]), 257),
            ("601 tokens in 2-token blocks: cache the tail block 300; the full block 299", tail_rows,
             (AllocRejection.CACHE_PARTIAL_BLOCK, None)),
            ("0x09C cow_cost(16) with the default row bytes: row bytes, r, copy, destination, amplification",
             (cow.row_bytes, cow.tail_rows, cow.copy_traffic_bytes, cow.destination_bytes, cow.capacity_amplification),
             (65536, 4, 524288, 1048576, 4))]


def lifecycle_leases() -> Rows:
    """0x05F: a read lease is a strong reference on a current handle: r's block 0 read-leased stays out of the free
    queue when r is released, and goes back once the lease is released; a handle of a cache group the allocator
    does not have is foreign, a current handle of a block nobody maps cannot be leased (no identity), and the
    delayed writer of 0x05E may write only into a block an in-flight transaction reserved: a published block is
    refused (write through append), a block back in the queue is a retired handle."""
    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import Allocator, AllocRejection
    from kvexact.reference.handles import BlockHandle
    from kvexact.reference.pool import GroupConfig, PoolRejection
    from kvexact.reference.rejections import rejection_of

    alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3, 4]])
    alloc.allocate("r", [1, 2, 3])
    b0, b1 = alloc.request("r").tables[0]
    foreign = BlockHandle(b0.pool_id, 3, b0.block_id, b0.generation)
    published = rejection_of(lambda: lifecycle.delayed_write(alloc, b1, 1, 9))
    lease = lifecycle.retain_read(alloc, b0)
    lifecycle.release(alloc, "r")
    held = (alloc.pools[0].refcount(b0.block_id), b0.block_id in alloc.pools[0].queue_order(),
            b1.block_id in alloc.pools[0].queue_order())
    lifecycle.release_lease(alloc, lease)
    return [("delayed write into r's published tail rejected as", published, AllocRejection.WRONG_STEP_FOR_PATH),
            ("after releasing r with block 0 leased: its refs, queued; block 1 queued", held, (1, False, True)),
            ("block 0 queued once the lease is released", b0.block_id in alloc.pools[0].queue_order(), True),
            ("read lease of group 3's handle; of freed block 1's handle; delayed write to it: rejected as",
             [rejection_of(lambda: lifecycle.retain_read(alloc, foreign)),
              rejection_of(lambda: lifecycle.retain_read(alloc, b1)),
              rejection_of(lambda: lifecycle.delayed_write(alloc, b1, 0, 9))],
             [PoolRejection.FOREIGN_POOL_HANDLE, AllocRejection.CACHE_IDENTITY_MISSING,
              PoolRejection.HANDLE_NOT_OWNED])]


def pool_policies() -> Rows:
    """The free+evictable queue (released blocks join its tail, a request's blocks tail first, as vLLM frees them):
    blocks 1..6 queued in order. Under LRU (take the head, least recently freed first) and LOWEST_ID r takes 1, 2 and
    s takes 3; r then s are released, so the queue reads 4, 5, 6, 2, 1, 3, and a 4-token request takes 4, 5 (LRU)
    or 1, 2 (LOWEST_ID). Under MRU (take the tail) r takes 6, 5 and s takes 4; released, the queue reads 1, 2, 3,
    5, 6, 4 and the request takes 4, 6."""
    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import Allocator
    from kvexact.reference.pool import GroupConfig, QueuePolicy

    def taken(policy: QueuePolicy) -> tuple[list[int], list[int]]:
        alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3, 4, 5, 6]], policy=policy)
        alloc.allocate("r", [1, 2, 3, 4])
        alloc.allocate("s", [5, 6])
        lifecycle.release(alloc, "r")
        lifecycle.release(alloc, "s")
        queue = alloc.pools[0].queue_order()
        alloc.allocate("q", [7, 8, 9, 10])
        return queue, [h.block_id for h in alloc.request("q").tables[0]]

    return [("queue after r, s released; q's blocks under LRU, MRU, LOWEST_ID",
             [taken(p) for p in (QueuePolicy.LRU, QueuePolicy.MRU, QueuePolicy.LOWEST_ID)],
             [([4, 5, 6, 2, 1, 3], [4, 5]), ([1, 2, 3, 5, 6, 4], [4, 6]), ([4, 5, 6, 2, 1, 3], [1, 2])])]


def adapter_projections() -> Rows:
    """The specs' view of the allocator (reference/adapters.py projections): groups of blocks 1..4 and 1..6, so the
    specs' Blocks are 1..6 and the first group's missing 5, 6 project as free blocks of generation 0 and no rows;
    r's 5 tokens take blocks 1, 2, 3 in each group; a read lease on group 0's block 1 and a reader snapshot of r are
    references CowPublication counts (map references + leases: 3 on block 1, 2 on blocks 2 and 3; KVAllocation.tla
    counts only the request map: 1 each), and the reader's snapshot is on, with r's length and tokens."""
    from kvexact.reference import lifecycle
    from kvexact.reference.adapters import project_cow_publication, project_kv_allocation, project_state
    from kvexact.reference.allocator import Allocator
    from kvexact.reference.pool import GroupConfig

    alloc = Allocator([GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 2, 4)], [[1, 2, 3, 4], [1, 2, 3, 4, 5, 6]])
    alloc.allocate("r", [1, 2, 3, 4, 5])
    lifecycle.retain_read(alloc, alloc.request("r").tables[0][0])
    lifecycle.reader_snapshot(alloc, "x", "r")
    kv = project_kv_allocation(alloc, ["r"])
    cow = project_cow_publication(alloc, ["r"], readers=["x", "y"])
    blocks = range(1, 7)
    snap = cow["snap"]["x"]
    return [("KVAllocation ref, group 0 and 1", [[kv["ref"][g][b] for b in blocks] for g in (0, 1)],
             [[1, 1, 1, 0, 0, 0]] * 2),
            ("KVAllocation group 0: gen and rows of blocks 5, 6; queued blocks",
             ([kv["gen"][0][b] for b in (5, 6)], [kv["rows"][0][b] for b in (5, 6)], sorted(kv["pool"][0])),
             ([0, 0], [0, 0], [4, 5, 6])),
            ("CowPublication ref, group 0 and 1", [[cow["ref"][g][b] for b in blocks] for g in (0, 1)],
             [[3, 2, 2, 0, 0, 0], [2, 2, 2, 0, 0, 0]]),
            ("CowPublication group 0 block 5: data, valid, gen", (cow["data"][0][5], cow["valid"][0][5], cow["gen"][0][5]),
             ([], 0, 0)),
            ("reader x: on, len, tokens; reader y (no snapshot): on", (snap["on"], snap["len"], snap["tokens"],
                                                                       cow["snap"]["y"]["on"]),
             (True, 5, [1, 2, 3, 4, 5], False)),
            ("project_state of both specs, the same epoch", [project_state(alloc, s, ["r"], ["x"])["epoch"]
                                                             for s in ("KVAllocation", "CowPublication")],
             [alloc.epoch] * 2),
            *_trace_history_rows()]


def _trace_history_rows() -> Rows:
    """KVAllocation's history variables as the trace recorder keeps them (2-token blocks, two groups; ``txn`` and
    ``hist`` are per request): an append that rolls back (AppendRollback) leaves ``txn[r].phase`` ``idle`` and, as
    r's transaction ran alone, sets ``undone`` on with the snapshot r's reservation took (r's 2 tokens); a step
    that is not a KVAllocation action (a read lease) is recorded as not in the spec and keeps ``hist`` and
    ``undone`` (a stutter); the next append's reservation snapshots the state before it into ``hist[r]`` (r's 2
    tokens); truncating r from 4 tokens to 1 frees group 0's
    unkeyed tail (block 2, generation 1), which ``stale`` then names, and a rejected stale write sets ``stale`` back
    to NoStale (block 0). A recorder without fixed requests takes the ids it sees as model values; an unknown
    spec is refused by the recorder and by project_state."""
    from kvexact.reference import adapters as ad
    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import Allocator
    from kvexact.reference.pool import GroupConfig
    from kvexact.spec.checker.values import ModelValue

    r = ModelValue("r")  # the recorder's requests are model values
    a = ad.ReferenceAdapter(ad.AdapterConfig(), requests=["r"])
    rec = a.recorder
    assert rec is not None
    a.start("r", [1, 2])
    failed = a.append_with_failure("r", 3).rejection
    rolled = rec.records[-1]
    lifecycle.retain_read(a.alloc, a.alloc.request("r").tables[0][0])
    lease = rec.records[-1]
    before = len(rec.records)
    a.append("r", 3)
    reserve = rec.records[before]
    a.append("r", 4)
    a.truncate("r", 1)
    stale_after_truncate = rec.stale
    writer = a.delayed_writer
    assert writer is not None
    a.stale_write(0, writer.block_id, writer.generation)
    undone = rolled["state"]["undone"].d
    history = [failed, (rolled["action"], rolled["state"]["txn"].d[r].d["phase"], undone["on"],
                        undone["before"].d["len"].d[r]),
               (lease["action"], lease.get("in_spec"), lease["state"]["txn"].d[r].d["phase"],
                lease["state"]["hist"] == rolled["state"]["hist"], lease["state"]["undone"].d["on"]),
               (reserve["action"], reserve["state"]["hist"].d[r].d["len"].d[r]),
               stale_after_truncate, (rec.records[-1]["action"], rec.stale)]
    free = Allocator([GroupConfig(0, 0, 2, 4)], [[1, 2]])
    open_rec = ad.TraceRecorder("KVAllocation").attach(free)
    free.allocate("z", [1])
    refused: list[bool | None] = []
    for bad in (lambda: ad.TraceRecorder("Nope"), lambda: ad.project_state(free, "Nope")):
        try:
            bad()
            refused.append(None)
        except ValueError as exc:
            refused.append("unknown spec 'Nope'" in str(exc))
    return [("trace history: rollback; its txn[r] phase, undone on, undone's len of r; a lease (not in spec, "
             "stutter: phase, hist kept, undone still on); the next reservation's hist[r] len of r; stale after "
             "truncate to 1; after a rejected stale write",
             history, ["ROLLED_BACK", ("append_rollback", "idle", True, 2), ("retain_read", False, "idle", True, True),
                       ("append_reserve", 2), {"grp": 0, "block": 2, "gen": 1},
                       ("stale_write_rejected", {"grp": 0, "block": 0, "gen": 0})]),
            ("recorder without fixed requests: request z a model value; unknown spec refused (recorder, projection)",
             ("z" in open_rec.model_values, refused), (True, [True, True]))]


def adapter_keys() -> Rows:
    """The reference adapter without a token stream keys each distinct full-block prefix by its own small integer:
    a published 6-token request (three 2-token blocks) gives three keys, and a later request with the same prompt
    and one more token hits all 6 tokens on r's own physical blocks, block by block (the hit maps the same blocks,
    0x07C), in both groups. The default geometry has 6 blocks a group (ids 1..6): 12 tokens in 2-token blocks take
    them all and a 13th token finds no free block."""
    from kvexact.reference import adapters as ad

    a = ad.ReferenceAdapter(ad.AdapterConfig(), spec=None)
    prompt = [5, 6, 7, 8, 9, 10]
    a.start("r", prompt)
    a.cache("r")
    hit = a.start("s", [*prompt, 11]).hit_tokens
    cut = ad.ReferenceAdapter(ad.AdapterConfig(), spec=None)
    cut.start("t", [1, 2, 3, 4, 5])
    tails = [cut.table("t", g)[-1] for g in (0, 1)]
    cut.truncate("t", 2)  # 0x05E: the delayed writer keeps the first group's old tail
    writer = cut.delayed_writer
    full = ad.ReferenceAdapter(ad.AdapterConfig(), spec=None)  # 6 blocks a group, ids 1..6
    full.start("f", list(range(12)))
    return [("12 tokens fill every block of each group; a 13th token rejected as",
             ([sorted(full.table("f", g)) for g in (0, 1)], full.append("f", 99).rejection),
             ([list(full.block_ids(g)) for g in (0, 1)], "OUT_OF_MEMORY")),
            ("distinct keys of r's three prefixes", len(set(a.keys.values())), 3),
            ("truncate of 5 tokens to 2: the delayed writer's group and block",
             None if writer is None else (writer.cache_group_id, writer.block_id), (0, tails[0])),
            ("s's hit; s's first three blocks are r's, per group",
             (hit, [a.table("s", g)[:3] == a.table("r", g) for g in (0, 1)]), (6, [True, True])),
            *_adapter_check_rows()]


def _adapter_check_rows() -> Rows:
    """A ``--adapter`` that cannot be used is named by its problem (reference/adapters.py): exit 3 for one that
    could not run, 2 for a bad argument; a factory without ``adapter_protocol`` is an allocator factory, one that
    declares another protocol is refused; an object with none of the required methods is not an adapter, one that
    lacks some names the first missing, one whose method cannot take the machines' arguments is refused, one
    without an AdapterConfig is refused; the reference adapter passes, and a builtin optional method without a
    signature is not checked."""
    from kvexact.reference import adapters as ad

    def problem(fn: Any) -> Any:
        try:
            fn()
        except ad.AdapterError as exc:
            return exc.problem
        return None

    def factory(config: Any) -> Any:
        return None

    declared = type("Declared", (), {"adapter_protocol": "nope", "__call__": staticmethod(factory)})()
    good = ad.ReferenceAdapter(ad.AdapterConfig(), spec=None)
    methods = {m: (lambda self, *args: None) for m in ad.REQUIRED_METHODS}
    no_config = type("NoConfig", (), methods)()
    half = type("Half", (), {"block_ids": methods["block_ids"]})()
    narrow = type("Narrow", (), {**methods, "start": lambda self: None, "config": ad.AdapterConfig()})()
    with_builtin = type("WithBuiltin", (), {**methods, "fork": print, "config": ad.AdapterConfig()})()
    P = ad.AdapterProblem
    # the reference adapter's refusals: caching an unknown request, evicting a prefix never published, starting an
    # empty prompt; a block never allocated has generation 0, r's first block generation 1 (one allocation); a
    # second cache of the same request publishes nothing new; the factory's adapter records no trace; once r is
    # released, its published block [1, 2] is cached and free: evicting it is accepted, and then gone
    ref = ad.reference_factory(ad.AdapterConfig())
    ref.start("r", [1, 2, 3])
    ref.cache("r")
    keys = dict(ref.keys)
    again = ref.cache("r").accepted
    refusals = (ref.cache("nobody"), ref.evict((9, 9)), ref.start("e", []), ref.generation(0, 6),
                ref.generation(0, ref.table("r", 0)[0]), again, ref.keys == keys, ref.recorder, ad.default_ident("7"))
    rows: Rows = [("reference adapter: cache unknown, evict unpublished, start empty, generations, a second cache, "
                   "its keys, recorder; default ident of '7'", refusals,
                   (ad.OpResult(False, "UNKNOWN_REQUEST"), ad.OpResult(False, "CACHE_IDENTITY_MISSING"),
                    ad.OpResult(False, "EMPTY_APPEND"), 0, 1, True, True, None, 7))]
    ref.release("r")
    rows.append(("reference adapter: evict r's published [1, 2] after r's release; cached prefixes after",
                 (ref.evict((1, 2)).accepted, ref.cached_prefixes()), (True, [])))
    return [*rows, ("adapter errors: exit code of a factory that raised, of a bad protocol",
             (ad.AdapterError(P.FACTORY_RAISED, "x").exit_code, ad.AdapterError(P.BAD_PROTOCOL, "x").exit_code), (2, 2)),
            ("protocol of a plain factory; of one declaring 'nope'",
             (ad.adapter_protocol(factory), problem(lambda: ad.adapter_protocol(declared))),
             ("allocator", P.BAD_PROTOCOL)),
            ("check_adapter: an object, block_ids only, start() without arguments, no config, the reference, "
             "a builtin fork", [problem(lambda x=x: ad.check_adapter(x))
                                for x in (object(), half, narrow, no_config, good, with_builtin)],
             [P.NOT_AN_ADAPTER, P.MISSING_METHOD, P.METHOD_SIGNATURE, P.MISSING_METHOD, None, None])]


def hybrid_windows_s17() -> Rows:
    """0x07C with sliding windows, on docs/peers/vllm.md scenario 17 (full attention and two sliding-window groups of
    window 32, 16-token blocks): r0 = C48 + [3] x 7 is published; C48 + [3] x 5 then hits 48 tokens, and after
    removing the keys (block index, group) {(0,1),(0,2)}, {(0,0)}, {(2,0),(2,1),(2,2)}, {(2,0)}, {(2,1)},
    {(2,0),(0,1),(0,2)}, {(1,1)} it hits 3, 0, 2, 2, 2, 0, 1 blocks (the notes' figures, x 16 tokens): a window
    group needs only the ceil(31 / 16) = 2 blocks just before the hit's end."""
    from kvexact.reference.hybrid import CacheGroup, HybridIndex

    c48 = [0] * 16 + [1] * 16 + [2] * 16
    r0, query = [*c48, *[3] * 7], [*c48, *[3] * 5]
    index = HybridIndex.empty([CacheGroup(16), CacheGroup(16, 32), CacheGroup(16, 32)]).publish(r0)
    removals = [[(0, 1), (0, 2)], [(0, 0)], [(2, 0), (2, 1), (2, 2)], [(2, 0)], [(2, 1)], [(2, 0), (0, 1), (0, 2)],
                [(1, 1)]]

    def without(keys: list[tuple[int, int]]) -> int:
        out = index
        for j, g in keys:
            out = out.evict(g, query[:(j + 1) * 16])
        return out.lookup(query)

    # a window of 5 over 4-token blocks needs ceil(4 / 4) = 1 block before the hit's end: 16 published tokens with the
    # window group's block 2 gone still hit 16 (block 3 is there)
    small = HybridIndex.empty([CacheGroup(4), CacheGroup(4, 5)]).publish(list(range(16))).evict(1, list(range(12)))
    # a republish publishes only the blocks past its hit: [1, 2, 3] publishes block [1, 2] (2-token blocks); then
    # [1, 2, 3, 4, 5] hits that one block (2 tokens) and publishes [1, 2, 3, 4] alone, so [1, 2] is held once
    again = HybridIndex.empty([CacheGroup(2)]).publish([1, 2, 3]).publish([1, 2, 3, 4, 5])
    return [("C48 + [3] x 5 hit", index.lookup(query), 48),
            ("republish after a one-block hit: holders of [1, 2] and [1, 2, 3, 4]",
             (again.counts[0].get((1, 2)), again.counts[0].get((1, 2, 3, 4))), (1, 1)),
            ("window 5 over 4-token blocks, block 2 gone: hit of 17 tokens", small.lookup(list(range(17))), 16),
            ("hits after each removal", [without(k) for k in removals], [16 * b for b in (3, 0, 2, 2, 2, 0, 1)])]


SHA256_BLOCK0 = "9da1c53089c000ad1a79a77c143b68dda00e2a85315bc1f690bbd03ba4a195dd"  # docs/peers/vllm.md §3, measured


def vllm_golden_hashes() -> Rows:
    """docs/peers/vllm.md §3 (measured, PYTHONHASHSEED unset): NONE_HASH and the block hashes of tokens [0, 1, 2, 3]
    then [4, 5, 6, 7] under sha256 (pickle) and sha256_cbor (canonical CBOR), and sha256_cbor's block 0 with cache
    salt "s1"."""
    from kvexact.reference.peers.vllm_hashing import BlockHasher, HashAlgo, external_hash

    def chain(algo: HashAlgo) -> list[str]:
        h = BlockHasher(4, algo)
        b0 = h.hash_block(None, [0, 1, 2, 3], None)
        return [h.none_hash.hex(), b0.hex(), h.hash_block(b0, [4, 5, 6, 7], None).hex()]

    cbor = BlockHasher(4, HashAlgo.SHA256_CBOR)
    return [("sha256: NONE_HASH, blocks 0 and 1", chain(HashAlgo.SHA256),
             ["066b1e8987e027138e98701c46128929378935f9b6cd1549105ae6b4f0d71198",
              SHA256_BLOCK0,
              "1c9b6c0620e875631f1c5395ed56f2243aa113f88fc842f04fbb0654074b8d43"]),
            ("sha256_cbor: NONE_HASH, blocks 0 and 1", chain(HashAlgo.SHA256_CBOR),
             ["9bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0",
              "c49ab11fb576db6f376aef58c24f728a0ba1807e8cac5f940f1a5c4c20741898",
              "9d0a7c928c548f9aeea31ae98471cf515045a206851732ac14cb3083c18d40f9"]),
            ("sha256 block 0 as published in KV events (notes §1: the low 64 bits, big-endian) and raw",
             (external_hash(bytes.fromhex(SHA256_BLOCK0)), external_hash(bytes.fromhex(SHA256_BLOCK0), use_int=False)),
             (int(SHA256_BLOCK0[-16:], 16), bytes.fromhex(SHA256_BLOCK0))),
            ("sha256_cbor block 0 with salt s1", cbor.hash_block(None, [0, 1, 2, 3], (("cache_salt", "s1"),)).hex(),
             "484761d76512b019413b1505b9061753e461d4de1b84f54f7983aec4e1c357e8")]


def vllm_hybrid_alignment() -> Rows:
    """docs/peers/vllm.md §4: a full-attention group's hit is rounded down to the alignment (the lcm of the groups'
    block sizes), and a prompt is cached only up to ``num_tokens`` rounded down to the scheduler block size (the
    lcm). Full attention in 16-token blocks with a window group of 32-token blocks (window 64): after a 128-token
    prompt, a 50-token query (cap 49: 3 full-attention blocks, 48) hits 32 = 2 + 1 blocks and no group alone
    reaches further than 32; publishing 112 distinct tokens of scenario 18's geometry (blocks of 32 and 16) caches
    96 tokens: 3 + 6 blocks taken from a 100-block pool (99 usable). Full attention in 2-token blocks with a window
    group of 1-token blocks (window 4: a run of ceil(3 / 1) = 3 blocks whose right edge is a multiple of 2): 8
    published tokens give a 9-token query the run 5..7 (8 tokens; blocks 0-4 of the window group are null blocks);
    once its window blocks 2 and 5 are gone no aligned run of 3 is left, so the hit is the run from block 0 (blocks
    0, 1: 2 tokens, aligned), the full-attention group keeps 1 block, and 8 - 2 = 6 tokens are a longest single-group
    hit left uncached."""
    from kvexact.reference.peers.vllm_hashing import BlockHasher
    from kvexact.reference.peers.vllm_hybrid import GroupSpec, publish_request, stored_then_lookup
    from kvexact.reference.peers.vllm_pool import PoolRejection, new_pool
    from kvexact.reference.rejections import rejection_of

    t = list(range(1000, 1160))
    hit = stored_then_lookup([GroupSpec(16), GroupSpec(32, 64)], [t[:128]], [], t[:50])
    same = stored_then_lookup([GroupSpec(32), GroupSpec(16, 32)], [t[:128]], [], t[:128])
    pool = publish_request(new_pool(100), [GroupSpec(32), GroupSpec(16, 32)], BlockHasher(16).hashes(t[:112]), 16, 112)
    specs = [GroupSpec(2), GroupSpec(1, 4)]
    whole = stored_then_lookup(specs, [t[:8]], [], t[:9])
    holes = stored_then_lookup(specs, [t[:8]], [(0, 1, 2), (0, 1, 5)], t[:9])
    return [("blocks 2 / 1 with window 4: hit, group lengths, null blocks of the window group",
             (whole.hit_length, [len(b) for b in whole.blocks_by_group], whole.blocks_by_group[1][:5]),
             (8, [4, 8], (0,) * 5)),
            ("window blocks 2 and 5 removed: hit, group lengths, uncached common prefix",
             (holes.hit_length, [len(b) for b in holes.blocks_by_group], holes.uncached_common_prefix), (2, [1, 2], 6)),
            ("50-token query: hit, group lengths, uncached common prefix",
             (hit.hit_length, [len(b) for b in hit.blocks_by_group], hit.uncached_common_prefix), (32, [2, 1], 0)),
            ("the identical 128-token prompt (cap 127, notes scenario 16) hits", same.hit_length, 96),
            ("112 tokens published: free blocks left", pool.num_free_blocks, 99 - (3 + 6)),
            ("pools of 2.5, True and 0 blocks rejected as", [rejection_of(lambda n=n: new_pool(n)) for n in (2.5, True, 0)],
             [PoolRejection.BAD_POOL_SIZE] * 3)]


def reuse_gate_0x0CD() -> Rows:
    """0x0CD/0x0CG on the reuse gate's fixture (a 32-token candidate, 40-token requests): an accepted attempt reuses
    the covered 32 tokens and prefills 40 - 32 = 8; a rejected one (an unauthorized principal, an index version that
    moved) recomputes all 40 and carries its named rejection, which ``acquire_executable_reuse`` raises. The
    concrete key of step 2 is "k-" + the first 32 hex digits of SHA-256 over salt, semantic digest, layout digest and
    the comma-joined tokens, joined by U+001F (salt first: equal tokens under two salts get two keys)."""
    import hashlib

    from kvexact.reference.labs import reuse_gate as fx
    from kvexact.reference.rejections import rejection_of
    from kvexact.reference.reuse_gate import (
        ReuseRejection,
        acquire_executable_reuse,
        concrete_key,
        reuse_or_recompute,
    )

    def decided(req: Any) -> tuple[Any, ...]:
        d = reuse_or_recompute(fx.RUNTIME, req)[1]
        return d.mode, d.prefill_tokens, d.rejection, d.receipt is not None

    toks = (1, 2, 3)
    want = "k-" + hashlib.sha256("\x1f".join(["salt-a", "sem-1", "lay-1", "1,2,3"]).encode()).hexdigest()[:32]
    return [("accepted, unauthorized, stale index: mode, prefill, rejection, receipt",
             [decided(fx.request("q01")), decided(fx.request("q05", "mallory")),
              decided(fx.request("q10", index_version=6))],
             [("reuse", 8, None, True), ("recompute", 40, ReuseRejection.UNAUTHORIZED_PRINCIPAL, False),
              ("recompute", 40, ReuseRejection.STALE_INDEX_VERSION, False)]),
            ("acquire_executable_reuse of the stale-index attempt raises",
             rejection_of(lambda: acquire_executable_reuse(fx.RUNTIME, fx.request("q10", index_version=6))),
             ReuseRejection.STALE_INDEX_VERSION),
            ("concrete key of tokens 1,2,3 under salt-a; the same tokens under salt-b differ",
             (concrete_key("salt-a", "sem-1", "lay-1", toks),
              concrete_key("salt-b", "sem-1", "lay-1", toks) != concrete_key("salt-a", "sem-1", "lay-1", toks)),
             (want, True))]


def sglang_orders_and_pools() -> Rows:
    """docs/peers/sglang.md: S25 DFS-weight order ([1,2,3], [1,2,4], [5,6]; last nodes [5,6], [3], [4], [4] -> 2, 3, 1, 0);
    §6 longest-prefix-match: a stable sort by matched length, FCFS when the cache is disabled (cached [1,2,3,4]:
    queue [9,9], [1,2,3,4,5], [1,2,7] matches 0, 4, 2 -> 1, 2, 0); §7 the token allocator with ``need_sort`` stages
    freed slots (available = free + staged) and a merge sorts them back (alloc takes the first n), and a paged
    ``free_segment`` must start on a page boundary."""
    from kvexact.reference.peers.sglang import RadixCache, Req, admit
    from kvexact.reference.peers.sglang_adapter import SGLangAdapter
    from kvexact.reference.peers.sglang_key import SGLangRejection
    from kvexact.reference.peers.sglang_pool import (
        PagedTokenToKVPoolAllocator,
        ReqToTokenPool,
        TokenToKVPoolAllocator,
    )
    from kvexact.reference.peers.sglang_sched import dfs_weight_order, lpm_order
    from kvexact.reference.rejections import rejection_of

    c = RadixCache()
    for k in ([1, 2, 3], [1, 2, 4], [5, 6]):
        c.insert(k)
    nodes = [c.match_prefix(k).last_device_node for k in ([5, 6], [1, 2, 3], [1, 2, 4], [1, 2, 4])]
    lpm = RadixCache()
    lpm.insert([1, 2, 3, 4])

    def queue() -> list[Req]:
        return [Req("a", [9, 9]), Req("b", [1, 2, 3, 4, 5]), Req("c", [1, 2, 7])]

    long_queue = [Req(f"w{i}", [9, i]) for i in range(128)] + [Req("hit", [1, 2, 3, 4, 5])]
    pool = TokenToKVPoolAllocator(8, need_sort=True)
    taken = pool.alloc(3)
    pool.free([2, 1])
    staged = (pool.available_size(), sorted(pool.release_pages))
    pool.merge_and_sort_free()
    paged = PagedTokenToKVPoolAllocator(16, 4)
    paged.alloc(8)
    # admission (§7: alloc returns None when short): 4 slots cannot hold 6 tokens, and the request's row is given
    # back; with one request row, a second request finds none
    small = TokenToKVPoolAllocator(4)
    rows = ReqToTokenPool(1, 8)
    cache = RadixCache(allocator=small, req_to_token_pool=rows)
    short = admit(cache, small, Req("big", [1, 2, 3, 4, 5, 6]))
    after_short = (rows.available_size(), small.available_size())
    ok = admit(cache, small, Req("a", [1, 2]))
    no_row = admit(cache, small, Req("b", [3]))
    # §5 hit_count (0.5.23): insert [1, 2, 3, 4], then [1, 2, 3, 4, 5, 6] with inserted_len 4: the node [1, 2, 3, 4]
    # ends at 4, not beyond it, so only the first insert counts it; the new leaf [5, 6] counts once
    hits = RadixCache()
    hits.insert([1, 2, 3, 4])
    hits.insert([1, 2, 3, 4, 5, 6], inserted_len=4)
    hit_counts = tuple(hits.match_prefix(k).last_device_node.hit_count for k in ([1, 2, 3, 4], [1, 2, 3, 4, 5, 6]))
    # §7 the request table: a write at start position 3 fills columns 3 and 4 of the row and leaves its length
    offset_rows = ReqToTokenPool(1, 6)
    offset_rows.write(1, 3, [7, 8])
    # §7 page size 1 details: alloc takes the first n or returns None when short; with need_sort an alloc larger than
    # the free list merges the staged slots first (free 4..8 + staged [2, 1] -> 1, 2, 4, 5, 6, 7); a free group
    # appends its slots in call order at its end; an empty free does nothing; free_segment at 0 frees; freed_log
    # records each call
    one = TokenToKVPoolAllocator(4)
    one_short = one.alloc(5)
    one_all = one.alloc(4)
    one.freed_log = []
    one.free_group_begin()
    one.free([3])
    one.free([1])
    one.free_group_end()
    one.free([])
    one.free_segment([4], 0)
    one_state = (one_short, one_all, list(one.free_pages), one.freed_log, one.available_size())
    sorted_pool = TokenToKVPoolAllocator(8, need_sort=True)
    sorted_pool.alloc(3)
    sorted_pool.free([2, 1])
    merged_alloc = sorted_pool.alloc(6)
    # §7 page size 4 over 16 slots (pages 1..4): alloc(8) takes pages 1, 2 (slots 4..11); a free releases the sorted
    # unique pages it touches to the front; free_segment releases one page per 4 slots in segment order; a free group
    # releases its frees' pages first, then its segments' (each to the front, so the segment's page leads), and logs
    # only the group's free call; need_sort stages pages and an alloc of more pages than are free merges them (free
    # page 4 + staged 1, 2 -> pages 1, 2, 4: slots 4..11, 16..19); alloc of 6 slots is misaligned;
    # page size 0 is refused; ReqToTokenPool frees a row to the end and reads a slice
    pg = PagedTokenToKVPoolAllocator(16, 4)
    pg_slots = pg.alloc(8)
    pg.freed_log = []
    pg.free([9, 4, 5])
    after_free = list(pg.free_pages)
    pg_again = pg.alloc(8)
    pg.free_segment([8, 9, 10, 11, 4, 5, 6, 7], 0)
    after_segment = list(pg.free_pages)
    pg.alloc(16)
    pg.free_group_begin()
    pg.free_segment([12, 13, 14, 15])
    pg.free([8])
    pg.free([])
    pg.free_group_end()
    pg_state = (pg_slots, after_free, pg_again, after_segment, list(pg.free_pages), pg.freed_log, pg.available_size())
    pgs = PagedTokenToKVPoolAllocator(16, 4, need_sort=True)
    pgs.alloc(12)
    pgs.free([11, 4])
    pgs_staged = (list(pgs.free_pages), list(pgs.release_pages), pgs.available_size(), pgs.alloc(12))
    req_rows = ReqToTokenPool(2, 4)
    req_rows.alloc(2)
    req_rows.free(1)
    req_rows.write(2, 0, [5, 6, 7])
    req_state = (req_rows.free_slots, req_rows.read(2, 1, 3), req_rows.alloc(2))
    # page size 3 over 9 slots: pages 1..3 hold slots 3..11 (page p holds p x 3 .. p x 3 + 2), all free at start
    paged3 = SGLangAdapter(9, page_size=3).partition()
    return [("page size 1, 4 slots: alloc(5), alloc(4), free list after a group [3], [1] and a segment [4], freed_log, "
             "available", one_state, (None, [1, 2, 3, 4], [3, 1, 4], [(3, 1), (4,)], 3)),
            ("need_sort: alloc(3) of 8, free [2, 1] staged, then alloc(6)", merged_alloc, [1, 2, 4, 5, 6, 7]),
            ("page size 4, 16 slots: alloc(8); free list after free [9, 4, 5]; alloc(8); after a segment of pages 2, 1; "
             "after a group (segment page 3, free page 2) with all taken; freed_log; available",
             pg_state, ([4, 5, 6, 7, 8, 9, 10, 11], [1, 2, 3, 4], [4, 5, 6, 7, 8, 9, 10, 11], [2, 1, 3, 4], [3, 2],
                        [(9, 4, 5), (8, 9, 10, 11, 4, 5, 6, 7), (8,)], 8)),
            ("page size 4 with need_sort: after alloc(12) and free [11, 4]: free, staged, available, alloc(12)",
             pgs_staged, ([4], [1, 2], 12, [4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19])),
            ("alloc(6) with page size 4; page size 0: rejected as",
             (rejection_of(lambda: PagedTokenToKVPoolAllocator(16, 4).alloc(6)),
              rejection_of(lambda: PagedTokenToKVPoolAllocator(16, 0))),
             (SGLangRejection.PAGE_MISALIGNED_ALLOC, SGLangRejection.BAD_PAGE_SIZE)),
            ("request rows: free list after alloc(2), free(1); row 2 columns 1..2 after a write of [5, 6, 7]; alloc(2)",
             req_state, ([1], [6, 7], None)),
            ("hit_count of [1, 2, 3, 4] and of [5, 6] after the second insert (inserted_len 4)", hit_counts, (1, 1)),
            ("row 1 after a write of [7, 8] at start position 3 (6 columns)", offset_rows.req_to_token[1],
             [0, 0, 0, 7, 8, 0]),
            ("page size 3, 9 slots: the slot universe; the free slots", (paged3.pool_slot_ids, paged3.free_slot_ids),
             (tuple(range(3, 12)), tuple(range(3, 12)))),
            ("admit 6 tokens into 4 slots; rows and slots left; admit 2 tokens; a second request without a row",
             (short, after_short, ok, no_row, small.available_size()), (False, (1, 4), True, False, 2)),
            ("S25 DFS-weight order", dfs_weight_order(c, nodes), [2, 3, 1, 0]),
            ("§6 LPM over 129 waiting requests (more than 128: FCFS); over the last 128 of them",
             (lpm_order(lpm, long_queue) == list(range(129)), lpm_order(lpm, long_queue[1:])[0]), (True, 127)),
            ("LPM order; with a disabled cache", (lpm_order(lpm, queue()), lpm_order(RadixCache(disable=True), queue())),
             ([1, 2, 0], [0, 1, 2])),
            ("need_sort: alloc(3), free [2, 1] staged: available, staged; after the merge alloc(2)",
             (taken, staged, pool.alloc(2)), ([1, 2, 3], (7, [1, 2]), [1, 2])),
            ("paged free_segment at start position 2 (page size 4) rejected as",
             rejection_of(lambda: paged.free_segment([6, 7], start_pos=2)), SGLangRejection.PAGE_MISALIGNED_SEGMENT)]


def peer_units() -> Rows:
    """Unit facts of the peer profiles. docs/peers/vllm.md scenario 20 (queue primitives on blocks 0-4); an allocation
    that does not fit says INSUFFICIENT_BLOCKS (§5); the coordinator over three bucket specs (full attention, windows
    of 32 and 64, 16-token blocks; §4): 96 cached tokens with the 64-window group's block 4 gone hit 64 (the window
    64 needs the ceil(63 / 16) = 4 blocks before the hit's end, and 0..3 is the only such run; full attention is
    looked up once and then only lowered). docs/peers/sglang.md §8's bigram oracle (ps 1: [1,2,3,4,5] vs [1,2,3,9,5] ->
    2, identical 5 tokens -> 4, [1,2] vs [1,2] -> 1) and §9 (out-of-range indexing refused; repr names RadixKey,
    the extra key and ends in ... beyond 10 tokens)."""
    from kvexact.reference.peers.sglang_key import RadixKey, SGLangRejection
    from kvexact.reference.peers.vllm import ManagerRejection, VllmConfig, VllmKVCacheManager
    from kvexact.reference.peers.vllm_hybrid import GroupSpec, stored_then_lookup
    from kvexact.reference.peers.vllm_pool import FreeQueue, PoolRejection
    from kvexact.reference.rejections import rejection_of

    q, first = FreeQueue(range(5)).popleft()
    q = q.remove(2)
    removed = list(q.blocks)
    q = q.append(2)
    appended = list(q.blocks)
    q = q.prepend_n([5, 0])
    prepended = list(q.blocks)
    q, taken = q.popleft_n(3)
    queue = [first, removed, appended, prepended, list(taken), len(q),
             rejection_of(lambda: FreeQueue(()).popleft())]
    m = VllmKVCacheManager.create(VllmConfig(3, 2))  # blocks 1, 2 usable
    too_big = m.allocate_slots(m.make_request("r", list(range(10))), 10, 0, ())[1]
    fits = m.allocate_slots(m.make_request("s", [1, 2, 3]), 3, 0, ())[1]
    t = list(range(300, 400))
    three = stored_then_lookup([GroupSpec(16), GroupSpec(16, 32), GroupSpec(16, 64)], [t[:96]], [(0, 2, 4)], t[:97])

    def bigram(a: list[int], b: list[int]) -> int:
        return RadixKey.of(a).bigram_view().match(RadixKey.of(b).bigram_view(), 1)

    key = RadixKey.of(list(range(12)), "test")
    wire_rows = _vllm_wire_rows() + _vllm_pool_rows()
    # docs/peers/vllm.md §5 step 7: with delay_cache_blocks (P/D) nothing is cached at allocation; cache_blocks(r, 8)
    # then registers r's 2 full 4-token blocks, so a 9-token request with r's tokens hits 0 before and 8 after
    d = VllmKVCacheManager.create(VllmConfig(11, 4))
    r8 = d.make_request("r", list(range(8)))
    d, _ = d.allocate_slots(r8, 8, 0, (), delay_cache_blocks=True)
    before = d.get_computed_blocks(d.make_request("q", [*range(8), 99])).num_computed_tokens
    d = d.cache_blocks(r8, 8)
    after = d.get_computed_blocks(d.make_request("q", [*range(8), 99])).num_computed_tokens
    return [*wire_rows,
            ("delayed caching: hit before and after cache_blocks(r, 8); a second call changes nothing",
             (before, after, d.cache_blocks(r8, 8) is d), (0, 8, True)),
            ("queue 0-4: popleft, remove 2, append 2, prepend [5, 0], popleft_n(3), left, empty popleft", queue,
             [0, [1, 3, 4], [1, 3, 4, 2], [5, 0, 1, 3, 4, 2], [5, 0, 1], 3, PoolRejection.NO_FREE_BLOCKS]),
            ("10 tokens in 2 blocks of 2; 3 tokens: rejection", (too_big.rejection, fits.rejection),
             (ManagerRejection.INSUFFICIENT_BLOCKS, None)),
            ("three bucket specs, the 64-window group's block 4 gone: hit, group lengths",
             (three.hit_length, [len(b) for b in three.blocks_by_group]), (64, [4, 4, 4])),
            ("sglang bigram matches", [bigram([1, 2, 3, 4, 5], [1, 2, 3, 9, 5]), bigram([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]),
                                       bigram([1, 2], [1, 2])], [2, 4, 1]),
            ("a bigram view of a bigram view is itself", RadixKey.of([1, 2, 3]).bigram_view().bigram_view(),
             RadixKey.of([1, 2, 3]).bigram_view()),
            ("key index 12 of 12 units rejected as", rejection_of(lambda: key[12]), SGLangRejection.KEY_INDEX_OUT_OF_RANGE),
            ("repr of 12 tokens under extra key test: names, extra key, ends in ...",
             (repr(key).startswith("RadixKey"), "extra_key='test'" in repr(key), "..." in repr(key),
              "..." in repr(RadixKey.of(list(range(10))))), (True, True, True, False))]


def _vllm_pool_rows() -> Rows:
    """docs/peers/vllm.md §5 (the block pool, blocks 1..4 usable, block 0 the null block): usage = 1 - free / usable (0
    with no usable block); the free queue and pool refuse what vLLM raises on; the hash map keeps duplicates in
    insertion order and a pop of an id it does not hold changes nothing; touch and free skip the null block, a freed
    unhashed block goes to the queue's front; cache_full_blocks with no new full block is a no-op, with more full
    blocks than hashes is refused, and skips a null block in the table; evict_blocks drops an identity with one
    BlockRemoved; reset_prefix_cache refuses while a block is in use, else clears every identity with
    AllBlocksCleared, the queue order unchanged; take_events drains."""
    from kvexact.reference.peers import vllm_pool as vp
    from kvexact.reference.peers.vllm_hashing import key_with_group
    from kvexact.reference.rejections import rejection_of

    Rej = vp.PoolRejection
    q = vp.FreeQueue(range(1, 4))
    queue_refusals = [rejection_of(f) for f in (lambda: q.popleft_n(4), lambda: q.remove(7), lambda: q.append(1),
                                                lambda: q.prepend_n([7, 7]), lambda: q.popleft_n(-1),
                                                lambda: q.popleft_n(True))]
    h1, h2 = bytes([1]) * 32, bytes([2]) * 32
    k1 = key_with_group(h1, 0)
    m = vp.HashToBlockMap().insert(k1, 1).insert(k1, 2)
    miss = m.pop(k1, 3)
    hits = (len(m), m.get_one(k1), miss[0] is m, miss[1], m.pop(k1, 1)[0].as_dict())
    p = vp.new_pool(5, enable_events=True)
    empty_usage = (p.usage(), vp.new_pool(1).usage())
    pool_refusals = [rejection_of(f) for f in (lambda: vp.touch(p, [5]), lambda: vp.get_new_blocks(p, 5),
                                               lambda: vp.free_blocks(p, [1]),
                                               lambda: vp.insert_cached(vp.insert_cached(p, 1, k1), 1, k1))]
    p, taken = vp.get_new_blocks(p, 2)
    usage = p.usage()
    p = vp.touch(p, [0, 1])
    touched = p.ref_cnt
    src = vp.CacheSource((1, 2, 3, 4), (h1, h2), (None, None))
    same = vp.cache_full_blocks(p, src, [1, 2], 1, 1, 2) is p
    too_many = rejection_of(lambda: vp.cache_full_blocks(p, src, [1, 2, 3], 0, 3, 2))
    p = vp.cache_full_blocks(p, src, [0, 2], 0, 2, 2)
    keys = p.block_key
    p = vp.free_blocks(p, [0, 1, 1, 2])
    freed = (p.ref_cnt, p.free.blocks)
    refused_reset = vp.reset_prefix_cache(vp.touch(p, [3]))[1]
    p = vp.evict_blocks(p, [2, 4])
    evicted = p.block_key
    p, cleared = vp.reset_prefix_cache(p)
    p, events = vp.take_events(p)
    return [("vLLM free queue 1..3: popleft_n(4), remove 7, append 1, prepend [7, 7], popleft_n(-1), popleft_n(True)",
             queue_refusals, [Rej.CANNOT_GET_FREE_BLOCKS, Rej.BLOCK_NOT_FREE, Rej.BLOCK_ALREADY_FREE,
                              Rej.BLOCK_ALREADY_FREE, Rej.BAD_COUNT, Rej.BAD_COUNT]),
            ("vLLM hash map with blocks 1, 2 under one key: entries, first, pop of 3 (same map, None), pop of 1",
             hits, (1, 1, True, None, {k1: (2,)})),
            ("vLLM pool of 5: usage empty; usage of a 1-block pool; after taking 2", (*empty_usage, usage, taken),
             (0.0, 0.0, 0.5, (1, 2))),
            ("vLLM pool of 5: touch block 5, take 5, free a free block, hash a hashed block: rejected as",
             pool_refusals, [Rej.UNKNOWN_BLOCK, Rej.CANNOT_GET_FREE_BLOCKS, Rej.BLOCK_ALREADY_FREE,
                             Rej.BLOCK_ALREADY_HASHED]),
            ("vLLM pool: ref counts after touching [0, 1]", touched, (0, 2, 1, 0, 0)),
            ("vLLM cache_full_blocks: 1 of 1 cached is the same pool; 3 full blocks with 2 hashes rejected as",
             (same, too_many), (True, Rej.BAD_COUNT)),
            ("vLLM cache_full_blocks over table [0, 2]: block keys", keys, (None, None, key_with_group(h2, 0), None, None)),
            ("vLLM free [0, 1, 1, 2]: ref counts, free queue (unhashed 1 in front, hashed 2 at the back)", freed,
             ((0, 0, 0, 0, 0), (1, 3, 4, 2))),
            ("vLLM reset_prefix_cache with block 3 in use; after evicting blocks 2, 4: keys; reset; drained events",
             (refused_reset, evicted, cleared, [type(e).__name__ for e in events], p.events),
             (False, (None,) * 5, True, ["BlockStored", "BlockRemoved", "AllBlocksCleared"], ()))]


def _vllm_wire_rows() -> Rows:
    """docs/peers/vllm.md (KV events, vllm.distributed.kv_events): a batch is ``[ts, events, data_parallel_rank]`` in
    MessagePack, each event a tagged array struct with every field in order (``BlockStored``: hashes, parent, token
    ids, block size, lora id, medium, lora name, extra keys, group, spec kind; ``BlockRemoved``: hashes, medium,
    group; msgspec's ``omit_defaults`` does not shorten array-like structs, jcrist/msgspec#720); the JSON encoder writes the same arrays; the ZMQ publisher sends ``[topic, seq,
    payload]`` with an 8-byte big-endian sequence number from 0 (over a loopback socket pair)."""
    import msgspec

    from kvexact.reference.peers import vllm_pool as bp
    from kvexact.reference.peers import vllm_wire as wire

    stored = bp.BlockStored((11, 12), None, (1, 2, 3, 4), 2, None, None, (None, None), 0)
    stored_g1 = bp.BlockStored((13,), 12, (5, 6), 2, 3, "a", ((1,),), 1, medium="CPU", kv_cache_spec_kind="full")
    events = [stored, stored_g1, bp.BlockRemoved((11,), 0), bp.BlockRemoved((13,), 1), bp.AllBlocksCleared()]
    decoded = msgspec.msgpack.decode(wire.encode_batch(events, ts=0.5, rank=2))
    expected = [0.5, [["BlockStored", [11, 12], None, [1, 2, 3, 4], 2, None, "GPU", None, [None, None], 0, None],
                      ["BlockStored", [13], 12, [5, 6], 2, 3, "CPU", "a", [[1]], 1, "full"],
                      ["BlockRemoved", [11], "GPU", 0], ["BlockRemoved", [13], "GPU", 1], ["AllBlocksCleared"]], 2]
    now = msgspec.msgpack.decode(wire.encode_batch([bp.AllBlocksCleared()]))
    rows: Rows = [("vLLM wire batch (ts 0.5, rank 2) of two stores, two removals and a clear", decoded, expected),
                  ("vLLM wire batch without ts or rank: ts a float, the events",
                   (type(now[0]), now[1:]), (float, [[["AllBlocksCleared"]], None])),
                  ("vLLM wire JSON batch (ts 0.0) of one removal",
                   wire.encode_batch_json([bp.BlockRemoved((7,), 0)], ts=0.0), b'[0.0,[["BlockRemoved",[7],"GPU",0]],null]'),
                  ("vLLM wire JSON batch without ts: ts a float, rank 4",
                   [type(v) if i == 0 else v for i, v in enumerate(msgspec.json.decode(
                       wire.encode_batch_json([], rank=4)))], [float, [], 4])]
    import zmq

    pub = wire.Publisher(topic=b"kv")
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    try:
        sub.setsockopt(zmq.SUBSCRIBE, b"kv")
        sub.connect(pub.endpoint)
        joined = pub.wait_for_subscriber(30.0)
        pub.publish([bp.BlockRemoved((11,), 0)])
        pub.publish([])
        got = []
        for _ in range(2):
            if not sub.poll(30_000):
                break
            topic, seq, payload = sub.recv_multipart()
            got.append((topic, seq, msgspec.msgpack.decode(payload)[1]))
        bound = pub.endpoint.startswith("tcp://127.0.0.1:") and int(pub.endpoint.rsplit(":", 1)[1]) > 0
    finally:
        sub.close()
        ctx.term()
        pub.close()
    rows.append(("vLLM ZMQ publisher on 127.0.0.1, a random port: bound, subscriber joined, two messages",
                 (bound, joined, got, pub.seq),
                 (True, True, [(b"kv", bytes(8), [["BlockRemoved", [11], "GPU", 0]]), (b"kv", bytes(7) + b"\x01", [])], 2)))
    return rows


def vllm_protocol_adapter() -> Rows:
    """The vLLM profile behind the adapter protocol (2 groups of 6 two-token blocks, ids 1..6; docs/peers/vllm.md §5):
    r's 6 prompt tokens take blocks 1, 2, 3 (the free queue's head) and its 7th token block 4; once r is freed
    (tail first: the unhashed block 4 goes to the head, the hashed 3, 2, 1 to the tail) the same prompt plus one
    token hits 6 tokens on 1, 2, 3 and takes 4 for its last token; 14 tokens need 7 blocks of the 6 (refused, the
    state digest unchanged); s grown to 12 tokens holds all 6 blocks and a 13th token is refused; a second start
    of a live id, an empty prompt and an unknown id are refused by name."""
    from kvexact.reference import adapters as ad
    from kvexact.reference.peers.vllm_protocol import VllmProtocolAdapter

    a = VllmProtocolAdapter(ad.AdapterConfig())
    prompt = [5, 6, 7, 8, 9, 10]
    first = a.start("r", prompt)
    grown = (a.append("r", 11).accepted, a.length("r"), [a.table("r", g) for g in (0, 1)], a.cache("r").accepted)
    refused = [a.start("r", [1]).rejection, a.start("e", []).rejection, a.append("x", 1).rejection,
               a.release("x").rejection, a.cache("x").rejection]
    a.release("r")
    second = a.start("s", [*prompt, 12])
    second_state = (second.hit_tokens, [a.table("s", g) for g in (0, 1)], a.length("s"))
    before = a.digest()
    big = a.start("big", list(range(14)))
    unchanged = before == a.digest()
    for t in range(13, 18):  # s's 7 tokens grow to 12: blocks 1..6, every block of the group
        a.append("s", t)
    grown_to_full = a.length("s")
    full = a.append("s", 18)
    return [("r's start: accepted, hit; append 11: accepted, length, tables, cache",
             ((first.accepted, first.hit_tokens), grown), ((True, 0), (True, 7, [[1, 2, 3, 4]] * 2, True))),
            ("start of live r, empty start, append/release/cache of unknown x: rejections", refused,
             ["DUPLICATE_REQUEST", "EMPTY_APPEND", "UNKNOWN_REQUEST", "UNKNOWN_REQUEST", "UNKNOWN_REQUEST"]),
            ("after r is freed, s = r's prompt + 1: hit, tables, length", second_state, (6, [[1, 2, 3, 4]] * 2, 7)),
            ("a 14-token start (7 blocks of 6) rejected as", big.rejection,
             "INSUFFICIENT_BLOCKS"),
            ("the digest before and after the refused start; s grown to 12 tokens, a 13th token rejected as",
             (unchanged, grown_to_full, full.rejection, a.self_check()), (True, 12, "INSUFFICIENT_BLOCKS", None)),
            ("vllm extra keys: untagged LoRA + image + salt (notes §3); a bool token rejected as",
             (_untagged_example(), _bool_token()), (("name", ("hash1", 0), "salt"), "BAD_TOKEN"))]


def _untagged_example() -> Any:
    from kvexact.reference.peers.vllm_hashing import untagged

    return untagged((("lora", "name", "path"), ("mm", "hash1", 0), ("cache_salt", "salt")))


def _bool_token() -> Any:
    from kvexact.reference.peers.vllm_hashing import BlockHasher
    from kvexact.reference.rejections import rejection_of

    reason = rejection_of(lambda: BlockHasher(2).hashes([1, True, 3, 4]))
    return None if reason is None else reason.name


def sglang_scenarios() -> Rows:
    """docs/peers/sglang.md §8 (expected values are the notes'): S2 a disabled cache stores and matches nothing; S9, S12,
    S13, S14 eviction through the recording allocator A (oldest first, LRU refreshed by a match, a whole edge
    overshoots, a parent is pushed again once its last child goes); S21 the priority policy and S24 LFU; S28-S29 the
    request protocol over a real 16-slot pool, with §5's I2 (available + evictable + protected + session + uncached
    = 16) in each state; §4 tlru is not reproduced and an unknown policy is refused; §9 pretty_print runs."""
    from kvexact.reference.peers.sglang import (
        RadixCache,
        Req,
        admit,
        checkpoint,
        pool_accounting,
        release_kv_cache,
    )
    from kvexact.reference.peers.sglang_key import SGLangRejection
    from kvexact.reference.peers.sglang_pool import RecordingAllocator, ReqToTokenPool, TokenToKVPoolAllocator
    from kvexact.reference.rejections import rejection_of

    def recorded(policy: str, inserts: list[tuple[list[int], int]], budget: int, touch: list[int] | None = None
                 ) -> tuple[int, list[tuple[int, ...]], tuple[int, int, int]]:
        a = RecordingAllocator()
        c = RadixCache(allocator=a, eviction_policy=policy)
        for key, prio in inserts:
            c.insert(key, priority=prio)
        if touch is not None:
            c.match_prefix(touch)
        evicted = c.evict(budget)
        return evicted, a.freed, c.sizes()

    off = RadixCache(disable=True)
    stored = off.insert([1, 2, 3]).prefix_len
    miss = off.match_prefix([1, 2, 3])
    out: Rows = [
        ("S2 disabled: insert, total, match, last node is the root",
         (stored, off.total_size(), miss.device_prefix_len, miss.last_device_node is off.root_node), (0, 0, 0, True)),
        ("S9 evict(2) of [1,2]/[10,20] and [3,4]/[30,40]: evicted, freed, sizes",
         recorded("lru", [([1, 2], 0), ([3, 4], 0)], 2)[:2], (2, [(1, 2)])),
        ("S12 after matching [1,2,3]: evict(3), evict(6) freed",
         [recorded("lru", [([1, 2, 3], 0), ([4, 5, 6], 0), ([7, 8, 9], 0)], b, [1, 2, 3])[1] for b in (3, 6)],
         [[(4, 5, 6)], [(4, 5, 6), (7, 8, 9)]]),
        ("S13 evict(1) of a 10-token edge: evicted, sizes",
         (lambda r: (r[0], r[2]))(recorded("lru", [(list(range(1, 11)), 0)], 1)), (10, (0, 0, 0))),
        ("S14 [1,2,3,4] and [1,2,5,6]: evict(4), evict(5)",
         [recorded("lru", [([1, 2, 3, 4], 0), ([1, 2, 5, 6], 0)], b) for b in (4, 5)],
         [(4, [(3, 4), (5, 6)], (2, 2, 0)), (6, [(3, 4), (5, 6), (1, 2)], (0, 0, 0))]),
        ("S21 priority: [1,2] prio 5, later [3,4] prio 0, evict(2) frees",
         recorded("priority", [([1, 2], 5), ([3, 4], 0)], 2)[1], [(3, 4)]),
        ("S24 LFU: [1,2] twice, later [3,4], evict(2) frees",
         recorded("lfu", [([1, 2], 0), ([1, 2], 0), ([3, 4], 0)], 2)[1], [(3, 4)]),
        ("§4 slru (threshold 2) and lru: [1,2] twice, later [3,4], [5,6]; evict(2) frees",
         [recorded(p, [([1, 2], 0), ([1, 2], 0), ([3, 4], 0), ([5, 6], 0)], 2)[1] for p in ("slru", "lru")],
         [[(3, 4)], [(1, 2)]]),
        ("§4 a disabled cache forces lru: tlru accepted", RadixCache(disable=True, eviction_policy="tlru").eviction_policy,
         "lru"),
        ("§4 policies tlru and 'mru-ish' rejected as",
         [rejection_of(lambda p=p: RadixCache(eviction_policy=p)) for p in ("tlru", "mru-ish")],
         [SGLangRejection.POLICY_NOT_REPRODUCED, SGLangRejection.UNKNOWN_EVICTION_POLICY])]
    alloc = TokenToKVPoolAllocator(16)
    c = RadixCache(allocator=alloc, req_to_token_pool=ReqToTokenPool(4, 16))
    r1, r2 = Req("r1", [1, 2, 3, 4]), Req("r2", [1, 2, 3, 4])
    admitted = [admit(c, alloc, r1), admit(c, alloc, r2)]

    def terms(running: list[Any]) -> tuple[Any, ...]:
        a = pool_accounting(c, alloc, 16, running)
        return (a.available_slots, a.evictable_slots, a.protected_slots, a.session_held_slots, a.uncached_slots,
                a.holds)

    states = [terms([r1, r2])]
    release_kv_cache(c, r1)
    states.append(terms([r2]))
    release_kv_cache(c, r2)
    states.append(terms([]))
    out.append(("S28 R1, R2 admit [1,2,3,4]: admitted; I2 terms running both, after R1, after R2",
                (admitted, states), ([True, True], [(8, 0, 0, 0, 8, True), (8, 4, 0, 0, 4, True),
                                                    (12, 4, 0, 0, 0, True)])))
    r3 = Req("r3", [1, 2, 3, 4, 9, 10])
    ok = admit(c, alloc, r3)
    running = (r3.num_matched_prefix_tokens, c.sizes(), terms([r3]))
    checkpoint(c, r3, 5)
    after = (r3.cache_protected_len, c.sizes(), terms([r3]))
    release_kv_cache(c, r3)
    printed = c.pretty_print()  # the finished tree: [1,2,3,4] -> [9] -> [10] (finish checkpoints 6), unlocked
    done = (alloc.available_size(), c.sizes(), c.evict(100), alloc.available_size())
    out.append(("S29 R3 [1,2,3,4,9,10]: admitted, matched, sizes, I2 terms", (ok, *running),
                (True, 4, (4, 0, 4), (10, 0, 4, 0, 2, True))))
    out.append(("S29 checkpoint(5): protected len, sizes, I2 terms", after, (5, (5, 0, 5), (10, 0, 5, 0, 1, True))))
    out.append(("S29 finish: available, sizes, evict(100), available", done, (10, (6, 6, 0), 6, 16)))
    out.append(("§9 pretty_print of the finished tree (one line per edge, indented by depth, then the total)",
                printed.splitlines(), ["[1, 2, 3, 4] r=0", "  [9] r=0", "    [10] r=0", "#tokens: 6"]))
    return out


def allocator_checks_0x04F() -> Rows:
    """The allocator's self-check counts every strong reference (0x05F): r's 3 tokens in 2-token blocks of pool 1000
    with a reader's snapshot of r and two read leases on block 0 give block 0 four references (map, reader, two
    leases) and block 1 two, and the self-check accepts that state (its own count of each reference agrees); it compares a table's handles with the pool by value,
    so r's table rebuilt from ids read back from a wire (pool 1000 built at run time, an equal value, another
    object) is still accepted, while a handle naming pool 1001 is refused as foreign. 0x04F: only a PUBLISHED
    receipt has a successor to compensate: a compensation's own receipt (outcome COMPENSATED) is refused
    (NOTHING_TO_COMPENSATE), like a rolled-back one. 0x0D: the free queue is exactly the pool minus the reachable
    blocks, each once, so the worked ledger's queue 103..107 with block 107 listed twice is refused
    (FREE_QUEUE_MISMATCH)."""
    import attrs

    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import Allocator, AllocRejection, SelfCheckFailed
    from kvexact.reference.handles import BlockHandle
    from kvexact.reference.labs.ledgers import worked_fixture
    from kvexact.reference.ledgers import LedgerRejection, compute_ledger
    from kvexact.reference.pool import GroupConfig
    from kvexact.reference.rejections import rejection_of

    def made() -> Allocator:
        alloc = Allocator([GroupConfig(0, int("1000"), 2, 8)], [[1, 2, 3, 4]])
        alloc.allocate("r", [1, 2, 3])
        lifecycle.reader_snapshot(alloc, "x", "r")
        for _ in range(2):
            lifecycle.retain_read(alloc, alloc.request("r").tables[0][0])
        return alloc

    def checked(pool_id: int | None) -> str | None:
        """The self-check's verdict on ``made()`` with r's table rebuilt naming ``pool_id`` (None: as it is)."""
        alloc = made()
        if pool_id is not None:
            rec = alloc.request("r")
            alloc.requests["r"] = attrs.evolve(rec, tables=(tuple(
                BlockHandle(pool_id, h.cache_group_id, h.block_id, h.generation) for h in rec.tables[0]),))
        try:
            alloc.self_check()
        except SelfCheckFailed as exc:
            return "refused: stale or foreign" if "stale or foreign" in str(exc) else str(exc)
        return None

    held = made()
    refs = [held.pools[0].refcount(h.block_id) for h in held.request("r").tables[0]]
    plain = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3, 4]])
    compensation = lifecycle.compensate(plain, plain.allocate("r", [1, 2, 3]))
    twice = attrs.evolve(worked_fixture(), free_queue_block_ids=(103, 104, 105, 106, 107, 107))
    return [("r with a reader and two leases on block 0: references of blocks 0, 1", refs, [1 + 1 + 2, 1 + 1]),
            ("self-check of that state; with r's table naming pool 1000 built at run time; naming pool 1001",
             [checked(None), checked(int("10" + "00")), checked(1001)], [None, None, "refused: stale or foreign"]),
            ("compensation of a compensation's receipt (COMPENSATED) rejected as",
             (compensation.outcome, rejection_of(lambda: lifecycle.compensate(plain, compensation))),
             ("COMPENSATED", AllocRejection.NOTHING_TO_COMPENSATE)),
            ("worked ledger with block 107 twice in the free queue rejected as",
             rejection_of(lambda: compute_ledger(twice)), LedgerRejection.FREE_QUEUE_MISMATCH)]


def allocator_paths_0x05C() -> Rows:
    """Allocator steps and refusals no other quick case reached (issue #25, lines no quick check executed). An
    allocator needs one block id list per cache group and group ids 0..n-1 in order (ValueError otherwise). 0x05C
    by hand: r holds one full 2-token block (tokens 1, 2); a boundary append of token 3 reserves group 0's
    destination (RESERVED, r's block still one reference), the delayed writer of 0x05E holding that reserved
    handle writes token 3 into it, and the append publishes: r reads 1, 2, 3, the destination is REFERENCED, and
    the epoch is 2 (two transactions reserved blocks, docs/design.md "Counters"). Step 1 with the superseded epoch 0 is
    EPOCH_MISMATCH; allocating r again DUPLICATE_REQUEST; a prefix hit of no keys EMPTY_APPEND; a delayed write
    through a handle of group 3 FOREIGN_POOL_HANDLE; a reader's snapshot released leaves each block one reference.
    0x09C at P = 16 after 20 shared tokens of 64 KiB rows: r = 4 rows copied (4 x 64 KiB), traffic copy read +
    copy write + the appended row (2 x 4 + 1 rows), amplification 2r + 1 = 9; a negative shared length is
    refused (NEGATIVE_LENGTH), as is a negative free extent (NEGATIVE_SIZE, 0x02F). 0x0D: a claimed figure the
    ledger does not have is a KeyError, a claim of the worked ledger's 3 unique blocks is accepted. 0x04E with
    block sizes that differ per group (2 and 4 tokens): r = [1, 2] appending 3 reserves a new block in group 0
    (a boundary) and writes group 1's 2-row tail in place, or copies it on write (2 rows) while s shares it; one
    transaction either way, r reads 1, 2, 3 and s still 1, 2."""
    from seed_cases_index import _raises

    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import Allocator, AllocRejection
    from kvexact.reference.handles import BlockHandle
    from kvexact.reference.labs.ledgers import worked_fixture
    from kvexact.reference.ledgers import LedgerRejection, cow_cost, external_fragmentation, reconcile
    from kvexact.reference.pool import BlockState, GroupConfig, PoolRejection
    from kvexact.reference.rejections import rejection_of

    g0 = GroupConfig(0, 0, 2, 8)
    built = [_raises(lambda: Allocator([g0], [[1], [2]])), _raises(lambda: Allocator([], [])),
             _raises(lambda: Allocator([GroupConfig(1, 0, 2, 8)], [[1]]))]
    alloc = Allocator([g0], [[1, 2, 3, 4]])
    alloc.allocate("r", [1, 2])
    txn = alloc.begin("append", "r", ("new",), (3,))
    dest = alloc.append_reserve(txn, 0)
    reserved = (alloc.block_state(dest), alloc.refcount(alloc.request("r").tables[0][0]))
    lifecycle.delayed_write(alloc, dest, 0, 3)
    alloc.append_write(txn)
    alloc.append_publish(txn)
    refused = [rejection_of(lambda: alloc.validate_expected("r", None, None, 0)),
               rejection_of(lambda: alloc.allocate("r", [9])),
               rejection_of(lambda: lifecycle.prefix_hit(alloc, "p", [])),
               rejection_of(lambda: lifecycle.delayed_write(alloc, BlockHandle(0, 3, dest.block_id, 1), 0, 9))]
    lifecycle.reader_snapshot(alloc, "x", "r")
    lifecycle.reader_release(alloc, "x")
    cow, row = cow_cost(16), 64 * 1024

    def mixed(forked: bool) -> tuple[Any, ...]:
        """r = [1, 2] in groups of 2- and 4-token blocks (s forked from it or not), then token 3 appended."""
        two = Allocator([g0, GroupConfig(1, 1, 4, 8)], [[1, 2, 3, 4]] * 2)
        two.allocate("r", [1, 2])
        if forked:
            lifecycle.fork(two, "r", "s")
        receipt = two.append("r", 3)
        two.self_check()
        return (receipt.paths, receipt.new_physical_blocks, receipt.copied_rows,
                [len(t) for t in two.request("r").tables], two.tokens_of("r"),
                two.tokens_of("s") if forked else None, two.epoch)
    return [("allocators of 1 group with 2 id lists, of no group, of group 1 alone", built, ["ValueError"] * 3),
            ("r's boundary append: destination state, r's block 0 references", reserved, (BlockState.RESERVED, 1)),
            ("after the delayed write and publication: r's tokens, destination state, epoch",
             (alloc.tokens_of("r"), alloc.block_state(dest), alloc.epoch), ((1, 2, 3), BlockState.REFERENCED, 2)),
            ("epoch 0 at step 1; allocate r again; prefix hit of no keys; delayed write in group 3: rejected as",
             refused, [AllocRejection.EPOCH_MISMATCH, AllocRejection.DUPLICATE_REQUEST, AllocRejection.EMPTY_APPEND,
                       PoolRejection.FOREIGN_POOL_HANDLE]),
            ("references of r's blocks after a reader's snapshot is released",
             [alloc.refcount(h) for h in alloc.request("r").tables[0]], [1, 1]),
            ("0x09C cow_cost(16): copy payload, traffic, amplification", (cow.copy_payload_bytes, cow.traffic_bytes,
                                                                          cow.amplification),
             (4 * row, (2 * 4 + 1) * row, 2 * 4 + 1)),
            ("shared length -1; free extents [4, -1] rejected as",
             [rejection_of(lambda: cow_cost(16, -1)), rejection_of(lambda: external_fragmentation([4, -1]))],
             [LedgerRejection.NEGATIVE_LENGTH, LedgerRejection.NEGATIVE_SIZE]),
            # 0x04E with a block size per group: group 0 (2 tokens) is at a boundary and reserves a new block while
            # group 1 (4 tokens, 2 rows) writes its tail in place, or copies it on write when s shares it
            ("[1, 2] + 3 in 2- and 4-token groups: paths, new blocks, copied rows, blocks, tokens of r, of s, epoch",
             [mixed(False), mixed(True)],
             [(("new", "unique"), 1, 0, [2, 1], (1, 2, 3), None, 2),
              (("new", "cow"), 2, 2, [2, 1], (1, 2, 3), (1, 2), 2)]),
            ("claims of figure nope; of 3 unique blocks",
             (_raises(lambda: reconcile(worked_fixture(), {"nope": 1})),
              reconcile(worked_fixture(), {"unique_blocks": 3}).unique_blocks), ("KeyError", 3))]


def allocator_steps_0x05C() -> Rows:
    """0x05C's steps out of order, each refused by name with the state unchanged (lines no quick check executed;
    one group of 2-token blocks 1..6). A boundary append of token 3 to r = [1, 2] (0x04A): a second reservation
    of its destination, the COW steps (cow_begin, cow_write, cow_validate, cow_rollback) on its "new" path and a
    write into r's published block 0 are WRONG_STEP_FOR_PATH or STEP_OUT_OF_ORDER; append_write before the row is
    written, and publication before append_write, are STEP_OUT_OF_ORDER. An in-place append of token 2 to r = [1]
    (0x04E "unique") published unwritten, or with token 9 written in its place, shows a frontier that does not hold
    the successor's rows (FRONTIER_NOT_VALID). A COW append of token 2 to r = [1] shared with s: write_rows on the
    COW group, a copy before the destination is reserved, a write before the copy, and a second copy are refused;
    the steps in order then publish r = 1, 2 while s keeps 1."""
    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import Allocator
    from kvexact.reference.allocator import AllocRejection as A
    from kvexact.reference.pool import GroupConfig
    from kvexact.reference.rejections import rejection_of

    def made(tokens: list[int], fork: bool = False) -> Allocator:
        alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3, 4, 5, 6]])
        alloc.allocate("r", tokens)
        if fork:
            lifecycle.fork(alloc, "r", "s")
        return alloc

    b = made([1, 2])
    tb = b.begin("append", "r", ("new",), (3,))
    dest, r0 = b.append_reserve(tb, 0), b.request("r").tables[0][0]
    boundary = [rejection_of(f) for f in (lambda: b.append_reserve(tb, 0), lambda: b.append_write(tb),
                                          lambda: b.cow_begin(tb), lambda: b.cow_write(tb, 0, dest, 0, (3,)),
                                          lambda: b.cow_validate(tb), lambda: b.cow_rollback(tb, b.journal.mark()),
                                          lambda: b.write_rows(tb, 0, r0, 0, (3,)))]
    b.write_rows(tb, 0, dest, 0, (3,))
    boundary.append(rejection_of(lambda: b.append_publish(tb)))
    u = made([1])
    tu = u.begin("append", "r", ("unique",), (2,))
    in_place = [rejection_of(lambda: u.append_in_place(tu))]
    u.write_rows(tu, 0, u.request("r").tables[0][0], 1, (9,))
    in_place.append(rejection_of(lambda: u.append_in_place(tu)))
    c = made([1], fork=True)
    tc = c.begin("append", "r", ("cow",), (2,))
    cow = [rejection_of(lambda: c.write_rows(tc, 0, c.request("r").tables[0][0], 1, (2,)))]
    c.cow_begin(tc)
    cow.append(rejection_of(lambda: c.cow_copy(tc, 0, 1)))
    cdest = c.cow_reserve(tc, 0)
    cow.append(rejection_of(lambda: c.cow_write(tc, 0, cdest, 1, (2,))))
    c.cow_copy(tc, 0, 1)
    cow.append(rejection_of(lambda: c.cow_copy(tc, 0, 1)))
    c.cow_write(tc, 0, cdest, 1, (2,))
    c.cow_validate(tc)
    c.cow_publish(tc)
    c.cow_release_sources(tc)
    c.self_check()
    return [("boundary append: reserve twice, append_write unwritten, cow_begin, cow_write, cow_validate, "
             "cow_rollback, write r's block 0, publish before append_write: rejected as", boundary,
             [A.WRONG_STEP_FOR_PATH, A.STEP_OUT_OF_ORDER, A.STEP_OUT_OF_ORDER, A.WRONG_STEP_FOR_PATH,
              A.STEP_OUT_OF_ORDER, A.WRONG_STEP_FOR_PATH, A.WRONG_STEP_FOR_PATH, A.STEP_OUT_OF_ORDER]),
            ("in-place append published unwritten; with token 9 written: rejected as", in_place,
             [A.FRONTIER_NOT_VALID] * 2),
            ("COW append: write_rows, copy before reserve, write before copy, copy twice: rejected as", cow,
             [A.WRONG_STEP_FOR_PATH, A.STEP_OUT_OF_ORDER, A.STEP_OUT_OF_ORDER, A.WRONG_STEP_FOR_PATH]),
            ("COW append in order: tokens of r, of s", (c.tokens_of("r"), c.tokens_of("s")), ((1, 2), (1,)))]


def allocator_self_check() -> Rows:
    """The allocator's self-check names the first violation of a corrupted state (lines no quick check executed).
    Two groups of 2-token blocks 1..6; r holds 3 tokens (blocks 1, 2 in each group), block 1 of group 0 is cached
    under key k, leased once and snapshotted by reader x. The clean state passes; each corruption below, one at a
    time, is refused, the message naming it: r with one table for two groups; r claiming 5 tokens over 2 blocks;
    r mapping a block a transaction reserved; block 1 holding 1 row where r sees 2; group 1's rows differing from
    group 0's; reader x's and the lease's handles one generation ahead; a reference counted that nothing holds;
    the queue's two maps disagreeing, or its first two positions swapped; a queued block taken off the queue with
    no other role; a block reserved by a transaction that is not open; a key on a block the index does not map;
    3 rows in a 2-token block; an index entry for a key no block carries; a write that bypassed the journal (the
    incremental digest then differs from the recomputed one)."""
    import attrs

    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import Allocator, SelfCheckFailed
    from kvexact.reference.pool import GroupConfig

    def made() -> Allocator:
        alloc = Allocator([GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 2, 8)], [[1, 2, 3, 4, 5, 6]] * 2)
        alloc.allocate("r", [1, 2, 3])
        lifecycle.cache_block(alloc, "r", 0, "k")
        lifecycle.reader_snapshot(alloc, "x", "r")
        lifecycle.retain_read(alloc, alloc.request("r").tables[0][0])
        return alloc

    def verdict(corrupt: Any) -> str | None:
        alloc = made()
        corrupt(alloc)
        try:
            alloc.self_check()
        except SelfCheckFailed as exc:
            return str(exc)
        return None

    def set_r(a: Allocator, **changes: Any) -> None:
        a.requests["r"] = attrs.evolve(a.request("r"), **changes)

    def set_block(a: Allocator, g: int, b: int, **changes: Any) -> None:
        a.pools[g].blocks[b] = attrs.evolve(a.pools[g].blocks[b], **changes)

    def b0(a: Allocator) -> Any:
        return a.request("r").tables[0][0]

    def head(a: Allocator) -> int:
        return a.pools[0].queue_order()[0]

    def unqueue(a: Allocator, b: int) -> None:
        pool = a.pools[0]
        seq = pool.q_seq[b]
        del pool.q_seq[b]
        del pool.q_at[seq]

    def swap_head(a: Allocator) -> None:
        q_at = a.pools[0].q_at
        s0, s1 = sorted(q_at.data)[:2]
        q_at[s0], q_at[s1] = q_at[s1], q_at[s0]

    def reserved_by_closed(a: Allocator) -> None:
        b = head(a)
        unqueue(a, b)
        set_block(a, 0, b, reserved_by="t999")

    def ahead(h: Any) -> Any:
        return attrs.evolve(h, generation=h.generation + 1)

    corruptions = [
        ("one table", lambda a: set_r(a, tables=a.request("r").tables[:1]), "1 tables for 2 groups"),
        ("5 tokens", lambda a: set_r(a, context_tokens=5), "2 blocks for 5 tokens"),
        ("reserved block mapped", lambda a: set_block(a, 0, b0(a).block_id, reserved_by="t9"), "maps unpublished"),
        ("1 row where 2 are seen", lambda a: set_block(a, 0, b0(a).block_id, rows=(1,)), "sees 2 rows"),
        ("group 1's rows differ", lambda a: set_block(a, 1, a.request("r").tables[1][0].block_id, rows=(1, 9)),
         "cache groups disagree"),
        ("reader ahead", lambda a: a.readers.__setitem__("x", (attrs.evolve(a.request("r"), tables=tuple(
            tuple(ahead(h) for h in t) for t in a.request("r").tables)), a.readers["x"][1])), "reader x holds stale"),
        ("lease ahead", lambda a: a.leases.__setitem__(next(iter(a.leases.data)), ahead(b0(a))), "holds stale"),
        ("a reference too many", lambda a: a.pools[0].incref(b0(a).block_id), "stored refcounts"),
        ("queue maps disagree", lambda a: a.pools[0].q_at.__delitem__(sorted(a.pools[0].q_at.data)[0]),
         "queue maps disagree"),
        ("queue head swapped", swap_head, "queue position"),
        ("no role", lambda a: unqueue(a, head(a)), "is queued/referenced/reserved = [False, False, False]"),
        ("closed transaction", reserved_by_closed, "reserved by closed transaction t999"),
        ("key z not indexed", lambda a: set_block(a, 0, head(a), cache_key="z"), "carries key 'z'"),
        ("3 rows", lambda a: set_block(a, 0, head(a), rows=(7, 8, 9)), "holds 3 rows"),
        ("index entry q", lambda a: a.index.__setitem__((0, "q"), a.pools[0].handle(head(a))), "index entry 'q'"),
        ("journal bypassed", lambda a: a.scalars.data.__setitem__("epoch", 99), "incremental digest differs"),
    ]
    named = [(what, (verdict(f) or "")) for what, f, _name in corruptions]
    return [("the clean state", verdict(lambda a: None), None),
            ("corruptions refused, the message naming each",
             [(what, name in message) for (what, message), (_w, _f, name) in zip(named, corruptions, strict=True)],
             [(what, True) for what, _f, _name in corruptions])]


def reuse_gate_steps_0x0CD() -> Rows:
    """0x0CD's use transaction runs its eight steps in order: authorize, namespace generation, lookup, leases,
    versions, declared positions, mapping wait, snapshot; an accepted attempt has run all eight, once each. Step 5
    compares each leased block's pool generation with the handle's: the fixture's block (0, 0, 3) is at
    generation 5; recycled to 6 (0x0CG: a new owner) or found at 4, the handle's 5 no longer names it, so both are
    refused as STALE_POOL_GENERATION in step 5 (the fifth step begun)."""
    import attrs

    from kvexact.reference.labs import reuse_gate as fx
    from kvexact.reference.reuse_gate import ReuseRejection, attempt

    order = ("authorize_namespace", "validate_namespace_generation", "lookup_candidate", "acquire_leases",
             "validate_versions", "validate_declared_positions", "wait_mapping", "freeze_snapshot")
    ok = attempt(fx.RUNTIME, fx.request("q01"))
    moved = [attempt(attrs.evolve(fx.RUNTIME, block_generations={(0, 0, 3): g, (0, 0, 7): 2}), fx.request("q01"))
             for g in (5 + 1, 5 - 1)]
    return [("accepted attempt: steps, a receipt", (ok.steps, ok.receipt is not None), (order, True)),
            ("block (0, 0, 3) at generation 6, 4: rejections, steps run",
             [(a.rejection, len(a.steps)) for a in moved], [(ReuseRejection.STALE_POOL_GENERATION, 5)] * 2)]


def reuse_gate_equal_values_0x0CD() -> Rows:
    """0x0CD compares the candidate's evidence with the expectation by value: a semantic digest and an execution
    snapshot version that are equal but built separately (different objects, as a runtime that rebuilds them from
    its own records would have) are accepted, all eight steps run; a real difference is still refused. Killers of
    identity comparisons (``is not`` for ``!=``) on the fixture's ``sem-1`` and snapshot version 4 (+ 10**6)."""
    import attrs

    from kvexact.reference.labs import reuse_gate as fx
    from kvexact.reference.reuse_gate import ReuseRejection, attempt

    big = 10**6 + 4
    digest = "".join(["sem", "-", "1"])  # equal to the fixture's "sem-1", a distinct object
    runtime = attrs.evolve(fx.RUNTIME, execution_snapshot_version=int(str(big)),
                           index={**fx.RUNTIME.index, ("ns-a", "k-sys"): attrs.evolve(fx.CANDIDATE, semantic_digest=digest)})
    same = attempt(runtime, fx.request("q01", execution_snapshot_version=int(str(big)), semantic_digest="sem-1"))
    other = attempt(runtime, fx.request("q02", execution_snapshot_version=big + 1))
    return [("equal digest and snapshot version, distinct objects: rejection, steps run",
             (same.rejection, len(same.steps)), (None, 8)),
            ("snapshot version one higher than the runtime's: refused as",
             other.rejection, ReuseRejection.STALE_EXECUTION_SNAPSHOT)]


def blockmap_unit_kernel_block_0x0A() -> Rows:
    """0x0A's block-table expansion with the smallest kernel block, one token: P_a = 4 gives q = 4 / 1 = 4 and
    allocator block 3 becomes kernel blocks 12..15; sizes 0 are refused as NON_POSITIVE_BLOCK_SIZE."""
    from kvexact.reference.blockmap import BlockMapRejection, expand_block_table, expansion_factor
    from kvexact.reference.rejections import rejection_of

    return [("q for P_a = 4, P_k = 1", expansion_factor(4, 1), 4),
            ("[3] at 4 -> 1", expand_block_table([3], 4, 1), [12, 13, 14, 15]),
            ("P_k = 0, P_a = 0: refused as",
             [rejection_of(lambda: expansion_factor(4, 0)), rejection_of(lambda: expansion_factor(0, 4))],
             [BlockMapRejection.NON_POSITIVE_BLOCK_SIZE] * 2)]


def prompt_schema_root_0x0CB() -> Rows:
    """0x0CB: a prompt schema's document element is ``<schema>``; any other root (one named before it in
    alphabetical order, ``<prompt>``, or after it, ``<template>``) is refused as WRONG_ROOT."""
    from kvexact.reference.prompt_cache import MarkupRejection, parse_schema
    from kvexact.reference.rejections import rejection_of

    return [("roots <prompt>, <template>, <schema>: refused as",
             [rejection_of(lambda t=t: parse_schema(f'<{t} name="s" generation="1"><module name="m">a</module></{t}>'))
              for t in ("prompt", "template", "schema")],
             [MarkupRejection.WRONG_ROOT, MarkupRejection.WRONG_ROOT, None])]


CASES = {"adapter projections": adapter_projections, "allocator epochs": allocator_epochs, "lifecycle release": lifecycle_release,
         "lifecycle leases": lifecycle_leases,
         "allocator block sizes": allocator_block_sizes, "allocator refusals": allocator_refusals, "pool policies": pool_policies, "adapter keys": adapter_keys,
         "hybrid windows s17": hybrid_windows_s17, "vllm golden hashes": vllm_golden_hashes,
         "vllm hybrid alignment": vllm_hybrid_alignment, "sglang scenarios": sglang_scenarios,
         "reuse gate 0x0CD": reuse_gate_0x0CD,
         "vllm protocol adapter": vllm_protocol_adapter,
         "sglang orders and pools": sglang_orders_and_pools, "peer units": peer_units,
         "allocator checks 0x04F": allocator_checks_0x04F,
         "allocator paths 0x05C": allocator_paths_0x05C, "allocator steps 0x05C": allocator_steps_0x05C,
         "allocator self-check": allocator_self_check, "reuse gate steps 0x0CD": reuse_gate_steps_0x0CD,
         "prompt schema root 0x0CB": prompt_schema_root_0x0CB,
         "reuse gate equal values 0x0CD": reuse_gate_equal_values_0x0CD,
         "blockmap unit kernel block 0x0A": blockmap_unit_kernel_block_0x0A}
