"""The vLLM profile's KV events on the wire, serialized the way vLLM's event publisher does.

vLLM (``vllm.distributed.kv_events``) encodes a ``KVEventBatch`` ``[ts, events, data_parallel_rank]`` with
msgspec's MessagePack encoder; every event is a tagged, array-like struct: ``["BlockStored", block_hashes,
parent_block_hash, token_ids, block_size, lora_id, medium, lora_name, extra_keys, group_idx, ...]``,
``["BlockRemoved", block_hashes, medium, group_idx]``, ``["AllBlocksCleared"]``; every field is sent, also
one equal to its default (msgspec's ``omit_defaults`` leaves array-like structs whole). Its ZMQ publisher sends each batch as a multipart message ``[topic, seq,
payload]`` on a PUB socket, ``seq`` an 8-byte big-endian counter. Field order after ``medium`` follows
``docs/peers/vllm.md`` (0.33.0); a reader must accept longer or shorter tails.

Invariant: :func:`decode_batch` of :func:`encode_batch` gives back the profile's events (``attrs`` records).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from kvexact.reference.peers import vllm_pool as bp


class _Event(msgspec.Struct, array_like=True, omit_defaults=True, gc=False, tag=True):
    pass


class BlockStored(_Event):
    block_hashes: list[int | bytes]
    parent_block_hash: int | bytes | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None = None
    medium: str | None = "GPU"
    lora_name: str | None = None
    extra_keys: list[Any] | None = None
    group_idx: int = 0
    kv_cache_spec_kind: str | None = None


class BlockRemoved(_Event):
    block_hashes: list[int | bytes]
    medium: str | None = "GPU"
    group_idx: int = 0


class AllBlocksCleared(_Event):
    pass


class KVEventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]
    data_parallel_rank: int | None = None


def to_wire(event: bp.KVEvent) -> BlockStored | BlockRemoved | AllBlocksCleared:
    """The wire struct of one profile event."""
    if isinstance(event, bp.BlockStored):
        return BlockStored(list(event.block_hashes), event.parent_block_hash, list(event.token_ids),
                           event.block_size, event.lora_id, event.medium, event.lora_name,
                           list(event.extra_keys),
                           event.group_idx, event.kv_cache_spec_kind)
    if isinstance(event, bp.BlockRemoved):
        return BlockRemoved(list(event.block_hashes), event.medium, event.group_idx)
    return AllBlocksCleared()


def encode_batch(events: Sequence[bp.KVEvent], ts: float | None = None, rank: int | None = None) -> bytes:
    """One publisher payload: the MessagePack bytes of a ``KVEventBatch``."""
    batch = KVEventBatch(time.time() if ts is None else ts, [to_wire(e) for e in events], rank)
    return msgspec.msgpack.encode(batch)


def encode_batch_json(events: Sequence[bp.KVEvent], ts: float | None = None, rank: int | None = None) -> bytes:
    """The JSON form of the same batch (msgspec's JSON encoder over the same structs)."""
    batch = KVEventBatch(time.time() if ts is None else ts, [to_wire(e) for e in events], rank)
    return msgspec.json.encode(batch)


class Publisher:
    """A ZMQ publisher that sends batches as vLLM's ``ZmqEventPublisher`` does: ``[topic, seq, payload]``."""

    def __init__(self, endpoint: str = "tcp://127.0.0.1:*", topic: bytes = b""):
        import zmq

        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.XPUB)  # a PUB socket that also reports subscriptions
        self._sock.setsockopt(zmq.LINGER, 1000)
        if endpoint.endswith(":*"):
            port = self._sock.bind_to_random_port(endpoint[:-2])
            self.endpoint = f"{endpoint[:-2]}:{port}"
        else:
            self._sock.bind(endpoint)
            self.endpoint = endpoint
        self.topic = topic
        self.seq = 0

    def wait_for_subscriber(self, timeout_s: float = 10.0) -> bool:
        """Block until a subscriber has joined (PUB drops what it sends before then)."""
        if not self._sock.poll(int(timeout_s * 1000)):
            return False
        self._sock.recv()
        return True

    def publish(self, events: Iterable[bp.KVEvent]) -> None:
        payload = encode_batch(list(events))
        self._sock.send_multipart([self.topic, self.seq.to_bytes(8, "big"), payload])
        self.seq += 1

    def close(self) -> None:
        self._sock.close()
        self._ctx.term()


class _ProfileDriver:
    """The profile's manager with events on, behind the workload's five calls."""

    def __init__(self, num_blocks: int, block_size: int):
        from kvexact.reference.peers.vllm_adapter import VllmAdapter

        self.adapter = VllmAdapter(num_blocks, block_size, enable_kv_cache_events=True)
        self.allocate, self.append = self.adapter.allocate, self.adapter.append
        self.free, self.reset_prefix_cache = self.adapter.free, self.adapter.reset_prefix_cache

    def take_events(self) -> tuple[bp.KVEvent, ...]:
        self.adapter.trace.clear()
        self.adapter.manager, events = self.adapter.manager.take_events()
        return tuple(events)


def random_stream_log(seed: int, ops: int, num_blocks: int = 9, block_size: int = 2, max_running: int = 2,
                      stream_tokens: int = 14, driver: Any = None) -> list[tuple[Any, ...]]:
    """The event batches of ``driver`` (default: the profile) under a random workload: requests that replay
    one shared token stream (prefixes of it, extended by decode steps), frees and prefix-cache resets; one
    batch per operation. A driver has ``allocate(rid, tokens)`` (None when refused), ``append(rid, tokens)``
    (None when refused), ``free(rid)``, ``reset_prefix_cache()`` and ``take_events()``."""
    import random

    rng = random.Random(seed)
    stream = [rng.randrange(1 << 15) for _ in range(stream_tokens)]
    driver = driver or _ProfileDriver(num_blocks, block_size)
    running: dict[str, int] = {}
    batches = []
    for op in range(ops):
        roll = rng.random()
        if roll < 0.4 and len(running) < max_running:
            n = rng.randrange(1, stream_tokens - 2)
            if driver.allocate(f"q{op}", stream[:n]) is not None:
                running[f"q{op}"] = n
        elif roll < 0.7 and running:
            rid = rng.choice(sorted(running))
            n, k = running[rid], rng.randrange(1, 4)
            if n + k <= stream_tokens and driver.append(rid, stream[n:n + k]) is not None:
                running[rid] = n + k
        elif roll < 0.97 and running:
            rid = rng.choice(sorted(running))
            driver.free(rid)
            del running[rid]
        else:
            driver.reset_prefix_cache()
        events = driver.take_events()
        if events:
            batches.append(events)
    return batches
