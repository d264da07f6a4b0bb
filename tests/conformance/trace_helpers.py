"""Helpers the trace tests share: a small reference trace of KVAllocation and the CLI run in-process."""

from __future__ import annotations

import pytest

from kvexact.conformance import trace as tr
from kvexact.reference import lifecycle
from kvexact.reference.adapters import TraceRecorder
from kvexact.reference.allocator import Allocator
from kvexact.reference.pool import GroupConfig

CONSTANTS = {"Groups": {0, 1}, "Blocks": {1, 2}, "Requests": {"r1", "r2"}, "NoReq": "NoReq", "P": 2,
             "MaxTokens": 3}
MODEL_VALUES = {"r1", "r2", "NoReq"}


def kv_trace() -> tr.Trace:
    """append at a boundary (reserve both groups, write, publish), append in place, cache, release, hit."""
    alloc = Allocator([GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 2, 4)], [[1, 2], [1, 2]], check_every_op=True)
    rec = TraceRecorder("KVAllocation", requests=["r1", "r2"]).attach(alloc)
    alloc.append("r1", 7)
    alloc.append("r1", 8)
    lifecycle.cache_block(alloc, "r1", 0, "1")
    lifecycle.release(alloc, "r1")
    lifecycle.prefix_hit(alloc, "r2", ["1"])
    return tr.trace_from_recorder(rec, CONSTANTS, MODEL_VALUES)



def run_cli(args, capsys):
    """``kvexact ARGS`` in this process: its exit code and its output (stdout then stderr)."""
    from kvexact.cli import main

    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return exc.value.code, out.out + out.err
