"""The normative radix index with page size > 1 (SGLang's paged RadixCache): whole-page matches, inserts and
splits. Expected values are docs/peers/sglang.md's scenarios S10, S11, S18 and S19, run there against SGLang."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvexact.reference import radix
from kvexact.reference.radix import RadixRejection
from kvexact.reference.rejections import Rejected


def _put(state, rid, tokens, slots):
    """Reserve ``slots`` for ``rid`` and insert ``tokens`` on them; leftover private slots are released."""
    fresh = [s for s in slots if s in state.free_slot_ids]
    if fresh:
        state, _ = radix.reserve(state, rid, fresh)
    state, receipt = radix.insert(state, tokens, slots, rid)
    if rid in state.private_slot_ids:
        state, _ = radix.release(state, rid)
    return state, receipt


def _m(state, tokens):
    state, r = radix.match(state, tokens)
    return state, (r.matched_tokens, list(r.prefix_slot_ids))


def test_s18_s19_page_four_truncates_matches_whole_pages_and_splits_on_a_page_boundary():
    st_ = radix.RadixState.empty(200, page_size=4)
    st_, ins = _put(st_, "a", list(range(1, 11)), list(range(101, 111)))
    assert ins.prefix_tokens == 0 and len(st_.tree_slot_ids()) == 8  # the 2-token tail is not stored
    assert {109, 110} <= st_.free_slot_ids
    st_, got = _m(st_, list(range(1, 11)))
    assert got == (8, list(range(101, 109)))
    st_, got = _m(st_, [1, 2, 3, 4, 5, 6, 9, 9])
    assert got == (4, [101, 102, 103, 104])
    assert st_.edges() == {(1, 2, 3, 4): (101, 102, 103, 104), (5, 6, 7, 8): (105, 106, 107, 108)}
    st_, got = _m(st_, [1, 2, 3])
    assert got == (0, [])
    # S19: a sibling differing inside its first page hangs under [1..4]
    st_, ins = _put(st_, "b", [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13], list(range(121, 133)))
    assert ins.prefix_tokens == 4 and len(st_.tree_slot_ids()) == 16
    upper = next(n for n in st_.nodes.values() if n.token_ids == (1, 2, 3, 4))
    assert sorted(upper.children) == [(5, 6, 7, 8), (5, 6, 7, 9)]


def test_s19_page_two_siblings_differ_in_their_first_page():
    st_ = radix.RadixState.empty(20, page_size=2)
    st_, _ = _put(st_, "a", [1, 2, 3, 4], [0, 1, 2, 3])
    st_, ins = _put(st_, "b", [1, 3, 5, 6], [4, 5, 6, 7])
    assert ins.prefix_tokens == 0
    assert sorted(st_.nodes[radix.ROOT].children) == [(1, 2), (1, 3)]
    for key in ([1, 2, 3, 4], [1, 3, 5, 6]):
        st_, (n, _) = _m(st_, key)
        assert n == 4
    assert len(st_.tree_slot_ids()) == 8


@pytest.mark.parametrize("page, length, want", [(1, 5, 5), (2, 5, 4), (4, 6, 4)])
def test_s10_insert_then_match_range(page, length, want):
    st_ = radix.RadixState.empty(16, page_size=page)
    st_, _ = _put(st_, "a", list(range(length)), list(range(length)))
    st_, (n, _) = _m(st_, list(range(length)))
    assert n == want and len(st_.tree_slot_ids()) == want


def test_s11_page_two_shared_slots_are_not_duplicates():
    s1 = list(range(1, 9))
    s2 = [1, 2, 9, 10]
    st_ = radix.RadixState.empty(200, page_size=2)
    st_, _ = _put(st_, "a", s1, [10 * t for t in s1])
    st_, ins = _put(st_, "b", s2, [10 * t for t in s2])  # 10, 20 are the tree's own slots
    assert ins.prefix_tokens == 2 and ins.duplicate_slot_ids == ()
    assert _m(st_, [1, 2, 3, 4, 999, 1000])[1] == (4, [10, 20, 30, 40])
    assert _m(st_, s1)[1][0] == 8
    assert _m(st_, [1, 2, 3, 4, 5, 6, 777, 888])[1] == (6, [10, 20, 30, 40, 50, 60])
    st_, got = _m(st_, s2)
    assert got == (4, [10, 20, 90, 100]) and len(st_.tree_slot_ids()) == 10


def test_publish_unfinished_keeps_an_unaligned_tail_private_and_takes_it_again():
    st_ = radix.RadixState.empty(12, page_size=2)
    st_, _ = radix.reserve(st_, "r", [0, 1, 2, 3, 4])
    st_, _ = radix.publish_unfinished(st_, "r", [7, 8, 9], [0, 1, 2])
    assert st_.requests["r"].protected_tokens == 2 and st_.edges() == {(7, 8): (0, 1)}
    assert st_.private_slot_ids["r"] == (2, 3, 4)
    st_, _ = radix.publish_unfinished(st_, "r", [9, 5, 6], [2, 3, 4])  # the tail again, then new tokens
    assert st_.requests["r"].protected_tokens == 4 and st_.private_slot_ids["r"] == (4,)
    st_, _ = radix.cache_finished(st_, "r", [7, 8, 9, 5, 6], [0, 1, 2, 3, 4])
    assert "r" not in st_.private_slot_ids and st_.free_slot_ids == frozenset({4, *range(5, 12)})
    assert radix.check_state(st_).evictable_tokens == 4


def test_match_and_lock_reports_whole_pages():
    st_ = radix.RadixState.empty(12, page_size=3)
    st_, _ = _put(st_, "a", [1, 2, 3, 4, 5, 6], [0, 1, 2, 3, 4, 5])
    st_, receipt = radix.match_and_lock(st_, "q", 0, [1, 2, 3, 4, 5, 9, 9])
    assert receipt.matched_tokens == 3 and receipt.suffix_interval == (3, 7)
    radix.verify_handoff(st_, receipt)


@pytest.mark.parametrize("page", [0, -1, True, 1.5, "2"])
def test_a_bad_page_size_is_rejected_by_name(page):
    with pytest.raises(Rejected) as exc:
        radix.RadixState.empty(8, page_size=page)
    assert exc.value.reason is RadixRejection.BAD_PAGE_SIZE


def _one_edge_state():
    st_ = radix.RadixState.empty(8, page_size=2)
    st_, _ = _put(st_, "a", [1, 2, 3, 4], [0, 1, 2, 3])
    return st_, next(n for n in st_.nodes.values() if n.node_id != radix.ROOT)


def test_an_edge_of_a_partial_page_is_rejected_by_name():
    st_, node = _one_edge_state()
    bad = attrs.evolve(st_, nodes={**st_.nodes, node.node_id: attrs.evolve(node, token_ids=(1, 2, 3),
                                                                           slot_ids=(0, 1, 2))},
                       free_slot_ids=st_.free_slot_ids | {3})
    with pytest.raises(Rejected) as exc:
        radix.check_state(bad)
    assert exc.value.reason is RadixRejection.EDGE_NOT_PAGE_ALIGNED


def test_a_child_filed_under_its_first_token_instead_of_its_first_page_is_rejected_by_name():
    st_, node = _one_edge_state()
    root = st_.nodes[radix.ROOT]
    bad = attrs.evolve(st_, nodes={**st_.nodes, radix.ROOT: attrs.evolve(root, children={1: node.node_id})})
    with pytest.raises(Rejected) as exc:
        radix.check_state(bad)
    assert exc.value.reason is RadixRejection.CHILD_SELECTOR_MISMATCH


KEYS = st.lists(st.lists(st.integers(1, 3), min_size=0, max_size=9), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(page=st.integers(2, 4), inserted=KEYS, queries=KEYS)
def test_a_paged_match_is_the_page_floor_of_the_token_match(page, inserted, queries):
    """Same inserts at page size 1 and P: every P-match is floor_P of the 1-match (whole pages of the
    longest common prefix with an inserted key), every edge holds whole pages."""
    flat = radix.RadixState.empty(64)
    paged = radix.RadixState.empty(64, page_size=page)
    for i, key in enumerate(inserted):
        slots = sorted(flat.free_slot_ids)[: len(key)]
        flat, _ = _put(flat, f"r{i}", key, slots)
        paged, _ = _put(paged, f"r{i}", key, sorted(paged.free_slot_ids)[: len(key)])
    for q in queries + inserted:
        flat, (n1, _) = _m(flat, q)
        paged, (np_, slots) = _m(paged, q)
        assert np_ == n1 - n1 % page and len(slots) == np_
    assert all(len(t) % page == 0 for t in paged.edges())
