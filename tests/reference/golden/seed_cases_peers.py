"""Peer-profile and adapter cases of the golden tests (registered in
:mod:`golden`, issue #25): the vLLM and SGLang profiles' adapters, the SGLang tree's own
invariant check, the deliberately faulty prefix index, the vLLM event workload generator and the reference
adapter's KVAllocation projection of an open transaction.

Invariant: each case returns ``(what, got, expected)`` rows whose expected values come from
``docs/peers/vllm.md`` / ``docs/peers/sglang.md``, from ``spec/KVAllocation.tla``, or from the arithmetic written beside
them, never from the reference's own output; a row that differs (or a case that raises) fails its golden test
by name.
"""

from __future__ import annotations

from typing import Any

Rows = list[tuple[str, Any, Any]]


def _refused(call: Any) -> str | None:
    """The text of the rejection ``call`` raises; ``None`` when it is accepted."""
    from kvexact.reference.rejections import Rejected

    try:
        call()
        return None
    except Rejected as exc:
        return str(exc)


def sglang_tree_checks() -> Rows:
    """docs/peers/sglang.md §5 I1: ``evictable_size() + protected_size() == total_size()``; ``check_invariants`` must
    refuse a tree whose evictable counter is one too high as well as one too low. §3: inserting [1, 2, 9] with
    slots 4, 5, 6 beside [1, 2, 3] (slots 1, 2, 3; §7: page size 1 hands out the first free slots from 1) splits
    the edge after [1, 2]; the tree keeps its own slots 1, 2, the new suffix [9] takes slot 6 and the caller's
    4, 5 are duplicates; the projection lists every edge's tokens, slots and lock count. Admission (§3,
    sglang_protocol) locks the last matched node, so a finished [1, 2, 3] matched by [1, 2, 3, 4] is protected
    (3 tokens) while that request runs; the deliberately faulty index drops that lock (all 3 evictable).
    §3 hit_count (0.5.23): every node an insert passes or creates that ends beyond ``inserted_len`` gains one:
    [1, 2] twice (ends at 2 > 0; not at 2 <= 3), [3, 4] twice (ends at 4 > 0, 4 > 3), [5] once."""
    from kvexact.reference.index import IndexConfig
    from kvexact.reference.peers.sglang import RadixCache
    from kvexact.reference.peers.sglang_adapter import SGLangAdapter
    from kvexact.reference.peers.sglang_protocol import SGLangIndexAdapter, UnlockedPrefixAdapter

    sg = SGLangAdapter(8)
    sg.insert([1, 2, 3], sg.reserve("a", 3) or (), "a")
    inserted = sg.insert([1, 2, 9], sg.reserve("b", 3) or (), "b")
    projected = sg.project()
    cache = sg.cache

    def refusal(delta: int) -> str | None:
        cache.evictable_size_ += delta
        try:
            cache.check_invariants()
            return None
        except AssertionError as exc:
            return str(exc)
        finally:
            cache.evictable_size_ -= delta

    counted = RadixCache()
    for tokens, inserted_len in (([1, 2], 0), ([1, 2, 3, 4], 0), ([1, 2, 3, 4, 5], 3)):
        counted.insert(tokens, inserted_len=inserted_len)
    hits = [counted.match_prefix(k).last_device_node.hit_count for k in ([1, 2], [1, 2, 3, 4], [1, 2, 3, 4, 5])]
    admitted = []
    for kind in (SGLangIndexAdapter, UnlockedPrefixAdapter):
        index = kind(IndexConfig(8))
        index.admit("r0", [1, 2, 3])
        index.finish("r0")
        matched = index.admit("r1", [1, 2, 3, 4])
        admitted.append((matched, index.sglang.cache.sizes(), index.sglang.requests["r1"].tree_lock is None))
    return [("check_invariants with the evictable counter as is, one too high, one too low",
             [refusal(d) for d in (0, 1, -1)], [None, "I1", "I1"]),
            ("insert [1, 2, 9] beside [1, 2, 3]: prefix tokens, duplicate slots",
             (inserted.prefix_tokens, inserted.duplicate_slot_ids), (2, (4, 5))),
            ("projected edges (tokens, slots, lock_ref), sizes (total, evictable, protected)",
             (sorted(projected["edges"]), projected["sizes"]),
             ([[[1, 2], [1, 2], 0], [[3], [3], 0], [[9], [6], 0]], [4, 4, 0])),
            ("hit_count of [1, 2], [3, 4], [5] after inserting [1, 2], [1, 2, 3, 4], then [1, 2, 3, 4, 5] with "
             "inserted_len 3", hits, [2, 2, 1]),
            ("sound and faulty index: r1 [1, 2, 3, 4] after r0 [1, 2, 3] finished: matched, "
             "(total, evictable, protected), lock dropped",
             admitted, [(3, (3, 0, 3), False), (3, (3, 3, 0), True)])]


def vllm_hit_arithmetic() -> Rows:
    """docs/peers/vllm.md: ``allocate_slots(request, num_new_tokens = num_tokens - num_computed_tokens,
    num_new_computed_tokens, hit blocks)`` needs cdiv(num_tokens, block_size) blocks in all. With blocks of 16
    (block 0 the null block): r0 = 55 tokens takes blocks 1..4; r1 = 16 zeros (r0's first block) + 24 fives
    (40 tokens) hits block 1 (16 tokens) and takes cdiv(40, 16) - 1 = 2 new blocks, 5 and 6 from the free queue
    (a hit whose bits are not a subset of the prompt length's). The hybrid coordinator's publication
    (``publish_request``, one full-attention group of 16, 12 blocks = 11 usable) reuses its own hit: 48 tokens
    cache 3 fresh blocks (11 -> 8 free); the same 48 + 16 tokens hit 48 (the ``num_tokens - 1`` = 63 cap rounds
    down to 3 blocks) and cache only the fourth (8 -> 7 free)."""
    from kvexact.reference.peers.vllm_adapter import VllmAdapter
    from kvexact.reference.peers.vllm_hashing import BlockHasher
    from kvexact.reference.peers.vllm_hybrid import GroupSpec, publish_request
    from kvexact.reference.peers.vllm_pool import new_pool

    user = VllmAdapter(11, 16)
    first = user.allocate("r0", [0] * 16 + [1] * 16 + [2] * 16 + [3] * 7)
    second = user.allocate("r1", [0] * 16 + [5] * 24)
    hasher, spec = BlockHasher(16), [GroupSpec(16)]
    tokens = [7] * 48 + [8] * 16
    pool = new_pool(12)
    free = [pool.num_free_blocks]
    for n in (48, 64):
        pool = publish_request(pool, spec, hasher.hashes(tokens[:n]), 16, n)
        free.append(pool.num_free_blocks)
    return [("VllmAdapter r0 (55 tokens), r1 (16 shared + 24): hit tokens, hit blocks, new blocks",
             [(o.num_hit_tokens, o.hit_block_ids, o.new_block_ids) if o else None for o in (first, second)],
             [(0, (), (1, 2, 3, 4)), (16, (1,), (5, 6))]),
            ("hybrid publish of 48, then 64 tokens of one stream: free blocks before, after each", free, [11, 8, 7])]


def stream_workloads() -> Rows:
    """``vllm_wire.random_stream_log``'s workload: prompts of 1 to ``stream_tokens - 3`` tokens of the shared
    stream, decode steps of 1 to 3 tokens (single-token steps are vLLM's ordinary decode), never past the
    stream's 14 tokens, frees, and prefix-cache resets drawn whatever runs (so also while requests run, when
    vLLM's reset refuses). Driven through a driver that accepts every call (seed 0, 300 operations).
    ``sglang_stream.random_event_log`` evicts on its own only when the tree is over ``capacity_pages`` (6) pages;
    one operation inserts at most ``max_pages`` (3) pages, so a one-operation log (seeds 0-9) never removes a
    block, while most of those ten logs store one; with a capacity of 1 page nothing is leased in one operation,
    so the trim leaves at most 1 token (replaying the log: stores add their hashes, removals take them away)."""
    import random

    from kvexact.reference.peers import vllm_wire as wire
    from kvexact.reference.peers.sglang_stream import random_event_log

    class Accepting:
        def __init__(self) -> None:
            self.prompts: set[int] = set()
            self.steps: set[int] = set()
            self.lengths: dict[str, int] = {}  # the running requests
            self.resets: list[int] = []  # running requests at each reset
            self.longest = 0

        def allocate(self, rid: str, tokens: list[int]) -> tuple[int, ...]:
            self.prompts.add(len(tokens))
            self.lengths[rid] = len(tokens)
            self.longest = max(self.longest, len(tokens))
            return ()

        def append(self, rid: str, tokens: list[int]) -> tuple[int, ...]:
            self.steps.add(len(tokens))
            self.lengths[rid] += len(tokens)
            self.longest = max(self.longest, self.lengths[rid])
            return ()

        def free(self, rid: str) -> None:
            del self.lengths[rid]

        def reset_prefix_cache(self) -> bool:
            self.resets.append(len(self.lengths))
            return True

        def take_events(self) -> tuple[Any, ...]:
            return ()

    driver = Accepting()
    wire.random_stream_log(0, 300, driver=driver)
    one_op = [{e["type"] for e in random_event_log(seed, 1)} for seed in range(10)]

    def live_at_end(events: list[dict[str, Any]]) -> int:
        n = 0
        for e in events:
            n = 0 if e["type"] == "AllBlocksCleared" else n + len(e.get("block_hashes", ())) * (
                -1 if e["type"] == "BlockRemoved" else 1)
        return n

    tight = [live_at_end(random_event_log(seed, 1, capacity_pages=1)) for seed in range(10)]

    def mirror(seed: int, ops: int) -> list[str]:
        """The event types of a log of one token value (a single chain: a store extends it, merged with a store
        just before it; an evict removes its one leaf), derived from the documented mix drawn from
        ``random.Random(seed)`` in the generator's order: pages 1..3 and their tokens, then the operation: below
        0.45 insert, below 0.65 match (a lease drawn only on a non-empty tree), below 0.9 evict 1..2 tokens,
        else an unlock when anything is leased, or a reset with probability 0.3."""
        rng, types, length = random.Random(seed), ["AllBlocksCleared"], 0
        for _ in range(ops):
            n = rng.randint(1, 3)
            for _ in range(n):
                rng.randint(1, 1)
            op = rng.random()
            if op < 0.45:
                types += [] if n <= length or types[-1] == "BlockStored" else ["BlockStored"]
                length = max(length, n)
            elif op < 0.65:
                if length:
                    rng.random()
            elif op < 0.9:
                rng.randint(1, 2)
                types += ["BlockRemoved"] if length else []
                length = 0
            elif rng.random() < 0.3:
                types, length = types + ["AllBlocksCleared"], 0
        return types

    mix = [(seed, ops) for ops in (1, 2) for seed in range(300)
           if [e["type"] for e in random_event_log(seed, ops, tokens=1)] != mirror(seed, ops)]
    return [("decode step sizes drawn", sorted(driver.steps), [1, 2, 3]),
            ("SGLang one-operation logs of seeds 0-9: any store, any removal",
             (any("BlockStored" in k for k in one_op), any("BlockRemoved" in k for k in one_op)), (True, False)),
            ("SGLang one-operation logs of seeds 0-9 with a 1-page capacity: tokens left above it",
             [n for n in tight if n > 1], []),
            ("shortest and longest prompt, longest request", (min(driver.prompts), max(driver.prompts),
                                                               driver.longest), (1, 11, 14)),
            ("resets drawn while requests run (vLLM refuses those)", any(n > 0 for n in driver.resets), True),
            ("SGLang logs of one token value (seeds 0-299, 1 and 2 operations) whose event types differ from the "
             "mix derived from the seed's draws", mix, [])]


def adapter_transactions() -> Rows:
    """spec/KVAllocation.tla: ``txn`` is per request; a request's transaction phase is "reserved" from its first
    reservation until AppendWrite
    (every group's destination written, READY_TO_PUBLISH, 0x04A) makes it "ready"; AppendPublish ends it
    ("idle"). One group of 2-token blocks 1..4, r holding [1, 2] in block 1: the boundary append of 3 reserves
    block 2. A transaction of a "new" plan in any other state is not ready: with groups of 2 and 4 tokens and
    r's tail shared with a fork, the plan is new in group 0 and copy-on-write in group 1, and after ``cow_begin``
    (state BEGUN, nothing reserved or written yet) the projection must still say "reserved". The reference
    adapter's start is one reference transaction: a start whose append rolls back (a fault injected after the
    first reservation, 0x04F) is refused and leaves the allocator as it was. It names a refused truncate by the
    allocator's rejection (0x05E keeps a strictly shorter prefix); a block it caches gets a nonzero identity in
    the KVAllocation projection (the spec reads ident 0 as "no identity"), and
    ``checker_value`` passes a value of no other kind through unchanged."""
    from kvexact.reference import adapters, lifecycle
    from kvexact.reference.allocator import Allocator
    from kvexact.reference.pool import GroupConfig
    from kvexact.spec.checker.values import ModelValue

    alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3, 4]])
    alloc.allocate("r", [1, 2])
    txn = alloc.begin("append", "r", alloc.append_plan(alloc.request("r")), (3,))
    handle = alloc.append_reserve(txn, 0)
    phases = [adapters.project_kv_allocation(alloc)["txn"]["r"]]  # txn is per request (KVAllocation.tla)
    alloc.write_rows(txn, 0, handle, 0, (3,))
    alloc.append_write(txn)
    phases.append(adapters.project_kv_allocation(alloc)["txn"]["r"])
    alloc.append_publish(txn)
    phases.append(adapters.project_kv_allocation(alloc)["txn"]["r"])
    mixed = Allocator([GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 4, 8)], [[1, 2, 3, 4]] * 2)
    mixed.allocate("r", [1, 2])
    lifecycle.fork(mixed, "r", "s")
    plan = mixed.append_plan(mixed.request("r"))
    mixed_txn = mixed.begin("append", "r", plan, (3,))
    mixed.cow_begin(mixed_txn)
    begun = adapters.project_kv_allocation(mixed)["txn"]
    ref = adapters.ReferenceAdapter(adapters.AdapterConfig(block_tokens=2, num_groups=1, blocks_per_group=4,
                                                           row_bytes=(8,)), spec=None)
    ref.start("q", [5])
    before = ref.alloc.digest()
    ref.alloc.fault_after.add(("append_reserve", 0))
    faulted = ref.start("r", [1, 2, 3])
    faulted_rows = (faulted.accepted, "r" in ref.alloc.requests, ref.alloc.digest() == before)
    ref.alloc.fault_after.clear()
    started = ref.start("r", [1, 2, 3])
    tables = (started.accepted, list(ref.table("r", 0)))
    cuts = [ref.truncate(rid, keep) for rid, keep in (("r", 3), ("r", 4), ("x", 1))]
    ref.cache("r")  # r = [1, 2, 3]: its full block 2 gets the adapter's first content key
    idents = adapters.project_kv_allocation(ref.alloc)["ident"][0]
    mv = ModelValue("x")
    return [("boundary append of 3: (phase, dest) after reserve, after append_write, after publish",
             [(p["phase"], dict(p["dest"])) for p in phases], [("reserved", {0: 2}), ("ready", {0: 2}),
                                                              ("idle", {0: 0})]),
            ("groups of 2 and 4 tokens, r = [1, 2] forked to s: plan; phase of r's, of s's transaction after "
             "cow_begin", (plan, begun["r"]["phase"], begun["s"]["phase"]), (("new", "cow"), "reserved", "idle")),
            ("start r [1, 2, 3] with a fault injected after its first reservation (0x04F): accepted, r known, "
             "state unchanged", faulted_rows, (False, False, True)),
            ("the same start without the fault: accepted, table (q holds block 1; cdiv(3, 2) = 2 blocks)", tables,
             (True, [2, 3])),
            ("truncate r (3 tokens) to 3, to 4, unknown x: accepted, rejection",
             [(c.accepted, c.rejection) for c in cuts],
             [(False, "TRUNCATE_NOT_SHORTER"), (False, "TRUNCATE_NOT_SHORTER"), (False, "UNKNOWN_REQUEST")]),
            ("identity of r's cached first block 2; of block 1 (q's, uncached), 3 (r's partial tail), 4 (free)",
             (idents[2] != 0, [idents[b] for b in (1, 3, 4)]), (True, [0, 0, 0])),
            ("checker_value of None, of a model value, of 0.5", [adapters.checker_value(v, {"x"}) for v in
                                                                 (None, mv, 0.5)], [None, mv, 0.5])]


