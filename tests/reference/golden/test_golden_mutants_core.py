"""The core-module golden cases (seed_cases_core.py, issue #25): each passes on the
reference, is registered, and fails, naming itself, on a survivor of the fresh seed-61 sample
(cosmic-ray's mutated line applied to a copy of its module, the mutated function or constant patched in)."""

from __future__ import annotations

import sys

import pytest
import seed_cases_core
from golden import (  # one line replaced, as cosmic-ray writes it
    assert_cases_pass_and_are_registered,
    mutant_module,
    run_case,
)

from kvexact.reference import (
    allocator,
    ledgers,
    modules,
    namespaces,
    pool,
    prefix,
    prompt_cache,
    rejections,
    revocation,
    shared_prefix,
    vmm,
)
from kvexact.reference.namespaces import CacheIsolationNamespace, NamespaceRegistry, NamespaceRejection
from kvexact.reference.rejections import rejection_of


def test_every_core_case_passes_and_is_registered():
    assert_cases_pass_and_are_registered(seed_cases_core.CASES)


def _apply(monkeypatch, module, name, before, after):
    """Replace ``name`` (a function, ``Class.method`` or module constant) by the mutated copy's, also where another
    module imported it by name."""
    copy = mutant_module(monkeypatch, module, before, after)
    owner, _, attr = name.rpartition(".")
    target = getattr(module, owner) if owner else module
    original = getattr(target, attr)
    replacement = getattr(getattr(copy, owner) if owner else copy, attr)
    monkeypatch.setattr(target, attr, replacement)
    if not owner:
        for other in list(sys.modules.values()):
            if other is not module and (getattr(other, "__name__", "") or "").startswith("kvexact.") and \
                    getattr(other, attr, None) is original:
                monkeypatch.setattr(other, attr, replacement)


# (module, patched name, line before, line after (the seed-61 survivor), the case that must fail)
SURVIVORS = [
    (vmm, "_unmap_top", 'backs row {s.valid_tokens - 1}")', 'backs row {s.valid_tokens >> 1}")',
     "vmm unmap live rows"),
    (namespaces, "invalidate", "current = tuple(successor if c.namespace_id == namespace_id else c",
     "current = tuple(successor if c.namespace_id is namespace_id else c", "namespace succession"),
    (prefix, "admit", "for h in receipt.matched_group_handles[full]:", "for h in []:", "prefix partial admission"),
    (pool, "_MOD", "_MOD = 1 << 256", "_MOD = 1 | 256", "allocator state digest"),
    (ledgers, "contiguous_fit", "return any(e >= candidate_bytes for e in free_extents_bytes)",
     "return any(e == candidate_bytes for e in free_extents_bytes)", "contiguous fit"),
    (allocator, "Allocator.begin",
     'if operation != "allocate" and request_id not in self.ended and expected_table_version not in (',
     'if operation >= "allocate" and request_id not in self.ended and expected_table_version not in (',
     "allocator predecessors"),
    (allocator, "Allocator.begin", "expected_table_version not in (\n                        None, 0):",
     "expected_table_version not in (\n                        None, -1):", "allocator predecessors"),
    (allocator, "Allocator._write_rows",
     "if offset != len(rows) or offset + len(tokens) > self.groups[group].block_tokens:",
     "if offset != len(rows) or offset ** len(tokens) > self.groups[group].block_tokens:",
     "allocator write frontier"),
]

