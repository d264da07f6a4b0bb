"""The ChunkAttention machine: chunk trees read off the radix index, attended by the chunk-first kernel.

Sequences are inserted into the normative radix index (``reference/radix.py``, page size 1) over a
one-token-per-slot K/V pool (slots freed by eviction or as duplicates are poisoned with NaN). After every
step a chunk tree is built from the index: each chosen node's root path is one sequence, every tree node on
those paths is one chunk (its slots are its blocks), chunks in depth-first order, sequences in the order
that makes every chunk cover a contiguous range of them. ``chunked_shared_attention`` over that tree, at a
drawn sharing threshold, must agree with float64 attention over each sequence's tokens (built from the
tokens, never read back from the pool) to :data:`TOLERANCE`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvexact.conformance.machines import ConformanceFailure, counted_rule, not_applicable

POOL_SLOTS = 24
FIRST_SLOT = 1
TOLERANCE = 2e-4
MAX_SEQUENCES = 4


def chunk_tree(state: Any, chosen: list[int]) -> tuple[list[Any], list[int]]:
    """(chunks in depth-first order, the chosen nodes in sequence order) for the root paths of ``chosen``:
    a chunk per tree node on those paths, covering the sequences whose path passes through it."""
    from kvexact.kernels.shared import Chunk

    paths = sorted((state.path(n), n) for n in chosen)  # lexicographic node paths: depth-first order
    order = [n for _, n in paths]
    nodes: list[int] = []
    for path, _ in paths:
        nodes.extend(n for n in path if n not in nodes)
    chunks = []
    for n in sorted(nodes, key=lambda n: state.path(n)):
        covered = [i for i, (path, _) in enumerate(paths) if n in path]
        slots = state.nodes[n].slot_ids
        chunks.append(Chunk(tuple(s - FIRST_SLOT for s in slots), len(slots), covered[0], covered[-1] + 1))
    return chunks, order


class ChunkAttentionMachine(RuleBasedStateMachine):
    """Insert and evict on the radix index; the chunk-first kernel checked on a chunk tree after each step."""

    stats: ClassVar[dict[str, int]] = {}
    check_kernels: ClassVar[bool] = True  # False: the chunk trees are planned and checked, no kernel runs

    def __init__(self) -> None:
        from kvexact.conformance.mirror import DevicePool
        from kvexact.reference import radix

        super().__init__()
        self.radix = radix
        self.state = radix.RadixState.empty(POOL_SLOTS, first_slot_id=FIRST_SLOT)
        self.device = DevicePool([range(FIRST_SLOT, FIRST_SLOT + POOL_SLOTS)], block_tokens=1) \
            if self.check_kernels else None
        self.pick = 0
        self.threshold = 1
        self.next_id = 0
        self._count("examples")

    def _count(self, name: str, n: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    def _freed(self, before: frozenset[int]) -> None:
        newly = sorted(set(self.state.free_slot_ids) - before)
        if newly and self.device is not None:
            self.device.poison(0, newly)

    @rule(tokens=st.lists(st.integers(1, 3), min_size=1, max_size=7))
    @counted_rule
    def insert(self, tokens: list[int]) -> None:
        """Insert a sequence: evict unlocked leaves if the pool is short, reserve, write, insert, release
        the duplicate slots of the part the tree already held."""
        radix = self.radix
        before = self.state.free_slot_ids
        if len(before) < len(tokens):
            self.state, _ = radix.evict(self.state, len(tokens) - len(before))
        if len(self.state.free_slot_ids) < len(tokens):
            self._freed(before)
            return not_applicable(self, "insert:pool_short")
        self.next_id += 1
        rid = f"s{self.next_id}"
        slots = sorted(self.state.free_slot_ids)[: len(tokens)]
        self.state, _ = radix.reserve(self.state, rid, slots)
        for i, slot in enumerate(slots):
            if self.device is not None:
                self.device.write(0, slot, 0, tokens[: i + 1])
        self.state, receipt = radix.insert(self.state, tokens, slots, rid)
        if rid in self.state.private_slot_ids:
            self.state, _ = radix.release(self.state, rid)
        self._freed(before)
        self._count("shared_prefix_tokens", receipt.prefix_tokens)

    @precondition(lambda self: len(self.state.nodes) > 1)
    @rule(tokens=st.integers(1, 6))
    @counted_rule
    def evict(self, tokens: int) -> None:
        """Evict unlocked leaves (least recently used first) until ``tokens`` are freed."""
        before = self.state.free_slot_ids
        self.state, _ = self.radix.evict(self.state, tokens)
        self._freed(before)

    @precondition(lambda self: len(self.state.nodes) > 1)
    @rule(pick=st.integers(0, 2 ** 16), threshold=st.integers(0, 2))
    @counted_rule
    def choose(self, pick: int, threshold: int) -> None:
        """Choose which nodes' paths the checks attend (bits of ``pick``) and the sharing threshold."""
        self.pick, self.threshold = pick, threshold

    @precondition(lambda self: len(self.state.nodes) > 1)
    @invariant()
    def chunk_attention_matches_float64(self) -> None:
        """``chunked_shared_attention`` over the chunk tree of the chosen paths equals float64 attention;
        without kernels, the tree's plan covers every sequence's slots exactly, in order."""
        import torch

        from kvexact.conformance.mirror import expected_attention, max_error, query_row
        from kvexact.kernels.shared import chunked_shared_attention, plan_chunks

        self._count("steps")
        nodes = sorted(n for n in self.state.nodes if n != self.radix.ROOT)
        chosen = [n for i, n in enumerate(nodes) if self.pick >> i & 1][:MAX_SEQUENCES] or nodes[-1:]
        chunks, order = chunk_tree(self.state, chosen)
        tokens = [self.state.path_tokens(n) for n in order]
        plan = plan_chunks(chunks, len(order), 1, POOL_SLOTS, self.threshold)
        for i, n in enumerate(order):
            covered = [c for c, ch in enumerate(chunks) if ch.seq_begin <= i < ch.seq_end]
            slots = tuple(b + FIRST_SLOT for c in covered for b in chunks[c].block_ids)
            if slots != self.state.path_slots(n) or tuple(plan.private_chunks[i]) != tuple(
                    c for c in covered if c not in plan.shared_chunks):
                raise ConformanceFailure(f"the chunk tree of sequence {tokens[i]} covers slots {slots}, its path "
                                         f"holds {self.state.path_slots(n)}")
        if self.device is None:
            return
        q = torch.stack([query_row(f"n{n}", len(t)) for n, t in zip(order, tokens, strict=True)])
        out = chunked_shared_attention(q, self.device.k[0], self.device.v[0], chunks, threshold=self.threshold)
        for i, t in enumerate(tokens):
            err = max_error(out[i], expected_attention(q[i], t))
            if not math.isfinite(err) or err > TOLERANCE:
                raise ConformanceFailure(f"chunk attention of sequence {t} differs from float64 (max error {err:.3g}); "
                                         f"chunks {chunks}, threshold {self.threshold}")
        self._count("attention_checks")
        self._count(f"depth={max(len(self.state.path(n)) for n in order)}")
        if any(c.seq_end - c.seq_begin > self.threshold for c in chunks):
            self._count("chunk_first_checks")

    @classmethod
    def rule_names(cls) -> list[str]:
        return ["choose", "evict", "insert"]
