"""The border as a property (Hypothesis, deterministic, a few dozen examples): malformed traces, runtime
event logs and cfgs, and adapters that raise, call ``sys.exit``/``os._exit``, return the wrong type or mutate
their input, each end the command in a named error or a failing check (exit 1 or 2; for ``kvexact check``
TLC's parse/config codes 150/151), never in success (0) and never in an internal error (3)."""

from __future__ import annotations

import functools
import itertools
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trace_helpers import kv_trace

from kvexact.conformance import trace as tr

BORDER = settings(max_examples=24, deadline=None, derandomize=True, database=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
COUNTER = itertools.count()

MODEL = """---- MODULE B ----
EXTENDS Naturals
CONSTANT N
VARIABLE x
Init == x = 0
Next == x < N /\\ x' = x + 1
====
"""
GOOD_CFG = "CONSTANT N = 2\nINIT Init\nNEXT Next\nCHECK_DEADLOCK FALSE\n"

# an adapter that misbehaves in ``method`` (every call of it), as ``behaviour`` says
ADAPTER = """import os, sys
from kvexact.conformance.simple_runtime import SimpleRuntimeAllocator
class Odd(SimpleRuntimeAllocator):
    def {method}(self, *args):
        {behaviour}
        return super().{method}(*args)
def factory(config):
    return Odd(config)
"""
BEHAVIOURS = {"raise": "raise RuntimeError('device lost')", "exit0": "sys.exit(0)", "exit7": "sys.exit(7)",
              "os_exit0": "os._exit(0)", "wrong_type": "return 42", "mutate": "args[-1].append(1)",
              "none": "return None"}


@functools.cache
def good_trace() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        tr.write_ndjson(kv_trace(), Path(tmp) / "t.ndjson")
        return (Path(tmp) / "t.ndjson").read_text()


def run(args: list[str]) -> tuple[int, str]:
    """``kvexact ARGS`` in this process: exit code and output."""
    import contextlib
    import io

    from kvexact.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code, out.getvalue()


PROBES = st.one_of(
    st.tuples(st.just("trace"), st.floats(0.05, 0.95)),  # a strict prefix of a good trace
    st.tuples(st.just("events"), st.binary(min_size=1, max_size=40)),  # bytes that are no event log
    st.tuples(st.just("cfg"), st.sampled_from(["INIT", "NEXT Nope", "CONSTANT N = ", "Bogus <- Init", "N <- Nope",
                                               "INVARIANT Missing", "SPECIFICATION", "}{", "CONSTANT N = 2 3"])),
)
ADAPTERS = st.tuples(st.just("adapter"), st.tuples(st.sampled_from(["start", "block_ids"]),
                                                   st.sampled_from(sorted(BEHAVIOURS))))


@given(probe=PROBES)
@BORDER
def test_every_malformed_input_ends_in_a_named_error(probe, tmp_path, monkeypatch):
    _probe(probe, tmp_path, monkeypatch)


@given(probe=ADAPTERS)
@settings(BORDER, max_examples=20)  # 14 behaviours in all: Hypothesis runs each once
def test_every_bad_adapter_ends_in_a_named_error_or_a_failing_check(probe, tmp_path, monkeypatch):
    _probe(probe, tmp_path, monkeypatch)


def _probe(probe, tmp_path, monkeypatch) -> None:
    """Run one probe; its exit code must be one of those allowed for its kind, with no internal error."""
    kind, arg = probe
    folder = tmp_path / f"p{next(COUNTER)}"
    folder.mkdir()
    if kind == "trace":
        text = good_trace()
        (folder / "t.ndjson").write_text(text[:max(1, int(len(text.rstrip()) * arg))])
        code, out = run(["validate-trace", "KVAllocation", str(folder / "t.ndjson")])
        allowed = {1, 2}
    elif kind == "events":
        (folder / "e.bin").write_bytes(b"\xc1" + arg)  # 0xc1 is never a MessagePack byte, nor JSON's
        code, out = run(["validate-trace", "--events", "vllm", str(folder / "e.bin")])
        allowed = {1, 2}
    elif kind == "cfg":
        (folder / "B.tla").write_text(MODEL)
        (folder / "B.cfg").write_text(GOOD_CFG + arg + "\n")
        code, out = run(["check", "--engine", "embedded", str(folder / "B.tla")])
        allowed = {150, 151}
    else:
        method, behaviour = arg
        name = f"kvx_border_{folder.name}_{behaviour}"
        (folder / f"{name}.py").write_text(ADAPTER.format(method=method, behaviour=BEHAVIOURS[behaviour]))
        monkeypatch.syspath_prepend(str(folder))
        code, out = run(["conform", "--adapter", f"{name}:factory", "--spec", "KVAllocation", "--no-kernels",
                         "--examples", "3", "--steps", "5", "--no-shrink", "--out", str(folder / "out")])
        sys.modules.pop(name, None)
        allowed = {1, 2}
    assert code in allowed, (probe, code, out)
    assert "internal error" not in out and "Traceback" not in out, (probe, out)