def scopes_and_refusals() -> Rows:
    """docs/peers/vllm.md: a multimodal item covers the placeholder range ``[offset, offset + length)`` of the prompt;
    the profile refuses a range that is empty, reversed (a negative length) or starts before the prompt by its
    named rejection, BAD_MM_FEATURE ("offset >= 0 and length > 0"); a block's extra keys name every item whose
    range overlaps the block, at its offset relative to the block start (may be negative): an image at [8, 16)
    in 4-token blocks keys blocks 2 and 3 (offsets 0 and -4). The pool's self-check (docs/peers/vllm.md §1: the blocks
    with ref_cnt 0 are the free queue's) names each usable block that breaks it, and a block id outside 0..num_blocks - 1 (§1) is
    refused with that range. The reference adapter over a token stream (2-token
    blocks) publishes under HOME and refuses a tenant that does not own the namespace (``LookupScope``:
    UNAUTHORIZED_TENANT), at start and at a read-only lookup; after a = [1..5] is cached, a lookup of the same
    prompt hits 4 tokens (2 full blocks, capped one token short, 0x07A), and under another cache salt misses."""
    import attrs

    from kvexact.reference import adapters
    from kvexact.reference.peers import vllm_hashing as vh
    from kvexact.reference.peers.vllm_pool import insert_cached, new_pool
    from kvexact.reference.rejections import Rejected, rejection_of

    hasher = vh.BlockHasher(4)
    _, mm_keys = hasher.extend(tuple(range(16)), vh.RequestExtras(mm=(vh.MMFeature("img", 8, 8),)), (), ())
    pool = new_pool(4)
    corrupted: list[str | None] = []
    for b in (1, 2, 3):  # block b counted as referenced while it sits in the free queue
        try:
            attrs.evolve(pool, ref_cnt=tuple(int(i == b) for i in range(4))).check()
            corrupted.append(None)
        except AssertionError as exc:
            corrupted.append(str(exc))
    try:
        insert_cached(pool, 4, b"k")
        unknown = ""
    except Rejected as exc:
        unknown = str(exc)
    features = [rejection_of(lambda o=o, n=n: vh.MMFeature("x", o, n)) for o, n in ((0, -1), (0, 0), (-1, 2), (0, 1))]
    config = adapters.AdapterConfig(block_tokens=2, num_groups=1, blocks_per_group=6, row_bytes=(8,))
    ref = adapters.ReferenceAdapter(config, spec=None, stream=[1, 2, 3, 4, 5, 6, 7, 8])
    foreign, salted = adapters.LookupScope(tenant_id="t1"), adapters.LookupScope(cache_salt="s")
    prompt = [1, 2, 3, 4, 5]
    refused = ref.start("a", prompt, scope=foreign)
    ref.start("a", prompt)
    ref.cache("a")
    looked = [ref.lookup(prompt, scope) for scope in (adapters.HOME, foreign, salted)]
    return [("MMFeature (offset, length) (0, -1), (0, 0), (-1, 2), (0, 1) rejected as", features,
             [vh.HashRejection.BAD_MM_FEATURE] * 3 + [None]),
            ("extra keys of the four 4-token blocks of 16 tokens with an image at [8, 16)", mm_keys,
             (None, None, (("mm", "img", 0),), (("mm", "img", -4),))),
            ("pool check with block 1, 2, 3 referenced but free", corrupted, ["block 1", "block 2", "block 3"]),
            ("block 4 of a 4-block pool refused with the valid range (block ids 0..num_blocks - 1)", unknown,
             "PoolRejection.UNKNOWN_BLOCK: block 4 not in 0..3"),
            ("start under tenant t1: accepted, rejection", (refused.accepted, refused.rejection),
             (False, "UNAUTHORIZED_TENANT")),
            ("lookup of a's prompt under HOME, t1, another salt: accepted, rejection, hit tokens",
             [(r.accepted, r.rejection, r.hit_tokens) for r in looked],
             [(True, None, 4), (False, "UNAUTHORIZED_TENANT", 0), (True, None, 0)])]


def pinned_defaults_and_refusals() -> Rows:
    """docs/peers/sglang.md §3: a fresh ``Req`` has matched, protected, inserted and owned nothing (every counter 0),
    holds no row, node or lock, and has the default priority 0; §1: an edge's key and value have equal lengths,
    so ``check_invariants`` refuses an edge whose value is longer, shorter or gone ("edge <id> key/value
    lengths"). docs/peers/vllm.md §1: block ids are ints in 0..num_blocks - 1; a negative id, the pool size, any id
    above it, a bool and a non-int are refused as UNKNOWN_BLOCK naming the range. vLLM's ``free`` pops the
    request's blocks and its cached-block count: freeing an unknown request is a no-op (the same state, no
    blocks), a request with a cached-block count but no blocks is no longer running afterwards, and a request's
    blocks are handed back tail first (55 tokens in 16-token blocks: blocks 1..4, freed 4, 3, 2, 1)."""
    import attrs

    from kvexact.reference.peers.sglang import RadixCache, Req
    from kvexact.reference.peers.vllm import VllmConfig, VllmKVCacheManager
    from kvexact.reference.peers.vllm_pool import _check_block, new_pool
    from kvexact.reference.rejections import Rejected

    fresh = Req("r", [1, 2])
    defaults = (fresh.num_matched_prefix_tokens, fresh.cache_protected_len, fresh.cache_inserted_len,
                fresh.owned_len, fresh.priority, fresh.output_ids, fresh.prefix_indices, fresh.req_pool_idx,
                fresh.last_node, fresh.tree_lock, fresh.extra_key, fresh.cache_salt, fresh.logprob_start_len)
    tree = RadixCache()
    tree.insert([1, 2, 3], [11, 12, 13])
    node = tree.nodes()[-1]
    edges: list[str | None] = []
    for value in ((11, 12, 13, 14), (11, 12), None, (21, 22, 23)):
        saved, node.value = node.value, value
        try:
            tree.check_invariants()
            edges.append(None)
        except AssertionError as exc:
            edges.append(str(exc))
        finally:
            node.value = saved
    pool = new_pool(4)
    ids: list[str | None] = []
    for block_id in (-1, 0, 3, 4, 5, 1000, True, "1", 1.0):
        try:
            _check_block(pool, block_id)
            ids.append(None)
        except Rejected as exc:
            ids.append(str(exc))
    manager = VllmKVCacheManager.create(VllmConfig(11, 16))
    request = manager.make_request("r0", [0] * 16 + [1] * 16 + [2] * 16 + [3] * 7)
    manager, _ = manager.allocate_slots(request, 55)
    same, unknown = manager.free("x")
    tracked = attrs.evolve(manager, num_cached_block=(*manager.num_cached_block, ("t", 0)))
    untracked, none_held = tracked.free("t")
    freed, receipt = manager.free("r0")
    refused = "PoolRejection.UNKNOWN_BLOCK: block {} not in 0..3"
    return [("a fresh Req's matched, protected, inserted, owned lengths, priority, outputs, prefix, row, node, "
             "lock, extra key, salt, logprob start", defaults, (0, 0, 0, 0, 0, [], (), None, None, None, None,
                                                               None, None)),
            ("check_invariants with the edge [1, 2, 3]'s value 4 long, 2 long, gone, 3 long",
             edges, [f"edge {node.id} key/value lengths"] * 3 + [None]),
            ("block ids -1, 0, 3, 4, 5, 1000, True, '1', 1.0 of a 4-block pool", ids,
             [refused.format(-1), None, None, refused.format(4), refused.format(5), refused.format(1000),
              refused.format(True), refused.format(repr("1")), refused.format(1.0)]),
            ("free of unknown x: the same manager, receipt", (same is manager, unknown.request_id,
                                                             unknown.freed_block_ids), (True, "x", ())),
            ("free of t (a cached-block count, no blocks): t running before, after; blocks freed",
             (tracked.is_running("t"), untracked.is_running("t"), none_held.freed_block_ids), (True, False, ())),
            ("free of r0 (55 tokens, blocks 1..4): freed order, r0 running after, free blocks after",
             (receipt.freed_block_ids, freed.is_running("r0"), freed.blocks_of("r0"), freed.pool.num_free_blocks),
             ((4, 3, 2, 1), False, (), 10))]


def vllm_hybrid_finders() -> Rows:
    """docs/peers/vllm.md §2: a group of block size ``k * hash_block_size`` reads block j under fine hash ``(j + 1) * k
    - 1`` (5 fine hashes at 16 read at 32: B, D; 7 read at 48: C, F). §3 and scenario 22 (the window finder
    alone: 2-token blocks, window 4 so ceil(3 / 2) = 2 contiguous blocks, max_length twice the pattern, fine hash
    i cached as block 10 + i where the pattern has a 1): 1 -> (2, [10]), 10 -> (2, [10]), 11 -> (4, [10, 11]),
    1110 -> (6, [0, 11, 12]), 110100110111 -> (24, [0 x 10, 20, 21]), 11010011000 and 110100110001 -> (16,
    [0 x 6, 16, 17]). Under an alignment of 4 tokens a run must end on a multiple of 4 (hand-derived: 1110 skips
    block 2 and takes 10, 11: 4 tokens; 0111 -> [0, 0, 12, 13]: 8; 011 -> no run from block 0: 0). Full
    attention stops at the first miss, reads at most max_length // block_size blocks, must hit in every group of
    its bucket (group 1 cached as 20 + i) and rounds down to the alignment (hashes 0, 1, 2, 4 cached; hand-
    derived). The coordinator, scenario 17 (full attention + two windows of 32 at 16, each prompt published in
    group order, so C48 + [3] * 7 takes blocks 1-3, 4-6, 7-9 of an 11-block pool): C48 + [3] * 5 (cap 52) hits 48
    = ((1, 2, 3), (0, 5, 6), (0, 8, 9)); with group 1's block 5 removed the window buckets keep only the run from
    block 0 (16 tokens: (1,), (4,), (7,)) and 48 - 16 = 32 tokens of full attention are left uncached.
    Scenario 18 (full attention at 32, a window of 32 at 16, 112 of 160 distinct tokens published: 96 cacheable,
    blocks 1-3 and 4-9): its first 113 tokens hit 96 = ((1, 2, 3), (0, 0, 0, 0, 8, 9)); without the window keys
    of fine hashes 5 and 6 (block 9; hash 6 was never cached) the window run is 6, 7 ending at 64, and full
    attention is cut to 2 blocks, 32 tokens uncached. Full attention is looked up first whatever the spec order (a
    window group listed first still sees only full attention's 6 tokens: nothing uncached), and groups of one spec
    are one bucket that hits only where every group does. With three buckets the loop repeats (hand-derived): the
    window of 6 lowers 16 to 12 (run 3-5), the window of 4 then lowers 12 to 10 (run 3, 4, its block 5 gone), the
    third pass changes nothing: 10 tokens, full attention cut to 5 blocks, 16 - 10 = 6 uncached. ``publish_request``
    reuses its own hit and caches up to the lcm (4): 10 tokens cache fine hashes 0-3 in group 0 (blocks 1-4) and
    views 0, 1 (fine 1, 3) in the window group (5, 6); 14 tokens then hit 8 and cache fine 4, 5 (7, 8) and view 2
    (fine 5: 9). ``evict_block`` drops one identity, and nothing for a view index past the end. Trimming to the
    alignment pops whole blocks from every group until the hit (blocks x block size) is a multiple of it."""
    from kvexact.reference.peers.vllm_hashing import BlockHasher, key_with_group, split_key
    from kvexact.reference.peers.vllm_hybrid import (
        GroupSpec,
        _trim_to_alignment,
        evict_block,
        full_attention_hit,
        hash_view,
        publish_request,
        sliding_window_hit,
        stored_then_lookup,
    )
    from kvexact.reference.peers.vllm_pool import insert_cached, new_pool

    fine = [bytes([65 + i]) for i in range(7)]

    def cached(pattern: str, groups: int = 1) -> tuple[Any, list[bytes]]:
        pool, hashes = new_pool(40), [bytes([i]) * 8 for i in range(len(pattern))]
        for i, bit in enumerate(pattern):
            for g in range(groups) if bit == "1" else ():
                pool = insert_cached(pool, 10 * (g + 1) + i, key_with_group(hashes[i], g))
        return pool, hashes

    def window(pattern: str, alignment: int) -> tuple[int, list[int]]:
        pool, hashes = cached(pattern)
        blocks, hit = sliding_window_hit(pool, hashes, [0], 2, 4, 2 * len(pattern), alignment)
        return hit, blocks[0]

    notes22 = ["1", "10", "11", "1110", "110100110111", "11010011000", "110100110001"]
    both, hashes = cached("11101", groups=2)
    one_group, _ = cached("11101")
    both = insert_cached(both, 39, key_with_group(hashes[1], 0))  # a second block under hash 1, group 0
    fa = [full_attention_hit(one_group, hashes, [0], 2, 10, 2), full_attention_hit(one_group, hashes, [0], 2, 10, 4),
          full_attention_hit(one_group, hashes, [0], 2, 5, 2), full_attention_hit(both, hashes, [0, 1], 2, 10, 2),
          full_attention_hit(one_group, hashes, [1], 2, 10, 2)]
    s17 = [GroupSpec(16), GroupSpec(16, 32), GroupSpec(16, 32)]
    c48 = [0] * 16 + [1] * 16 + [2] * 16
    s18, t = [GroupSpec(32), GroupSpec(16, 32)], list(range(160))
    hits = [stored_then_lookup(s17, [c48 + [3] * 7], [], c48 + [3] * 5),
            stored_then_lookup(s17, [c48 + [3] * 7], [(0, 1, 1)], c48 + [3] * 5),
            stored_then_lookup(s18, [t[:112]], [], t[:113]),
            stored_then_lookup(s18, [t[:112]], [(0, 1, 5), (0, 1, 6)], t[:113])]
    window_first = stored_then_lookup([GroupSpec(2, 4), GroupSpec(2)], [list(range(16))], [(0, 1, 3)], list(range(17)))
    twins = stored_then_lookup([GroupSpec(2), GroupSpec(2)], [list(range(8))], [(0, 1, 2)], list(range(9)))
    loop = stored_then_lookup([GroupSpec(2), GroupSpec(2, 4), GroupSpec(2, 6)], [list(range(16))],
                              [(0, 1, 5), (0, 2, 6)], list(range(17)))
    pub_specs, hasher = [GroupSpec(2), GroupSpec(4, 8)], BlockHasher(2)
    stream = hasher.hashes(list(range(14)))
    pool = publish_request(new_pool(30), pub_specs, hasher.hashes(list(range(10))), 2, 10)
    pool = publish_request(pool, pub_specs, stream, 2, 14)
    published = [None if k is None else (stream.index(split_key(k)[0]), split_key(k)[1]) for k in pool.block_key]
    gone = evict_block(pool, pub_specs[1], 1, stream, 2, 1)
    evicted = [(i, None if gone.block_key[i] is None else "kept" if gone.block_key[i] == pool.block_key[i] else "?")
               for i in range(1, 10)]
    same = evict_block(pool, pub_specs[1], 1, stream, 2, 3)
    trims: list[Any] = []
    for groups, size, alignment in (([[1, 2, 3], [4, 5, 6]], 2, 4), ([[1, 2, 3]], 2, 2), ([[1, 2, 3, 4, 5]], 2, 8),
                                    ([[1]], 4, 4), ([[1, 2, 3]], 4, 8), ([[]], 2, 4)):
        _trim_to_alignment(groups, size, alignment)
        trims.append(groups)
    return [("trim to alignment: 3 blocks of 2 to 4 tokens (two groups), to 2; 5 blocks of 2 to 8; 1 of 4 to 4; "
             "3 of 4 to 8; none", trims, [[[1, 2], [4, 5]], [[1, 2, 3]], [[1, 2, 3, 4]], [[1]], [[1, 2]], [[]]]),
            ("hash views of 5 fine hashes at 16 -> 32, 16 -> 16; of 7 at 16 -> 48",
             [hash_view(fine[:5], 16, 32), hash_view(fine[:5], 16, 16), hash_view(fine, 16, 48)],
             [(b"B", b"D"), tuple(fine[:5]), (b"C", b"F")]),
            ("scenario 22 window finds (hit tokens, blocks)", [window(p, 2) for p in notes22],
             [(2, [10]), (2, [10]), (4, [10, 11]), (6, [0, 11, 12]), (24, [0] * 10 + [20, 21]),
              (16, [0] * 6 + [16, 17]), (16, [0] * 6 + [16, 17])]),
            ("window finds of 1110, 0111, 011 aligned to 4 tokens", [window(p, 4) for p in ("1110", "0111", "011")],
             [(4, [10, 11]), (8, [0, 0, 12, 13]), (0, [])]),
            ("full attention over 11101 (2-token blocks): max 10 align 2, align 4, max 5, groups 0 and 1, group 1 "
             "alone", [(h, b) for b, h in fa],
             [(6, [[10, 11, 12]]), (4, [[10, 11]]), (4, [[10, 11]]), (6, [[10, 11, 12], [20, 21, 22]]), (0, [[]])]),
            ("a window group listed before full attention (blocks 1-8, 9-16; full attention's block 3 gone): "
             "(hit, blocks, uncached)", (window_first.hit_length, window_first.blocks_by_group,
                                         window_first.uncached_common_prefix), (6, ((0, 2, 3), (9, 10, 11)), 0)),
            ("two full-attention groups of one spec (blocks 1-4, 5-8; group 1's block 2 gone): (hit, blocks)",
             (twins.hit_length, twins.blocks_by_group), (4, ((1, 2), (5, 6)))),
            ("three buckets (full attention, windows 4 and 6 at 2 tokens; 16 tokens published in blocks 1-8, "
             "9-16, 17-24; window-4 block 5 and window-6 block 6 gone), 17-token query: (hit, blocks, uncached)",
             (loop.hit_length, loop.blocks_by_group, loop.uncached_common_prefix),
             (10, ((1, 2, 3, 4, 5), (0, 0, 0, 12, 13), (0, 0, 19, 20, 21)), 6)),
            ("publish 10 then 14 tokens (full attention at 2, a window of 8 at 4; 30 blocks): each block's (fine "
             "hash, group), free blocks; evict window view 1 (block 6), view 3 (none: the same pool)",
             (published, pool.num_free_blocks, evicted, same is pool),
             ([None, (0, 0), (1, 0), (2, 0), (3, 0), (1, 1), (3, 1), (4, 0), (5, 0), (5, 1)] + [None] * 20, 20,
              [(i, None) if i == 6 else (i, "kept") for i in range(1, 10)], True)),
            ("scenario 17 C48 + [3] * 5, then without group 1's block 1; scenario 18 first 113 tokens, then without "
             "window hashes 5, 6: (hit, blocks, uncached)",
             [(h.hit_length, h.blocks_by_group, h.uncached_common_prefix) for h in hits],
             [(48, ((1, 2, 3), (0, 5, 6), (0, 8, 9)), 0), (16, ((1,), (4,), (7,)), 32),
              (96, ((1, 2, 3), (0, 0, 0, 0, 8, 9)), 0), (64, ((1, 2), (0, 0, 6, 7)), 32)])]


