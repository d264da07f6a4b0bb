"""0x07B / 0x07D / 0x07F: the parent-hash chain, extra keys, partial-tail keys."""

import pytest

from kvexact.reference.keys import (
    ConcretePrefixKey,
    KeyInputs,
    KeyRejection,
    MultimodalFeature,
    block_extra_keys,
    group_block_hashes,
    hash_full_blocks,
    matching_full_blocks,
    partial_tail_key,
    prefix_keys,
)
from kvexact.reference.rejections import Rejected

P = 16


def tokens(n, change_at=None):
    out = [1000 + i for i in range(n)]
    if change_at is not None:
        out[change_at] += 1
    return out


def test_chain_hashes_only_full_blocks():
    assert len(hash_full_blocks(KeyInputs(tokens(50)), P)) == 3  # 50 // 16
    assert len(hash_full_blocks(KeyInputs(tokens(15)), P)) == 0


def test_change_at_token_37_leaves_two_ancestor_blocks():
    # 0x07B: token 37 is inside logical block 37 // 16 = 2; the full-block runtime returns 32 rows.
    a = hash_full_blocks(KeyInputs(tokens(64)), P)
    b = hash_full_blocks(KeyInputs(tokens(64, change_at=37)), P)
    n = matching_full_blocks(a, b)
    assert n == 2 and n * P == 32
    assert all(x != y for x, y in zip(a[2:], b[2:], strict=True))  # every descendant differs


def test_same_local_block_different_parent_differs():
    a = hash_full_blocks(KeyInputs(tokens(48)), P)
    b = hash_full_blocks(KeyInputs(tokens(48, change_at=20)), P)
    assert a[0] == b[0] and a[2] != b[2]  # block 2's local tokens are equal, its parent is not


def test_salt_only_on_first_block_but_inherited():
    plain = KeyInputs(tokens(48))
    salted = KeyInputs(tokens(48), cache_salt="s1")
    assert block_extra_keys(salted, 0, 16) == (("cache_salt", "s1"),)
    assert block_extra_keys(salted, 16, 32) is None
    hp, hs = hash_full_blocks(plain, P), hash_full_blocks(salted, P)
    assert all(x != y for x, y in zip(hp, hs, strict=True))


def test_lora_and_multimodal_extras():
    inp = KeyInputs(tokens(48), lora_name="ad1", mm_features=(MultimodalFeature("img", 10, 12),))
    assert block_extra_keys(inp, 0, 16) == (("lora", "ad1"), ("mm", "img", 10))
    assert block_extra_keys(inp, 16, 32) == (("lora", "ad1"), ("mm", "img", -6))  # block-relative offset
    assert block_extra_keys(inp, 32, 48) == (("lora", "ad1"),)
    other_image = KeyInputs(tokens(48), lora_name="ad1", mm_features=(MultimodalFeature("img2", 10, 12),))
    assert hash_full_blocks(inp, P)[0] != hash_full_blocks(other_image, P)[0]  # same placeholder tokens


def test_prompt_embeddings_digest_changes_key():
    rows = tuple(bytes([i % 256]) * 8 for i in range(32))
    changed = rows[:20] + (b"\xff" * 8,) + rows[21:]
    a = hash_full_blocks(KeyInputs(tokens(32), prompt_embed_rows=rows), P)
    b = hash_full_blocks(KeyInputs(tokens(32), prompt_embed_rows=changed), P)
    assert a[0] == b[0] and a[1] != b[1]


def test_group_id_in_lookup_key():
    k0, k1 = prefix_keys(KeyInputs(tokens(16)), P, 0)[0], prefix_keys(KeyInputs(tokens(16)), P, 1)[0]
    assert k0.block_hash == k1.block_hash and k0.lookup_key != k1.lookup_key
    assert k1.lookup_key[-4:] == (1).to_bytes(4, "big")


def test_partial_tail_key_binds_valid_rows():
    two = partial_tail_key(KeyInputs(tokens(18)), P, 0, "immutable-tail")
    three = partial_tail_key(KeyInputs(tokens(19)), P, 0, "immutable-tail")
    assert two.valid_rows == 2 and three.valid_rows == 3 and two.block_hash != three.block_hash
    other_policy = partial_tail_key(KeyInputs(tokens(18)), P, 0, "other")
    assert other_policy.block_hash != two.block_hash
    # a partial-tail key never equals a full-block key of the same rows
    assert two.block_hash not in hash_full_blocks(KeyInputs(tokens(32)), P)


def test_forced_collision_hash_fn_is_pluggable():
    const = lambda _payload: b"\x00" * 32  # noqa: E731 - artificial equal digest of 0x07F
    a = hash_full_blocks(KeyInputs(tokens(16)), P, const)
    b = hash_full_blocks(KeyInputs(tokens(16, change_at=3)), P, const)
    assert a == b  # the key alone cannot tell: a witness policy must


def test_hash_granularity_finer_than_group_block():
    fine = hash_full_blocks(KeyInputs(tokens(80)), 16)  # five 16-token hashes [A, B, C, D, E]
    assert group_block_hashes(fine, 16, 32) == [fine[1], fine[3]]  # the 32-token view is [B, D]
    assert group_block_hashes(fine, 16, 16) == fine
    with pytest.raises(Rejected) as info:
        group_block_hashes(fine, 16, 24)
    assert info.value.reason is KeyRejection.HASH_BLOCK_NOT_DIVIDING


@pytest.mark.parametrize("make, reason", [
    (lambda: hash_full_blocks(KeyInputs(tokens(4)), 0), KeyRejection.NON_POSITIVE_BLOCK_SIZE),
    (lambda: KeyInputs([1, -2]), KeyRejection.BAD_TOKEN_ID),
    (lambda: KeyInputs(tokens(4), mm_features=(MultimodalFeature("x", 2, 5),)), KeyRejection.FEATURE_OUT_OF_RANGE),
    (lambda: KeyInputs(tokens(4), prompt_embed_rows=(b"a",)), KeyRejection.PROMPT_EMBEDS_LENGTH_MISMATCH),
    (lambda: partial_tail_key(KeyInputs(tokens(32)), P, 0, "p"), KeyRejection.PARTIAL_TAIL_EMPTY),
    (lambda: partial_tail_key(KeyInputs(tokens(18)), P, 0, "p", valid_rows=3), KeyRejection.PARTIAL_TAIL_ROWS_DRIFT),
    (lambda: ConcretePrefixKey(b"x", -1), KeyRejection.NEGATIVE_GROUP_ID),
    (lambda: KeyInputs(tokens(4), cache_salt=""), KeyRejection.EMPTY_SALT),
])
def test_malformed_key_inputs(make, reason):
    with pytest.raises(Rejected) as info:
        make()
    assert info.value.reason is reason
