"""Block hashing against the golden digests of docs/peers/vllm.md §2 (measured on vLLM 0.33.0)."""

from __future__ import annotations

import hashlib
import pickle

import numpy as np
import pytest

from kvexact.reference.peers.vllm_hashing import (
    BlockHasher,
    HashAlgo,
    HashRejection,
    LoraRef,
    MMFeature,
    RequestExtras,
    block_extra_keys,
    external_hash,
    hash_function,
    key_with_group,
    none_hash,
    split_key,
    untagged,
    xxhash_available,
)
from kvexact.reference.rejections import Rejected

SHA256_NONE = "066b1e8987e027138e98701c46128929378935f9b6cd1549105ae6b4f0d71198"
CBOR_NONE = "9bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0"
GOLDEN = {
    HashAlgo.SHA256: ("9da1c53089c000ad1a79a77c143b68dda00e2a85315bc1f690bbd03ba4a195dd",
                      "1c9b6c0620e875631f1c5395ed56f2243aa113f88fc842f04fbb0654074b8d43"),
    HashAlgo.SHA256_CBOR: ("c49ab11fb576db6f376aef58c24f728a0ba1807e8cac5f940f1a5c4c20741898",
                           "9d0a7c928c548f9aeea31ae98471cf515045a206851732ac14cb3083c18d40f9"),
}
SALTED_CBOR_BLOCK0 = "484761d76512b019413b1505b9061753e461d4de1b84f54f7983aec4e1c357e8"


def test_vllm_none_hash_golden():
    assert none_hash(HashAlgo.SHA256).hex() == SHA256_NONE
    assert none_hash(HashAlgo.SHA256_CBOR).hex() == CBOR_NONE


@pytest.mark.parametrize("algo", [HashAlgo.SHA256, HashAlgo.SHA256_CBOR])
def test_vllm_golden_block_hashes(algo):
    hashes = BlockHasher(4, algo).hashes([0, 1, 2, 3, 4, 5, 6, 7, 8])  # the partial block is not hashed
    assert [h.hex() for h in hashes] == list(GOLDEN[algo])


def test_vllm_golden_salted_block0():
    hashes = BlockHasher(4, HashAlgo.SHA256_CBOR).hashes([0, 1, 2, 3], RequestExtras(cache_salt="s1"))
    assert hashes[0].hex() == SALTED_CBOR_BLOCK0


def test_vllm_none_hash_seed_stands_for_pythonhashseed():
    expected = hashlib.sha256(pickle.dumps("1234", protocol=5)).digest()
    assert none_hash(HashAlgo.SHA256, "1234") == expected
    assert none_hash(HashAlgo.SHA256, "1234") != none_hash(HashAlgo.SHA256)


def test_vllm_only_full_blocks_and_chaining():
    hasher = BlockHasher(4)
    assert hasher.hashes([1, 2, 3]) == ()
    a = hasher.hashes([1, 2, 3, 4, 5, 6, 7, 8])
    b = hasher.hashes([9, 2, 3, 4, 5, 6, 7, 8])
    assert len(a) == 2 and a[1] != b[1]  # block 1 differs because its parent differs
    # continuing after a decode step gives the same hashes as hashing at once
    hashes, keys = hasher.extend([1, 2, 3, 4, 5], RequestExtras(), (), ())
    hashes, keys = hasher.extend([1, 2, 3, 4, 5, 6, 7, 8], RequestExtras(), hashes, keys)
    assert hashes == a and keys == (None, None)


def test_vllm_extra_keys_none_not_empty_tuple():
    hasher = BlockHasher(2)
    fn = hash_function(HashAlgo.SHA256)
    assert hasher.hashes([5, 6])[0] == fn((hasher.none_hash, (5, 6), None))
    assert hasher.hashes([5, 6])[0] != fn((hasher.none_hash, (5, 6), ()))


def test_vllm_key_with_group_and_external_hash():
    h = bytes(range(32))
    key = key_with_group(h, 3)
    assert key == h + b"\x00\x00\x00\x03" and split_key(key) == (h, 3)
    assert external_hash(h) == int.from_bytes(h[-8:], "big")
    assert external_hash(h, use_int=False) == h
    with pytest.raises(Rejected) as exc:
        key_with_group(h, -1)
    assert exc.value.reason is HashRejection.BAD_GROUP_ID


