"""vLLM's KV-cache events, read as vLLM publishes them and validated against ``KVAllocation``.

The mapping (hashes are opaque identities; ``docs/peers/vllm.md`` §4 for the events):

- ``KVAllocation`` models one shared token stream whose logical block ``j`` has identity ``j``. A hash is
  placed in that stream by its parent chain: a ``BlockStored`` with parent ``p`` stores its hashes at depths
  ``depth(p) + 1, depth(p) + 2, ...`` (``depth(None) = 0``). A log whose hashes do not form one chain
  (two hashes at one depth) is outside what the spec models and is reported as such.
- each stored hash at depth ``j`` is one ``CacheBlock(r, j)``; a removed hash is one ``Evict(g, b)`` or one
  ``AppendReserve(r, g, b)`` that takes the evictable block (vLLM evicts when it reuses a block), and the
  step must remove exactly that identity; ``AllBlocksCleared`` is one eviction per cached identity with no
  block in use after it (vLLM resets only an idle pool).
- between logged steps, unlogged allocator steps run: ``AppendReserve``, ``AppendWrite``, ``AppendPublish``,
  ``PrefixHit``, ``Release``; they never change ``ident`` (every identity change is an event).
- constants: one cache group ``{0}``, ``Blocks = 1..blocks`` (vLLM's usable blocks), ``Requests`` model
  values ``r1..rN`` (how many requests may hold blocks at once), ``P = 1`` (a spec row stands for a whole
  vLLM block: events only speak of full blocks), ``MaxTokens`` the deepest depth in the log.

The candidate states are deduplicated by :func:`kv_view`, which forgets generations, table versions, the
epoch, the history snapshot and the stale handle and names blocks and requests by their roles. None of the
actions above reads those variables in a guard or copies them anywhere but into themselves, so two states
with one view have the same futures (the view is a bisimulation for this action set).

Every check also has a TLA+ form, so :func:`write_event_module` writes the log as a generated trace spec
(``partial_module.trace_spec``) for the embedded engine or TLC. Its ``VIEW TraceView`` forgets the same
variables (and each handle's generation) by the same argument, but cannot rename blocks or requests, so it
explores every explanation with every choice of block: it is for short logs over small pools.
"""

from __future__ import annotations

import enum
import functools
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs
import msgspec

from kvexact.conformance.line_schemas import Rejection, TraceInputError
from kvexact.conformance.partial_trace import Expect, PartialResult, Search, Unmapped

INTERNAL = ("AppendReserve", "AppendWrite", "AppendPublish", "PrefixHit", "Release")
SILENT = ("ident",)
GROUP = 0


class VllmEventRejection(enum.Enum):
    """Why an event cannot be expressed in ``KVAllocation`` (reported before any spec step is tried)."""

    UNKNOWN_PARENT = "the parent hash was never stored"
    UNKNOWN_HASH = "a removed hash was never stored"
    SECOND_STREAM = "two different hashes at one depth: the spec models one token stream"
    HASH_AT_TWO_DEPTHS = "one hash at two depths"
    TOKEN_COUNT = "token_ids does not hold block_size tokens per stored hash"
    BLOCK_SIZE_CHANGED = "block_size differs from the log's first BlockStored"
    OTHER_GROUP = "the event names a cache group other than 0: the mapping models one group"
    OTHER_MEDIUM = "the event names a medium other than GPU: the mapping models the device pool"
    TOO_DEEP = "the depth exceeds the model's MaxTokens"


class EventFormatError(TraceInputError):
    """An event file or stream that cannot be read: says where and what (``kind``: its :class:`Rejection`)."""


@attrs.frozen
class KVEvent:
    """One event, normalized: ``kind`` is the vLLM class name; ``index`` its 1-based position in the log."""

    index: int
    kind: str
    hashes: tuple[Any, ...] = ()
    parent: Any = None
    num_tokens: int = 0
    block_size: int = 0
    medium: str | None = "GPU"
    group: int = 0


# ------------------------------------------------------------------------------------------ decoding

STORED_FIELDS = ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name",
                 "extra_keys", "group_idx")
REMOVED_FIELDS = ("block_hashes", "medium", "group_idx")


class _Wire(msgspec.Struct, array_like=True, tag=True):
    """vLLM's array form, read with msgspec (trailing fields this mapping does not read are ignored)."""


