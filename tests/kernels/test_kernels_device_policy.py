"""The device policy: every tensor kernel-facing code makes comes from it, and ``--device`` is honoured.

The recorder below is a torch function mode that sees every tensor constructor call and the module that
made it. Kernel-facing code (the kernels' callers: differential helpers, gate checks, benchmark, state
machines and their device mirror) may make tensors only through :mod:`kvexact.kernels.device`; the kernel
wrappers may allocate outputs and workspaces only with an explicit ``device=`` (their inputs' device); the
float64 oracle computes on the host by contract. A constructor call anywhere else would put a tensor on the
default (host) device, which a native CUDA kernel cannot read.
"""

from __future__ import annotations

import ast
import importlib
import math
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode

from kvexact.kernels import device as dev
from kvexact.kernels.errors import DeviceError, DeviceRejection

CONSTRUCTORS = {"tensor", "as_tensor", "zeros", "ones", "full", "empty", "arange", "randn", "rand", "randint",
                "randperm", "linspace", "eye", "empty_strided"}
POLICY = "kvexact.kernels.device"
HOST_ORACLE = "kvexact.kernels.reference"
WRAPPERS = {"kvexact.kernels.paged", "kvexact.kernels.shared"}


def _violation(module: str, has_device: bool) -> bool:
    if not module.startswith("kvexact.") or module in (POLICY, HOST_ORACLE):
        return False
    return module not in WRAPPERS or not has_device


class Recorder(TorchFunctionMode):
    """Records (module, line, constructor, device given) of every constructor call made from kvexact code."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, int, str, bool]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in CONSTRUCTORS:
            frame = sys._getframe(1)
            while frame is not None and frame.f_globals.get("__name__", "").startswith("torch"):
                frame = frame.f_back
            if frame is not None:
                module = frame.f_globals.get("__name__", "")
                if module.startswith("kvexact."):
                    self.calls.append((module, frame.f_lineno, name, kwargs.get("device") is not None))
        return func(*args, **kwargs)

    def violations(self) -> list[str]:
        return sorted({f"{m}:{line} torch.{n}" for m, line, n, d in self.calls if _violation(m, d)})


def test_the_recorder_catches_a_constructor_outside_the_policy():
    """The check can fail: a tensor made by plain torch in a kvexact module is reported."""
    code = compile("import torch\ndef make():\n    return torch.zeros(3)\n", "<stray>", "exec")
    stray: dict = {"__name__": "kvexact.conformance.stray_machine"}
    exec(code, stray)
    with Recorder() as rec:
        stray["make"]()
        dev.zeros((3,))
    assert rec.violations() == ["kvexact.conformance.stray_machine:3 torch.zeros"]
    assert any(m == POLICY for m, *_ in rec.calls)


def test_differential_helpers_make_every_tensor_through_the_policy():
    from kvexact.kernels import differential as D

    decode = {"dtype": "fp16", "block_size": 16, "splits": 3, "heads": (4, 2), "dims": (16, 16),
              "layout": "combined_nb2", "lengths": [1, 17]}
    shared = {"dtype": "fp32", "block_size": 16, "prefix": "P", "group": 1}
    with Recorder() as rec:
        assert D.run_decode_case(decode)["passed"]
        assert D.run_shared_case(shared, suffix_lens=(0, 5))["passed"]
        assert D.run_seed_tree(torch.float32, 16, 1)["within_tolerance"]
    assert rec.violations() == []
    assert sum(m == POLICY for m, *_ in rec.calls) >= 10


@pytest.mark.parametrize("spec", ["KVAllocation", "Radix", "Vmm"])
def test_state_machines_make_every_tensor_through_the_policy(spec, monkeypatch):
    """The machines and their device mirror, a few steps each, with the kernels and attention checks on
    (trace validation, which makes no tensor and needs the TLA+ parser, is off: the GPU image lacks it)."""
    from kvexact.conformance import runner
    from kvexact.conformance.machines import allocator

    monkeypatch.setattr(runner, "machine_class",
                        lambda name, **kw: allocator.machine_class(name, validate_trace=False, **kw))
    with Recorder() as rec:
        run = runner.run_machine(spec, None, runner.machine_settings("ci", 2, 6, shrink=False), seed=0)
    assert run.passed, run.error
    assert rec.violations() == []
    made = {m for m, *_ in rec.calls if m == POLICY}
    assert made and run.steps > 0


def _kernel_facing_sources() -> list[tuple[str, Path]]:
    """Every module of kvexact's packages that imports torch (the layout does not matter)."""
    found = []
    for package_name in ("kvexact", "kvexact.kernels", "kvexact.conformance"):
        package = importlib.import_module(package_name)
        for info in pkgutil.iter_modules(package.__path__, package_name + "."):
            spec = importlib.util.find_spec(info.name)
            if spec is None or not spec.origin or not spec.origin.endswith(".py"):
                continue
            path = Path(spec.origin)
            if "import torch" in path.read_text():
                found.append((info.name, path))
    return found


