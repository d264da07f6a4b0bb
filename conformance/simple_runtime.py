"""A small stand-alone block allocator written the way a runtime would, behind the adapter protocol.

It exists for two reasons: it is the worked example of wiring one's own allocator into the machines
(docs/runtime.md, "Wiring your runtime"), and it is the in-tree faulty allocator the gate must catch: with
``copy_on_write=False`` it appends in place into a shared partial tail; with ``bump_generation=False`` it
hands a freed block to a new owner under its old generation, so a delayed writer still holding the old
handle writes into another request's block (the ABA of 0x05F).

Invariants (of the correct variant): a block's refcount is the number of request tables that map it; a
block with refcount 0 is on the free list; an append never writes into a block with refcount > 1; a
block's generation advances each time it leaves the free list; a rejected operation changes nothing; a COW
copy is validated before the table maps it (``observe()`` reports the steps, the free list's order).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from kvexact.reference.adapters import AdapterConfig, OpResult


class SimpleRuntimeAllocator:
    name = "simple-runtime"
    lockstep = True

    def __init__(self, config: AdapterConfig, copy_on_write: bool = True, bump_generation: bool = True):
        self.config = config
        self.copy_on_write = copy_on_write
        self.bump_generation = bump_generation
        if not copy_on_write:
            self.name = "faulty-no-cow"
        if not bump_generation:
            self.name = "faulty-stale-generation"
        ids = list(range(1, config.blocks_per_group + 1))
        self.free = [deque(ids) for _ in range(config.num_groups)]
        self.refs = [dict.fromkeys(ids, 0) for _ in range(config.num_groups)]
        self.gens = [dict.fromkeys(ids, 0) for _ in range(config.num_groups)]
        self.tables: dict[str, list[list[int]]] = {}
        self.lengths: dict[str, int] = {}
        self.cow_log: list[tuple[str, int, int]] = []  # COW steps since the last observe()

    def block_ids(self, group: int) -> Sequence[int]:
        return list(range(1, self.config.blocks_per_group + 1))

    def _take(self, group: int) -> int:
        block = self.free[group].popleft()
        self.refs[group][block] = 1
        if self.bump_generation:
            self.gens[group][block] += 1
        return block

    def _drop(self, group: int, block: int) -> None:
        self.refs[group][block] -= 1
        if self.refs[group][block] == 0:
            self.free[group].append(block)

    def start(self, request_id: str, prompt: Sequence[int]) -> OpResult:
        if request_id in self.tables:
            return OpResult(False, "DUPLICATE_REQUEST")
        if not prompt:
            return OpResult(False, "EMPTY_APPEND")
        need = -(-len(prompt) // self.config.block_tokens)
        if any(len(f) < need for f in self.free):
            return OpResult(False, "OUT_OF_MEMORY")
        self.tables[request_id] = [[self._take(g) for _ in range(need)] for g in range(self.config.num_groups)]
        self.lengths[request_id] = len(prompt)
        return OpResult(True)

    def append(self, request_id: str, token: int) -> OpResult:
        if request_id not in self.tables:
            return self.start(request_id, [token])
        n, p = self.lengths[request_id], self.config.block_tokens
        tables = self.tables[request_id]
        boundary = n % p == 0
        shared = not boundary and any(self.refs[g][t[-1]] > 1 for g, t in enumerate(tables))
        if (boundary or (shared and self.copy_on_write)) and any(not f for f in self.free):
            return OpResult(False, "OUT_OF_MEMORY")
        copies = []
        for g, table in enumerate(tables):
            if boundary:
                table.append(self._take(g))
            elif shared and self.copy_on_write:
                old, new = table[-1], self._take(g)
                self.cow_log.append(("copy", g, new))  # the runtime copies old -> new before writing
                self.cow_log.append(("validate", g, new))  # ... checks the copy is whole
                table[-1] = new  # ... and only then publishes it in the request's table
                self.cow_log.append(("publish", g, new))
                copies.append((g, old, new))
                self._drop(g, old)
        self.lengths[request_id] = n + 1
        return OpResult(True, copies=tuple(copies))

    def fork(self, parent_id: str, child_id: str) -> OpResult:
        if parent_id == child_id:
            return OpResult(False, "FORK_ONTO_SELF")
        if parent_id not in self.tables:
            return OpResult(False, "UNKNOWN_REQUEST")
        if child_id in self.tables:
            return OpResult(False, "DUPLICATE_REQUEST")
        self.tables[child_id] = [list(t) for t in self.tables[parent_id]]
        for g, table in enumerate(self.tables[child_id]):
            for b in table:
                self.refs[g][b] += 1
        self.lengths[child_id] = self.lengths[parent_id]
        return OpResult(True)

    def truncate(self, request_id: str, keep_tokens: int) -> OpResult:
        if request_id not in self.tables:
            return OpResult(False, "UNKNOWN_REQUEST")
        if not 0 <= keep_tokens < self.lengths[request_id]:
            return OpResult(False, "TRUNCATE_NOT_SHORTER")
        keep_blocks = -(-keep_tokens // self.config.block_tokens)
        for g, table in enumerate(self.tables[request_id]):
            for b in table[keep_blocks:]:
                self._drop(g, b)
            del table[keep_blocks:]
        self.lengths[request_id] = keep_tokens
        return OpResult(True)

    def release(self, request_id: str) -> OpResult:
        if request_id not in self.tables:
            return OpResult(False, "UNKNOWN_REQUEST")
        for g, table in enumerate(self.tables.pop(request_id)):
            for b in table:
                self._drop(g, b)
        del self.lengths[request_id]
        return OpResult(True)

    def generation(self, group: int, block_id: int) -> int:
        """The block's current generation (what a handle to it carries)."""
        return self.gens[group][block_id]

    def stale_write(self, group: int, block_id: int, generation: int) -> OpResult:
        """A delayed writer presents the handle ``(group, block_id, generation)``: the generation fence
        refuses an old generation, and a free block has no owner to write for."""
        if generation != self.gens[group][block_id]:
            return OpResult(False, "STALE_BLOCK_GENERATION")
        if self.refs[group][block_id] == 0:
            return OpResult(False, "HANDLE_NOT_OWNED")
        return OpResult(True)  # the runtime writes the delayed row into the block

    def observe(self) -> dict:
        """The free list of each group (head first: taken at the head, a freed block joins the tail) and the
        COW steps since the previous call."""
        log, self.cow_log = self.cow_log, []
        return {"queues": {"free": {g: list(f) for g, f in enumerate(self.free)}}, "cow": log}

    def table(self, request_id: str, group: int) -> list[int]:
        return list(self.tables[request_id][group])

    def length(self, request_id: str) -> int:
        return self.lengths[request_id]

    def self_check(self) -> None:
        for g in range(self.config.num_groups):
            counted = dict.fromkeys(self.refs[g], 0)
            for tables in self.tables.values():
                for b in tables[g]:
                    counted[b] += 1
            if counted != self.refs[g]:
                raise AssertionError(f"group {g}: refcounts {self.refs[g]} != reachability {counted}")
            if sorted(self.free[g]) != sorted(b for b, r in self.refs[g].items() if r == 0):
                raise AssertionError(f"group {g}: free list {list(self.free[g])} != zero-ref blocks")


def simple_runtime(config: AdapterConfig) -> SimpleRuntimeAllocator:
    """``--adapter kvexact.conformance.simple_runtime:simple_runtime`` (a correct allocator)."""
    return SimpleRuntimeAllocator(config)


def faulty_no_cow(config: AdapterConfig) -> SimpleRuntimeAllocator:
    """``--adapter kvexact.conformance.simple_runtime:faulty_no_cow``: appends into shared tails (a bug)."""
    return SimpleRuntimeAllocator(config, copy_on_write=False)


def faulty_stale_generation(config: AdapterConfig) -> SimpleRuntimeAllocator:
    """``--adapter kvexact.conformance.simple_runtime:faulty_stale_generation``: reuses a freed block
    without advancing its generation, so a delayed writer's old handle still passes the fence (a bug)."""
    return SimpleRuntimeAllocator(config, bump_generation=False)