class _Stored(_Wire, tag="BlockStored"):
    block_hashes: list[Any]
    parent_block_hash: Any
    token_ids: list[Any]
    block_size: int
    lora_id: int | None = None
    medium: str | None = "GPU"
    lora_name: Any = None
    extra_keys: Any = None
    group_idx: int = 0


class _Removed(_Wire, tag="BlockRemoved"):
    block_hashes: list[Any]
    medium: str | None = "GPU"
    group_idx: int = 0


class _Cleared(_Wire, tag="AllBlocksCleared"):
    pass


_WIRE = _Stored | _Removed | _Cleared
_FIELDS = {"BlockStored": STORED_FIELDS, "BlockRemoved": REMOVED_FIELDS}


def _opaque(h: Any) -> Any:
    return h.hex() if isinstance(h, (bytes, bytearray)) else h


def _wire_event(raw: list | tuple, where: str) -> dict[str, Any]:
    """The fields of an array-form event, type-checked by msgspec; a mismatch names the field."""
    try:
        ev = msgspec.convert(list(raw), _WIRE)
    except msgspec.ValidationError as exc:
        m = re.search(r"\$\[(\d+)\]", str(exc))
        index = int(m.group(1)) if m else -1
        names = _FIELDS.get(raw[0] if raw and isinstance(raw[0], str) else "", ())
        field = "type" if index == 0 else names[index - 1] if 0 < index <= len(names) else "(the event)"
        raise EventFormatError(f"{where}: field {field}: {str(exc).split(' - at ')[0]}") from None
    return {"type": ev.__struct_config__.tag, **{f: getattr(ev, f) for f in ev.__struct_fields__}}


def _event(raw: Any, index: int, where: str) -> KVEvent:
    """One raw event (vLLM's array form ``["BlockStored", ...]`` or an object with ``type``), shape-checked."""
    if isinstance(raw, (list, tuple)) and raw:
        fields = _wire_event(raw, where)
        kind: Any = fields.pop("type")
    elif isinstance(raw, dict):
        from kvexact.conformance.line_schemas import LINE_SCHEMAS, shape_error

        kind = raw.get("type", raw.get("kind"))
        fields = {k: v for k, v in raw.items() if k not in ("type", "kind")}
        if kind not in ("BlockStored", "BlockRemoved", "AllBlocksCleared"):
            raise EventFormatError(f"{where}: field type: {kind!r} is not BlockStored, BlockRemoved or "
                                   f"AllBlocksCleared")
        why = shape_error(LINE_SCHEMAS[kind], fields, where)
        if why:
            raise EventFormatError(why)
    else:
        raise EventFormatError(f"{where}: not an event: {str(raw)[:80]}")
    if kind == "AllBlocksCleared":
        return KVEvent(index, kind)
    hashes = tuple(_opaque(h) for h in fields["block_hashes"])
    medium, group = fields.get("medium", "GPU"), fields.get("group_idx", 0)
    if kind == "BlockRemoved":
        return KVEvent(index, kind, hashes, medium=medium, group=group)
    return KVEvent(index, kind, hashes, _opaque(fields["parent_block_hash"]), len(fields["token_ids"]),
                   fields["block_size"], medium, group)


def _batch_events(batch: Any, where: str) -> list[Any]:
    if isinstance(batch, dict) and "events" in batch:
        return list(batch["events"])
    if isinstance(batch, (list, tuple)) and len(batch) >= 2 and isinstance(batch[0], (int, float)) \
            and isinstance(batch[1], (list, tuple)):
        return list(batch[1])
    raise EventFormatError(f"{where}: not a KVEventBatch ([ts, events, rank] or {{\"ts\", \"events\"}})")


