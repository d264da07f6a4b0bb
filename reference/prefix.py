"""Prefix caching over the live allocator: four prefix lengths, all-group lookup, receipts (seed 0x07).

Invariants:

* ``0 <= S_runtime <= min(S_sem, S_indexed, S_cap) <= S_prompt`` with ``S_cap = S_prompt - 1`` for a
  logits-producing request (0x07A); the full-block policy returns ``P * floor(min(...) / P)``;
* a lookup authorizes the namespace before it derives or probes any key (0x07F): a rejected lookup has
  made no index probe (``PrefixCache.probes`` is unchanged);
* the walk follows the parent-hash chain of ``keys.py`` in order and stops at the first block that is
  missing in any cache group, has a stale handle, or was published under another namespace (0x07C);
* lookup never mutates the allocator; :func:`admit` maps a receipt's hit into a new request (a prefix hit) and
  appends the rest through the allocator, so ``N_new = ceil(S_recompute / P)`` bundles are reserved.

Keys are ``ConcretePrefixKey.block_hash`` in hex; the allocator's weak index stores them per cache group
(the group id is combined with the hash there, as in 0x07B).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import attrs

from kvexact.reference import formulas_seed as F
from kvexact.reference import lifecycle, tails
from kvexact.reference.allocator import Allocator, RequestRecord, ceil_div
from kvexact.reference.digests import sha256_hex
from kvexact.reference.handles import BlockHandle
from kvexact.reference.keys import HashFn, KeyInputs, hash_full_blocks, partial_tail_key, sha256_block_hash
from kvexact.reference.ledgers import full_hit_tokens, full_hit_tokens_capped, recompute_tokens
from kvexact.reference.namespaces import NamespaceRegistry, authorize_lookup, authorize_publish
from kvexact.reference.rejections import Rejected


class PrefixRejection(enum.Enum):
    """Named malformed prefix lookups, publications, admissions and claimed receipts (0x07G)."""

    MANIFEST_MISMATCH = "compatibility manifest differs from the index's"
    EMPTY_PROMPT_WITH_LOGITS = "a logits-producing request needs at least one prompt token"
    SEMANTIC_MATCH_OUT_OF_RANGE = "semantic match must lie in 0..S_prompt"
    POLICY_BLOCK_SIZE_MISMATCH = "policy block size differs from the allocator's block size"
    COLLISION_WITNESS_MISMATCH = "equal digest over different token witnesses (secondary-witness policy)"
    STALE_INDEX_SNAPSHOT = "the allocator changed since the receipt's index snapshot"
    RECEIPT_DIGEST_MISMATCH = "receipt_sha256 does not match the receipt's fields"
    LOGITS_CAP_EXCEEDED = "runtime hit reaches the last prompt row of a logits-producing request"
    HIT_NOT_BLOCK_ALIGNED = "a full-block policy returned a hit that is not a multiple of P"
    HIT_EXCEEDS_SEMANTIC_MATCH = "runtime hit exceeds the semantic match"
    HIT_EXCEEDS_INDEXED = "runtime hit exceeds the contiguous indexed prefix"
    RECOMPUTE_ROWS_MISMATCH = "prompt_rows_recomputed != S_prompt - S_runtime"
    NEW_BUNDLES_MISMATCH = "new_block_bundles != ceil(rows past the full-block hit / P)"
    PARTIAL_ROWS_WITHOUT_PARTIAL_POLICY = "copy-row intent under a full-block-only policy"
    MATCHED_HANDLES_COUNT_MISMATCH = "matched bundles do not cover the runtime hit"
    HALF_GROUP_MATCH = "a matched bundle lacks a cache group"
    STALE_MATCHED_HANDLE = "a matched handle's generation is no longer current"
    NOT_A_PREFIX_OF_REQUEST = "published blocks must be the request's own full blocks"
    GROUP_BLOCK_SIZES_DIFFER = "cache groups of different block sizes need hybrid_prefix.HybridPrefixCache"


@attrs.frozen
class PrefixPolicy:
    """Which hits a runtime may return: full blocks only, or also an immutable partial tail (0x07D)."""

    policy_id: str = "full-block/sha256"
    block_tokens: int = 16
    partial_tail: bool = False
    collision_witness: bool = False
    hash_fn: HashFn = sha256_block_hash


@attrs.frozen
class PrefixRequest:
    """A lookup: who asks (tenant, namespace and generation), what (key inputs), and the logits path."""

    request_id: str
    inputs: KeyInputs
    tenant_id: str
    namespace_id: str
    namespace_generation: int
    manifest_sha256: str
    requires_logits: bool = True
    request_generation: int = 1
    semantic_match_tokens: int | None = None  # S_sem from the semantic check; None: derive from the index


@attrs.frozen
class PrefixMatchReceipt:
    """What a lookup proved and what remains to execute (0x07G)."""

    request_id: str
    request_generation: int
    index_snapshot_id: str
    index_publication_generation: int
    compatibility_manifest_sha256: str
    namespace_id: str
    namespace_generation: int
    policy_id: str
    prompt_tokens: int
    semantic_match_tokens: int
    indexed_tokens: int
    cap_tokens: int
    runtime_hit_tokens: int
    prompt_rows_recomputed: int
    matched_group_handles: tuple[tuple[BlockHandle, ...], ...]
    matched_keys: tuple[str, ...]
    new_block_bundles: int
    new_capacity_bytes: int
    useful_recompute_bytes: int
    copy_valid_partial_rows: int
    logits_path: str
    receipt_sha256: str = ""

    def body_sha256(self) -> str:
        return sha256_hex(attrs.evolve(self, receipt_sha256=""))


@attrs.frozen
class _Entry:
    scope: tuple[str, int]
    parent: str | None
    witness: tuple[int, ...]  # the tokens the entry's block holds (the secondary witness)
    valid_rows: int


class PrefixCache:
    """The prefix index over one allocator: entry scopes and witnesses beside the allocator's weak index."""

    def __init__(self, alloc: Allocator, registry: NamespaceRegistry, manifest_sha256: str) -> None:
        sizes = [g.block_tokens for g in alloc.groups]
        if len(set(sizes)) > 1:  # one key per bundle needs one block size; hybrid groups key per group
            raise Rejected(PrefixRejection.GROUP_BLOCK_SIZES_DIFFER, f"group block sizes {sizes}")
        self.alloc = alloc
        self.registry = registry
        self.manifest_sha256 = manifest_sha256
        self.entries: dict[str, _Entry] = {}
        self.children: dict[str | None, list[str]] = {}
        self.publication_generation = 0
        self.probes = 0
        self._tail_blocks: dict[str, tuple] = {}  # partial-tail key -> the publishing request's tables
        self.tail_pins: dict[str, tuple[int, ...]] = {}  # shared partial-tail key -> the cache's lease ids

    @property
    def block_tokens(self) -> int:
        return self.alloc.groups[0].block_tokens

    def publish(self, request_id: str, inputs: KeyInputs, namespace_id: str, namespace_generation: int,
                policy: PrefixPolicy = PrefixPolicy()) -> tuple[str, ...]:
        """Publish the weak identities of the request's full blocks (and, under a partial policy, its
        immutable partial tail) in its namespace; blocks already keyed are skipped."""
        authorize_publish(self.registry, (namespace_id, namespace_generation))
        tokens = self.alloc.tokens_of(request_id)
        if tuple(inputs.tokens) != tokens:
            raise Rejected(PrefixRejection.NOT_A_PREFIX_OF_REQUEST, f"{request_id}: key inputs are not its tokens")
        p = self.block_tokens
        hashes = [h.hex() for h in hash_full_blocks(inputs, p, policy.hash_fn)]
        rec = self.alloc.request(request_id)
        published = []
        parent: str | None = None
        for j, key in enumerate(hashes):
            evicted = key in self.entries and lifecycle.lookup_all_groups(self.alloc, key) is None
            if self.alloc.pools[0].blocks[rec.tables[0][j].block_id].cache_key is None and (
                    key not in self.entries or evicted):
                # a key whose block was evicted is published again for the recomputed block (as vLLM does)
                lifecycle.cache_block(self.alloc, request_id, j, key)
                self._add(key, _Entry((namespace_id, namespace_generation), parent, tokens[j * p:(j + 1) * p], p))
                published.append(key)
            parent = key
        if policy.partial_tail and len(tokens) % p:
            key = partial_tail_key(inputs, p, 0, policy.policy_id, policy.hash_fn).block_hash.hex()
            if key not in self.entries:
                j = len(hashes)
                self._add(key, _Entry((namespace_id, namespace_generation), parent, tokens[j * p:], len(tokens) - j * p))
                self._tail_blocks[key] = rec.tables  # the immutable tail is pinned by the request's map
                published.append(key)
        self.publication_generation += 1
        return tuple(published)

    def _add(self, key: str, entry: _Entry) -> None:
        previous = self.entries.get(key)
        if previous is not None:  # re-publication after eviction: the entry moves to its new parent
            self.children.get(previous.parent, []).remove(key)
        self.entries[key] = entry
        self.children.setdefault(entry.parent, []).append(key)

    def forget(self, key: str) -> None:
        """Drop the index entry ``key`` (a withdrawn partial tail: a leaf of the chain)."""
        entry = self.entries.pop(key)
        self.children.get(entry.parent, []).remove(key)
        self.publication_generation += 1

    def _bundle(self, key: str) -> tuple[BlockHandle, ...] | None:
        self.probes += 1
        return lifecycle.lookup_all_groups(self.alloc, key)

    def lookup(self, req: PrefixRequest, policy: PrefixPolicy = PrefixPolicy()) -> PrefixMatchReceipt:
        """0x07C/0x07F: authorize, check compatibility, walk the chain, freeze a receipt. Read-only."""
        authorize_lookup(self.registry, req.tenant_id, req.namespace_id, req.namespace_generation)
        if req.manifest_sha256 != self.manifest_sha256:
            raise Rejected(PrefixRejection.MANIFEST_MISMATCH, f"{req.manifest_sha256[:12]} != "
                           f"{self.manifest_sha256[:12]}")
        tokens = tuple(req.inputs.tokens)
        s_prompt = len(tokens)
        if req.requires_logits and s_prompt < 1:
            raise Rejected(PrefixRejection.EMPTY_PROMPT_WITH_LOGITS, req.request_id)
        if policy.block_tokens != self.block_tokens:
            hash_full_blocks(req.inputs, policy.block_tokens)  # a non-positive size is the key's rejection
            raise Rejected(PrefixRejection.POLICY_BLOCK_SIZE_MISMATCH, f"policy {policy.block_tokens}, "
                           f"allocator {self.block_tokens}")
        if req.semantic_match_tokens is not None and not 0 <= req.semantic_match_tokens <= s_prompt:
            raise Rejected(PrefixRejection.SEMANTIC_MATCH_OUT_OF_RANGE,
                           f"S_sem={req.semantic_match_tokens}, S_prompt={s_prompt}")
        p = self.block_tokens
        scope = (req.namespace_id, req.namespace_generation)
        s_cap = F.logits_cap(prompt_tokens=s_prompt) if req.requires_logits else s_prompt
        hashes = [h.hex() for h in hash_full_blocks(req.inputs, p, policy.hash_fn)]
        matched: list[tuple[BlockHandle, ...]] = []
        keys: list[str] = []
        for j, key in enumerate(hashes):  # uncapped contiguous walk: S_indexed
            entry = self.entries.get(key)
            bundle = self._bundle(key) if entry is not None and entry.scope == scope else None
            if bundle is None:
                break
            if policy.collision_witness and entry is not None and entry.witness != tokens[j * p:(j + 1) * p]:
                raise Rejected(PrefixRejection.COLLISION_WITNESS_MISMATCH, f"block {j}: key {key[:12]}")
            matched.append(bundle)
            keys.append(key)
        s_indexed = len(matched) * p
        parent = keys[-1] if keys else None
        # longest common prefix with an indexed child of the last matched block (semantic frontier)
        extra_rows, child_key = 0, None
        for child in self.children.get(parent, []):
            entry = self.entries[child]
            if entry.scope != scope:
                continue
            rest = tokens[len(matched) * p:]
            n = 0
            while n < min(len(rest), entry.valid_rows) and entry.witness[n] == rest[n]:
                n += 1
            if n > extra_rows:
                extra_rows, child_key = n, child
        s_sem = req.semantic_match_tokens if req.semantic_match_tokens is not None else s_indexed + extra_rows
        limit = min(s_sem, s_cap)
        if req.requires_logits:
            runtime = full_hit_tokens_capped(semantic_tokens=s_sem, indexed_tokens=s_indexed, prompt_tokens=s_prompt,
                                             block_tokens=p)
        else:
            runtime = full_hit_tokens(rows_tokens=min(s_sem, s_indexed, s_cap), block_tokens=p)
        full_blocks = runtime // p
        partial_rows = 0
        if policy.partial_tail and limit > runtime:
            if full_blocks < len(matched):  # the next matched full block serves the capped rows
                partial_rows = limit - runtime
            elif child_key is not None and extra_rows:
                bundle = self._tail_bundle(child_key)
                if bundle is not None:
                    partial_rows = min(extra_rows, limit - runtime)
                    s_indexed += extra_rows
                    matched.append(bundle)
                    keys.append(child_key)
        kept = full_blocks + (1 if partial_rows else 0)
        matched, keys = matched[:kept], keys[:kept]
        runtime += partial_rows
        recompute = recompute_tokens(prompt_tokens=s_prompt, hit_tokens=runtime)
        new_bundles = F.new_blocks(recompute_tokens=s_prompt - full_blocks * p, block_tokens=p)
        row_bytes = sum(g.row_bytes for g in self.alloc.groups)
        receipt = PrefixMatchReceipt(
            request_id=req.request_id, request_generation=req.request_generation,
            index_snapshot_id=self.alloc.digest(), index_publication_generation=self.publication_generation,
            compatibility_manifest_sha256=self.manifest_sha256, namespace_id=req.namespace_id,
            namespace_generation=req.namespace_generation, policy_id=policy.policy_id, prompt_tokens=s_prompt,
            semantic_match_tokens=s_sem, indexed_tokens=s_indexed, cap_tokens=s_cap, runtime_hit_tokens=runtime,
            prompt_rows_recomputed=recompute, matched_group_handles=tuple(matched), matched_keys=tuple(keys),
            new_block_bundles=new_bundles, new_capacity_bytes=F.new_capacity_bytes(new_blocks=new_bundles, block_tokens=p, row_bytes=row_bytes),
            useful_recompute_bytes=recompute * row_bytes, copy_valid_partial_rows=partial_rows,
            logits_path="prompt-cap" if req.requires_logits else "no-logits")
        return attrs.evolve(receipt, receipt_sha256=receipt.body_sha256())

    def _tail_bundle(self, key: str) -> tuple[BlockHandle, ...] | None:
        """The bundle holding an indexed child's rows: a full block's cached bundle, or a published tail's."""
        self.probes += 1
        bundle = lifecycle.lookup_all_groups(self.alloc, key)
        if bundle is not None:
            return bundle
        tables = self._tail_blocks.get(key)
        if tables is None:
            return None
        handles = tuple(t[-1] for t in tables)
        for h in handles:
            if self.alloc.pools[h.cache_group_id].blocks[h.block_id].generation != h.generation:
                return None
        return handles


