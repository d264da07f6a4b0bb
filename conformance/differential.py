"""``kvexact diff vllm|sglang``: a live runtime and its peer profile, side by side on random streams.

Each stream is a list of protocol operations generated from a seed. Both sides (the live adapter over
the installed runtime and the profile's adapter) run every operation; after every operation every
observable is compared: the operation's result, each request's table (or slot row) and length, and the
side's projection (vLLM: free queue, ref counts, cached keys, per-request blocks; SGLang: the free
slots in allocator order and the cache's sizes). A divergence is minimised to the shortest stream that
still diverges (greedy one-operation removal until none can go).

Invariant: a run reports a divergence only with the operation that first differs and both values.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Sequence
from typing import Any

import attrs

RUNTIMES = ("vllm", "sglang")


@attrs.frozen
class Op:
    """One protocol call: ``kind`` is the adapter method, ``args`` its arguments after nothing else."""

    kind: str
    args: tuple[Any, ...]

    def __str__(self) -> str:
        return f"{self.kind}({', '.join(map(repr, self.args))})"


@attrs.frozen
class Stream:
    """A stream and the geometry both sides are built with."""

    config: Any
    ops: tuple[Op, ...]


@attrs.frozen
class Divergence:
    """Where a stream first diverged: the step, the observable, the live and the profile values."""

    stream: Stream
    step: int
    observable: str
    live: Any
    profile: Any

    def describe(self) -> str:
        lines = [f"config {self.stream.config}"]
        lines += [f"  {i}: {op}" for i, op in enumerate(self.stream.ops)]
        lines.append(f"after step {self.step}, {self.observable}: live {self.live!r} != profile {self.profile!r}")
        return "\n".join(lines)


@attrs.frozen
class DiffReport:
    runtime: str
    version: str
    streams: int
    operations: int
    divergences: tuple[Divergence, ...]


def _plain(value: Any) -> Any:
    """Sequences as lists, recursively (a tuple and a list of the same items are the same answer)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _call(adapter: Any, op: Op) -> Any:
    try:
        return ("ok", _plain(getattr(adapter, op.kind)(*op.args)))
    except Exception:  # both sides raising is agreement (each names it its own way); the stream stops
        return ("raised",)


# ---- vLLM ---------------------------------------------------------------------------------------


def _generate(rng: random.Random, length: int, opening: str, max_prompt: int,
              choices: Sequence[tuple[float, str]], max_evict: int = 8) -> tuple[Op, ...]:
    """Random ops: open a request (always when none runs), else the first ``(threshold, kind)`` whose
    threshold exceeds a uniform draw; ``kind`` takes a running request (and a token for decode kinds),
    a closing kind ends it; ``evict`` takes a token count of 1..``max_evict``."""
    ops: list[Op] = []
    live: list[str] = []
    for _ in range(length):
        roll = rng.random()
        kind = next((k for t, k in choices if roll < t), "evict")
        if not live or kind == opening:
            rid = f"r{len(ops)}"
            live.append(rid)
            ops.append(Op(opening, (rid, tuple(rng.randint(1, 3) for _ in range(rng.randint(1, max_prompt))))))
        elif kind == "evict":
            ops.append(Op("evict", (rng.randint(1, max_evict),)))
        elif kind in ("append", "extend"):
            ops.append(Op(kind, (rng.choice(live), rng.randint(1, 3))))
        else:
            rid = rng.choice(live)
            live.remove(rid)
            ops.append(Op(kind, (rid,)))
    return tuple(ops)


def vllm_stream(rng: random.Random, length: int) -> Stream:
    """Starts with prompts over a 3-token alphabet (prefix hits are common), decodes and releases."""
    from kvexact.reference.adapters import AdapterConfig

    config = AdapterConfig(block_tokens=rng.choice((1, 2, 4)), num_groups=1, blocks_per_group=rng.randint(2, 10))
    return Stream(config, _generate(rng, length, "start", 9, ((0.35, "start"), (0.8, "append"), (1.0, "release"))))


def vllm_observe(adapter: Any, request_ids: Sequence[str]) -> dict[str, Any]:
    project = adapter.project() if hasattr(adapter, "project") else adapter.managers[0].project()
    tables = {rid: (list(adapter.table(rid, 0)), adapter.length(rid)) for rid in request_ids}
    return {"state": project, "tables": tables}


# ---- SGLang -------------------------------------------------------------------------------------


