"""A broken ``--adapter`` is reported as such (one line, exit 2 or 3, a named AdapterProblem), before any
example runs, by ``conform``, ``fuzz`` and the gate; an adapter call that never returns is stopped and named;
a failure through an adapter prints its steps and writes the adapter's own trace."""

from __future__ import annotations

import json
import textwrap

import pytest
from hypothesis import settings

from kvexact.conformance.adapter_border import load_adapter
from kvexact.conformance.runner import run_machine
from kvexact.reference.adapters import AdapterError, AdapterProblem

FEW = ["--no-kernels", "--examples", "3", "--steps", "8"]

PROBES = {
    "syntax": "def factory(config:\n    pass\n",
    "signature": "from kvexact.conformance.simple_runtime import simple_runtime\n"
                 "def none():\n    return simple_runtime(None)\n"
                 "def two(config, extra):\n    return simple_runtime(config)\n",
    "raises": "def factory(config):\n    raise RuntimeError('no device here')\n",
    "not_adapter": "def factory(config):\n    return 42\n",
    "missing": "from kvexact.conformance.simple_runtime import SimpleRuntimeAllocator\n"
               "class NoRelease(SimpleRuntimeAllocator):\n    release = None\n"
               "def factory(config):\n    return NoRelease(config)\n",
    "bad_method": "from kvexact.conformance.simple_runtime import SimpleRuntimeAllocator\n"
                  "class OneArgStart(SimpleRuntimeAllocator):\n"
                  "    def start(self, request_id):\n        return super().start(request_id, [1])\n"
                  "def factory(config):\n    return OneArgStart(config)\n",
    "bad_declaration": "from kvexact.reference.index import RadixIndex\n"
                       "class MostRecentFirst(RadixIndex):\n    eviction_order = 'mru'\n"
                       "def factory(config):\n    return MostRecentFirst(config)\n"
                       "factory.adapter_protocol = 'prefix-index'\n",
    "index_missing": "from kvexact.reference.peers.sglang_protocol import sglang_factory\n"
                     "class NoEvict:\n    def __init__(self, inner):\n        self.inner = inner\n"
                     "    def __getattr__(self, name):\n"
                     "        if name == 'evict':\n            raise AttributeError(name)\n"
                     "        return getattr(self.inner, name)\n"
                     "def factory(config):\n    return NoEvict(sglang_factory(config))\n"
                     "factory.adapter_protocol = 'prefix-index'\n",
    "hangs": textwrap.dedent("""\
        import threading
        from kvexact.conformance.simple_runtime import SimpleRuntimeAllocator
        NEVER = threading.Event()
        class Hangs(SimpleRuntimeAllocator):
            def start(self, request_id, prompt):
                NEVER.wait()  # never set: the call does not return
        def factory(config):
            return Hangs(config)
        """),
    "raises_later": textwrap.dedent("""\
        from kvexact.conformance.simple_runtime import simple_runtime
        built = []
        def factory(config):
            built.append(1)
            if len(built) > 2:  # the border's adapter and the first example's: then it breaks
                raise MemoryError("out of device memory")
            return simple_runtime(config)
        """),
}


