"""The accounting golden cases (seed_cases_accounting.py, issue #25): each passes on the
reference, is registered, and fails, naming itself, on a survivor of the fresh samples (seeds 71,
81) and on neighbours of those survivors (cosmic-ray's mutated line applied to a copy of its module, the mutated
function, method or class patched in)."""

from __future__ import annotations

import sys

import pytest
import seed_cases_accounting
from golden import (  # one line replaced, as cosmic-ray writes it
    assert_cases_pass_and_are_registered,
    mutant_module,
    run_case,
)

from kvexact.reference import allocator, ledgers, lifecycle, pool, telemetry


def test_every_accounting_case_passes_and_is_registered():
    assert_cases_pass_and_are_registered(seed_cases_accounting.CASES)


def _patch_in(monkeypatch, module, name, before, after):
    """Patch ``name`` (a module-level function or class, or ``Class.method``) with the mutant copy's, in
    ``module`` and in every kvexact module that imported the same object by name."""
    copy = mutant_module(monkeypatch, module, before, after)
    owner, _, attr = name.rpartition(".")
    holder = getattr(module, owner) if owner else module
    old = getattr(holder, attr)
    new = getattr(getattr(copy, owner) if owner else copy, attr)
    monkeypatch.setattr(holder, attr, new)
    if owner:
        return
    for other in list(sys.modules.values()):
        if other is module or not (getattr(other, "__name__", "") or "").startswith("kvexact."):
            continue
        if getattr(other, attr, None) is old:
            monkeypatch.setattr(other, attr, new)


