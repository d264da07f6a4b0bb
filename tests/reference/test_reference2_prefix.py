"""0x07A-0x07E prefix fixtures, the 0x09C staircase and the 0x07G failure lab through the live allocator."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvexact.reference import labs
from kvexact.reference import prefix as px
from kvexact.reference.keys import KeyInputs, hash_full_blocks
from kvexact.reference.labs import prefix as px_lab
from kvexact.reference.namespaces import NamespaceRejection
from kvexact.reference.rejections import Rejected

KiB = 1024
MiB = 1024 * KiB
S = px_lab.STREAM


def test_0x07b_change_at_token_37_returns_two_blocks():
    cache = px_lab.cache_with(S[:50])
    changed = list(S[:50])
    changed[37] = 7
    a = hash_full_blocks(KeyInputs(S[:50]), 16)
    b = hash_full_blocks(KeyInputs(tuple(changed)), 16)
    assert a[:2] == b[:2] and a[2] != b[2]  # the change and every descendant differ
    r = cache.lookup(px_lab.request("B", changed))
    assert (r.semantic_match_tokens, r.runtime_hit_tokens) == (37, 32)
    assert len(r.matched_group_handles) == 2 and all(len(b) == 2 for b in r.matched_group_handles)


@pytest.mark.parametrize("prompt, runtime, recompute", [(48, 32, 16), (50, 48, 2), (16, 0, 16)])
def test_0x07e_complete_prompt_hit_edge(prompt, runtime, recompute):
    cache = px_lab.cache_with(S[:48])
    r = cache.lookup(px_lab.request("B", S[:prompt]))
    assert r.cap_tokens == prompt - 1
    assert (r.runtime_hit_tokens, r.prompt_rows_recomputed, r.new_block_bundles) == (runtime, recompute, 1)
    assert r.new_capacity_bytes == 1 * MiB
    assert r.useful_recompute_bytes == recompute * 64 * KiB
    assert 0 <= r.runtime_hit_tokens <= min(r.semantic_match_tokens, r.indexed_tokens, r.cap_tokens) <= prompt
    px.verify_receipt(r, px.PrefixPolicy(), 2, cache.alloc)


def test_0x07e_admission_allocates_one_bundle():
    cache = px_lab.cache_with(S[:48])
    epoch = cache.alloc.epoch
    r = cache.lookup(px_lab.request("B", S[:50]))
    rec, receipts = px.admit(cache, r, S[:50])
    assert rec.context_tokens == 50 and cache.alloc.tokens_of("B") == S[:50]
    assert sum(x.new_physical_blocks for x in receipts) == 2  # one bundle: one block per group
    assert cache.alloc.epoch == epoch + 1
    assert rec.tables[0][:3] == cache.alloc.request("A").tables[0]
    r48 = cache.lookup(px_lab.request("C", S[:48]))
    rec, receipts = px.admit(cache, r48, S[:48])
    assert sum(x.new_physical_blocks for x in receipts) == 2 and rec.context_tokens == 48
    assert rec.tables[0][2] != cache.alloc.request("A").tables[0][2]  # block 2 recomputed in a new bundle


def test_0x07d_partial_tail_reuses_one_more_row():
    policy = px.PrefixPolicy(policy_id="partial-tail/sha256", partial_tail=True)
    cache = px_lab.cache_with(S[:50], policy)
    full = cache.lookup(px_lab.request("B", S[:50]))
    part = cache.lookup(px_lab.request("B", S[:50]), policy)
    assert (full.runtime_hit_tokens, part.runtime_hit_tokens) == (48, 49)
    assert part.copy_valid_partial_rows == 1 and part.prompt_rows_recomputed == 1
    assert part.new_block_bundles == 1
    px.verify_receipt(part, policy, 2, cache.alloc)


@pytest.mark.parametrize("prompt, copied, full", [(50, 1, 3), (25, 8, 1), (10, 9, 0)])
def test_a_partial_tail_hit_is_admitted_by_copying_its_valid_rows(prompt, copied, full):
    """0x07D: the full blocks are shared, the partial rows are copied into the admitted request's own block
    (the source keeps its rows and its references), and the rest is appended after them.
    50: A's published tail (2 rows) serves row 48 (the logits cap); 25: A's full block 1 serves rows
    16..23; 10: A's block 0, a child of the root, serves rows 0..8 with no full block to share."""
    policy = px.PrefixPolicy(partial_tail=True)
    cache = px_lab.cache_with(S[:50], policy)
    alloc = cache.alloc
    a_tables = alloc.request("A").tables
    a_refs = [[alloc.refcount(h) for h in t] for t in a_tables]
    r = cache.lookup(px_lab.request("B", S[:prompt]), policy)
    assert (r.copy_valid_partial_rows, r.runtime_hit_tokens, r.prompt_rows_recomputed) == (
        copied, 16 * full + copied, prompt - 16 * full - copied)
    rec, receipts = px.admit(cache, r, S[:prompt], policy)
    assert rec.context_tokens == prompt and alloc.tokens_of("B") == tuple(S[:prompt])
    assert len(receipts) == prompt - 16 * full
    for g, table in enumerate(rec.tables):
        assert table[:full] == a_tables[g][:full]  # shared full blocks
        assert table[full] not in a_tables[g]  # the copy lands in a block of B's own
        assert alloc.pools[g].blocks[table[full].block_id].rows[:copied] == tuple(S[16 * full:16 * full + copied])
    assert alloc.request("A").tables == a_tables and alloc.tokens_of("A") == tuple(S[:50])
    for g, table in enumerate(a_tables):  # one more reference on each shared block, none on the source
        assert [alloc.refcount(h) for h in table] == [n + (j < full) for j, n in enumerate(a_refs[g])]
    alloc.self_check()


