"""Prefix caching's fixtures (one namespace over a two-group allocator, a shared token stream) and its
failure lab (0x07G)."""

from __future__ import annotations

import enum
from collections.abc import Sequence

import attrs

from kvexact.reference.allocator import Allocator
from kvexact.reference.keys import KeyInputs, sha256_block_hash
from kvexact.reference.labs.allocator import expect_unchanged
from kvexact.reference.namespaces import NamespaceRegistry
from kvexact.reference.prefix import (
    PrefixCache,
    PrefixMatchReceipt,
    PrefixPolicy,
    PrefixRejection,
    PrefixRequest,
    admit,
    verify_receipt,
)
from kvexact.reference.rejections import NegativeCase, register_negative

# ---- fixtures ---------------------------------------------------------------------------------------
TENANT = "tenant-a"
NAMESPACE = "ns-a"
MANIFEST = "0" * 64
STREAM = tuple(range(1000, 1064))  # the fixture's shared token stream (values arbitrary, distinct)


def fixture_cache(block_tokens: int = 16, blocks_per_group: int = 24, check_every_op: bool = True
                  ) -> PrefixCache:
    """Two cache groups of 0x04E (48 KiB + 16 KiB rows: a 64 KiB bundle row), one namespace ``ns-a``."""
    from kvexact.reference.namespaces import CacheIsolationNamespace, create_namespace
    from kvexact.reference.pool import GroupConfig

    groups = [GroupConfig(0, 0, block_tokens, 48 * 1024), GroupConfig(1, 1, block_tokens, 16 * 1024)]
    ids = list(range(1, blocks_per_group + 1))
    alloc = Allocator(groups, [ids, ids], check_every_op=check_every_op)
    registry = create_namespace(NamespaceRegistry(), CacheIsolationNamespace(
        deployment_namespace="deploy", tenant_id=TENANT, namespace_id=NAMESPACE, generation=0, cache_salt=None,
        model_generation=0))
    return PrefixCache(alloc, registry, MANIFEST)


def request(request_id: str, tokens: Sequence[int], requires_logits: bool = True, **changes) -> PrefixRequest:
    """A lookup by the fixture's tenant in the fixture's namespace."""
    return PrefixRequest(request_id=request_id, inputs=KeyInputs(tuple(tokens)), tenant_id=TENANT,
                         namespace_id=NAMESPACE, namespace_generation=0, manifest_sha256=MANIFEST,
                         requires_logits=requires_logits, **changes)


def cache_with(tokens: Sequence[int], policy: PrefixPolicy = PrefixPolicy(), block_tokens: int = 16,
               request_id: str = "A", check_every_op: bool = True) -> PrefixCache:
    """A fixture cache whose index holds the blocks of one published request of ``tokens``."""
    cache = fixture_cache(block_tokens, check_every_op=check_every_op)
    cache.alloc.allocate(request_id, tokens)
    cache.publish(request_id, KeyInputs(tuple(tokens)), NAMESPACE, 0, policy)
    return cache


def forge(receipt: PrefixMatchReceipt, **changes) -> PrefixMatchReceipt:
    """A claimed receipt with ``changes``, re-signed so that only the contract checks can catch it."""
    out = attrs.evolve(receipt, **changes)
    return attrs.evolve(out, receipt_sha256=out.body_sha256())


# ---- 0x07G failure lab --------------------------------------------------------------------------------
def _lookup(tokens=STREAM[:50], policy: PrefixPolicy = PrefixPolicy(), **changes):
    def op(cache: PrefixCache):
        return cache.lookup(request("B", tokens, **changes), policy)

    return op


def _receipt(cache: PrefixCache, tokens=STREAM[:50]) -> PrefixMatchReceipt:
    return cache.lookup(request("B", tokens))


def _verify(**changes):
    def op(cache: PrefixCache):
        verify_receipt(forge(_receipt(cache), **changes), PrefixPolicy(), 2, cache.alloc)

    return op


def _collide(payload) -> bytes:
    """A deliberately broken hash that ignores block tokens: equal digests over different witnesses."""
    parent, _tokens, extras = payload
    return sha256_block_hash((parent, "collide", extras))


def _tampered(cache: PrefixCache):
    r = _receipt(cache)
    verify_receipt(attrs.evolve(r, runtime_hit_tokens=49), PrefixPolicy(), 2, cache.alloc)


def _first_handle_next_gen(cache: PrefixCache) -> PrefixMatchReceipt:
    r = _receipt(cache)
    first = r.matched_group_handles[0]
    bumped = (attrs.evolve(first[0], generation=first[0].generation + 1), *first[1:])
    return forge(r, matched_group_handles=(bumped, *r.matched_group_handles[1:]))


def _namespace(cache: PrefixCache, **changes):
    return cache.lookup(request("B", STREAM[:50], **changes))