@pytest.fixture
def probe(tmp_path, monkeypatch, request):
    """``probe(kind)`` -> ``module:`` of a fresh module holding that broken adapter (a unique name per test)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    prefix = "kvx_probe_" + request.node.name.split("[")[0].removeprefix("test_")[:40]

    def make(kind: str) -> str:
        name = f"{prefix}_{kind}"
        (tmp_path / f"{name}.py").write_text(PROBES[kind], encoding="utf-8")
        return name

    return make


def _one_line_error(code: int, text: str, expected_code: int, *needles: str) -> None:
    assert code == expected_code, text
    assert "Traceback" not in text and "internal error" not in text and "FAILED" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("kvexact: error:")]
    assert len(errors) == 1, text
    for needle in needles:
        assert needle in errors[0], text


def test_adapter_not_importable_is_a_usage_error(kvexact_cli):
    code, text = kvexact_cli(["conform", "--adapter", "kvx_no_such_module:factory", *FEW]).code_and_text
    _one_line_error(code, text, 2, "kvx_no_such_module:factory", "cannot import")
    with pytest.raises(AdapterError) as exc:
        load_adapter("kvx_no_such_module:factory")
    assert exc.value.problem is AdapterProblem.NOT_IMPORTABLE


BROKEN = [  # (probe module, factory, exit code, what the one line says, the named problem)
    pytest.param("syntax", "factory", 2, ("syntax error", "line 1"), AdapterProblem.IMPORT_FAILED,
                 id="module_with_a_syntax_error"),
    pytest.param("signature", "none", 2, ("cannot be called as factory(config)", "too many positional arguments"),
                 AdapterProblem.FACTORY_SIGNATURE, id="factory_of_the_wrong_signature_no_parameter"),
    pytest.param("signature", "two", 2, ("cannot be called as factory(config)", "missing a required argument: 'extra'"),
                 AdapterProblem.FACTORY_SIGNATURE, id="factory_of_the_wrong_signature_two_parameters"),
    pytest.param("raises", "factory", 2, ("the factory raised RuntimeError: no device here",),
                 AdapterProblem.FACTORY_RAISED, id="factory_that_raises"),
    pytest.param("not_adapter", "factory", 2, ("int is not an adapter of the allocator protocol",),
                 AdapterProblem.NOT_AN_ADAPTER, id="object_that_is_not_an_adapter"),
    pytest.param("missing", "factory", 2, ("NoRelease has no method release()",), AdapterProblem.MISSING_METHOD,
                 id="adapter_missing_a_protocol_method"),
    pytest.param("bad_method", "factory", 2, ("start(request_id)", "2 positional argument(s)"),
                 AdapterProblem.METHOD_SIGNATURE, id="adapter_method_of_the_wrong_signature"),
    pytest.param("bad_declaration", "factory", 2, ("declares eviction_order='mru'", "the machines check lru"),
                 AdapterProblem.BAD_DECLARATION, id="index_adapter_declaring_an_unknown_eviction_order"),
]


@pytest.mark.parametrize("kind, factory, exit_code, says, problem", BROKEN)
def test_broken_adapter_is_reported_as_such(kvexact_cli, probe, kind, factory, exit_code, says, problem):
    """One line naming the adapter and what is wrong, exit 2 (bad argument) or 3 (could not run)."""
    adapter = f"{probe(kind)}:{factory}"
    code, text = kvexact_cli(["conform", "--adapter", adapter, *FEW]).code_and_text
    _one_line_error(code, text, exit_code, adapter, *says)
    with pytest.raises(AdapterError) as exc:
        load_adapter(adapter)
    assert exc.value.problem is problem and exc.value.exit_code == exit_code


def test_factory_that_raises_inside_a_machine_could_not_run(probe):
    """The border's adapter builds; a later one raises: no conformance verdict, the named problem instead."""
    module = probe("raises_later")
    fast = settings(max_examples=3, stateful_step_count=5, deadline=None, database=None, derandomize=True)
    load_adapter(f"{module}:factory")
    with pytest.raises(AdapterError, match="out of device memory") as exc:
        run_machine("KVAllocation", f"{module}:factory", fast, check_kernels=False)
    assert exc.value.problem is AdapterProblem.FACTORY_RAISED and exc.value.exit_code == 2


def test_prefix_index_adapter_missing_a_protocol_method_is_a_usage_error(probe):
    module = probe("index_missing")
    with pytest.raises(AdapterError, match=r"has no method evict\(\)") as exc:
        load_adapter(f"{module}:factory")
    assert exc.value.problem is AdapterProblem.MISSING_METHOD


def test_broken_adapter_in_fuzz_and_the_gate(kvexact_cli, probe):
    """The same border check in ``fuzz`` and ``gate``: a broken adapter ends before any check or round runs."""
    missing, raises = probe("missing"), probe("raises")
    code, text = kvexact_cli(["fuzz", "--minutes", "1", "--adapter", f"{missing}:factory"]).code_and_text
    _one_line_error(code, text, 2, "has no method release()")
    code, text = kvexact_cli(["gate", "--select", "negative-registry", "--adapter", f"{missing}:factory"]).code_and_text
    _one_line_error(code, text, 2, "has no method release()")
    code, text = kvexact_cli(["gate", "--select", "negative-registry", "--adapter", f"{raises}:factory"]).code_and_text
    _one_line_error(code, text, 2, "the factory raised")


def test_adapter_call_that_never_returns_fails_the_check_naming_the_call(kvexact_cli, probe, tmp_path):
    """A hang is the adapter's failure (exit 1, HUNG, the call and its arguments), with a replay script of the
    calls that led to it, not a run that could not be made."""
    module = probe("hangs")
    out = tmp_path / "out"
    code, text = kvexact_cli(["conform", "--adapter", f"{module}:factory", "--spec", "KVAllocation",
                              "--call-timeout", "0.5", *FEW, "--out", str(out)]).code_and_text
    assert code == 1, text
    assert "Traceback" not in text and "internal error" not in text, text
    line = next(ln for ln in text.splitlines() if ln.startswith("AdapterFaultError: "))
    for needle in ("HUNG", f"{module}:factory", "start('r", "did not return within 0.5 s"):
        assert needle in line, line
    repros = list(out.glob("test_repro_KVAllocation_*.py"))
    assert len(repros) == 1 and "adapter.start('r" in repros[0].read_text(), text


