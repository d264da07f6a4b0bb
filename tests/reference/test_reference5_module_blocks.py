"""Prompt Cache modules backed by pool blocks (0x0CB over the 0x04 allocator): population allocates and
publishes, use leases, invalidation by generation releases. Block counts are ceil(N_module / P) worked by
hand from the trip schema (system 7 words, plan 7, tokyo 6, miami 4; P = 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvexact.reference import prompt_cache as pc
from kvexact.reference.allocator import Allocator
from kvexact.reference.module_blocks import BackedModuleStore, ModuleBlockRejection
from kvexact.reference.modules import Namespace
from kvexact.reference.pool import BlockState, GroupConfig
from kvexact.reference.rejections import Rejected

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "prompt_cache"
SCHEMA = pc.parse_schema((EXAMPLES / "trip_schema.xml").read_text())
PROMPT = (EXAMPLES / "trip_prompt.xml").read_text()
NS = Namespace("tenant", 4, frozenset({"alice"}))


def _store() -> BackedModuleStore:
    groups = [GroupConfig(0, 0, 4, 1024), GroupConfig(1, 1, 4, 512)]
    ids = list(range(1, 13))
    backed = BackedModuleStore(Allocator(groups, [ids, ids], check_every_op=True))
    backed.populate(SCHEMA, SCHEMA.modules, NS, "sem", "lay")
    return backed


def _free(backed: BackedModuleStore) -> int:
    pool = backed.alloc.pools[0]
    return sum(pool.state_of(b) is BlockState.FREE for b in pool.blocks)


def _assemble(backed: BackedModuleStore):
    return pc.assemble_markup("alice", PROMPT, SCHEMA, backed.store, NS, "sem", "lay")


def test_population_allocates_ceil_n_over_p_blocks_and_publishes_the_full_ones():
    backed = _store()
    blocks = {name: len(r.physical_refs) // 2 for (_, name, _), r in backed.store.receipts.items()}
    assert blocks == {"system": 2, "plan": 2, "tokyo": 2, "miami": 1}
    assert _free(backed) == 12 - 7
    keyed = sum(backed.alloc.pools[0].blocks[h.block_id].cache_key is not None
                for r in backed.store.receipts.values() for h in r.physical_refs if h.cache_group_id == 0)
    assert keyed == 1 + 1 + 1 + 1  # floor(7/4) + floor(7/4) + floor(6/4) + floor(4/4)
    for key, owner in backed.owners.items():
        assert backed.alloc.tokens_of(owner) == SCHEMA.modules[key[1]].token_ids
    backed.check()


def test_use_leases_the_imported_modules_and_finish_returns_them():
    backed = _store()
    segments = _assemble(backed)
    use = backed.use(segments)
    assert use.modules == ("system", "plan", "miami") and len(use.lease_ids) == (2 + 2 + 1) * 2
    h = backed.store.receipts[("trip", "system", "")].physical_refs[0]
    assert backed.alloc.refcount(h) == 2
    backed.check()
    backed.finish(use.use_id)
    assert backed.alloc.refcount(h) == 1 and not backed.alloc.leases
    backed.check()


def test_a_revision_releases_the_old_generation_once_its_uses_finish():
    backed = _store()
    use = backed.use(_assemble(backed))
    revised = pc.parse_schema((EXAMPLES / "trip_schema.xml").read_text().replace('generation="1"', 'generation="2"'))
    assert backed.revise_schema(revised) == ("miami", "plan", "system", "tokyo")
    assert not backed.owners and _free(backed) == 12 - 5  # tokyo's 2 blocks free now; the leased 5 wait
    backed.check()
    backed.finish(use.use_id)
    assert _free(backed) == 12 and not backed.alloc.index  # no identity of the old generation survives
    backed.check()
    backed.alloc.self_check()


def test_a_rotation_releases_every_module_of_the_old_namespace_generation():
    backed = _store()
    assert backed.rotate_namespace(Namespace("tenant", 5, NS.readers)) == ("miami", "plan", "system", "tokyo")
    assert _free(backed) == 12
    backed.check()


def test_finishing_an_unknown_use_is_refused_by_name():
    backed = _store()
    with pytest.raises(Rejected) as exc:
        backed.finish(99)
    assert exc.value.reason is ModuleBlockRejection.USE_NOT_HELD


def test_using_segments_of_a_dropped_generation_is_refused_by_name_and_leases_nothing():
    backed = _store()
    segments = _assemble(backed)
    backed.rotate_namespace(Namespace("tenant", 5, NS.readers))
    before = backed.alloc.digest()
    with pytest.raises(Rejected) as exc:
        backed.use(segments)
    assert exc.value.reason is ModuleBlockRejection.UNBACKED_SEGMENT and backed.alloc.digest() == before