@pytest.mark.parametrize("p, hit, recompute, uncapped", [
    (4, 36, 5, 40), (8, 32, 9, 40), (16, 16, 25, 32), (32, 0, 41, 0), (64, 0, 41, 0)])
def test_0x09c_full_block_staircase(p, hit, recompute, uncapped):
    cache = px_lab.cache_with(S[:33], block_tokens=p)
    pol = px.PrefixPolicy(block_tokens=p)
    capped = [cache.lookup(px_lab.request(n, S[:t]), pol) for n, t in (("B", 25), ("C", 16))]
    assert sum(r.runtime_hit_tokens for r in capped) == hit
    assert sum(r.prompt_rows_recomputed for r in capped) == recompute
    free = [cache.lookup(px_lab.request(n, S[:t], requires_logits=False), pol) for n, t in (("B", 25), ("C", 16))]
    assert sum(r.runtime_hit_tokens for r in free) == uncapped


def test_0x09c_partial_tail_reuses_39():
    policy = px.PrefixPolicy(partial_tail=True)
    cache = px_lab.cache_with(S[:33], policy)
    b = cache.lookup(px_lab.request("B", S[:25]), policy)
    c = cache.lookup(px_lab.request("C", S[:16]), policy)
    assert (b.runtime_hit_tokens, c.runtime_hit_tokens) == (24, 15)


def test_authorization_before_any_probe():
    cache = px_lab.cache_with(S[:48])
    probes = cache.probes
    with pytest.raises(Rejected) as exc:
        cache.lookup(attrs.evolve(px_lab.request("B", S[:48]), tenant_id="intruder"))
    assert exc.value.reason is NamespaceRejection.UNAUTHORIZED_TENANT
    assert cache.probes == probes
    cache.lookup(px_lab.request("B", S[:48]))
    assert cache.probes > probes


def test_collision_without_witness_policy_is_accepted_silently():
    pol = px.PrefixPolicy(policy_id="collide", hash_fn=px_lab._collide)
    cache = px_lab.fixture_cache()
    cache.alloc.allocate("A", S[:48])
    cache.publish("A", KeyInputs(S[:48]), px_lab.NAMESPACE, 0, pol)
    r = cache.lookup(px_lab.request("B", tuple(t + 1 for t in S[:48])), pol)
    assert r.runtime_hit_tokens == 32  # the hash alone cannot tell: why 0x07F's witness policy exists


@given(st.integers(1, 60), st.integers(0, 60), st.booleans())
def test_invariant_chain_holds(prompt, change_at, logits):
    tokens = list(S[:prompt])
    if change_at < prompt:
        tokens[change_at] = 5
    cache = px_lab.cache_with(S[:48], check_every_op=False)
    r = cache.lookup(px_lab.request("B", tokens, requires_logits=logits))
    assert 0 <= r.runtime_hit_tokens <= min(r.semantic_match_tokens, r.indexed_tokens, r.cap_tokens) <= prompt
    assert r.runtime_hit_tokens == 16 * (min(r.semantic_match_tokens, r.indexed_tokens, r.cap_tokens) // 16)
    px.verify_receipt(r, px.PrefixPolicy(), 2, cache.alloc)


CASES = labs.cases("0x07G")


def test_at_least_22_prefix_cases():
    assert len(CASES) >= 22 and len({c.reason for c in CASES}) >= 22


@pytest.mark.parametrize("case", CASES, ids=[c.description for c in CASES])
def test_prefix_case_rejected_by_name(case):
    with pytest.raises(Rejected) as exc:
        case.trigger()
    assert exc.value.reason is case.reason, exc.value
