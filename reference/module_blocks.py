"""Prompt Cache modules backed by pool blocks (seed 0x0CB over the allocator of 0x04).

A :class:`BackedModuleStore` keeps a :class:`~kvexact.reference.prompt_cache.ModuleStore` and, for each
populated module, the allocator request that owns its rows. Population allocates ``ceil(N_module / P)``
blocks per cache group in one transaction and publishes every full block under a module identity (so no
write can reach it); the receipt's ``physical_refs`` are the owner's block tables. Using an assembled
prompt takes one read lease per block of each imported module; finishing the use drops them. Revising a
schema or rotating a namespace drops the older generation's modules: their identities are evicted and
their owners released, so their blocks return to the free queue as soon as no use still leases them.

Invariants (checked by :meth:`BackedModuleStore.check`):

* every stored module's blocks are current and hold exactly its token ids, in order, in every group;
* refcount of a module block = 1 (its owner) + the active use leases on it;
* every allocator request is the owner of a stored module: a dropped module owns nothing, and a block of a dropped module is referenced only by
  the leases of uses that began before the drop.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

import attrs

from kvexact.reference import lifecycle
from kvexact.reference.allocator import Allocator
from kvexact.reference.handles import BlockHandle
from kvexact.reference.modules import Namespace, PromptModuleReceipt, Segment
from kvexact.reference.prompt_cache import MarkupSchema, ModuleStore
from kvexact.reference.rejections import Rejected


class ModuleBlockRejection(enum.Enum):
    """Named malformed uses of the block-backed module store."""

    USE_NOT_HELD = "no active use carries this id"
    UNBACKED_SEGMENT = "a cache segment names a module the store does not back"


@attrs.frozen
class ModuleUse:
    """An assembled prompt in execution: the leases it holds on its imported modules' blocks."""

    use_id: int
    modules: tuple[str, ...]
    lease_ids: tuple[int, ...]


def _owner(key: tuple[str, str, str], receipt: PromptModuleReceipt) -> str:
    return f"module:{key[0]}@{receipt.schema_generation}:{key[1]}:{key[2]}:ns{receipt.namespace_generation}"


