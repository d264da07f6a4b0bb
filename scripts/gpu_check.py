"""The GPU check behind ``scripts/gpu-check.sh``: one JSON report of the kernel tests run natively, the
allocator and radix state machines on the device for a few hundred steps, and the kernel benchmark.

Each section is a subprocess with its own timeout (200 + 90 + 200 s: under 9 minutes with the setup), so a hang or a crash
in one is reported and the others still run. Nothing is downloaded: it uses the torch and Triton already
installed. ``--dry-run`` walks every section on the CPU with small sizes (a test runs it).
Exit code: 0 every section passed, 1 one failed or timed out, 2 usage error.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPTIONAL = ("tla", "z3", "jpype", "cbor2", "xdist")  # the GPU image lacks some; sections adapt


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _section(name: str, argv: list[str], timeout_s: int, env: dict[str, str]) -> dict:
    """Run one section; rc, seconds and the output's tail (a timeout is rc 124)."""
    print(f"gpu-check: {name}: {' '.join(argv)} (timeout {timeout_s} s)", flush=True)
    start = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
        rc, out = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        rc = 124
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    seconds = round(time.monotonic() - start, 1)
    print(out[-3000:], flush=True)
    print(f"gpu-check: {name}: rc {rc} in {seconds} s", flush=True)
    return {"argv": argv, "rc": rc, "seconds": seconds, "passed": rc == 0, "output_tail": out[-4000:]}


def _junit_counts(path: Path) -> dict:
    """tests / failures / errors / skipped summed over a JUnit XML file's test suites."""
    if not path.exists():
        return {}
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    return {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}


def _environment(device: str) -> dict:
    import torch

    env = {"python": platform.python_version(), "torch": torch.__version__, "device_policy": device,
           "cuda": torch.cuda.is_available(), "missing_optional": [m for m in OPTIONAL if not _has(m)]}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    return env


def run_machines(device: str, examples: int, steps: int, out: Path) -> int:
    """The KVAllocation and Radix machines with their kernel mirrors on ``device``; writes ``out`` (JSON).

    Trace validation against the TLA+ spec needs the ``tla`` parser; where it is not installed (the GPU
    image) the allocator machine runs without it and the report says so (CI runs it on the CPU)."""
    from kvexact.kernels import device as dev

    dev.select(device)
    from kvexact.conformance import runner
    from kvexact.conformance.machines import allocator

    trace_validation = _has("tla")
    if not trace_validation:
        runner.machine_class = lambda spec, **kw: allocator.machine_class(spec, validate_trace=False, **kw)
    report = {"device": dev.settle(), "trace_validation": trace_validation, "machines": {}}
    failed = 0
    for spec in ("KVAllocation", "Radix"):
        run = runner.run_machine(spec, None, runner.machine_settings("ci", examples, steps, shrink=False), seed=0)
        report["machines"][spec] = {"passed": run.passed, "examples": run.examples, "steps": run.steps,
                                    "seconds": round(run.seconds, 1), "error": run.error[:1500],
                                    "attention_checks": run.stats.get("attention_checks", 0)}
        print(f"machines: {spec} on {dev.settle()}: {'passed' if run.passed else 'FAILED'}, {run.examples} examples, "
              f"{run.steps} steps, {run.stats.get('attention_checks', 0)} attention checks", flush=True)
        failed += not run.passed
    out.write_text(json.dumps(report, indent=1))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/gpu-check.sh", description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="every section on the CPU, small sizes")
    parser.add_argument("--out", type=Path, default=ROOT / "gpu-check-out", help="report folder")
    parser.add_argument("--machines", nargs=3, metavar=("DEVICE", "EXAMPLES", "STEPS"), help=argparse.SUPPRESS)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    args.out.mkdir(parents=True, exist_ok=True)
    if args.machines:
        device, examples, steps = args.machines
        return run_machines(device, int(examples), int(steps), args.out / "machines.json")

    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("gpu-check: no CUDA device is visible; run with --dry-run for the CPU walk", file=sys.stderr)
        return 2
    device = "cpu" if args.dry_run else "cuda"
    env = {**os.environ, "KVEXACT_DEVICE": device, "PYTHONUNBUFFERED": "1"}
    env.pop("TRITON_INTERPRET", None)
    py = sys.executable
    started = time.monotonic()
    report: dict = {"mode": "dry-run (cpu)" if args.dry_run else "gpu", "environment": _environment(device),
                    "sections": {}}
    sections = report["sections"]

    junit = args.out / "kernel-tests.xml"
    if args.dry_run:  # a quick, representative slice under the interpreter
        tests = ["tests/kernels/test_kernels_blockmap.py", "tests/kernels/test_kernels_device_policy.py::"
                 "test_bf16_store_truncates_under_the_interpreter_and_rounds_natively"]
    else:
        # the slow tests walk the CPU dry runs (this script's and the benchmark's); CI runs them
        tests = ["tests/kernels", "-m", "not slow"] + (["-n", "8"] if _has("xdist") else [])
    # GPU timeouts sum to 490 s; on the CPU walk they are only a safety net (a loaded CI box is slow)
    slack = 4 if args.dry_run else 1
    sections["kernel_tests"] = _section(
        "kernel tests", [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *tests],
        200 * slack, env)
    sections["kernel_tests"]["counts"] = _junit_counts(junit)

    examples, steps = ("3", "10") if args.dry_run else ("10", "30")
    sections["machines"] = _section(
        "machines", [py, str(Path(__file__)), "--out", str(args.out), "--machines", device, examples, steps],
        90 * slack, env)
    machines_json = args.out / "machines.json"
    if machines_json.exists():
        sections["machines"]["report"] = json.loads(machines_json.read_text())

    bench_json = args.out / "bench.json"
    sections["benchmark"] = _section(
        "benchmark", [py, "-m", "kvexact.kernels.bench", "--device", device, "--budget-s", "150",
                      "--json", str(bench_json)], 200 * slack, env)
    if bench_json.exists():
        bench = json.loads(bench_json.read_text())
        sections["benchmark"]["report"] = bench
        report["long_context_paged_decode"] = bench.get("long_context")
    report["seconds"] = round(time.monotonic() - started, 1)
    report["passed"] = all(s["passed"] for s in sections.values())
    path = args.out / "gpu-check.json"
    path.write_text(json.dumps(report, indent=1, default=str))
    print(f"gpu-check: {'passed' if report['passed'] else 'FAILED'} in {report['seconds']} s; report {path}")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
