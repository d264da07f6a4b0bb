"""The quick ``kernels-differential`` cases written for kernel host-code mutants that survived it: each passes on
the kernels and fails on its mutants (cosmic-ray's mutated line, applied to a copy of the one function, patched
into its module), so the gate check fails by case. The mutants come from the seed-2 and seed-3 samples of
``kvexact bench mutation`` over ``kernels.*`` (docs/mutation.md)."""

from __future__ import annotations

import inspect
import types

import pytest

from kvexact.gate import kernel_checks
from kvexact.kernels import device as dev
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
    assert (result["cases"], result["signatures"], result["wrong"]) == (16, 8, [])


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


# ---- seed 3's last survivors (i25b): the host planner, option defaults, the split count, the device policy ----

HOST_CASES = ["plan 0", "splits 0", "policy 0", "blockmap 0"]


def test_the_host_cases_are_quick_and_pass_on_the_kernels():
    quick = kernel_checks.case_names("quick")
    for case in HOST_CASES:
        assert case in quick
        passed, detail, result = kernel_checks.run_case(case)
        assert passed, detail
        assert result["wrong"] == []
    _, _, plan = kernel_checks.run_case("plan 0")
    assert (plan["plans"], plan["defaults"]) == (4, 9)
    _, _, splits = kernel_checks.run_case("splits 0")
    assert splits["split_counts"] == 6