def test_adapter_call_that_never_returns_fails_the_gates_machines(probe):
    from kvexact.gate.conformance_checks import _run
    from kvexact.gate.framework import GateContext

    module = probe("hangs")
    runs = _run(GateContext(adapter=f"{module}:factory", call_timeout=0.5), f"{module}:factory")
    assert runs and not any(r.passed for r in runs)
    assert all("HUNG" in r.error and "did not return within 0.5 s" in r.error for r in runs)


def test_a_failure_through_an_adapter_prints_its_steps_and_writes_the_adapters_trace(kvexact_cli, tmp_path):
    """Shrinking bounded by --shrink-seconds; the report has the steps, a reproduction and the adapter's own
    trace, in which the adapter's answer, copies or tables differ from the reference's (the bug is in the trace)."""
    out = tmp_path / "failures"
    code, text = kvexact_cli(["conform", "--spec", "CowPublication", "--examples", "30", "--steps", "20",
                              "--shrink-seconds", "1", "--out", str(out),
                              "--adapter", "kvexact.conformance.simple_runtime:faulty_no_cow"]).code_and_text
    assert code == 1 and "FAILED" in text, text
    assert "conform: failing steps:" in text and "state.start(" in text, text
    assert "pool_gauges_reconcile" not in text  # the invariant checks are left out of the steps
    assert len(list(out.glob("test_repro_CowPublication_*.py"))) == 1
    trace = out / "CowPublication.adapter.itf.json"
    assert f"ITF trace of the adapter's steps in the failing example: {trace}" in text
    doc = json.loads(trace.read_text())
    states = doc["states"][1:]
    assert states and {s["action"] for s in states} <= {"start", "append", "append_with_failure", "release", "fork"}
    # the missing copy shows as a different answer (accepted where the reference ran out of blocks for
    # the copy), different copies, or different tables
    assert any(s[f] != s[f"reference_{f}"] for s in states for f in ("accepted", "copies", "tables"))



def test_a_prefix_index_failure_writes_the_adapters_trace_with_its_wrong_step(kvexact_cli, tmp_path):
    """A faulty prefix index (cancel leaks its private slots) fails ``conform --spec Radix``; the written
    ``Radix.adapter.itf.json`` holds the adapter's own calls, and the first step whose free slots differ
    from the normative index's is the adapter's cancel (every step before it agrees)."""
    out = tmp_path / "failures"
    code, text = kvexact_cli(["conform", "--spec", "Radix", "--examples", "30", "--steps", "20",
                              "--shrink-seconds", "1", "--out", str(out),
                              "--adapter", "kvexact.conformance.faulty_index:faulty_leaky_cancel"]).code_and_text
    assert code == 1 and "FAILED" in text and "faulty-leaky-cancel free slots" in text, text
    trace = out / "Radix.adapter.itf.json"
    assert f"ITF trace of the adapter's steps in the failing example: {trace}" in text
    doc = json.loads(trace.read_text())
    assert doc["#meta"]["adapter"] == "faulty-leaky-cancel" and doc["#meta"]["spec"] == "Radix"
    states = doc["states"][1:]
    assert states and {s["action"] for s in states} <= {"admit", "extend", "finish", "cancel", "evict"}
    wrong = [i for i, s in enumerate(states) if s["free_slots"] != s["reference_free_slots"]]
    assert wrong, states
    first = states[wrong[0]]
    assert first["action"] == "cancel" and wrong[0] == len(states) - 1, first
    cancelled = first["params"][0]
    leaked = set(first["reference_free_slots"]) - set(first["free_slots"])
    assert leaked and leaked <= set(states[wrong[0] - 1]["rows"][cancelled])  # the cancelled row's slots
    assert cancelled not in first["rows"]
    admits = [s for s in states if s["action"] == "admit" and s["answer"].startswith("matched")]
    assert admits and all(s["answer"] == s["reference_answer"] for s in admits)


