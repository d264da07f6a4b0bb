"""Core-module cases of the golden tests (registered in :mod:`golden`, issue
#25): the VMM lab's unmap refusal, namespace succession, the prefix cache's partial-tail admission, the allocator's
state digest, the ledgers' contiguous fit and the allocator's predecessor and write-frontier checks; then (i25l)
whole-contract cases that pin each core module's observable behaviour (every branch, exact values, refusal details,
defaults and boundaries) so that families of mutants die: shared-prefix chunk-first metadata and merges, prefix
lookups, receipts and partial tails, revocation walks against NamespaceRevocation.tla, namespaces, keys, sessions,
declared modules and their markup, and the VMM's geometry, refusals and lifecycle.

Invariant: each case returns ``(what, got, expected)`` rows whose expected values come from the seed (``0x0..``
sections), from the documented contract quoted in the docstring, or from the arithmetic written beside them, never
from the reference's own output; a row that differs (or a case that raises) fails its golden test by name.
"""

from __future__ import annotations

from typing import Any

Rows = list[tuple[str, Any, Any]]


def _refusal(trigger: Any) -> tuple[Any, str]:
    """The rejection ``trigger`` raises and its detail text; ``(None, "")`` when it is accepted."""
    from kvexact.reference.rejections import Rejected

    try:
        trigger()
    except Rejected as exc:
        return exc.reason, exc.detail
    return None, ""


def _refusal_or_none(trigger: Any) -> tuple[Any, str | None]:
    """As :func:`_refusal`, with ``(None, None)`` when ``trigger`` is accepted."""
    reason, text = _refusal(trigger)
    return (reason, text) if reason is not None else (None, None)


def _outcome(trigger: Any) -> tuple[Any, Any]:
    """The rejection ``trigger`` raises and its detail text, or ``(None, result)`` when it is accepted."""
    from kvexact.reference.rejections import Rejected

    try:
        out = trigger()
    except Rejected as exc:
        return exc.reason, exc.detail
    return None, out


def vmm_unmap_live_rows() -> Rows:
    """0x06F/0x06I: unmapping a live request's highest page is refused (UNMAP_LIVE_ROWS) and the refusal names the
    page and the highest valid row it backs. On the lab's seed geometry (4-row pages) E holds rows 0..4 in pages 0
    and 1: page 1 backs rows 4..7, so its highest live row is 5 - 1 = 4; a 3-row request (rows 0..2, one page)
    names row 2. Once E is freed (its mappings retained) the same unmap is allowed."""
    from kvexact.reference import vmm
    from kvexact.reference.labs import vmm as lab

    out: Rows = []
    for rows, page, last in ((5, 1, 4), (3, 0, 2)):
        s = vmm.VmmState.initial(lab.SEED_CONFIG)
        s, _ = vmm.reserve_virtual(s)
        s, _ = vmm.create_handles(s)
        s, _ = vmm.alloc_reqid(s, 1, "E")
        s, _ = vmm.step_sync(s, 1, rows)
        s, _ = vmm.write_rows(s, 1, 1, 0, rows)
        reason, detail = _refusal(lambda s=s: vmm.unmap_bundle(s, 1))
        out.append((f"E with {rows} rows, unmap its top page: refused as; names page {page}, row {last}",
                    (reason, f"page {page} backs row {last}" in detail), (vmm.VmmRejection.UNMAP_LIVE_ROWS, True)))
        freed, _ = vmm.free_reqid(s, 1)
        out.append((f"E ({rows} rows) freed, mappings kept: its top page unmapped, refused as",
                    _refusal(lambda f=freed: vmm.unmap_bundle(f, 1))[0], None))
    return out


def namespace_succession() -> Rows:
    """0x01A/0x07F: invalidation retires the current generation and makes generation + 1 current; the namespace id
    is a value, so an id equal to the registered one but built at run time (another string object, as one read off
    a request is) names the same namespace. The registry's invariant (reference/namespaces.py: every retired
    generation is below its id's current one) is refused by name (RETIRED_GENERATION) when a registry would list
    its current generation as retired."""
    from kvexact.reference import namespaces as nsm
    from kvexact.reference.rejections import rejection_of

    def fresh(*parts: str) -> str:
        return "".join(parts)  # built at run time: equal, another object

    registered, asked = fresh("tenant-", "ns"), fresh("tenant-n", "s")
    ns = nsm.CacheIsolationNamespace("prod", "t1", registered, 0, "salt", 0)
    other = nsm.CacheIsolationNamespace("prod", "t2", "other", 3, None, 0)
    reg = nsm.create_namespace(nsm.create_namespace(nsm.NamespaceRegistry(), ns), other)
    after, receipt = nsm.invalidate(reg, asked, nsm.InvalidationReason.WEIGHTS)
    twice, _ = nsm.invalidate(after, fresh("tenant-", "n", "s"), nsm.InvalidationReason.ISOLATION_RESET)
    R = nsm.NamespaceRejection
    return [("the two ids: equal, the same object", (registered == asked, registered is asked), (True, False)),
            ("after one invalidation: current generation, model generation, retired scopes, other's generation",
             (after.get(registered).generation, after.get(registered).model_generation, sorted(after.retired),
              after.get("other").generation), (1, 1, [("tenant-ns", 0)], 3)),
            ("the receipt: retired generation, successor's generation",
             (receipt.retired.generation, receipt.successor.generation), (0, 1)),
            ("after one invalidation, lookups at generation 0, 1, 2 refused as",
             [rejection_of(lambda g=g: nsm.authorize_lookup(after, "t1", asked, g)) for g in (0, 1, 2)],
             [R.RETIRED_GENERATION, None, R.FUTURE_GENERATION]),
            ("after a second (isolation reset): current generation, model generation, retired scopes",
             (twice.get(asked).generation, twice.get(asked).model_generation, sorted(twice.retired)),
             (2, 1, [("tenant-ns", 0), ("tenant-ns", 1)])),
            ("a registry with generation 0 current and retired, with generation 1 retired, refused as",
             [rejection_of(lambda r=r: nsm.NamespaceRegistry(current=(ns,), retired=frozenset({("tenant-ns", r)})))
              for r in (0, 1)], [R.RETIRED_GENERATION] * 2),
            ("creating generation 0 in a registry that retired it refused as",
             rejection_of(lambda: nsm.create_namespace(nsm.NamespaceRegistry(retired=frozenset({("tenant-ns", 0)})),
                                                       ns)), R.RETIRED_GENERATION)]


def prefix_partial_admission() -> Rows:
    """0x07D: a partial-tail hit copies the matched tail's valid rows into the request's own block; the rows copied
    must be the request's tokens at those positions. Admitting a receipt looked up for the prompt s[:25] (a hit of
    16 full-block rows and 8 copied rows, P = 16) with tokens whose row 20 differs is not the looked-up prompt:
    refused as COLLISION_WITNESS_MISMATCH (the secondary witness: the source block holds other tokens), and the
    allocator is unchanged. Tokens that differ only past the copied rows (row 24, recomputed) are admitted."""
    from kvexact.reference.labs import prefix as px_lab
    from kvexact.reference.prefix import PrefixPolicy, PrefixRejection, admit
    from kvexact.reference.rejections import rejection_of

    s = list(px_lab.STREAM)
    tail = PrefixPolicy(partial_tail=True)
    cache = px_lab.cache_with(s[:33], tail)
    receipt = cache.lookup(px_lab.request("B", s[:25]), tail)
    before = cache.alloc.digest()
    changed = s[:25]
    changed[20] = s[20] + 1  # a copied row (rows 16..23)
    refused = rejection_of(lambda: admit(cache, receipt, changed, tail))
    unchanged = cache.alloc.digest() == before
    late = s[:25]
    late[24] = s[24] + 1  # past the copied rows: recomputed
    rec, _ = admit(cache, receipt, late, tail)
    return [("receipt for B's 25 tokens: hit, copied rows", (receipt.runtime_hit_tokens,
                                                              receipt.copy_valid_partial_rows), (24, 8)),
            ("admitted with row 20 changed: refused as; allocator unchanged", (refused, unchanged),
             (PrefixRejection.COLLISION_WITNESS_MISMATCH, True)),
            ("admitted with row 24 changed: context, B's tokens", (rec.context_tokens, cache.alloc.tokens_of("B")),
             (25, tuple(late)))]


def allocator_state_digest() -> Rows:
    """docs/design.md: state digests are SHA-256 over a canonical encoding, so different allocator states have different
    digests. r grows from 1 to 258 tokens (16-token blocks): 258 different states, 258 different digests (a digest
    folded into fewer than 258 values would, by pigeonhole, repeat one); each equals the digest recomputed from
    the state."""
    from kvexact.reference.allocator import Allocator
    from kvexact.reference.pool import GroupConfig

    alloc = Allocator([GroupConfig(0, 0, 16, 8)], [list(range(1, 21))])
    alloc.allocate("r", (0,))
    digests = [alloc.digest()]
    for t in range(1, 258):
        alloc.append("r", t)
        digests.append(alloc.digest())
    return [("r at 1..258 tokens: states, distinct digests", (alloc.request("r").context_tokens, len(set(digests))),
             (258, 258)),
            ("the running digest is the one recomputed from the state", alloc.digest(),
             alloc.journal.recompute_digest()),
            ("a digest is 64 hex digits (SHA-256)", len(alloc.digest()), 64)]


def contiguous_fit() -> Rows:
    """0x02F: a contiguous candidate fits only inside one free extent. The seed's arena has free extents [1 MiB,
    2 MiB]: its 2.5 MiB candidate is rejected though 3 MiB are free; so a candidate fits an extent of its size or a
    larger one: 2 MiB and 1.5 MiB fit (the 2 MiB extent), in either order of the extents, 3 MiB does not."""
    from kvexact.reference.ledgers import contiguous_fit as fit

    mib = 1 << 20
    free = [1 * mib, 2 * mib]
    return [("the seed's 2.5 MiB candidate into [1, 2] MiB", fit(free, 5 * mib // 2), False),
            ("2 MiB, 1.5 MiB, 3 MiB into [1, 2] MiB; 1.5 MiB into [2, 1] MiB, into []",
             [fit(free, 2 * mib), fit(free, 3 * mib // 2), fit(free, 3 * mib), fit(free[::-1], 3 * mib // 2),
              fit([], 3 * mib // 2)], [True, True, False, True, False])]


def allocator_predecessors() -> Rows:
    """0x05C step 1 and 0x05G. A request id with no committed record has the empty predecessor (generation 1,
    table version 0), so an append to it expecting table version 0 (or none) is checked against that and goes
    ahead, while one expecting version 1 is UNKNOWN_REQUEST ('no committed request with this id'). That name is
    for appends only: an allocate is how a request with no committed record is made, so begin of an allocate
    is never refused as UNKNOWN_REQUEST, whatever table version it carries."""
    from kvexact.reference.allocator import Allocator, AllocRejection
    from kvexact.reference.pool import GroupConfig
    from kvexact.reference.rejections import rejection_of

    def made() -> Allocator:
        return Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3, 4]])

    out: Rows = []
    for version, expected in ((0, (None, 1, 1)), (None, (None, 1, 1)), (1, (AllocRejection.UNKNOWN_REQUEST, 0, 0))):
        alloc = made()
        refused = rejection_of(lambda a=alloc, v=version: a.append("n", 7, expected_table_version=v))
        rec = alloc.current_or_empty("n")
        out.append((f"append to never-admitted n expecting table version {version}: refused as; context, version",
                    (refused, rec.context_tokens, rec.table_version), expected))
    begun = []
    for version in (1, 3):
        alloc = made()
        begun.append(rejection_of(lambda a=alloc, v=version: a.begin("allocate", "n", ("alloc",), (7,),
                                                                      expected_table_version=v)))
    out.append(("begin of an allocate of n carrying table version 1, 3: refused as UNKNOWN_REQUEST",
                [r is AllocRejection.UNKNOWN_REQUEST for r in begun], [False, False]))
    return out


def allocator_write_frontier() -> Rows:
    """0x04E/0x05G: a write starts at the block's valid frontier and ends inside the block: offset + rows <= P,
    else WRITE_OFFSET_MISMATCH and the block is unchanged. With 2-token blocks: r's unique tail holds 1 row, so
    2 rows at offset 1 (1 + 2 = 3 > 2) are refused and 1 row is written; a reserved new block takes at most 2 rows
    at offset 0 (3 refused, 2 written)."""
    from kvexact.reference.allocator import Allocator, AllocRejection
    from kvexact.reference.pool import GroupConfig
    from kvexact.reference.rejections import rejection_of

    M = AllocRejection.WRITE_OFFSET_MISMATCH
    alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3, 4]])
    alloc.allocate("r", (1,))
    txn = alloc.begin("append", "r", ("unique",), (5,))
    tail = alloc.request("r").tables[0][-1]
    unique = [rejection_of(lambda: alloc.write_rows(txn, 0, tail, 1, (5, 6))),
              alloc.pools[0].blocks[tail.block_id].rows,
              rejection_of(lambda: alloc.write_rows(txn, 0, tail, 1, (5,))),
              alloc.pools[0].blocks[tail.block_id].rows]
    fresh = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3, 4]])
    fresh.allocate("r", (1, 2))
    txn = fresh.begin("append", "r", ("new",), (5,))
    new = fresh.append_reserve(txn, 0)
    boundary = [rejection_of(lambda: fresh.write_rows(txn, 0, new, 0, (5, 6, 7))),
                fresh.pools[0].blocks[new.block_id].rows,
                rejection_of(lambda: fresh.write_rows(txn, 0, new, 0, (5, 6))),
                fresh.pools[0].blocks[new.block_id].rows]
    return [("unique tail of 1 row: 2 rows at offset 1 refused as, rows; 1 row, rows", unique, [M, (1,), None, (1, 5)]),
            ("reserved new block: 3 rows at offset 0 refused as, rows; 2 rows, rows", boundary,
             [M, (), None, (5, 6)])]