# (module, function, line before, line after, the quick case that must fail), cosmic-ray's mutated lines
HOST_MUTANTS = [
    # shared:151 (seed 3): the page count of a shared chunk multiplied: one range however many chunk splits
    (shared, "plan_chunks", "pages = -(-ch.length_tokens // block_size)", "pages = -(-ch.length_tokens * block_size)",
     "plan 0"),
    # shared:113 (seed 3): plan_chunks's default threshold 1 -> 2 (and -> 0)
    (shared, "plan_chunks", "threshold: int = 1, chunk_splits: int = 1) -> ChunkPlan:",
     "threshold: int = 2, chunk_splits: int = 1) -> ChunkPlan:", "plan 0"),
    (shared, "plan_chunks", "threshold: int = 1, chunk_splits: int = 1) -> ChunkPlan:",
     "threshold: int = 0, chunk_splits: int = 1) -> ChunkPlan:", "plan 0"),
    # shared:280 (seed 3): hydragen_launcher's default prefix_splits 1 -> 2
    (shared, "hydragen_launcher", "suffix_lens, *, prefix_splits: int = 1, suffix_splits: int = 1,",
     "suffix_lens, *, prefix_splits: int = 2, suffix_splits: int = 1,", "plan 0"),
    # paged:419 (seed 3, then CUDA-only; now split_count): the SM term
    (paged, "split_count", "want = max(1, -(-2 * sms // max(1, batch * num_kv_heads)))",
     "want = max(1, not (-2 * sms // max(1, batch * num_kv_heads)))", "splits 0"),
    (paged, "split_count", "want = max(1, -(-2 * sms // max(1, batch * num_kv_heads)))",
     "want = max(1, -(-2 << sms // max(1, batch * num_kv_heads)))", "splits 0"),
    # paged:505 (seed 3, then CUDA-only; the page count moved into split_count)
    (paged, "split_count", "pages = -(-longest // block_size)", "pages = -(+longest // block_size)", "splits 0"),
    (paged, "split_count", "pages = -(-longest // block_size)", "pages = -(-longest ^ block_size)", "splits 0"),
    (paged, "default_num_splits", 'if device.type != "cuda":', 'if device.type == "cuda":', "splits 0"),
    # paged:543 (seed 3): the refusal's detail names entry t % P instead of t // P
    (paged, "slots_for", "needs entry {t // block_size} of a", "needs entry {t % block_size} of a", "blockmap 0"),
    # device:64 (seed 3): the settled name compared by identity: an equal name read from the environment refused
    (dev, "select", "if _settled is not None and _settled != name:",
     "if _settled is not None and _settled is not name:", "policy 0"),
    # device:96 (seed 3): the refusal names the wrong mode
    (dev, "_refuse_triton_built_for_other_mode", 'mode = "interpreter" if name == "cpu" else "compiler"',
     'mode = "interpreter" if name != "cpu" else "compiler"', "policy 0"),
    # seed 5's survivors (fresh sample, before these lines were written)
    (paged, "paged_decode_attention", "if num_splits is None:", "if num_splits is not None:", "splits 0"),  # :503
    (shared, "shared_prefix_attention", "if prefix_splits <= 0 or suffix_splits <= 0:",
     "if prefix_splits < 0 or suffix_splits <= 0:", "reject 0"),  # :262
    (dev, "runs_interpreted", 'return name == "cpu"', 'return name >= "cpu"', "policy 0"),  # :80, then in settle
    (paged, "split_count", "return max(1, min(want, -(-pages // 4)))", "return max(0, min(want, -(-pages // 4)))",
     "splits 0"),  # :420
    (dev, "cuda_available", "        return False\n", "        return True\n", "policy 0"),  # :36
    (shared, "shared_prefix_attention", "prefix_splits: int = 1, suffix_splits: int = 1, return_lse: bool = False,",
     "prefix_splits: int = 1, suffix_splits: int = 2, return_lse: bool = False,", "plan 0"),  # :249
    (paged, "split_count", "want = max(1, -(-2 * sms // max(1, batch * num_kv_heads)))",
     "want = max(1, -(-2 * sms // max(1, batch ^ num_kv_heads)))", "splits 0"),  # :419
    (paged, "split_count", "want = max(1, -(-2 * sms // max(1, batch * num_kv_heads)))",
     "want = max(1, -(-2 / sms // max(1, batch * num_kv_heads)))", "splits 0"),  # :419
    (paged, "split_count", "want = max(1, -(-2 * sms // max(1, batch * num_kv_heads)))",
     "want = max(1, -(-2 * sms ^ max(1, batch * num_kv_heads)))", "splits 0"),  # :419
    (paged, "split_count", "pages = -(-longest // block_size)", "pages = not (-longest // block_size)",
     "splits 0"),  # :505, now in split_count
    (paged, "split_count", "pages = -(-longest // block_size)", "pages = -(-longest * block_size)", "splits 0"),  # :505
    (shared, "hydragen_launcher", "suffix_lens, *, prefix_splits: int = 1, suffix_splits: int = 1,",
     "suffix_lens, *, prefix_splits: int = 0, suffix_splits: int = 1,", "plan 0"),  # :280
    (shared, "plan_chunks", "    slots = 0\n", "    slots = -1\n", "plan 0"),  # :147
    (shared, "plan_chunks", "if not 0 <= ch.seq_begin < ch.seq_end <= num_seqs:",
     "if not 0 <= ch.seq_begin != ch.seq_end <= num_seqs:", "plan 0"),  # :122
    (shared, "plan_chunks", "if depth.setdefault(c, d) != d:", "if depth.setdefault(c, d) is not d:", "plan 0"),  # :143
    (shared, "plan_chunks", "for b in range(0, ch.length_tokens, per)] or [(0, 0)]",
     "for b in range(0, ch.length_tokens, per)] or [(-1, 0)]", "plan 0"),  # :153
    (shared, "plan_chunks", "for b in range(0, ch.length_tokens, per)] or [(0, 0)]",
     "for b in range(0, ch.length_tokens, per)] or [(0, -1)]", "plan 0"),  # :153
    (paged, "slots_for", "needs entry {t // block_size} of a", "needs entry {t | block_size} of a", "blockmap 0"),  # :543
    (shared, "plan_chunks", "if len(ch.block_ids) < need:", "if len(ch.block_ids) > need:", "plan 0"),  # :128
    (shared, "chunked_shared_attention", "if private_splits <= 0:", "if private_splits < 0:", "reject 0"),  # new check
    (paged, "copy_blocks", "if block_mapping.shape[1] != 2:", "if block_mapping.shape[1] > 2:", "reject 0"),  # :215
    (paged, "copy_blocks", "if dst in dests:", "if dst not in dests:", "reject 0"),
    (paged, "default_num_splits", 'if device.type != "cuda":', 'if device.type >= "cuda":', "splits 0"),  # :416
    (paged, "native_block_n", "return max(MIN_DOT, min(64, 64 * 256 // row_bytes))",
     "return max(MIN_DOT, min(64, 64 * 256 >> row_bytes))", "splits 0"),  # :45, then in default_block_n
    (paged, "check_cache_pair", "if bs <= 0 or hkv <= 0 or dk <= 0 or value_cache.shape[3] <= 0:",
     "if bs <= 0 or hkv <= 0 or dk < 0 or value_cache.shape[3] <= 0:", "reject 0"),  # :84
    (paged, "slots_for", "needs entry {t // block_size} of a", "needs entry {t << block_size} of a", "blockmap 0"),  # :543
    (paged, "copy_blocks", "if dst in sources:", "if dst not in sources:", "reject 0"),
]


@pytest.mark.parametrize("module, function, before, after, case", HOST_MUTANTS,
                         ids=[f"{m[1]}:{m[3].strip()[:32]}" for m in HOST_MUTANTS])
def test_host_mutants_fail_their_case(monkeypatch, module, function, before, after, case):
    patch_function(monkeypatch, module, function, before, after)
    passed, detail, _ = kernel_checks.run_case(case)
    assert not passed, f"{function}: {after.strip()} survived {case}: {detail}"


def test_an_environment_value_of_one_character_is_the_cached_string(monkeypatch):
    """Why device:47 (``TRITON_INTERPRET == "1"`` -> ``is "1"``) is equivalent: CPython decodes a one-character
    ASCII environment value to its cached one-character string, the same object as the literal "1"."""
    import operator
    import os

    monkeypatch.setenv("KVEXACT_TEST_ONE_CHAR", "1")
    assert operator.is_(os.environ.get("KVEXACT_TEST_ONE_CHAR"), "1")