def test_vllm_scenario9_multimodal_keys():
    """Section 8, scenario 9: mm keys carry block-relative offsets; an item ending in a block advances."""
    tokens = (list(range(10)) + [-1] * 6 + [-1] * 4 + list(range(10, 20)) + [-1] * 2 + [-1] * 16
              + [-1] * 7 + [100] * 4)
    extras = RequestExtras(mm=(MMFeature("aaa", 11, 10), MMFeature("bbb", 30, 18), MMFeature("ccc", 48, 7)))
    hasher = BlockHasher(16)
    hashes, keys = hasher.extend(tokens, extras, (), ())
    assert keys == ((("mm", "aaa", 11),), (("mm", "aaa", -5), ("mm", "bbb", 14)), (("mm", "bbb", -2),))
    hashes, keys = hasher.extend(tokens + [7] * 5, extras, hashes, keys)
    assert keys[3] == (("mm", "ccc", 0),)
    assert untagged(keys[1]) == (("aaa", -5), ("bbb", 14))


def test_vllm_extra_key_order_lora_mm_salt_embeds():
    extras = RequestExtras(lora=LoraRef("name", "path"), mm=(MMFeature("hash1", 0, 3),), cache_salt="salt")
    keys, _ = block_extra_keys(extras, 0, 4, 0)
    assert keys == (("lora", "name", "path"), ("mm", "hash1", 0), ("cache_salt", "salt"))
    keys1, _ = block_extra_keys(extras, 4, 8, 1)
    assert keys1 == (("lora", "name", "path"),)  # salt only on block 0
    assert untagged(keys) == ("name", ("hash1", 0), "salt")


def test_vllm_scenario26_lora_on_every_block():
    extras = RequestExtras(lora=LoraRef("test_lora_adapter", "/path/to/lora"))
    _, keys = BlockHasher(3).extend(list(range(9)), extras, (), ())
    assert keys == ((("lora", "test_lora_adapter", "/path/to/lora"),),) * 3


def test_vllm_salt_changes_every_chained_hash():
    hasher = BlockHasher(4)
    plain = hasher.hashes(range(12))
    salted = hasher.hashes(range(12), RequestExtras(cache_salt="x"))
    assert all(p != s for p, s in zip(plain, salted, strict=True))
    assert hasher.hashes(range(12), RequestExtras(cache_salt="")) == plain  # empty salt adds nothing


def test_vllm_prompt_embeds_digest_per_block():
    embeds = np.arange(24, dtype=np.float32).reshape(8, 3)
    extras = RequestExtras(prompt_embeds=embeds)
    _, keys = BlockHasher(4).extend(list(range(8)), extras, (), ())
    assert keys[1] == (("prompt_embeds", hashlib.sha256(embeds[4:8].tobytes()).digest()),)
    changed = embeds.copy()
    changed[5, 0] = -1
    other = BlockHasher(4).hashes(list(range(8)), RequestExtras(prompt_embeds=changed))
    assert other[0] == BlockHasher(4).hashes(list(range(8)), extras)[0]
    assert other[1] != BlockHasher(4).hashes(list(range(8)), extras)[1]


def test_vllm_bad_inputs_are_named():
    with pytest.raises(Rejected) as exc:
        BlockHasher(0)
    assert exc.value.reason is HashRejection.BAD_BLOCK_SIZE
    with pytest.raises(Rejected) as exc:
        BlockHasher(2).hashes([1, "x"])
    assert exc.value.reason is HashRejection.BAD_TOKEN
    with pytest.raises(Rejected) as exc:
        MMFeature("a", -1, 3)
    assert exc.value.reason is HashRejection.BAD_MM_FEATURE


@pytest.mark.skipif(not xxhash_available(), reason="optional package xxhash is not installed")
@pytest.mark.parametrize("algo", [HashAlgo.XXHASH, HashAlgo.XXHASH_CBOR])
def test_vllm_xxhash_variants(algo):
    import cbor2
    import xxhash

    encode = (lambda o: cbor2.dumps(o, canonical=True)) if algo is HashAlgo.XXHASH_CBOR else (
        lambda o: pickle.dumps(o, protocol=5))
    assert hash_function(algo)((1, 2)) == xxhash.xxh3_128_digest(encode((1, 2)))
    assert len(none_hash(algo)) == 16
    assert none_hash(algo) != none_hash(algo)  # unseeded: random per call, as per process in vLLM
    assert none_hash(algo, "7") == none_hash(algo, "7")