def batches_from_bytes(data: bytes, name: str) -> Iterator[tuple[str, Any]]:
    """(where, batch) for every batch of a file: concatenated MessagePack payloads, a JSON array of batches,
    one JSON batch, or NDJSON (one batch per line)."""
    head = data.lstrip()[:1]
    if head in (b"[", b"{"):
        text = data.decode("utf-8", errors="replace")
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            doc = None
        if doc is not None:
            if isinstance(doc, list) and doc and isinstance(doc[0], (list, dict)):
                for i, b in enumerate(doc, start=1):
                    yield f"{name}: batch {i}", b
            else:
                yield f"{name}: batch 1", doc
            return
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    yield f"{name}:{n}", json.loads(line)
                except json.JSONDecodeError as exc:
                    raise EventFormatError(f"{name}:{n}:{exc.colno}: not JSON: {exc.msg}") from None
        return
    import msgpack

    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    i = 0
    try:
        for i, b in enumerate(unpacker, start=1):
            yield f"{name}: batch {i}", b
    except (msgpack.UnpackException, ValueError) as exc:
        raise EventFormatError(f"{name}: batch {i + 1}: not MessagePack: {exc}") from None


def events_from_batches(batches: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    """(where, raw event) in log order."""
    for where, batch in batches:
        for j, raw in enumerate(_batch_events(batch, where), start=1):
            yield f"{where}, event {j}", raw


def read_events(path: Path) -> list[tuple[str, Any]]:
    if not Path(path).exists():
        raise EventFormatError(f"{path}: no such file", Rejection.NO_SUCH_FILE)
    if not Path(path).is_file():
        raise EventFormatError(f"{path}: not a regular file (an event log)", Rejection.NOT_A_FILE)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise EventFormatError(f"{path}: cannot read: {exc.strerror or exc}", Rejection.UNREADABLE) from None
    if not data.strip():
        raise EventFormatError(f"{path}: no events", Rejection.EMPTY)
    return list(events_from_batches(batches_from_bytes(data, str(path))))


def live_batches(endpoint: str, topic: bytes = b"", idle_s: float = 2.0,
                 max_batches: int | None = None) -> Iterator[tuple[str, Any]]:
    """Batches from a running publisher's ZMQ address (``[topic, seq, payload]`` messages), until no batch
    came for ``idle_s`` seconds or ``max_batches`` were read."""
    import msgspec
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.SUB)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SUBSCRIBE, topic)
    sock.connect(endpoint)
    try:
        n = 0
        while max_batches is None or n < max_batches:
            if not sock.poll(int(idle_s * 1000)):
                return
            frames = sock.recv_multipart()
            payload = frames[-1]
            seq = int.from_bytes(frames[-2], "big") if len(frames) >= 2 else n
            n += 1
            try:
                yield f"{endpoint} seq {seq}", msgspec.msgpack.decode(payload)
            except msgspec.DecodeError as exc:
                raise EventFormatError(f"{endpoint} seq {seq}: not MessagePack: {exc}") from None
    finally:
        sock.close()
        ctx.term()


# ------------------------------------------------------------------------------------------ mapping


def _at(f: Any, x: Any) -> Any:
    from kvexact.spec.checker.values import apply_fcn

    return apply_fcn(f, x)


def _blocks(s: dict) -> list[int]:
    from kvexact.spec.checker.values import domain

    return sorted(domain(_at(s["ident"], GROUP)))


def idents(s: dict) -> list[int]:
    row = _at(s["ident"], GROUP)
    return sorted(v for v in (_at(row, b) for b in _blocks(s)) if v != 0)


def kv_view(s: dict) -> Any:
    """The state up to renaming blocks and requests, without gen, tver, epoch, hist and stale (module doc)."""
    from kvexact.spec.checker.values import fcn_items

    ident, ref, rows = (_at(s[v], GROUP) for v in ("ident", "ref", "rows"))
    reserved = _at(s["reserved"], GROUP)
    busy = [(r, t) for r, t in fcn_items(s["txn"]) if _at(t, "phase") != "idle"]  # at most one (Concurrent = 1)
    treq, txn = busy[0] if busy else (None, None)
    dest = _at(_at(txn, "dest"), GROUP) if txn is not None else 0
    blocks = _blocks(s)
    pooled = _at(s["pool"], GROUP) if "pool" in s else frozenset()
    attr = {b: (_at(ident, b), _at(ref, b), _at(rows, b), b in reserved, b == dest, b in pooled) for b in blocks}
    reqs = []
    for r, tab in fcn_items(s["tables"]):
        held = [_at(h, "block") for h in _at(tab, GROUP)]
        reqs.append(((_at(s["len"], r), tuple(attr[b] for b in held), r == treq), held))
    reqs.sort(key=lambda x: x[0])
    occurs: dict[int, list] = {b: [] for b in blocks}
    for i, (_sig, held) in enumerate(reqs):
        for pos, b in enumerate(held):
            occurs[b].append((i, pos))
    return (_at(txn, "phase") if txn is not None else "idle", tuple(sig for sig, _ in reqs),
            tuple(sorted((attr[b], tuple(occurs[b])) for b in blocks)))


