"""0x07D partial-tail policies: eager copy at admission, or share the cached tail until the first divergent write."""

from __future__ import annotations

import pytest

from kvexact.reference import prefix as px
from kvexact.reference import tails
from kvexact.reference.labs import prefix as px_lab
from kvexact.reference.labs.allocator import expect_unchanged
from kvexact.reference.rejections import Rejected

S = px_lab.STREAM
PARTIAL = px.PrefixPolicy(partial_tail=True)


def _shared(prompt: int, requires_logits: bool = True):
    cache = px_lab.cache_with(S[:50], PARTIAL)
    r = cache.lookup(px_lab.request("B", S[:prompt], requires_logits=requires_logits), PARTIAL)
    rec, receipts = px.admit(cache, r, S[:prompt], PARTIAL, tail_policy="shared")
    return cache, r, rec, receipts


def test_0x07d_shared_tail_maps_a_s_tail_and_writes_nothing():
    """50 = 3 blocks of 16 + 2 rows. B's row 48 is the partial hit, row 49 (the logits row) is recomputed but
    A's tail already holds it: B maps A's four blocks, allocates none (eager: one bundle)."""
    cache, r, rec, receipts = _shared(50)
    alloc = cache.alloc
    assert (r.runtime_hit_tokens, r.copy_valid_partial_rows) == (49, 1)
    assert receipts == [] and rec.context_tokens == 50 and alloc.tokens_of("B") == S[:50]
    assert rec.tables == alloc.request("A").tables
    tail = rec.tables[0][-1]
    assert alloc.refcount(tail) == 3  # A's map, B's map and the cache's pin
    eager = px_lab.cache_with(S[:50], PARTIAL)
    _, eager_receipts = px.admit(eager, eager.lookup(px_lab.request("B", S[:50]), PARTIAL), S[:50], PARTIAL)
    assert sum(x.new_physical_blocks for x in eager_receipts) == 2  # one bundle of two groups
    alloc.self_check()


def test_the_first_divergent_write_copies_and_the_tail_keeps_its_rows():
    cache, _, rec, _ = _shared(50)
    alloc = cache.alloc
    tail = rec.tables[0][-1]
    receipt = tails.append_shared(alloc, "B", 900)
    assert receipt is not None and receipt.paths == ("cow", "cow") and receipt.copied_rows == 2
    assert alloc.tokens_of("B") == (*S[:50], 900) and alloc.request("B").tables[0][-1] != tail
    assert alloc.pools[0].blocks[tail.block_id].rows == S[48:50]
    a = alloc.append("A", 901)  # the publisher's own append copies too: the pin is a second holder
    assert a.paths == ("cow", "cow") and alloc.pools[0].blocks[tail.block_id].rows == S[48:50]
    assert alloc.tokens_of("A") == (*S[:50], 901)
    alloc.self_check()


def test_a_full_cached_block_shared_as_a_tail_serves_rows_it_already_holds():
    """10 tokens, no full block: A's cached block 0 serves rows 0..8, and B's recomputed row 9 is A's row 9."""
    cache, r, rec, receipts = _shared(10)
    alloc = cache.alloc
    assert (r.copy_valid_partial_rows, r.runtime_hit_tokens) == (9, 9)
    assert receipts == [] and rec.tables[0] == alloc.request("A").tables[0][:1]
    assert alloc.tokens_of("B") == S[:10]
    assert not cache.tail_pins  # a cached full block is immutable by its key: no pin
    assert tails.append_shared(alloc, "B", S[10]) is None  # still A's row: shared, nothing written
    receipt = tails.append_shared(alloc, "B", 900)
    assert receipt is not None and receipt.copied_rows == 11
    alloc.self_check()


def test_unpublish_drops_the_pin_and_the_index_entry():
    cache, _, rec, _ = _shared(50)
    alloc = cache.alloc
    (key,) = cache.tail_pins
    leases = len(alloc.leases)
    tails.unpublish_tail(cache, key)
    assert len(alloc.leases) == leases - 2 and key not in cache.entries and not cache.tail_pins
    assert alloc.refcount(rec.tables[0][-1]) == 2
    alloc.self_check()


def test_unknown_tail_policy_is_refused_by_name():
    cache = px_lab.cache_with(S[:50], PARTIAL)
    r = cache.lookup(px_lab.request("B", S[:50]), PARTIAL)
    with pytest.raises(Rejected) as exc:
        expect_unchanged(cache.alloc, lambda _a: px.admit(cache, r, S[:50], PARTIAL, tail_policy="lazy"))
    assert exc.value.reason is tails.TailRejection.UNKNOWN_TAIL_POLICY


@pytest.mark.parametrize("rows, bundle, reason", [
    (0, 2, tails.TailRejection.TAIL_ROWS_OUT_OF_RANGE),
    (3, 2, tails.TailRejection.TAIL_ROWS_OUT_OF_RANGE),  # A's tail holds 2 rows
    (1, 1, tails.TailRejection.TAIL_BUNDLE_MISMATCH),
])
def test_malformed_shared_tails_are_refused_by_name(rows, bundle, reason):
    cache = px_lab.cache_with(S[:50], PARTIAL)
    alloc = cache.alloc
    a = alloc.request("A")
    keys = cache.lookup(px_lab.request("B", S[:48], requires_logits=False)).matched_keys
    tail = tuple(t[-1] for t in a.tables)[:bundle]
    with pytest.raises(Rejected) as exc:
        expect_unchanged(alloc, lambda al: tails.prefix_hit_tail(al, "B", keys, tail, rows))
    assert exc.value.reason is reason


def test_unpublishing_an_unknown_tail_is_refused_by_name():
    cache = px_lab.cache_with(S[:50], PARTIAL)
    with pytest.raises(Rejected) as exc:
        tails.unpublish_tail(cache, "f" * 64)
    assert exc.value.reason is tails.TailRejection.TAIL_NOT_PUBLISHED
