"""The 0x0D worked ledger's fixture (reconstructed from the seed's totals)."""

from __future__ import annotations

from kvexact.reference.ledgers import WORKED_RECORD_SIZES, LedgerFixture, RequestView, group_row_bytes


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