def _removes(j: int, name: str):
    def check(s: dict, n: dict) -> str | None:
        before, after = idents(s), idents(n)
        if j not in before:
            return f"identity {j} (hash {name}) is not cached before the step"
        want = list(before)
        want.remove(j)
        if after != want:
            return f"the step leaves cached identities {after}; the event leaves {want}"
        return None
    return check


# The checks' TLA+ forms, for the generated trace spec (``write_event_module``): ``Idents(id)`` is the set of
# cached identities of group 0 (``idents``: a set, since ``CacheBlock`` keeps identities unique).
TLA_DEFS = (f"Idents(id) == {{id[{GROUP}][b] : b \\in Blocks}} \\ {{0}}",
            "TraceView == <<ref, ident, rows, reserved, len, txn, pool, tl, tk,"
            " [r \\in Requests |-> [g \\in Groups |-> [i \\in DOMAIN tables[r][g] |-> tables[r][g][i].block]]]>>")
IDLE_AND_EMPTY_TLA = f"Idents(ident') = {{}} /\\ \\A b \\in Blocks : ref'[{GROUP}][b] = 0"


def _removes_tla(j: int) -> str:
    """``_removes(j)``: identity j is cached before the step, and the step uncaches it and nothing else."""
    return f"{j} \\in Idents(ident) /\\ Idents(ident') = Idents(ident) \\ {{{j}}}"


def _idle_and_empty(s: dict, n: dict) -> str | None:
    left = idents(n)
    if left:
        return f"identities {left} are still cached"
    ref = _at(n["ref"], GROUP)
    busy = [b for b in _blocks(n) if _at(ref, b) != 0]
    if busy:
        return f"block(s) {busy} still in use: vLLM clears the prefix cache only when no block is in use"
    return None


