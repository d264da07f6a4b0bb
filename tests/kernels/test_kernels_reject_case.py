"""The quick ``kernels-differential`` case ``reject 0``: bad decode inputs given with ``validate=True`` are refused
by name. It passes on the kernels and fails, naming its sub-cases, when the host check is skipped: the kernel
host-code mutant ``paged:438`` (``validate`` inverted, a survivor of the seed-2 mutation sample), applied to a
copy of ``check_decode_inputs``."""

from __future__ import annotations

import inspect

from kvexact.gate import kernel_checks
from kvexact.kernels import paged

BEFORE = "lens = check_block_tables(block_table, seq_lens, nb, bs) if validate else None"
AFTER = "lens = check_block_tables(block_table, seq_lens, nb, bs) if not validate else None"


def mutated_check_decode_inputs(before: str, after: str):
    """``paged.check_decode_inputs`` compiled from its source with the one line replaced (as cosmic-ray writes
    it), in the module's namespace."""
    source = inspect.getsource(paged.check_decode_inputs)
    assert source.count(before) == 1, before
    namespace = dict(vars(paged))
    exec(compile(source.replace(before, after), paged.__file__, "exec"), namespace)
    return namespace["check_decode_inputs"]


def test_reject_case_is_quick_and_passes_on_the_kernels():
    assert "reject 0" in kernel_checks.case_names("quick")
    passed, detail, result = kernel_checks.run_case("reject 0")
    assert passed, detail
    assert (result["refused"], result["cases"]) == (4, 4)


def test_a_copy_with_the_line_unchanged_passes(monkeypatch):
    monkeypatch.setattr(paged, "check_decode_inputs", mutated_check_decode_inputs(BEFORE, BEFORE))
    passed, detail, _ = kernel_checks.run_case("reject 0")
    assert passed, detail


def test_validate_inverted_fails_the_reject_case_by_name(monkeypatch):
    monkeypatch.setattr(paged, "check_decode_inputs", mutated_check_decode_inputs(BEFORE, AFTER))
    passed, detail, result = kernel_checks.run_case("reject 0")
    assert not passed
    assert result["wrong"] == [
        "block id out of range: accepted, expected BLOCK_ID_OUT_OF_RANGE",
        "table too short: accepted, expected BLOCK_TABLE_TOO_SHORT",
        "negative length: accepted, expected NEGATIVE_LENGTH",
        "suffix block id out of range: accepted, expected BLOCK_ID_OUT_OF_RANGE",
    ], detail