# issue #25, i25l: the seed-71 survivor (the default tau of chunk_attention), its neighbours, and the survivors of
# i25l's exploration samples (seeds 1001-1007); each fails its case by name (the case is registered in
# the golden cases by test_every_core_case_passes_and_is_registered, so the golden cases fails with it)
CONTRACT_SURVIVORS = [
    (shared_prefix, "chunk_attention", "def chunk_attention(fx: Fixture, threshold: int = 1,",
     "def chunk_attention(fx: Fixture, threshold: int = 2,", "shared prefix chunk first"),
    (shared_prefix, "bind_chunk_first", "def bind_chunk_first(fx: Fixture, threshold: int = 1)",
     "def bind_chunk_first(fx: Fixture, threshold: int = 0)", "shared prefix chunk first"),
    (shared_prefix, "chunk_first_metadata", "if c.coverage <= threshold:", "if c.coverage < threshold:",
     "shared prefix chunk first"),
    (shared_prefix, "partial_row", "return partial[meta.offsets[i] + seq - meta.begins[i]]",
     "return partial[meta.offsets[i] + seq]", "shared prefix chunk first"),
    # i25l's exploration sample over reference.prefix (seed 1001)
    (prefix, "PrefixCache.lookup", "not 0 <= req.semantic_match_tokens <= s_prompt:",
     "not 0 <= req.semantic_match_tokens < s_prompt:", "prefix lookup receipts"),
    (prefix, "PrefixCache.lookup", "not 0 <= req.semantic_match_tokens <= s_prompt:",
     "not 0 < req.semantic_match_tokens <= s_prompt:", "prefix lookup receipts"),
    (prefix, "admit", "full = (receipt.runtime_hit_tokens - copied) // cache.block_tokens",
     "full = (receipt.runtime_hit_tokens | copied) // cache.block_tokens", "prefix partial tails"),
    # i25l's exploration sample over reference.revocation (seed 1002)
    (revocation, "INVARIANTS", "return all(r.authorized and authz(p, r.ns) for p, r in s.req.items()",
     "return all(r.authorized or authz(p, r.ns) for p, r in s.req.items()", "revocation walks"),
    (revocation, "publish_entry", "index = s.index | {Entry(r.ns, r.gen, r.block)} if _current(s, p) else s.index",
     "index = s.index ^ {Entry(r.ns, r.gen, r.block)} if _current(s, p) else s.index", "revocation walks"),
    # i25l's exploration sample over reference.namespaces, vmm, shared_prefix (seed 1003)
    (vmm, "require_use", "if tokens > s.valid_tokens:", "if tokens != s.valid_tokens:", "vmm contract"),
    (vmm, "virtual_address", "and 0 <= d < config.head_dim):", "and -1 <= d < config.head_dim):", "vmm contract"),
    (vmm, "_commit", "after = attrs.evolve(after, version=state.version + 1)",
     "after = attrs.evolve(after, version=state.version + 2)", "vmm contract"),
    (vmm, "write_rows", "end = start_token + count_tokens", "end = start_token | count_tokens", "vmm contract"),
    (vmm, "write_rows", 'f"row {end - 1} beyond ready frontier', 'f"row {end - 2} beyond ready frontier',
     "vmm contract"),
    # i25l's exploration sample over reference.keys, sessions, modules, prompt_cache, namespaces (seed 1004)
    (prompt_cache, "parse_schema", "{text.strip()[:20]!r} on line", "{text.strip()[: 19]!r} on line",
     "prompt markup contract"),
    # i25l's exploration sample over reference.prefix, revocation, vmm, shared_prefix (seed 1005)
    (prefix, "PrefixCache.lookup", 'f"block {j}: key {key[:12]}")', 'f"block {j}: key {key[: 11]}")',
     "prefix lookup receipts"),
    (revocation, "RevState", '{t: "none" for t in ts}, {t: 0 for t in ts},', '{t: "none" for t in ts}, {t: -1 for t in ts},',
     "revocation walks"),    # i25l's exploration sample over reference.prefix, revocation, vmm, shared_prefix, namespaces (seed 1006)
    (prefix, "PrefixCache.lookup", "kept = full_blocks + (1 if partial_rows else 0)",
     "kept = full_blocks + ( 2 if partial_rows else 0)", "prefix partial tails"),    # i25l's exploration sample over all nine core modules (seed 1007)
    (revocation, "INVARIANTS", "return all(x.gen >= s.done[x.ns] for x in s.receipts)",
     "return all(x.gen is s.done[x.ns] for x in s.receipts)", "revocation walks"),    (revocation, "revocation_complete", "for o in s.owner.values() if o.ns != NO_TENANT))",
     "for o in s.owner.values() if o.ns > NO_TENANT))", "revocation walks"),
    (prompt_cache, "_parse_xml", "column {exc.offset + 1}:", "column {exc.offset % 1}:", "prompt markup contract"),
    (shared_prefix, "partial_row", "return partial[meta.offsets[i] + seq - meta.begins[i]]",
     "return partial[meta.offsets[i] ^ seq - meta.begins[i]]", "shared prefix chunk first"),
]

