"""Stand-in modules that let SGLang 0.5.23's ``radix_cache.py`` and allocators load on a CPU.

Two modules the radix cache imports would, on import, pull SGLang's model layers, quantization and
multimodal code (torchvision, gguf, compressed-tensors, ...): the GPU memory pool
(``sglang.srt.mem_cache.memory_pool``: only the names ``ReqToTokenPool`` and ``KVCache`` are used, in type
positions; the live adapter keeps each request's row itself) and the metrics collector (unused with
``enable_metrics=False``). :func:`install` puts small modules with just those names in ``sys.modules``
before SGLang is imported; each raises if SGLang ever calls into it. The wheels' files are never changed.

Also :func:`counter_clock`: SGLang stamps access times with ``time.monotonic()``; the live adapter gives
``radix_cache`` a counter instead (as docs/peers/sglang.md §8 prescribes for reproducible LRU order), the
same clock the profile uses.
"""

from __future__ import annotations

import sys
import time
import types
from typing import Any

MEMORY_POOL = "sglang.srt.mem_cache.memory_pool"
METRICS = "sglang.srt.observability.metrics_collector"


class ReqToTokenPool:
    """Stand-in: the name the radix cache imports; the live adapter never hands one to the cache."""

    def __init__(self, *args: Any, **kwargs: Any):
        raise NotImplementedError("stand-in ReqToTokenPool: the live adapter keeps request rows itself")


class KVCache:
    """Stand-in: a type name only (the allocators keep a reference they never use on this path)."""


class RadixCacheMetricsCollector:
    """Stand-in: metrics stay disabled (``enable_metrics=False``), so nothing constructs one."""

    def __init__(self, *args: Any, **kwargs: Any):
        raise NotImplementedError("stand-in metrics collector: the live adapter runs without metrics")


def _unused(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("stand-in: only SGLang's metrics set-up calls this")


STANDINS: dict[str, dict[str, Any]] = {
    # GPU K/V pools; importing the real module pulls SGLang's model layers and quantization code.
    MEMORY_POOL: {"ReqToTokenPool": ReqToTokenPool, "KVCache": KVCache},
    # Prometheus metrics; importing the real module pulls the multimodal configs (torchvision, ...).
    METRICS: {"STAT_LOGGER_ROLE_RADIX_CACHE": "radix_cache", "RadixCacheMetricsCollector": RadixCacheMetricsCollector,
              "radix_cache_metric_labels": _unused, "resolve_collector_class": _unused},
}


def install() -> None:
    """Register each stand-in module unless SGLang's own is already loaded."""
    for name, attributes in STANDINS.items():
        if name in sys.modules:
            continue
        module = types.ModuleType(name, "kvexact stand-in (conformance/live/sglang_standins.py)")
        for attribute, value in attributes.items():
            setattr(module, attribute, value)
        sys.modules[name] = module


class CounterClock:
    """``time`` for ``radix_cache``: ``monotonic()`` counts 1, 2, 3, ...; everything else is real."""

    def __init__(self) -> None:
        self.now = 0

    def monotonic(self) -> float:
        self.now += 1
        return float(self.now)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)