def shared_prefix_chunk_first() -> Rows:
    """0x0BD/0x0BE: chunk-first metadata keeps the chunks whose coverage exceeds the threshold tau, in tree order,
    with begins, ends and offsets (each offset the running sum of the coverages before it). The seed's partial rows
    are coverage(C0) + coverage(C1) + coverage(C2) = 4 + 2 + 2 = 8, so its tau is 1, the default of every entry
    point (bind_chunk_first, chunk_attention, ledger, the metadata itself). On 0x0BB's tree (coverages 4, 2, 2, 1,
    1, 1, 1): tau 0 keeps all 7 (4 + 2 + 2 + 4 x 1 = 12 rows), tau 2 and 3 keep C0 (4), tau 4 none. A partial row
    is the state of the chunk for that sequence, at offset + seq - begin; a sequence outside the chunk's range is
    refused by name, as is metadata of another snapshot, sequence order or threshold."""
    import attrs

    from kvexact.reference import shared_prefix as sp
    from kvexact.reference.labs import shared_prefix as sp_lab
    from kvexact.reference.rejections import rejection_of

    R = sp.SharedPrefixRejection
    tree = sp_lab.SEED_TREE
    fx = sp_lab.seed_fixture()

    def shape(m: sp.ChunkFirstMetadata) -> tuple[Any, ...]:
        return m.chunks, m.begins, m.ends, m.offsets, m.partial_rows, m.threshold

    detail = _refusal

    out, partial = sp.chunk_attention(fx)
    meta = sp.bind_chunk_first(fx)
    mono = sp.monolithic(fx)
    want_rows = [sp.partition_state(fx.q[s], fx.k[c], fx.v[c], fx.scale, fx.d_v)
                 for c, b, e in ((0, 0, 4), (1, 0, 2), (2, 2, 4)) for s in range(b, e)]
    reordered = attrs.evolve(fx, q=(fx.q[1], fx.q[0], *fx.q[2:]), seq_ids=(1, 0, 2, 3))
    changed = attrs.evolve(fx, k=(((fx.k[0][0][0] + 1.0, fx.k[0][0][1]), *fx.k[0][1:]), *fx.k[1:]))
    requeried = attrs.evolve(fx, q=(fx.q[1], *fx.q[1:]))
    led = sp.ledger(tree, 4, 2, 3)
    C = sp.TreeChunk
    odd = sp.draw_fixture([C("r", 1, 0, 3), C("a", 1, 0, 2), C("b", 1, 2, 3)], 3, 2, 2, seed=1)  # offsets 0, 3
    odd_meta = sp.bind_chunk_first(odd)
    odd_partial = sp.chunk_attention(odd)[1]
    return [("metadata at tau 0, 1, 2, 3, 4",
             [shape(sp.chunk_first_metadata(tree, t)) for t in (0, 1, 2, 3, 4)],
             [((0, 1, 2, 3, 4, 5, 6), (0, 0, 2, 0, 1, 2, 3), (4, 2, 4, 1, 2, 3, 4), (0, 4, 6, 8, 9, 10, 11), 12, 0),
              ((0, 1, 2), (0, 0, 2), (4, 2, 4), (0, 4, 6), 8, 1), ((0,), (0,), (4,), (0,), 4, 2),
              ((0,), (0,), (4,), (0,), 4, 3), ((), (), (), (), 0, 4)]),
            ("defaults: bound metadata, a bare metadata's tau, ledger partial rows, bytes",
             (shape(meta), sp.ChunkFirstMetadata((), (), (), (), 0).threshold, led.partial_rows,
              led.partial_buffer_bytes), (((0, 1, 2), (0, 0, 2), (4, 2, 4), (0, 4, 6), 8, 1), 1, 8, 112)),
            ("bound metadata: digest, sequence ids", (meta.digest == sp.snapshot_digest(fx), meta.seq_ids),
             (True, (0, 1, 2, 3))),
            ("chunk_attention at the default tau: partial buffer = C0's 4, C1's 2, C2's 2 rows", partial,
             want_rows),
            ("outputs at the default tau, with the default metadata passed, at tau 0 and 4: within 2.3e-16",
             [sp.max_abs_difference(mono, o) <= 2.3e-16 for o in
              (out, sp.chunk_attention(fx, meta=meta)[0], sp.chunk_attention(fx, 0)[0],
               sp.chunk_attention(fx, 4)[0])], [True] * 4),
            ("partial buffer sizes at tau 0, 2, 4", [len(sp.chunk_attention(fx, t)[1]) for t in (0, 2, 4)],
             [12, 4, 0]),
            ("partial rows read: C1 for 0, 1; C2 for 2, 3",
             [sp.partial_row(partial, meta, c, s) for c, s in ((1, 0), (1, 1), (2, 2), (2, 3))],
             [want_rows[4], want_rows[5], want_rows[6], want_rows[7]]),
            ("a tree [0, 3) > [0, 2), [2, 3): offsets; chunk a's rows for 0, 1 (at 3 + 0, 3 + 1)",
             (odd_meta.offsets, [sp.partial_row(odd_partial, odd_meta, 1, q) for q in (0, 1)]),
             ((0, 3), [sp.partition_state(odd.q[q], odd.k[1], odd.v[1], odd.scale, 2) for q in (0, 1)])),
            ("partial rows out of coverage: C1 for 2, C2 for 1, C2 for 4",
             [detail(lambda c=c, s=s: sp.partial_row(partial, meta, c, s)) for c, s in ((1, 2), (2, 1), (2, 4))],
             [(R.PARTIAL_ROW_OUT_OF_COVERAGE, "chunk 1 covers [0, 2), not 2"),
              (R.PARTIAL_ROW_OUT_OF_COVERAGE, "chunk 2 covers [2, 4), not 1"),
              (R.PARTIAL_ROW_OUT_OF_COVERAGE, "chunk 2 covers [2, 4), not 4")]),
            ("default metadata used at tau 2; tau-2 metadata used at the default",
             [detail(lambda: sp.chunk_attention(fx, 2, meta=meta)),
              detail(lambda: sp.chunk_attention(fx, meta=sp.bind_chunk_first(fx, 2)))],
             [(R.THRESHOLD_MISMATCH, "built at 1, used at 2"), (R.THRESHOLD_MISMATCH, "built at 2, used at 1")]),
            ("default metadata on a reordered batch, on changed K",
             [detail(lambda: sp.chunk_attention(reordered, meta=meta)),
              detail(lambda: sp.chunk_attention(changed, meta=meta))],
             [(R.SEQUENCE_ORDER_CHANGED, "(0, 1, 2, 3) became (1, 0, 2, 3)"),
              (R.STALE_SNAPSHOT, "metadata digest differs from the tree's")]),
            ("the digest covers K, not the queries: changed K, changed queries keep it",
             (sp.snapshot_digest(changed) == meta.digest, sp.snapshot_digest(requeried) == meta.digest),
             (False, True)),
            ("the snapshot's scale passed, 0.5 passed (d_qk 2: 1/sqrt(2))",
             [rejection_of(lambda: sp.chunk_attention(fx, scale=fx.scale)),
              detail(lambda: sp.chunk_attention(fx, scale=0.5))],
             [None, (R.SCALE_MISMATCH, "scale 0.5 != 1/sqrt(2)")])]


def prefix_lookup_receipts() -> Rows:
    """0x07A/0x07E/0x07F on the fixture cache (P = 16, 64 KiB bundle rows) holding A's 33 tokens (2 full blocks
    published, publication generation 1). A logits-producing lookup caps at S_prompt - 1: 40 tokens hit
    16 floor(min(32, 32, 39) / 16) = 32, recompute 8 in ceil(8 / 16) = 1 new bundle (16 x 64 KiB = 1 MiB),
    8 x 64 KiB useful; 32 tokens hit 16 floor(31 / 16) = 16 (32 without logits: 0 recomputed, 0 bundles). A given
    S_sem lies in 0..S_prompt (both ends accepted, -1 and S_prompt + 1 refused by name with both numbers); an
    empty prompt is refused only with logits; a lookup refused before the walk (manifest, block size) makes no
    probe; a walk probes each indexed block once. S_sem (none given) is the indexed rows plus the common prefix
    with an indexed child of the last matched block: 1 for B's 1 token (A's block 0 starts with it)."""
    import attrs

    from kvexact.reference.keys import KeyRejection
    from kvexact.reference.labs import prefix as px_lab
    from kvexact.reference.prefix import PrefixPolicy, PrefixRejection

    R = PrefixRejection
    kib = 1024
    s = list(px_lab.STREAM)

    detail = _refusal

    def fields(r: Any) -> tuple[Any, ...]:
        return (r.prompt_tokens, r.semantic_match_tokens, r.indexed_tokens, r.cap_tokens, r.runtime_hit_tokens,
                r.prompt_rows_recomputed, len(r.matched_group_handles), len(r.matched_keys), r.new_block_bundles,
                r.new_capacity_bytes, r.useful_recompute_bytes, r.copy_valid_partial_rows, r.logits_path)

    cache = px_lab.cache_with(s[:33])
    gen = cache.publication_generation
    probes0 = cache.probes
    forty = cache.lookup(px_lab.request("B", s[:40]))
    probes1 = cache.probes
    refused = [detail(lambda: cache.lookup(attrs.evolve(px_lab.request("B", s[:40]), manifest_sha256="1" * 64))),
               detail(lambda: cache.lookup(px_lab.request("B", s[:40]), PrefixPolicy(block_tokens=8))),
               detail(lambda: cache.lookup(px_lab.request("B", s[:40]), PrefixPolicy(block_tokens=0)))[0],
               detail(lambda: cache.lookup(px_lab.request("B", [])))]
    probes2 = cache.probes
    sems = [detail(lambda t=t: cache.lookup(px_lab.request("B", s[:40], semantic_match_tokens=t)))
            for t in (-1, 41)]
    sem_hits = [cache.lookup(px_lab.request("B", s[:40], semantic_match_tokens=t)).runtime_hit_tokens
                for t in (0, 15, 16, 40)]
    kept = attrs.evolve(cache.lookup(px_lab.request("B", s[:40])), receipt_sha256="")
    same = PrefixPolicy(collision_witness=True, hash_fn=lambda _payload: bytes(range(32)))  # every block collides
    collided = detail(lambda: px_lab.cache_with(s[:33], same).lookup(px_lab.request("B", s[1:20]), same))
    return [("publication generation, probes of a 2-block walk", (gen, probes0, probes1 - probes0), (1, 0, 2)),
            ("B's 40 tokens with logits", fields(forty),
             (40, 32, 32, 39, 32, 8, 2, 2, 1, 1024 * kib, 8 * 64 * kib, 0, "prompt-cap")),
            ("B's 32 tokens with logits", fields(cache.lookup(px_lab.request("B", s[:32]))),
             (32, 32, 32, 31, 16, 16, 1, 1, 1, 1024 * kib, 16 * 64 * kib, 0, "prompt-cap")),
            ("B's 32 tokens without logits", fields(cache.lookup(px_lab.request("B", s[:32], requires_logits=False))),
             (32, 32, 32, 32, 32, 0, 2, 2, 0, 0, 0, 0, "no-logits")),
            ("B's 1 token with logits; an empty prompt without logits",
             (fields(cache.lookup(px_lab.request("B", s[:1]))),
              fields(cache.lookup(px_lab.request("B", [], requires_logits=False)))),
             ((1, 1, 0, 0, 0, 1, 0, 0, 1, 1024 * kib, 64 * kib, 0, "prompt-cap"),
              (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "no-logits"))),
            ("refused: another manifest, a policy of 8 and of 0 tokens, an empty prompt with logits", refused,
             [(R.MANIFEST_MISMATCH, "111111111111 != 000000000000"), (R.POLICY_BLOCK_SIZE_MISMATCH,
                                                                     "policy 8, allocator 16"),
              KeyRejection.NON_POSITIVE_BLOCK_SIZE, (R.EMPTY_PROMPT_WITH_LOGITS, "B")]),
            ("refused lookups probe nothing", probes2 - probes1, 0),
            ("given S_sem -1, 41 of 40 refused as", sems,
             [(R.SEMANTIC_MATCH_OUT_OF_RANGE, "S_sem=-1, S_prompt=40"),
              (R.SEMANTIC_MATCH_OUT_OF_RANGE, "S_sem=41, S_prompt=40")]),
            ("given S_sem 0, 15, 16, 40 of 40: hits", sem_hits, [0, 0, 16, 32]),
            ("a lookup is read-only: the same receipt again", kept == attrs.evolve(forty, receipt_sha256=""), True),
            ("a forced equal digest over other tokens, witness on: refused as, naming the block and 12 hex digits",
             collided, (R.COLLISION_WITNESS_MISMATCH, "block 0: key 000102030405"))]


