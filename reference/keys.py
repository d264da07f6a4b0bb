"""Concrete prefix keys: the parent-hash chain over full blocks, extra keys, partial-tail keys (0x07B, 0x07D).

The chain is ``h_0 = H(None, X_0, E_0)``, ``h_i = H(h_{i-1}, X_i, E_i)`` over full blocks only, so a
change inside block ``j`` changes ``h_j`` and every descendant. Extra keys ``E_i`` are the runtime's
declared projection: the LoRA name (every block), each multimodal feature overlapping the block with
its block-relative offset, the cache salt (block 0 only, inherited by descendants through the
parent), and the SHA-256 of the prompt embeddings the block covers. The lookup key appends the cache
group id. A partial-tail key additionally binds the valid-row count and the partial policy id, so a
two-row and a three-row frontier never share an identity.

A concrete key only proposes a candidate: the compatibility manifest and the namespace decide
whether it may be exposed (0x01A).
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from kvexact.reference.digests import canonical_bytes
from kvexact.reference.rejections import Rejected


class KeyRejection(enum.Enum):
    NON_POSITIVE_BLOCK_SIZE = "hash block size must be a positive number of tokens"
    BAD_TOKEN_ID = "token ids must be non-negative ints"
    FEATURE_OUT_OF_RANGE = "a multimodal placeholder range must lie inside the token sequence"
    PROMPT_EMBEDS_LENGTH_MISMATCH = "prompt embeddings must have one row per token"
    PARTIAL_TAIL_EMPTY = "a partial tail needs at least one valid row"
    PARTIAL_TAIL_NOT_PARTIAL = "a partial tail must have fewer valid rows than the block size"
    PARTIAL_TAIL_ROWS_DRIFT = "valid_rows must equal the number of tail tokens hashed"
    NEGATIVE_GROUP_ID = "cache group ids are non-negative"
    EMPTY_SALT = "a cache salt, when given, must be a non-empty string"
    HASH_BLOCK_NOT_DIVIDING = "the hash block size must divide the group's block size"


HashFn = Callable[[Any], bytes]


def sha256_block_hash(payload: Any) -> bytes:
    """The default hash family: SHA-256 over the canonical encoding of ``(parent, tokens, extras)``."""
    return hashlib.sha256(canonical_bytes(payload)).digest()


@attrs.frozen
class MultimodalFeature:
    """A side input whose placeholder tokens occupy ``[start_token, start_token + length_tokens)``."""

    identifier: str
    start_token: int
    length_tokens: int


def _token_tuple(tokens: Sequence[int]) -> tuple[int, ...]:
    out = tuple(tokens)
    for i, t in enumerate(out):
        if not isinstance(t, int) or isinstance(t, bool) or t < 0:
            raise Rejected(KeyRejection.BAD_TOKEN_ID, f"token {i} is {t!r}")
    return out


@attrs.frozen
class KeyInputs:
    """Exactly the inputs the concrete key projects: tokens and the declared extra-key sources.

    ``prompt_embed_rows`` holds one bytes object per token (the raw embedding row) or is None.
    """

    tokens: tuple[int, ...] = attrs.field(converter=_token_tuple)
    lora_name: str | None = None
    mm_features: tuple[MultimodalFeature, ...] = ()
    cache_salt: str | None = None
    prompt_embed_rows: tuple[bytes, ...] | None = None

    def __attrs_post_init__(self) -> None:
        n = len(self.tokens)
        for f in self.mm_features:
            if f.start_token < 0 or f.length_tokens <= 0 or f.start_token + f.length_tokens > n:
                raise Rejected(KeyRejection.FEATURE_OUT_OF_RANGE,
                               f"feature {f.identifier!r} covers [{f.start_token}, "
                               f"{f.start_token + f.length_tokens}) of {n} tokens")
        if self.prompt_embed_rows is not None and len(self.prompt_embed_rows) != n:
            raise Rejected(KeyRejection.PROMPT_EMBEDS_LENGTH_MISMATCH,
                           f"{len(self.prompt_embed_rows)} embedding rows for {n} tokens")
        if self.cache_salt is not None and (not isinstance(self.cache_salt, str) or not self.cache_salt):
            raise Rejected(KeyRejection.EMPTY_SALT, f"cache_salt={self.cache_salt!r}")


def _check_block_size(block_size_tokens: int) -> None:
    if not isinstance(block_size_tokens, int) or block_size_tokens <= 0:
        raise Rejected(KeyRejection.NON_POSITIVE_BLOCK_SIZE, f"block size {block_size_tokens!r}")


def block_extra_keys(inputs: KeyInputs, start: int, stop: int) -> tuple | None:
    """The extra keys of block ``[start, stop)`` in a fixed order; None when there are none."""
    extras: list[tuple] = []
    if inputs.lora_name is not None:
        extras.append(("lora", inputs.lora_name))
    for f in sorted(inputs.mm_features, key=lambda f: (f.start_token, f.identifier)):
        if f.start_token < stop and f.start_token + f.length_tokens > start:
            extras.append(("mm", f.identifier, f.start_token - start))
    if inputs.cache_salt is not None and start == 0:
        extras.append(("cache_salt", inputs.cache_salt))
    if inputs.prompt_embed_rows is not None:
        digest = hashlib.sha256(b"".join(inputs.prompt_embed_rows[start:stop])).hexdigest()
        extras.append(("prompt_embeds", digest))
    return tuple(extras) if extras else None


def chain_hash(parent: bytes | None, block_tokens: Sequence[int], extras: tuple | None,
               hash_fn: HashFn = sha256_block_hash) -> bytes:
    """One link of the chain: ``H(parent, block_tokens, extras)``."""
    return hash_fn((parent, tuple(block_tokens), extras))


def hash_full_blocks(inputs: KeyInputs, block_size_tokens: int,
                     hash_fn: HashFn = sha256_block_hash) -> list[bytes]:
    """Hashes of every full block, in order; a trailing partial block is never hashed."""
    _check_block_size(block_size_tokens)
    parent: bytes | None = None
    hashes: list[bytes] = []
    for start in range(0, len(inputs.tokens) - block_size_tokens + 1, block_size_tokens):
        stop = start + block_size_tokens
        parent = chain_hash(parent, inputs.tokens[start:stop], block_extra_keys(inputs, start, stop), hash_fn)
        hashes.append(parent)
    return hashes


@attrs.frozen
class ConcretePrefixKey:
    """A candidate key ``block_hash || cache_group_id``; ``valid_rows`` is None for a full block."""

    block_hash: bytes
    cache_group_id: int
    valid_rows: int | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.cache_group_id, int) or self.cache_group_id < 0:
            raise Rejected(KeyRejection.NEGATIVE_GROUP_ID, f"cache_group_id={self.cache_group_id!r}")

    @property
    def lookup_key(self) -> bytes:
        """The index key: the block hash followed by the group id as 4 big-endian bytes."""
        return self.block_hash + self.cache_group_id.to_bytes(4, "big")

    @property
    def is_partial(self) -> bool:
        return self.valid_rows is not None


def prefix_keys(inputs: KeyInputs, block_size_tokens: int, cache_group_id: int,
                hash_fn: HashFn = sha256_block_hash) -> list[ConcretePrefixKey]:
    """The full-block lookup keys of one cache group, in logical-block order."""
    return [ConcretePrefixKey(h, cache_group_id) for h in hash_full_blocks(inputs, block_size_tokens, hash_fn)]


def partial_tail_key(inputs: KeyInputs, block_size_tokens: int, cache_group_id: int, policy_id: str,
                     hash_fn: HashFn = sha256_block_hash, valid_rows: int | None = None) -> ConcretePrefixKey:
    """Key of the immutable partial tail after the last full block (0x07D).

    ``h_tail = H(h_parent, tail_tokens[0:v], v, policy_id, E_tail)``; ``valid_rows`` defaults to the tail
    length and, if given, must equal it (a key must never describe more or fewer rows than it hashes).
    """
    _check_block_size(block_size_tokens)
    full = hash_full_blocks(inputs, block_size_tokens, hash_fn)
    start = len(full) * block_size_tokens
    tail = inputs.tokens[start:]
    v = len(tail) if valid_rows is None else valid_rows
    if v != len(tail):
        raise Rejected(KeyRejection.PARTIAL_TAIL_ROWS_DRIFT, f"valid_rows={v} but the tail has {len(tail)} tokens")
    if v <= 0:
        raise Rejected(KeyRejection.PARTIAL_TAIL_EMPTY, f"{len(inputs.tokens)} tokens end on a block boundary")
    if v >= block_size_tokens:
        raise Rejected(KeyRejection.PARTIAL_TAIL_NOT_PARTIAL, f"valid_rows={v} with block size {block_size_tokens}")
    parent = full[-1] if full else None
    extras = block_extra_keys(inputs, start, start + v)
    digest = hash_fn(("partial", parent, tail, v, policy_id, extras))
    return ConcretePrefixKey(digest, cache_group_id, valid_rows=v)


def group_block_hashes(fine_hashes: Sequence[bytes], hash_block_tokens: int, group_block_tokens: int) -> list[bytes]:
    """Hashes of a group whose block is ``k`` hash blocks: block ``j`` uses fine hash ``(j + 1) k - 1``.

    The hash granularity may be finer than a group's physical block (0x01A); the last fine hash inside a
    group block already chains the whole prefix, so it identifies that block. ``k`` must be an integer.
    """
    _check_block_size(hash_block_tokens)
    _check_block_size(group_block_tokens)
    if group_block_tokens % hash_block_tokens:
        raise Rejected(KeyRejection.HASH_BLOCK_NOT_DIVIDING,
                       f"hash block {hash_block_tokens} does not divide group block {group_block_tokens}")
    k = group_block_tokens // hash_block_tokens
    return [fine_hashes[(j + 1) * k - 1] for j in range(len(fine_hashes) // k)]


def matching_full_blocks(a: Sequence[bytes], b: Sequence[bytes]) -> int:
    """Number of leading equal hashes: blocks after the first difference are never candidates."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