class VllmMapping:
    """Turns vLLM events into :class:`Expect` steps; tracks each hash's depth and the cached hashes."""

    def __init__(self, max_depth: int, requests: int, internal_max: int = 5):
        self.max_depth = max_depth
        self.requests = requests
        self.internal_max = internal_max
        self.depth: dict[Any, int] = {}
        self.at_depth: dict[int, Any] = {}
        self.copies: dict[Any, int] = {}  # hash -> blocks vLLM holds it on (duplicates are legal in vLLM)
        self.block_size: int | None = None

    def _unmapped(self, ev: KVEvent, where: str, why: VllmEventRejection, detail: str) -> Unmapped:
        return Unmapped(ev.index, where, f"{why.name}: {detail}")

    def _place(self, ev: KVEvent, where: str, h: Any, d: int) -> None:
        if d > self.max_depth:
            raise self._unmapped(ev, where, VllmEventRejection.TOO_DEEP, f"hash {h} at depth {d} > {self.max_depth}")
        known = self.depth.get(h)
        if known is not None and known != d:
            raise self._unmapped(ev, where, VllmEventRejection.HASH_AT_TWO_DEPTHS,
                                 f"hash {h} was stored at depth {known}, now at depth {d}")
        other = self.at_depth.get(d)
        if other is not None and other != h:
            raise self._unmapped(ev, where, VllmEventRejection.SECOND_STREAM,
                                 f"hash {h} at depth {d}, where the stream already has hash {other}")
        self.depth[h], self.at_depth[d] = d, h

    def expects(self, ev: KVEvent, where: str) -> Iterator[Expect]:
        if ev.kind != "AllBlocksCleared":
            if ev.group != GROUP:
                raise self._unmapped(ev, where, VllmEventRejection.OTHER_GROUP, f"group_idx {ev.group}")
            if ev.medium not in (None, "GPU"):
                raise self._unmapped(ev, where, VllmEventRejection.OTHER_MEDIUM, f"medium {ev.medium!r}")
        if ev.kind == "BlockStored":
            yield from self._stored(ev, where)
        elif ev.kind == "BlockRemoved":
            for h in ev.hashes:
                if h not in self.depth:
                    raise self._unmapped(ev, where, VllmEventRejection.UNKNOWN_HASH, f"hash {h}")
                j, copies = self.depth[h], self.copies.get(h, 0)
                self.copies[h] = max(copies - 1, 0)
                if copies > 1:
                    continue  # another copy keeps the identity cached
                yield Expect(where, ("Evict", "AppendReserve"), internal_max=self.internal_max,
                             check=_removes(j, str(h)), check_key=("removes", j), source=ev.index,
                             tla=_removes_tla(j), describe=f"BlockRemoved hash {h} = identity {j}")
        else:
            for h in sorted((h for h, n in self.copies.items() if n), key=self.depth.__getitem__):
                j = self.depth[h]
                yield Expect(where, ("Evict",), check=_removes(j, str(h)), check_key=("removes", j),
                             source=ev.index, tla=_removes_tla(j), describe=f"AllBlocksCleared: identity {j}")
            self.copies.clear()
            yield Expect(where, (), internal=("Release",), internal_max=self.requests, check=_idle_and_empty,
                         check_key="idle", source=ev.index, tla=IDLE_AND_EMPTY_TLA,
                         describe="AllBlocksCleared: pool idle and empty")

    def _stored(self, ev: KVEvent, where: str) -> Iterator[Expect]:
        if self.block_size is None:
            self.block_size = ev.block_size
        if ev.block_size != self.block_size:
            raise self._unmapped(ev, where, VllmEventRejection.BLOCK_SIZE_CHANGED,
                                 f"block_size {ev.block_size}, the log began with {self.block_size}")
        if ev.num_tokens != len(ev.hashes) * ev.block_size:
            raise self._unmapped(ev, where, VllmEventRejection.TOKEN_COUNT,
                                 f"{ev.num_tokens} token ids for {len(ev.hashes)} hash(es) of {ev.block_size}")
        if ev.parent is None:
            base = 0
        elif ev.parent in self.depth:
            base = self.depth[ev.parent]
        else:
            raise self._unmapped(ev, where, VllmEventRejection.UNKNOWN_PARENT, f"parent hash {ev.parent}")
        for i, h in enumerate(ev.hashes, start=1):
            self._place(ev, where, h, base + i)
        for i, h in enumerate(ev.hashes, start=1):
            self.copies[h] = self.copies.get(h, 0) + 1
            if self.copies[h] > 1:
                continue  # a second block with a cached hash: the identity is already published
            yield Expect(where, ("CacheBlock",), {"j": base + i}, internal_max=self.internal_max, source=ev.index,
                         describe=f"BlockStored hash {h} = identity {base + i}")


def normalize(raw_events: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, KVEvent]]:
    for i, (where, raw) in enumerate(raw_events, start=1):
        yield where, _event(raw, i, where)


def max_depth(events: Iterable[tuple[str, KVEvent]]) -> int:
    """The deepest depth a log's parent chains reach (a dry run of the mapping's depth bookkeeping)."""
    depth: dict[Any, int] = {}
    deepest = 1
    for _where, ev in events:
        if ev.kind == "BlockStored":
            base = 0 if ev.parent is None else depth.get(ev.parent, 0)
            for i, h in enumerate(ev.hashes, start=1):
                depth.setdefault(h, base + i)
            deepest = max(deepest, base + len(ev.hashes))
    return deepest


# MaxGen, MaxEpoch and MaxVersion bound only StateBound, which the search and the generated trace spec never
# use as a constraint: any value leaves them unbounded (this one is TLC's largest integer).
UNBOUNDED = (1 << 31) - 1


def kv_constants(blocks: int, requests: int, depth: int) -> dict[str, Any]:
    """``KVAllocation``'s constants for the mapping (module doc)."""
    from kvexact.spec.checker import ModelValue

    return {"Groups": frozenset({GROUP}), "Blocks": frozenset(range(1, blocks + 1)),
            "Requests": frozenset(ModelValue(f"r{i}") for i in range(1, requests + 1)),
            "NoReq": ModelValue("NoReq"), "P": 1, "MaxTokens": depth, "MaxGen": UNBOUNDED,
            "MaxEpoch": UNBOUNDED, "MaxVersion": UNBOUNDED, "Concurrent": 1, "TailPolicy": "eager"}