# (module, patched name, line before, line after, the case that must fail)
MUTANTS = [
    # the named survivors of the fresh samples of seeds 71 and 81
    (telemetry, "check_funnel", 'f"{a}->{b} drops {na - nb}, bucket {bucket} counts {explained}")',
     'f"{a}->{b} drops {na << nb}, bucket {bucket} counts {explained}")', "telemetry funnel"),
    (telemetry, "GranularityCounters.observe_dispatch", "self.dispatch[key] = self.dispatch.get(key, 0) + 1",
     "self.dispatch[key] = self.dispatch.get(key, 0) * 1", "telemetry counters"),
    (ledgers, "_tail_slots_holding_valid_rows", "out += valid[r.block_ids[-1]] - visible_in_last",
     "out += valid[r.block_ids[-1]] << visible_in_last", "ledger tail valid slots"),
    (lifecycle, "truncate", "alloc.epoch, rec.table_version + 1)", "alloc.epoch, rec.table_version - 1)",
     "lifecycle receipts"),
    (allocator, "AllocationReceipt", "new_capacity_bytes: int = 0", "new_capacity_bytes: int = 1",
     "allocator receipts"),
    # neighbours of those survivors
    (telemetry, "check_funnel", "if nb > na:", "if nb >= na:", "telemetry funnel"),
    (telemetry, "check_funnel", 'raise Rejected(TelemetryRejection.FUNNEL_NOT_MONOTONE, f"{b}={nb} > {a}={na}")',
     'raise Rejected(TelemetryRejection.FUNNEL_NOT_MONOTONE, f"{b}={nb} > {a}={nb}")', "telemetry funnel"),
    (telemetry, "reconcile_pool", "if state not in by_state or not 0 <= block < snap.pool_blocks:",
     "if state not in by_state or not 0 <= block <= snap.pool_blocks:", "telemetry pool"),
    (telemetry, "reconcile_pool", "if per_block.get(b, 0) != snap.recorded_refcounts.get(b, 0))",
     "if per_block.get(b, 0) > snap.recorded_refcounts.get(b, 0))", "telemetry pool"),
    (telemetry, "evaluate_alerts",
     '"reference_leak": cur.refcount_recorded - cur.refcount_derived != 0 and cur.refcount_mismatch_age_s >= grace_s,',
     '"reference_leak": cur.refcount_recorded - cur.refcount_derived > 0 and cur.refcount_mismatch_age_s >= grace_s,',
     "telemetry alerts"),
    (telemetry, "allocator_pool_snapshot",
     'leases = {f"lease:{lid}": (dense[h.block_id],) for lid, h in alloc.leases.items() if h.cache_group_id == group}',
     'leases = {f"lease:{lid}": (dense[h.block_id],) for lid, h in alloc.leases.items() if h.cache_group_id != group}',
     "telemetry snapshot"),
    (telemetry, "evaluate_alerts", "return bool(getattr(cur, f) == getattr(prev, f))",
     "return bool(getattr(cur, f) is getattr(prev, f))", "telemetry alerts"),
    (ledgers, "validate_fixture", "if valid.get(b) != f.block_tokens:", "if valid.get(b) is not f.block_tokens:",
     "ledger validation"),
    (telemetry, "GranularityCounters._add", "if value < 0:", "if value < -1:", "telemetry counters"),
    (telemetry, "check_hygiene", 'if not _LABEL_NAME.match(name) or name.startswith("__"):',
     'if not _LABEL_NAME.match(name) or name.startswith("XX__XX"):', "telemetry hygiene"),
    (telemetry, "check_hygiene", "if len(text) > MAX_LABEL_VALUE or re.search(r\"\\s\", text):",
     "if len(text) >= MAX_LABEL_VALUE or re.search(r\"\\s\", text):", "telemetry hygiene"),
    (ledgers, "_tail_slots_holding_valid_rows", "visible_in_last = r.rows_tokens - (len(r.block_ids) - 1) * f.block_tokens",
     "visible_in_last = r.rows_tokens - (len(r.block_ids) + 1) * f.block_tokens", "ledger tail valid slots"),
    # survivors of the exploration sample of reference.ledgers, seed 1253
    (ledgers, "compute_ledger", "row_bytes=B, block_bytes=P * B,", "row_bytes=B, block_bytes=P << B,", "ledger figures"),
    (ledgers, "block_size_cost", "map_entries=refs, pool_descriptors=pool, cached_hashes=hashes, free_blocks=pool - unique,",
     "map_entries=refs, pool_descriptors=pool, cached_hashes=hashes, free_blocks=pool // unique,", "ledger figures"),
    (ledgers, "validate_fixture", "if not 1 <= v <= f.block_tokens:", "if not 1 <= v < f.block_tokens:",
     "ledger validation"),
    # a survivor of the fresh sample of allocator + ledgers, seed 1257
    (ledgers, "validate_fixture", "visible = min(f.block_tokens, r.rows_tokens - j * f.block_tokens)",
     "visible = min(f.block_tokens, r.rows_tokens ^ j * f.block_tokens)", "ledger validation"),
    (ledgers, "validate_fixture", "if visible > v:", "if visible >= v:", "ledger validation"),
    (ledgers, "validate_fixture", "if len(set(free)) != len(free) or set(free) != pool - reachable:",
     "if len(set(free)) > len(free) or set(free) != pool - reachable:", "ledger validation"),
    (ledgers, "reconcile", 'raise Rejected(reason, f"{name}: claimed {value}, computed {actual}")',
     'raise Rejected(reason, f"{name}: claimed {value}, computed {value}")', "ledger validation"),
    (ledgers, "external_fragmentation", "if not isinstance(e, int) or e < 0:",
     "if not isinstance(e, int) or e <= 0:", "ledger costs"),
    (ledgers, "block_pool_fit", "return blocks_for_bytes(candidate_bytes=candidate_bytes, block_bytes=block_bytes) <= free_blocks",
     "return blocks_for_bytes(candidate_bytes=candidate_bytes, block_bytes=block_bytes) < free_blocks", "ledger costs"),
    (lifecycle, "truncate", "if not 0 <= keep_tokens < rec.context_tokens:",
     "if not 0 < keep_tokens < rec.context_tokens:", "lifecycle receipts"),
    (lifecycle, "drop_logical_block", "if logical_block != n - 1:", "if logical_block > n - 1:", "lifecycle receipts"),
    (lifecycle, "cow_append", "if not rec.tables[g] or rec.tables[g][-1] != h:",
     "if not rec.tables[g] or rec.tables[g][0] != h:", "lifecycle receipts"),
    (lifecycle, "compensate", 'transaction_id=f"{receipt.transaction_id}-compensation", request_id=receipt.request_id,',
     'transaction_id=f"{receipt.transaction_id}", request_id=receipt.request_id,', "lifecycle receipts"),
    (allocator, "AllocationReceipt", "append_write_bytes: int = 0", "append_write_bytes: int = 1",
     "allocator receipts"),
    (allocator, "AllocationReceipt", "paths: tuple[str, ...] = ()", "paths: tuple[str, ...] = ('x',)",
     "allocator receipts"),
    (lifecycle, "cache_block", 'alloc.emit({"r": request_id, "j": logical_block + 1, "key": key})',
     'alloc.emit({"r": request_id, "j": logical_block % 1, "key": key})', "lifecycle trace params"),
    (lifecycle, "prefix_hit", 'alloc.emit({"r": request_id, "k": len(keys), "keys": tuple(keys)})',
     'alloc.emit({"r": request_id, "k": len(keys) + 1, "keys": tuple(keys)})', "lifecycle trace params"),
    # survivors of the exploration sample of reference.telemetry + reference.pool, seed 1256
    (pool, "BlockPool.__init__", 'self.q_ends["next"] = 0', 'self.q_ends["next"] = 1', "journal digest"),
    (telemetry, "reconcile_pool", "if state not in by_state or not 0 <= block < snap.pool_blocks:",
     "if state not in by_state or not 0 <= block is not snap.pool_blocks:", "telemetry pool"),
    (pool, "BlockPool.reserve", "self.blocks[block_id] = BlockRecord(generation=rec.generation + 1, reserved_by=txn_id)",
     "self.blocks[block_id] = BlockRecord(generation=rec.generation + 2, reserved_by=txn_id)", "pool queue"),
    (pool, "BlockPool.check_handle",
     "if handle.pool_id != self.config.pool_id or handle.cache_group_id != self.group:",
     "if handle.pool_id != self.config.pool_id and handle.cache_group_id != self.group:", "pool queue"),
    (pool, "BlockPool.decref", "if n <= 0:", "if n < 0:", "pool queue"),
    (pool, "BlockPool.__init__", "if len(set(block_ids)) != len(block_ids) or min(block_ids) < 0:",
     "if len(set(block_ids)) != len(block_ids) or min(block_ids) <= 0:", "pool queue"),
    (pool, "JDict._raw_set", "self.journal.acc = (self.journal.acc - _cell_hash(self.name, key, old)) % _MOD",
     "self.journal.acc = (self.journal.acc + _cell_hash(self.name, key, old)) % _MOD", "journal digest"),
    (pool, "JDict.__delitem__", "self.journal.writes += 1\n        self.journal.undo.append((self, key, self.data[key]))",
     "self.journal.writes += 2\n        self.journal.undo.append((self, key, self.data[key]))", "journal digest"),
    (lifecycle, "fork", "child = RequestRecord(request_generation=alloc.ended.get(child_id, 0) + 1, table_version=1,",
     "child = RequestRecord(request_generation=alloc.ended.get(child_id, 1) + 1, table_version=1,",
     "lifecycle mappings"),
    (lifecycle, "prefix_hit", "context_tokens=len(keys) * min(sizes), tables=tuple(tuple(t) for t in tables))",
     "context_tokens=len(keys) + min(sizes), tables=tuple(tuple(t) for t in tables))", "lifecycle mappings"),
    (lifecycle, "retain_read", 'alloc.scalars["next_lease"] = lease_id + 1', 'alloc.scalars["next_lease"] = lease_id + 2',
     "lifecycle mappings"),
    (lifecycle, "delayed_write", "if pool.state_of(handle.block_id) in (BlockState.FREE, BlockState.EVICTABLE):",
     "if pool.state_of(handle.block_id) in (BlockState.EVICTABLE,):", "lifecycle mappings"),
    (allocator, "Allocator.self_check", "if len(table) != ceil_div(rec.context_tokens, p):",
     "if len(table) > ceil_div(rec.context_tokens, p):", "allocator self check"),
    (allocator, "Allocator.self_check", "if sum(roles) != 1:", "if sum(roles) > 1:", "allocator self check"),
    (allocator, "Allocator.self_check", "if rec.valid_rows > pool.config.block_tokens:",
     "if rec.valid_rows >= pool.config.block_tokens:", "allocator self check"),
    (allocator, "Allocator.validate_expected",
     "if expected_table_version is not None and expected_table_version != rec.table_version:",
     "if expected_table_version is not None and expected_table_version > rec.table_version:", "allocator queries"),
    (allocator, "Allocator._new_txn_id", 'return f"t{n}"', 'return f"t{n + 1}"', "allocator queries"),
    (allocator, "Allocator.tail_rows",
     "return rec.context_tokens - (len(rec.tables[group]) - 1) * self.groups[group].block_tokens",
     "return rec.context_tokens - (len(rec.tables[group]) - 1) + self.groups[group].block_tokens", "allocator queries"),
    (allocator, "Allocator.cow_copy", "self.txns[txn_id] = attrs.evolve(txn, copied_rows=txn.copied_rows + rows,",
     "self.txns[txn_id] = attrs.evolve(txn, copied_rows=txn.copied_rows - rows,", "allocator steps"),
    (allocator, "Allocator._publish", "new_epoch = self.epoch + 1 if txn.reserved_handles else self.epoch",
     "new_epoch = self.epoch + 2 if txn.reserved_handles else self.epoch", "allocator steps"),
    (allocator, "Allocator._write_rows",
     "if offset != len(rows) or offset + len(tokens) > self.groups[group].block_tokens:",
     "if offset > len(rows) or offset + len(tokens) > self.groups[group].block_tokens:", "allocator steps"),
    (allocator, "Allocator._write_rows",
     'if txn.plan[group] == "cow" and (group not in txn.copied_groups or group in txn.written_groups):',
     'if txn.plan[group] == "cow" and (group not in txn.copied_groups and group in txn.written_groups):',
     "allocator steps"),
    (allocator, "Allocator.append_plan",
     "or self.pools[g].blocks[rec.tables[g][-1].block_id].cache_key is not None)",
     "and self.pools[g].blocks[rec.tables[g][-1].block_id].cache_key is not None)", "allocator appends"),
    (allocator, "Allocator.run_txn",
     "raise Rejected(AllocRejection.EMPTY_APPEND if not tokens else AllocRejection.WRITE_OFFSET_MISMATCH,",
     "raise Rejected(AllocRejection.EMPTY_APPEND if tokens else AllocRejection.WRITE_OFFSET_MISMATCH,",
     "allocator appends"),
    # survivors of the exploration sample of reference.allocator, seed 1255
    (allocator, "Allocator.successor_tables",
     'elif path == "cow":\n                out.append((*table[:-1], dst) if dst is not None else table)',
     'elif path is "cow":\n                out.append((*table[:-1], dst) if dst is not None else table)',
     "allocator steps"),
    (allocator, "Allocator._reserve", 'if txn.plan[group] == "cow" and txn.publication_state != "BEGUN":',
     'if txn.plan[group] is "cow" and txn.publication_state != "BEGUN":', "allocator steps"),
    (allocator, "Allocator.cow_validate", 'cow_groups = [g for g, path in enumerate(txn.plan) if path == "cow"]',
     'cow_groups = [g for g, path in enumerate(txn.plan) if path > "cow"]', "allocator steps"),
    (allocator, "Allocator.begin", "if len(plan) != len(self.groups) or any(p not in paths for p in plan):",
     "if len(plan) > len(self.groups) or any(p not in paths for p in plan):", "allocator plans"),
    (allocator, "Allocator.begin", 'paths = ("alloc",) if operation == "allocate" else ("new", "cow", "unique")',
     'paths = ("alloc",) if operation == "allocate" else ("alloc", "new", "cow", "unique")', "allocator plans"),
]


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # an `is` mutant compares with a literal on purpose
@pytest.mark.parametrize("module, name, before, after, case", MUTANTS,
                         ids=[f"{m.__name__.rsplit('.', 1)[-1]}.{n}:{i}" for i, (m, n, _b, _a, _c) in
                              enumerate(MUTANTS)])