# issue #25, i25n: survivors of the fresh seed-91 sample; each also fails its golden case
SEED91_SURVIVORS = [
    (rejections, "negative_cases", "if section is None or c.section == section]",
     "if section is None or c.section != section]", "negative registry sections"),
    (modules, "check_module", 'f"{expected.position_ids[:3]}...")', 'f"{expected.position_ids[: 4]}...")',
     "modules contract"),
    (vmm, "MappedFrontierReceipt.covers", "return generation == self.generation and",
     "return generation is self.generation and", "vmm contract"),
]


@pytest.mark.parametrize("module, name, before, after, case", SEED91_SURVIVORS,
                         ids=[f"{m.__name__.rsplit('.', 1)[-1]}.{n}" for m, n, *_ in SEED91_SURVIVORS])
def test_a_seed91_survivor_fails_its_core_case(monkeypatch, module, name, before, after, case):
    _apply(monkeypatch, module, name, before, after)
    if module is rejections:  # the copy selects from the real registry, not from an empty one of its own
        monkeypatch.setitem(rejections.negative_cases.__globals__, "_REGISTRY", rejections._REGISTRY)
    result = run_case(case)
    assert result.passed is False, f"{case} passed with {after!r}"
    assert case in result.detail


@pytest.mark.parametrize("module, name, before, after, case", SURVIVORS,
                         ids=[f"{m.__name__.rsplit('.', 1)[-1]}.{n}:{i}" for i, (m, n, _b, _a, _c) in
                              enumerate(SURVIVORS)])
def test_a_seed61_survivor_fails_its_core_case(monkeypatch, module, name, before, after, case):
    _apply(monkeypatch, module, name, before, after)
    result = run_case(case)
    assert result.passed is False, f"{case} passed with {after!r}"
    assert case in result.detail


@pytest.mark.parametrize("module, name, before, after, case", CONTRACT_SURVIVORS,
                         ids=[f"{m.__name__.rsplit('.', 1)[-1]}.{n}:{i}" for i, (m, n, _b, _a, _c) in
                              enumerate(CONTRACT_SURVIVORS)])
def test_a_mutant_of_a_core_contract_fails_its_case(monkeypatch, module, name, before, after, case):
    _apply(monkeypatch, module, name, before, after)
    result = run_case(case)
    assert result.passed is False, f"{case} passed with {after!r}"
    assert case in result.detail


def test_a_registry_listing_its_current_generation_as_retired_is_refused():
    ns = CacheIsolationNamespace("prod", "t1", "ns", 2, None, 0)
    for retired in (2, 3):
        assert rejection_of(lambda r=retired: NamespaceRegistry((ns,), frozenset({("ns", r)}))) \
            is NamespaceRejection.RETIRED_GENERATION
    assert NamespaceRegistry((ns,), frozenset({("ns", 0), ("ns", 1), ("other", 9)})).get("ns") is ns


def test_the_seed71_default_threshold_survivor_fails_its_golden_case(monkeypatch):
    """reference.shared_prefix:290 (main d15a566): chunk_attention's default threshold 1 -> 2."""
    module, name, before, after, case = CONTRACT_SURVIVORS[0]
    _apply(monkeypatch, module, name, before, after)
    result = run_case(case)
    assert result.passed is False
    assert case in result.detail
