"""Hybrid cache groups (seed 0x07C): one common hit across groups with different block sizes, on the
seed's worked prompts (0x07E: 48 tokens, P = 16, cap 47 -> 32; Loop 6: 50 tokens changed at position 37
-> 32 rows) with a second group of P = 32 or 48 (0x0AC's allocator block sizes)."""

from __future__ import annotations

import pytest

from kvexact.reference.hybrid import (
    CacheGroup,
    HybridIndex,
    HybridRejection,
    alignment,
    cached_blocks,
    converged_hit,
)
from kvexact.reference.rejections import Rejected

C48 = [0] * 16 + [1] * 16 + [2] * 16  # 0x07E's three cached blocks
A50 = list(range(50))
B50 = A50[:37] + [999] + A50[38:]  # Loop 6: token position 37 changed


def _hit(groups, stored, query):
    """Each stored prompt is published in turn; then one lookup."""
    index = HybridIndex.empty(groups)
    for tokens in stored:
        index = index.publish(tokens)
    return index.lookup(query)


def test_publication_stops_at_the_common_frontier_and_starts_at_its_own_hit():
    # 50 tokens, lcm(16, 32) = 32: the 16-group publishes blocks 0 and 1 only, the 32-group block 0
    index = HybridIndex.empty([CacheGroup(16), CacheGroup(32)]).publish(A50)
    assert [sorted(len(p) for p in c) for c in index.counts] == [[16, 32], [32]]
    # B50 hits A50's 32 rows: nothing new below 32, and 32..47 is past B50's aligned length (32) too
    assert index.publish(B50).counts == index.counts
    # a block only one group lost is published again beside the other group's surviving block
    index = index.evict(1, A50[:32]).publish(A50)
    assert index.counts[0][tuple(A50[:16])] == 2 and index.counts[1][tuple(A50[:32])] == 1
    assert cached_blocks(CacheGroup(16), A50, [A50[:16]]) == {0}


def test_seed_complete_prompt_edge_with_one_and_two_groups():
    assert _hit([CacheGroup(16)], [C48], C48) == 32  # 0x07E: cap 47 rounds down to 32
    assert _hit([CacheGroup(16), CacheGroup(32)], [C48], C48) == 32


def test_seed_loop6_divergence_with_groups_of_16_and_32():
    assert _hit([CacheGroup(16)], [A50], B50) == 32  # the two complete ancestor blocks
    assert _hit([CacheGroup(16), CacheGroup(32)], [A50], B50) == 32


def test_groups_agree_on_one_frontier_or_nothing():
    # lcm(16, 48) = 48: the 16-group alone would reuse 32 rows, the 48-group's block 0 holds row 37
    assert alignment([CacheGroup(16), CacheGroup(48)]) == 48
    assert _hit([CacheGroup(16), CacheGroup(48)], [A50], B50) == 0
    # a block present in one group but evicted from the other is not a partial hit
    groups = [CacheGroup(16), CacheGroup(32)]
    assert converged_hit(groups, [{0, 1, 2}, set()], 47) == 0
    assert converged_hit(groups, [{0, 1, 2}, {0}], 47) == 32


def test_sliding_window_group_needs_the_blocks_before_the_frontier():
    groups = [CacheGroup(16), CacheGroup(16, window=32)]  # ceil(31 / 16) = 2 blocks before the frontier
    assert converged_hit(groups, [{0, 1, 2}, {1, 2}], 49) == 48  # block 0 left the window
    assert converged_hit(groups, [{0, 1, 2}, {0, 2}], 49) == 16  # 48 needs {1, 2}, 32 needs {0, 1}


def test_a_common_hit_ends_on_the_lcm_even_when_a_window_run_ends_earlier():
    groups = [CacheGroup(8), CacheGroup(4, window=12)]  # lcm 8; the window needs 3 blocks of 4
    assert converged_hit(groups, [{0, 1}, {0, 1, 2}], 16) == 8  # the run 0-2 ends at row 12


def test_notes_scenario_18_different_block_sizes():
    """docs/peers/vllm.md §8, scenario 18 (measured on vLLM 0.33.0): full attention of 32 and a window
    of 32 over blocks of 16; 112 of 160 tokens computed and published."""
    tokens = list(range(160))
    index = HybridIndex.empty([CacheGroup(32), CacheGroup(16, window=32)]).publish(tokens[:112])
    assert index.lookup(tokens[:113]) == 96 and index.lookup(tokens[:97]) == 96
    assert index.evict(1, tokens[:96]).evict(1, tokens[:112]).lookup(tokens[:113]) == 64


@pytest.mark.parametrize("make, reason", [
    (lambda: alignment([]), HybridRejection.NO_GROUPS),
    (lambda: CacheGroup(0), HybridRejection.BAD_BLOCK_SIZE),
    (lambda: CacheGroup(16, window=1), HybridRejection.BAD_WINDOW),
    (lambda: converged_hit([CacheGroup(16)], [set()], -1), HybridRejection.NEGATIVE_CAP),
], ids=lambda v: getattr(v, "name", ""))
def test_malformed_hybrid_lookups_are_refused_by_name(make, reason):
    with pytest.raises(Rejected) as exc:
        make()
    assert exc.value.reason is reason
