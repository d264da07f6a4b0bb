"""The vLLM 0.33.0 hybrid coordinator profile on the seed's prompts, and against the reference's
declarative convergence (``kvexact.reference.hybrid``) on random stored requests and evictions."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from kvexact.reference.hybrid import CacheGroup, HybridIndex
from kvexact.reference.peers.vllm_hybrid import (
    GroupSpec,
    hash_view,
    stored_then_lookup,
)

C48 = [0] * 16 + [1] * 16 + [2] * 16
A50 = list(range(50))
B50 = A50[:37] + [999] + A50[38:]


def _profile(specs, stored, query, evicted=()):
    return stored_then_lookup(specs, stored, evicted, query)


def test_hash_view_takes_the_last_fine_hash_of_each_block():
    assert hash_view([b"A", b"B", b"C", b"D", b"E"], 16, 32) == (b"B", b"D")  # docs/peers/vllm.md §2


def test_seed_prompts_with_groups_of_16_and_32():
    specs = [GroupSpec(16), GroupSpec(32)]
    hit = _profile(specs, [C48], C48)
    assert hit.hit_length == 32 and [len(b) for b in hit.blocks_by_group] == [2, 1]
    hit = _profile(specs, [A50], B50)
    assert hit.hit_length == 32 and [len(b) for b in hit.blocks_by_group] == [2, 1]


def test_groups_of_16_and_48_converge_to_nothing_on_the_loop6_prompt():
    specs = [GroupSpec(16), GroupSpec(48)]
    hit = _profile(specs, [A50], B50)
    assert hit.hit_length == 0 and hit.blocks_by_group == ((), ())


def test_sliding_window_lowers_the_full_attention_hit():
    specs = [GroupSpec(16), GroupSpec(16, sliding_window=32)]
    hit = _profile(specs, [A50], A50, evicted=[(0, 1, 1)])
    assert hit.hit_length == 16 and hit.uncached_common_prefix == 32  # full attention alone had 48
    assert len(hit.blocks_by_group[0]) == 1


def test_a_sliding_window_run_must_end_on_the_common_alignment():
    # lcm(8, 4) = 8; the window needs ceil(11 / 4) = 3 blocks; block 3 (rows 12-15) is evicted, so the
    # run 0-2 ends at row 12, which is not a multiple of 8: the hit falls back to rows 0-7
    specs = [GroupSpec(8), GroupSpec(4, sliding_window=12)]
    tokens = list(range(16))
    hit = _profile(specs, [tokens], tokens + [99], evicted=[(0, 1, 3)])
    assert hit.hit_length == 8 and [len(b) for b in hit.blocks_by_group] == [1, 2]


def _scenario(specs, stored_lengths, tokens, evict=(), query_length=None):
    """docs/peers/vllm.md §8: prompts cut from ``tokens``, keys removed as (fine hash index, group)."""
    stored = [tokens[:n] for n in stored_lengths]
    evicted = [(0, g, i) for i, g in evict]
    return stored_then_lookup(specs, stored, evicted, tokens[:query_length])


def test_notes_scenario_17_full_attention_and_two_windows():
    specs = [GroupSpec(16), GroupSpec(16, sliding_window=32), GroupSpec(16, sliding_window=32)]
    prompt = C48 + [3] * 7
    measured = {(): 3, ((0, 1), (0, 2)): 3, ((0, 0),): 0, ((2, 0), (2, 1), (2, 2)): 2, ((2, 0),): 2, ((2, 1),): 2,
                ((2, 0), (0, 1), (0, 2)): 0, ((1, 1),): 1}
    for removed, blocks in measured.items():
        hit = _scenario(specs, [55, 53], prompt, removed, query_length=53)
        assert hit.hit_length == 16 * blocks, removed


def test_notes_scenario_18_different_block_sizes():
    specs = [GroupSpec(32), GroupSpec(16, sliding_window=32)]  # hash block 16, scheduler block 32
    tokens = list(range(160))
    hit = _scenario(specs, [112], tokens, query_length=113)
    assert hit.hit_length == 96 and [len(b) for b in hit.blocks_by_group] == [3, 6]
    assert hit.blocks_by_group[1][:4] == (0, 0, 0, 0)  # null blocks left of the window's run
    assert _scenario(specs, [112], tokens, query_length=97).hit_length == 96
    hit = _scenario(specs, [112], tokens, [(5, 1), (6, 1)], query_length=113)
    assert hit.hit_length == 64 and [len(b) for b in hit.blocks_by_group] == [2, 4]


SIZES = st.sampled_from([2, 4, 8])
SPEC = st.builds(GroupSpec, SIZES, st.one_of(st.none(), st.integers(2, 12)))
TOKENS = st.lists(st.integers(0, 1), min_size=8, max_size=24)
TAIL = st.lists(st.integers(0, 1), max_size=6)


@st.composite
def scenarios(draw):
    specs = draw(st.lists(SPEC, min_size=1, max_size=3))
    stored = draw(st.lists(TOKENS, min_size=1, max_size=3))
    evicted = draw(st.lists(st.tuples(st.integers(0, len(stored) - 1), st.integers(0, len(specs) - 1),
                                      st.integers(0, 5)), max_size=3))
    base = draw(st.sampled_from(stored))
    query = base[:draw(st.integers(len(base) // 2, len(base)))] + draw(TAIL)
    return specs, stored, evicted, query or [0]


@settings(max_examples=300, deadline=None)
@given(scenarios())
@example(([GroupSpec(8), GroupSpec(4, sliding_window=12)], [list(range(16))], [(0, 1, 3)], list(range(16)) + [9]))
def test_profile_and_reference_agree_on_the_converged_hit(scenario):
    specs, stored, evicted, query = scenario
    hit = _profile(specs, stored, query, evicted)
    index = HybridIndex.empty([CacheGroup(s.block_size, s.sliding_window) for s in specs])
    for tokens in stored:
        index = index.publish(tokens)
    for r, g, j in evicted:
        end = (j + 1) * specs[g].block_size
        if end <= len(stored[r]):
            index = index.evict(g, stored[r][:end])
    assert hit.hit_length == index.lookup(query)
    for s, blocks in zip(specs, hit.blocks_by_group, strict=True):
        if s.sliding_window is None:
            assert len(blocks) == hit.hit_length // s.block_size