def vllm_hashing_pinned() -> Rows:
    """docs/peers/vllm.md §2, the formula itself: a block hash is ``sha256(pickle.dumps((parent, tuple(tokens),
    extra_keys), protocol=5))`` with NONE_HASH (``sha256(pickle("vllm-none-hash"))``, or of ``$PYTHONHASHSEED`` when
    given) for any falsy parent; only full blocks are hashed, and a continuation picks up after the blocks already
    hashed. Extra keys, in order: LoRA on every block, each overlapping multimodal item at its block-relative
    offset (the scan index advances past an item that ends inside the block and stays on one that continues),
    the cache salt on block 0 only, the prompt-embedding digest (sha256 of the rows' bytes); None when there are
    none. Events publish them untagged. The algorithms: sha256 over pickle or canonical CBOR; the xxhash ones
    (xxh3_128) need the optional package and are refused by name without it. Refusals (HashRejection, with the
    value named): block sizes 0, -1, True,
    2.0; a token that is not an int (bools included, the first one named); group ids -1, 2**32 and '1' (0 and
    2**32 - 1 fit in the 4 big-endian bytes); a prefix-cache key of 4 bytes or fewer. ``external_hash`` keeps
    the low 64 bits, big-endian."""
    import hashlib
    import pickle

    import cbor2
    import numpy as np

    from kvexact.reference.peers import vllm_hashing as vh

    def sha(obj: Any) -> bytes:
        return hashlib.sha256(pickle.dumps(obj, protocol=5)).digest()

    refused = _refused

    none = sha("vllm-none-hash")
    hasher = vh.BlockHasher(3)
    tokens = list(range(10, 20))
    b0 = sha((none, (10, 11, 12), None))
    b1 = sha((b0, (13, 14, 15), None))
    b2 = sha((b1, (16, 17, 18), None))
    first, keys = hasher.extend(tokens[:7], vh.NO_EXTRAS, (), ())
    more, more_keys = hasher.extend(tokens, vh.NO_EXTRAS, first, keys)
    lora = vh.LoraRef("n", "/p", 7)
    mm = (vh.MMFeature("a", 1, 2), vh.MMFeature("b", 2, 5), vh.MMFeature("c", 9, 1))
    embeds = np.arange(20, dtype=np.float32).reshape(10, 2)
    extras = vh.RequestExtras(lora=lora, mm=mm, cache_salt="s", prompt_embeds=embeds)

    def digest(a: int, b: int) -> tuple[str, bytes]:
        return ("prompt_embeds", hashlib.sha256(embeds[a:b].tobytes()).digest())

    _, all_keys = hasher.extend(tokens, extras, (), ())
    algos = [(a.value, a.is_xxhash) for a in vh.HashAlgo]
    cbor_digest = vh.hash_function(vh.HashAlgo.SHA256_CBOR)((None, (1, 2), None))
    if vh.xxhash_available():  # the optional package decides which of the two a run can see
        import xxhash

        fast: Any = vh.hash_function(vh.HashAlgo.XXHASH_CBOR)((1,)) == xxhash.xxh3_128_digest(cbor2.dumps((1,)))
    else:
        fast = [refused(lambda a=a: vh.hash_function(a)) for a in (vh.HashAlgo.XXHASH, vh.HashAlgo.XXHASH_CBOR)] + [
            refused(lambda: vh.none_hash(vh.HashAlgo.XXHASH))]
    scans = [vh.block_extra_keys(vh.RequestExtras(mm=mm), a, a + 3, i) for a, i in ((0, 0), (3, 1), (6, 1), (9, 2))]
    unavailable = "HashRejection.XXHASH_UNAVAILABLE: hash algorithm {!r} needs xxhash"
    return [("algorithms and which are xxhash", algos,
             [("sha256", False), ("sha256_cbor", False), ("xxhash", True), ("xxhash_cbor", True)]),
            ("sha256_cbor digest of (None, (1, 2), None)", cbor_digest,
             hashlib.sha256(cbor2.dumps((None, (1, 2), None), canonical=True)).digest()),
            ("xxhash variants: xxh3_128 of canonical CBOR when installed, else refused by name", fast,
             True if vh.xxhash_available() else [unavailable.format("xxhash"), unavailable.format("xxhash_cbor"),
                                                 unavailable.format("xxhash")]),
            ("NONE_HASH; with hash seed 'x'", (hasher.none_hash, vh.none_hash(vh.HashAlgo.SHA256, "x")),
             (none, sha("x"))),
            ("hashes of 7 tokens in 3-token blocks; continued to 10 tokens; block 0 with parent b'' ",
             (first, more, hasher.hash_block(b"", (10, 11, 12), None)), ((b0, b1), (b0, b1, b2), b0)),
            ("extra keys of the 3 blocks: none; continued", (keys, more_keys), ((None, None), (None, None, None))),
            ("extra keys of blocks [0, 3), [3, 6), [6, 9) with LoRA, items a [1, 3), b [2, 7), c [9, 10), salt, "
             "embeddings", all_keys,
             ((("lora", "n", "/p"), ("mm", "a", 1), ("mm", "b", 2), ("cache_salt", "s"), digest(0, 3)),
              (("lora", "n", "/p"), ("mm", "b", -1), digest(3, 6)),
              (("lora", "n", "/p"), ("mm", "b", -4), digest(6, 9)))),
            ("mm keys and next scan index of blocks at 0, 3, 6, 9 (3 tokens)", scans,
             [((("mm", "a", 1), ("mm", "b", 2)), 1), ((("mm", "b", -1),), 1), ((("mm", "b", -4),), 2),
              ((("mm", "c", 0),), 3)]),
            ("first overlapping item of a [1, 3), b [2, 7), c [9, 10) from token 0, 2, 3, 7, 9, 10",
             [vh.first_overlapping_item(mm, t) for t in (0, 2, 3, 7, 9, 10)], [0, 0, 1, 2, 2, 3]),
            ("untagged keys: None; LoRA, mm, salt", (vh.untagged(None), vh.untagged(
                (("lora", "n", "/p"), ("mm", "a", -2), ("cache_salt", "s")))), (None, ("n", ("a", -2), "s"))),
            ("block sizes 0, -1, True, 2.0 refused",
             [refused(lambda b=b: vh.BlockHasher(b)) for b in (0, -1, True, 2.0)],
             [f"HashRejection.BAD_BLOCK_SIZE: block_size={b!r}" for b in (0, -1, True, 2.0)]),
            ("tokens [1, True, 2.5], [1, '2'] refused naming the first bad one",
             [refused(lambda t=t: hasher.hashes(t)) for t in ([1, True, 2.5], [1, "2"])],
             ["HashRejection.BAD_TOKEN: non-int token id True", "HashRejection.BAD_TOKEN: non-int token id '2'"]),
            ("group ids -1, 2**32, '1' refused; 2**32 - 1, 0 keyed",
             [refused(lambda g=g: vh.key_with_group(b"h", g)) for g in (-1, 2 ** 32, "1")]
             + [vh.key_with_group(b"h", 2 ** 32 - 1), vh.key_with_group(b"h", 0)],
             [f"HashRejection.BAD_GROUP_ID: group id {g!r}" for g in (-1, 2 ** 32, "1")]
             + [b"h\xff\xff\xff\xff", b"h\x00\x00\x00\x00"]),
            ("split of a 4-byte key refused; of h + group 65536",
             (refused(lambda: vh.split_key(b"abcd")), vh.split_key(b"h\x00\x01\x00\x00")),
             ("HashRejection.BAD_KEY: key of 4 bytes", (b"h", 65536))),
            ("external hash of 9 bytes 01..09: as int, raw", (vh.external_hash(bytes(range(1, 10))),
                                                               vh.external_hash(bytes(range(1, 10)), False)),
             (int.from_bytes(bytes(range(2, 10)), "big"), bytes(range(1, 10))))]