def prefix_partial_tails() -> Rows:
    """0x07D at P = 12 (a block size that is not a power of two): A's 20 tokens publish 1 full block and an
    8-row tail; B's 21 tokens with logits hit 12 full-block rows plus min(8, 20 - 12) = 8 copied rows (20 = 21 - 1,
    the logits cap). Admitting maps (20 - 8) / 12 = 1 full block and copies the 8 rows from the tail (the second
    matched bundle): B holds its 21 tokens. At P = 16 with A's 48 tokens in 3 full blocks, B's 45 tokens that
    leave A's at row 42 hit 32 full-block rows plus min(10, min(42, 44) - 32) = 10 rows copied from A's third
    (full) block; 45 - 42 = 3 rows recomputed in ceil((45 - 32) / 16) = 1 new bundle. With S_sem 20 given, B's 50
    tokens hit 16 full-block rows plus 20 - 16 = 4 rows of the next matched block: 2 bundles (not all 3 matched),
    30 recomputed, ceil((50 - 16) / 16) = 3 new bundles."""
    from kvexact.reference.labs import prefix as px_lab
    from kvexact.reference.prefix import PrefixPolicy, admit

    s = list(px_lab.STREAM)
    tail = PrefixPolicy(block_tokens=12, partial_tail=True)
    cache = px_lab.cache_with(s[:20], tail, block_tokens=12)
    r = cache.lookup(px_lab.request("B", s[:21]), tail)
    rec, receipts = admit(cache, r, s[:21], tail)
    full = PrefixPolicy(partial_tail=True)
    a48 = px_lab.cache_with(s[:48], full)
    b45 = [*s[:42], 9001, 9002, 9003]  # A's rows 0..41, then other tokens
    r45 = a48.lookup(px_lab.request("B", b45), full)
    rec45, _ = admit(a48, r45, b45, full)
    r20 = a48.lookup(px_lab.request("B", s[:50], semantic_match_tokens=20), full)
    return [("B's 50 tokens over A's 3 full blocks with S_sem 20: indexed, hit, copied, bundles, recomputed, new",
             (r20.indexed_tokens, r20.runtime_hit_tokens, r20.copy_valid_partial_rows, len(r20.matched_group_handles),
              r20.prompt_rows_recomputed, r20.new_block_bundles), (48, 20, 4, 2, 30, 3)),
            ("B's 45 tokens over A's 3 full blocks, differing at row 42: S_sem, indexed, hit, copied, bundles, "
             "recomputed, new bundles; admitted: context, tokens",
             (r45.semantic_match_tokens, r45.indexed_tokens, r45.runtime_hit_tokens, r45.copy_valid_partial_rows,
              len(r45.matched_group_handles), r45.prompt_rows_recomputed, r45.new_block_bundles, rec45.context_tokens,
              a48.alloc.tokens_of("B")), (42, 42, 42, 10, 3, 3, 1, 45, tuple(b45))),
            ("B's 21 tokens: indexed, hit, copied rows, bundles, new bundles",
             (r.indexed_tokens, r.runtime_hit_tokens, r.copy_valid_partial_rows, len(r.matched_group_handles),
              r.new_block_bundles), (20, 20, 8, 2, 1)),
            ("admitted: context, tokens, appended rows", (rec.context_tokens, cache.alloc.tokens_of("B"),
                                                          len(receipts)), (21, tuple(s[:21]), 9))]


def revocation_walks() -> Rows:
    """0x0CE against ``spec/NamespaceRevocation.tla`` (the embedded checker as the oracle) along seeded random
    walks: from the initial state and from the seed scenario's published, leased and executing states, four walks
    of 25 steps each (random.Random(k), k = 0..15, picking among the enabled steps). In every state visited the
    reference's enabled steps lead to exactly the spec's successor states, every invariant twin holds as the spec's
    invariant does, every one of the spec's 22 actions is taken somewhere, and each step's trace record carries the
    spec's action name and the projection of the state it led to. The same holds in states off the reachable graph
    (an entry published twice, a request authorized for another namespace or not authorized, a lease on another
    namespace's block, a receipt without its lease, stale bytes, a revoked generation's copy left behind, a later generation's entry, owner, copy, lease and
    receipt above done)."""
    import random

    import attrs

    from kvexact.conformance.machines.revocation import RevocationMachine
    from kvexact.reference import revocation as rv
    from kvexact.reference.labs import revocation as rv_lab

    model = RevocationMachine.model()
    spec_inv = dict(model.invariants)
    init = rv.RevState.init()
    published = rv.play(init, rv_lab.PUBLISH_T1)[0]
    leased = rv.play(published, rv_lab.LEASE_T1)[0]
    executing = rv.execute(leased, "t1")[0]
    written = rv.play(init, rv_lab.PUBLISH_T1[:5])[0]
    req = published.req
    constructed = [  # off the reachable graph: the twins must still be the spec's actions and invariants
        attrs.evolve(written, index=frozenset({rv.Entry("t1", 0, 1)})),  # publishing an entry already indexed
        attrs.evolve(published, req={**req, "t2": rv.Req("hit", "t2", 0, 1, False)}),  # unauthorized, authz holds
        attrs.evolve(published, req={**req, "t2": rv.Req("hit", "t1", 0, 1, True)}),  # authorized, authz fails
        attrs.evolve(published, req={**req, "t2": rv.Req("leased", "t2", 0, 1, True)},
                     leases=frozenset({rv.Held("t2", "t2", 0, 1)})),  # a lease on another namespace's block
        attrs.evolve(executing, leases=frozenset()),  # a receipt without its lease
        attrs.evolve(published, bytes_={1: "t2", 2: "t1"}, owner={1: rv.Owner("t1", 0), 2: rv.Owner("t2", 0)}),
        attrs.evolve(published, done={"t1": 1, "t2": 0}, external=frozenset({rv.Copy("t1", 0)})),
        attrs.evolve(published, ns_gen={"t1": 1, "t2": 0}, index=frozenset({rv.Entry("t1", 1, 1)}),  # all above done
                     owner={1: rv.Owner("t1", 1), 2: rv.NO_OWNER}, external=frozenset({rv.Copy("t1", 1)}),
                     req={**req, "t1": rv.Req("executing", "t1", 1, 1, True)},
                     leases=frozenset({rv.Held("t1", "t1", 1, 1)}), receipts=frozenset({rv.Held("t1", "t1", 1, 1)}))]
    seen: set[Any] = set()
    differ: list[Any] = []
    broken: list[str] = []
    records: list[str] = []
    taken: set[str] = set()
    for st in constructed:
        tla = rv.project_tla(st)
        seen.add(model.key(tla))
        if {model.key(rv.project_tla(take()[0])) for _n, _p, take in rv.enabled_steps(st)} != frozenset(
                model.key(n) for _a, n in model.expand(tla)):
            differ.append(("constructed", len(seen)))
        broken += [name for name, twin in rv.INVARIANTS.items() if twin(st) != (spec_inv[name](tla, None, {}) is True)]
    k = 0
    for start in (init, published, leased, executing):
        for _ in range(4):
            rng, st = random.Random(k), start
            k += 1
            for _step in range(25):
                tla = rv.project_tla(st)
                key = model.key(tla)
                steps = rv.enabled_steps(st)
                if key not in seen:
                    seen.add(key)
                    ref = {model.key(rv.project_tla(take()[0])) for _n, _p, take in steps}
                    if ref != frozenset(model.key(n) for _a, n in model.expand(tla)):
                        differ.append(len(seen))
                    broken += [name for name, twin in rv.INVARIANTS.items()
                               if twin(st) != (spec_inv[name](tla, None, {}) is True)]
                if not steps:
                    break
                name, _params, take = rng.choice(steps)
                st, rec = take()
                taken.add(name)
                if rec["action"] != name or rec["state"] != rv.project_state(st):
                    records.append(name)
    upper = rv.RevState.init(tenants=("A", "t2"))  # "A" < "NoTenant" < "t2" as strings
    left = attrs.evolve(upper, owner={1: rv.Owner("A", 0), 2: rv.NO_OWNER}, done={"A": 1, "t2": 0})
    inits: list[Any] = []
    model.init_states(lambda st: inits.append(model.key(st)))
    return [("the initial state is the spec's one initial state", inits, [model.key(rv.project_tla(init))]),
            ("RevocationComplete with tenant A's generation-0 block owned after done[A] = 1; with it released",
             [rv.revocation_complete(left), rv.revocation_complete(attrs.evolve(left, owner=upper.owner))],
             [False, True]),
            ("states whose successors differ from the spec's", differ, []),
            ("invariant twins that disagree with the spec", sorted(set(broken)), []),
            ("records naming another action or state", records, []),
            ("actions taken", len(taken), 22)]


def namespace_contract() -> Rows:
    """0x01A/0x07F, reference/namespaces.py's contract, every branch: a namespace's string fields are non-empty
    strings and its generations non-negative ints (not bools), else BAD_NAMESPACE_FIELD naming the field and
    value; invalidation by a model-affecting reason advances model_generation by one, an isolation reset keeps
    it, a given model generation (0 included) or salt ('' included) replaces the old one; lookups check the tenant,
    then retirement, then the current generation; publications check retirement, then the generation; an entry
    scope is checked by id, then generation. Ids are built at run time (equal values, other objects)."""
    import attrs

    from kvexact.reference import namespaces as nsm

    R, W = nsm.NamespaceRejection, nsm.InvalidationReason

    detail = _outcome

    def fresh(*parts: str) -> str:
        return "".join(parts)

    def ns(**changes: Any) -> nsm.CacheIsolationNamespace:
        fields = dict(deployment_namespace="prod", tenant_id=fresh("t", "1"), namespace_id=fresh("n", "s"),
                      generation=2, cache_salt="salt", model_generation=3)
        fields.update(changes)
        return nsm.CacheIsolationNamespace(**fields)

    bad = [("deployment_namespace", ""), ("tenant_id", ""), ("namespace_id", 7), ("publication_policy", ""),
           ("generation", -1), ("generation", True), ("model_generation", -1), ("model_generation", "3")]
    base = ns()
    other = ns(tenant_id="t2", namespace_id="other", generation=0, cache_salt=None, model_generation=0)
    reg = nsm.create_namespace(nsm.create_namespace(nsm.NamespaceRegistry(), base), other)
    reasons = [nsm.invalidate(reg, fresh("n", "s"), w)[0].get("ns").model_generation for w in W]
    given, receipt = nsm.invalidate(reg, "ns", W.ISOLATION_RESET, model_generation=0, cache_salt="")
    after = nsm.invalidate(reg, "ns", W.ADAPTER)[0]
    return [("fields refused as", [detail(lambda n=n, v=v: ns(**{n: v})) for n, v in bad],
             [(R.BAD_NAMESPACE_FIELD, f"{n}={v!r}") for n, v in bad]),
            ("generation 0, model generation 0, no salt accepted; scope",
             detail(lambda: ns(generation=0, model_generation=0, cache_salt=None).scope), (None, ("ns", 0))),
            ("digests: 64 hex digits; equal namespaces, another generation",
             (len(base.digest), ns().digest == base.digest, ns(generation=3).digest == base.digest), (64, True, False)),
            ("model generation after each reason (3 before; the last an isolation reset)", reasons,
             [4, 4, 4, 4, 4, 4, 3]),
            ("given model generation 0 and salt '': model generation, salt, generation, receipt",
             (given.get("ns").model_generation, given.get("ns").cache_salt, given.get("ns").generation,
              receipt.reason, receipt.retired == base), (0, "", 3, W.ISOLATION_RESET, True)),
            ("after one invalidation: order of ids, other untouched, salt kept, retired",
             ([c.namespace_id for c in after.current], after.get("other") == other, after.get("ns").cache_salt,
              sorted(after.retired)), (["ns", "other"], True, "salt", [("ns", 2)])),
            ("duplicate id, unknown id refused as",
             [detail(lambda: nsm.create_namespace(reg, ns(generation=9))), detail(lambda: reg.get("nope"))],
             [(R.DUPLICATE_NAMESPACE, "ns"), (R.UNKNOWN_NAMESPACE, "nope")]),
            ("a registry retiring generation 2, 3 of a current 2; 1; another id's 5",
             [detail(lambda r=r: nsm.NamespaceRegistry((base,), frozenset({r})))[0] for r in
              (("ns", 2), ("ns", 3), ("ns", 1), ("zz", 5))],
             [R.RETIRED_GENERATION, R.RETIRED_GENERATION, None, None]),
            ("the refusal names both generations", detail(lambda: nsm.NamespaceRegistry((base,),
                                                                                         frozenset({("ns", 4)}))),
             (R.RETIRED_GENERATION, "ns@4 retired, current is 2")),
            ("lookups after one invalidation: t2 at 2; t1 at 2, 4, 3",
             [detail(lambda t=t, g=g: nsm.authorize_lookup(after, t, fresh("n", "s"), g)) for t, g in
              (("t2", 2), ("t1", 2), ("t1", 4), (fresh("t", "1"), 3))],
             [(R.UNAUTHORIZED_TENANT, "'t2' in 'ns'"), (R.RETIRED_GENERATION, "ns@2"),
              (R.FUTURE_GENERATION, "ns@4, current is 3"), (None, after.get("ns"))]),
            ("publications after one invalidation at 2, 4, 3; to an unknown id",
             [detail(lambda g=g: nsm.authorize_publish(after, (fresh("n", "s"), g))) for g in (2, 4, 3)] +
             [detail(lambda: nsm.authorize_publish(after, ("zz", 0)))[0]],
             [(R.PUBLISH_TO_RETIRED_GENERATION, "ns@2"), (R.FUTURE_GENERATION, "ns@4"), (None, None),
              R.UNKNOWN_NAMESPACE]),
            ("entry scopes (other, 2), (other, 1), (ns, 1), (ns, 2) against ns@2",
             [detail(lambda e=e: nsm.check_entry_scope(base, e)) for e in
              (("other", 2), ("other", 1), (fresh("n", "s"), 1), (fresh("n", "s"), 2))],
             [(R.CROSS_NAMESPACE_ENTRY, "other != ns"), (R.CROSS_NAMESPACE_ENTRY, "other != ns"),
              (R.STALE_ENTRY_GENERATION, "entry generation 1, lookup generation 2"), (None, None)]),
            ("visible: (ns, 2), (ns, 1), (other, 2)",
             [nsm.entry_visible(base, e) for e in ((fresh("n", "s"), 2), ("ns", 1), ("other", 2))],
             [True, False, False]),
            ("an evolved namespace with generation -1 refused as",
             detail(lambda: attrs.evolve(base, generation=-1))[0], R.BAD_NAMESPACE_FIELD)]