def test_no_kernel_facing_module_calls_a_torch_constructor_outside_the_policy():
    """Static: covers the branches no run reaches. Only the policy, the host oracle and (with device=) the
    kernel wrappers call torch constructors."""
    sources = _kernel_facing_sources()
    assert {"kvexact.kernels.differential", "kvexact.kernels.bench", POLICY} <= {m for m, _ in sources}
    bad = []
    for module, path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
                    and node.func.attr in CONSTRUCTORS):
                has_device = any(k.arg == "device" for k in node.keywords)
                if _violation(module, has_device):
                    bad.append(f"{module}:{node.lineno} torch.{node.func.attr}")
    assert bad == []


# ---- select, settle and --device --------------------------------------------------------------------------


def test_select_rejects_unknown_names_and_a_change_after_settling(monkeypatch):
    settled = dev.settle()
    with pytest.raises(DeviceError) as exc:
        dev.select("tpu")
    assert exc.value.reason is DeviceRejection.UNKNOWN_DEVICE
    other = "cpu" if settled == "cuda" else "cuda"
    monkeypatch.setattr(dev, "cuda_available", lambda: True)
    with pytest.raises(DeviceError) as exc:
        dev.select(other)
    assert exc.value.reason is DeviceRejection.ALREADY_SETTLED
    monkeypatch.setattr(dev, "_chosen", None)
    monkeypatch.setenv(dev.ENV, settled)
    dev.select(settled)  # asking for what is already settled is fine


@pytest.mark.skipif(dev.cuda_available(), reason="a CUDA device is present, so --device cuda is honoured")
def test_select_cuda_without_one_is_refused_by_name():
    with pytest.raises(DeviceError) as exc:
        dev.select("cuda")
    assert exc.value.reason is DeviceRejection.NO_CUDA


@pytest.mark.skipif(dev.cuda_available(), reason="a CUDA device is present, so --device cuda is honoured")
@pytest.mark.parametrize("argv", [["conform", "--spec", "Radix"], ["gate", "--select", "kernels-differential"],
                                  ["bench", "kernels"], ["fuzz", "--minutes", "1"]])