def vllm_pool_pinned() -> Rows:
    """docs/peers/vllm.md §1, §4-§6 and scenarios 19-21. The free queue (scenario 20, blocks 0-4): popleft -> 0;
    remove 2 -> [1, 3, 4]; append 2 -> [1, 3, 4, 2]; prepend_n [5, 0] -> [5, 0, 1, 3, 4, 2]; popleft_n(3) ->
    [5, 0, 1], 3 left; an empty popleft, popleft_n past the length, removing an absent block, adding a present
    or repeated one and a negative / bool / float count are refused by name with the values. The map (scenario
    19): K <- b0, K <- b1: get_one b0; pop(K, 7) None; pop(K, 0) b0; get_one b1; pop(K, 1) empties it. The pool
    (scenario 21, 8 blocks, 2-token blocks): [1..7]; get_new_blocks(4) -> [1, 2, 3, 4]; caching the first 2 then
    free_blocks([4, 3, 2, 1]) -> [4, 3, 5, 6, 7, 2, 1] (unhashed prepended, hashed appended, in walk order);
    get_new_blocks(99) refused "Cannot get 99 free blocks from the pool". Usage = 1 - free / (blocks - 1) (0.0
    for a 1-block pool). cache_full_blocks publishes one BlockStored per call (hashes of blocks
    [cached, full), parent = block cached - 1's hash, their tokens, untagged extra keys, the group), as the
    low 64 bits unless raw hashes are asked for; popping a cached block for reuse evicts its identity (one
    BlockRemoved); reset is refused while a block is held and otherwise clears every identity (AllBlocksCleared)
    without reordering the queue; touch skips the null block and takes a free block out of the queue. With
    caching off, freed blocks all go to the front and popped blocks keep no identity."""
    from kvexact.reference.peers import vllm_pool as vp
    from kvexact.reference.peers.vllm_hashing import external_hash, key_with_group

    refused = _refused

    q0 = vp.FreeQueue(range(5))
    q1, head = q0.popleft()
    q2 = q1.remove(2)
    q3 = q2.append(2)
    q4 = q3.prepend_n([5, 0])
    q5, taken = q4.popleft_n(3)
    queue_refusals = [refused(c) for c in (lambda: vp.FreeQueue().popleft(), lambda: q5.popleft_n(4),
                                           lambda: q5.remove(9), lambda: q5.append_n([3]),
                                           lambda: q5.prepend_n([7, 7]), lambda: q5.popleft_n(-1),
                                           lambda: q5.popleft_n(True), lambda: q5.popleft_n(1.0))]
    m1 = vp.HashToBlockMap().insert(b"K", 0).insert(b"K", 1)
    m2, miss = m1.pop(b"K", 7)
    m3, hit = m2.pop(b"K", 0)
    m4, last = m3.pop(b"K", 1)
    pool = vp.new_pool(8, enable_events=True)
    usage = [pool.usage()]
    pool, got = vp.get_new_blocks(pool, 4)
    usage.append(pool.usage())
    hashes = tuple(bytes([i]) * 9 for i in range(4))
    source = vp.CacheSource(tuple(range(100, 108)), hashes, (None, (("mm", "a", -1),), (("cache_salt", "s"),), None),
                            lora_id=3, lora_name="L")
    pool = vp.cache_full_blocks(pool, source, got, 0, 1, 2, 5)
    pool = vp.cache_full_blocks(pool, source, got, 1, 2, 2, 5)
    unchanged = vp.cache_full_blocks(pool, source, got, 2, 2, 2, 5) is pool
    pool, stored = vp.take_events(pool)
    held, reset_done = vp.reset_prefix_cache(pool)
    unchanged_reset = held is pool
    pool = vp.free_blocks(pool, [4, 3, 2, 1])
    order = pool.free.blocks
    reused, popped = vp.get_new_blocks(pool, 3)  # 4, 3, 5: no identities; then 6, 7, 2 evicts 2's
    reused, popped2 = vp.get_new_blocks(reused, 3)
    reused, removed = vp.take_events(reused)
    raw = vp.cache_full_blocks(vp.new_pool(4, enable_events=True, use_int_block_hashes=False), source, (1, 2), 0, 2,
                               2)
    cleared, done = vp.reset_prefix_cache(vp.free_blocks(raw, []))
    touched = vp.touch(vp.new_pool(4), [0, 2, 2])
    off = vp.new_pool(5, enable_caching=False)
    off, ids = vp.get_new_blocks(off, 3)
    off = vp.free_blocks(off, [1, 2])
    k0, k1 = (key_with_group(h, 5) for h in hashes[:2])
    return [("queue: popleft, remove 2, append 2, prepend [5, 0], popleft_n(3)",
             (head, q2.blocks, q3.blocks, q4.blocks, taken, len(q5)),
             (0, (1, 3, 4), (1, 3, 4, 2), (5, 0, 1, 3, 4, 2), (5, 0, 1), 3)),
            ("queue refusals", queue_refusals,
             ["PoolRejection.NO_FREE_BLOCKS: No free blocks available",
              "PoolRejection.CANNOT_GET_FREE_BLOCKS: popleft_n(4) with 3 free", "PoolRejection.BLOCK_NOT_FREE: remove(9)",
              "PoolRejection.BLOCK_ALREADY_FREE: blocks [3] (present: [3])",
              "PoolRejection.BLOCK_ALREADY_FREE: blocks [7, 7] (present: [])", "PoolRejection.BAD_COUNT: count -1",
              "PoolRejection.BAD_COUNT: count True", "PoolRejection.BAD_COUNT: count 1.0"]),
            ("map: get_one, pop 7, pop 0, get_one, pop 1, entries left",
             (m1.get_one(b"K"), miss, m2 is m1, hit, m3.get_one(b"K"), last, len(m4), m4.get_one(b"K")),
             (0, None, True, 0, 1, 1, 0, None)),
            ("pool sizes 0, True, 2.0 refused", [refused(lambda n=n: vp.new_pool(n)) for n in (0, True, 2.0)],
             [f"PoolRejection.BAD_POOL_SIZE: num_blocks={n!r}" for n in (0, True, 2.0)]),
            ("usage of 8 blocks: fresh, with 4 taken; of a 1-block pool", usage + [vp.new_pool(1).usage()],
             [0.0, 1 - 3 / 7, 0.0]),
            ("get_new_blocks(4) of [1..7]; free [4, 3, 2, 1] with 1, 2 cached -> queue", (got, order),
             ((1, 2, 3, 4), (4, 3, 5, 6, 7, 2, 1))),
            ("the two BlockStored events (blocks 0, then 1, group 5), nothing for 2..2",
             (stored, unchanged),
             ((vp.BlockStored((external_hash(hashes[0]),), None, (100, 101), 2, 3, "L", (None,), 5),
               vp.BlockStored((external_hash(hashes[1]),), external_hash(hashes[0]), (102, 103), 2, 3, "L",
                              ((("a", -1),),), 5)), True)),
            ("reset with blocks held: refused, the same pool", (reset_done, unchanged_reset), (False, True)),
            ("reuse 3 then 3 more: popped, events (block 2's identity evicted), block 2's key, map",
             (popped, popped2, removed, reused.block_key[2], reused.cached.as_dict()),
             ((4, 3, 5), (6, 7, 2), (vp.BlockRemoved((external_hash(hashes[1]),), 5),), None, {k0: (1,)})),
            ("raw hashes: the event of blocks 0, 1 (group 0); reset: done, keys, queue, events",
             (raw.events, done, cleared.block_key, cleared.free.blocks, cleared.events[-1:]),
             ((vp.BlockStored(hashes[:2], None, (100, 101, 102, 103), 2, 3, "L", (None, (("a", -1),)), 0),), True,
              (None,) * 4, (1, 2, 3), (vp.AllBlocksCleared(),))),
            ("touch null 0, free 2 twice of a 4-block pool: refs, queue", (touched.ref_cnt, touched.free.blocks),
             ((0, 0, 2, 0), (1, 3))),
            ("caching off: take 3, free [1, 2]: queue, keys", (ids, off.free.blocks, off.block_key),
             ((1, 2, 3), (1, 2, 4), (None,) * 5)),
            ("cache_full_blocks past the hashes refused", refused(
                lambda: vp.cache_full_blocks(vp.new_pool(8), source, (1, 2, 3, 4, 5), 0, 5, 2)),
             "PoolRejection.BAD_COUNT: num_full_blocks=5 with 4 hashes, 5 blocks")]


def sglang_tree_pinned() -> Rows:
    """docs/peers/sglang.md §1-§5 on hand-traced trees (page size 1 unless said, the profile's counter clock: each
    reading is the next integer from 1, the root taking 1). §4's ranking (smallest evicted first) of a node with
    hit count 2, priority 2, created at 5, last used at 7: lru 7, lfu (2, 7), fifo 5, mru -7, filo -5, priority
    (2, 7), slru (hit count >= threshold 2: 1, 7) and (0, 7) under threshold 4; tlru is refused as not reproduced,
    an unknown name with the known ones; names are lower-cased, and a disabled cache uses lru whatever is asked.
    Inserting [1, 2, 3, 4] (clock 2; leaf 1 made at 3) and matching [1, 2, 9] (clock 4) splits the edge at 2: the
    new upper node 2 is made at 5, takes [1, 2] / slots 11, 12 and copies the hit count 1; the leaf keeps [3, 4],
    made at 3 and used at 4. Locking the leaf moves both edges to protected (delta -4; unlocking moves them back, +4),
    a second lock on the upper node moves nothing, each unlock moves back only what reaches lock 0, and an
    extra unlock drives both locks to -1
    with no size change. Eviction frees whole leaves in policy order, a parent left childless joins the heap
    (lru: [5] then [7], [1, 2]; mru: [7], then [1, 2], [5]). Insert: priorities only rise along the path (the
    root's too); a new leaf ending at or below ``inserted_len`` gains no hit; edges of 300 and 301 tokens compare their lengths by value (no split at a full match);
    a one-token match splits a cached [5, 6], an empty one returns the root without a walk; too few
    slots, a disabled cache, page-aligned keys; a leaf its parent no longer holds and a node
    of another tree are refused by name. ``pretty_print`` lists edges (first 10 units) with their locks, then the
    token count."""
    import sys

    from kvexact.reference.peers import sglang as sg

    refused = _refused

    node = sg.TreeNode(9, 5, priority=2)
    node.hit_count, node.last_access_time = 2, 7
    ranks = [sg.eviction_priority(p)(node) for p in ("lru", "lfu", "fifo", "mru", "filo", "priority", "slru")]
    ranks.append(sg.eviction_priority("slru", 4)(node))
    policy_refusals = [refused(lambda p=p: sg.eviction_priority(p)) for p in ("tlru", "bogus")]
    names = (sg.RadixCache(eviction_policy="LFU").eviction_policy,
             sg.RadixCache(disable=True, eviction_policy="bogus").eviction_policy)
    c = sg.RadixCache()
    root = c.root_node
    fresh = (root.id, root.lock_ref, root.priority, root.creation_time, c.sizes(), dict(c.evictable_leaves))
    first = c.insert([1, 2, 3, 4], [11, 12, 13, 14])
    leaf = first.last_device_node
    assert leaf is not None
    m = c.match_prefix([1, 2, 9])
    upper = m.last_device_node
    split = (m.device_prefix_len, upper.id, upper.creation_time, upper.last_access_time, upper.hit_count,
             upper.key.units, upper.value, leaf.id, leaf.creation_time, leaf.last_access_time, leaf.key.units,
             leaf.value, leaf.parent is upper, root.last_access_time, m.last_host_node is upper)
    deltas = [c.inc_lock_ref(leaf).delta, c.dec_lock_ref(leaf).delta]
    held = c.lock(leaf)
    deltas.append(c.inc_lock_ref(upper).delta)
    sizes = [c.sizes()]
    deltas += [c.unlock(held).delta, c.dec_lock_ref(upper).delta]
    sizes.append(c.sizes())
    deltas.append(c.dec_lock_ref(leaf).delta)
    sizes.append(c.sizes())
    after = (held.node is leaf, leaf.lock_ref, upper.lock_ref, list(c.evictable_leaves) == [leaf])

    class Recorder:
        def __init__(self) -> None:
            self.freed: list[tuple[tuple[int, ...], int]] = []

        def free_segment(self, slots: Any, start_pos: int = 0) -> None:
            self.freed.append((tuple(slots), start_pos))

    evictions = []
    for policy in ("lru", "mru"):
        rec = Recorder()
        t = sg.RadixCache(allocator=rec, eviction_policy=policy)
        t.insert([1, 2], [11, 12])
        t.insert([5], [15])
        t.insert([1, 2, 7], [11, 12, 17])
        evictions.append((t.evict(1), t.sizes(), t.evict(10), t.sizes(), rec.freed))
    p = sg.RadixCache()
    p.insert([1, 2], priority=3)
    p.insert([1, 2, 3], priority=5)
    again = p.insert([1, 2], priority=1)
    prio = (p.root_node.priority, [n.priority for n in p.nodes()], again.prefix_len, again.last_device_node.key.units
            if again.last_device_node else None)
    long = sg.RadixCache()  # edges longer than CPython's cached small ints: lengths compared by value
    long.insert(list(range(300)))
    grown = long.insert(list(range(301)))
    longs = (grown.prefix_len, [len(n.key) for n in long.nodes()], long.match_prefix(list(range(301))).device_prefix_len,
             long.match_prefix(list(range(300)) + [7]).device_prefix_len, [len(n.key) for n in long.nodes()])
    below = sg.RadixCache()
    below_hits = [below.insert([7, 8], inserted_len=5).last_device_node, below.insert([9], inserted_len=1)
                  .last_device_node]
    below_rows = [n.hit_count if n is not None else None for n in below_hits]
    single = sg.RadixCache()
    single.insert([5, 6])
    singles = (single.match_prefix([5]).device_prefix_len, single.match_prefix([]).device_prefix_len,
               single.root_node.last_access_time, [n.key.units for n in single.nodes()])
    off = sg.RadixCache(disable=True)
    disabled = (off.insert([1]).prefix_len, off.insert([1]).last_device_node, off.match_prefix([1]).device_prefix_len,
                off.evict(5), off.inc_lock_ref(off.root_node).delta, off.sizes())
    paged = sg.RadixCache(page_size=2)
    paged_insert = paged.insert([1, 2, 3])
    paged_rows = (paged_insert.prefix_len, paged.tree_slots(), paged.match_prefix([1, 2, 3]).device_prefix_len,
                  paged.match_prefix([1]).device_prefix_len, paged.match_prefix([1, 3]).device_prefix_len)
    orphan_tree = sg.RadixCache()
    orphan = orphan_tree.insert([4, 5]).last_device_node
    assert orphan is not None
    orphan_tree.root_node.children.clear()
    other = sg.RadixCache()
    stranger = other.insert([6]).last_device_node
    shown = sg.RadixCache()
    shown.insert(list(range(12)))
    shown.insert([*range(12), 99])
    shown.lock(shown.nodes()[-1])
    return [("rankings lru, lfu, fifo, mru, filo, priority, slru (2), slru (4)", ranks,
             [7, (2, 7), 5, -7, -5, (2, 7), (1, 7), (0, 7)]),
            ("policies tlru, bogus refused", policy_refusals,
             ["SGLangRejection.POLICY_NOT_REPRODUCED: eviction policy 'tlru'",
              "SGLangRejection.UNKNOWN_EVICTION_POLICY: eviction policy 'bogus'; known: ['fifo', 'filo', 'lfu', 'lru', "
              "'mru', 'priority', 'slru']"]),
            ("policy names LFU; bogus when disabled", names, ("lfu", "lru")),
            ("page sizes 0, '2' refused", [refused(lambda n=n: sg.RadixCache(page_size=n)) for n in (0, "2")],
             ["SGLangRejection.BAD_PAGE_SIZE: page_size=0", "SGLangRejection.BAD_PAGE_SIZE: page_size='2'"]),
            ("fresh root: id, lock, priority, made at, sizes, evictable leaves", fresh,
             (0, 1, -sys.maxsize, 1, (0, 0, 0), {})),
            ("first insert: prefix, leaf id, hit count, made at", (first.prefix_len, leaf.id, leaf.hit_count,
                                                                   leaf.creation_time), (0, 1, 1, 3)),
            ("match [1, 2, 9]: matched, upper id, made, used, hits, key, value; leaf id, made, used, key, value, "
             "parent; root used; host node", split,
             (2, 2, 5, 5, 1, (1, 2), (11, 12), 1, 3, 4, (3, 4), (13, 14), True, 4, True)),
            ("inc, dec of the leaf; then lock leaf, inc upper, unlock leaf, dec upper, extra dec of leaf: deltas",
             deltas, [-4, 4, 0, 2, 2, 0]),
            ("sizes after the two locks, after both unlocks, after the extra unlock", sizes,
             [(4, 0, 4), (4, 4, 0), (4, 4, 0)]),
            ("after the extra unlock: lock node, leaf and upper locks, evictable leaves = [leaf]", after,
             (True, -1, -1, True)),
            ("evict 1 then 10 of [1, 2] + [7], [5] (lru, mru): freed, sizes, freed, sizes, segments", evictions,
             [(1, (3, 3, 0), 3, (0, 0, 0), [((15,), 0), ((17,), 0), ((11, 12), 0)]),
              (1, (3, 3, 0), 3, (0, 0, 0), [((17,), 0), ((11, 12), 0), ((15,), 0)])]),
            ("priorities 3, 5, then 1: root, nodes; the last insert's prefix and node", prio,
             (5, [5, 5], 2, (1, 2))),
            ("range(300) then range(301) inserted: prefix, edge lengths; matches of range(301), range(300) + [7]; "
             "edge lengths", longs, (300, [300, 1], 301, 300, [300, 1])),
            ("hit counts of new leaves [7, 8] (inserted_len 5: ends below it) and [9] (inserted_len 1: ends at it)",
             below_rows, [0, 0]),
            ("[5, 6] cached: match [5] (splits), match [] (no walk, no clock reading), root last used, edges",
             singles, (1, 0, 4, [(5,), (6,)])),
            ("disabled: insert prefix, node, match, evict, lock delta, sizes", disabled, (0, None, 0, 0, 0, (0, 0, 0))),
            ("page size 2, insert [1, 2, 3]: prefix, slots, matches of [1, 2, 3], [1], [1, 3]", paged_rows,
             (0, [1, 2], 2, 0, 0)),
            ("too few slots; an orphaned leaf deleted; a node of another tree locked",
             [refused(lambda: c.insert([7, 8, 9], [1])), refused(lambda: orphan_tree._delete_leaf(orphan)),
              refused(lambda: c.lock(stranger))],
             ["SGLangRejection.VALUE_SHORTER_THAN_KEY: 1 slots for a key of 3 units",
              f"SGLangRejection.LEAF_NOT_IN_TREE: node {orphan.id} is no child of node {orphan_tree.root_node.id}",
              f"SGLangRejection.FOREIGN_NODE: node {stranger.id} is not in this tree"]),
            ("pretty_print of range(12) + [99] with the [99] edge locked", shown.pretty_print(),
             "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9] r=1\n  [99] r=1\n#tokens: 13")]