def sglang_stream(rng: random.Random, length: int) -> Stream:
    """Admissions over a 3-token alphabet, decode steps, finishes, cancels and evictions, at page size 1, 2 or 4
    (SGLang's paged allocator above 1) over 2..12 pages: an eviction batch frees up to three pages' worth of
    leaves, and admissions and decodes after it take pages from the free list in the order the batch and the
    releases left it (an alloc that runs short must not reorder it)."""
    from kvexact.reference.index import IndexConfig

    page = rng.choice((1, 2, 4))
    config = IndexConfig(pool_slots=page * rng.randint(4 if page == 1 else 2, 24 // page + 1), page_size=page)
    choices = ((0.3, "admit"), (0.55, "extend"), (0.7, "finish"), (0.8, "cancel"), (1.0, "evict"))
    return Stream(config, _generate(rng, length, "admit", 8, choices, max_evict=3 * page + 5))


def sglang_observe(adapter: Any, request_ids: Sequence[str]) -> dict[str, Any]:
    """Rows, the free list in allocator order (slot ids at page size 1, page ids above), and the cache's (total,
    evictable, protected) sizes."""
    rows = {rid: list(adapter.slot_ids(rid)) for rid in request_ids}
    profile = getattr(adapter, "sglang", None)
    if profile is None:
        return {"free": adapter.free_order(), "sizes": adapter.sizes(), "rows": rows}
    cache = profile.cache
    free = list(profile.allocator.free_pages) + list(profile.allocator.release_pages)
    return {"free": free, "sizes": (cache.total_size(), cache.evictable_size(), cache.protected_size()),
            "rows": rows}


# ---- driving ------------------------------------------------------------------------------------

SIDES: dict[str, tuple[str, str, Callable[..., Stream], Callable[..., dict[str, Any]]]] = {
    "vllm": ("kvexact.conformance.live.vllm:factory", "kvexact.reference.peers.vllm_protocol:vllm_factory",
             vllm_stream, vllm_observe),
    "sglang": ("kvexact.conformance.live.sglang:factory",
               "kvexact.reference.peers.sglang_protocol:sglang_factory", sglang_stream, sglang_observe),
}
OPENING = {"vllm": "start", "sglang": "admit"}
CLOSING = {"vllm": ("release",), "sglang": ("finish", "cancel")}


def _load(spec: str) -> Callable[..., Any]:
    module, attr = spec.split(":")
    return getattr(importlib.import_module(module), attr)


def runtime_version(runtime: str) -> str:
    """Imports the live adapter (which refuses an unsupported runtime) and returns the version found."""
    return importlib.import_module(f"kvexact.conformance.live.{runtime}").VERSION


def replay(runtime: str, stream: Stream) -> Divergence | None:
    """Both sides through ``stream``; the first observable that differs, or None."""
    live_spec, profile_spec, _gen, observe = SIDES[runtime]
    live, profile = _load(live_spec)(stream.config), _load(profile_spec)(stream.config)
    running: list[str] = []
    for step, op in enumerate(stream.ops):
        got, want = _call(live, op), _call(profile, op)
        if got != want:
            return Divergence(stream, step, f"result of {op}", got, want)
        if got[0] == "raised":
            return None
        rid = str(op.args[0]) if op.args else ""
        if op.kind == OPENING[runtime] and got[1] is not None and getattr(got[1], "accepted", True):
            running.append(rid)
        if op.kind in CLOSING[runtime] and rid in running:
            running.remove(rid)
        seen, expected = observe(live, running), observe(profile, running)
        for key in expected:
            if seen[key] != expected[key]:
                return Divergence(stream, step, key, seen[key], expected[key])
    return None


def minimise(runtime: str, divergence: Divergence) -> Divergence:
    """Drop operations one at a time (earliest first) while the stream still diverges."""
    best = divergence
    changed = True
    while changed:
        changed = False
        ops = best.stream.ops[: best.step + 1]
        for i in range(len(ops)):
            candidate = Stream(best.stream.config, ops[:i] + ops[i + 1:])
            found = replay(runtime, candidate)
            if found is not None:
                best, changed = found, True
                break
    return best


def run_diff(runtime: str, streams: int, seed: int, length: int = 24,
             on_stream: Callable[[int], None] | None = None) -> DiffReport:
    """``streams`` random streams from ``seed``; every divergence minimised (at most 5 kept)."""
    version = runtime_version(runtime)
    generate = SIDES[runtime][2]
    rng = random.Random(seed)
    divergences: list[Divergence] = []
    operations = 0
    for index in range(streams):
        stream = generate(rng, length)
        operations += len(stream.ops)
        found = replay(runtime, stream)
        if found is not None and len(divergences) < 5:
            divergences.append(minimise(runtime, found))
        elif found is not None:
            divergences.append(found)
        if on_stream is not None:
            on_stream(index)
    return DiffReport(runtime, version, streams, operations, tuple(divergences))
