"""vLLM 0.33.0 block hashing, reproduced from ``docs/peers/vllm.md`` §2.

Invariants kept here:
- only full blocks are hashed; block ``i`` covers tokens ``[i*B, (i+1)*B)``;
- block ``i``'s hash is ``hash_fn((parent, tuple(tokens), extra_keys))`` where ``parent`` is block
  ``i-1``'s hash, or ``NONE_HASH`` for block 0, and ``extra_keys`` is a tuple or ``None`` (never ``()``);
- extra keys are tagged and ordered: LoRA, multimodal (block-relative offsets), cache salt (block 0
  only), prompt-embedding digest;
- a prefix-cache key is the block hash followed by the group id as 4 big-endian bytes.
"""

from __future__ import annotations

import bisect
import enum
import hashlib
import os
import pickle
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from kvexact.reference.rejections import Rejected

# vLLM pickles with pickle.HIGHEST_PROTOCOL, which is 5 on every Python vLLM 0.33.0 supports.
PICKLE_PROTOCOL = 5
# The seed string used for NONE_HASH by the sha256 variants when PYTHONHASHSEED is unset.
DEFAULT_NONE_HASH_SEED = "vllm-none-hash"
GROUP_ID_BYTES = 4


class HashRejection(enum.Enum):
    """Why a hashing request was refused."""

    XXHASH_UNAVAILABLE = "the optional xxhash package is not installed"
    BAD_BLOCK_SIZE = "block size must be a positive int"
    BAD_TOKEN = "token ids must be ints"
    BAD_GROUP_ID = "group id must fit in 4 unsigned bytes"
    BAD_KEY = "a prefix-cache key must be longer than 4 bytes"
    BAD_MM_FEATURE = "a multimodal placeholder needs offset >= 0 and length > 0"


class HashAlgo(enum.Enum):
    """``--prefix-caching-hash-algo`` values of vLLM 0.33.0."""

    SHA256 = "sha256"
    SHA256_CBOR = "sha256_cbor"
    XXHASH = "xxhash"
    XXHASH_CBOR = "xxhash_cbor"

    @property
    def is_xxhash(self) -> bool:
        return self in (HashAlgo.XXHASH, HashAlgo.XXHASH_CBOR)


def xxhash_available() -> bool:
    try:
        import xxhash  # noqa: F401
    except ImportError:
        return False
    return True


def _pickle_bytes(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=PICKLE_PROTOCOL)


def _cbor_bytes(obj: Any) -> bytes:
    import cbor2

    return cbor2.dumps(obj, canonical=True)


def hash_function(algo: HashAlgo) -> Callable[[Any], bytes]:
    """The digest function of ``algo``: 32 bytes for the sha256 variants, 16 for xxhash (xxh3_128)."""
    encode = _cbor_bytes if algo in (HashAlgo.SHA256_CBOR, HashAlgo.XXHASH_CBOR) else _pickle_bytes
    if not algo.is_xxhash:
        return lambda obj: hashlib.sha256(encode(obj)).digest()
    try:
        import xxhash
    except ImportError as exc:
        raise Rejected(HashRejection.XXHASH_UNAVAILABLE, f"hash algorithm {algo.value!r} needs xxhash") from exc
    return lambda obj: xxhash.xxh3_128_digest(encode(obj))


def none_hash(algo: HashAlgo, hash_seed: str | None = None) -> bytes:
    """NONE_HASH, the parent of block 0: ``hash_fn(seed)``.

    ``hash_seed`` stands for ``$PYTHONHASHSEED`` (vLLM reads the environment; here it is explicit).
    Unset: the sha256 variants use ``"vllm-none-hash"`` (reproducible across processes); the xxhash
    variants use a fresh random seed, so their hashes differ from process to process, as in vLLM.
    """
    fn = hash_function(algo)
    if hash_seed is not None:
        return fn(hash_seed)
    if algo.is_xxhash:
        return fn(os.urandom(32).hex())
    return fn(DEFAULT_NONE_HASH_SEED)


def key_with_group(block_hash: bytes, group_id: int) -> bytes:
    """The prefix-cache key ``BlockHashWithGroupId``: hash bytes + group id (4 bytes, big endian)."""
    if not isinstance(group_id, int) or not 0 <= group_id < 2 ** (8 * GROUP_ID_BYTES):
        raise Rejected(HashRejection.BAD_GROUP_ID, f"group id {group_id!r}")
    return block_hash + group_id.to_bytes(GROUP_ID_BYTES, "big")


def split_key(key: bytes) -> tuple[bytes, int]:
    """``(block_hash, group_id)`` of a prefix-cache key."""
    if len(key) <= GROUP_ID_BYTES:
        raise Rejected(HashRejection.BAD_KEY, f"key of {len(key)} bytes")
    return key[:-GROUP_ID_BYTES], int.from_bytes(key[-GROUP_ID_BYTES:], "big")


def external_hash(block_hash: bytes, use_int: bool = True) -> int | bytes:
    """The hash as published in KV events: the low 64 bits as an int (vLLM's default), or raw bytes."""
    return int.from_bytes(block_hash, "big") & (2**64 - 1) if use_int else block_hash


# ---------------------------------------------------------------------------------------------
# Extra keys


@attrs.frozen
class LoraRef:
    """A LoRA adapter as it enters block hashes (name, path) and events (adapter id, name)."""

    name: str
    path: str
    adapter_id: int = 1


@attrs.frozen
class MMFeature:
    """One multimodal item: its placeholder range ``[offset, offset + length)`` and its identifier."""

    identifier: str
    offset: int
    length: int

    def __attrs_post_init__(self) -> None:
        if self.offset < 0 or self.length <= 0:
            raise Rejected(HashRejection.BAD_MM_FEATURE,
                           f"{self.identifier!r}: offset {self.offset}, length {self.length}")