def vllm_adapters_pinned() -> Rows:
    """docs/peers/vllm.md §3-§5 through the two vLLM adapters, hand-traced. ``VllmAdapter(5, 2)`` (blocks 1-4 of 2
    tokens, queue [1, 2, 3, 4]): a = [1, 2, 3] hits nothing (cap 2, nothing cached), takes blocks 1, 2 and caches
    its one full block 1 at once (trace: allocate_block 1, 2, cache_block j 0); b = [1, 2, 5] hits block 1 (2
    tokens) and takes 3 (prefix_hit k 1, allocate_block 3); a's decode token 4 fills block 2 (no new block,
    cache_block j 1); freeing a hands back 2, 1 (tail first): 2 (hashed, now free) goes to the back, 1 stays
    held by b; a reset is refused while b runs; a lookup of [1, 2, 3, 4, 9] (cap 4) hits both cached blocks. Each
    record's state projects ref counts, identities (the low 64 bits of the block hash, sha256 over pickle of
    (NONE_HASH, (1, 2), None) for block 1), rows written (a full block for a cached one) and tables; the steps
    with no KVAllocation twin say ``in_spec: false``. Refusals: a duplicate, an empty prompt, an unknown
    request, fork. ``VllmProtocolAdapter`` (2 identical groups of 3 blocks, 2-token blocks): the same a and b
    (tables [1, 2] and [1, 3] in both groups, b hits 2 tokens), a duplicate, an empty prompt, 5 tokens with no
    block free, b's 5th token (a third block) refused as INSUFFICIENT_BLOCKS; unknown ids refused on append,
    release and cache; lengths; a refused operation leaves the digest as it was."""
    import hashlib
    import pickle

    from kvexact.reference.adapters import AdapterConfig
    from kvexact.reference.peers.vllm_adapter import VllmAdapter
    from kvexact.reference.peers.vllm_protocol import VllmProtocolAdapter

    refused = _refused

    none = hashlib.sha256(pickle.dumps("vllm-none-hash", protocol=5)).digest()
    h0 = hashlib.sha256(pickle.dumps((none, (1, 2), None), protocol=5)).digest()
    ident0 = int.from_bytes(h0[-8:], "big")
    ad = VllmAdapter(5, 2)
    a = ad.allocate("a", [1, 2, 3])
    state_a = ad.trace[-1].state
    b = ad.allocate("b", [1, 2, 5])
    grown = ad.append("a", [4])
    freed = ad.free("a")
    queue = ad.free_queue()
    reset = ad.reset_prefix_cache()
    looked = ad.lookup([1, 2, 3, 4, 9])
    short = ad.allocate("c", list(range(9)))
    steps = [(r.action, r.params) for r in ad.trace]
    out_of_spec = [r.as_dict().get("in_spec", True) for r in ad.trace]
    adapter_refusals = [refused(c) for c in (lambda: ad.allocate("b", [1]), lambda: ad.allocate("d", []),
                                             lambda: ad.append("zz", [1]), lambda: ad.free("zz"),
                                             lambda: ad.fork("b", "e"))]
    pa = VllmProtocolAdapter(AdapterConfig(block_tokens=2, num_groups=2, blocks_per_group=3, row_bytes=(8, 8)))
    started = [pa.start("a", [1, 2, 3]), pa.start("b", [1, 2, 5])]
    tables = [pa.table(r, g) for r in ("a", "b") for g in (0, 1)]
    before = pa.digest()
    refusals = [pa.start("a", [1]), pa.start("c", []), pa.start("c", [7] * 5), pa.append("x", 1),
                pa.release("x"), pa.cache("x")]
    unchanged = pa.digest() == before
    grown_ops = [pa.append("a", 4), pa.append("b", 6), pa.append("b", 7), pa.cache("a")]
    lengths = (pa.length("a"), pa.length("b"), pa.length("x"))
    pa.self_check()
    released = (pa.release("a"), pa.table("a", 0), pa.block_ids(1), pa.digest() != before)
    return [("VllmAdapter a, b: (hit tokens, hit blocks, new blocks); a's decode; free a; queue; reset; lookup; "
             "c of 9 tokens", ((a.num_hit_tokens, a.hit_block_ids, a.new_block_ids) if a else None,
                               (b.num_hit_tokens, b.hit_block_ids, b.new_block_ids) if b else None,
                               grown, freed, queue, reset, looked, short),
             ((0, (), (1, 2)), (2, (1,), (3,)), (), (2, 1), (4, 2), False, 4, None)),
            ("VllmAdapter trace steps", steps,
             [("allocate_block", {"r": "a", "g": 0, "b": 1}), ("allocate_block", {"r": "a", "g": 0, "b": 2}),
              ("cache_block", {"r": "a", "j": 0}), ("prefix_hit", {"r": "b", "k": 1}),
              ("allocate_block", {"r": "b", "g": 0, "b": 3}), ("cache_block", {"r": "a", "j": 1}),
              ("release", {"r": "a"}), ("reset_prefix_cache", {"succeeded": False})]),
            ("in_spec of each step", out_of_spec, [False, False, True, True, False, True, True, False]),
            ("state after a: ref, ident, rows, tables, len",
             (dict(state_a["ref"][0]), dict(state_a["ident"][0]), dict(state_a["rows"][0]),
              {r: dict(t) for r, t in state_a["tables"].items()}, dict(state_a["len"])),
             ({1: 1, 2: 1, 3: 0, 4: 0}, {1: ident0, 2: 0, 3: 0, 4: 0}, {1: 2, 2: 1, 3: 0, 4: 0},
              {"a": {0: [{"block": 1}, {"block": 2}]}}, {"a": 3})),
            ("VllmAdapter refusals", adapter_refusals,
             ["ManagerRejection.DUPLICATE_REQUEST: request 'b'", "AdapterRejection.EMPTY_PROMPT: request 'd'",
              "ManagerRejection.UNKNOWN_REQUEST: request 'zz'", "ManagerRejection.UNKNOWN_REQUEST: request 'zz'",
              "AdapterRejection.FORK_UNSUPPORTED: fork('b', 'e')"]),
            ("protocol adapter: name, lockstep; starts a, b (accepted, rejection, hit); tables a, b in groups 0, 1",
             (pa.name, pa.lockstep, [(o.accepted, o.rejection, o.hit_tokens) for o in started], tables),
             ("vllm-0.33.0", False, [(True, None, 0), (True, None, 2)], [[1, 2], [1, 2], [1, 3], [1, 3]])),
            ("protocol refusals (duplicate, empty, no blocks, unknown append, release, cache); digest unchanged",
             ([(o.accepted, o.rejection) for o in refusals], unchanged),
             ([(False, "DUPLICATE_REQUEST"), (False, "EMPTY_APPEND"), (False, "INSUFFICIENT_BLOCKS"),
               (False, "UNKNOWN_REQUEST"), (False, "UNKNOWN_REQUEST"), (False, "UNKNOWN_REQUEST")], True)),
            ("append a 4, b 6, b 7 (a third block: none free), cache a; lengths a, b, x",
             ([(o.accepted, o.rejection) for o in grown_ops], lengths),
             ([(True, None), (True, None), (False, "INSUFFICIENT_BLOCKS"), (True, None)], (4, 4, 0))),
            ("release a: accepted; a's table; group 1's block ids; digest changed",
             (released[0].accepted, released[1], released[2], released[3]), (True, [], [1, 2, 3], True))]


def stream_log_contract() -> Rows:
    """``vllm_wire.random_stream_log``'s contract (its docstring), checked call by call through a recording driver
    (seed 5, 400 operations, at most 3 running, a 10-token stream): one token stream of ints below 2**15 that
    every request replays (prompts are its prefixes of 1 to 10 - 3 tokens, appends continue it by 1 to 3 tokens
    and never past its end); request ``q<op>`` is admitted at operation ``op`` and only while fewer than 3 run; a
    refused admission (the driver refuses every third) never runs, a refused append (every second) leaves the
    request's length; frees take a running request; one batch per operation whose events are not empty (the
    driver returns an event on even operations only); a 13-token stream draws prompts of 1 to 10 tokens. The profile's own driver (``_ProfileDriver``): 9 blocks of
    2 tokens, events on (full-attention BlockStored events: hashes as the low 64 bits of the chain), and each batch
    it returns drains the manager's events and the adapter's trace. ``sglang_stream.random_event_log`` (its
    docstring): a log begins with the constructor's AllBlocksCleared, stores pages of ``page_size`` tokens drawn
    from 1..``tokens``, removes only pages it stored, trims the tree to ``capacity_pages`` after every operation,
    and draws a rare reset when nothing is leased."""
    import hashlib
    import pickle

    from kvexact.reference.peers import vllm_pool as bp
    from kvexact.reference.peers import vllm_wire as wire

    class Recording:
        def __init__(self) -> None:
            self.op = 0
            self.seqs: dict[str, list[int]] = {}
            self.refused: set[str] = set()
            self.bad: list[str] = []
            self.admits = self.appends = 0
            self.prompts: set[int] = set()
            self.steps: set[int] = set()
            self.peak = 0
            self.kinds: set[str] = set()
            self.done: list[list[int]] = []  # each request's tokens at every accepted append and at its free

        def allocate(self, rid: str, tokens: list[int]) -> tuple[int, ...] | None:
            self.kinds.add("allocate")
            if rid != f"q{self.op}" or len(self.seqs) >= 3 or rid in self.refused:
                self.bad.append(f"allocate {rid} at op {self.op} with {len(self.seqs)} running")
            self.prompts.add(len(tokens))
            self.admits += 1
            if self.admits % 3 == 0:
                self.refused.add(rid)
                return None
            self.seqs[rid] = list(tokens)
            self.peak = max(self.peak, len(self.seqs))
            return ()

        def append(self, rid: str, tokens: list[int]) -> tuple[int, ...] | None:
            self.kinds.add("append")
            if rid not in self.seqs:
                self.bad.append(f"append to {rid}")
                return None
            self.steps.add(len(tokens))
            self.appends += 1
            if self.appends % 2 == 0:
                return None
            self.seqs[rid].extend(tokens)
            self.done.append(list(self.seqs[rid]))
            return ()

        def free(self, rid: str) -> None:
            self.kinds.add("free")
            if rid not in self.seqs:
                self.bad.append(f"free of {rid}")
            self.done.append(self.seqs.pop(rid, []))

        def reset_prefix_cache(self) -> bool:
            self.kinds.add("reset")
            return True

        def take_events(self) -> tuple[Any, ...]:
            self.op += 1
            return (self.op - 1,) if (self.op - 1) % 2 == 0 else ()

    rec = Recording()
    batches = wire.random_stream_log(5, 400, max_running=3, stream_tokens=10, driver=rec)
    odd = Recording()  # 13 tokens: prompts of 1 to 10
    wire.random_stream_log(6, 400, max_running=3, stream_tokens=13, driver=odd)
    seqs = rec.done + list(rec.seqs.values())
    longest = max(seqs, key=len)
    stream_ok = all(seq == longest[:len(seq)] for seq in seqs) and all(0 <= t < 1 << 15 for t in longest)
    from kvexact.reference.peers.sglang_stream import random_event_log

    def replay(events: list[dict[str, Any]]) -> tuple[set[int], int, bool, set[int], set[int]]:
        live: set[int] = set()
        peak, removals_known, tokens, sizes = 0, True, set(), set()
        for e in events:
            if e["type"] == "AllBlocksCleared":
                live.clear()
            elif e["type"] == "BlockStored":
                live.update(e["block_hashes"])
                tokens.update(e["token_ids"])
                sizes.add(e["block_size"])
            else:
                removals_known = removals_known and set(e["block_hashes"]) <= live
                live.difference_update(e["block_hashes"])
            peak = max(peak, len(live))
        return live, peak, removals_known, tokens, sizes

    sg_logs = [random_event_log(seed, 60, page_size=2, tokens=3, max_pages=2, capacity_pages=4) for seed in range(8)]
    sg_rows = [replay(log) for log in sg_logs]
    sg_summary = (all(log[0] == {"type": "AllBlocksCleared"} for log in sg_logs),
                  set().union(*(r[3] for r in sg_rows)), set().union(*(r[4] for r in sg_rows)),
                  all(r[2] for r in sg_rows), max(len(r[0]) for r in sg_rows) <= 4,
                  any(e["type"] == "AllBlocksCleared" for log in sg_logs for e in log[1:]))
    parent, ext = hashlib.sha256(pickle.dumps("vllm-none-hash", protocol=5)).digest(), []
    for pair in ((1, 2), (3, 4), (5, 6)):  # docs/peers/vllm.md §2: the chain; §1: events carry the low 64 bits
        parent = hashlib.sha256(pickle.dumps((parent, pair, None), protocol=5)).digest()
        ext.append(int.from_bytes(parent[-8:], "big"))
    profile = wire._ProfileDriver(9, 2)
    profile.allocate("a", [1, 2, 3, 4, 5])
    profile.append("a", [6])
    first = profile.take_events()
    drained = (profile.take_events(), profile.adapter.trace, profile.adapter.manager.config.num_blocks,
               profile.adapter.block_size)
    return [("calls against the contract", rec.bad, []),
            ("every request replays one stream of ints below 2**15; the longest request's length",
             (stream_ok, len(longest)), (True, 10)),
            ("prompt lengths, decode step sizes drawn; peak running", (sorted(rec.prompts), sorted(rec.steps),
                                                                       rec.peak),
             (list(range(1, 8)), [1, 2, 3], 3)),
            ("call kinds drawn", sorted(rec.kinds), ["allocate", "append", "free", "reset"]),
            ("a 13-token stream: calls against the contract, prompt lengths drawn", (odd.bad, sorted(odd.prompts)),
             ([], list(range(1, 11)))),
            ("batches: the even operations' events", batches, [(op,) for op in range(0, 400, 2)]),
            ("profile driver: the first batch (a = 5 tokens: 2 blocks cached; its 6th token: block 3 cached)",
             first, (bp.BlockStored((ext[0], ext[1]), None, (1, 2, 3, 4), 2, None, None, (None, None), 0,
                                    kv_cache_spec_kind="full_attention"),
                     bp.BlockStored((ext[2],), ext[1], (5, 6), 2, None, None, (None,), 0,
                                    kv_cache_spec_kind="full_attention"))),
            ("profile driver: the next batch, the trace after it, blocks, block size", drained, ((), [], 9, 2)),
            ("SGLang logs (seeds 0-7, 60 operations, pages of 2, tokens 1-3, at most 4 pages kept): begin cleared, "
             "tokens seen, block sizes, removals of stored pages only, at most 4 pages live at the end, a reset "
             "drawn", sg_summary, (True, {1, 2, 3}, {2}, True, True, True))]


