"""The kernel layer's gate checks pass on correct kernels and fail when a tolerance cannot be met."""

from __future__ import annotations

import torch

from kvexact.gate import kernel_checks as gate_checks
from kvexact.gate.checks import load_checks
from kvexact.gate.framework import GateContext, Verdict
from kvexact.kernels import differential


def test_kernel_checks_are_registered_with_the_gate():
    names = {c.name for c in load_checks()}
    assert {"kernels-differential", "kernels-int64-addressing"} <= names


def test_differential_check_passes_with_figures():
    result = gate_checks.kernels_differential(GateContext(level="full"))
    assert result.verdict is Verdict.PASSED, result.detail
    assert result.figures["decode_cases"] == gate_checks.DECODE_CASES
    # cache, copy, blockmap, merge, reject, plan, splits, policy; shared; the random tree; the 0x0BE tree at
    # thresholds 1 and 0
    assert result.examples == gate_checks.DECODE_CASES + 8 + gate_checks.SHARED_CASES + 1 + 2
    assert {"max_abs_err_fp32", "max_abs_err_fp16", "max_abs_err_bf16"} <= set(result.figures)
    assert result.figures["max_abs_err_fp32"] < 1e-5


def test_quick_differential_check_covers_every_dtype_with_fewer_cases():
    result = gate_checks.kernels_differential(GateContext(level="quick"))
    assert result.verdict is Verdict.PASSED, result.detail
    f = result.figures
    assert (f["decode_cases"], f["cache_write_cases"], f["copy_cases"], f["blockmap_cases"], f["merge_cases"],
            f["reject_cases"], f["plan_cases"], f["split_cases"], f["policy_cases"], f["shared_cases"],
            f["random_tree_cases"], f["seed_tree_runs"]) == (3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1)
    assert result.examples == 3 + 5 + 3 + 2 + 1 + 1
    assert {"max_abs_err_fp32", "max_abs_err_fp16", "max_abs_err_bf16"} <= set(result.figures)


def test_differential_check_fails_when_tolerance_is_impossible(monkeypatch):
    monkeypatch.setitem(differential.TOLERANCES, torch.float16, (0.0, 0.0))
    result = gate_checks.kernels_differential(GateContext())
    assert result.verdict is Verdict.FAILED
    assert "fp16" in result.detail


def test_int64_check_passes():
    assert gate_checks.kernels_int64(GateContext()).verdict is Verdict.PASSED
