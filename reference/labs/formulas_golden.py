"""The seed's worked numbers for the formula registry (0x10A): ``GOLDEN`` holds the values the seed states
(each id's section is in its formula's location), ``DERIVED`` hand-derived cases for formulas whose section
gives no worked number (the derivation in the comment). The tests and the gate's ``formulas-golden`` check
evaluate every case; the data lives here so the gate ships it."""

from fractions import Fraction

KIB, MIB = 1024, 1024 * 1024
ROW = 64 * KIB

# id -> [(arguments, expected)], expected values from the seed text (section in the formula's location)
GOLDEN = {
    "row_bytes.group": [(dict(layers=32, kv_heads_local=4, head_dim=128, k_scalar_bytes=2, v_scalar_bytes=2), 65_536),
                        (dict(layers=24, kv_heads_local=4, head_dim=128, k_scalar_bytes=2, v_scalar_bytes=2), 48 * KIB)],
    "row_bytes.rank": [(dict(group_row_bytes=[48 * KIB, 16 * KIB]), 64 * KIB)],
    "ledger.logical_ref_bytes": [(dict(rows_tokens=[33, 25, 16], row_bytes=ROW), 74 * ROW)],
    "ledger.rect_reserved_bytes": [(dict(reserved_rows_tokens=[64, 48, 32], row_bytes=ROW), 9 * MIB)],
    "ledger.rect_slack_bytes": [(dict(reserved_bytes=9 * MIB, logical_bytes=74 * ROW), 70 * ROW)],
    "ledger.request_blocks": [(dict(rows_tokens=33, block_tokens=16), 3), (dict(rows_tokens=4096, block_tokens=16), 256)],
    "ledger.paged_ref_bytes": [(dict(ref_blocks=6, block_tokens=16, row_bytes=ROW), 6 * MIB)],
    "ledger.request_view_tail_bytes": [(dict(paged_bytes=6 * MIB, logical_bytes=74 * ROW), 22 * ROW)],
    "ledger.pool_bytes": [(dict(pool_blocks=8, block_tokens=16, row_bytes=ROW), 8 * MIB)],
    "ledger.pool_idle_bytes": [(dict(pool_blocks=8, live_blocks=3, block_tokens=16, row_bytes=ROW), 5 * MIB)],
    "ledger.unique_materialized_bytes": [(dict(valid_rows=[16, 16, 1], row_bytes=ROW), 33 * ROW)],
    "ledger.unique_capacity_bytes": [(dict(unique_blocks=3, block_tokens=16, row_bytes=ROW), 3 * MIB)],
    "ledger.unique_tail_bytes": [(dict(valid_rows=[16, 16, 1], block_tokens=16, row_bytes=ROW), 15 * ROW)],
    "ledger.dedup_payload_bytes": [(dict(logical_bytes=74 * ROW, materialized_bytes=33 * ROW), 41 * ROW)],
    "ledger.sharing_avoided_bytes": [(dict(paged_bytes=6 * MIB, unique_bytes=3 * MIB), 3 * MIB)],
    "ledger.metadata_bytes": [(dict(map_entry_bytes=4, ref_entries=6, descriptor_bytes=32, pool_blocks=8,
                                    hash_entry_bytes=24, cached_hashes=2, tail_record_bytes=2, live_requests=3,
                                    free_entry_bytes=4, free_blocks=5, fixed_bytes=128), 482)],
    "frag.external_ratio": [(dict(largest_free_bytes=2 * MIB, total_free_bytes=3 * MIB), Fraction(1, 3))],
    "frag.blocks_for_bytes": [(dict(candidate_bytes=5 * MIB // 2, block_bytes=MIB), 3)],
    "tail.expected_slots": [(dict(block_tokens=16), Fraction(15, 2))],
    "tail.max_unique_bytes": [(dict(block_tokens=16, row_bytes=ROW), 15 * ROW)],
    "tail.expected_bytes": [(dict(block_tokens=16, row_bytes=ROW), 480 * KIB)],
    "cost.request_tail_tokens": [(dict(rows_tokens=33, block_tokens=4), 3), (dict(rows_tokens=33, block_tokens=32), 31)],
    "cost.full_hit_tokens": [(dict(rows_tokens=25, block_tokens=16), 16), (dict(rows_tokens=16, block_tokens=16), 16)],
    # 0x07E: all three lengths 48; a 50-token prompt with three cached full blocks; the one-block prompt
    "cost.full_hit_tokens_capped": [(dict(semantic_tokens=48, indexed_tokens=48, prompt_tokens=48, block_tokens=16), 32),
                                    (dict(semantic_tokens=50, indexed_tokens=48, prompt_tokens=50, block_tokens=16), 48),
                                    (dict(semantic_tokens=16, indexed_tokens=16, prompt_tokens=16, block_tokens=16), 0)],
    "cost.partial_hit_tokens_capped": [(dict(rows_tokens=25), 24), (dict(rows_tokens=16), 15)],
    "cost.recompute_tokens": [(dict(prompt_tokens=48, hit_tokens=32), 16), (dict(prompt_tokens=50, hit_tokens=48), 2)],
    "cow.tail_rows": [(dict(shared_tokens=20, block_tokens=16), 4), (dict(shared_tokens=20, block_tokens=4), 0)],
    "cow.copy_traffic_bytes": [(dict(tail_rows=4, row_bytes=ROW), 512 * KIB)],
    "cow.destination_bytes": [(dict(block_tokens=16, row_bytes=ROW), MIB)],
    "cow.capacity_amplification": [(dict(block_tokens=16, tail_rows=4), 4)],
    "addr.row_major_stride": [(dict(dims=[8, 8, 16, 4, 128], axis=0), 65536), (dict(dims=[8, 8, 16, 4, 128], axis=1), 8192)],
    "addr.logical_block": [(dict(token=16, block_tokens=16), 1), (dict(token=24, block_tokens=16), 1)],
    "addr.token_offset": [(dict(token=16, block_tokens=16), 0), (dict(token=24, block_tokens=16), 8)],
    "addr.slot_id": [(dict(physical_slot=6, block_tokens=16, offset=0), 96), (dict(physical_slot=4, block_tokens=16, offset=0), 64)],
    "addr.element_offset": [(dict(coordinate=[0, 6, 0, 1, 5], strides=[65536, 8192, 512, 128, 1]), 49_285)],
    "addr.byte_address": [(dict(base_address=4_311_744_512, scalar_bytes=2, element_offset=49_285), 4_311_843_082)],
    "addr.tensor_bytes": [(dict(dims=[8, 8, 16, 4, 128], scalar_bytes=2), MIB)],
    "kernel.seq_blocks": [(dict(context_tokens=2049, kernel_block_tokens=16), 129)],
    "kernel.partitions": [(dict(context_tokens=2049, partition_tokens=512), 5)],
    "kernel.blocks_per_partition": [(dict(partition_tokens=512, kernel_block_tokens=16), 32)],
    "kernel.thread_group_size": [(dict(warp_size=32, kernel_block_tokens=8), 4), (dict(warp_size=32, kernel_block_tokens=64), 1)],
    "kernel.tokens_per_thread_group": [(dict(kernel_block_tokens=64, warp_size=32), 2)],
    "kernel.value_vector_width": [(dict(scalar_bytes=2, kernel_block_tokens=16), 8)],
    "kernel.dense_table_cells": [(dict(batch_rows=4, max_blocks=4), 16)],
    "kernel.used_table_cells": [(dict(blocks_per_request=[4, 4, 2, 1]), 11)],
    "kernel.padded_table_cells": [(dict(batch_rows=4, max_blocks=4, blocks_per_request=[4, 4, 2, 1]), 5)],
    "kernel.expanded_block_id": [(dict(allocator_block_id=7, q=2, i=1), 15), (dict(allocator_block_id=3, q=2, i=0), 6)],
    "chunk.logical_rows": [(dict(batch_rows=8, shared_tokens=64, suffix_tokens=[8] * 4 + [16] * 4), 608)],
    "chunk.unique_rows": [(dict(shared_tokens=64, suffix_tokens=[8] * 4 + [16] * 4), 160)],
    "chunk.saved_rows": [(dict(batch_rows=8, shared_tokens=64), 448)],
    "chunk.ordinary_chunks": [(dict(shared_tokens=64, suffix_tokens=[8] * 4 + [16] * 4, chunk_tokens=16), 40)],
    "chunk.shared_chunks": [(dict(shared_tokens=64, suffix_tokens=[8] * 4 + [16] * 4, chunk_tokens=16), 12)],
    "chunk.partial_states": [(dict(batch_rows=8, shared_tokens=64, chunk_tokens=16), 32)],
    "chunk.partial_state_bytes": [(dict(partial_count=1, value_width=128, output_scalar_bytes=2, state_scalar_bytes=4), 264)],
    "vmm.page_group_tokens": [(dict(page_group_bytes=2 * MIB, tensor_row_bytes=2048), 1024),
                              (dict(page_group_bytes=64, tensor_row_bytes=16), 4)],  # 0x06F P_tokens
    "vmm.page_groups": [(dict(context_tokens=1025, group_tokens=1024), 2)],
    "vmm.page_group_waste_bytes": [(dict(group_count=2, page_group_bytes=2 * MIB, context_tokens=1025,
                                         tensor_row_bytes=2048), 1023 * 2048)],
    # ---- registered by Reference IV (issue 23); values typed from the section named in the comment
    "row_bytes.uniform": [(dict(layers=32, kv_heads=8, head_dim=128, scalar_bytes=2), 131_072),  # 0x0D
                          (dict(layers=32, kv_heads=4, head_dim=128, scalar_bytes=2), 65_536)],  # 0x02A
    "ledger.ref_blocks": [(dict(rows_tokens=[33, 25, 16], block_tokens=16), 6),  # 0x0D: six table entries
                          (dict(rows_tokens=[33, 25, 16], block_tokens=4), 20)],  # 0x09B: 20 map entries at P=4
    "ledger.unique_blocks": [(dict(block_tables=[[100, 101, 102], [100, 101], [100]]), 3)],  # 0x0D
    "addr.group_layer": [(dict(model_layer=24, group_layer_start=24), 0)],  # 0x03F
    # 0x03F: A.g1.table[1] -> 2001 (entry 0 of the table is not given in the seed; 2000 stands in)
    "addr.physical_block": [(dict(table=[2000, 2001], logical_block=1), 2001)],
    "addr.byte_offset": [(dict(scalar_bytes=2, element_offset=49_285), 98_570)],  # 0x03F
    # 0x05B: after the fork A and D both map tail handle 1002 (refs=2); after D's COW publish, 2 -> 1
    "alloc.refcount": [(dict(handle=1002, request_maps=[[1002], [1002]], lease_handles=[]), 2),
                       (dict(handle=1002, request_maps=[[1002], [1003]], lease_handles=[]), 1),
                       # 0x04B counts active leases on h only: a lease on 1003 is no reference to 1002
                       (dict(handle=1002, request_maps=[[1002]], lease_handles=[1003]), 1)],
    "alloc.bundle_bytes": [(dict(group_block_tokens=[16, 16], group_row_bytes=[48 * KIB, 16 * KIB]), MIB)],  # 0x03B
    "cow.copy_bytes": [(dict(tail_rows=2, group_row_bytes=[48 * KIB, 16 * KIB]), 128 * KIB)],  # 0x05A
    "cow.traffic_bytes": [(dict(copy_bytes=128 * KIB, group_row_bytes=[48 * KIB, 16 * KIB]), 320 * KIB)],
    "cow.amplification": [(dict(traffic_bytes=320 * KIB, group_row_bytes=[48 * KIB, 16 * KIB]), 5)],
    "vmm.tensor_row_bytes": [(dict(kv_heads_local=2, head_dim=4, scalar_bytes=2), 16)],  # 0x06F
    "vmm.reserved_extent_bytes": [(dict(page_group_bytes=64, max_context_tokens=12, tensor_row_bytes=16), 192)],
    "vmm.va_bytes": [(dict(layers=2, request_slots=3, extent_bytes=192), 2304)],
    "vmm.phys_pool_bytes": [(dict(handles=12, page_group_bytes=64), 768)],
    "vmm.page_bundle_bytes": [(dict(layers=2, page_group_bytes=64), 256)],
    "vmm.request_offset": [(dict(token=8, kv_heads_local=2, head_dim=4, head=1, lane=3, scalar_bytes=2), 142)],  # 0x06C
    "vmm.virtual_address": [(dict(tensor_base=1728, request_slot=0, extent_bytes=192, offset_bytes=142), 1870)],
    "vmm.page_index": [(dict(offset_bytes=142, page_group_bytes=64), 2)],
    "vmm.page_delta": [(dict(offset_bytes=142, page_group_bytes=64), 14)],
    "prefix.runtime_chain": [(dict(runtime_tokens=32, semantic_tokens=48, indexed_tokens=48, cap_tokens=47,
                                   prompt_tokens=48), True)],  # 0x07E
    "prefix.logits_cap": [(dict(prompt_tokens=48), 47), (dict(prompt_tokens=50), 49), (dict(prompt_tokens=16), 15)],
    "prefix.new_blocks": [(dict(recompute_tokens=16, block_tokens=16), 1), (dict(recompute_tokens=2, block_tokens=16), 1)],
    "prefix.new_capacity_bytes": [(dict(new_blocks=1, block_tokens=16, row_bytes=ROW), MIB)],  # 0x07E
    "cost.request_tail_bytes": [(dict(tail_tokens=22, row_bytes=ROW), 1_441_792)],  # 0x0D: 1.375 MiB
    "cost.unique_blocks_nested": [(dict(rows_tokens=[33, 25, 16], block_tokens=16), 3)],  # 0x0D
    "cost.unique_tail_tokens": [(dict(rows_tokens=[33, 25, 16], block_tokens=4), 3),  # 0x09B
                                (dict(rows_tokens=[33, 25, 16], block_tokens=32), 31)],
    "kernel.allocator_block_tokens": [(dict(split_factor=2, kernel_block_tokens=16), 32),  # 0x0AC
                                      (dict(split_factor=4, kernel_block_tokens=16), 64)],
    # 0x0BE over 0x0BB's tree: paths S0 = C0 C1 C3, S1 = C0 C1 C4, S2 = C0 C2 C5, S3 = C0 C2 C6
    "chunk.logical_pairs": [(dict(path_rows=[[2, 1, 2], [2, 1, 1], [2, 2, 1], [2, 2, 1]]), 19)],
    "chunk.physical_kv": [(dict(chunk_rows=[2, 1, 2, 2, 1, 1, 1]), 10)],
    "chunk.saved_reads": [(dict(logical_pairs=19, physical_kv=10), 9)],
    "chunk.tree_partials": [(dict(coverages=[4, 2, 2, 1, 1, 1, 1], threshold=1), 8)],
    "telemetry.funnel_monotone": [(dict(stage_counts=[12, 11, 9, 7, 6, 6, 5, 4, 4]), True)],  # 0x0CF
    "telemetry.pool_blocks": [(dict(free=3, evictable=2, live=5, reserved_or_copying=2), 12)],
    "telemetry.ref_delta": [(dict(recorded_refs=9, derived_refs=9), 0)],
}

# Formulas whose section gives no worked number: hand-derived cases (the derivation in the comment).
DERIVED = {
    "row_scalars.group": [(dict(layers=32, kv_heads_local=4, head_dim=128), 16_384)],  # 65,536 B / (2 + 2) B
    # 0x09B staircase per request (B = 25, C = 16); the seed's sums over B + C are checked in test_reference1_ledgers
    "cost.full_hit_tokens_gen": [(dict(rows_tokens=25, block_tokens=4), 24), (dict(rows_tokens=16, block_tokens=4), 12),
                                 (dict(rows_tokens=25, block_tokens=16), 16), (dict(rows_tokens=16, block_tokens=16), 0)],
    "vmm.mapped_bytes": [(dict(active_valid_bytes=144, active_slack_bytes=48, inactive_retained_bytes=256), 448)],
    "vmm.free_handle_bytes": [(dict(phys_pool_bytes=768, mapped_bytes=512), 256)],
    "prefix.runtime_chain": [(dict(runtime_tokens=48, semantic_tokens=48, indexed_tokens=48, cap_tokens=47,
                                   prompt_tokens=48), False)],  # the all-cached shorthand breaks the cap
    "radix.edge_lengths_equal": [(dict(edge_tokens=[50, 51], edge_slots=[15, 16]), True),
                                 (dict(edge_tokens=[60], edge_slots=[20, 21]), False)],
    "radix.path_concat": [(dict(path_segments=[[50, 51], [60]]), (50, 51, 60))],
    "radix.slot_partition": [(dict(tree_slots=[15, 16], request_slots=[17], free_slots=[18, 19],
                                   pool_slots=range(15, 20)), True),
                             (dict(tree_slots=[15, 16], request_slots=[16], free_slots=[18, 19],
                                   pool_slots=range(15, 20)), False),
                             (dict(tree_slots=[15, 16], request_slots=[17], free_slots=[18],
                                   pool_slots=range(15, 20)), False)],
    "radix.lcp": [(dict(edge_tokens=[50, 51, 52], query_tokens=[50, 51, 9]), 2),
                  (dict(edge_tokens=[50], query_tokens=[]), 0)],
    "radix.split": [(dict(edge_tokens=[50, 51], edge_slots=[15, 16], at=1), (((50,), (15,)), ((51,), (16,))))],
    "radix.insert_slots": [(dict(slots_in=[30, 31, 32], matched_tokens=2), ((30, 31), (32,)))],
    # tree: root -> a(2 tokens) -> {b(1), c(3)}; leases end at b and b
    "radix.lock_count": [(dict(node="a", terminals=["b", "b"], parent={"a": None, "b": "a", "c": "a"}), 2),
                         (dict(node="c", terminals=["b", "b"], parent={"a": None, "b": "a", "c": "a"}), 0)],
    "radix.protected_tokens": [(dict(edge_lengths=[2, 1, 3], locks=[2, 2, 0]), 3)],
    "radix.evictable_tokens": [(dict(edge_lengths=[2, 1, 3], locks=[2, 2, 0]), 3)],
    "radix.leaf_ready_tokens": [(dict(edge_lengths=[2, 1, 3], locks=[0, 0, 0], child_counts=[2, 0, 0]), 4)],
    "radix.dfs_kv_lower_bound": [(dict(edge_lengths=[2, 1, 3]), 6)],
    "attn.key_partition": [(dict(parts=[[0, 1], [2], [3, 4]], keys=range(5)), True),
                           (dict(parts=[[0, 1], [1, 2], [3, 4]], keys=range(5)), False),
                           (dict(parts=[[0, 1], [3, 4]], keys=range(5)), False)],
    "attn.score": [(dict(query=[1.0, 2.0], key=[3.0, 4.0], head_dim=4), 5.5)],
    "attn.lse": [(dict(running_max=2.0, denominator=1.0), 2.0)],
    "attn.partition_output": [(dict(numerator=[2.0, 4.0], denominator=2.0), (1.0, 2.0)),
                              (dict(numerator=[1.0, 3.0], denominator=2.0), (0.5, 1.5))],
    "prompt.module_tokens": [(dict(token_ids=[7, 8, 9], position_ids=[10, 11, 12]), 3)],
    # 0x0CB: the same module text at other positions is not a hit
    "prompt.module_hit": [(dict(stored=dict(tokens=[7, 8], positions=[0, 1], schema="s1", abi="a"),
                                current=dict(tokens=[7, 8], positions=[0, 1], schema="s1", abi="a")), 1),
                          (dict(stored=dict(tokens=[7, 8], positions=[0, 1], schema="s1", abi="a"),
                                current=dict(tokens=[7, 8], positions=[4, 5], schema="s1", abi="a")), 0)],
    "cached.prefill_baseline": [(dict(history_tokens=900, user_tokens=100), 1000)],
    "cached.prefill_resume": [(dict(history_tokens=900, user_tokens=100, history_ready=True), 100),
                              (dict(history_tokens=900, user_tokens=100, history_ready=False), 1000)],
    "reuse.use_gate": [(dict(auth=True, compat=True, version=True, lease=True, mapped=True, snapshot=True), True),
                       (dict(auth=True, compat=True, version=True, lease=True, mapped=False, snapshot=True), False)],
    "telemetry.map_lag": [(dict(required_frontier=9, ready_frontier=8), 1), (dict(required_frontier=8, ready_frontier=9), 0)],
}
