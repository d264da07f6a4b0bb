"""The Vmm machine's attention check: an unmodified paged decode over the MMU's contiguous virtual K/V
buffers, against float64 attention over rows built from tokens. It must fail when the MMU reads a wrong
or stale handle, and must not care what lies past a request's valid rows."""

from __future__ import annotations

import math

import attrs
import pytest

from kvexact.conformance.machines import ConformanceFailure
from kvexact.conformance.machines.vmm import CONFIG, VmmMachine
from kvexact.reference import vmm

MISMATCH = "attention over the virtual buffer differs from float64"


def _fresh(cls: type[VmmMachine] = VmmMachine) -> VmmMachine:
    machine = type(cls.__name__, (cls,), {"stats": {}})
    return machine()


def test_vmm_config_is_small_but_real_sized():
    assert (CONFIG.row_bytes, CONFIG.page_tokens, CONFIG.pages_per_request, CONFIG.tensors) == (16, 2, 4, 2)
    m = _fresh()
    assert tuple(m.memory.shape) == (CONFIG.handles, CONFIG.page_bytes // CONFIG.elem_bytes)
    assert bool(m.memory.isnan().all())


class SwappedKV(VmmMachine):
    """An MMU that walks the V tensor's page table for K and K's for V (one table for both tensors)."""

    def mmu_translate(self, kind, slot, t, h, d):
        return super().mmu_translate("V" if kind == "K" else "K", slot, t, h, d)


def test_vmm_attention_catches_an_mmu_that_swaps_k_and_v_handles():
    m = _fresh(SwappedKV)
    m.alloc_slot(0)
    m.grow_slot(0, 3, asynchronous=False, tokens=[1, 2, 3])
    m.check_reads()  # the rows are where translation says: only the MMU's walk is wrong
    with pytest.raises(ConformanceFailure, match=MISMATCH) as exc:
        m.check_attention()
    assert "slot 0 (req0@1)" in str(exc.value)


class StaleTLB(VmmMachine):
    """An MMU that caches (tensor, slot, page) -> handle and never invalidates it on unmap or remap."""

    def __init__(self) -> None:
        super().__init__()
        self.tlb: dict[tuple[str, int, int], int] = {}

    def mmu_translate(self, kind, slot, t, h, d):
        row, element = super().mmu_translate(kind, slot, t, h, d)
        return self.tlb.setdefault((kind, slot, t // CONFIG.page_tokens), row), element


def test_vmm_attention_catches_a_stale_page_walk_into_another_requests_rows():
    m = _fresh(StaleTLB)
    m.alloc_slot(0)
    m.grow_slot(0, 4, asynchronous=False, tokens=[1, 2, 1, 2])  # req0 on slot 0: handles 0..3
    m.check_attention()  # fills the TLB for slot 0
    m.free_slot(0, unmap=True)
    m.alloc_slot(1)
    m.grow_slot(1, 4, asynchronous=False, tokens=[1, 2, 1, 2])  # req1 on slot 1 takes handles 0..3 again
    m.alloc_slot(0)
    m.grow_slot(0, 2, asynchronous=False, tokens=[1, 2])  # req2 on slot 0: handles 4, 5; same tokens as req1
    m.check_reads()  # translation itself is right
    with pytest.raises(ConformanceFailure, match=MISMATCH) as exc:
        m.check_attention()
    assert "req2" in str(exc.value) and "nan" not in str(exc.value)  # finite: req1's rows, not poison


def test_vmm_attention_reads_only_the_valid_rows():
    """Rows past valid_tokens in ready pages hold a retained older generation's rows, then NaN and huge
    garbage; attention over the valid rows stays exact, so only valid rows are read."""
    m = _fresh()
    m.alloc_slot(0)
    m.grow_slot(0, 4, asynchronous=False, tokens=[3, 1, 2, 2])
    old_k, _ = m.virtual_buffers(0)
    m.free_slot(0, unmap=False)  # the generation's two pages stay mapped (retained capacity)
    m.alloc_slot(0)
    m.alloc_slot(1)
    m.grow_slot(0, 1, asynchronous=False, tokens=[3])
    m.grow_slot(1, 3, asynchronous=True, tokens=[2, 2, 1])
    k, v = m.virtual_buffers(0)
    assert bool((k[1:4] == old_k[1:4]).all())  # retained rows of the older generation are physically there
    assert bool(k[4:].isnan().all()) and bool(v[4:].isnan().all())  # unmapped pages read as NaN
    m.check_reads()
    m.check_attention()
    for slot, rows, garbage in ((0, range(1, 4), math.nan), (1, range(3, 4), 1e30)):
        for t in rows:
            for kind in ("K", "V"):
                for h in range(CONFIG.kv_heads):
                    for d in range(CONFIG.head_dim):
                        m.memory[m._element(kind, slot, t, h, d)] = garbage
    m.check_reads()
    m.check_attention()
    assert m.stats["attention_checks"] == 2


def test_vmm_poisons_handles_taken_back_by_unmap_and_async_reclaim():
    m = _fresh()
    m.alloc_slot(0)
    m.grow_slot(0, 8, asynchronous=False, tokens=[1, 2, 3, 1, 2, 3, 1, 2])  # all 8 handles, page 3 = 6, 7
    assert not bool(m.memory.isnan().any())
    m.free_slot(0, unmap=False)
    m.alloc_slot(1)
    m.grow_slot(1, 1, asynchronous=True, tokens=[2])  # no free bundle: step_async reclaims slot 0's page 3
    assert m.state.slot(1).pages == ((6, 7),) and m.stats["map:poisoned_handles"] == 2
    per_token = CONFIG.kv_heads * CONFIG.head_dim
    for handle in (6, 7):
        row = m.memory[m.row_of[handle]]
        assert not bool(row[:per_token].isnan().any()) and bool(row[per_token:].isnan().all())
    m.check_attention()
    m.free_slot(1, unmap=True)
    assert bool(m.memory[[m.row_of[6], m.row_of[7]]].isnan().all())
    assert not bool(m.memory[m.row_of[0]].isnan().any())  # slot 0's retained pages 0..2 are untouched


# ---- step validation against spec/VirtualMapping.tla ------------------------------------------------


def _exercise(m: VmmMachine) -> None:
    """Every kind of reference step: sync and async maps (one rejected half way), writes, reads, frees
    with and without unmap, a retained page reused by a new generation, a reclaim."""
    m.alloc_slot(0)
    m.grow_slot(0, 3, asynchronous=False, tokens=[1, 2, 3])
    m.alloc_slot(1)
    m.grow_slot(1, 5, asynchronous=True, tokens=[1, 2, 3, 1, 2])  # two bundles left: rejected, rolled back
    m.grow_slot(1, 3, asynchronous=True, tokens=[1, 2, 3])
    m.check_reads()
    m.free_slot(0, False)
    m.free_slot(1, True)
    m.alloc_slot(0)  # retained pages: capacity, not K/V
    m.grow_slot(0, 2, asynchronous=False, tokens=[2, 2])
    m.free_slot(0, False)
    m._try("reclaim_inactive", vmm.reclaim_inactive, 0)


def test_every_reference_step_is_a_step_of_its_virtual_mapping_action():
    m = _fresh()
    _exercise(m)
    result = m.trace.validate()
    assert result.ok, result.summary()
    assert {"reserve_virtual", "create_handles", "alloc_reqid", "map_bundle", "await_mapping", "write_rows",
            "require_use", "free_reqid", "reclaim_inactive"} <= set(result.actions), result.actions
    m.teardown()
    assert m.stats["trace_steps"] == result.steps


def test_reference_step_names_are_the_spec_actions():
    from kvexact.spec.checker.model import snake_case, spec_actions

    m = _fresh()
    _exercise(m)
    steps = {r["action"] for r in m.trace.records}
    assert steps <= {snake_case(a) for a in spec_actions("VirtualMapping")}, steps


def test_a_planted_wrong_reference_step_is_caught_by_the_step_validation(monkeypatch):
    """alloc_reqid that reuses the slot's generation (0x06E: a new request must get a new one): the
    reference's own ledgers and the read-back checks pass, the spec's AllocReqid step does not."""

    def same_generation(state, slot, request_id):  # the reference's alloc_reqid without "generation + 1"
        s = state.slot(slot)
        new = attrs.evolve(s, request_id=request_id, active=True, valid_tokens=0)
        return vmm._commit("alloc_reqid", state, vmm._with_slot(state, new), detail={"slot": slot})

    monkeypatch.setattr(vmm, "alloc_reqid", same_generation)
    m = _fresh()
    m.alloc_slot(0)
    m.grow_slot(0, 2, asynchronous=False, tokens=[1, 2])
    m.check_reads()
    with pytest.raises(ConformanceFailure, match=r"VirtualMapping: trace leaves the spec at step 3 \(alloc_reqid"):
        m.teardown()