def vllm_manager_scenarios() -> Rows:
    """docs/peers/vllm.md's measured scenarios on the manager (C48 = 16 zeros, 16 ones, 16 twos). 6 (caching off, 4-token
    blocks, 5 blocks): range(10) takes [1, 2, 3]; freed they are prepended ([3, 2, 1, 4]); range(16) takes
    [3, 2, 1, 4]; range(4) then gets None. 11 (16-token blocks, 11 blocks): r0 = C48 takes [1, 2, 3]; r1 = C48 * 2
    hits 48 and takes [4, 5, 6]; freed, refs of 1-6 are [1, 1, 1, 0, 0, 0] and the queue [7, 8, 9, 10, 6, 5, 4];
    r2 = [7] * 32 takes [7, 8] (5 free); r3 = C48 * 3 hits 96 ([1..6]) and its allocation of 48 more is refused
    (3 new + 3 evictable hits = 6 > 5: required 6, free 5), queue and refs unchanged. 12: r0 = C48 + [3] * 7, r1
    = C48 + [4] * 7 (takes [5]); reset refused while they run; both freed, reset clears every identity with one
    AllBlocksCleared and keeps the queue [5, 4, 6, 7, 8, 9, 10, 3, 2, 1]. 15: a prompt-logprobs request skips
    reading (hit 0) but still caches [1, 2, 3, 4]; the same prompt without hits 48 and takes [5]; after both are
    freed a logprobs request takes [5, 4, 6, 7] and caches duplicates of the first three keys. 24: a hit of 3
    cached free blocks + 1 new fits a 4-free pool, + 2 new does not. 27: 20 tokens + 20 lookahead take 3 blocks and
    cache 1; the next decode token (21 slots in 2 blocks) takes none. 28 (4-token blocks): range(10) in chunks
    of 5 takes [1, 2] (1 cached), then [3] (2 cached); range(10) +
    [99] meanwhile hits 8 ([1, 2]). Also (hand-derived): max_model_len 6 caps 10 tokens at 2 blocks of 4; reserved
    blocks count against the free ones; the manager's self-check names the first block whose ref count is not
    its number of holders; the named refusals and their values."""
    import attrs

    from kvexact.reference.peers.vllm import ManagerRejection, VllmConfig, VllmKVCacheManager
    from kvexact.reference.peers.vllm_pool import AllBlocksCleared

    refused = _refused

    def admit(m: VllmKVCacheManager, rid: str, tokens: list[int], **kw: Any) -> tuple[Any, ...]:
        r = m.make_request(rid, tokens, **kw)
        hit = m.get_computed_blocks(r)
        m2, receipt = m.allocate_slots(r, r.num_tokens - hit.num_computed_tokens, hit.num_computed_tokens,
                                       hit.block_ids)
        return m2, hit, receipt

    c48 = [0] * 16 + [1] * 16 + [2] * 16
    m = VllmKVCacheManager.create(VllmConfig(5, 4, enable_caching=False))
    m, _, a = admit(m, "r1", list(range(10)))
    m, _ = m.free("r1")
    q6 = m.pool.free.blocks
    m, _, b = admit(m, "r2", list(range(16)))
    _, _, c = admit(m, "r3", list(range(4)))
    s6 = (a.block_ids, q6, b.block_ids, c.block_ids, c.rejection)
    m = VllmKVCacheManager.create(VllmConfig(11, 16))
    m, _, a = admit(m, "r0", c48)
    m, h1, b = admit(m, "r1", c48 * 2)
    m, _ = m.free("r1")
    refs, q11 = m.pool.ref_cnt[1:7], m.pool.free.blocks
    m, _, c = admit(m, "r2", [7] * 32)
    m3, h3, d = admit(m, "r3", c48 * 3)
    s11 = (a.block_ids, h1.num_computed_tokens, b.block_ids, refs, q11, c.block_ids, m.pool.num_free_blocks,
           h3.block_ids, (d.block_ids, d.num_required_blocks, d.num_free_blocks), m3 is m)
    m = VllmKVCacheManager.create(VllmConfig(11, 16, enable_kv_cache_events=True))
    m, _, _ = admit(m, "r0", c48 + [3] * 7)
    m, _, b = admit(m, "r1", c48 + [4] * 7)
    m, _ = m.take_events()
    m, busy = m.reset_prefix_cache()
    m, _ = m.free("r0")
    m, _ = m.free("r1")
    m, done = m.reset_prefix_cache()
    m, events = m.take_events()
    s12 = (b.block_ids, busy, done, events, m.pool.free.blocks, len(m.pool.cached), set(m.pool.block_key))
    m = VllmKVCacheManager.create(VllmConfig(11, 16))
    m, h0, a = admit(m, "r0", c48 + [3] * 7, prompt_logprobs=True)
    m, h1, b = admit(m, "r1", c48 + [3] * 7)
    m, _ = m.free("r0")
    m, _ = m.free("r1")
    m, h2, c = admit(m, "r2", c48 + [3] * 7, prompt_logprobs=True)
    s15 = ((h0.num_computed_tokens, a.block_ids, a.newly_cached_block_ids), (h1.num_computed_tokens, b.block_ids),
           (h2.num_computed_tokens, c.block_ids), sorted(ids for _k, ids in m.pool.cached.entries))
    m = VllmKVCacheManager.create(VllmConfig(5, 4))
    m, _, _ = admit(m, "w", list(range(12)) + [50])  # 4 blocks; 3 full ones cached
    m, _ = m.free("w")
    r = m.make_request("x", list(range(12)) + [60, 61])
    hit = m.get_computed_blocks(r)
    fits = m.allocate_slots(r, 2, 12, hit.block_ids)[1]
    r2 = m.make_request("y", list(range(12)) + [60] * 5)
    tight = m.allocate_slots(r2, 5, 12, m.get_computed_blocks(r2).block_ids)[1]
    s24 = (hit.block_ids, fits.block_ids, (tight.block_ids, tight.num_required_blocks, tight.num_free_blocks))
    m = VllmKVCacheManager.create(VllmConfig(11, 16))
    r = m.make_request("r", list(range(20)))
    m, look = m.allocate_slots(r, 20, num_lookahead_tokens=20)
    grown = r.append_output(m.hasher, [99]).with_computed(20)
    m, step = m.allocate_slots(grown, 1)  # 21 slots need 2 blocks; it holds 3
    after_lookahead = (step.block_ids, step.num_required_blocks, m.blocks_of("r"))
    m = VllmKVCacheManager.create(VllmConfig(11, 4))
    r = m.make_request("r", list(range(10)))
    m, first = m.allocate_slots(r, 5)
    m, second = m.allocate_slots(r.with_computed(5), 5)
    other = m.get_computed_blocks(m.make_request("o", list(range(10)) + [99]))
    s28 = (first.block_ids, first.newly_cached_block_ids, second.block_ids, second.newly_cached_block_ids,
           other.block_ids, other.num_computed_tokens)
    def check(manager: VllmKVCacheManager) -> str | None:
        try:
            manager.check()
            return None
        except AssertionError as exc:
            return str(exc)

    held = VllmKVCacheManager.create(VllmConfig(4, 2))
    held, _ = held.allocate_slots(held.make_request("h", [1, 2, 3]), 3)  # blocks 1, 2
    checks = [check(held)] + [check(attrs.evolve(held, pool=attrs.evolve(held.pool, ref_cnt=refs)))
                              for refs in ((0, 2, 1, 0), (0, 1, 0, 1))]
    capped = VllmKVCacheManager.create(VllmConfig(11, 4, max_model_len=6))
    capped_blocks = capped.allocate_slots(capped.make_request("r", list(range(10))), 10)[1].block_ids
    small = VllmKVCacheManager.create(VllmConfig(5, 4))
    req = small.make_request("r", list(range(8)))
    reserved = [small.allocate_slots(req, 8, reserved_blocks=k)[1].block_ids for k in (2, 3)]
    running, _ = small.allocate_slots(req, 8)
    hits_refused = refused(lambda: running.allocate_slots(req, 1, 4, (1,)))
    config_refusals = [refused(lambda kw=kw: VllmConfig(**kw)) for kw in (
        {"num_blocks": 0, "block_size": 4}, {"num_blocks": 3, "block_size": True},
        {"num_blocks": 3, "block_size": 4, "max_model_len": 0}, {"num_blocks": 3, "block_size": 2.0})]
    arg_refusals = [refused(c) for c in (lambda: small.allocate_slots(req, -1),
                                         lambda: small.allocate_slots(req, 1, reserved_blocks=-2),
                                         lambda: small.allocate_slots(req, 1, num_lookahead_tokens=-3),
                                         lambda: small.get_computed_blocks(req, -1), lambda: req.with_computed(True),
                                         lambda: small.allocate_slots(req, 0))]
    return [("scenario 6: r1's blocks, queue after free, r2's blocks, r3's, its rejection", s6,
             ((1, 2, 3), (3, 2, 1, 4), (3, 2, 1, 4), None, ManagerRejection.INSUFFICIENT_BLOCKS)),
            ("scenario 11: r0, r1 hit, r1 blocks, refs 1-6, queue, r2 blocks, free, r3 hits, r3 receipt, unchanged",
             s11, ((1, 2, 3), 48, (4, 5, 6), (1, 1, 1, 0, 0, 0), (7, 8, 9, 10, 6, 5, 4), (7, 8), 5, (1, 2, 3, 4, 5, 6),
                   (None, 6, 5), True)),
            ("scenario 12: r1 blocks, reset while running, after both freed, events, queue, map entries, keys", s12,
             ((5,), False, True, (AllBlocksCleared(),), (5, 4, 6, 7, 8, 9, 10, 3, 2, 1), 0, {None})),
            ("scenario 15: logprobs r0 (hit, blocks, cached), r1 (hit, blocks), logprobs r2 (hit, blocks), map ids",
             s15, ((0, (1, 2, 3, 4), (1, 2, 3)), (48, (5,)), (0, (5, 4, 6, 7)), [(1, 5), (2, 4), (3, 6)])),
            ("scenario 24: hit blocks, hit + 1 new, hit + 2 new (receipt)", s24,
             ((1, 2, 3), (4,), (None, 5, 4))),
            ("scenario 27: 20 tokens + 20 lookahead: blocks, cached; the next decode token: new blocks, required, "
             "table", (look.block_ids, look.newly_cached_block_ids, after_lookahead),
             ((1, 2, 3), (1,), ((), 0, (1, 2, 3)))),
            ("scenario 28: chunk 1 blocks, cached; chunk 2 blocks, cached; the other request's hit", s28,
             ((1, 2), (1,), (3,), (2,), (1, 2), 8)),
            ("max_model_len 6: blocks for 10 tokens; 8 tokens with 2, 3 of 4 free blocks reserved",
             (capped_blocks, reserved), ((1, 2), [(1, 2), None])),
            ("manager check as is; with block 1 counted twice; with block 3 counted instead of 2 (the pool's own "
             "check fires first: block 2 at ref 0 is not queued)", checks, [None, "block 1: held 1, ref 2", "block 2"]),
            ("hits offered to a running request", hits_refused,
             "ManagerRejection.HITS_FOR_RUNNING_REQUEST: request 'r'"),
            ("configs refused", config_refusals,
             ["ManagerRejection.BAD_CONFIG: num_blocks=0", "ManagerRejection.BAD_CONFIG: block_size=True",
              "ManagerRejection.BAD_CONFIG: max_model_len=0", "ManagerRejection.BAD_CONFIG: block_size=2.0"]),
            ("arguments refused", arg_refusals,
             ["ManagerRejection.BAD_ARGUMENT: num_new_tokens=-1", "ManagerRejection.BAD_ARGUMENT: reserved_blocks=-2",
              "ManagerRejection.BAD_ARGUMENT: num_lookahead_tokens=-3",
              "ManagerRejection.BAD_ARGUMENT: max_cache_hit_length=-1",
              "ManagerRejection.BAD_ARGUMENT: num_computed_tokens=True",
              "ManagerRejection.NO_TOKENS_TO_SCHEDULE: request 'r'"])]


def sglang_pools_pinned() -> Rows:
    """docs/peers/sglang.md §7, hand-traced. Page size 1 (4 slots): alloc takes the first free slots ([1, 2]), refuses
    more than are left (None), free appends in the given order ([3, 4, 2, 1]); with ``need_sort`` freed slots are
    staged (still available) and merged sorted when an alloc runs short ([1, 3] after freeing 3, 1 of [1, 2, 3]);
    a free group defers every free to its end; the free log records each call. Pages of 2 (8 slots, pages 1-4):
    alloc of an odd count and a segment that starts off a page are refused by name; alloc(4) gives slots of pages
    1, 2 ([2, 3, 4, 5]); ``free`` releases the sorted unique pages touched, in front of the free list; a segment
    releases one page per page-step of its slots in segment order ([6, 7, 2, 3] at position 4 -> pages 3, 1); a
    group releases
    its frees' pages first, then its segments' pages, each in front (free [4], segments [2, 3], [6, 7] -> [1, 3,
    2]); ``need_sort`` stages pages until an alloc runs short.
    ``ReqToTokenPool`` (2 rows of 4): rows 1, 2 then none; a freed row returns to the back; write and read
    slices; the recording allocator keeps every freed segment."""
    from kvexact.reference.peers import sglang_pool as sp

    refused = _refused

    t = sp.TokenToKVPoolAllocator(4)
    t.freed_log = []
    one: tuple[Any, ...] = (t.alloc(2), t.alloc(3), t.available_size())
    t.free([2, 1])
    t.free([])
    one += (list(t.free_pages), t.available_size(), list(t.freed_log))
    t.free_group_begin()
    t.alloc(4)
    t.free([3])
    t.free_segment([1, 4], start_pos=3)
    grouped = list(t.free_pages)
    t.free_group_end()
    one += (grouped, t.free_pages, t.freed_log[-1])
    s = sp.TokenToKVPoolAllocator(4, need_sort=True)
    staged = (s.alloc(3), s.free([3, 1]), s.free_pages, s.release_pages, s.available_size(), s.alloc(2), s.free_pages,
              s.release_pages)
    p = sp.PagedTokenToKVPoolAllocator(8, 2)
    paged = [p.alloc(4), p.available_size(), refused(lambda: p.alloc(3)),
             refused(lambda: p.free_segment([4, 5], start_pos=1))]
    p.free([5, 2, 3])
    paged.append(list(p.free_pages))
    p.alloc(8)
    p.free_segment([6, 7, 2, 3], 4)  # a segment starting at logical position 4: on a page boundary
    paged.append(list(p.free_pages))
    p.free([9, 8])
    paged += [list(p.free_pages), p.alloc(4), p.available_size()]
    g = sp.PagedTokenToKVPoolAllocator(8, 2)
    g.alloc(8)
    g.free_group_begin()
    g.free([4])
    g.free_segment([2, 3], 0)
    g.free_segment([6, 7], 0)
    during = list(g.free_pages)
    g.free_group_end()
    n = sp.PagedTokenToKVPoolAllocator(8, 2, need_sort=True)
    n.alloc(8)
    n.free([2])
    sorted_rows = (n.free_pages, n.release_pages, n.available_size(), n.alloc(2), n.release_pages)
    rows = sp.ReqToTokenPool(2, 4)
    table = [rows.alloc(1), rows.alloc(2), rows.alloc(1), rows.available_size()]
    rows.free(1)
    rows.write(2, 1, [7, 8])
    table += [rows.free_slots, rows.req_to_token[2], rows.read(2, 0, 3), rows.req_to_token[0]]
    rec = sp.RecordingAllocator()
    rec.free_segment([3, 4], start_pos=2)
    rec.free([5])
    return [("page size 1: alloc 2, alloc 3, available; after free [2, 1]: queue, available, log; group: queue "
             "during, after, last log", one,
             ([1, 2], None, 2, [3, 4, 2, 1], 4, [(2, 1)], [], [3, 1, 4], (3, 1, 4))),
            ("need_sort: alloc 3, free [3, 1], free, staged, available, alloc 2, free, staged", staged,
             ([1, 2, 3], None, [4], [3, 1], 3, [1, 3], [4], [])),
            ("pages of 2: alloc 4, available, alloc 3, segment at 1; free [5, 2, 3]; all taken then segment "
             "[6, 7, 2, 3]; free [9, 8]; alloc 4; available", paged,
             [[2, 3, 4, 5], 4, "SGLangRejection.PAGE_MISALIGNED_ALLOC: alloc(3) with page size 2",
              "SGLangRejection.PAGE_MISALIGNED_SEGMENT: start_pos 1 with page size 2", [1, 2, 3, 4], [3, 1],
              [4, 3, 1], [8, 9, 6, 7], 2]),
            ("paged group: free list during, after", (during, g.free_pages), ([], [1, 3, 2])),
            ("paged need_sort: free, staged, available, alloc 2, staged", sorted_rows, ([], [1], 2, [2, 3], [])),
            ("paged page size 0", refused(lambda: sp.PagedTokenToKVPoolAllocator(8, 0)),
             "SGLangRejection.BAD_PAGE_SIZE: page_size=0"),
            ("rows: alloc 1, 2, 1, available; free slots, row 2, read 0..3, padding row", table,
             [[1], None, [2], 0, [1], [0, 7, 8, 0], [0, 7, 8], [0, 0, 0, 0]]),
            ("recording allocator: freed, available", (rec.freed, rec.available_size()), ([(3, 4), (5,)], 0))]


