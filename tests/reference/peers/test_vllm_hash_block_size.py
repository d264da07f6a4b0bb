"""vLLM 0.33.0's hash block size (0x01A: hash granularity apart from the physical block): accepted when it
divides every group's block size (or, for one group, equals it), refused by name otherwise; a finer hash
block never changes a hit (each group's block key is the last fine hash inside it, chaining the prefix)."""

from __future__ import annotations

import math
import random

import pytest

from kvexact.reference.peers.vllm import ManagerRejection, VllmConfig, VllmKVCacheManager
from kvexact.reference.peers.vllm_hybrid import (
    GroupSpec,
    HybridConfigRejection,
    check_hash_block_size,
    stored_then_lookup,
)
from kvexact.reference.rejections import Rejected

C48 = [0] * 16 + [1] * 16 + [2] * 16
A50 = list(range(50))
B50 = A50[:37] + [999] + A50[38:]
H = HybridConfigRejection

# (block sizes and windows, hash block size, the profile's refusal or None); tests/live checks vLLM agrees
CONFIGS = [
    ([(16, None), (32, None)], 16, None),
    ([(16, None), (32, None)], 8, None),
    ([(16, None), (32, None)], 1, None),
    ([(16, None), (32, None)], 32, H.HASH_BLOCK_SIZE_NOT_DIVIDING),
    ([(4, None), (6, 8)], 2, None),
    ([(4, None), (6, 8)], 4, H.HASH_BLOCK_SIZE_NOT_DIVIDING),
    ([(4, None), (6, 8)], 3, H.HASH_BLOCK_SIZE_NOT_DIVIDING),
    ([(16, None)], 16, None),
    ([(16, None)], 8, H.UNITARY_HASH_BLOCK_SIZE_MISMATCH),
    ([(16, None)], 32, H.HASH_BLOCK_SIZE_NOT_DIVIDING),
    ([(16, None), (32, None)], 0, H.BAD_HASH_BLOCK_SIZE),
]


@pytest.mark.parametrize("specs, h, reason", CONFIGS)
def test_hash_block_size_accepted_or_refused_by_name(specs, h, reason):
    groups = [GroupSpec(b, w) for b, w in specs]
    if reason is None:
        check_hash_block_size(groups, h)
        return
    with pytest.raises(Rejected) as e:
        check_hash_block_size(groups, h)
    assert e.value.reason is reason


@pytest.mark.parametrize("h", [16, 8, 4, 1])
def test_seed_prompts_hit_the_same_at_every_dividing_hash_block_size(h):
    """0x07C with groups of 16 and 32: C48 hits 32 (two 16-blocks, one 32-block), as at the gcd 16."""
    specs = [GroupSpec(16), GroupSpec(32)]
    for stored, query in ([C48], C48), ([A50], B50):
        hit = stored_then_lookup(specs, stored, (), query, hash_block_size=h)
        assert hit.hit_length == 32 and [len(b) for b in hit.blocks_by_group] == [2, 1]


def test_a_non_dividing_hash_block_size_is_refused_before_any_lookup():
    with pytest.raises(Rejected) as e:
        stored_then_lookup([GroupSpec(16), GroupSpec(32)], [C48], (), C48, hash_block_size=32)
    assert e.value.reason is H.HASH_BLOCK_SIZE_NOT_DIVIDING


def test_single_group_manager_hashes_at_its_block_size_while_caching():
    with pytest.raises(Rejected) as e:
        VllmConfig(num_blocks=8, block_size=16, hash_block_size=8)
    assert e.value.reason is ManagerRejection.UNITARY_HASH_BLOCK_SIZE_MISMATCH
    with pytest.raises(Rejected) as e:
        VllmConfig(num_blocks=8, block_size=16, hash_block_size=0)
    assert e.value.reason is ManagerRejection.BAD_CONFIG
    VllmKVCacheManager.create(VllmConfig(num_blocks=8, block_size=16, hash_block_size=16))
    VllmConfig(num_blocks=8, block_size=16, hash_block_size=8, enable_caching=False)  # no prefix caching: no check


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def test_hits_do_not_depend_on_the_hash_block_size():
    """Random hybrid scenarios (full attention and sliding windows): every divisor of the gcd gives the gcd's hit."""
    rng = random.Random(381)
    for _ in range(120):
        specs = [GroupSpec(rng.choice([2, 4, 8]), rng.choice([None, rng.randint(2, 12)]))
                 for _ in range(rng.randint(2, 3))]
        stored = [[rng.randint(0, 1) for _ in range(rng.randint(8, 24))] for _ in range(rng.randint(1, 3))]
        evicted = [(rng.randrange(len(stored)), rng.randrange(len(specs)), rng.randint(0, 5))
                   for _ in range(rng.randint(0, 3))]
        query = rng.choice(stored)[:rng.randint(4, 24)] + [rng.randint(0, 1) for _ in range(rng.randint(0, 4))]
        g = math.gcd(*(s.block_size for s in specs))
        want = stored_then_lookup(specs, stored, evicted, query)
        for h in divisors(g)[:-1]:
            got = stored_then_lookup(specs, stored, evicted, query, hash_block_size=h)
            assert (got.hit_length, got.blocks_by_group) == (want.hit_length, want.blocks_by_group)
