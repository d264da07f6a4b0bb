"""The index-side cases of reference-seed (kvexact/gate/seed_checks_index.py, issue #25): each passes on the
reference, is registered in the quick check, and fails, naming itself, on a mutant of reference/ that survived the
quick gate before it (cosmic-ray's mutated line applied to a copy of the module)."""

from __future__ import annotations

import enum
import inspect
import types

import pytest

from kvexact.gate import seed_checks, seed_checks_index
from kvexact.gate.framework import Verdict
from kvexact.reference import (
    formulas,
    formulas_seed,
    keys,
    modules,
    namespaces,
    prefix,
    revocation,
    shared_prefix,
    telemetry,
    translate,
    traversal,
    vmm,
)


def _copy_with(monkeypatch, module: types.ModuleType, before: str, after: str) -> types.ModuleType:
    """``module`` executed again from its source with the one line ``before`` replaced by ``after``; its formulas
    register in a registry of their own, and its rejection enums are the real ones."""
    source = inspect.getsource(module)
    assert source.count(before) == 1, f"{before!r} is not one line of {module.__name__}"
    copy = types.ModuleType(module.__name__ + "_mutant")
    copy.__file__ = module.__file__
    with monkeypatch.context() as m:
        m.setattr(formulas, "REGISTRY", {})
        exec(compile(source.replace(before, after), module.__file__, "exec"), copy.__dict__)
    for name, value in list(vars(copy).items()):
        real = getattr(module, name, None)
        if isinstance(value, type) and issubclass(value, enum.Enum) and isinstance(real, type):
            setattr(copy, name, real)
    return copy


def _run(case: str):
    return seed_checks.run_cases({case: seed_checks_index.INDEX_CASES[case]})


def test_every_index_case_passes_and_is_registered():
    assert set(seed_checks_index.INDEX_CASES) <= set(seed_checks.SEED_CASES)
    for name in seed_checks_index.INDEX_CASES:
        result = _run(name)
        assert result.verdict is Verdict.PASSED, result.detail


def test_the_catalog_lines_are_the_seeds_display_lines():
    assert sum(seed_checks_index.SEED_DISPLAY_LINES.values()) == 111
    assert seed_checks_index.section_of_line(1200) == "0x06A" and seed_checks_index.section_of_line(2411) == "0x0BI"


# (module, attribute to patch ("Class.attr" for a method), line before, line after, case), from the seed-11 and
# seed-4/5 samples of `kvexact bench mutation` over the index-side modules
SURVIVORS = [
    (formulas_seed, "CATALOG", '_e("0x0BA", 2131, "LSE_p = m_p + log l_p; O_p = u_p / l_p", "attn.lse",',
     '_e("0x0BA", 2130, "LSE_p = m_p + log l_p; O_p = u_p / l_p", "attn.lse",', "formulas catalog 0x10A"),
    (formulas, "Z3Ops.ceildiv", "self.side += [b > 0, b * q >= a, b * q - b < a]",
     "self.side += [b > 0, b * q is a, b * q - b < a]", "formulas z3 0x10A"),
    (formulas, "Z3Ops.minimum", "        out = xs[0]\n        for x in xs[1:]:\n            out = self.z3.If(x < out",
     "        out = xs[1]\n        for x in xs[1:]:\n            out = self.z3.If(x < out", "formulas z3 0x10A"),
    (shared_prefix, "check_tree", "if not 0 <= c.seq_begin < c.seq_end <= num_seqs:",
     "if not -1 <= c.seq_begin < c.seq_end <= num_seqs:", "tables 0x0AB"),
    (revocation, "finish", "receipts=s.receipts - {held}, leases=s.leases - {held}",
     "receipts=s.receipts / {held}, leases=s.leases - {held}", "revocation spec 0x0CE"),
    (traversal, "dense_staging_table", "return [list(t) + [PAD] * (width - len(t)) for t in tables]",
     "return [list(t) & [PAD] * (width - len(t)) for t in tables]", "tables 0x0AB"),
    (namespaces, "invalidate", "model_changes = reason is not InvalidationReason.ISOLATION_RESET",
     "model_changes = reason is InvalidationReason.ISOLATION_RESET", "namespaces 0x06"),
    (prefix, "PrefixCache.publish", "if policy.partial_tail and len(tokens) % p:",
     "if policy.partial_tail and len(tokens) / p:", "prefix admit 0x07"),
    (keys, "block_extra_keys", "if f.start_token < stop and f.start_token + f.length_tokens > start:",
     "if f.start_token < stop and f.start_token + f.length_tokens < start:", "keys 0x07B"),
    (keys, "block_extra_keys", 'extras.append(("mm", f.identifier, f.start_token - start))',
     'extras.append(("mm", f.identifier, f.start_token >> start))', "keys 0x07B"),
    (modules, "module_hit", "== (consumer.schema_id, consumer.schema_generation)",
     "is not (consumer.schema_id, consumer.schema_generation)", "prompt cache 0x0CB"),
    (telemetry, "evaluate_alerts", "cur.refcount_mismatch_age_s >= grace_s", "cur.refcount_mismatch_age_s <= grace_s",
     "telemetry alerts 0x0CF"),
    (translate, "check_frozen_address", "if got.byte_address != frozen.byte_address:",
     "if got.byte_address is not frozen.byte_address:", "frozen 0x03F"),
    (vmm, "translate", "if addr.page >= s.ready_pages:", "if addr.page == s.ready_pages:", "vmm spec 0x06F"),
    (shared_prefix, "check_fixture", "    for s, q in enumerate(fx.q):\n        if len(q) != fx.d_qk:",
     "    for s, q in []:\n        if len(q) != fx.d_qk:", "tables 0x0AB"),
    (vmm, "step_async", "donors = [s.slot for s in state.slots if not s.active and s.pages]",
     "donors = [s.slot for s in state.slots if s.active and s.pages]", "vmm spec 0x06F"),
]


@pytest.mark.parametrize("module, name, before, after, case", SURVIVORS,
                         ids=[f"{m.__name__.rsplit('.', 1)[-1]}.{n}" for m, n, *_ in SURVIVORS])
def test_a_former_survivor_fails_its_index_case(monkeypatch, module, name, before, after, case):
    copy = _copy_with(monkeypatch, module, before, after)
    owner, _, attr = name.rpartition(".")
    target = getattr(module, owner) if owner else module
    replacement = getattr(getattr(copy, owner) if owner else copy, attr)
    monkeypatch.setattr(target, attr, replacement)
    result = _run(case)
    assert result.verdict is Verdict.FAILED, f"{case} passed with {after!r}"
    assert case in result.detail
