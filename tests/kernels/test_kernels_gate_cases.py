"""The quick ``kernels-differential`` cases written for kernel host-code mutants that survived it: each passes on
the kernels and fails on its mutants (cosmic-ray's mutated line, applied to a copy of the one function, patched
into its module), so the gate check fails by case. The mutants come from the seed-2 and seed-3 samples of
``kvexact bench mutation`` over ``kernels.*`` (README, mutation testing)."""

from __future__ import annotations

import inspect
import types

import pytest

from kvexact.gate import kernel_checks
from kvexact.kernels import paged, shared

NEW_CASES = ["copy 0", "blockmap 0", "reject 0", "shared 1", "random 0", "tree 1"]


def patch_function(monkeypatch, module: types.ModuleType, name: str, before: str, after: str) -> None:
    """Replace ``module.name`` by a copy compiled from its source with the one line ``before`` -> ``after``,
    in the module's namespace (callers look it up there)."""
    source = inspect.getsource(getattr(module, name))
    assert source.count(before) == 1, f"{before!r} is not one line of {module.__name__}.{name}"
    namespace = dict(vars(module))
    exec(compile(source.replace(before, after), module.__file__, "exec"), namespace)
    monkeypatch.setattr(module, name, namespace[name])


def test_the_new_cases_are_quick_and_pass_on_the_kernels():
    quick = kernel_checks.case_names("quick")
    for case in NEW_CASES:
        assert case in quick
        passed, detail, _ = kernel_checks.run_case(case)
        assert passed, detail
    _, _, result = kernel_checks.run_case("reject 0")
    assert (result["cases"], result["signatures"], result["wrong"]) == (7, 8, [])


def test_a_copy_with_the_line_unchanged_passes(monkeypatch):
    line = "lens = check_block_tables(block_table, seq_lens, nb, bs) if validate else None"
    patch_function(monkeypatch, paged, "check_decode_inputs", line, line)
    passed, detail, _ = kernel_checks.run_case("reject 0")
    assert passed, detail


def test_validate_inverted_fails_the_reject_case_by_name(monkeypatch):
    """paged:438 (seed 2): ``validate`` inverted, so the default call skips the block-table checks."""
    patch_function(monkeypatch, paged, "check_decode_inputs",
                   "lens = check_block_tables(block_table, seq_lens, nb, bs) if validate else None",
                   "lens = check_block_tables(block_table, seq_lens, nb, bs) if not validate else None")
    passed, detail, result = kernel_checks.run_case("reject 0")
    assert not passed
    assert result["wrong"] == [
        "block id out of range: accepted, expected BLOCK_ID_OUT_OF_RANGE",
        "table too short: accepted, expected BLOCK_TABLE_TOO_SHORT",
        "negative length: accepted, expected NEGATIVE_LENGTH",
        "suffix block id out of range: accepted, expected BLOCK_ID_OUT_OF_RANGE",
    ], detail


def test_keyword_only_options_made_positional_fail_the_reject_case(monkeypatch):
    """shared:222 (seed 3): the bare ``*`` of a wrapper's signature mutated into ``/``."""
    patch_function(monkeypatch, shared, "chunked_shared_attention",
                   "chunks: Sequence[Chunk], *, threshold: int = 1,", "chunks: Sequence[Chunk], /, threshold: int = 1,")
    passed, _, result = kernel_checks.run_case("reject 0")
    assert not passed
    assert [w.partition(":")[0] for w in result["wrong"]] == ["chunked_shared_attention"]


# (module, function, line before, line after, the quick case that must fail): seed-3 survivors that change how
# the work is cut into splits and slots, killed by shapes that cross a split boundary
SPLIT_MUTANTS = [
    (shared, "hydragen_launcher", "0, batch, k * batch) for k, lo", "0, batch, k >> batch) for k, lo", "shared 1"),
    (shared, "hydragen_launcher", "work = [(0, lo, min(lo + per, prefix_len)", "work = [(0, lo, min(lo ^ per, prefix_len)",
     "shared 1"),
    (shared, "hydragen_launcher", "pages = -(-prefix_len // bs)", "pages = -(prefix_len // bs)", "shared 1"),
    (shared, "plan_chunks", "slot = depth[c] * chunk_splits + k", "slot = depth[c] * chunk_splits ** k", "random 0"),
    (shared, "shared_launcher", "lo = shared_slots + i * suffix_splits", "lo = shared_slots | i * suffix_splits",
     "random 0"),
    (shared, "plan_chunks", "    partial_rows = 0\n", "    partial_rows = 1\n", "tree 1"),
    (shared, "hydragen_launcher", "per = max(1, -(-pages // prefix_splits)) * bs",
     "per = max(0, -(-pages // prefix_splits)) * bs", "shared 0"),
    (paged, "copy_blocks", "if block_mapping.shape[1] != 2:", "if block_mapping.shape[1] >= 2:", "copy 0"),
    (paged, "copy_blocks", "pairs = block_mapping.shape[0]", "pairs = block_mapping.shape[1]", "copy 0"),
    (paged, "copy_blocks", "if not 0 <= b < nb:", "if not not 0 <= b < nb:", "copy 0"),
    (paged, "copy_blocks", "if pairs == 0:", "if pairs != 0:", "copy 0"),
    (paged, "reshape_and_cache", "if not 0 <= slot < nb * bs:", "if not 0 <= slot < nb << bs:", "reject 0"),
    (shared, "plan_chunks", "if ch.length_tokens < 0:", "if ch.length_tokens < -1:", "reject 0"),
    (paged, "kernel_block_table", "[r + [pad_id] * (width - len(r)) for r in rows]",
     "[r + [pad_id] - (width - len(r)) for r in rows]", "blockmap 0"),
    (paged, "slots_for", "slots.append(ids[t // block_size] * block_size + t % block_size)",
     "slots.append(ids[t // block_size] ^ block_size + t % block_size)", "blockmap 0"),
    (paged, "to_flashinfer_lse", "return lse * (1.0 / math.log(2.0))", "return lse & (1.0 / math.log(2.0))",
     "blockmap 0"),
]


@pytest.mark.parametrize("module, function, before, after, case", SPLIT_MUTANTS,
                         ids=[f"{m[1]}:{m[3].strip()[:28]}" for m in SPLIT_MUTANTS])
def test_split_and_slot_mutants_fail_their_case(monkeypatch, module, function, before, after, case):
    patch_function(monkeypatch, module, function, before, after)
    passed, detail, _ = kernel_checks.run_case(case)
    assert not passed, f"{function}: {after.strip()} survived {case}: {detail}"
