"""The streams on which the profile diverged from the real vLLM 0.33.0 code (issue 19: V1, V2, V3)."""

from __future__ import annotations

from kvexact.reference.peers.vllm import VllmConfig, VllmKVCacheManager
from kvexact.reference.peers.vllm_hashing import BlockHasher, MMFeature, RequestExtras, block_extra_keys

IMAGES = RequestExtras(mm=(MMFeature("imgA", 30, 5), MMFeature("imgB", 36, 3)))


def test_v1_decode_completed_block_keys_every_overlapping_item():
    """Block size 16, 40-token prompt, images at [30,35) and [36,39), 8 decoded tokens: block 2 keys
    both images, as vLLM's hasher resumes at the first item overlapping the block."""
    manager = VllmKVCacheManager.create(VllmConfig(16, 16))
    request = manager.make_request("r", list(range(40)), IMAGES)
    assert len(request.block_hashes) == 2
    grown = request.append_output(manager.hasher, list(range(100, 108)))
    assert grown.block_extra_keys[2] == (("mm", "imgA", -2), ("mm", "imgB", 4))
    assert grown.block_extra_keys[1] == (("mm", "imgA", 14),)


def test_v1_continued_hashing_equals_hashing_at_once():
    hasher = BlockHasher(16)
    tokens = list(range(48))
    at_once = hasher.extend(tokens, IMAGES, (), ())
    first = hasher.extend(tokens[:40], IMAGES, (), ())
    continued = hasher.extend(tokens, IMAGES, *first)
    assert continued == at_once
    assert block_extra_keys(IMAGES, 32, 48, 0)[0] == at_once[1][2]
