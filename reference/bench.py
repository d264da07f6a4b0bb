"""Per-operation cost of the reference allocator at several pool sizes (``kvexact bench reference``).

Invariant checked: no operation scans the pool: the state cells each operation writes are the same at
every pool size (deterministic), and operations per second at the largest pool stay within
``--max-slowdown`` of the smallest (timing; generous because shared CI machines are noisy). Exit 1
when either fails. The pool is partly occupied before timing
(by one-block requests, ``--fill``), so the free queue and the refcount maps are large and busy. The per-operation
self-check is off here (it is O(pool) by design and runs in the tests instead).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kvexact.reference import lifecycle
from kvexact.reference import prefix as px
from kvexact.reference.allocator import Allocator
from kvexact.reference.keys import KeyInputs
from kvexact.reference.labs import prefix as px_lab
from kvexact.reference.namespaces import CacheIsolationNamespace, NamespaceRegistry, create_namespace
from kvexact.reference.pool import GroupConfig

OPERATIONS = ("allocate", "append", "fork", "release", "prefix_lookup")


def _setup(blocks: int, fill: float) -> px.PrefixCache:
    groups = [GroupConfig(0, 0, 16, 48 * 1024), GroupConfig(1, 1, 16, 16 * 1024)]
    ids = list(range(1, blocks + 1))
    alloc = Allocator(groups, [ids, ids])
    registry = create_namespace(NamespaceRegistry(), CacheIsolationNamespace(
        deployment_namespace="bench", tenant_id=px_lab.TENANT, namespace_id=px_lab.NAMESPACE, generation=0,
        cache_salt=None, model_generation=0))
    cache = px.PrefixCache(alloc, registry, px_lab.MANIFEST)
    for i in range(int(blocks * fill)):
        alloc.allocate(f"bg{i}", [i % 30000 + 1])
    alloc.allocate("P", px_lab.STREAM)
    cache.publish("P", KeyInputs(px_lab.STREAM), px_lab.NAMESPACE, 0)
    return cache


_WRITES: dict[str, int] = {}


def _rate(n: int, fn: Callable[[int], object], journal=None, name: str = "") -> float:
    start = time.perf_counter()
    before = journal.writes if journal is not None else 0
    for i in range(n):
        fn(i)
    rate = n / (time.perf_counter() - start)
    if journal is not None:
        _WRITES[name] = (journal.writes - before) // n
    return rate


def _round(cache: px.PrefixCache, tag: str, ops: int, tokens: list[int]) -> dict[str, float]:
    """One timed round of every operation; the round's requests are released afterwards."""
    alloc = cache.alloc
    j = alloc.journal
    rates = {"allocate": _rate(ops, lambda i: alloc.allocate(f"a{tag}{i}", tokens), j, "allocate"),
             "append": _rate(ops, lambda i: alloc.append(f"a{tag}{i}", 7), j, "append"),  # a boundary: new bundle
             "fork": _rate(ops, lambda i: lifecycle.fork(alloc, "P", f"f{tag}{i}"), j, "fork"),
             "release": _rate(ops, lambda i: lifecycle.release(alloc, f"f{tag}{i}"), j, "release"),
             "prefix_lookup": _rate(ops, lambda i: cache.lookup(px_lab.request(f"q{i}", px_lab.STREAM)), j,
                                    "prefix_lookup")}
    for i in range(ops):
        lifecycle.release(alloc, f"a{tag}{i}")
    return rates


def measure(blocks: int, ops: int, fill: float = 0.25, repeat: int = 3) -> dict[str, float]:
    """Best-of-``repeat`` operations per second of each operation on a pool of ``blocks`` blocks per group;
    ``cells/<op>`` entries give the state cells each operation writes (deterministic work)."""
    cache = _setup(blocks, fill)
    tokens = list(range(1, 17))
    best = dict.fromkeys(OPERATIONS, 0.0)
    for r in range(repeat):
        rates = _round(cache, f"{r}.", ops, tokens)
        best = {op: max(best[op], rates[op]) for op in OPERATIONS}
    best.update({f"cells/{op}": float(_WRITES[op]) for op in OPERATIONS})
    return best