def keys_chain_contract() -> Rows:
    """0x07B/0x07D, reference/keys.py's contract, with a recording hash (link i's hash is b"h<i>", so each row
    shows exactly what was hashed): h_i = H(h_{i-1}, X_i, E_i) over full blocks only; E_i lists the LoRA name,
    each feature overlapping the block (ordered by start, then id) with its block-relative offset, the salt on
    block 0 only, the SHA-256 of the block's embedding rows; None when empty. A tail key hashes ("partial",
    parent, tail, v, policy, E_tail). Group block j of k fine blocks is fine hash (j + 1) k - 1; the lookup key
    appends the group id as 4 big-endian bytes. Malformed inputs are refused by name, with the offending values."""
    import hashlib

    from kvexact.reference import keys as kz

    K = kz.KeyRejection
    seen: list[Any] = []

    def rec(payload: Any) -> bytes:
        seen.append(payload)
        return b"h%d" % (len(seen) - 1)

    detail = _refusal_or_none

    mm = (kz.MultimodalFeature("img", 1, 2), kz.MultimodalFeature("aud", 1, 1), kz.MultimodalFeature("b", 4, 1))
    inputs = kz.KeyInputs((1, 2, 3, 4, 5), lora_name="L", mm_features=mm, cache_salt="s")
    full = kz.hash_full_blocks(inputs, 2, rec)
    chain = list(seen)
    seen.clear()
    tail = kz.partial_tail_key(inputs, 2, 3, "pol", rec)
    rows = (b"a", b"bb", b"c")
    embeds = kz.block_extra_keys(kz.KeyInputs((0, 0, 0), prompt_embed_rows=rows), 1, 3)
    counts = [len(kz.hash_full_blocks(kz.KeyInputs(tuple(range(n))), p)) for n, p in ((4, 2), (3, 3), (2, 3), (7, 3))]
    bad_inputs = [lambda: kz.KeyInputs((1, -1)), lambda: kz.KeyInputs((1, True)),
                  lambda: kz.KeyInputs((0, 1, 2, 3, 4), mm_features=(kz.MultimodalFeature("x", 3, 3),)),
                  lambda: kz.KeyInputs((0, 1), mm_features=(kz.MultimodalFeature("y", -1, 1),)),
                  lambda: kz.KeyInputs((0, 1), mm_features=(kz.MultimodalFeature("z", 0, 0),)),
                  lambda: kz.KeyInputs((0, 1, 2), prompt_embed_rows=(b"a", b"b")),
                  lambda: kz.KeyInputs((0,), cache_salt=""), lambda: kz.KeyInputs((0,), cache_salt=5)]
    fine = [b"f0", b"f1", b"f2", b"f3", b"f4"]
    return [("full blocks of 5 tokens at P 2: hashes, payloads", (full, chain),
             ([b"h0", b"h1"], [(None, (1, 2), (("lora", "L"), ("mm", "aud", 1), ("mm", "img", 1), ("cache_salt", "s"))),
                               (b"h0", (3, 4), (("lora", "L"), ("mm", "img", -1)))])),
            ("the tail key: payload of its last hash, group, valid rows, partial",
             (seen[-1], tail.block_hash, tail.cache_group_id, tail.valid_rows, tail.is_partial),
             (("partial", b"h1", (5,), 1, "pol", (("lora", "L"), ("mm", "b", 0))), b"h2", 3, 1, True)),
            ("extras: embedding rows 1..2, no declared source",
             (embeds, kz.block_extra_keys(kz.KeyInputs((1, 2)), 0, 2)),
             ((("prompt_embeds", hashlib.sha256(b"bbc").hexdigest()),), None)),
            ("full blocks of 4 at P 2, 3 at 3, 2 at 3, 7 at 3", counts, [2, 1, 0, 2]),
            ("tail keys refused: a drifting row count, a block-aligned prompt; tail of 1 token with no full block",
             [detail(lambda: kz.partial_tail_key(inputs, 2, 0, "pol", valid_rows=2)),
              detail(lambda: kz.partial_tail_key(kz.KeyInputs((1, 2, 3, 4)), 2, 0, "pol")),
              kz.partial_tail_key(kz.KeyInputs((7,)), 2, 0, "pol", rec).valid_rows, seen[-1][1]],
             [(K.PARTIAL_TAIL_ROWS_DRIFT, "valid_rows=2 but the tail has 1 tokens"),
              (K.PARTIAL_TAIL_EMPTY, "4 tokens end on a block boundary"), 1, None]),
            ("inputs refused as", [detail(f) for f in bad_inputs],
             [(K.BAD_TOKEN_ID, "token 1 is -1"), (K.BAD_TOKEN_ID, "token 1 is True"),
              (K.FEATURE_OUT_OF_RANGE, "feature 'x' covers [3, 6) of 5 tokens"),
              (K.FEATURE_OUT_OF_RANGE, "feature 'y' covers [-1, 0) of 2 tokens"),
              (K.FEATURE_OUT_OF_RANGE, "feature 'z' covers [0, 0) of 2 tokens"),
              (K.PROMPT_EMBEDS_LENGTH_MISMATCH, "2 embedding rows for 3 tokens"),
              (K.EMPTY_SALT, "cache_salt=''"), (K.EMPTY_SALT, "cache_salt=5")]),
            ("a feature ending at the last token accepted; block sizes 0, -1, 2.0 refused as",
             [detail(lambda: kz.KeyInputs((0, 1), mm_features=(kz.MultimodalFeature("w", 1, 1),)))] +
             [detail(lambda p=p: kz.hash_full_blocks(kz.KeyInputs((1,)), p)) for p in (0, -1, 2.0)],
             [(None, None), (K.NON_POSITIVE_BLOCK_SIZE, "block size 0"), (K.NON_POSITIVE_BLOCK_SIZE, "block size -1"),
              (K.NON_POSITIVE_BLOCK_SIZE, "block size 2.0")]),
            ("lookup keys of groups 0 and 258; group -1 refused as",
             (kz.ConcretePrefixKey(b"k", 0).lookup_key, kz.ConcretePrefixKey(b"k", 258).lookup_key,
              kz.ConcretePrefixKey(b"k", 0).is_partial, detail(lambda: kz.ConcretePrefixKey(b"k", -1))),
             (b"k\x00\x00\x00\x00", b"k\x00\x00\x01\x02", False, (K.NEGATIVE_GROUP_ID, "cache_group_id=-1"))),
            ("prefix keys of 4 tokens at P 2 in group 5: groups, hashes",
             [(k.cache_group_id, k.block_hash) for k in kz.prefix_keys(kz.KeyInputs((1, 2, 3, 4)), 2, 5)],
             [(5, h) for h in kz.hash_full_blocks(kz.KeyInputs((1, 2, 3, 4)), 2)]),
            ("group blocks of 5 fine hashes: 2 in 4, 1 in 1, 2 in 6 refused as",
             [kz.group_block_hashes(fine, 2, 4), kz.group_block_hashes(fine, 1, 1),
              detail(lambda: kz.group_block_hashes(fine, 4, 6))],
             [[b"f1", b"f3"], fine, (K.HASH_BLOCK_NOT_DIVIDING, "hash block 4 does not divide group block 6")]),
            ("matching leading blocks", [kz.matching_full_blocks(a, b) for a, b in
                                         ((fine[:3], [b"f0", b"f1", b"x"]), (fine[:1], fine[:2]), ([], fine),
                                          (fine[:3], [b"x", b"f1", b"f2"]), (fine, fine))], [2, 1, 0, 0, 5])]


def session_resume_contract() -> Rows:
    """0x0CC: a session receipt resumes a turn only if every field matches; check_resume names the first field
    that breaks (session, tenant, namespace scope, semantic digest, layout digest, position contract, an
    incomplete save, the interval [0, H), the publication generation), and plan_turn prefills U = 30 tokens on
    resume, H + U = 100 + 30 = 130 otherwise (no receipt: no rejection named). Values are built at run time
    (equal, other objects)."""
    import attrs

    from kvexact.reference import sessions as ss
    from kvexact.reference.rejections import Rejected

    S = ss.SessionRejection

    def fresh(*parts: str) -> str:
        return "".join(parts)

    def num(n: int) -> int:
        return int(str(n))

    turn = ss.SessionTurn(fresh("s", "1"), fresh("t", "1"), fresh("n", "s"), num(1000), fresh("sem", "0"),
                          fresh("lay", "0"), fresh("rope", "-v1"), num(100), 30, num(2000))
    good = ss.SessionReuseReceipt("s1", "t1", "ns", 1000, "sem0", "lay0", (0, 100), "rope-v1", 2000, "obj-7")

    def detail(r: ss.SessionReuseReceipt) -> tuple[Any, Any]:
        try:
            ss.check_resume(r, turn)
        except Rejected as exc:
            return exc.reason, exc.detail
        return None, None

    changes: list[dict[str, Any]] = [dict(session_id="s2", tenant_id="t2"), dict(tenant_id="t2", namespace_id="nx"),
               dict(namespace_id="nx", semantic_digest="sem1"), dict(namespace_generation=999),
               dict(semantic_digest="sem1", layout_digest="lay1"), dict(layout_digest="lay1", position_contract="alibi"),
               dict(position_contract="alibi", save_complete=False),
               dict(save_complete=False, covered_interval=(1, 100)),
               dict(covered_interval=(1, 100), publication_generation=1999), dict(covered_interval=(0, 99)),
               dict(covered_interval=(0, 101)), dict(publication_generation=1999), dict(publication_generation=2001)]
    plans = [ss.plan_turn(r, turn) for r in (None, good, attrs.evolve(good, layout_digest="x"))]
    return [("changed fields refused as (the first broken one named)",
             [detail(attrs.evolve(good, **c)) for c in changes],
             [(S.SESSION_MISMATCH, "s2 != s1"), (S.TENANT_MISMATCH, "t2 != t1"),
              (S.NAMESPACE_ROTATED, "nx@1000 vs ns@1000"), (S.NAMESPACE_ROTATED, "ns@999 vs ns@1000"),
              (S.SEMANTIC_CHANGED, "s1"), (S.LAYOUT_CHANGED, "s1"), (S.POSITION_CONTRACT_CHANGED, "alibi != rope-v1"),
              (S.INCOMPLETE_SAVE, "obj-7"), (S.INTERVAL_MISMATCH, "(1, 100) vs [0, 100)"),
              (S.INTERVAL_MISMATCH, "(0, 99) vs [0, 100)"), (S.INTERVAL_MISMATCH, "(0, 101) vs [0, 100)"),
              (S.STALE_PUBLICATION, "1999 < 2000"), (S.STALE_PUBLICATION, "2001 < 2000")]),
            ("the matching receipt accepted", detail(good), (None, None)),
            ("plans: no receipt, the matching one, a changed layout",
             [(p.resume, p.prefill_tokens, p.rejection) for p in plans],
             [(False, 130, None), (True, 30, None), (False, 130, S.LAYOUT_CHANGED)])]


