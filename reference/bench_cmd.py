"""``kvexact bench reference``: per-operation cost of the reference allocator at several pool sizes.

Invariant checked: no operation scans the pool: the state cells each operation writes are the same at
every pool size (deterministic), and operations per second at the largest pool stay within
``--max-slowdown`` of the smallest (timing; generous because shared CI machines are noisy). Exit 1
when either fails. The pool is partly occupied before timing
(by one-block requests, ``--fill``), so the free queue and the refcount maps are large and busy. The per-operation
self-check is off here (it is O(pool) by design and runs in the tests instead).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import click

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


@click.command("reference")
@click.option("--sizes", default="1024,16384,131072", show_default=True,
              help="comma-separated pool sizes, in blocks per cache group")
@click.option("--ops", default=300, show_default=True, help="operations timed per kind, size and round")
@click.option("--repeat", default=3, show_default=True, help="rounds per size (the best round counts)")
@click.option("--fill", default=0.25, show_default=True, help="fraction of the pool occupied before timing")
@click.option("--max-slowdown", default=4.0, show_default=True,
              help="fail when the largest pool is this many times slower than the smallest")
@click.option("--json", "as_json", is_flag=True, help="print the figures as JSON")
def bench_reference(sizes: str, ops: int, repeat: int, fill: float, max_slowdown: float, as_json: bool) -> int:
    """Time allocate, append, fork, release and prefix lookup at several pool sizes."""
    try:
        pool_sizes = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError:
        raise click.UsageError(f"--sizes must be comma-separated integers, got {sizes!r}") from None
    if not pool_sizes or min(pool_sizes) <= 0 or ops <= 0 or repeat <= 0 or not 0 <= fill < 1:
        raise click.UsageError("sizes, --ops and --repeat must be positive and --fill in [0, 1)")
    if min(pool_sizes) * (1 - fill) < 2 * ops + 4:
        raise click.UsageError(f"the smallest pool needs at least {2 * ops + 4} free blocks for --ops {ops}")
    figures = {n: measure(n, ops, fill, repeat) for n in pool_sizes}
    small, large = figures[min(pool_sizes)], figures[max(pool_sizes)]
    slowdown = {op: small[op] / large[op] for op in OPERATIONS}
    work_grows = [op for op in OPERATIONS if large[f"cells/{op}"] != small[f"cells/{op}"]]
    if as_json:
        click.echo(json.dumps({"ops_per_second": figures, "slowdown_largest_vs_smallest": slowdown}, indent=2))
    else:
        click.echo(f"operations per second (2 cache groups, P=16, {fill:.0%} of the pool occupied, best of "
                   f"{repeat} rounds of {ops})")
        click.echo("blocks/group " + "".join(f"{op:>15}" for op in OPERATIONS))
        for n, row in figures.items():
            click.echo(f"{n:>12} " + "".join(f"{row[op]:>15,.0f}" for op in OPERATIONS))
        click.echo(f"{'slowdown':>12} " + "".join(f"{slowdown[op]:>14.2f}x" for op in OPERATIONS))
        click.echo(f"{'cells/op':>12} " + "".join(f"{small[f'cells/{op}']:>15.0f}" for op in OPERATIONS)
                   + "   (state cells written per operation, the same at every size)")
    if work_grows:
        click.echo(f"state cells written per operation grow with pool size: {', '.join(work_grows)}", err=True)
        return 1
    worst = max(slowdown.values())
    if worst > max_slowdown:
        click.echo(f"per-operation cost grows with pool size: worst slowdown {worst:.2f}x > {max_slowdown}x",
                   err=True)
        return 1
    return 0
