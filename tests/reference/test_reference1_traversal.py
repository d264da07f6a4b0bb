"""0x0A, 0x0AB, 0x0AC, 0x0BI, 0x0BJ: traversal, chunk and page-group ledgers."""

import pytest

from kvexact.reference.blockmap import BlockMapRejection
from kvexact.reference.labs.translate import loop4_snapshot
from kvexact.reference.ledgers import KIB, MIB
from kvexact.reference.rejections import Rejected
from kvexact.reference.traversal import (
    PAD,
    chunk_ledger,
    decode_traversal,
    dense_staging_table,
    geometry_table,
    kernel_table,
    page_group_staircase,
    ragged_table_ledger,
)


def test_0x0AA_geometry_for_T_2049():
    rows = {g.kernel_block_tokens: g for g in geometry_table()}
    assert all(g.partitions == 5 for g in rows.values())  # five long-context partitions in every row
    expected = {  # P: (seq blocks, blocks/partition, thread group, tokens/thread group, vec width)
        8: (257, 64, 4, 1, 8), 16: (129, 32, 2, 1, 8), 32: (65, 16, 1, 1, 8),
        64: (33, 8, 1, 2, 8), 128: (17, 4, 1, 4, 8),
    }
    for p, (n, bpp, tg, tpt, vec) in expected.items():
        g = rows[p]
        assert (g.seq_blocks, g.blocks_per_partition, g.thread_group_size, g.tokens_per_thread_group,
                g.value_vector_width) == (n, bpp, tg, tpt, vec)
    assert [p for p, g in rows.items() if g.instantiated_by_pinned_v1] == [8, 16, 32]


def test_0x0AB_ragged_cells():
    led = ragged_table_ledger([64, 63, 17, 1], 16)
    assert led.blocks_per_request == (4, 4, 2, 1)
    assert (led.dense_cells, led.used_cells, led.padded_cells) == (16, 11, 5)
    assert (led.dense_bytes, led.used_bytes, led.padded_bytes) == (64, 44, 20)
    table = dense_staging_table([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10], [11]])
    assert sum(row.count(PAD) for row in table) == led.padded_cells


def test_0x0AC_expansion():
    assert kernel_table([3, 7], 32, 16) == [6, 7, 14, 15]
    assert kernel_table([3], 64, 16) == [12, 13, 14, 15]
    with pytest.raises(Rejected) as info:
        kernel_table([3], 16, 32)
    assert info.value.reason is BlockMapRejection.KERNEL_BLOCK_DOES_NOT_DIVIDE


def test_0x0A_decode_traversal_reads_only_visible_materialized_rows():
    steps = decode_traversal(loop4_snapshot(), "B", 1)
    assert [(st.handle.block_id, st.rows_read) for st in steps] == [(2000, 16), (2001, 9)]
    steps = decode_traversal(loop4_snapshot(), "A", 0)
    assert [(st.handle.block_id, st.physical_slot, st.rows_read) for st in steps] == [(1000, 2, 16), (1001, 5, 16),
                                                                                        (1002, 7, 1)]
    assert decode_traversal(loop4_snapshot(), "C", 1)[-1].rows_read == 16  # 16 % 16 or 16


def test_0x0BI_chunk_ledger():
    for pc in (4, 8, 16, 32, 64, 128):
        c = chunk_ledger(pc)
        assert (c.logical_rows, c.unique_rows, c.saved_rows) == (608, 160, 448)
        assert (c.logical_bytes, c.unique_bytes, c.saved_bytes) == (304 * KIB, 80 * KIB, 224 * KIB)
    c16, c64 = chunk_ledger(16), chunk_ledger(64)
    assert (c16.ordinary_chunks, c16.shared_chunks, c16.partial_states) == (40, 12, 32)
    assert (c64.ordinary_chunks, c64.shared_chunks, c64.partial_states) == (16, 9, 8)
    assert c16.partial_state_bytes == 32 * (128 * 2 + 2 * 4)
    assert c64.partial_states < c16.partial_states  # larger chunks: fewer partial rows, same savings


def test_0x0BJ_staircase():
    rows = {(r.page_group_bytes, r.context_tokens): r for r in page_group_staircase()}
    assert rows[(64 * KIB, 1024)].tokens_per_group == 32 and rows[(2 * MIB, 1024)].tokens_per_group == 1024
    assert all(r.waste_bytes == 0 for (g, t), r in rows.items() if t == 1024)  # on every boundary
    assert rows[(64 * KIB, 1025)].groups == 33 and rows[(64 * KIB, 1025)].waste_bytes == 31 * 2048
    assert rows[(2 * MIB, 1025)].groups == 2 and rows[(2 * MIB, 1025)].waste_bytes == 1023 * 2048
    assert all(r.user_block_table_lookups == 0 for r in rows.values())


def test_0x0BJ_tp_changes_tokens_per_page_group():
    from kvexact.reference.traversal import page_group_row

    tp1 = page_group_row(64 * KIB, 1025, tensor_row_bytes=2048)
    tp2 = page_group_row(64 * KIB, 1025, tensor_row_bytes=1024)  # half the local K/V heads per rank
    assert (tp1.tokens_per_group, tp2.tokens_per_group) == (32, 64)
    assert (tp1.groups, tp2.groups) == (33, 17)


def test_kernel_dispatch_selected_fallback_rejected():
    from kvexact.reference.traversal import dispatch_kernel_block

    # 0x0AC with a backend that instantiates only P_k = 16: P_a = 32 and 64 split (q = 2, 4); 8 cannot
    d32, d64 = dispatch_kernel_block(32, instantiated=(16,)), dispatch_kernel_block(64, instantiated=(16,))
    assert (d32.outcome, d32.kernel_block_tokens, d64.kernel_block_tokens) == ("fallback", 16, 16)
    small = dispatch_kernel_block(8, instantiated=(16,))
    assert (small.outcome, small.reason, small.kernel_block_tokens) == ("rejected", "unsupported_kernel_block", None)
    # 0x0AA: the pinned V1 launcher instantiates 8, 16 and 32
    assert dispatch_kernel_block(16).outcome == "selected"
    assert dispatch_kernel_block(128).kernel_block_tokens == 32