def modules_contract() -> Rows:
    """0x0CB: H_module = [T_p = T_c][Pi_p = Pi_c][S_p = S_c][A_p = A_c] (layout and namespace are checked after
    it, not part of it); check_module names the first failing factor (schema id, generation, tokens, positions,
    ABI, then layout, namespace); assembly authorizes, checks the schema, refuses overlapping declared positions,
    takes a cached module only on a full hit (a miss or an uncached item is computed, an uncached item makes no
    lookup) and returns segments in declared position order (a module with no positions first)."""
    import attrs

    from kvexact.reference import modules as md

    M = md.ModuleRejection

    detail = _outcome

    decl = {"sys": md.DeclaredModule("sys", 0, 3), "doc": md.DeclaredModule("doc", 10, 2),
            "gap": md.DeclaredModule("gap", 3, 4, explicit=(3, 5)), "nil": md.DeclaredModule("nil", 20, 0),
            "over": md.DeclaredModule("over", 2, 2)}
    schema = md.PromptSchema("sch", 4, decl)
    ns = md.Namespace("ns", 2, frozenset({"alice"}))

    def receipt(mid: str, tokens: tuple[int, ...], **changes: Any) -> md.PromptModuleReceipt:
        r = md.PromptModuleReceipt("sch", 4, mid, "", tokens, decl[mid].positions(), "sem", "lay", "ns", 2)
        return attrs.evolve(r, **changes)

    base = receipt("sys", (1, 2, 3))
    factor: list[dict[str, Any]] = [dict(token_ids=(1, 2, 4)), dict(position_ids=(1, 2, 3)), dict(schema_id="other"),
              dict(schema_generation=5), dict(semantic_manifest_digest="x"), dict(layout_manifest_digest="x"),
              dict(namespace_id="other"), dict(namespace_generation=3)]
    first: list[dict[str, Any]] = [dict(schema_id="other", schema_generation=5), dict(schema_generation=5, token_ids=(9, 9, 9)),
             dict(token_ids=(9, 9, 9), position_ids=(4, 5, 6)), dict(position_ids=(4, 5, 6),
                                                                       semantic_manifest_digest="x"),
             dict(semantic_manifest_digest="x", layout_manifest_digest="x"),
             dict(layout_manifest_digest="x", namespace_id="other"), dict(namespace_generation=3)]
    cache = {("sch", "sys", ""): base, ("sch", "doc", ""): receipt("doc", (7, 8))}
    items = [md.PromptItem("doc", (7, 8)), md.PromptItem("gap", (5, 6), cached=False), md.PromptItem("sys", (1, 2, 3)),
             md.PromptItem("nil", ())]
    lookups: list[str] = []
    segs = md.assemble_declared_prompt("alice", "sch", 4, items, schema, cache, ns, "sem", "lay", lookups)

    def assemble(principal: str = "alice", sid: str = "sch", gen: int = 4, its: Any = items) -> Any:
        return md.assemble_declared_prompt(principal, sid, gen, its, schema, cache, ns, "sem", "lay")

    return [("positions of sys, gap (explicit), nil", [decl[m].positions() for m in ("sys", "gap", "nil")],
             [(0, 1, 2), (3, 5), ()]),
            ("H_module with one field changed: tokens, positions, schema id, generation, ABI, layout, namespace id, gen",
             [md.module_hit(base, attrs.evolve(base, **c)) for c in factor] + [md.module_hit(base, receipt("sys", (1, 2, 3)))],
             [False, False, False, False, False, True, True, True, True]),
            ("check_module: the first failing factor named",
             [detail(lambda c=c: md.check_module(attrs.evolve(base, **c), base)) for c in first],
             [(M.SCHEMA_ID_MISMATCH, "other != sch"), (M.SCHEMA_GENERATION_MISMATCH, "5 != 4"), (M.TOKEN_MISMATCH, "sys"),
              (M.POSITION_MISMATCH, "sys: cached at (4, 5, 6)..., needed at (0, 1, 2)..."),
              (M.SEMANTIC_ABI_MISMATCH, "sys"), (M.LAYOUT_MISMATCH, "sys"), (M.NAMESPACE_MISMATCH, "ns@3")]),
            ("check_module on a 5-token module: positions shown as their first 3 of each side",
             detail(lambda: md.check_module(attrs.evolve(base, token_ids=(1, 2, 3, 4, 5), position_ids=(4, 5, 6, 7, 8)),
                                            attrs.evolve(base, token_ids=(1, 2, 3, 4, 5), position_ids=(0, 1, 2, 3, 4)))),
             (M.POSITION_MISMATCH, "sys: cached at (4, 5, 6)..., needed at (0, 1, 2)...")),
            ("a receipt of 2 tokens at 1 position refused as",
             detail(lambda: md.PromptModuleReceipt("s", 1, "m", "", (1, 2), (0,), "a", "b", "n", 0)),
             (M.TOKEN_POSITION_LENGTH_MISMATCH, "m: 2 tokens, 1 positions")),
            ("assembled: module, source, positions in order; lookups made",
             ([(g.module_id, g.source, g.position_ids) for g in segs], lookups),
             ([("nil", "compute", ()), ("sys", "cache", (0, 1, 2)), ("gap", "compute", (3, 5)),
               ("doc", "cache", (10, 11))], ["doc", "sys", "nil"])),
            ("assembly refused: eve, schema other, generation 5, an undeclared module, overlapping sys and over",
             [detail(lambda: assemble("eve"))[0], detail(lambda: assemble(sid="other")), detail(lambda: assemble(gen=5)),
              detail(lambda: assemble(its=[md.PromptItem("zz", (1,))])),
              detail(lambda: assemble(its=[md.PromptItem("sys", (1, 2, 3)), md.PromptItem("over", (4, 5))]))],
             [M.UNAUTHORIZED_NAMESPACE, (M.SCHEMA_ID_MISMATCH, "other != sch"), (M.SCHEMA_GENERATION_MISMATCH, "5 != 4"),
              (M.UNDECLARED_MODULE, "'zz' in sch"), (M.OVERLAPPING_POSITIONS, "over")]),
            ("a cached module whose tokens changed refused as",
             detail(lambda: assemble(its=[md.PromptItem("sys", (1, 2, 9))]))[0], M.TOKEN_MISMATCH)]


def vmm_contract() -> Rows:
    """0x06A/0x06I on the 0x06F geometry (L 2, B 3, T_max 12, H_kv 2, d_h 4, b 2, G 64 B, 12 handles): a row is
    2 x 4 x 2 = 16 B, a page 64 / 16 = 4 tokens, R = 64 ceil(12 x 16 / 64) = 192 B (3 pages), M_VA = 2 x 2 x 3 x
    192 = 2304 B, the pool 12 x 64 = 768 B, a bundle 2L x G = 256 B. The V1 scalar (slot 2, t 5, h 1, d 3) lies
    at u = (5 x 8 + 1 x 4 + 3) x 2 = 94 B (page 1, delta 30), A_VA = 3 x 3 x 192 + 2 x 192 + 94 = 2206. A writes
    5 rows into 2 synchronously mapped pages: mapped 512 B = valid 5 x 16 x 4 = 320 + slack 192; free handles
    4 x 64 = 256 B; freed with its mappings retained they are 512 B of inactive retained backing. Every refusal
    names its reason and the numbers involved; every committed step advances the version by one."""
    import attrs

    from kvexact.reference import vmm
    from kvexact.reference.labs import vmm as lab

    V = vmm.VmmRejection
    c = lab.SEED_CONFIG

    detail = _refusal_or_none

    def led(st: vmm.VmmState) -> tuple[int, ...]:
        x = vmm.check_state(st)
        return (x.virtual_bytes, x.pool_bytes, x.mapped_bytes, x.free_handle_bytes, x.active_valid_bytes,
                x.active_slack_bytes, x.inactive_retained_bytes)

    geometry = (c.row_bytes, c.page_tokens, c.request_range_bytes, c.pages_per_request, c.virtual_bytes, c.pool_bytes,
                c.bundle_bytes, c.tensors, [c.pages_for(t) for t in (0, 1, 4, 5, 8, 9, 12)])
    addr = vmm.virtual_address(c, "V", 1, 2, 5, 1, 3)
    s0 = vmm.VmmState.initial(c)
    s1, r1 = vmm.reserve_virtual(s0)
    s2, r2 = vmm.create_handles(s1)
    s3, r3 = vmm.alloc_reqid(s2, 0, "A")
    s4, sync = vmm.step_sync(s3, 0, 5)
    s5, r5 = vmm.write_rows(s4, 0, 1, 0, 5)
    s6, r6 = vmm.free_reqid(s5, 0)
    s7, r7 = vmm.alloc_reqid(s6, 0, "B")
    live = s5
    bad_geometry = [dict(layers=0), dict(handles=-1), dict(kv_heads=True), dict(page_bytes=60), dict(head_dim=2.0)]
    slot0 = live.slots[0]
    broken = [attrs.evolve(live, slots=(attrs.evolve(slot0, pages=(slot0.pages[0][:3], slot0.pages[1])), *live.slots[1:])),
              attrs.evolve(live, slots=(attrs.evolve(slot0, ready_pages=3), *live.slots[1:])),
              attrs.evolve(live, slots=(attrs.evolve(slot0, valid_tokens=9, ready_pages=2), *live.slots[1:])),
              attrs.evolve(s6, slots=(attrs.evolve(s6.slots[0], valid_tokens=1), *s6.slots[1:])),
              attrs.evolve(live, free_handles=live.free_handles | {0}),
              attrs.evolve(live, free_handles=live.free_handles - {11})]
    return [("geometry: row, page tokens, R, pages, M_VA, pool, bundle, tensors, pages for 0, 1, 4, 5, 8, 9, 12",
             geometry, (16, 4, 192, 3, 2304, 768, 256, 4, [0, 1, 1, 2, 2, 3, 3])),
            ("tensor indices K0, V0, K1, V1; K2, X0, K-1 refused as",
             [c.tensor_index(k, layer) for k, layer in (("K", 0), ("V", 0), ("K", 1), ("V", 1))] +
             [detail(lambda k=k, layer=layer: c.tensor_index(k, layer)) for k, layer in (("K", 2), ("X", 0), ("K", -1))],
             [0, 1, 2, 3, (V.COORDINATE_OUT_OF_RANGE, "tensor K2"), (V.COORDINATE_OUT_OF_RANGE, "tensor X0"),
              (V.COORDINATE_OUT_OF_RANGE, "tensor K-1")]),
            ("V1 (slot 2, t 5, h 1, d 3): address, u, page, delta",
             (addr.virtual_address, addr.offset_in_request_bytes, addr.page, addr.delta_bytes), (2206, 94, 1, 30)),
            ("coordinates refused: slot 3, t 12, h 2, d 4, t -1, slot -1, h -1, d -1",
             [detail(lambda a=a: vmm.virtual_address(c, "K", 0, *a)) for a in
              ((3, 0, 0, 0), (0, 12, 0, 0), (0, 0, 2, 0), (0, 0, 0, 4), (0, -1, 0, 0), (-1, 0, 0, 0), (0, 0, -1, 0),
               (0, 0, 0, -1))],
             [(V.COORDINATE_OUT_OF_RANGE, "slot=3, t=0, h=0, d=0"), (V.COORDINATE_OUT_OF_RANGE, "slot=0, t=12, h=0, d=0"),
              (V.COORDINATE_OUT_OF_RANGE, "slot=0, t=0, h=2, d=0"), (V.COORDINATE_OUT_OF_RANGE, "slot=0, t=0, h=0, d=4"),
              (V.COORDINATE_OUT_OF_RANGE, "slot=0, t=-1, h=0, d=0"), (V.COORDINATE_OUT_OF_RANGE, "slot=-1, t=0, h=0, d=0"),
              (V.COORDINATE_OUT_OF_RANGE, "slot=0, t=0, h=-1, d=0"), (V.COORDINATE_OUT_OF_RANGE, "slot=0, t=0, h=0, d=-1")]),
            ("geometries refused as", [detail(lambda g=g: attrs.evolve(c, **g)) for g in bad_geometry],
             [(V.NON_POSITIVE_GEOMETRY, "layers=0"), (V.NON_POSITIVE_GEOMETRY, "handles=-1"),
              (V.NON_POSITIVE_GEOMETRY, "kv_heads=True"), (V.PAGE_NOT_DIVISIBLE, "G=60 B, row=16 B"),
              (V.NON_POSITIVE_GEOMETRY, "head_dim=2.0")]),
            ("ledgers: reserved, created, A's 5 rows, A freed (retained)", [led(x) for x in (s1, s2, s5, s6)],
             [(2304, 0, 0, 0, 0, 0, 0), (2304, 768, 0, 768, 0, 0, 0), (2304, 768, 512, 256, 320, 192, 0),
              (2304, 768, 512, 256, 0, 0, 512)]),
            ("receipts: operation, version, maps, unmaps, detail",
             [(r.operation, r.version, r.maps, r.unmaps, r.detail) for r in (r1, r2, r3, r5, r6, r7)],
             [("reserve_virtual", 1, 0, 0, 2304), ("create_handles", 2, 0, 0, 768),
              ("alloc_reqid", 3, 0, 0, {"slot": 0, "generation": 1, "retained_pages": 0}),
              ("write_rows", 6, 0, 0, {"slot": 0, "rows": (0, 5)}),
              ("free_reqid", 7, 0, 0, {"slot": 0, "retained_pages": 2, "unmap": False}),
              ("alloc_reqid", 8, 0, 0, {"slot": 0, "generation": 2, "retained_pages": 2})]),
            ("A's sync receipt: slot, generation, ready, covered, handles, ready before use",
             (sync.slot, sync.generation, sync.ready_pages, sync.covered_tokens, sync.page_handles, sync.ready_before_use),
             (0, 1, 2, 8, ((0, 1, 2, 3), (4, 5, 6, 7)), True)),
            ("B on A's retained slot: generation, valid rows, pages, ready, old K/V valid; B uses 1 row refused as",
             (s7.slots[0].generation, s7.slots[0].valid_tokens, len(s7.slots[0].pages), s7.slots[0].ready_pages,
              s7.slots[0].old_kv_semantically_valid, detail(lambda: vmm.require_use(s7, 0, 2, 1))),
             (2, 0, 2, 2, False, (V.ROWS_NOT_VALID, "1 rows requested, 0 valid"))),
            ("writes refused: 0 rows, at row 4, through row 12 (T_max), through row 8 (ready 2 pages)",
             [detail(lambda a=a: vmm.write_rows(live, 0, 1, *a)) for a in ((5, 0), (4, 2), (5, 8), (5, 4))],
             [(V.NON_CONTIGUOUS_ROWS, "rows [5, 5) after 5 valid"), (V.NON_CONTIGUOUS_ROWS, "rows [4, 6) after 5 valid"),
              (V.ROWS_BEYOND_TMAX, "13 > T_max 12"), (V.MAPPING_NOT_READY, "row 8 beyond ready frontier of 2 pages")]),
            ("A uses 0, 3, 5 rows: covered rows; 6 rows refused as",
             ([vmm.require_use(live, 0, 1, t).covered_tokens for t in (0, 3, 5)],
              detail(lambda: vmm.require_use(live, 0, 1, 6))), ([8, 8, 8], (V.ROWS_NOT_VALID, "6 rows requested, 5 valid"))),
            ("a write up to the ready frontier (rows 5..7): valid rows", vmm.write_rows(live, 0, 1, 5, 3)[0].slots[0].valid_tokens,
             8),
            ("a stale generation, an inactive slot, slot 3, slot '0' refused as",
             [detail(lambda: vmm.write_rows(live, 0, 2, 5, 1)), detail(lambda: vmm.write_rows(live, 1, 1, 0, 1)),
              detail(lambda: vmm.alloc_reqid(live, 3, "C")), detail(lambda: vmm.alloc_reqid(live, "0", "C")),
              detail(lambda: vmm.alloc_reqid(live, 0, "C"))],
             [(V.STALE_GENERATION, "slot 0 is at generation 1, not 2"), (V.SLOT_INACTIVE, "slot 1"),
              (V.SLOT_OUT_OF_RANGE, "slot 3"), (V.SLOT_OUT_OF_RANGE, "slot '0'"), (V.SLOT_ACTIVE, "slot 0 holds A@1")]),
            ("maps refused: page 3, page 1 at frontier 2, 3 handles, a repeated handle, handle 12, handle -1, mapped H0",
             [detail(lambda a=a: vmm.map_bundle(live, 0, *a)) for a in
              ((3,), (1,), (2, (8, 9, 10)), (2, (8, 8, 9, 10)), (2, (8, 9, 10, 12)), (2, (8, 9, 10, -1)),
               (2, (8, 9, 10, 0)))],
             [(V.PAGE_BEYOND_RESERVATION, "page 3 of 3"), (V.NON_CONTIGUOUS_FRONTIER, "page 1, frontier 2"),
              (V.INCOMPLETE_BUNDLE, "(8, 9, 10) for 4 tensors"), (V.INCOMPLETE_BUNDLE, "(8, 8, 9, 10) for 4 tensors"),
              (V.UNKNOWN_HANDLE, "handle 12"), (V.UNKNOWN_HANDLE, "handle -1"), (V.HANDLE_NOT_FREE, "handle H0")]),
            ("a map of the handles 11, 10, 9, 8 given: page 2's bundle, ready pages, free handles",
             (lambda st: (st.slots[0].pages[2], st.slots[0].ready_pages, sorted(st.free_handles)))(
                 vmm.map_bundle(live, 0, 2, (11, 10, 9, 8))[0]), ((11, 10, 9, 8), 3, [])),
            ("an async map: ready pages, pending; a sync map behind it, await refused as, after await: ready",
             (lambda st: (st.slots[0].ready_pages, len(st.slots[0].pages),
                          detail(lambda: vmm.map_bundle(st, 1, 0)), detail(lambda: vmm.await_mapping(live, 0)),
                          vmm.await_mapping(st, 0)[1].ready_pages))(vmm.map_bundle(live, 0, 2, asynchronous=True)[0]),
             (2, 3, (V.SLOT_INACTIVE, "slot 1"), (V.NOTHING_PENDING, "slot 0"), 3)),
            ("translate t 8 of A (page 2 not ready), release handles, release VA, reclaim A, reclaim empty slot 1",
             [detail(lambda: vmm.translate(live, "K", 0, 0, 8, 0, 0)), detail(lambda: vmm.release_handles(live)),
              detail(lambda: vmm.release_virtual(live)), detail(lambda: vmm.reclaim_inactive(live, 0)),
              detail(lambda: vmm.reclaim_inactive(s6, 1)), detail(lambda: vmm.step_sync(live, 0, 13))],
             [(V.MAPPING_NOT_READY, "slot 0 page 2"), (V.HANDLES_STILL_MAPPED, "8 handles mapped"),
              (V.VA_IN_USE, "release the physical handles first"), (V.RECLAIM_ACTIVE_SLOT, "slot 0 holds A@1"),
              (V.NOTHING_TO_RECLAIM, "slot 1"), (V.ROWS_BEYOND_TMAX, "13 > 12")]),
            ("require_covered: A's receipt for 8 rows, 9 rows, generation 2",
             [detail(lambda g=g, t=t: vmm.require_covered(sync, g, t)) for g, t in ((1, 8), (1, 9), (2, 1))],
             [(None, None), (V.FRONTIER_NOT_COVERED, "receipt 0@1 covers 8 rows"),
              (V.FRONTIER_NOT_COVERED, "receipt 0@1 covers 8 rows")]),
            ("a receipt of generation 300 for 4 rows (generations read at run time, above the small-int cache): "
             "covers 300 for 4 rows, for 5 rows, 301 for 4 rows; require_covered 300 for 4 rows",
             (lambda r: (r.covers(int("3" + "00"), 4), r.covers(int("300"), 5), r.covers(int("301"), 4),
                         detail(lambda: vmm.require_covered(r, int("30" + "0"), 4))))(
                 vmm.MappedFrontierReceipt(0, int("300"), 1, 4, ((0,), (1,)), True)),
             (True, False, False, (None, None))),
            ("A freed with unmap: unmaps, free handles, ready pages; reclaiming retained A: page, handles",
             (lambda f, rc: (f[1].unmaps, len(f[0].free_handles), f[0].slots[0].ready_pages, rc[1].detail))(
                 vmm.free_reqid(live, 0, unmap=True), vmm.reclaim_inactive(s6, 0)),
             (2, 12, 0, {"slot": 0, "page": 1, "handles": (4, 5, 6, 7)})),
            ("states refused by check_state", [detail(lambda b=b: vmm.check_state(b)) for b in broken],
             [(V.INCOMPLETE_BUNDLE, "slot 0"), (V.LEDGER_MISMATCH, "slot 0: ready 3, mapped 2"),
              (V.LEDGER_MISMATCH, "slot 0: 9 rows beyond the frontier"),
              (V.LEDGER_MISMATCH, "inactive slot 0 claims valid rows"),
              (V.LEDGER_MISMATCH, "mapped 8 + free 5 handles != created 12"),
              (V.LEDGER_MISMATCH, "mapped 8 + free 3 handles != created 12")])]