@attrs.frozen
class RequestExtras:
    """What besides token ids enters a request's block hashes.

    ``prompt_embeds`` is a numpy array with one row per prompt token (or None); ``mm`` is sorted by offset.
    """

    lora: LoraRef | None = None
    mm: tuple[MMFeature, ...] = attrs.field(default=(), converter=tuple)
    cache_salt: str | None = None
    prompt_embeds: Any = attrs.field(default=None, eq=False)


NO_EXTRAS = RequestExtras()


def first_overlapping_item(mm: Sequence[MMFeature], start: int) -> int:
    """Index of the first item that ends after token ``start`` (``len(mm)`` when none does).

    vLLM 0.33.0 resumes a continued hashing here (``get_mm_features_in_window``), so a block that
    decode completes keys every item overlapping it, the earlier ones included.
    """
    return bisect.bisect_left([item.offset + item.length for item in mm], start + 1)


def _mm_keys(mm: Sequence[MMFeature], start: int, end: int, start_idx: int) -> tuple[list[tuple], int]:
    """Tagged mm keys of block ``[start, end)`` scanning from item ``start_idx``.

    Returns the keys and the item index the next block starts from; an item that ends inside this
    block advances the index, one that continues past the block keeps it.
    """
    keys: list[tuple] = []
    if not mm:
        return keys, start_idx
    last = mm[-1]
    if last.offset + last.length <= start:
        return keys, start_idx
    idx = start_idx
    while idx < len(mm):
        item = mm[idx]
        if end <= item.offset:
            break
        if start >= item.offset + item.length:
            idx += 1
            continue
        keys.append(("mm", item.identifier, item.offset - start))
        if end >= item.offset + item.length:
            idx += 1
        else:
            break
    return keys, idx


def _embeds_digest(prompt_embeds: Any, start: int, end: int) -> bytes:
    import numpy as np

    return hashlib.sha256(np.ascontiguousarray(prompt_embeds[start:end]).tobytes()).digest()


def block_extra_keys(extras: RequestExtras, start: int, end: int, mm_idx: int) -> tuple[tuple | None, int]:
    """Tagged extra keys of block ``[start, end)`` (or None) and the next block's mm scan index."""
    mm_keys, next_idx = _mm_keys(extras.mm, start, end, mm_idx)
    keys: list[tuple] = []
    if extras.lora is not None:
        keys.append(("lora", extras.lora.name, extras.lora.path))
    keys.extend(mm_keys)
    if start == 0 and extras.cache_salt:
        keys.append(("cache_salt", extras.cache_salt))
    if extras.prompt_embeds is not None:
        keys.append(("prompt_embeds", _embeds_digest(extras.prompt_embeds, start, end)))
    return (tuple(keys) if keys else None), next_idx


def untagged(extra_keys: tuple | None) -> tuple | None:
    """Extra keys as KV events publish them: mm -> (identifier, offset), the others -> the bare value."""
    if extra_keys is None:
        return None
    out: list[Any] = []
    for key in extra_keys:
        if key[0] == "mm":
            out.append((key[1], key[2]))
        else:
            out.append(key[1])
    return tuple(out)


@attrs.frozen
class BlockHasher:
    """vLLM's request block hasher: one hash function, its NONE_HASH, one block size."""

    block_size: int
    algo: HashAlgo = HashAlgo.SHA256
    none_hash: bytes = attrs.field()
    fn: Callable[[Any], bytes] = attrs.field(eq=False, repr=False)

    @none_hash.default
    def _default_none_hash(self) -> bytes:
        return none_hash(self.algo)

    @fn.default
    def _default_fn(self) -> Callable[[Any], bytes]:
        return hash_function(self.algo)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.block_size, int) or isinstance(self.block_size, bool) or self.block_size < 1:
            raise Rejected(HashRejection.BAD_BLOCK_SIZE, f"block_size={self.block_size!r}")

    def hash_block(self, parent: bytes | None, tokens: Sequence[int], extra_keys: tuple | None) -> bytes:
        """One block hash; a falsy parent (block 0) is replaced by NONE_HASH."""
        return self.fn((parent or self.none_hash, tuple(tokens), extra_keys))

    def extend(self, tokens: Sequence[int], extras: RequestExtras, hashes: tuple[bytes, ...],
               extra_keys: tuple[tuple | None, ...]) -> tuple[tuple[bytes, ...], tuple[tuple | None, ...]]:
        """Continue hashing after ``len(hashes)`` blocks over every new full block of ``tokens``.

        Returns the extended hashes and the per-block tagged extra keys. As in vLLM, a continuation
        (blocks after the first call's) scans multimodal items from the first one overlapping its
        first new block.
        """
        bad = [t for t in tokens if not isinstance(t, int) or isinstance(t, bool)]
        if bad:
            raise Rejected(HashRejection.BAD_TOKEN, f"non-int token id {bad[0]!r}")
        size = self.block_size
        start = len(hashes) * size
        new_hashes, new_keys = list(hashes), list(extra_keys)
        mm_idx = first_overlapping_item(extras.mm, start) if start > 0 else 0
        parent = hashes[-1] if hashes else None
        while start + size <= len(tokens):
            keys, mm_idx = block_extra_keys(extras, start, start + size, mm_idx)
            parent = self.hash_block(parent, tokens[start:start + size], keys)
            new_hashes.append(parent)
            new_keys.append(keys)
            start += size
        return tuple(new_hashes), tuple(new_keys)

    def hashes(self, tokens: Sequence[int], extras: RequestExtras = NO_EXTRAS) -> tuple[bytes, ...]:
        """The hashes of every full block of ``tokens`` computed in one call (a new request)."""
        return self.extend(tokens, extras, (), ())[0]