@functools.lru_cache(maxsize=8)
def kv_model(blocks: int, requests: int, depth: int) -> Any:
    """``KVAllocation`` with the mapping's constants (module doc); loaded once per constants (it is never
    mutated: the search only reads it), each split action compiled when the search first takes it."""
    from kvexact.spec import spec_dir
    from kvexact.spec.checker import load_model

    return load_model(spec_dir() / "KVAllocation.tla", None, kv_constants(blocks, requests, depth),
                      lazy_actions=True)


def write_event_module(raw_events: Iterable[tuple[str, Any]], out_dir: Path, blocks: int, requests: int = 2,
                       internal_max: int = 5, view: bool = True) -> Path:
    """Write ``KVAllocationPartial.tla/.cfg`` (``partial_module.trace_spec`` over the mapping's steps, each check
    in its TLA+ form) and a copy of the spec into ``out_dir``; return the module path. Raises
    :class:`Unmapped` for an event the mapping refuses (the search refuses it at the same event)."""
    from kvexact.conformance.partial_module import trace_spec, write_generated
    from kvexact.spec import spec_dir

    events = list(normalize(raw_events))
    depth = max_depth(events)
    mapping = VllmMapping(depth, requests, internal_max)
    steps = [step for where, ev in events for step in mapping.expects(ev, where)]
    fresh = tuple(f"r{i}" for i in range(1, requests + 1))
    module = trace_spec("KVAllocation", f"a vLLM event log ({len(events)} events)",
                        kv_model(blocks, requests, depth), steps, INTERNAL, SILENT, defs=TLA_DEFS, fresh=fresh)
    return write_generated(spec_dir() / "KVAllocation.tla", module, kv_constants(blocks, requests, depth), fresh,
                           out_dir, view="TraceView" if view else "")


def validate_events(raw_events: Iterable[tuple[str, Any]], blocks: int, requests: int = 2,
                    depth: int | None = None, internal_max: int = 5, mode: str = "minimal",
                    max_candidates: int = 100_000) -> PartialResult:
    """Validate a vLLM event log (``(where, raw event)`` pairs, e.g. :func:`read_events`) against
    ``KVAllocation`` with ``blocks`` usable blocks and up to ``requests`` requests holding blocks at once."""
    events = list(normalize(raw_events))
    if depth is None:
        depth = max_depth(events)
    model = kv_model(blocks, requests, depth)
    mapping = VllmMapping(depth, requests, internal_max)
    search = Search(model, INTERNAL, SILENT, view=kv_view, mode=mode, max_candidates=max_candidates)
    return search.run(step for where, ev in events for step in mapping.expects(ev, where))


def event_report(result: PartialResult, events: int) -> str:
    """The user-facing text of a validated event log."""
    if result.ok:
        return (f"vLLM event log accepted by KVAllocation: {events} events, {result.steps} spec steps; "
                f"candidate states at most {result.max_candidates}")
    return result.summary()


def load_log(source: str | None, live: str | None, idle_s: float = 2.0, max_batches: int | None = None,
             topic: bytes = b"") -> list[tuple[str, Any]]:
    """(where, raw event) of a file, or of a live publisher (empty: nothing arrived within ``idle_s``)."""
    if live is not None:
        return list(events_from_batches(live_batches(live, topic, idle_s, max_batches)))
    assert source is not None
    return read_events(Path(source))


def run_event_log(source: str | None, live: str | None, *, blocks: int, requests: int, internal_max: int,
                  mode: str, idle_s: float = 2.0, max_batches: int | None = None,
                  topic: bytes = b"") -> tuple[int, str]:
    """(exit code, text) for ``kvexact validate-trace --events vllm``: 0 accepted, 1 rejected, 2 bad input."""
    try:
        raw = load_log(source, live, idle_s, max_batches, topic)
        if not raw:
            return 3, f"validate-trace: no event batch arrived from {live} within {idle_s} s"
        result = validate_events(raw, blocks, requests, None, internal_max, mode)
    except EventFormatError as exc:
        return 2, f"validate-trace: {exc}"
    return (0 if result.ok else 1), event_report(result, len(raw))