def prompt_markup_contract() -> Rows:
    """0x0CB markup (reference/prompt_cache.py): positions come from the schema alone. With one token per word,
    <module sys>a b <param x len=2/> c</module> takes positions 0, 1, 4 (slot x = 2, 3); the union's members
    both start at 5 (u1: 5..7, u2: 5) and it spans its longest member, so tail's h is at 8 and the schema ends at
    9. A prompt importing sys with x="p", u2 and the text "hello world" assembles, in position order, sys (cache,
    0 1 4), its argument (compute, 2), u2 (cache, 5), the text (compute, 9 10), leaving gaps 3, 6, 7, 8 below 11.
    Every malformed schema, prompt or revision is refused by name with its line (and, for markup that is not
    well-formed, the 1-based column: expat's 0-based offset of the mismatched name </c> after "  <b></" is 7)."""
    import attrs

    from kvexact.reference import prompt_cache as pc
    from kvexact.reference.modules import ModuleRejection, Namespace

    P, M = pc.MarkupRejection, ModuleRejection

    def enc(text: str) -> tuple[int, ...]:
        return tuple(ord(w[0]) for w in text.split())

    detail = _refusal_or_none

    src = ('<schema name="s" generation="2"><module name="sys">a b <param name="x" len="2"/> c</module>'
           '<union><module name="u1">d e f</module><module name="u2">g</module></union>'
           '<module name="tail">h</module></schema>')
    schema = pc.parse_schema(src, enc)
    ns = Namespace("ns", 1, frozenset({"alice"}))
    store = pc.ModuleStore().populate(schema, ["sys", "u1", "u2"], ns, "sem", "lay")
    segs = pc.assemble_markup("alice", '<prompt schema="s" generation="2"><sys x="p"/><u2/>hello world</prompt>',
                              schema, store, ns, "sem", "lay", enc)
    layout = {n: (m.position_ids, dict(m.slots), m.union) for n, m in schema.modules.items()}

    def bad_schema(text: str) -> tuple[Any, Any]:
        return detail(lambda: pc.parse_schema(text, enc))

    def bad_prompt(body: str, sid: str = "s") -> tuple[Any, Any]:
        return detail(lambda: pc.parse_prompt(f'<prompt schema="{sid}" generation="2">{body}</prompt>', schema, enc))

    revised = attrs.evolve(schema, generation=3)
    return [("layout: positions, slots, union; end", (layout, schema.end),
             ({"sys": ((0, 1, 4), {"x": (2, 3)}, None), "u1": ((5, 6, 7), {}, 1), "u2": ((5,), {}, 1),
               "tail": ((8,), {}, None)}, 9)),
            ("sys declared: start, length, positions", (lambda d: (d.start_position, d.length_tokens, d.positions()))(
                schema.modules["sys"].declared()), (0, 3, (0, 1, 4))),
            ("assembled: module, source, positions; gaps below 11",
             ([(g.module_id, g.source, g.position_ids) for g in segs], pc.gaps(segs, 11)),
             ([("sys", "cache", (0, 1, 4)), ("sys.x", "compute", (2,)), ("u2", "cache", (5,)),
               ("#text@9", "compute", (9, 10))], (3, 6, 7, 8))),
            ("a schema without generation is at 0; one word gives one token",
             (pc.parse_schema('<schema name="z"/>').generation, len(pc.word_tokens("one two  three"))), (0, 3)),
            ("schemas refused as",
             [bad_schema(t) for t in (
                 '<prompt schema="s"/>', '<schema generation="1"/>', '<schema name="s" generation="-1"/>',
                 '<schema name="s"><module name="a">x <param name="p" len="0"/></module></schema>',
                 '<schema name="s"><module name="a"><b/></module></schema>',
                 '<schema name="s"><union><b/></union></schema>', '<schema name="s"><b/></schema>',
                 '<schema name="s">oops<module name="a">x</module></schema>',
                 '<schema name="s"><union>oops<module name="a">x</module></union></schema>',
                 '<schema name="s"><module name="a">x</module>\n<module name="a">y</module></schema>',
                 '<schema name="s"><module name="a"><param name="p" len="1"/><param name="p" len="2"/></module></schema>',
                 '<schema name="s">\n<union></union></schema>',
                 '<schema name="s">first one<module name="a">x</module>\nsecond</schema>',
                 '<schema name="s">\n  this stray text is longer than twenty  <module name="a">x</module></schema>')] +
             [bad_schema("<schema")[0], bad_schema('<schema name="s">\n  <b></c></schema>')],
             [(P.WRONG_ROOT, "expected <schema>, found <prompt> on line 1"),
              (P.MISSING_ATTRIBUTE, "<schema> on line 1 needs name="),
              (P.BAD_NUMBER, "generation='-1' on <schema> line 1"), (P.BAD_NUMBER, "len='0' on <param> line 1"),
              (P.UNKNOWN_ELEMENT, "<b> on line 1 inside module 'a'"), (P.UNKNOWN_ELEMENT, "<b> on line 1 inside <union>"),
              (P.UNKNOWN_ELEMENT, "<b> on line 1 inside <schema>"), (P.STRAY_TEXT, "'oops' on line 1 inside <schema>"),
              (P.STRAY_TEXT, "'oops' on line 1 inside <union>"), (P.DUPLICATE_MODULE, "'a' on line 2, first on line 1"),
              (P.DUPLICATE_PARAMETER, "'p' on line 1 in module 'a'"), (P.EMPTY_UNION, "<union> on line 2"),
              (P.STRAY_TEXT, "'first one' on line 1 inside <schema>"),
              (P.STRAY_TEXT, "'this stray text is l' on line 2 inside <schema>"),
              P.NOT_WELL_FORMED, (P.NOT_WELL_FORMED, "line 2 column 8: mismatched tag")]),
            ("prompts refused as",
             [bad_prompt(b) for b in ('<zz/>', '<sys>text</sys>', '<sys/>\n<sys/>', '<u1/><u2/>', '<sys y="p"/>',
                                      '<sys x="p q r"/>')] + [bad_prompt("", "t")],
             [(P.UNDECLARED_MODULE, "<zz> on line 1 in s"), (P.CONTENT_IN_IMPORT, "<sys> on line 1 must be empty"),
              (P.REPEATED_MODULE, "<sys> on line 2, first on line 1"),
              (P.UNION_CONFLICT, "<u2> on line 1 and <u1> share a union"),
              (P.UNDECLARED_PARAMETER, "y= on <sys> line 1"),
              (P.ARGUMENT_TOO_LONG, "x= on <sys> line 1: 3 tokens, slot of 2"),
              (M.SCHEMA_ID_MISMATCH, "line 1: t != s")]),
            ("an argument filling its slot: positions", [d.positions() for _i, d in pc.parse_prompt(
                '<prompt schema="s"><sys x="p q"/></prompt>', schema, enc).items], [(0, 1, 4), (2, 3)]),
            ("revisions: generation 2 again refused as; 3 drops; rotating the namespace to 2 drops",
             (detail(lambda: store.revise_schema(schema)), store.revise_schema(revised)[1],
              store.rotate_namespace(Namespace("ns", 2, frozenset()))[1],
              store.rotate_namespace(Namespace("ns", 1, frozenset()))[1],
              pc.ModuleStore().revise_schema(attrs.evolve(schema, generation=0))[1]),
             ((P.STALE_REVISION, "s: generation 2 after 2"), ("sys", "u1", "u2"), ("sys", "u1", "u2"), (), ())),
            ("bob assembling refused as", detail(lambda: pc.assemble_markup("bob", "<prompt schema='s'/>", schema,
                                                                            store, ns, "sem", "lay", enc)),
             (M.UNAUTHORIZED_NAMESPACE, "'bob' in ns"))]


