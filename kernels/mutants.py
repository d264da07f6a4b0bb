"""Hand-written mutants of the Triton kernel bodies: single-point bugs a kernel developer makes (masks,
offsets, casts, the merge of partial softmax states), applied by patching the kernel module's source.

``KVEXACT_KERNEL_MUTANT=NAME`` makes ``import kvexact.kernels`` load the patched module in place of the real
one (in that process and its subprocesses); nothing else does. Each mutant names a gate case and a kernel
test that must kill it (``tests/kernels/test_kernel_mutants.py`` runs both). Invariant: a mutant's original
text occurs exactly once in its module, so a kernel edit that moves it is an error here, not a mutant that
silently stops existing. This module imports only the standard library (the bare GPU stack has no more).
"""

from __future__ import annotations

import enum
import importlib.util
import linecache
import sys
from dataclasses import dataclass
from pathlib import Path

ENV = "KVEXACT_KERNEL_MUTANT"


class MutantRejection(enum.Enum):
    UNKNOWN_MUTANT = "unknown kernel mutant"
    STALE_MUTANT = "kernel mutant's original text not found exactly once"
    ALREADY_IMPORTED = "kernel module already imported"


class KernelMutantError(ValueError):
    def __init__(self, rejection: MutantRejection, detail: str):
        super().__init__(f"{rejection.value}: {detail}")
        self.rejection = rejection


@dataclass(frozen=True)
class KernelMutant:
    """``original`` -> ``mutated`` in ``kernels/<module>.py``; ``gate_case`` is the quick
    ``kernels-differential`` case that kills it (``decode N``, ``cache 0``, ``merge 0``, ``shared N`` or ``tree THRESHOLD``, or
    ``int64`` for the overflow probe), ``test`` a kernel test node that kills it."""

    name: str
    module: str
    original: str
    mutated: str
    bug: str
    gate_case: str
    test: str


MUTANTS: tuple[KernelMutant, ...] = (
    KernelMutant("tile-mask-off-by-one", "paged", "        valid = pos < hi\n", "        valid = pos <= hi\n",
                 "the tile mask admits the token one past the end (a poisoned slot)", "decode 0",
                 "tests/kernels/test_kernels_decode.py::test_decode_matches_float64_on_poisoned_pool"),
    KernelMutant("key-slot-offset", "paged", "row = blk * s_kcb + (pos % block_size) * s_kct",
                 "row = blk * s_kcb + ((pos + 1) % block_size) * s_kct",
                 "the key row inside a block is off by one token (values stay right)", "shared 0",
                 "tests/kernels/test_kernels_shared.py::test_hydragen_with_empty_prefix_equals_paged_decode"),
    KernelMutant("block-id-int64-cast", "paged", "            blk = blk.to(tl.int64)\n",
                 "            blk = blk\n",
                 "the loaded int32 block id multiplies the stride without the int64 cast", "int64",
                 "tests/kernels/test_kernels_int64.py::test_decode_reads_the_last_block_of_a_pool_beyond_2_31_elements"),
    KernelMutant("online-softmax-rescale", "paged", "alpha = tl.exp(m - m_new)", "alpha = tl.exp(m_new - m)",
                 "the running sum is rescaled by the inverse factor when a tile raises the maximum", "decode 0",
                 "tests/kernels/test_kernels_shared.py::test_hydragen_with_empty_prefix_equals_paged_decode"),
    KernelMutant("merge-weights", "paged", "w = tl.where(live, tl.exp(lse - m_safe), 0.0)",
                 "w = tl.where(live, tl.exp(m_safe - lse), 0.0)",
                 "the merge of partial softmax states weighs each split by the inverse of its mass", "decode 1",
                 "tests/kernels/test_kernels_ops.py::test_merge_of_split_attention_equals_whole_attention"),
    KernelMutant("merge-empty-state", "paged", "    live = lse > float(\"-inf\")\n",
                 "    live = lse >= float(\"-inf\")\n",
                 "an empty partial state's (garbage) output is read into the merge", "merge 0",
                 "tests/kernels/test_kernels_ops.py::test_merge_attn_states_equals_float64_including_empty_sides"),
    KernelMutant("cache-write-slot-zero", "paged", "keep = (slot >= 0) & (h < HEADS)", "keep = (slot > 0) & (h < HEADS)",
                 "reshape_and_cache skips the token addressed to slot 0 (the skip test is off by one)", "cache 0",
                 "tests/kernels/test_kernels_ops.py::test_reshape_and_cache_writes_only_addressed_slots"),
    KernelMutant("chunk-row-mask", "shared", "    rmask = seq < seq_end\n", "    rmask = seq <= seq_end\n",
                 "a chunk-first tile stores rows of the sequence after its last covered one", "shared 0",
                 "tests/kernels/test_kernels_shared.py::test_shared_prefix_schedules_match_float64"),
)
BY_NAME = {m.name: m for m in MUTANTS}


def get(name: str) -> KernelMutant:
    if name not in BY_NAME:
        raise KernelMutantError(MutantRejection.UNKNOWN_MUTANT, f"{name!r}; known: {', '.join(BY_NAME)}")
    return BY_NAME[name]


def module_path(mutant: KernelMutant) -> Path:
    return Path(__file__).with_name(f"{mutant.module}.py")


def mutated_source(mutant: KernelMutant) -> str:
    text = module_path(mutant).read_text(encoding="utf-8")
    if text.count(mutant.original) != 1:
        raise KernelMutantError(MutantRejection.STALE_MUTANT, f"{mutant.name}: {mutant.original.strip()!r} occurs "
                                                              f"{text.count(mutant.original)} times in {mutant.module}.py")
    return text.replace(mutant.original, mutant.mutated)


def install(name: str) -> None:
    """Load ``kvexact.kernels.<module>`` from the mutated source (before anything imports the real one); the
    source is registered with linecache so Triton's ``@jit`` reads the mutated kernel text."""
    mutant = get(name)
    full = f"kvexact.kernels.{mutant.module}"
    if full in sys.modules:
        raise KernelMutantError(MutantRejection.ALREADY_IMPORTED, f"{full} (set {ENV} before importing it)")
    source = mutated_source(mutant)
    filename = f"<kernel mutant {name} of {module_path(mutant)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    spec = importlib.util.spec_from_loader(full, loader=None, origin=str(module_path(mutant)))
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__file__ = filename
    sys.modules[full] = module
    try:
        exec(compile(source, filename, "exec"), module.__dict__)
    except BaseException:
        del sys.modules[full]
        raise
    setattr(sys.modules["kvexact.kernels"], mutant.module, module)
