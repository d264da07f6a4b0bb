"""The one handle type that names a physical block everywhere (docs/design.md, "One handle type").

Invariant: a handle is valid only while ``generation`` equals the block's current generation in its
pool; two handles with equal ``block_id`` but different generations name different ownership epochs
(the ABA fence of 0x05F).
"""

from __future__ import annotations

import attrs


def _non_negative(_inst, attribute, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{attribute.name} must be a non-negative int, got {value!r}")


@attrs.frozen(order=True)
class BlockHandle:
    """``(pool_id, cache_group_id, block_id, generation)``: a generation-fenced physical block name."""

    pool_id: int = attrs.field(validator=_non_negative)
    cache_group_id: int = attrs.field(validator=_non_negative)
    block_id: int = attrs.field(validator=_non_negative)
    generation: int = attrs.field(validator=_non_negative)

    def __str__(self) -> str:
        return f"p{self.pool_id}/g{self.cache_group_id}/{self.block_id}@{self.generation}"