def sglang_keys_events_orders() -> Rows:
    """docs/peers/sglang.md §1 (keys), the event recorder's contract (its module docstring) and §6 (queue orders),
    hand-traced. Keys: non-int tokens refused naming their index; ``limit`` caps the raw tokens; the EAGLE view
    pairs neighbours (N tokens -> N - 1 units, idempotent); an index outside the key is refused with the length;
    ``match`` is the common prefix floored to the page size and refuses keys of different namespaces; a child
    key is the first unit (page size 1) or the first page, wrapped with the extra key and salt; repr shows ten
    units then "...". Events (pages of 2; a page's hash is blake2b-8 of repr of the path to its end, signed):
    the constructor records AllBlocksCleared; [1, 2, 3, 4] is one BlockStored of both pages (the second chained
    to the first and merged); [1, 2, 5, 6] splits silently and stores [5, 6] under [1, 2]; LRU eviction of 2
    tokens removes [3, 4]; evicting the rest removes [5, 6] then [1, 2], merged; a disabled cache records
    nothing; a check threshold of 0 still checks unmatched requests, -1 turns the check off; a store whose parent is the last stored page (computed afresh) is merged into it, and large token ids
    compare by value. Orders: with thresholds 8 / 2 the third request, sharing 2 tokens with an earlier queued one,
    waits; LPM sorts by matched length, FCFS when the cache is off or more than 128 wait; DFS weight visits
    heavier subtrees first and emits a node's own requests after its subtree."""
    import hashlib

    from kvexact.reference.peers import sglang as sg
    from kvexact.reference.peers.sglang_events import EventRecorder
    from kvexact.reference.peers.sglang_key import RadixKey
    from kvexact.reference.peers.sglang_sched import compute_prefix_matches, dfs_weight_order, lpm_order

    refused = _refused

    def h(*units: int) -> int:
        return int.from_bytes(hashlib.blake2b(repr(units).encode(), digest_size=8).digest(), "big", signed=True)

    k = RadixKey.of([1, 2, 3, 4, 5], "e", "s", limit=4)
    keys = [refused(lambda: RadixKey.of([1, True])), k.units, (k.extra_key, k.cache_salt, k.is_bigram),
            RadixKey.of([1, 2, 3]).bigram_view().units, RadixKey.of([1, 2]).bigram_view().bigram_view().units,
            refused(lambda: RadixKey.of([1, 2, 3])[5]), RadixKey.of([1, 2, 3])[-1].units,
            RadixKey.of([1, 2, 3, 4, 5]).page_aligned(2).units,
            RadixKey.of([1, 2, 3, 9]).match(RadixKey.of([1, 2, 3, 4]), 2), RadixKey.of([1, 2]).match(RadixKey.of([1, 2])),
            refused(lambda: RadixKey.of([1], "e").match(RadixKey.of([1]))),
            [RadixKey.of([7, 8], e, c).child_key(p) for e, c, p in ((None, None, 1), (None, None, 2), ("e", None, 1),
                                                                   (None, "s", 2), ("e", "s", 1))],
            repr(RadixKey.of(range(11), "e")), repr(RadixKey.of([3]))]
    c = sg.RadixCache(page_size=2, kv_events=True)
    events = [c.kv_events.take()]
    c.insert([1, 2, 3, 4])
    c.insert([1, 2, 5, 6])
    events.append(c.kv_events.take())
    c.evict(2)
    events.append(c.kv_events.take())
    c.evict(10)
    events.append(c.kv_events.take())
    chained = sg.RadixCache(page_size=2, kv_events=True)
    chained.kv_events.take()
    chained.insert([1, 2])
    chained.insert([1, 2, 3, 4])  # its parent hash is computed afresh: merged by value
    merged = chained.kv_events.take()
    big = [1000 + i for i in range(3)]  # token ids built at run time: equal values, distinct objects
    big_tree = sg.RadixCache()
    big_tree.insert(big)
    bigs = (RadixKey.of(big).match(RadixKey.of([999 + i + 1 for i in range(3)])),
            big_tree.match_prefix([2000 - 1000 + i for i in range(4)]).device_prefix_len)
    quiet = [sg.RadixCache(kv_events=False), sg.RadixCache(disable=True, kv_events=True)]
    for q in quiet:
        q.insert([1, 2])
    rec = EventRecorder(2)
    rec.record_store((), (1, 2, 3))  # pages [1, 2], [3]: block sizes 2 and 1 are not merged
    mixed = rec.take()

    def stored(hashes: list[int], parent: int | None, tokens: list[int], size: int = 2) -> dict[str, Any]:
        return {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent, "token_ids": tokens,
                "block_size": size, "lora_id": None, "medium": "GPU"}

    tree = sg.RadixCache()
    tree.insert([1, 2, 3, 4])
    queue = [sg.Req("a", [9, 9]), sg.Req("b", [1, 2, 3, 4, 5]), sg.Req("c", [1, 2, 7])]
    matches = compute_prefix_matches(tree, queue, check_threshold=8, deprioritize_threshold=2)
    thresholds = [compute_prefix_matches(tree, [sg.Req("a", [9, 9]), sg.Req("b", [9, 9, 1])], check_threshold=t,
                                         deprioritize_threshold=1).deprioritized for t in (0, -1)]
    fresh = [sg.Req("a", [9, 9]), sg.Req("b", [1, 2, 3, 4, 5]), sg.Req("c", [1, 2, 7])]
    orders = [lpm_order(tree, fresh), lpm_order(sg.RadixCache(disable=True), fresh),
              lpm_order(tree, [sg.Req(str(i), [1, 2, 3]) for i in range(129)])[:3]]
    dfs = sg.RadixCache()
    for tokens in ([1, 2, 3], [1, 2, 4], [5]):
        dfs.insert(tokens)
    node = {tuple(dfs.path_key_units(n)): n for n in dfs.nodes()}
    last = [node[(5,)], node[(1, 2, 4)], node[(1, 2, 3)], node[(1, 2, 3)], dfs.root_node]
    return [("keys: bad token, limit, namespace, bigrams, bigram of bigram, index 5, index -1, page-aligned, "
             "matches, namespace mismatch, child keys, reprs", keys,
             ["SGLangRejection.BAD_TOKEN: RadixKey token 1: token True is not an int", (1, 2, 3, 4), ("e", "s", False),
              ((1, 2), (2, 3)), ((1, 2),), "SGLangRejection.KEY_INDEX_OUT_OF_RANGE: index 5 of a key of length 3",
              (3,), (1, 2, 3, 4), 2, 2,
              "SGLangRejection.NAMESPACE_MISMATCH: ('e', None, False) against (None, None, False)",
              [7, (7, 8), ("e", 7), ((None, "s"), (7, 8)), (("e", "s"), 7)],
              "RadixKey(extra_key='e', token_ids=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]...)",
              "RadixKey(extra_key=None, token_ids=[3])"]),
            ("events: at creation; two inserts; evict 2; evict the rest", events,
             [[{"type": "AllBlocksCleared"}],
              [stored([h(1, 2), h(1, 2, 3, 4)], None, [1, 2, 3, 4]), stored([h(1, 2, 5, 6)], h(1, 2), [5, 6])],
              [{"type": "BlockRemoved", "block_hashes": [h(1, 2, 3, 4)], "medium": "GPU"}],
              [{"type": "BlockRemoved", "block_hashes": [h(1, 2, 5, 6), h(1, 2)], "medium": "GPU"}]]),
            ("events of [1, 2], then [1, 2, 3, 4] (pages of 2)", merged,
             [stored([h(1, 2), h(1, 2, 3, 4)], None, [1, 2, 3, 4])]),
            ("tokens 1000-1002 built twice at run time: key match, tree match of 1000-1003", bigs, (3, 3)),
            ("events off, cache disabled: recorded", [q.kv_events.take() for q in quiet], [[], []]),
            ("a 3-token node in pages of 2", mixed, [stored([h(1, 2)], None, [1, 2]),
                                                    stored([h(1, 2, 3)], h(1, 2), [3], 1)]),
            ("prefix matches (thresholds 8, 2): matched, deprioritized", (matches.num_matched_prefix_tokens,
                                                                         matches.deprioritized), ((0, 4, 2), {2})),
            ("[9, 9] then [9, 9, 1] (nothing cached), deprioritize at 1: deprioritized with check threshold 0, -1 "
             "(off)", thresholds, [{1}, set()]),
            ("LPM; disabled cache; 129 waiting (first three)", orders, [[1, 2, 0], [0, 1, 2], [0, 1, 2]]),
            ("DFS weight over [5], [1, 2, 4], [1, 2, 3] twice, the root", dfs_weight_order(dfs, last),
             [2, 3, 1, 0, 4]),
            ("DFS weight with the cache off", dfs_weight_order(sg.RadixCache(disable=True), last), [0, 1, 2, 3, 4])]


def sglang_adapters_pinned() -> Rows:
    """The SGLang adapters (their module docstrings; docs/peers/sglang.md §3, §5, §7), hand-traced on slots 1..n of a
    page-size-1 pool. Slot level (6 slots): a reserves 1, 2, 3; b's 4 are refused (3 left); inserting a's [1, 2, 3]
    moves its slots to the tree (no duplicates); a lock on [1, 2] splits the edge and protects 2 tokens (lock id
    1, delta -2); unlocking gives them back (+2), a second unlock of the same id drives the lock to -1 and moves
    nothing; the unlocked leaf [3] is evicted alone (its parent, at lock -1, is not queued in that pass) and the
    parent in the next. Request protocol (8 slots): r = [1, 2, 3] is admitted with nothing matched (private 1, 2,
    3), a checkpoint at 2 publishes [1, 2] (private 3), finishing publishes [3]; s = [1, 2, 3, 4] then matches 3
    and takes slot 4, its lock protecting 3 tokens; an unknown request is refused by name; an admission short of
    slots changes nothing. The index adapter: decode takes one slot at the end of the row, cancel caches nothing,
    the self-check passes; pages of 2 list slots page by page."""
    from kvexact.reference.index import IndexConfig
    from kvexact.reference.peers.sglang_adapter import MatchObservation, SGLangAdapter
    from kvexact.reference.peers.sglang_protocol import (
        SGLangIndexAdapter,
        faulty_unlocked_prefix,
        sglang_factory,
    )

    refused = _refused

    ad = SGLangAdapter(6)
    slot_level = [ad.reserve("a", 3), ad.reserve("b", 4)]
    ins = ad.insert([1, 2, 3], (1, 2, 3), "a")
    slot_level += [(ins.prefix_tokens, ins.duplicate_slot_ids), dict(ad.private), ad.release("a"), dict(ad.private)]
    lk = ad.lock([1, 2])
    slot_level += [(lk.lock_id, lk.matched_tokens, lk.delta), ad.partition().protected_tokens, ad.unlock(1),
                   ad.unlock(1), ad.cache.sizes()]
    first, second = ad.evict(5), ad.evict(5)  # the first pass stops at [3]: its parent is at lock -1
    slot_level += [(first.released_tokens, first.freed_slot_ids), (second.released_tokens, second.freed_slot_ids),
                   ad.partition().free_slot_ids, ad.match([1, 2])]
    actions = [r.action for r in ad.trace]
    pr = SGLangAdapter(8)
    proto = [pr.admit("r", [1, 2, 3]), dict(pr.private)]
    pr.checkpoint("r", 2)
    proto += [dict(pr.private), pr.project()["edges"]]
    pr.finish("r")
    proto += [dict(pr.private), pr.project()["edges"], pr.admit("s", [1, 2, 3, 4]), dict(pr.private),
              pr.cache.sizes(), pr.slot_tokens()]
    p = pr.partition()
    proto += [(p.tree_slot_ids, p.private_slot_ids, p.free_slot_ids, p.partition_holds, p.i1_holds),
              refused(lambda: pr.finish("x"))]
    short = SGLangAdapter(2)
    short_rows = (short.admit("a", [1, 2, 3]), short.cache.req_to_token_pool.available_size()
                  if short.cache.req_to_token_pool else None, short.partition().free_slot_ids, short.requests)
    ix = sglang_factory(IndexConfig(6))
    ix.admit("q", [1, 2])
    decoded = (ix.extend("q", 7), ix.slot_ids("q"), ix.sglang.requests["q"].tokens(), ix.free_slot_ids())
    ix.self_check()
    ix.cancel("q")
    cancelled = (ix.sglang.cache.sizes(), ix.free_slot_ids(), "q" in ix.sglang.requests, ix.sglang.private)
    full = SGLangIndexAdapter(IndexConfig(2))
    full.admit("q", [1, 2])
    paged = SGLangAdapter(8, page_size=2)
    paged.reserve("a", 4)
    pp = paged.partition()
    return [("slot level: reserves, insert (prefix, duplicates), private, release, private, lock, protected, "
             "unlocks, sizes, evictions, free slots, match [1, 2]", slot_level,
             [(1, 2, 3), None, (0, ()), {"a": []}, (), {}, (1, 2, -2), 2, 2, 0, (3, 3, 0), (1, ((3,),)),
              (2, ((1, 2),)), (1, 2, 3, 4, 5, 6), MatchObservation(0, ())]),
            ("slot level trace actions", actions,
             ["reserve", "insert", "release", "lock", "unlock", "unlock", "evict", "evict", "match"]),
            ("protocol: admit r, private; after checkpoint 2: private, edges; after finish: private, edges; admit s, "
             "private, sizes, slot tokens; partition; finish x", proto,
             [0, {"r": [1, 2, 3]}, {"r": [3]}, [[[1, 2], [1, 2], 1]], {}, [[[1, 2], [1, 2], 0], [[3], [3], 0]], 3,
              {"s": [4]}, (3, 0, 3), {1: ((None, None), (1,)), 2: ((None, None), (1, 2)), 3: ((None, None), (1, 2, 3))},
              ((1, 2, 3), (4,), (5, 6, 7, 8), True, True),
              "SGLangRejection.NO_REQUEST_ROW: request 'x' is not running"]),
            ("admission short of slots: result, free rows, free slots, requests", short_rows, (None, 64, (1, 2), {})),
            ("index adapter: decode 7 (accepted, row, tokens, free slots)", decoded,
             (True, [1, 2, 3], [1, 2, 7], (4, 5, 6))),
            ("after cancel: sizes, free slots, running, private", cancelled, ((0, 0, 0), (1, 2, 3, 4, 5, 6), False, {})),
            ("a decode with no slot left; names", (full.extend("q", 3), ix.name, faulty_unlocked_prefix(
                IndexConfig(2)).name), (False, "sglang-0.5.23", "faulty-unlocked-prefix")),
            ("pages of 2, 8 slots, a reserves 4: private, free, universe", (pp.private_slot_ids, pp.free_slot_ids,
                                                                           pp.pool_slot_ids),
             ((2, 3, 4, 5), (6, 7, 8, 9), (2, 3, 4, 5, 6, 7, 8, 9)))]