def test_device_cuda_without_one_is_a_one_line_usage_error(argv, capsys):
    from kvexact.cli import main

    with pytest.raises(SystemExit) as exc:
        main([*argv, "--device", "cuda"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no CUDA device" in err and "Traceback" not in err


def _settle_in_subprocess(env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    import os

    code = ("import os; from kvexact.kernels import device as d; import kvexact.kernels.paged; "
            "print(d.settle(), os.environ.get('TRITON_INTERPRET'))")
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", dev.ENV)}
    return subprocess.run([sys.executable, "-c", code], env={**env, **env_extra}, capture_output=True, text=True,
                          timeout=300)


def test_default_is_cuda_natively_when_present_else_the_cpu_interpreter():
    done = _settle_in_subprocess({})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == (["cuda", "None"] if dev.cuda_available() else ["cpu", "1"])


def test_kvexact_device_cpu_reaches_a_subprocess_and_sets_the_interpreter():
    done = _settle_in_subprocess({dev.ENV: "cpu"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["cpu", "1"]


# ---- bf16: the interpreter truncates, a native kernel rounds (the one ulp the bf16 tolerance allows) --------


def test_bf16_store_truncates_under_the_interpreter_and_rounds_natively():
    """merge_attn_states with an empty suffix stores the fp32 prefix output as bf16: 1 + 0.9 ulp becomes
    1 + 1 ulp when rounded to nearest (a GPU) and 1 when truncated toward zero (the CPU interpreter)."""
    from kvexact.kernels import paged

    ulp = 2.0**-7
    values = [1.0 + 0.9 * ulp, -(1.0 + 0.9 * ulp), 2.0 + 0.2 * 2 * ulp]
    prefix = dev.tensor(values, torch.float32).reshape(len(values), 1, 1).expand(len(values), 1, 16).contiguous()
    lse = dev.zeros((len(values), 1))
    empty = dev.full((len(values), 1), -math.inf)
    out = dev.empty((len(values), 1, 16), torch.bfloat16)
    paged.merge_attn_states(prefix, lse, prefix, empty, output=out)
    got = out[:, 0, 0].float().tolist()
    if dev.interpreted():
        assert got == [1.0, -1.0, 2.0]
    else:
        assert got == [1.0 + ulp, -(1.0 + ulp), 2.0]
    rounded = torch.tensor(values).to(torch.bfloat16).float().tolist()
    assert all(abs(g - r) <= 2 * abs(r) * ulp / 2 for g, r in zip(got, rounded, strict=True))


# ---- CUDA only ----------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_on_cuda_the_kernels_are_compiled_natively():
    import os

    from kvexact.kernels import paged

    assert dev.settle() == "cuda" and not dev.interpreted() and os.environ.get("TRITON_INTERPRET") != "1"
    assert type(paged._decode_split_kernel).__name__ == "JITFunction"


@pytest.mark.gpu
def test_a_decode_launch_captured_in_a_cuda_graph_replays_on_new_queries():
    """What the benchmark times: the launcher's kernels in a graph, with inputs updated in place."""
    from kvexact.kernels import differential as D
    from kvexact.kernels import paged

    case = {"dtype": "bf16", "block_size": 16, "splits": 3, "heads": (8, 2), "dims": (128, 128),
            "layout": "separate", "lengths": [1, 40, 300]}
    inp = D.build_decode(case, seed=3, poison=math.nan, alias=False)
    launch, out, _ = paged.decode_launcher(inp.query, inp.key_cache, inp.value_cache, inp.block_table,
                                           inp.seq_lens, 3)
    launch()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch()
    inp.query.copy_(dev.randn(tuple(inp.query.shape), dev.generator(9), torch.bfloat16))
    graph.replay()
    want = paged.paged_decode_attention(inp.query, inp.key_cache, inp.value_cache, inp.block_table,
                                        inp.seq_lens, num_splits=3)
    assert torch.equal(out, want)


# ---- triton imported before the policy settled (a live runtime imports it) --------------------------------

TRITON_FIRST = """
import os, sys
os.environ.pop("TRITON_INTERPRET", None)
import triton.language  # what vLLM does at import: tl.max, tl.sum... are built for the compiler
from kvexact.kernels import device
from kvexact.kernels.errors import DeviceError
device.select("cpu")
try:
    device.settle()
except DeviceError as e:
    print(e.reason.name)
"""

SETTLED_FIRST = """
from kvexact.kernels import device
device.select("cpu")
device.settle()
import triton.language.standard as standard  # imported after: built for the interpreter
from triton.runtime.interpreter import InterpretedFunction
print(isinstance(standard.max, InterpretedFunction))
"""


@pytest.mark.skipif(dev.cuda_available(), reason="the interpreter mode is what this checks")
def test_triton_imported_before_settling_is_refused_by_name():
    """Triton builds its library functions for the mode ``TRITON_INTERPRET`` has at its import; a kernel run in
    the interpreter that calls one built for the compiler fails ("Cannot call @triton.jit'd outside of the
    scope of a kernel"), so settling then is refused by name instead."""
    first = subprocess.run([sys.executable, "-c", TRITON_FIRST], capture_output=True, text=True)
    assert first.stdout.strip() == DeviceRejection.TRITON_IMPORTED_FIRST.name, first.stderr[-2000:]
    settled = subprocess.run([sys.executable, "-c", SETTLED_FIRST], capture_output=True, text=True)
    assert settled.stdout.strip() == "True", settled.stderr[-2000:]