def shared_prefix_merges() -> Rows:
    """0x0BA/0x0BE/0x0BI: the merge of two valid states is (max m, l_a e^{m_a - m} + l_b e^{m_b - m}, the same for
    u, c_a + c_b) and the empty state is its two-sided identity; a valid state needs finite positive mass, a key
    and a finite maximum; Hydragen's (LSE, O) merge weighs each output by e^{LSE - max}; the ledgers' sizes must
    be non-negative and 0x0BI's at P_c: S 5, U (3, 0), 10 B rows, P_c 4, d_v 2: 2 x 5 + 3 = 13 logical, 8 unique,
    5 saved rows (130 / 80 / 50 B), ceil(8/4) + ceil(5/4) = 4 ordinary and 2 + 1 + 0 = 3 shared chunks, 2 x 2 = 4
    partial rows of 2 x 2 + 8 = 12 B."""
    import math

    from kvexact.reference import shared_prefix as sp
    from kvexact.reference.labs import shared_prefix as sp_lab

    R = sp.SharedPrefixRejection
    St = sp.PartitionState

    detail = _outcome

    a, b = St(True, 0.0, 2.0, (4.0, 1.0), 1), St(True, 0.0, 3.0, (1.0, 2.0), 2)
    hi = St(True, 1.0, 2.0, (4.0, 1.0), 1)
    e = math.exp(-1.0)
    empty = sp.empty_state(2)
    invalid = [St(True, 0.0, 0.0, (0.0,), 1), St(True, 0.0, 1.0, (0.0,), 0), St(True, math.inf, 1.0, (0.0,), 1),
               St(True, 0.0, math.inf, (0.0,), 1), St(True, 0.0, -1.0, (0.0,), 1)]
    reg = sp.regular_prefix_ledger(5, [3, 0], 10, 4, 2)
    tree = sp_lab.SEED_TREE
    return [("merges: equal maxima, unequal (both orders), with the empty state (both sides)",
             [sp.merge_states(a, b), sp.merge_states(hi, b), sp.merge_states(b, hi), sp.merge_states(empty, a),
              sp.merge_states(a, empty), sp.merge_states(empty, empty)],
             [St(True, 0.0, 5.0, (5.0, 3.0), 3), St(True, 1.0, 2.0 + 3.0 * e, (4.0 + e, 1.0 + 2.0 * e), 3),
              St(True, 1.0, 3.0 * e + 2.0, (e + 4.0, 2.0 * e + 1.0), 3), a, a, empty]),
            ("merging widths 2 and 3 refused as", detail(lambda: sp.merge_states(a, sp.empty_state(3))),
             (R.STATE_WIDTH_MISMATCH, "widths 2 and 3")),
            ("valid states with l 0, c 0, m inf, l inf, l -1 refused as",
             [detail(lambda x=x: sp.merge_states(x, x))[0] for x in invalid] +
             [detail(lambda: sp.check_state(invalid[0]))[1]], [R.INVALID_STATE] * 5 + ["valid state with m=0.0, l=0.0, c=1"]),
            ("an invalid state with no mass passes the check", detail(lambda: sp.check_state(empty)), (None, None)),
            ("finalize a, the empty state; a's LSE and output", (sp.finalize(a), sp.finalize(empty), a.lse_output()),
             ((2.0, 0.5), (0.0, 0.0), (math.log(2.0), (2.0, 0.5)))),
            ("the state of no keys; of two keys scoring 0", (sp.partition_state((1.0, 0.0), (), (), 1.0, 2),
                                                            sp.partition_state((1.0, 0.0), ((0.0, 1.0), (0.0, 2.0)),
                                                                               ((1.0, 2.0), (3.0, 4.0)), 1.0, 2)),
             (empty, St(True, 0.0, 2.0, (4.0, 6.0), 2))),
            ("merge_lse of nothing, of infinite and NaN LSEs refused as",
             [detail(lambda: sp.merge_lse([])),
              detail(lambda: sp.merge_lse([(0.0, (1.0,)), (math.inf, (2.0,)), (math.nan, (3.0,))]))],
             [(R.UNCOVERED_SEQUENCE, "no (LSE, O) pair to merge"), (R.NON_FINITE_LSE, "parts [1, 2]")]),
            ("merge_lse of equal LSEs; of LSEs log 3 and 0 (weights 1, 1/3)",
             (sp.merge_lse([(0.0, (1.0, 3.0)), (0.0, (3.0, 1.0))]),
              round(sp.merge_lse([(math.log(3.0), (1.0,)), (0.0, (5.0,))])[0], 12)), ((2.0, 2.0), 2.0)),
            ("0x0BI at S 5, U (3, 0), P_c 4", (reg.logical_rows, reg.unique_rows, reg.saved_rows, reg.baseline_bytes,
                                               reg.shared_bytes, reg.saved_bytes, reg.ordinary_chunks, reg.shared_chunks,
                                               reg.partial_rows, reg.partial_bytes),
             (13, 8, 5, 130, 80, 50, 4, 3, 4, 48)),
            ("0x0BI refused: no suffixes, P_c 0, P_c -1, a suffix of -1",
             [detail(lambda: sp.regular_prefix_ledger(5, [], 10, 4, 2)),
              detail(lambda: sp.regular_prefix_ledger(5, [3], 10, 0, 2)),
              detail(lambda: sp.regular_prefix_ledger(5, [3], 10, -1, 2)),
              detail(lambda: sp.regular_prefix_ledger(5, [3, -1], 10, 4, 2))[0]],
             [(R.EMPTY_BATCH, "no suffixes given"), (R.NON_POSITIVE_CHUNK, "chunk size 0"),
              (R.NON_POSITIVE_CHUNK, "chunk size -1"), R.NEGATIVE_SIZE]),
            ("0x0BE ledger with a negative width or byte size; with zero state bytes: partial row bytes",
             [detail(lambda k=k: sp.ledger(tree, 4, 2, 3, **{k: -1}))[0] for k in
              ("kv_elem_bytes", "out_elem_bytes", "state_bytes")] +
             [detail(lambda: sp.ledger(tree, 4, -1, 3))[0], sp.ledger(tree, 4, 2, 3, state_bytes=0).partial_row_bytes],
             [R.NEGATIVE_SIZE] * 4 + [6]),
            ("a fixture with d_qk -1 refused as", detail(lambda: sp.draw_fixture(tree, 4, -1, 3, 0)),
             (R.NEGATIVE_SIZE, "d_qk=-1, d_v=3"))]


def vmm_lifecycle() -> Rows:
    """0x06B-0x06E on the 0x06F geometry (3 bundles of 4 handles, 4-token pages, 3 pages a request): lifecycle
    steps out of order are refused by name with the phase they found; an asynchronous grow with no free bundle
    reclaims an inactive slot's top retained bundle, lowest slot first (A's on slot 0 before C's on slot 2), and
    maps nothing ready until awaited; an unmap keeps the ready frontier at or below the remaining pages; a live
    request's top page may go once its valid rows end at the page below (4 rows, 2 pages); a slot freed with its
    mappings retained has them all ready (spec/VirtualMapping.tla FreeReqid: ready' = Len(pages)); freeing with unmap
    returns every bundle, after which handles and then the range are released (every ledger 0)."""
    from kvexact.reference import vmm
    from kvexact.reference.labs import vmm as lab

    V = vmm.VmmRejection
    c = lab.SEED_CONFIG

    detail = _refusal_or_none

    s0 = vmm.VmmState.initial(c)
    s1 = vmm.reserve_virtual(s0)[0]
    s2 = vmm.create_handles(s1)[0]
    a = vmm.step_sync(vmm.alloc_reqid(s2, 0, "A")[0], 0, 4)[0]
    ac = vmm.step_sync(vmm.alloc_reqid(a, 2, "C")[0], 2, 4)[0]
    retained = vmm.free_reqid(vmm.free_reqid(ac, 0)[0], 2)[0]
    b, pending = vmm.step_async(vmm.alloc_reqid(retained, 1, "B")[0], 1, 12)
    b_ready, ready = vmm.await_mapping(b, 1)
    full = vmm.step_sync(vmm.alloc_reqid(s2, 0, "A")[0], 0, 12)[0]
    half = vmm.map_bundle(vmm.step_sync(vmm.alloc_reqid(s2, 0, "A")[0], 0, 4)[0], 0, 1, asynchronous=True)[0]
    unmapped = vmm.unmap_bundle(half, 0)[0]
    four = vmm.write_rows(vmm.step_sync(vmm.alloc_reqid(s2, 0, "A")[0], 0, 8)[0], 0, 1, 0, 4)[0]
    gone = vmm.free_reqid(full, 0, unmap=True)
    end = vmm.release_virtual(vmm.release_handles(gone[0])[0])[0]
    x = vmm.check_state(end)
    return [("out of order: reserve twice, create before reserve, create twice, alloc before reserve, map before "
             "create, release handles before create",
             [detail(lambda: vmm.reserve_virtual(s1)), detail(lambda: vmm.create_handles(s0)),
              detail(lambda: vmm.create_handles(s2)), detail(lambda: vmm.alloc_reqid(s0, 0, "A")),
              detail(lambda: vmm.map_bundle(vmm.alloc_reqid(s1, 0, "A")[0], 0, 0)),
              detail(lambda: vmm.release_handles(s1))],
             [(V.VA_ALREADY_RESERVED, "VA_RESERVED"), (V.VA_NOT_RESERVED, "UNRESERVED"),
              (V.HANDLES_ALREADY_CREATED, "12 handles"), (V.VA_NOT_RESERVED, "UNRESERVED"),
              (V.HANDLES_NOT_CREATED, "map before create"), (V.HANDLES_NOT_CREATED, "nothing to release")]),
            ("B's async grow to 12 over A's and C's retained bundles: pages, ready, covered, ready before use",
             (b.slots[1].pages, pending.ready_pages, pending.covered_tokens, pending.ready_before_use,
              len(b.slots[0].pages), len(b.slots[2].pages)),
             (((8, 9, 10, 11), (0, 1, 2, 3), (4, 5, 6, 7)), 0, 0, False, 0, 0)),
            ("B awaited: ready pages, covered, ready before use, receipt version",
             (ready.ready_pages, ready.covered_tokens, ready.ready_before_use, b_ready.version - b.version), (3, 12, True, 1)),
            ("every handle mapped: a sync grow, an async grow refused as",
             [detail(lambda: vmm.step_sync(vmm.alloc_reqid(full, 1, "D")[0], 1, 1)),
              detail(lambda: vmm.step_async(vmm.alloc_reqid(full, 1, "D")[0], 1, 1))],
             [(V.NO_FREE_HANDLES, "0 free, 4 needed"), (V.NO_FREE_HANDLES,
                                                        "no free bundle and no inactive retained page for 1")]),
            ("a pending page unmapped: pages, ready; freeing a slot with a pending page: ready",
             (len(unmapped.slots[0].pages), unmapped.slots[0].ready_pages, vmm.free_reqid(half, 0)[0].slots[0].ready_pages),
             (1, 1, 2)),
            ("A with 4 valid rows in 2 pages: unmap its top page: pages left, valid rows",
             (lambda st: (len(st.slots[0].pages), st.slots[0].valid_tokens))(vmm.unmap_bundle(four, 0)[0]), (1, 4)),
            ("A freed with unmap: receipt unmaps, detail; free handles",
             (gone[1].unmaps, gone[1].detail, len(gone[0].free_handles)),
             (3, {"slot": 0, "retained_pages": 0, "unmap": True}, 12)),
            ("released: phase, handles; ledgers; release the range again, reserve again refused as",
             (end.phase, end.handles_created, (x.virtual_bytes, x.pool_bytes, x.mapped_bytes, x.free_handle_bytes),
              detail(lambda: vmm.release_virtual(end)), detail(lambda: vmm.reserve_virtual(end))),
             ("VA_RELEASED", False, (0, 0, 0, 0), (V.VA_NOT_RESERVED, "VA_RELEASED"),
              (V.VA_ALREADY_RESERVED, "VA_RELEASED")))]


