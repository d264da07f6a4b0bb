"""Stand-in modules that let SGLang 0.5.23's ``radix_cache.py`` and allocators load on a CPU.

The real ``sglang.srt.mem_cache.memory_pool`` builds GPU K/V pools and, on import, pulls SGLang's model
layers and quantization code (torchvision, gguf, compressed-tensors, ...). The radix cache and the
allocators use nothing of it beyond the names ``ReqToTokenPool`` and ``KVCache`` (type positions; the
live adapter keeps each request's row itself). :func:`install` puts a small module with those two names
in ``sys.modules`` before SGLang is imported. The wheels' files are never changed.

Also :func:`counter_clock`: SGLang stamps access times with ``time.monotonic()``; the live adapter gives
``radix_cache`` a counter instead (as notes/sglang.md §8 prescribes for reproducible LRU order), the
same clock the profile uses.
"""

from __future__ import annotations

import sys
import time
import types
from typing import Any

MEMORY_POOL = "sglang.srt.mem_cache.memory_pool"


class ReqToTokenPool:
    """Stand-in: the name the radix cache imports; the live adapter never hands one to the cache."""

    def __init__(self, *args: Any, **kwargs: Any):
        raise NotImplementedError("stand-in ReqToTokenPool: the live adapter keeps request rows itself")


class KVCache:
    """Stand-in: a type name only (the allocators keep a reference they never use on this path)."""


def install() -> None:
    """Register the stand-in ``memory_pool`` module unless SGLang's own is already loaded."""
    if MEMORY_POOL in sys.modules:
        return
    module = types.ModuleType(MEMORY_POOL, "kvexact stand-in for SGLang's GPU memory pool module")
    module.ReqToTokenPool = ReqToTokenPool  # type: ignore[attr-defined]
    module.KVCache = KVCache  # type: ignore[attr-defined]
    sys.modules[MEMORY_POOL] = module


class CounterClock:
    """``time`` for ``radix_cache``: ``monotonic()`` counts 1, 2, 3, ...; everything else is real."""

    def __init__(self) -> None:
        self.now = 0

    def monotonic(self) -> float:
        self.now += 1
        return float(self.now)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)