_0X07G: list[tuple[str, object, object]] = [
    # (description, reason, op on a cache holding the first 48 tokens of STREAM)
    ("lookup by a tenant outside the namespace (rejected before any probe)", "UNAUTHORIZED_TENANT",
     lambda c: c.lookup(attrs.evolve(request("B", STREAM[:50]), tenant_id="tenant-b"))),
    ("lookup in a namespace generation not yet created", "FUTURE_GENERATION",
     lambda c: c.lookup(attrs.evolve(request("B", STREAM[:50]), namespace_generation=5))),
    ("lookup in an unknown namespace", "UNKNOWN_NAMESPACE",
     lambda c: c.lookup(attrs.evolve(request("B", STREAM[:50]), namespace_id="ns-z"))),
    ("lookup under another compatibility manifest", PrefixRejection.MANIFEST_MISMATCH,
     lambda c: c.lookup(attrs.evolve(request("B", STREAM[:50]), manifest_sha256="f" * 64))),
    ("logits-producing lookup of an empty prompt", PrefixRejection.EMPTY_PROMPT_WITH_LOGITS, _lookup(tokens=())),
    ("semantic match longer than the prompt", PrefixRejection.SEMANTIC_MATCH_OUT_OF_RANGE,
     _lookup(semantic_match_tokens=51)),
    ("policy block size differs from the allocator's", PrefixRejection.POLICY_BLOCK_SIZE_MISMATCH,
     _lookup(policy=PrefixPolicy(block_tokens=8))),
    ("forced equal digest over different token witnesses", PrefixRejection.COLLISION_WITNESS_MISMATCH,
     "collision"),
    ("negative token id in the prompt", "BAD_TOKEN_ID",
     lambda c: c.lookup(request("B", (*STREAM[:10], -3)))),
    ("empty cache salt", "EMPTY_SALT", lambda c: KeyInputs(STREAM[:20], cache_salt="")),
    ("admission after the allocator moved past the receipt's snapshot", PrefixRejection.STALE_INDEX_SNAPSHOT,
     "stale"),
    ("receipt altered without re-signing", PrefixRejection.RECEIPT_DIGEST_MISMATCH, _tampered),
    ("claimed hit of the whole prompt on the logits path", PrefixRejection.LOGITS_CAP_EXCEEDED,
     _verify(runtime_hit_tokens=50, prompt_rows_recomputed=0)),
    ("claimed full-block hit that is not block aligned", PrefixRejection.HIT_NOT_BLOCK_ALIGNED,
     _verify(runtime_hit_tokens=40, prompt_rows_recomputed=10)),
    ("claimed hit beyond the semantic match", PrefixRejection.HIT_EXCEEDS_SEMANTIC_MATCH,
     _verify(semantic_match_tokens=32)),
    ("claimed hit beyond the indexed prefix", PrefixRejection.HIT_EXCEEDS_INDEXED, _verify(indexed_tokens=32)),
    ("recomputed rows that do not complete the prompt", PrefixRejection.RECOMPUTE_ROWS_MISMATCH,
     _verify(prompt_rows_recomputed=1)),
    ("new bundles that do not cover the recomputed rows", PrefixRejection.NEW_BUNDLES_MISMATCH,
     _verify(new_block_bundles=0)),
    ("copy-row intent under the full-block-only policy", PrefixRejection.PARTIAL_ROWS_WITHOUT_PARTIAL_POLICY,
     _verify(copy_valid_partial_rows=1)),
    ("matched bundles fewer than the hit covers", PrefixRejection.MATCHED_HANDLES_COUNT_MISMATCH,
     lambda c: verify_receipt(forge(_receipt(c), matched_group_handles=_receipt(c).matched_group_handles[:2]),
                              PrefixPolicy(), 2, c.alloc)),
    ("matched bundle present for group 0 only", PrefixRejection.HALF_GROUP_MATCH,
     lambda c: verify_receipt(forge(_receipt(c), matched_group_handles=tuple(
         b[:1] for b in _receipt(c).matched_group_handles)), PrefixPolicy(), 2, c.alloc)),
    ("matched handle of an older generation", PrefixRejection.STALE_MATCHED_HANDLE,
     lambda c: verify_receipt(_first_handle_next_gen(c), PrefixPolicy(), 2, c.alloc)),
    ("publish key inputs that are not the request's tokens", PrefixRejection.NOT_A_PREFIX_OF_REQUEST,
     lambda c: c.publish("A", KeyInputs(STREAM[1:49]), NAMESPACE, 0)),
    ("admit a receipt for a live request id", "DUPLICATE_REQUEST",
     lambda c: admit(c, forge(_receipt(c), request_id="A"), STREAM[:50])),
]


def _reason(name):
    if isinstance(name, enum.Enum):
        return name
    from kvexact.reference.allocator import AllocRejection
    from kvexact.reference.keys import KeyRejection
    from kvexact.reference.namespaces import NamespaceRejection

    for family in (NamespaceRejection, KeyRejection, AllocRejection):
        if name in family.__members__:
            return family[name]
    raise KeyError(name)


def _special(kind: str, cache: PrefixCache):
    if kind == "stale":
        receipt = _receipt(cache)
        cache.alloc.allocate("Z", [1])  # the allocator moves on after the lookup
        return expect_lookup_unchanged(cache, lambda c: admit(c, receipt, STREAM[:50]))
    policy = PrefixPolicy(policy_id="collide", hash_fn=_collide, collision_witness=True)
    fresh = fixture_cache()
    fresh.alloc.allocate("A", STREAM[:48])
    fresh.publish("A", KeyInputs(STREAM[:48]), NAMESPACE, 0, policy)
    other = tuple(t + 1 for t in STREAM[:48])
    return expect_lookup_unchanged(fresh, lambda c: c.lookup(request("B", other), policy))


def expect_lookup_unchanged(cache: PrefixCache, op):
    """Run ``op`` on the cache; a rejection must leave the allocator digest (and the self-check) intact."""
    return expect_unchanged(cache.alloc, lambda _alloc: op(cache))


def _trigger(op):
    def trigger():
        cache = cache_with(STREAM[:48])
        if isinstance(op, str):
            return _special(op, cache)
        return expect_lookup_unchanged(cache, op)

    return trigger


def register() -> None:
    """Register the 0x07G lab's cases (called once, by :func:`kvexact.reference.labs.register_all`)."""
    for description, reason, op in _0X07G:
        register_negative(NegativeCase("0x07G", _reason(reason), description, _trigger(op)))