def sglang_protocol_pinned() -> Rows:
    """docs/peers/sglang.md §3 and §5 (0.5.23's request protocol), hand-traced (page size 1). ``match_kv_cache``
    matches the whole key but caps ``num_matched_prefix_tokens`` at input_len - 1 and at the logprob start.
    ``admit`` needs a request row and the unmatched slots: without a row, or short of slots (the row is given
    back), it returns False and changes nothing; admitted with nothing matched it locks the root (no size moves).
    ``checkpoint`` publishes the row's tokens up to a point, moves the lock to the new last node and, when output
    tokens follow the prompt, inserts the prompt part again one priority higher (splitting [3, 7] at the prompt's
    end); a disabled cache checkpoints nothing; a request without a row is refused by name. ``release_kv_cache``
    without a checkpoint frees the private rest and the row; I2 (available + evictable + protected + uncached =
    pool size) holds throughout. EAGLE keys are bigram views (values: each bigram's first token)."""
    from kvexact.reference.peers import sglang as sg
    from kvexact.reference.peers.sglang_pool import ReqToTokenPool, TokenToKVPoolAllocator

    refused = _refused

    c = sg.RadixCache()
    c.insert([1, 2, 3, 4], [11, 12, 13, 14])
    matched = []
    for tokens, start in (([1, 2, 3, 4], None), ([1, 2, 3, 4], 1), ([1, 2, 9], None), ([], None)):
        r = sg.Req("m", tokens, logprob_start_len=start)
        res = sg.match_kv_cache(c, r)
        matched.append((res.device_prefix_len, r.prefix_indices, r.cache_protected_len, r.num_matched_prefix_tokens))
    alloc = TokenToKVPoolAllocator(5)
    cache = sg.RadixCache(allocator=alloc, req_to_token_pool=ReqToTokenPool(2, 8))
    a = sg.Req("a", [1, 2, 3])
    admitted = [sg.admit(cache, alloc, a), a.req_pool_idx, a.owned_len, a.tree_lock.node is cache.root_node
                if a.tree_lock else None, cache.sizes()]
    big = sg.Req("big", [5] * 3)
    admitted += [sg.admit(cache, alloc, big), big.req_pool_idx, alloc.free_pages,
                 cache.req_to_token_pool.free_slots if cache.req_to_token_pool else None]
    sg.checkpoint(cache, a, 2)
    first = (cache.sizes(), a.cache_protected_len, a.cache_inserted_len, a.prefix_indices,
             a.tree_lock.node.key.units if a.tree_lock else None)
    a.output_ids.append(7)
    assert cache.req_to_token_pool is not None and a.req_pool_idx is not None
    cache.req_to_token_pool.write(a.req_pool_idx, 3, alloc.alloc(1) or [])
    a.owned_len = 4
    sg.checkpoint(cache, a, 4)
    second = ([(n.key.units, n.value, n.priority) for n in cache.nodes()], cache.sizes(), a.prefix_indices,
              a.tree_lock.node.key.units if a.tree_lock else None)
    accounting = sg.pool_accounting(cache, alloc, 5, [a])
    b = sg.Req("b", [1, 2, 3, 7, 8])
    sg.admit(cache, alloc, b)
    sg.release_kv_cache(cache, b, do_checkpoint=False)
    released = (alloc.free_pages, b.req_pool_idx, b.tree_lock, cache.sizes(),
                sg.pool_accounting(cache, alloc, 5, [a]).holds)
    one_alloc = TokenToKVPoolAllocator(4)
    one = sg.RadixCache(allocator=one_alloc, req_to_token_pool=ReqToTokenPool(1, 4))
    solo = sg.Req("solo", [5])
    sg.admit(one, one_alloc, solo)
    assert one.req_to_token_pool is not None and solo.req_pool_idx is not None
    solo.output_ids.append(6)
    one.req_to_token_pool.write(solo.req_pool_idx, 1, one_alloc.alloc(1) or [])
    solo.owned_len = 2
    sg.checkpoint(one, solo, 2)
    single = [(n.key.units, n.value, n.priority) for n in one.nodes()]
    off = sg.RadixCache(disable=True, req_to_token_pool=ReqToTokenPool(1, 4))
    z = sg.Req("z", [1], req_pool_idx=1, owned_len=1)
    sg.checkpoint(off, z, 1)
    eagle = sg.RadixCache(is_eagle=True)
    eagle.insert([1, 2, 3])
    return [("match of [1, 2, 3, 4], with logprob start 1, [1, 2, 9], []: matched, prefix, protected, counted",
             matched, [(4, (11, 12, 13, 14), 4, 3), (4, (11, 12, 13, 14), 4, 1), (2, (11, 12), 2, 2), (0, (), 0, 0)]),
            ("admit a [1, 2, 3] (5 slots, 2 rows): admitted, row, owned, root locked, sizes; then 3 more slots for "
             "big: admitted, row, free slots, free rows", admitted,
             [True, 1, 3, True, (0, 0, 0), False, None, [4, 5], [2]]),
            ("checkpoint a at 2: sizes, protected, inserted, prefix, locked node", first,
             ((2, 0, 2), 2, 2, (1, 2), (1, 2))),
            ("a decodes 7 (slot 4), checkpoint at 4: edges (units, slots, priority), sizes, prefix, locked node",
             second, ([((1, 2), (1, 2), 1), ((3,), (3,), 1), ((7,), (4,), 0)], (4, 0, 4), (1, 2, 3, 4), (7,))),
            ("a 1-token prompt [5] with output 6, checkpoint at 2: edges (units, slots, priority)", single,
             [((5,), (1,), 1), ((6,), (2,), 0)]),
            ("I2 terms with a running: available, evictable, protected, session, uncached, pool; holds",
             (accounting.available_slots, accounting.evictable_slots, accounting.protected_slots,
              accounting.session_held_slots, accounting.uncached_slots, accounting.pool_slots, accounting.holds),
             (1, 0, 4, 0, 0, 5, True)),
            ("b [1, 2, 3, 7, 8] admitted (slot 5) and released without checkpoint: free slots, row, lock, sizes, I2",
             released, ([5], None, None, (4, 0, 4), True)),
            ("disabled cache checkpoint: row untouched, protected", (z.cache_protected_len, off.sizes()),
             (0, (0, 0, 0))),
            ("checkpoint of a request without a row", refused(lambda: sg.checkpoint(c, sg.Req("q", [1]), 1)),
             "SGLangRejection.NO_REQUEST_ROW: request q"),
            ("EAGLE: edges, match of [1, 2, 3], cache key of [1, 2, 3, 4]",
             ([(n.key.units, n.value) for n in eagle.nodes()], eagle.match_prefix([1, 2, 3]).device_prefix_len,
              eagle.cache_key([1, 2, 3, 4]).units),
             ([(((1, 2), (2, 3)), (1, 2))], 2, ((1, 2), (2, 3), (3, 4))))]


def peer_odds_and_ends() -> Rows:
    """The peers' small contracts no other case reaches (their docstrings; docs/peers/vllm.md §2, §5; docs/peers/sglang.md
    §1-§5), hand-derived. vLLM hashing: a block that starts past an item that ended before it skips that item and
    keys the next overlapping one ([6, 9): b at -4, scan index 2; an item ending exactly at the block's start is
    skipped too); a block at or after the last item's end has no
    mm keys and keeps its scan index. The manager: ``cache_blocks`` of a request without blocks, or with caching
    off, is the same state; ``evict_blocks`` drops identities only; usage counts usable blocks; a queued block
    with a reference is refused when popped (BLOCK_IN_USE). The adapter: an empty decode step allocates nothing;
    its observables. SGLang: nodes order by last use and print their id, key and lock; ``touch_prefix`` returns
    the matched node; the sizes' accessors; a release of chosen slots frees exactly those; the index adapter's
    evict lists the freed segments and its self-check names a broken partition; a paged allocator short of
    pages returns None, and a paged free inside a group waits for the group's end."""
    import attrs

    from kvexact.reference.adapters import AdapterConfig
    from kvexact.reference.index import IndexConfig
    from kvexact.reference.peers import sglang as sg
    from kvexact.reference.peers import vllm_hashing as vh
    from kvexact.reference.peers import vllm_pool as vp
    from kvexact.reference.peers.sglang_adapter import SGLangAdapter
    from kvexact.reference.peers.sglang_pool import PagedTokenToKVPoolAllocator
    from kvexact.reference.peers.sglang_protocol import sglang_factory
    from kvexact.reference.peers.vllm import VllmConfig, VllmKVCacheManager
    from kvexact.reference.peers.vllm_adapter import VllmAdapter
    from kvexact.reference.peers.vllm_protocol import VllmProtocolAdapter, vllm_factory
    from kvexact.reference.rejections import Rejected

    def refused(call: Any) -> str | None:
        try:
            call()
            return None
        except (Rejected, AssertionError) as exc:
            return str(exc)

    mm = vh.RequestExtras(mm=(vh.MMFeature("a", 1, 2), vh.MMFeature("b", 2, 5), vh.MMFeature("c", 9, 1)))
    scans = [vh.block_extra_keys(mm, 6, 9, 0), vh.block_extra_keys(mm, 3, 6, 0), vh.block_extra_keys(mm, 12, 15, 3),
             vh.block_extra_keys(mm, 10, 13, 2)]
    m = VllmKVCacheManager.create(VllmConfig(6, 2))
    r = m.make_request("r", [1, 2, 3, 4, 5])
    m2, _ = m.allocate_slots(r, 5, delay_cache_blocks=True)
    unchanged = [m.cache_blocks(r, 4) is m,
                 VllmKVCacheManager.create(VllmConfig(6, 2, enable_caching=False)).cache_blocks(r, 4).pool.cached]
    cached = m2.cache_blocks(r, 4)
    evicted = cached.evict_blocks([1, 5])  # block 1 cached, block 5 never was
    manager_rows = (unchanged[0], len(unchanged[1]), len(cached.pool.cached), len(evicted.pool.cached),
                    evicted.pool.ref_cnt == cached.pool.ref_cnt, evicted.pool.free == cached.pool.free,
                    cached.usage(), m.usage())
    in_use = attrs.evolve(vp.new_pool(3), ref_cnt=(0, 1, 0))
    ad = VllmAdapter(5, 2)
    ad.allocate("a", [1, 2, 3])
    adapter_rows = (ad.append("a", []), ad.tokens_of("a"), ad.blocks_of("a"), ad.ref_count(1), ad.ref_count(3),
                    ad.num_free_blocks(), ad.cached_block_ids(), len(ad.trace))
    c = sg.RadixCache()
    c.insert([1, 2])
    c.insert([3])
    older, newer = c.nodes()
    order = (older < newer, newer < older)  # made at 3 and 5 (the root took 1, the inserts 2 and 4)
    touched = c.touch_prefix([1, 2, 3])
    sg_rows = (*order, repr(older), touched is older, older.last_access_time, newer < older, c.evictable_size(),
               c.protected_size())
    sa = SGLangAdapter(6)
    sa.reserve("a", 3)
    chosen = (sa.release("a", [2, 9]), dict(sa.private), sa.allocator.free_pages, sa.trace[-1].as_dict()["action"],
              sa.trace[-1].as_dict()["params"])
    ix = sglang_factory(IndexConfig(4))
    ix.admit("q", [1, 2])
    ix.finish("q")
    freed = list(ix.evict(5))
    ix.sglang.private["ghost"] = [1]
    broken = refused(ix.self_check)
    paged = PagedTokenToKVPoolAllocator(4, 2)
    short = (paged.alloc(6), paged.alloc(4), paged.alloc(2))
    paged.free_group_begin()
    paged.free([2, 3])
    waiting = list(paged.free_pages)
    paged.free_group_end()
    config = AdapterConfig(block_tokens=2, num_groups=1, blocks_per_group=2, row_bytes=(8,))
    return [("mm keys and scan index of blocks [6, 9) from 0, [3, 6) from 0 (a ends at 3), [12, 15) from 3, "
             "[10, 13) from 2", scans, [((("mm", "b", -4),), 2), ((("mm", "b", -1),), 1), (None, 3), (None, 2)]),
            ("manager: cache_blocks unchanged, with caching off (map size); after a delayed allocation cached, "
             "evicted (map sizes), refs and queue kept; usage with 3 of 5 held, fresh", manager_rows,
             (True, 0, 2, 1, True, True, 3 / 5, 0.0)),
            ("a queued block with a reference popped", refused(lambda: vp.get_new_blocks(in_use, 1)),
             "PoolRejection.BLOCK_IN_USE: block 1 popped with ref_cnt 1"),
            ("vLLM adapter: empty decode, tokens, blocks, refs of 1 and 3, free blocks, cached, trace length",
             adapter_rows, ((), (1, 2, 3), (1, 2), 1, 0, 2, frozenset({1}), 3)),
            ("SGLang nodes: older < newer, newer < older, repr, touched node, its last use, newer < touched, "
             "evictable, protected",
             sg_rows, (True, False, "TreeNode(id=1, key=[1, 2], lock_ref=0)", True, 6, True, 3, 0)),
            ("release of chosen slots 2, 9: released, private, free slots, trace action and params", chosen,
             ((2, 9), {"a": [1, 3]}, [4, 5, 6, 2, 9], "release", {"request_id": "a", "slot_ids": [2, 9]})),
            ("index adapter: evict of a finished [1, 2]; self-check with a slot both free and private",
             (freed, broken is not None and broken.startswith("SGLang profile: slot partition or I1 broken")),
             ([(1, 2)], True)),
            ("paged (4 slots, pages of 2): alloc 6, 4, 2; free list inside a group, after", (short, waiting,
                                                                                            paged.free_pages),
             ((None, [2, 3, 4, 5], None), [], [1])),
            ("factories: the profile's engine has one spare block and reports KV events", (
                type(vllm_factory(config)) is VllmProtocolAdapter,
                vllm_factory(config).managers[0].config == VllmConfig(3, 2, enable_kv_cache_events=True)), (True, True))]


CASES = {"sglang tree checks": sglang_tree_checks, "vllm hit arithmetic": vllm_hit_arithmetic,
         "stream workloads": stream_workloads, "adapter transactions": adapter_transactions,
         "scopes and refusals": scopes_and_refusals,
         "pinned defaults and refusals": pinned_defaults_and_refusals,
         "vllm hybrid finders": vllm_hybrid_finders,
         "vllm hashing pinned": vllm_hashing_pinned,
         "vllm pool pinned": vllm_pool_pinned,
         "sglang tree pinned": sglang_tree_pinned,
         "vllm adapters pinned": vllm_adapters_pinned,
         "stream log contract": stream_log_contract,
         "vllm manager scenarios": vllm_manager_scenarios,
         "sglang pools pinned": sglang_pools_pinned,
         "sglang keys events orders": sglang_keys_events_orders,
         "sglang adapters pinned": sglang_adapters_pinned,
         "sglang protocol pinned": sglang_protocol_pinned,
         "peer odds and ends": peer_odds_and_ends}
