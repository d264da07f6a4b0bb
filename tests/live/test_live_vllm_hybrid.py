"""The real vLLM 0.33.0 hybrid coordinator (``conformance/live/vllm_hybrid.py``, in the runtime
environment) against the profile (``reference/peers/vllm_hybrid.py``) on random hybrid scenarios: groups
of block sizes 2, 4 and 8, full attention or sliding window, stored prompts sharing prefixes, evictions."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from kvexact.reference.peers.vllm_hybrid import GroupSpec, stored_then_lookup

LIVE = """
import json, sys
from kvexact.conformance.live.vllm_hybrid import hybrid_hit
out = [hybrid_hit([tuple(s) for s in sc["specs"]], sc["stored"], [tuple(e) for e in sc["evicted"]], sc["query"])
       for sc in json.load(sys.stdin)]
print(json.dumps(out))
"""


def scenarios(seed: int, count: int) -> list[dict]:
    """Random scenarios drawn like the profile's Hypothesis test (prompts over {0, 1}, 8-24 tokens)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        specs = [[rng.choice([2, 4, 8]), rng.choice([None, rng.randint(2, 12)])] for _ in range(rng.randint(1, 3))]
        stored = [[rng.randint(0, 1) for _ in range(rng.randint(8, 24))] for _ in range(rng.randint(1, 3))]
        evicted = [[rng.randrange(len(stored)), rng.randrange(len(specs)), rng.randint(0, 5)]
                   for _ in range(rng.randint(0, 3))]
        base = rng.choice(stored)
        query = base[:rng.randint(len(base) // 2, len(base))] + [rng.randint(0, 1) for _ in range(rng.randint(0, 6))]
        out.append({"specs": specs, "stored": stored, "evicted": evicted, "query": query or [0]})
    return out


def profile_hits(cases: list[dict]) -> list[list]:
    hits = []
    for sc in cases:
        hit = stored_then_lookup([GroupSpec(b, w) for b, w in sc["specs"]], sc["stored"],
                                 [tuple(e) for e in sc["evicted"]], sc["query"])
        hits.append([hit.hit_length, [len(b) for b in hit.blocks_by_group]])
    return hits


def live_hits(python: str, cases: list[dict], cwd: Path) -> list[list]:
    """Run in ``cwd`` outside the checkout, so that ``kvexact`` is the installed package, not ./kvexact."""
    run = subprocess.run([python, "-c", LIVE], input=json.dumps(cases), cwd=cwd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    return [[hit, list(lengths)] for hit, lengths in json.loads(run.stdout.strip().splitlines()[-1])]


@pytest.mark.slow
def test_live_hybrid_coordinator_matches_the_profile(runtime_python, tmp_path):
    cases = scenarios(seed=23, count=200)
    live, profile = live_hits(runtime_python, cases, tmp_path), profile_hits(cases)
    diverging = [(c, lv, pr) for c, lv, pr in zip(cases, live, profile, strict=True) if lv != pr]
    assert not diverging, diverging[:3]
    assert sum(1 for lv in live if lv[0] > 0) > len(cases) // 4  # the scenarios do reach nonzero hits
