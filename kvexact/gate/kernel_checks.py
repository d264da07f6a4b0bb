"""Gate checks of the kernel layer: the differential tests at a small fixed set, and int64 addressing.

Invariant: ``kernels-differential`` passes only when every case is finite, within its dtype's tolerance of
float64, and blind to the poison in unreferenced slots, and every contract-breaking decode input given with
``validate=True`` is refused by name; it cannot run (rather than fail) when torch or
triton is missing. ``quick`` runs one decode case per dtype, one ``reshape_and_cache`` case with skipped (-1) slots, one
``copy_blocks`` case, one case of the allocator-to-kernel mappings, one ``merge_attn_states`` case with empty (NaN) sides, one case of bad decode inputs and the wrappers' keyword-only
options (``reject 0``), the host planner's chunk plans and the wrappers' option defaults (``plan 0``), the
default split count (``splits 0``), the device policy once settled (``policy 0``), two shared-prefix cases (the second with a three-page prefix cut into two splits), one
random chunk tree (multi-page shared chunks in two splits, private paths in two levels) and one 0x0BE tree (its
partial rows against the seed's count); ``full`` and ``deep`` the fixed set below (with the same cache, merge,
reject and random-tree cases).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from kvexact.gate.framework import CheckCouldNotRun, CheckResult, GateCheck, GateContext, Verdict

DECODE_CASES = 4  # the first cases of the pairwise-covering set (fp32, fp16, bf16; block sizes 1 and 16)
SHARED_CASES = 2
# (decode cases, shared-prefix cases, 0x0BE tree thresholds) per gate level
CASES = {"quick": (3, SHARED_CASES, (1,)), "full": (DECODE_CASES, SHARED_CASES, (1, 0)),
         "deep": (DECODE_CASES, SHARED_CASES, (1, 0))}
# (tree seed, depth, block size, threshold) of each ``random N`` case, at every level: a random chunk tree whose
# shared chunks span several pages (two chunk-first splits each) and whose private paths are cut into two levels
RANDOM_TREES = ((0, 3, 4, 1),)
# 0x0BE's materialized partial rows per threshold: the seed's sum of coverage(c) over chunks with coverage > tau
# (seed: "partial rows = 4 + 2 + 2 = 8" at tau 1; at tau 0 every chunk: 4 + 2 + 2 + 1 + 1 + 1 + 1)
SEED_PARTIAL_ROWS = {1: 8, 0: 12}


def _import_kernels():
    try:
        from kvexact.kernels import differential
    except ImportError as exc:
        raise CheckCouldNotRun(f"kernels need torch and triton: {exc}") from exc
    return differential


def case_names(level: str) -> list[str]:
    """The cases ``kernels-differential`` runs at a level, in order: ``decode N``, ``shared N``, ``tree T``."""
    n_decode, n_shared, thresholds = CASES[level]
    return [*(f"decode {i}" for i in range(n_decode)), "cache 0", "copy 0", "blockmap 0", "merge 0", "reject 0",
            "plan 0", "splits 0", "policy 0", *(f"shared {i}" for i in range(n_shared)), *(f"random {i}" for i in range(len(RANDOM_TREES))),
            *(f"tree {t}" for t in thresholds)]


KINDS = ("decode", "cache", "copy", "blockmap", "merge", "reject", "plan", "splits", "policy", "shared", "random",
         "tree")


def run_case(name: str, seed: int = 0) -> tuple[bool, str, dict]:
    """Run one named case: (passed, what failed, its figures); a case that raises has failed, by its name."""
    if name.partition(" ")[0] not in KINDS:
        raise ValueError(f"unknown kernels-differential case {name!r}")
    _import_kernels()
    try:
        return _run_case(name, seed)
    except Exception as exc:  # a kernel or wrapper crash on the case's (valid) inputs
        return False, f"{name}: raised {type(exc).__name__}: {str(exc)[:200]}", {}


# Cases whose result lists what was wrong ("wrong"): kind -> (what the case checks, runner(D, seed)).
_CHECKLIST_CASES: dict[str, tuple[str, Callable[[Any, int], dict]]] = {
    "blockmap": ("allocator-to-kernel mappings", lambda D, seed: D.run_blockmap_case()),
    "reject": ("bad decode inputs with validate=True", lambda D, seed: D.run_reject_case(seed=seed)),
    "plan": ("chunk plans and option defaults", lambda D, seed: D.run_plan_case()),
    "splits": ("default split count", lambda D, seed: D.run_splits_case(seed=seed)),
    "policy": ("device policy once settled", lambda D, seed: D.run_policy_case()),
}


def _run_case(name: str, seed: int) -> tuple[bool, str, dict]:
    D = _import_kernels()
    import torch

    kind, _, arg = name.partition(" ")
    if kind == "decode":
        case = D.pairwise_cases(D.DECODE_FACTORS)[int(arg)]
        result = D.run_decode_case(case, seed=seed)
        return result["passed"], f"decode {D.case_id(case)}: {result}", {"dtype": case["dtype"], **result}
    if kind == "cache":
        result = D.run_cache_write_case(seed=seed)
        return result["passed"], f"reshape_and_cache with skipped slots: {result}", result
    if kind == "copy":
        result = D.run_copy_case(seed=seed)
        return result["passed"], f"copy_blocks: {result}", result
    if kind in _CHECKLIST_CASES:
        what, runner = _CHECKLIST_CASES[kind]
        result = runner(D, seed)
        return result["passed"], f"{what}: {'; '.join(result['wrong'])}", result
    if kind == "merge":
        result = D.run_merge_case(seed=seed)
        return result["passed"], f"merge_attn_states with empty (NaN) sides: {result}", result
    if kind == "shared":
        case = D.pairwise_cases(D.SHARED_FACTORS)[int(arg)]
        result = D.run_shared_case(case, seed=seed)
        return result["passed"], f"shared {D.case_id(case)}: {result}", result
    if kind == "random":
        tree_seed, depth, block_size, threshold = RANDOM_TREES[int(arg)]
        result = D.run_tree_case(tree_seed, depth, block_size, threshold)
        return result["within_tolerance"] and result["finite"], f"random chunk tree {arg}: {result}", result
    if kind == "tree":
        result = D.run_seed_tree(torch.float32, 16, int(arg))
        rows_ok = result["partial_rows"] == SEED_PARTIAL_ROWS[int(arg)]
        return (result["within_tolerance"] and result["finite"] and rows_ok,
                f"0x0BE tree, threshold {arg}: {result} (seed partial rows {SEED_PARTIAL_ROWS[int(arg)]})", result)
    raise ValueError(f"unknown kernels-differential case {name!r}")


def kernels_differential(ctx: GateContext) -> CheckResult:
    _import_kernels()
    start = time.perf_counter()
    failed: list[str] = []
    worst: dict[str, float] = {}
    names = case_names(ctx.level)
    for name in names:
        passed, detail, result = run_case(name, ctx.seed)
        if "dtype" in result:
            worst[result["dtype"]] = max(worst.get(result["dtype"], 0.0), result["max_abs_err"])
        if not passed:
            failed.append(detail)
    n_decode, n_shared, thresholds = CASES[ctx.level]
    figures = {"decode_cases": n_decode, "cache_write_cases": 1, "copy_cases": 1, "blockmap_cases": 1, "merge_cases": 1, "reject_cases": 1,
               "plan_cases": 1, "split_cases": 1, "policy_cases": 1,
               "shared_cases": n_shared, "random_tree_cases": len(RANDOM_TREES), "seed_tree_runs": len(thresholds),
               **{f"max_abs_err_{k}": float(f"{v:.3g}") for k, v in sorted(worst.items())},
               "seconds": round(time.perf_counter() - start, 2)}
    if failed:
        return CheckResult(Verdict.FAILED, figures, "; ".join(failed), seeds={"seed": ctx.seed}, examples=len(names))
    return CheckResult(Verdict.PASSED, figures, "paged decode, shared-prefix schedules and the 0x0BE tree match "
                                                "float64 on poisoned pools", seeds={"seed": ctx.seed},
                       examples=len(names))


def kernels_int64(ctx: GateContext) -> CheckResult:
    _import_kernels()
    done = subprocess.run([sys.executable, "-m", "kvexact.kernels.overflow_probe", "1"], capture_output=True,
                          text=True, timeout=600)
    if done.returncode == 3:
        raise CheckCouldNotRun(f"could not reserve a >2^31-element pool: {done.stdout.strip()[:200]}")
    figures = {"returncode": done.returncode, "pool_elements_over": "2^31"}
    if done.returncode == 0 and done.stdout.strip() == "OK":
        return CheckResult(Verdict.PASSED, figures, "paged decode read the last block of a >2^31-element pool "
                                                    "through its int64-cast block ids")
    return CheckResult(Verdict.FAILED, figures, f"probe rc {done.returncode}: {(done.stdout + done.stderr)[-500:]}")


CHECKS = [
    GateCheck("kernels-differential", "kernels",
              "Triton kernels against float64 on poisoned pools (small fixed set)", kernels_differential),
    GateCheck("kernels-int64-addressing", "kernels",
              "paged decode addresses a pool of more than 2^31 elements (subprocess)", kernels_int64),
]
