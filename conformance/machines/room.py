"""Room for an allocation, on a runtime whose every unmapped block is free for it.

An adapter whose ``observe()`` reports ``usage`` promises (and the machines check after every step) that its
used share is the share of blocks live tables map; the rest is free, cached or not (vLLM's free queue holds
cached blocks and evicts them on demand). Such a runtime may refuse a start or an append for lack of blocks
only when the operation needs more blocks than are unmapped. Off lockstep the refusal is not compared with
the reference's answer, so this is the check that holds it to its own memory.

Need is bounded from above without knowing which blocks a lookup would hit: every block position of a start
needs a free block, except a position of the prompt's cached chain whose hit block must be mapped already.
That is known only when every block that ever held the position's token prefix as a full block of a live
table is mapped now (:class:`BlockPrefixes`): a cache hits only on a block that held the prefix full, and a
block handed out again holds something else. An append needs a block at a block boundary, or to copy a last
block another live request maps.

Invariant: :func:`start_need` and :func:`append_need` never understate what a correct runtime needs, so a
refusal with ``need <= free`` in every group is a refusal with room.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

MEMORY_REFUSALS = frozenset({"OUT_OF_MEMORY", "INSUFFICIENT_BLOCKS"})  # the names of a refusal for lack of blocks


class BlockPrefixes:
    """Per group, the token prefix each block last held as a full block of a live table."""

    def __init__(self, num_groups: int):
        self.last_full: list[dict[int, tuple[int, ...]]] = [{} for _ in range(num_groups)]

    def note(self, tables: Mapping[str, Sequence[Sequence[int]]], histories: Mapping[str, Sequence[int]],
             block_tokens: int) -> None:
        """Record, for every live request, the prefix each of its full blocks holds now."""
        for rid, per_group in tables.items():
            tokens = tuple(histories[rid])
            for g, table in enumerate(per_group):
                for j, block in enumerate(table[: len(tokens) // block_tokens]):
                    self.last_full[g][block] = tokens[: (j + 1) * block_tokens]

    def surely_mapped(self, group: int, prefix: tuple[int, ...], mapped: set[int]) -> bool:
        """Every block that may still hold ``prefix`` as a cached full block is mapped by a live table."""
        holders = [b for b, held in self.last_full[group].items() if held == prefix]
        return bool(holders) and all(b in mapped for b in holders)


def start_need(prompt: Sequence[int], block_tokens: int, chain_blocks: int, group: int, prefixes: BlockPrefixes,
               mapped: set[int]) -> int:
    """At most the free blocks a start of ``prompt`` takes in ``group``: one per block position, less the positions
    of its first ``chain_blocks`` cached blocks whose hit block is surely mapped already."""
    positions = -(-len(prompt) // block_tokens)
    tokens = tuple(prompt)
    held = sum(1 for j in range(min(chain_blocks, positions))
               if prefixes.surely_mapped(group, tokens[: (j + 1) * block_tokens], mapped))
    return positions - held


def append_need(length: int, block_tokens: int, last_block_shared: bool) -> int:
    """At most the free blocks one appended token takes: a new block at a boundary, or a copy of a shared tail."""
    return 1 if length % block_tokens == 0 or last_block_shared else 0