class BackedModuleStore:
    """Populated modules whose states live in allocator blocks, with leases for the prompts using them."""

    def __init__(self, alloc: Allocator) -> None:
        self.alloc = alloc
        self.store = ModuleStore()
        self.owners: dict[tuple[str, str, str], str] = {}  # store key -> the allocator request owning its rows
        self.uses: dict[int, ModuleUse] = {}
        self.next_use = 1

    def populate(self, schema: MarkupSchema, names: Iterable[str], namespace: Namespace, semantic_digest: str,
                 layout_digest: str) -> tuple[str, ...]:
        """Compute and store each named module not already stored: allocate its rows, publish its full
        blocks, record the tables as ``physical_refs``. All or nothing (one transaction); the names stored."""
        wanted = [n for n in names if (schema.schema_id, n, "") not in self.store.receipts]
        store = self.store.populate(schema, wanted, namespace, semantic_digest, layout_digest)
        alloc = self.alloc

        def run() -> dict[tuple[str, str, str], PromptModuleReceipt]:
            out = {}
            for name in wanted:
                key = (schema.schema_id, name, "")
                receipt = store.receipts[key]
                owner = _owner(key, receipt)
                if receipt.token_ids:
                    rec = alloc.allocate(owner, receipt.token_ids)
                    n = len(receipt.token_ids)
                    for j in range(n // alloc.groups[0].block_tokens):  # the full blocks: immutable from now
                        lifecycle.cache_block(alloc, owner, j, f"{owner}#{j}")
                    refs: tuple[BlockHandle, ...] = tuple(h for t in rec.published_tables for h in t)
                else:
                    refs = ()
                out[key] = attrs.evolve(receipt, physical_refs=refs)
            return out

        backed = alloc.transact(run)
        self.store = ModuleStore({**self.store.receipts, **backed})
        for key, receipt in backed.items():
            if receipt.token_ids:  # a module of no tokens (a parameter slot only) has no rows to own
                self.owners[key] = _owner(key, receipt)
        return tuple(k[1] for k in backed)

    def use(self, segments: Sequence[Segment]) -> ModuleUse:
        """Lease every block of each cache segment's module (an assembled prompt starts executing)."""
        alloc = self.alloc
        cached = [s for s in segments if s.source == "cache"]
        for s in cached:
            assert s.receipt is not None
            key = (s.receipt.schema_id, s.module_id, s.receipt.module_parameters_digest)
            if self.store.receipts.get(key) != s.receipt:
                raise Rejected(ModuleBlockRejection.UNBACKED_SEGMENT, f"{s.module_id} of {s.receipt.schema_id}"
                               f"@{s.receipt.schema_generation}")

        def run() -> tuple[int, ...]:
            return tuple(lifecycle.retain_read(alloc, h) for s in cached for h in s.receipt.physical_refs)  # type: ignore[union-attr]

        use = ModuleUse(self.next_use, tuple(s.module_id for s in cached), alloc.transact(run))
        self.uses[use.use_id] = use
        self.next_use += 1
        return use

    def finish(self, use_id: int) -> None:
        """Drop a use's leases: blocks of modules dropped meanwhile return to the free queue."""
        use = self.uses.get(use_id)
        if use is None:
            raise Rejected(ModuleBlockRejection.USE_NOT_HELD, f"use {use_id}")

        def run() -> None:
            for lease_id in use.lease_ids:
                lifecycle.release_lease(self.alloc, lease_id)

        self.alloc.transact(run)
        del self.uses[use_id]

    def revise_schema(self, schema: MarkupSchema) -> tuple[str, ...]:
        """Adopt a schema revision; the older generation's modules release their blocks (named, sorted)."""
        store, dropped = self.store.revise_schema(schema)
        return self._drop(store, dropped)

    def rotate_namespace(self, namespace: Namespace) -> tuple[str, ...]:
        """Adopt a successor namespace; modules of older generations release their blocks."""
        store, dropped = self.store.rotate_namespace(namespace)
        return self._drop(store, dropped)

    def _drop(self, store: ModuleStore, dropped: tuple[str, ...]) -> tuple[str, ...]:
        gone = [k for k in self.owners if k not in store.receipts]
        alloc = self.alloc

        def run() -> None:
            for key in gone:
                owner = self.owners[key]
                rec = alloc.request(owner)
                for j in range(len(rec.tables[0])):
                    if alloc.pools[0].blocks[rec.tables[0][j].block_id].cache_key == f"{owner}#{j}":
                        lifecycle.evict(alloc, f"{owner}#{j}")
                lifecycle.release(alloc, owner)

        alloc.transact(run)
        for key in gone:
            del self.owners[key]
        self.store = store
        return dropped

    def check(self) -> None:
        """The invariants of the module docstring; raises AssertionError naming the first that fails."""
        leased: dict[BlockHandle, int] = {}
        for use in self.uses.values():
            for lease_id in use.lease_ids:
                h = self.alloc.leases[lease_id]
                leased[h] = leased.get(h, 0) + 1
        if set(self.owners) != {k for k, r in self.store.receipts.items() if r.token_ids}:
            raise AssertionError(f"owners {sorted(self.owners)} differ from the stored modules")
        orphans = set(self.alloc.requests) - set(self.owners.values())
        if orphans:
            raise AssertionError(f"dropped modules still own blocks: {sorted(orphans)}")
        owned = set()
        for key, owner in self.owners.items():
            receipt = self.store.receipts[key]
            rec = self.alloc.request(owner)
            if tuple(h for t in rec.tables for h in t) != receipt.physical_refs:
                raise AssertionError(f"{key[1]}: physical_refs are not its owner's tables")
            if self.alloc.tokens_of(owner) != receipt.token_ids:
                raise AssertionError(f"{key[1]}: its blocks hold {self.alloc.tokens_of(owner)}")
            for h in receipt.physical_refs:
                owned.add(h)
                if self.alloc.refcount(h) != 1 + leased.get(h, 0):
                    raise AssertionError(f"{key[1]}: {h} has {self.alloc.refcount(h)} references, owner + "
                                         f"{leased.get(h, 0)} leases")
        for h, n in leased.items():
            if h not in owned and self.alloc.refcount(h) != n:
                raise AssertionError(f"dropped module block {h} has {self.alloc.refcount(h)} references, {n} leases")
