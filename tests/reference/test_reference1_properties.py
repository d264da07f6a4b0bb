"""Properties over generated inputs: ledger identities, cost-vector bounds, translator injectivity."""

from hypothesis import given
from hypothesis import strategies as st

from kvexact.reference.keys import KeyInputs, hash_full_blocks, matching_full_blocks
from kvexact.reference.labs.ledgers import nested_prefix_cost, worked_fixture
from kvexact.reference.labs.translate import loop4_snapshot
from kvexact.reference.ledgers import LedgerFixture, RequestView, compute_ledger
from kvexact.reference.namespaces import InvalidationReason
from kvexact.reference.translate import resolve_kv_address


@st.composite
def nested_prefix_family(draw):
    """Requests that are exact prefixes of the longest one, sharing its blocks (the 0x0D shape)."""
    P = draw(st.sampled_from([1, 2, 4, 8, 16]))
    longest = draw(st.integers(1, 80))
    others = draw(st.lists(st.integers(0, longest), max_size=4))
    n_blocks = -(-longest // P)
    ids = list(range(100, 100 + n_blocks))
    pool = draw(st.integers(n_blocks, n_blocks + 6))
    lengths = [longest, *others]
    requests = [RequestView(f"r{i}", t, t + draw(st.integers(0, 40)), ids[: -(-t // P)]) for i, t in enumerate(lengths)]
    valid = [(b, P if j < n_blocks - 1 else longest - (n_blocks - 1) * P) for j, b in enumerate(ids)]
    full = [b for b, v in valid if v == P]
    return LedgerFixture(row_bytes=draw(st.sampled_from([2, 64, 65536])), block_tokens=P, requests=requests,
                         valid_rows_by_block=valid, pool_block_ids=tuple(range(100, 100 + pool)),
                         cached_hash_block_ids=full, free_queue_block_ids=tuple(range(100 + n_blocks, 100 + pool)),
                         record_sizes=worked_fixture().record_sizes)


@given(nested_prefix_family())
def test_ledger_identities_hold_for_every_nested_family(fixture):
    led = compute_ledger(fixture)
    for name, (lhs, rhs) in led.identities().items():
        assert lhs == rhs, name
    assert led.unique_blocks <= led.ref_blocks
    assert led.unique_materialized_bytes <= led.logical_bytes
    assert 0 <= led.unique_tail_slots < fixture.block_tokens
    # each view's tail = the physical tail of its last block + rows other views materialized there
    valid = dict(fixture.valid_rows_by_block)
    physical = sum(fixture.block_tokens - valid[r.block_ids[-1]] for r in fixture.requests if r.block_ids)
    assert led.request_view_tail_slots == physical + led.request_view_tail_valid_slots


@given(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128]), st.lists(st.integers(1, 200), min_size=2, max_size=5))
def test_cost_vector_bounds(P, lengths):
    c = nested_prefix_cost(P, lengths, pool_slots=P * 64)
    consumers = sum(lengths) - max(lengths)
    assert 0 <= c.full_hit_tokens_capped <= c.partial_hit_tokens_capped <= consumers
    assert c.full_hit_tokens_capped <= c.full_hit_tokens
    assert c.recompute_tokens_capped + c.full_hit_tokens_capped == consumers
    assert c.unique_tail_bytes < P * 64 * 1024


@given(st.lists(st.integers(0, 50), min_size=1, max_size=40), st.integers(0, 39), st.integers(1, 8))
def test_a_change_invalidates_exactly_the_descendants(tokens, position, P):
    position = position % len(tokens)
    changed = list(tokens)
    changed[position] += 1
    a = hash_full_blocks(KeyInputs(tokens), P)
    b = hash_full_blocks(KeyInputs(changed), P)
    assert matching_full_blocks(a, b) == min(position // P, len(a))


@given(st.integers(0, 32), st.integers(0, 31), st.sampled_from("KV"), st.integers(0, 3), st.integers(0, 127))
def test_translator_addresses_lie_inside_their_tensor(token, layer, kind, head, lane):
    s = loop4_snapshot()
    r = resolve_kv_address(s, "A", token, layer, kind, head, lane)
    group = s.layout.group(r.cache_group_id)
    pool = s.pool(r.cache_group_id)
    base = pool.k_base_address if kind == "K" else pool.v_base_address
    assert base <= r.byte_address < base + 2 * 8 * len(group.layer_ids) * 16 * 4 * 128
    assert r.slot_id == s.pool(r.cache_group_id).descriptor(r.handle.block_id).physical_slot * 16 + token % 16


@given(st.lists(st.sampled_from(list(InvalidationReason)), min_size=1, max_size=6))
def test_no_retired_generation_entry_is_ever_a_hit(reasons):
    from kvexact.reference.namespaces import (
        CacheIsolationNamespace,
        NamespaceRegistry,
        create_namespace,
        entry_visible,
        invalidate,
    )

    reg = create_namespace(NamespaceRegistry(), CacheIsolationNamespace("prod", "t1", "ns", 0, "s", 0))
    published = [reg.get("ns").scope]
    for reason in reasons:
        reg, receipt = invalidate(reg, "ns", reason)
        current = reg.get("ns")
        assert current.generation == receipt.retired.generation + 1
        assert not any(entry_visible(current, scope) for scope in published)
        published.append(current.scope)
    assert reg.retired == frozenset(published[:-1])