def test_a_prefix_index_trace_of_a_passing_example_agrees_step_by_step(tmp_path, monkeypatch):
    """With KVEXACT_TRACE_ALWAYS=1 the correct normative index leaves a trace in which every call's free
    slots and matched lengths equal the reference's (what makes a disagreement above evidence)."""
    from kvexact.conformance.runner import machine_settings

    monkeypatch.setenv("KVEXACT_TRACE_DIR", str(tmp_path))
    monkeypatch.setenv("KVEXACT_TRACE_ALWAYS", "1")
    run = run_machine("Radix", "kvexact.reference.index:radix_factory", machine_settings("ci", 3, 30), seed=7,
                      check_kernels=False)
    assert run.passed, run.error
    states = json.loads((tmp_path / "Radix.adapter.itf.json").read_text())["states"][1:]
    assert states and all(s["free_slots"] == s["reference_free_slots"] for s in states)
    assert all(s["answer"] == s["reference_answer"] for s in states if s["action"] == "admit"
               and s["answer"].startswith("matched"))


def test_the_call_limit_keeps_an_outer_timer_armed():
    """pytest-timeout (and anything else) may have SIGALRM armed: a limited call leaves it armed after it."""
    import signal

    from kvexact.conformance.adapter_border import limited_factory
    from kvexact.conformance.simple_runtime import simple_runtime
    from kvexact.reference.adapters import AdapterConfig

    previous = signal.signal(signal.SIGALRM, signal.SIG_IGN)
    outer = signal.setitimer(signal.ITIMER_REAL, 1000.0)
    try:
        adapter = limited_factory(simple_runtime, "simple", 5.0)(AdapterConfig())
        assert adapter.start("r0", [1, 2]).accepted
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 5.0  # the outer timer, not ours, nor disarmed
        assert signal.getsignal(signal.SIGALRM) is signal.SIG_IGN
    finally:
        signal.setitimer(signal.ITIMER_REAL, *outer)
        signal.signal(signal.SIGALRM, previous)


def test_the_adapter_docstring_names_exactly_the_methods_the_allocator_machines_call():
    """The probe "the docstring names methods the machines never call (inject_failure, digest)": the
    methods the adapters module says the machines call are the ones ``--adapter`` checks, and each is
    called in the allocator machine's source."""
    import inspect
    import re

    from kvexact.conformance.machines import allocator
    from kvexact.reference import adapters

    doc = adapters.__doc__ or ""
    paragraph = doc[doc.index("What the allocator machines call"):doc.index("Nothing else")]
    named = set(re.findall(r"``(\w+)``", paragraph)) - {"name", "config", "lockstep"}
    assert named == set(adapters.REQUIRED_METHODS) | set(adapters.OPTIONAL_METHODS)
    source = inspect.getsource(allocator)
    assert all(f'"{m}"' in source or f".{m}(" in source for m in named), named
    assert "inject_failure" not in doc and "digest()" not in doc



def test_the_time_limited_adapter_keeps_its_methods_signatures(probe):
    """The machines call an adapter through a time-limiting wrapper; its methods keep the adapter's own signatures,
    so the arity check inside a machine (the gate's path, which has no border check of its own) names a method the
    machines cannot call, and the adapter's class, not the wrapper's."""
    with pytest.raises(AdapterError, match=r"adapter OneArgStart: start\(request_id\)") as exc:
        run_machine("KVAllocation", f"{probe('bad_method')}:factory",
                    settings(max_examples=2, stateful_step_count=4, deadline=None, database=None), 0,
                    check_kernels=False)
    assert exc.value.problem is AdapterProblem.METHOD_SIGNATURE


def test_an_adapter_that_compares_request_ids_by_identity_is_caught(monkeypatch):
    """The allocator machines hand the SUT a new string object for a request id at every call, so a runtime that
    matches ids with ``is`` (here the vLLM profile's removal of a request's entries) fails, while the same
    profile comparing by value passes."""
    from planting import planted_module

    from kvexact.conformance.runner import machine_settings
    from kvexact.reference.peers import vllm, vllm_protocol

    run_settings = settings(machine_settings("ci", shrink=False), max_examples=10, stateful_step_count=30)
    factory = "kvexact.reference.peers.vllm_protocol:vllm_factory"
    assert run_machine("KVAllocation", factory, run_settings, 0, check_kernels=False).passed
    planted = planted_module(vllm, "for k, v in pairs if k != key)", "for k, v in pairs if k is not key)")
    monkeypatch.setattr(vllm_protocol, "VllmKVCacheManager", planted.VllmKVCacheManager)
    assert not run_machine("KVAllocation", factory, run_settings, 0, check_kernels=False).passed
