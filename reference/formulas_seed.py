"""The seed's formulas (0x10A): the catalog of every display equation, and the formulas no mechanism module owns.

:data:`CATALOG` lists each display equation of Loops 3-11 (``$$...$$`` in the seed, 0x02A-0x0CF) with its
section and line, and either the registry ids that implement it or why it adds no formula (a worked
instance, a restatement of a registered quantity, or a record declaration). :data:`PROSE` lists the
registered formulas the seed states only in prose or renderer-safe code blocks.

Invariant: every id named in :data:`CATALOG` or :data:`PROSE` is registered, and every registered id is
named by one of them (``tests/reference/test_reference4_formulas.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from kvexact.reference.formulas import formula
from kvexact.reference.keys import chain_hash, sha256_block_hash

# ---------------------------------------------------------------- 0x02A row


@formula("row_scalars.group", units="scalars/token/local rank", convention="key scalars of one token in group g "
         "(the value scalars are as many)", location="0x02A")
def row_scalars_group(ops, layers, kv_heads_local, head_dim):
    return layers * kv_heads_local * head_dim


@formula("row_bytes.uniform", units="bytes/token", convention="K and V share one scalar width b: L 2 H d b",
         location="0x02A, 0x0D")
def row_bytes_uniform(ops, layers, kv_heads, head_dim, scalar_bytes):
    return layers * 2 * kv_heads * head_dim * scalar_bytes


# ---------------------------------------------------------------- 0x02C/0x02D reference and unique blocks


@formula("ledger.ref_blocks", units="block-table references", convention="N_ref = sum_r ceil(T_r / P); every "
         "request view counted, shared ids included", location="0x02C, 0x02D")
def ref_blocks(ops, rows_tokens, block_tokens):
    return ops.total(ops.ceildiv(t, block_tokens) for t in rows_tokens)


@formula("ledger.unique_blocks", units="blocks", convention="N_unique = |union of the request tables' block ids|",
         location="0x02D", arithmetic=False)
def unique_blocks(ops, block_tables):
    return len(set().union(*map(set, block_tables)))


# ---------------------------------------------------------------- 0x03 addressing


@formula("addr.group_layer", units="layers", convention="l_g = l - L_g,start; the layer lies in group g",
         location="0x03C")
def group_layer(ops, model_layer, group_layer_start):
    return model_layer - group_layer_start


@formula("addr.physical_block", units="block id", convention="p_g = B_r,g^(v)[j_g]; j_g inside the table",
         location="0x03C", arithmetic=False)
def physical_block(ops, table, logical_block):
    if not 0 <= logical_block < len(table):
        raise ValueError(f"logical block {logical_block} outside a table of {len(table)} entries")
    return table[logical_block]


@formula("addr.byte_offset", units="bytes", convention="O_g = b_g E_g from the tensor base", location="0x03E")
def byte_offset(ops, scalar_bytes, element_offset):
    return scalar_bytes * element_offset


# ---------------------------------------------------------------- 0x04 allocator


@formula("alloc.refcount", units="references", convention="R(h) = committed request-map entries equal to h + "
         "active leases on h; a cache-index entry is a weak reference", location="0x04B", arithmetic=False)
def refcount(ops, handle, request_maps, lease_handles):
    return sum(1 for q in request_maps for x in q if x == handle) + sum(1 for x in lease_handles if x == handle)


@formula("alloc.bundle_bytes", units="bytes/block bundle", convention="B_bundle = sum_g P_g B_row,g over the "
         "cache groups", location="0x04E, 0x03B")
def bundle_bytes(ops, group_block_tokens, group_row_bytes):
    return ops.total(p * b for p, b in zip(group_block_tokens, group_row_bytes, strict=True))


# ---------------------------------------------------------------- 0x05A COW


@formula("cow.copy_bytes", units="bytes", convention="B_copy = r sum_g B_row,g: the valid shared-tail rows",
         location="0x05A")
def cow_copy_bytes(ops, tail_rows, group_row_bytes):
    return tail_rows * ops.total(group_row_bytes)


@formula("cow.traffic_bytes", units="bytes", convention="copy read + copy write + one appended row",
         location="0x05A")
def cow_traffic_bytes(ops, copy_bytes, group_row_bytes):
    return 2 * copy_bytes + ops.total(group_row_bytes)


@formula("cow.amplification", units="dimensionless", convention="COW traffic over one ordinary row append "
         "(= 2 r + 1)", location="0x05A")
def cow_amplification(ops, traffic_bytes, group_row_bytes):
    return ops.ratio(traffic_bytes, ops.total(group_row_bytes))


# ---------------------------------------------------------------- 0x06 vAttention


@formula("vmm.tensor_row_bytes", units="bytes/token/tensor", convention="one token row of one K or V tensor "
         "at one layer: H_kv d_h b", location="0x06A, 0x0BJ")
def tensor_row_bytes(ops, kv_heads_local, head_dim, scalar_bytes):
    return kv_heads_local * head_dim * scalar_bytes


@formula("vmm.reserved_extent_bytes", units="bytes/request/tensor", convention="R = G ceil(T_max B_tensor,row "
         "/ G): virtual, page-granular", location="0x06A")
def reserved_extent_bytes(ops, page_group_bytes, max_context_tokens, tensor_row_bytes):
    return page_group_bytes * ops.ceildiv(max_context_tokens * tensor_row_bytes, page_group_bytes)


@formula("vmm.va_bytes", units="bytes of address space", convention="M_VA = 2 L B R; reserved, never resident",
         location="0x06A")
def va_bytes(ops, layers, request_slots, extent_bytes):
    return 2 * layers * request_slots * extent_bytes


@formula("vmm.phys_pool_bytes", units="bytes", convention="M_phys,pool = N_handle G: created handles",
         location="0x06A")
def phys_pool_bytes(ops, handles, page_group_bytes):
    return handles * page_group_bytes


@formula("vmm.page_bundle_bytes", units="bytes/request page", convention="one request page across the 2L "
         "per-layer K/V tensors", location="0x06A")
def page_bundle_bytes(ops, layers, page_group_bytes):
    return 2 * layers * page_group_bytes


@formula("vmm.mapped_bytes", units="bytes", convention="mapped = active valid + active slack + inactive retained",
         location="0x06A")
def mapped_bytes(ops, active_valid_bytes, active_slack_bytes, inactive_retained_bytes):
    return active_valid_bytes + active_slack_bytes + inactive_retained_bytes


@formula("vmm.free_handle_bytes", units="bytes", convention="M_phys,pool = M_mapped + M_free-handles",
         location="0x06A")
def free_handle_bytes(ops, phys_pool_bytes, mapped_bytes):
    return phys_pool_bytes - mapped_bytes


@formula("vmm.request_offset", units="bytes", convention="u = (t H_kv d_h + h d_h + d) b inside the request "
         "subrange", location="0x06C")
def request_offset(ops, token, kv_heads_local, head_dim, head, lane, scalar_bytes):
    return (token * kv_heads_local * head_dim + head * head_dim + lane) * scalar_bytes


@formula("vmm.virtual_address", units="bytes", convention="A_VA = base(X, l) + r R + u", location="0x06C")
def virtual_address(ops, tensor_base, request_slot, extent_bytes, offset_bytes):
    return tensor_base + request_slot * extent_bytes + offset_bytes


@formula("vmm.page_index", units="pages", convention="q = floor(u / G): the page that must be mapped",
         location="0x06C")
def page_index(ops, offset_bytes, page_group_bytes):
    return ops.floordiv(offset_bytes, page_group_bytes)


@formula("vmm.page_delta", units="bytes", convention="delta = u mod G inside the mapped handle", location="0x06C")
def page_delta(ops, offset_bytes, page_group_bytes):
    return ops.mod(offset_bytes, page_group_bytes)


# ---------------------------------------------------------------- 0x07 prefix reuse


@formula("prefix.runtime_chain", units="boolean", convention="0 <= S_runtime <= min(S_sem, S_indexed, S_cap) "
         "<= S_prompt", location="0x07A")
def runtime_chain(ops, runtime_tokens, semantic_tokens, indexed_tokens, cap_tokens, prompt_tokens):
    bound = ops.minimum(semantic_tokens, indexed_tokens, cap_tokens)
    return ops.all_of(0 <= runtime_tokens, runtime_tokens <= bound, bound <= prompt_tokens)


@formula("prefix.logits_cap", units="tokens", convention="S_cap = S_prompt - 1 for a logits-producing request "
         "(S_prompt >= 1)", location="0x07A")
def logits_cap(ops, prompt_tokens):
    return prompt_tokens - 1


@formula("prefix.block_hash", units="digest", convention="h_0 = H(bottom, X_0, E_0), h_i = H(h_{i-1}, X_i, E_i); "
         "parent None is bottom", location="0x07B", arithmetic=False)
def block_hash(ops, parent, block_tokens, extra_keys):
    return chain_hash(parent, block_tokens, extra_keys)


@formula("prefix.tail_hash", units="digest", convention="h_tail = H(h_parent, X_tail[0:v], v, policy, E_tail)",
         location="0x07D", arithmetic=False)
def tail_hash(ops, parent, tail_tokens, valid_rows, policy_id, extra_keys):
    return sha256_block_hash(("partial", parent, tuple(tail_tokens[:valid_rows]), valid_rows, policy_id, extra_keys))


@formula("prefix.new_blocks", units="blocks", convention="N_new = ceil(S_recompute / P), no writable tail owned",
         location="0x07G")
def new_blocks(ops, recompute_tokens, block_tokens):
    return ops.ceildiv(recompute_tokens, block_tokens)


@formula("prefix.new_capacity_bytes", units="bytes", convention="M_new,capacity = N_new P B_row",
         location="0x07G")
def new_capacity_bytes(ops, new_blocks, block_tokens, row_bytes):
    return new_blocks * block_tokens * row_bytes


# ---------------------------------------------------------------- 0x08 radix tree


@formula("radix.edge_lengths_equal", units="boolean", convention="|X_v| = |S_v| = m: an edge owns equal token "
         "and slot segments", location="0x08A", arithmetic=False)
def edge_lengths_equal(ops, edge_tokens, edge_slots):
    return len(edge_tokens) == len(edge_slots)


@formula("radix.path_concat", units="tokens or slots", convention="X(u), S(u): concatenation of the edge "
         "segments on path(root, u), root first", location="0x08A", arithmetic=False)
def path_concat(ops, path_segments):
    return tuple(x for seg in path_segments for x in seg)


@formula("radix.slot_partition", units="boolean", convention="tree, request-private and free slots are pairwise "
         "disjoint and cover the pool", location="0x08A", arithmetic=False)
def slot_partition(ops, tree_slots, request_slots, free_slots, pool_slots):
    t, r, f = set(tree_slots), set(request_slots), set(free_slots)
    return not (t & r or t & f or r & f) and (t | r | f) == set(pool_slots)


@formula("radix.lcp", units="tokens", convention="lcp(X_v, Q) = max j with X_v[0:j] = Q[0:j]", location="0x08B",
         arithmetic=False)
def lcp(ops, edge_tokens, query_tokens):
    j = 0
    while j < min(len(edge_tokens), len(query_tokens)) and edge_tokens[j] == query_tokens[j]:
        j += 1
    return j


@formula("radix.split", units="(tokens, slots) pairs", convention="split at m: shared = (X[0:m], S[0:m]), "
         "old child = (X[m:], S[m:])", location="0x08B", arithmetic=False)
def split(ops, edge_tokens, edge_slots, at):
    return (tuple(edge_tokens[:at]), tuple(edge_slots[:at])), (tuple(edge_tokens[at:]), tuple(edge_slots[at:]))


@formula("radix.insert_slots", units="(slots, slots)", convention="insert with p matched: S_duplicate = "
         "S_in[0:p] (released), S_new = S_in[p:] (published)", location="0x08C", arithmetic=False)
def insert_slots(ops, slots_in, matched_tokens):
    return tuple(slots_in[:matched_tokens]), tuple(slots_in[matched_tokens:])


@formula("radix.lock_count", units="references", convention="lock(v) = number of active leases whose terminal "
         "node's root path contains v", location="0x08D", arithmetic=False)
def lock_count(ops, node, terminals, parent):
    def on_path(t: Any) -> bool:
        while t is not None:
            if t == node:
                return True
            t = parent[t]
        return False

    return sum(1 for t in terminals if on_path(t))


@formula("radix.protected_tokens", units="tokens", convention="sum over non-root nodes of |X_v| 1[lock(v) > 0]",
         location="0x08D")
def protected_tokens(ops, edge_lengths, locks):
    return ops.total(n * ops.indicator(k > 0) for n, k in zip(edge_lengths, locks, strict=True))


@formula("radix.evictable_tokens", units="tokens", convention="sum over non-root nodes of |X_v| 1[lock(v) = 0]",
         location="0x08D")
def evictable_tokens(ops, edge_lengths, locks):
    return ops.total(n * ops.indicator(k == 0) for n, k in zip(edge_lengths, locks, strict=True))


@formula("radix.leaf_ready_tokens", units="tokens", convention="unlocked childless nodes only: reclaimable now",
         location="0x08D")
def leaf_ready_tokens(ops, edge_lengths, locks, child_counts):
    return ops.total(n * ops.indicator(ops.all_of(k == 0, c == 0))
                     for n, k, c in zip(edge_lengths, locks, child_counts, strict=True))


@formula("radix.dfs_kv_lower_bound", units="tokens", convention="C_KV = sum of edge lengths: an offline DFS "
         "computes every edge once", location="0x08E")
def dfs_kv_lower_bound(ops, edge_lengths):
    return ops.total(edge_lengths)


# ---------------------------------------------------------------- 0x09B / 0x0AC granularity


@formula("cost.request_tail_bytes", units="bytes", convention="M_r,tail = W_r,tail B_row (request view)",
         location="0x09B")
def request_tail_bytes(ops, tail_tokens, row_bytes):
    return tail_tokens * row_bytes


@formula("cost.unique_blocks_nested", units="blocks", convention="nested exact prefixes: only the longest path "
         "is materialized, ceil(max T_r / P_a)", location="0x09B")
def unique_blocks_nested(ops, rows_tokens, block_tokens):
    return ops.ceildiv(ops.maximum(*rows_tokens), block_tokens)


@formula("cost.unique_tail_tokens", units="token slots", convention="W_unique = N_unique P_a - max T_r",
         location="0x09B")
def unique_tail_tokens(ops, rows_tokens, block_tokens):
    longest = ops.maximum(*rows_tokens)
    return ops.ceildiv(longest, block_tokens) * block_tokens - longest


@formula("kernel.allocator_block_tokens", units="tokens/allocator block", convention="P_a = q P_k, q >= 1: the "
         "kernel block divides the allocator block", location="0x0AC")
def allocator_block_tokens(ops, split_factor, kernel_block_tokens):
    return split_factor * kernel_block_tokens


# ---------------------------------------------------------------- 0x0BA / 0x0BE shared-prefix execution


@formula("attn.key_partition", units="boolean", convention="K_r = K_0 disjoint-union K_1,r ... K_J,r",
         location="0x0BA", arithmetic=False)
def key_partition(ops, parts, keys):
    seen: set[Any] = set()
    for part in parts:
        if seen & set(part):
            return False
        seen |= set(part)
    return seen == set(keys)


@formula("attn.score", units="logit", convention="s = q k^T / sqrt(d_h), binary64", location="0x0BA",
         arithmetic=False)
def score(ops, query, key, head_dim):
    return math.fsum(a * b for a, b in zip(query, key, strict=True)) / math.sqrt(head_dim)


@formula("attn.lse", units="log-sum-exp", convention="LSE_p = m_p + log l_p for a valid partition (l_p > 0)",
         location="0x0BA", arithmetic=False)
def lse(ops, running_max, denominator):
    return running_max + math.log(denominator)


@formula("attn.partition_output", units="value vector", convention="O_p = u_p / l_p (l_p > 0)",
         location="0x0BA", arithmetic=False)
def partition_output(ops, numerator, denominator):
    return tuple(u / denominator for u in numerator)


@formula("chunk.logical_pairs", units="query-key pairs", convention="sum over sequences of the rows on their "
         "chunk paths", location="0x0BE")
def logical_pairs(ops, path_rows):
    return ops.total(ops.total(path) for path in path_rows)


@formula("chunk.physical_kv", units="K/V rows", convention="sum of every chunk's rows once", location="0x0BE")
def physical_kv(ops, chunk_rows):
    return ops.total(chunk_rows)


@formula("chunk.saved_reads", units="K/V rows", convention="logical pairs minus physical K/V rows",
         location="0x0BE")
def saved_reads(ops, logical_pairs, physical_kv):
    return logical_pairs - physical_kv


@formula("chunk.tree_partials", units="partial states", convention="sum of coverage(c) over chunks covering more "
         "than tau sequences", location="0x0BE")
def tree_partials(ops, coverages, threshold):
    return ops.total(c * ops.indicator(c > threshold) for c in coverages)


# ---------------------------------------------------------------- 0x0C operational closure


@formula("prompt.module_tokens", units="tokens", convention="N_module = |token_ids| = |position_ids|; unequal "
         "lengths are malformed", location="0x0CB", arithmetic=False)
def module_tokens(ops, token_ids, position_ids):
    if len(token_ids) != len(position_ids):
        raise ValueError(f"{len(token_ids)} token ids but {len(position_ids)} position ids")
    return len(token_ids)


@formula("prompt.module_hit", units="boolean (0/1)", convention="1[T_p = T_c] 1[Pi_p = Pi_c] 1[S_p = S_c] "
         "1[A_p = A_c]: conjunction, not a probability", location="0x0CB", arithmetic=False)
def module_hit(ops, stored: Mapping[str, Any], current: Mapping[str, Any]):
    fields = ("tokens", "positions", "schema", "abi")
    return math.prod(int(tuple(stored[f]) == tuple(current[f]) if isinstance(stored[f], Sequence)
                         and not isinstance(stored[f], str) else int(stored[f] == current[f])) for f in fields)


@formula("cached.prefill_baseline", units="tokens", convention="a session recomputes history H and new U",
         location="0x0CC")
def prefill_baseline(ops, history_tokens, user_tokens):
    return history_tokens + user_tokens


@formula("cached.prefill_resume", units="tokens", convention="U only if history [0, H) is compatible and ready, "
         "else H + U", location="0x0CC")
def prefill_resume(ops, history_tokens, user_tokens, history_ready):
    return user_tokens + history_tokens * (1 - ops.indicator(history_ready))


@formula("reuse.use_gate", units="boolean", convention="G_use = auth and compat and version and lease and map "
         "and snapshot", location="0x0CD")
def use_gate(ops, auth, compat, version, lease, mapped, snapshot):
    return ops.all_of(auth, compat, version, lease, mapped, snapshot)


@formula("telemetry.funnel_monotone", units="boolean", convention="N_req >= N_auth >= ... >= N_exec",
         location="0x0CF")
def funnel_monotone(ops, stage_counts):
    return ops.all_of(*(a >= b for a, b in zip(stage_counts, stage_counts[1:], strict=False)))


@formula("telemetry.pool_blocks", units="blocks", convention="N_pool = free + evictable + live + "
         "reserved-or-copying (mutually exclusive states)", location="0x0CF")
def pool_blocks(ops, free, evictable, live, reserved_or_copying):
    return free + evictable + live + reserved_or_copying


@formula("telemetry.ref_delta", units="references", convention="recorded minus derived; nonzero is an integrity "
         "alert", location="0x0CF")
def ref_delta(ops, recorded_refs, derived_refs):
    return recorded_refs - derived_refs


@formula("telemetry.map_lag", units="tokens", convention="L_map = max(0, f_required - f_ready)", location="0x0CF")
def map_lag(ops, required_frontier, ready_frontier):
    return ops.maximum(0, required_frontier - ready_frontier)


# ---------------------------------------------------------------- the catalog


@attrs.frozen
class SeedEquation:
    """One display equation: its section, seed line, a short form, and the ids implementing it (or why none)."""

    section: str
    line: int
    shows: str
    ids: tuple[str, ...] = ()
    none_because: str = ""


def _e(section: str, line: int, shows: str, *ids: str, none: str = "") -> SeedEquation:
    return SeedEquation(section, line, shows, ids, none)


WORKED = "a worked instance with the seed's numbers (a golden case, not a second formula)"
RECORD = "a record declaration (fields, no value to compute)"

CATALOG: tuple[SeedEquation, ...] = (
    _e("0x02A", 409, "L_g H d_h key scalars per token", "row_scalars.group"),
    _e("0x02A", 413, "B_row,g = L_g H d_h (b_K + b_V)", "row_bytes.group"),
    _e("0x02A", 417, "B_row,rank = sum_g B_row,g", "row_bytes.rank"),
    _e("0x02A", 421, "B_row,rank = L 2 H d_h b", "row_bytes.uniform"),
    _e("0x02B", 444, "M_logical,ref = sum T_r B_row", "ledger.logical_ref_bytes"),
    _e("0x02B", 444, "M_rect,reserved = sum T_max,r B_row", "ledger.rect_reserved_bytes"),
    _e("0x02B", 448, "M_rect,slack = reserved - logical", "ledger.rect_slack_bytes"),
    _e("0x02C", 458, "N_r = ceil(T_r / P)", "ledger.request_blocks"),
    _e("0x02C", 462, "N_ref = sum N_r; M_paged,ref = N_ref P B_row", "ledger.ref_blocks", "ledger.paged_ref_bytes"),
    _e("0x02C", 466, "M_tail,ref = M_paged,ref - M_logical,ref", "ledger.request_view_tail_bytes"),
    _e("0x02C", 472, "M_pool = N_pool P B_row = M_live,unique + M_pool,idle", "ledger.pool_bytes",
       "ledger.pool_idle_bytes"),
    _e("0x02D", 480, "U = union of B_r", "ledger.unique_blocks"),
    _e("0x02D", 484, "N_ref = sum |B_r|; N_unique = |U|", "ledger.ref_blocks", "ledger.unique_blocks"),
    _e("0x02D", 488, "M_materialized,unique = sum v_p B_row", "ledger.unique_materialized_bytes"),
    _e("0x02D", 488, "M_capacity,unique = N_unique P B_row", "ledger.unique_capacity_bytes"),
    _e("0x02D", 492, "M_tail,unique = sum (P - v_p) B_row", "ledger.unique_tail_bytes"),
    _e("0x02E", 508, "M_meta = I_map N_refs + ... + M_fixed", "ledger.metadata_bytes"),
    _e("0x02F", 535, "F_ext = 1 - largest free / total free", "frag.external_ratio"),
    _e("0x02G", 543, "E[P - J] = (P - 1) / 2", "tail.expected_slots"),
    _e("0x02G", 547, "E[M_tail] = (P - 1) / 2 B_row", "tail.expected_bytes"),
    _e("0x03A", 595, "PhysicalRef_g = (g, pool_id, pool_generation, p_g)", none=RECORD),
    _e("0x03B", 614, "B_row,rank = 48 KiB + 16 KiB = 64 KiB", none=WORKED + " of row_bytes.rank"),
    _e("0x03B", 614, "B_bundle,rank = P (48 KiB + 16 KiB) = 1 MiB", none=WORKED + " of alloc.bundle_bytes"),
    _e("0x03C", 631, "l_g = l - L_g,start", "addr.group_layer"),
    _e("0x03C", 635, "j_g = floor(t / P_g); o_g = t mod P_g", "addr.logical_block", "addr.token_offset"),
    _e("0x03C", 639, "p_g = B_r,g^(v)[j_g]", "addr.physical_block"),
    _e("0x03D", 660, "s_g,t = slot(p_g) P_g + o_g", "addr.slot_id"),
    _e("0x03E", 670, "S_g,a = prod_{b > a} D_g,b", "addr.row_major_stride"),
    _e("0x03E", 674, "E_g = sum I_g,a S_g,a; O_g = b_g E_g", "addr.element_offset", "addr.byte_offset"),
    _e("0x03E", 678, "A_g,X = base_g,X + O_g", "addr.byte_address"),
    _e("0x03F", 704, "E_1 = ... = 49,285", none=WORKED + " of addr.element_offset"),
    _e("0x03F", 704, "O_1 = 2 (49,285) = 98,570", none=WORKED + " of addr.byte_offset"),
    _e("0x03F", 704, "A_1,K = 4,311,744,512 + 98,570", none=WORKED + " of addr.byte_address"),
    _e("0x04B", 843, "R(h) = map references + lease references", "alloc.refcount"),
    _e("0x04B", 860, "R(h) = ReachableRequestRefs(h) + ActiveLeases(h)", "alloc.refcount"),
    _e("0x04E", 914, "B_bundle = sum_g P_g B_row,g", "alloc.bundle_bytes"),
    _e("0x04F", 929, "Digest(S_after rollback) = Digest(S_0)",
       none="a state invariant over whole allocator states, checked by the allocator's rollback tests"),
    _e("0x05A", 967, "B_copy = r sum_g B_row,g", "cow.copy_bytes"),
    _e("0x05A", 971, "Traffic_COW = 2 B_copy + sum_g B_row,g", "cow.traffic_bytes"),
    _e("0x05A", 975, "A_COW = Traffic_COW / sum_g B_row,g = 2 r + 1", "cow.amplification"),
    _e("0x06A", 1155, "B_tensor,row = H_kv d_h b", "vmm.tensor_row_bytes"),
    _e("0x06A", 1163, "P_tokens = G / B_tensor,row", "vmm.page_group_tokens"),
    _e("0x06A", 1167, "R = G ceil(T_max B_tensor,row / G)", "vmm.reserved_extent_bytes"),
    _e("0x06A", 1171, "M_VA = 2 L B R", "vmm.va_bytes"),
    _e("0x06A", 1177, "M_phys,pool = N_handle G", "vmm.phys_pool_bytes"),
    _e("0x06A", 1181, "B_page-bundle = 2 L G", "vmm.page_bundle_bytes"),
    _e("0x06A", 1185, "N_r,pages = ceil(T_r / P_tokens)", "vmm.page_groups"),
    _e("0x06A", 1196, "M_mapped = active valid + active slack + inactive retained", "vmm.mapped_bytes"),
    _e("0x06A", 1200, "M_phys,pool = M_mapped + M_free-handles", "vmm.free_handle_bytes"),
    _e("0x06C", 1251, "A_VA = base(X, l) + r R + u", "vmm.virtual_address"),
    _e("0x06C", 1255, "u = (t H_kv d_h + h d_h + d) b", "vmm.request_offset"),
    _e("0x06C", 1259, "q = floor(u / G); delta = u mod G", "vmm.page_index", "vmm.page_delta"),
    _e("0x07A", 1397, "0 <= S_runtime <= min(S_sem, S_indexed, S_cap) <= S_prompt", "prefix.runtime_chain"),
    _e("0x07A", 1406, "S_cap = S_prompt - 1", "prefix.logits_cap"),
    _e("0x07A", 1412, "S_runtime^full = P floor(min(S_sem, S_indexed, S_prompt - 1) / P)",
       "cost.full_hit_tokens_capped"),
    _e("0x07B", 1431, "h_0 = H(bottom, X_0, E_0)", "prefix.block_hash"),
    _e("0x07B", 1431, "h_i = H(h_{i-1}, X_i, E_i)", "prefix.block_hash"),
    _e("0x07D", 1497, "h_tail = H(h_parent, X_tail[0:v], v, policy, E_tail)", "prefix.tail_hash"),
    _e("0x07G", 1581, "N_new = ceil(S_recompute / P); M_new,capacity = N_new P B_row", "prefix.new_blocks",
       "prefix.new_capacity_bytes"),
    _e("0x08A", 1610, "E_v = (X_v, S_v)", none=RECORD),
    _e("0x08A", 1614, "|X_v| = |S_v| = m", "radix.edge_lengths_equal"),
    _e("0x08A", 1625, "X(u), S(u) = concatenation over path(root, u)", "radix.path_concat"),
    _e("0x08A", 1629, "T, R, F pairwise disjoint, union Omega", "radix.slot_partition"),
    _e("0x08B", 1641, "lcp(X_v, Q)", "radix.lcp"),
    _e("0x08B", 1680, "X_shared = X[0:m], S_shared = S[0:m]", "radix.split"),
    _e("0x08B", 1680, "X_old = X[m:], S_old = S[m:]", "radix.split"),
    _e("0x08C", 1696, "S_duplicate = S_in[0:p]; S_new = S_in[p:]", "radix.insert_slots"),
    _e("0x08D", 1742, "lock(v) = sum_r 1[v in path(root, t_r)]", "radix.lock_count"),
    _e("0x08D", 1748, "T_protected = sum |X_v| 1[lock > 0]", "radix.protected_tokens"),
    _e("0x08D", 1748, "T_evictable = sum |X_v| 1[lock = 0]", "radix.evictable_tokens"),
    _e("0x08D", 1752, "T_leaf-ready = sum |X_v| 1[lock = 0 and no children]", "radix.leaf_ready_tokens"),
    _e("0x08E", 1788, "C_KV = sum of edge lengths", "radix.dfs_kv_lower_bound"),
    _e("0x09B", 1908, "N_r,blocks = ceil(T_r / P_a); W_r,tail = N_r,blocks P_a - T_r", "ledger.request_blocks",
       "cost.request_tail_tokens"),
    _e("0x09B", 1908, "M_r,tail = W_r,tail B_row", "cost.request_tail_bytes"),
    _e("0x09B", 1912, "N_unique = ceil(max T_r / P_a); W_unique = N_unique P_a - max T_r",
       "cost.unique_blocks_nested", "cost.unique_tail_tokens"),
    _e("0x09B", 1923, "M_meta = N_refs b_map + ... + M_fixed", "ledger.metadata_bytes"),
    _e("0x09B", 1935, "H_r^full = P_a floor(T_r / P_a)", "cost.full_hit_tokens"),
    _e("0x09B", 1939, "H_r^full,gen = P_a floor((T_r - 1) / P_a)", "cost.full_hit_tokens_gen"),
    _e("0x09C", 1949, "r = 20 mod P_a", "cow.tail_rows"),
    _e("0x09C", 1953, "M_copy,R+W = 2 r B_row; M_dst = P_a B_row; A_capacity = P_a / r", "cow.copy_traffic_bytes",
       "cow.destination_bytes", "cow.capacity_amplification"),
    _e("0x0A", 1963, "N_seq-blocks = ceil(T / P_k)", "kernel.seq_blocks"),
    _e("0x0A", 1967, "N_parts = ceil(T / P_part); N_blocks/part = P_part / P_k", "kernel.partitions",
       "kernel.blocks_per_partition"),
    _e("0x0AB", 2017, "N_table = B n_max; N_used = sum n_r; N_pad = B n_max - sum n_r", "kernel.dense_table_cells",
       "kernel.used_table_cells", "kernel.padded_table_cells"),
    _e("0x0AC", 2027, "P_a = q P_k", "kernel.allocator_block_tokens"),
    _e("0x0AC", 2031, "{aq, ..., aq + q - 1}", "kernel.expanded_block_id"),
    _e("0x0BA", 2117, "K_r = K_0 disjoint-union K_1,r ... K_J,r", "attn.key_partition"),
    _e("0x0BA", 2121, "s_r,i = q_r k_i^T / sqrt(d_h)", "attn.score"),
    _e("0x0BA", 2127, "S_p = (valid, m, l, u, c)", none=RECORD),
    _e("0x0BA", 2131, "LSE_p = m_p + log l_p; O_p = u_p / l_p", "attn.lse", "attn.partition_output"),
    _e("0x0BE", 2334, "N_logical-pairs = sum_r sum_{c in path(r)} T_c", "chunk.logical_pairs"),
    _e("0x0BE", 2334, "N_physical-KV = sum_c T_c; N_saved-reads = logical - physical", "chunk.physical_kv",
       "chunk.saved_reads"),
    _e("0x0BE", 2334, "N_partial = sum coverage(c) over coverage(c) > tau", "chunk.tree_partials"),
    _e("0x0BE", 2334, "M_partial = N_partial (d_v b_O + 2 b_state)", "chunk.partial_state_bytes"),
    _e("0x0BI", 2393, "N_logical = B S + sum U_r", "chunk.logical_rows"),
    _e("0x0BI", 2397, "N_unique = S + sum U_r; N_saved = (B - 1) S", "chunk.unique_rows", "chunk.saved_rows"),
    _e("0x0BI", 2411, "N_ordinary-chunks = sum ceil((S + U_r) / P_c)", "chunk.ordinary_chunks"),
    _e("0x0BI", 2411, "N_shared-chunks = ceil(S / P_c) + sum ceil(U_r / P_c)", "chunk.shared_chunks"),
    _e("0x0BI", 2415, "N_partial = B ceil(S / P_c)", "chunk.partial_states"),
    _e("0x0BI", 2415, "M_partial = N_partial (d_v b_O + 2 b_state)", "chunk.partial_state_bytes"),
    _e("0x0BJ", 2423, "P_G = G / B_tensor-row", "vmm.page_group_tokens"),
    _e("0x0BJ", 2427, "N_G = ceil(T / P_G); W_G = N_G G - T B_tensor-row", "vmm.page_groups",
       "vmm.page_group_waste_bytes"),
    _e("0x0CB", 2567, "N_module = |token_ids| = |position_ids|", "prompt.module_tokens"),
    _e("0x0CB", 2571, "H_module = 1[T] 1[Pi] 1[S] 1[A]", "prompt.module_hit"),
    _e("0x0CC", 2610, "T_prefill,baseline = H + U", "cached.prefill_baseline"),
    _e("0x0CC", 2610, "T_prefill,resume = U only if [0, H) is compatible and ready", "cached.prefill_resume"),
    _e("0x0CD", 2641, "E = (g_ns, d_sem, d_layout, v_index, v_tree, g_pool, f_map, v_exec)", none=RECORD),
    _e("0x0CD", 2647, "G_use = G_auth and ... and G_snapshot", "reuse.use_gate"),
    _e("0x0CF", 2733, "N_req >= N_auth >= ... >= N_exec", "telemetry.funnel_monotone"),
    _e("0x0CF", 2753, "N_pool = N_free + N_evictable + N_live + N_reserved-or-copying", "telemetry.pool_blocks"),
    _e("0x0CF", 2761, "Delta_ref = N_ref,recorded - N_ref,derived", "telemetry.ref_delta"),
    _e("0x0CF", 2767, "L_map = max(0, f_required - f_ready)", "telemetry.map_lag"),
)
"""Every ``$$...$$`` display equation of the seed (111), in seed order."""

PROSE: dict[str, str] = {
    "ledger.dedup_payload_bytes": "0x02D code block: logical payload deduplicated",
    "ledger.sharing_avoided_bytes": "0x02D code block: request-reference capacity avoided by sharing",
    "frag.blocks_for_bytes": "0x02F prose: the candidate needs three 1 MiB blocks",
    "tail.max_unique_bytes": "0x03J prose: at most (P - 1) B_row unique tail per reachable partial block",
    "cost.partial_hit_tokens_capped": "0x07D/0x09B prose: immutable partial tails reuse S_prompt - 1",
    "cost.recompute_tokens": "0x07A code block: S_recompute = S_prompt - S_runtime",
    "addr.tensor_bytes": "0x03F prose: one g1 K tensor of [8, 8, 16, 4, 128] FP16 scalars",
    "kernel.thread_group_size": "0x0AA pinned-source trace: THREAD_GROUP_SIZE",
    "kernel.tokens_per_thread_group": "0x0AA pinned-source trace: tokens per thread group",
    "kernel.value_vector_width": "0x0AA pinned-source trace: V_VEC_SIZE",
}
"""Registered formulas the seed states outside display math (prose, code blocks, pinned-source traces)."""


def seed_formula_ids() -> frozenset[str]:
    """The distinct registry ids the catalog's display equations name."""
    return frozenset(i for e in CATALOG for i in e.ids)