def test_a_mutant_fails_its_accounting_case(monkeypatch, module, name, before, after, case):
    _patch_in(monkeypatch, module, name, before, after)
    result = run_case(case)
    assert result.passed is False, f"{case} passed with {after!r}"
    assert case in result.detail


def test_begin_refuses_a_plan_of_unknown_paths_and_opens_nothing():
    """A plan naming a path no step implements (or an allocate's path in an append) was accepted before and left
    a transaction that no step could finish; it is refused by name now."""
    from kvexact.reference.allocator import Allocator, AllocRejection, GroupConfig
    from kvexact.reference.rejections import rejection_of

    alloc = Allocator([GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 4, 8)], [[1, 2, 3, 4]] * 2)
    alloc.allocate("r", [1, 2])
    for operation, plan in (("append", ("alloc", "new")), ("append", ("new",)), ("allocate", ("alloc", "new")),
                            ("append", ("new", "cow", "cow")), ("append", ["new", "x"])):
        assert rejection_of(lambda o=operation, p=plan: alloc.begin(o, "r" if o == "append" else "q", p, (3,))) \
            is AllocRejection.BAD_PLAN
    assert len(alloc.txns) == 0
    alloc.begin("append", "r", ["new", "new"], (3,))  # a list is a plan too
    assert len(alloc.txns) == 1