def verify_receipt(receipt: PrefixMatchReceipt, policy: PrefixPolicy, num_groups: int,
                   alloc: Allocator | None = None) -> None:
    """Check a claimed receipt (e.g. reported by a runtime under test) against the 0x07 contract."""
    p = policy.block_tokens
    if receipt.receipt_sha256 != receipt.body_sha256():
        raise Rejected(PrefixRejection.RECEIPT_DIGEST_MISMATCH, receipt.request_id)
    run, partial = receipt.runtime_hit_tokens, receipt.copy_valid_partial_rows
    if receipt.logits_path == "prompt-cap" and run > receipt.prompt_tokens - 1:
        raise Rejected(PrefixRejection.LOGITS_CAP_EXCEEDED, f"S_runtime={run}, S_prompt={receipt.prompt_tokens}")
    if partial and not policy.partial_tail:
        raise Rejected(PrefixRejection.PARTIAL_ROWS_WITHOUT_PARTIAL_POLICY, f"{partial} rows")
    if (run - partial) % p:
        raise Rejected(PrefixRejection.HIT_NOT_BLOCK_ALIGNED, f"S_runtime={run}, P={p}")
    if run > receipt.semantic_match_tokens:
        raise Rejected(PrefixRejection.HIT_EXCEEDS_SEMANTIC_MATCH, f"{run} > {receipt.semantic_match_tokens}")
    if run > receipt.indexed_tokens:
        raise Rejected(PrefixRejection.HIT_EXCEEDS_INDEXED, f"{run} > {receipt.indexed_tokens}")
    if receipt.prompt_rows_recomputed != receipt.prompt_tokens - run:
        raise Rejected(PrefixRejection.RECOMPUTE_ROWS_MISMATCH, f"{receipt.prompt_rows_recomputed}")
    if receipt.new_block_bundles != ceil_div(receipt.prompt_tokens - (run - partial), p):
        raise Rejected(PrefixRejection.NEW_BUNDLES_MISMATCH, f"{receipt.new_block_bundles}")
    if len(receipt.matched_group_handles) != (run - partial) // p + (1 if partial else 0):
        raise Rejected(PrefixRejection.MATCHED_HANDLES_COUNT_MISMATCH, f"{len(receipt.matched_group_handles)}")
    for bundle in receipt.matched_group_handles:
        if len(bundle) != num_groups or sorted(h.cache_group_id for h in bundle) != list(range(num_groups)):
            raise Rejected(PrefixRejection.HALF_GROUP_MATCH, f"{bundle}")
        if alloc is not None:
            for h in bundle:
                if alloc.pools[h.cache_group_id].blocks[h.block_id].generation != h.generation:
                    raise Rejected(PrefixRejection.STALE_MATCHED_HANDLE, f"{h}")