def prefix_receipt_bounds() -> Rows:
    """0x07G's claimed-receipt contract at its boundaries, on B's 40-token receipt over A's 33 cached tokens (hit
    32 in 2 bundles, S_sem 32, S_indexed 32, 8 recomputed in 1 new bundle): each claim is re-signed so only the
    contract can catch it, and each refusal names the numbers. A prompt-cap hit may reach S_prompt - 1, not
    S_prompt; a hit may equal S_sem and S_indexed, not exceed them. Publication: A's 33 tokens publish 2 full
    blocks (a trailing partial block never), a second publication of the same blocks publishes nothing but still
    advances the publication generation; under a partial-tail policy the 1-row tail is published once. Keys whose
    blocks were evicted are published again for the recomputed blocks (as vLLM does), under the same parents."""
    import attrs

    from kvexact.reference import lifecycle
    from kvexact.reference.handles import BlockHandle
    from kvexact.reference.keys import KeyInputs
    from kvexact.reference.labs import prefix as px_lab
    from kvexact.reference.prefix import PrefixPolicy, PrefixRejection, verify_receipt

    R = PrefixRejection
    s = list(px_lab.STREAM)
    forge = px_lab.forge

    detail = _refusal_or_none

    cache = px_lab.cache_with(s[:33])
    r = cache.lookup(px_lab.request("B", s[:40]))
    full, tail = PrefixPolicy(), PrefixPolicy(partial_tail=True)
    h0 = r.matched_group_handles[0]
    older = attrs.evolve(h0[0], generation=h0[0].generation + 1)

    def check(receipt: Any, policy: PrefixPolicy = full, alloc: Any = None) -> tuple[Any, Any]:
        return detail(lambda: verify_receipt(receipt, policy, 2, alloc))

    claims = [attrs.evolve(r, runtime_hit_tokens=16), forge(r, prompt_tokens=32), forge(r, prompt_tokens=33),
              forge(r, copy_valid_partial_rows=8), forge(r, runtime_hit_tokens=24), forge(r, semantic_match_tokens=31),
              forge(r, indexed_tokens=16), forge(r, prompt_rows_recomputed=7), forge(r, new_block_bundles=2),
              forge(r, matched_group_handles=r.matched_group_handles[:1]),
              forge(r, matched_group_handles=(h0[:1], r.matched_group_handles[1])),
              forge(r, matched_group_handles=((h0[0], h0[0]), r.matched_group_handles[1]))]
    pub = px_lab.fixture_cache()
    pub.alloc.allocate("A", s[:33])
    first = pub.publish("A", KeyInputs(tuple(s[:33])), px_lab.NAMESPACE, 0)
    again = pub.publish("A", KeyInputs(tuple(s[:33])), px_lab.NAMESPACE, 0)
    tails = px_lab.fixture_cache()
    tails.alloc.allocate("A", s[:33])
    with_tail = tails.publish("A", KeyInputs(tuple(s[:33])), px_lab.NAMESPACE, 0, tail)
    tail_again = tails.publish("A", KeyInputs(tuple(s[:33])), px_lab.NAMESPACE, 0, tail)
    evicted = px_lab.cache_with(s[:33])
    tree_before = {k: list(v) for k, v in evicted.children.items()}
    lifecycle.release(evicted.alloc, "A")
    evicted.alloc.allocate("Z", [9000 + i for i in range(24 * 16)])  # every block of the pool: A's are evicted
    gone = evicted.lookup(px_lab.request("B", s[:40])).runtime_hit_tokens
    lifecycle.release(evicted.alloc, "Z")
    evicted.alloc.allocate("C", s[:33])
    republished = evicted.publish("C", KeyInputs(tuple(s[:33])), px_lab.NAMESPACE, 0)
    return [("A's blocks evicted: B's hit; C recomputes and publishes A's tokens: published, generation, the tree "
             "unchanged (each key once, same parent), B's hit",
             (gone, len(republished), evicted.publication_generation, evicted.children == tree_before,
              evicted.lookup(px_lab.request("B", s[:40])).runtime_hit_tokens), (0, 2, 2, True, 32)),
            ("claims refused as", [check(x) for x in claims],
             [(R.RECEIPT_DIGEST_MISMATCH, "B"), (R.LOGITS_CAP_EXCEEDED, "S_runtime=32, S_prompt=32"),
              (R.RECOMPUTE_ROWS_MISMATCH, "8"), (R.PARTIAL_ROWS_WITHOUT_PARTIAL_POLICY, "8 rows"),
              (R.HIT_NOT_BLOCK_ALIGNED, "S_runtime=24, P=16"), (R.HIT_EXCEEDS_SEMANTIC_MATCH, "32 > 31"),
              (R.HIT_EXCEEDS_INDEXED, "32 > 16"), (R.RECOMPUTE_ROWS_MISMATCH, "7"), (R.NEW_BUNDLES_MISMATCH, "2"),
              (R.MATCHED_HANDLES_COUNT_MISMATCH, "1"), (R.HALF_GROUP_MATCH, f"{h0[:1]}"),
              (R.HALF_GROUP_MATCH, f"{(h0[0], h0[0])}")]),
            ("accepted: the receipt, with the allocator; S_sem = S_indexed = 32 claimed; the no-logits path at 32 of 32",
             [check(r), check(r, alloc=cache.alloc), check(forge(r, semantic_match_tokens=32, indexed_tokens=32)),
              check(forge(r, logits_path="no-logits", prompt_tokens=32, prompt_rows_recomputed=0, new_block_bundles=0))],
             [(None, None)] * 4),
            ("a handle of the next generation checked against the allocator refused as; without it accepted",
             [check(forge(r, matched_group_handles=((older, h0[1]), r.matched_group_handles[1])), alloc=cache.alloc),
              check(forge(r, matched_group_handles=((older, h0[1]), r.matched_group_handles[1])))],
             [(R.STALE_MATCHED_HANDLE, str(older)), (None, None)]),
            ("a handle's name", str(BlockHandle(3, 1, 7, 2)), "p3/g1/7@2"),
            ("publications: A's blocks, again; generation; children of the root and of block 0",
             (len(first), again, pub.publication_generation, len(pub.children[None]), pub.children[first[0]]),
             (2, (), 2, 1, [first[1]])),
            ("with the partial-tail policy: published, again; the tail's valid rows, parent",
             (len(with_tail), tail_again, tails.entries[with_tail[2]].valid_rows, tails.entries[with_tail[2]].parent),
             (3, (), 1, with_tail[1])),
            ("publishing tokens that are not A's refused as",
             detail(lambda: pub.publish("A", KeyInputs(tuple(s[1:34])), px_lab.NAMESPACE, 0)),
             (R.NOT_A_PREFIX_OF_REQUEST, "A: key inputs are not its tokens"))]


def negative_registry_sections() -> Rows:
    """The negative-case registry selects by section (reference/rejections.py): ``negative_cases(s)`` is exactly
    the cases of the whole registry whose section is ``s``, in registration order; a section with no case selects
    nothing; each of the seed's counted failure labs (labs.SEED_COUNTS: 0x05G 22, 0x06I 20, 0x07G 22, 0x08I 18,
    0x0D 14, 0x0CG 27) selects at least its count, every case of its own section."""
    from kvexact.reference import labs
    from kvexact.reference.rejections import negative_cases

    every = labs.cases()
    sections = sorted({c.section for c in every})
    seed = {"0x05G": 22, "0x06I": 20, "0x07G": 22, "0x08I": 18, "0x0D": 14, "0x0CG": 27}
    return [("sections whose selection differs from the whole registry filtered by section",
             [s for s in sections if negative_cases(s) != [c for c in every if c.section == s]], []),
            ("the selections of all sections together: as many as the registry", sum(len(negative_cases(s))
                                                                                    for s in sections), len(every)),
            ("a section with no case (0xFFZ) selects", negative_cases("0xFFZ"), []),
            ("the seed's counted labs: every selected case of its section, at least the seed's count",
             {s: (all(c.section == s for c in negative_cases(s)), len(negative_cases(s)) >= n) for s, n in seed.items()},
             {s: (True, True) for s in seed}),
            ("the whole registry: at least the seed's 211 cases", len(negative_cases()) >= 211, True)]


def namespace_current_only() -> Rows:
    """0x07F: only the current generation of a namespace takes lookups and publications. A namespace registered at
    generation 3 (generations 0..2 never existed, so none is retired): generation 2 (below) and 4 (above) are both
    refused as FUTURE_GENERATION ('not created' as current), for a lookup and for a publication; 3 is accepted."""
    from kvexact.reference import namespaces as nsm
    from kvexact.reference.rejections import rejection_of

    ns = nsm.CacheIsolationNamespace("prod", "t1", "ns", 3, None, 0)
    reg = nsm.create_namespace(nsm.NamespaceRegistry(), ns)
    F = nsm.NamespaceRejection.FUTURE_GENERATION
    return [("lookups at generation 2, 3, 4 refused as",
             [rejection_of(lambda g=g: nsm.authorize_lookup(reg, "t1", "ns", g)) for g in (3 - 1, 3, 3 + 1)],
             [F, None, F]),
            ("publications at generation 2, 3, 4 refused as",
             [rejection_of(lambda g=g: nsm.authorize_publish(reg, ("ns", g))) for g in (3 - 1, 3, 3 + 1)],
             [F, None, F])]


def prefix_longest_tail() -> Rows:
    """0x07D: of the partial tails published under one parent, a lookup copies rows from the one whose valid rows
    match its tokens longest. A = s[:40] publishes a tail of 40 - 32 = 8 rows after two full blocks of 16; C = the
    first 35 tokens of s then 7, 7, 7 publishes a tail of 6 rows whose first 3 match s. B = s[:45] matches A's tail
    by 8 rows and C's by 3: a hit of 32 + 8 = 40 rows with 8 copied, whichever of A and C published first."""
    from kvexact.reference.keys import KeyInputs
    from kvexact.reference.labs import prefix as px_lab
    from kvexact.reference.prefix import PrefixPolicy

    s = list(px_lab.STREAM)
    tail = PrefixPolicy(partial_tail=True)
    a, c = s[:40], [*s[:35], 7, 7, 7]
    got = []
    for (first, ft), (second, st) in ((("A", a), ("C", c)), (("C", c), ("A", a))):
        cache = px_lab.cache_with(ft, tail, request_id=first)
        cache.alloc.allocate(second, st)
        cache.publish(second, KeyInputs(tuple(st)), px_lab.NAMESPACE, 0, tail)
        r = cache.lookup(px_lab.request("B", s[:45]), tail)
        got.append((r.runtime_hit_tokens, r.copy_valid_partial_rows))
    return [("A then C, C then A published: B's hit, copied rows", got, [(32 + 8, 8), (32 + 8, 8)])]


def radix_partition_0x08F() -> Rows:
    """0x08F: tree, private and free slots are a disjoint cover of the pool's slots, exactly. On the trace's final
    state (24 pool slots: 6 tree, 18 free), a free list with one slot the pool does not hold (a cover larger than
    the pool) and one missing a pool slot (smaller) are both refused as PARTITION_VIOLATION."""
    import attrs

    from kvexact.reference import radix as rx
    from kvexact.reference.labs import radix as rx_lab
    from kvexact.reference.rejections import rejection_of

    state = rx_lab.seed_trace_0x08F()[-1].state
    outside = max(state.pool_slot_ids) + 1
    larger = attrs.evolve(state, free_slot_ids=(*state.free_slot_ids, outside))
    smaller = attrs.evolve(state, free_slot_ids=tuple(state.free_slot_ids)[1:])
    return [("free slots with one outside the pool, one pool slot missing: refused as",
             [rejection_of(lambda s=s: rx.check_state(s)) for s in (larger, smaller)],
             [rx.RadixRejection.PARTITION_VIOLATION] * 2)]


def radix_formulas_lengths_0x08D() -> Rows:
    """0x08D: the protected and evictable token sums run over the non-root nodes, one edge length and one lock count
    per node; two lists of different lengths name no set of nodes, so the formulas refuse them (ValueError) rather
    than sum a prefix of the nodes. Edges of 4 and 2 tokens, unlocked: 6 evictable, 0 protected."""
    from kvexact.reference.formulas import INT_OPS, evaluate
    from kvexact.reference.formulas_all import load_all

    load_all()

    def outcome(fid: str, locks: list[int]) -> Any:
        try:
            return evaluate(fid, INT_OPS, edge_lengths=[4, 2], locks=locks)
        except ValueError:
            return "ValueError"

    return [("evictable, protected over edges [4, 2] with locks [0, 0]; with locks [0]",
             [outcome(f, locks) for locks in ([0, 0], [0]) for f in ("radix.evictable_tokens", "radix.protected_tokens")],
             [4 + 2, 0, "ValueError", "ValueError"])]


CASES = {"vmm unmap live rows": vmm_unmap_live_rows, "namespace succession": namespace_succession,
         "prefix partial admission": prefix_partial_admission, "allocator state digest": allocator_state_digest,
         "contiguous fit": contiguous_fit, "allocator predecessors": allocator_predecessors,
         "allocator write frontier": allocator_write_frontier,
         "shared prefix chunk first": shared_prefix_chunk_first,
         "prefix lookup receipts": prefix_lookup_receipts, "prefix partial tails": prefix_partial_tails,
         "revocation walks": revocation_walks, "namespace contract": namespace_contract,
         "keys chain contract": keys_chain_contract,
         "session resume contract": session_resume_contract,
         "modules contract": modules_contract, "vmm contract": vmm_contract,
         "prompt markup contract": prompt_markup_contract,
         "shared prefix merges": shared_prefix_merges,
         "vmm lifecycle": vmm_lifecycle,
         "prefix receipt bounds": prefix_receipt_bounds,
         "negative registry sections": negative_registry_sections,
         "namespace current only 0x07F": namespace_current_only,
         "prefix longest tail 0x07D": prefix_longest_tail, "radix partition 0x08F": radix_partition_0x08F,
         "radix formulas lengths 0x08D": radix_formulas_lengths_0x08D}
