"""The 0x0D worked ledger's fixture (reconstructed from the seed's totals)."""

from __future__ import annotations

from collections.abc import Sequence

from kvexact.reference.ledgers import (
    KIB,
    BlockSizeCost,
    LedgerFixture,
    MetadataRecordSizes,
    RequestView,
    block_size_cost,
    group_row_bytes,
)

WORKED_RECORD_SIZES = MetadataRecordSizes(map_entry_bytes=4, descriptor_bytes=32, hash_entry_bytes=24,
                                          tail_record_bytes=2, free_entry_bytes=4, fixed_bytes=128)
"""0x0D's metadata record sizes (reconstructed: they reproduce its 482 bytes at P=16)."""


def nested_prefix_cost(block_tokens: int, lengths_tokens: Sequence[int] = (33, 25, 16),
                       pool_slots: int = 128) -> BlockSizeCost:
    """0x09B's nested exact-prefix fixture (64 KiB rows, 0x0D's record sizes) at block size ``block_tokens``."""
    return block_size_cost(block_tokens, lengths_tokens, 64 * KIB, pool_slots, WORKED_RECORD_SIZES)


def worked_layout_row_bytes() -> int:
    """0x02A / 0x0D: 32 layers, 4 local K/V heads, width 128, FP16 K and V -> 65,536 bytes."""
    return group_row_bytes(layers=32, kv_heads_local=4, head_dim=128, k_scalar_bytes=2, v_scalar_bytes=2)


def worked_fixture() -> LedgerFixture:
    """0x0D: A (33 rows, T_max 64) -> {100,101,102}; B (25, 48) -> {100,101}; C (16, 32) -> {100}.

    Reconstruction (the seed gives the totals): an 8-block pool 100..107, blocks 100 and 101 full and
    hashed, 102 holding one row, free queue 103..107.
    """
    return LedgerFixture(
        row_bytes=worked_layout_row_bytes(), block_tokens=16,
        requests=(RequestView("A", 33, 64, (100, 101, 102)), RequestView("B", 25, 48, (100, 101)),
                  RequestView("C", 16, 32, (100,))),
        valid_rows_by_block=((100, 16), (101, 16), (102, 1)),
        pool_block_ids=tuple(range(100, 108)), cached_hash_block_ids=(100, 101),
        free_queue_block_ids=tuple(range(103, 108)), record_sizes=WORKED_RECORD_SIZES,
    )