def admit(cache: PrefixCache, receipt: PrefixMatchReceipt, tokens: Sequence[int],
          policy: PrefixPolicy = PrefixPolicy(), tail_policy: str = "eager") -> tuple[RequestRecord, list]:
    """Map a hit's full blocks into a new request and append the other rows through the allocator.

    A partial-tail hit (0x07D) maps only its full blocks: the ``copy_valid_partial_rows`` rows its last
    matched block holds are copied, eagerly, into the request's own fresh block (the first receipts), so
    the source tail is never shared and no later write can reach it; the recomputed rows follow. The
    receipt's snapshot digest guarantees the source still holds exactly the rows the lookup matched; ``tokens``
    whose copied rows differ from them are not the looked-up prompt (COLLISION_WITNESS_MISMATCH, nothing changes).

    ``tail_policy="shared"`` maps the partial tail's block itself instead (:mod:`kvexact.reference.tails`):
    the request sees its ``copy_valid_partial_rows`` rows, a published tail is pinned by the cache, and the
    rest of ``tokens`` is appended with :func:`tails.append_shared` (rows the tail already holds are shared,
    the first divergent one copies)."""
    tails.check_tail_policy(tail_policy)
    alloc = cache.alloc
    verify_receipt(receipt, policy, len(alloc.groups), alloc)
    if receipt.index_snapshot_id != alloc.digest():
        raise Rejected(PrefixRejection.STALE_INDEX_SNAPSHOT, receipt.request_id)
    copied = receipt.copy_valid_partial_rows
    full = (receipt.runtime_hit_tokens - copied) // cache.block_tokens
    if copied:
        start = full * cache.block_tokens
        for h in receipt.matched_group_handles[full]:
            source = alloc.pools[h.cache_group_id].blocks[h.block_id].rows
            if source[:copied] != tuple(tokens[start:start + copied]):  # the tokens are not the looked-up ones
                raise Rejected(PrefixRejection.COLLISION_WITNESS_MISMATCH, f"the {copied} copied rows of block {full}")

    shared = tail_policy == "shared" and copied > 0
    tail_key = receipt.matched_keys[full] if shared else ""

    def run():
        receipts = []
        pins: tuple[int, ...] = ()
        if shared:
            tail = receipt.matched_group_handles[full]
            tails.prefix_hit_tail(alloc, receipt.request_id, receipt.matched_keys[:full], tail, copied)
            if tail_key in cache._tail_blocks and tail_key not in cache.tail_pins:
                pins = tails.pin_tail(alloc, tail)
            for t in tokens[full * cache.block_tokens + copied:]:
                receipts.append(tails.append_shared(alloc, receipt.request_id, t))
            return alloc.request(receipt.request_id), [r for r in receipts if r is not None], pins
        if full:
            lifecycle.prefix_hit(alloc, receipt.request_id, receipt.matched_keys[:full])
        for t in tokens[full * cache.block_tokens:]:
            receipts.append(alloc.append(receipt.request_id, t))
        return alloc.request(receipt.request_id), receipts, pins

    rec, receipts, pins = alloc.transact(run)
    if pins:
        cache.tail_pins[tail_key] = pins
    return rec, receipts
