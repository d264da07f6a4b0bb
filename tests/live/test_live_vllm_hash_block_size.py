"""The real vLLM 0.33.0 ``KVCacheManager`` against the profile on hash block sizes apart from the physical
block size: the same configurations are built or refused, and hybrid hits at a finer hash block size agree."""

from __future__ import annotations

import json
import math
import random
import subprocess

import pytest

from kvexact.reference.peers.vllm_hybrid import GroupSpec, check_hash_block_size, stored_then_lookup
from kvexact.reference.rejections import Rejected

# (groups as (block size, window), hash block size): dividing, finer than the gcd, not dividing, one group
CONFIGS = [([(16, None), (32, None)], h) for h in (1, 8, 16, 32)] + \
    [([(4, None), (6, 8)], h) for h in (1, 2, 3, 4)] + [([(16, None)], h) for h in (8, 16, 32)]

LIVE = """
import json, sys
from kvexact.conformance.live.vllm_hybrid import hybrid_hit, manager_refusal
job = json.load(sys.stdin)
refusals = [manager_refusal([tuple(s) for s in specs], h, caching) for specs, h, caching in job["configs"]]
hits = [hybrid_hit([tuple(s) for s in sc["specs"]], sc["stored"], [tuple(e) for e in sc["evicted"]], sc["query"],
                   sc["h"]) for sc in job["scenarios"]]
print(json.dumps({"refusals": refusals, "hits": hits}))
"""


def profile_refuses(specs, h) -> bool:
    try:
        check_hash_block_size([GroupSpec(b, w) for b, w in specs], h)
    except Rejected:
        return True
    return False


def scenarios(rng: random.Random, count: int) -> list[dict]:
    """Two or three groups of 2, 4 or 8 tokens (full attention or a window), prompts over {0, 1}, evictions,
    hashed at a random divisor of the gcd."""
    out = []
    for _ in range(count):
        specs = [[rng.choice([2, 4, 8]), rng.choice([None, rng.randint(2, 12)])] for _ in range(rng.randint(2, 3))]
        stored = [[rng.randint(0, 1) for _ in range(rng.randint(8, 24))] for _ in range(rng.randint(1, 3))]
        evicted = [[rng.randrange(len(stored)), rng.randrange(len(specs)), rng.randint(0, 5)]
                   for _ in range(rng.randint(0, 3))]
        base = rng.choice(stored)
        query = base[:rng.randint(len(base) // 2, len(base))] + [rng.randint(0, 1) for _ in range(rng.randint(0, 6))]
        g = math.gcd(*(b for b, _ in specs))
        out.append({"specs": specs, "stored": stored, "evicted": evicted, "query": query or [0],
                    "h": rng.choice([d for d in range(1, g + 1) if g % d == 0])})
    return out


def run_live(python, job, cwd):
    """Run in ``cwd`` outside the checkout, so that ``kvexact`` is the installed package, not ./kvexact."""
    run = subprocess.run([python, "-c", LIVE], input=json.dumps(job), cwd=cwd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_live_manager_builds_or_refuses_as_the_profile_says(runtime_python, tmp_path):
    configs = [(specs, h, True) for specs, h in CONFIGS]
    configs.append(([(16, None)], 8, False))  # without prefix caching a single group may hash at any size
    refused = run_live(runtime_python, {"configs": configs, "scenarios": []}, tmp_path)["refusals"]
    want = [profile_refuses(specs, h) for specs, h in CONFIGS] + [False]
    assert [r is not None for r in refused] == want, list(zip(configs, refused, strict=True))
    assert 0 < sum(want) < len(want)


@pytest.mark.slow
def test_live_hybrid_hits_at_a_finer_hash_block_size_match_the_profile(runtime_python, tmp_path):
    cases = scenarios(random.Random(38), 150)
    live = run_live(runtime_python, {"configs": [], "scenarios": cases}, tmp_path)["hits"]
    profile = []
    for c in cases:
        hit = stored_then_lookup([GroupSpec(b, w) for b, w in c["specs"]], c["stored"],
                                 [tuple(e) for e in c["evicted"]], c["query"], hash_block_size=c["h"])
        profile.append([hit.hit_length, [len(b) for b in hit.blocks_by_group]])
    diverging = [(c, lv, pr) for c, lv, pr in zip(cases, live, profile, strict=True) if [lv[0], list(lv[1])] != pr]
    assert not diverging, diverging[:3]
    assert sum(1 for c in cases if c["h"] < math.gcd(*(b for b, _ in c["specs"]))) > 20  # finer than the gcd
    assert sum(1 for lv in live if lv[0] > 0) > len(cases) // 4
