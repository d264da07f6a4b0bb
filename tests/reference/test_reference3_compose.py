"""Mechanisms compose only through receipts (0x0CA): a radix handoff and a vAttention frontier receipt
feed the reuse gate, and a later mutation makes the gate choose recomputation (0x0CG)."""

from __future__ import annotations

import attrs

from kvexact.reference import radix as rx
from kvexact.reference import reuse_gate as g
from kvexact.reference import vmm
from kvexact.reference.handles import BlockHandle
from kvexact.reference.labs import radix as rx_lab
from kvexact.reference.labs import reuse_gate as g_lab
from kvexact.reference.labs import vmm as vmm_lab


def _compose(tree: rx.RadixState, receipt: rx.RadixSchedulerHandoffReceipt, frontier: vmm.MappedFrontierReceipt):
    refs = tuple(BlockHandle(0, 0, slot, 1) for slot in receipt.prefix_slot_ids)
    toks = tree.path_tokens(receipt.terminal_node_id)
    cand = attrs.evolve(g_lab.CANDIDATE, concrete_key="k-radix", token_witness=toks, path_node_ids=receipt.path_node_ids,
                        physical_refs=refs, valid_tokens=receipt.matched_tokens,
                        required_mapping_frontier_tokens=receipt.matched_tokens)
    runtime = attrs.evolve(g_lab.RUNTIME, index={("ns-a", "k-radix"): cand}, tree_version=tree.version,
                           block_generations={(0, 0, s): 1 for s in receipt.prefix_slot_ids},
                           ready_mapping_frontier_tokens=frontier.covered_tokens if frontier.ready_before_use else 0,
                           pending_mapping_frontier_tokens=frontier.covered_tokens)
    req = g_lab.request("req-handoff", key="k-radix", tokens=toks + (32,), tree_version=receipt.tree_version,
                    covered_tokens=receipt.matched_tokens)
    return runtime, req


def test_radix_hit_and_ready_frontier_make_an_executable_reuse():
    step = rx_lab.seed_trace_0x08F()[-1]
    frontier = vmm_lab.seed_trace_0x06F()[21].receipt  # v22: the awaited frontier covering 12 rows
    runtime, req = _compose(step.state, step.receipt, frontier)
    after, decision = g.reuse_or_recompute(runtime, req)
    assert decision.mode == "reuse" and decision.receipt.evidence.tree_version == 18
    assert decision.prefill_tokens == 7 - 6


def test_tree_mutation_after_the_lease_is_released_forces_recomputation():
    step = rx_lab.seed_trace_0x08F()[-1]
    tree, _ = rx.release_request(step.state, "req-handoff")
    tree, _ = rx.match(tree, [10, 11, 99])  # splits [10, 11, 12]: the tree version moves on
    frontier = vmm_lab.seed_trace_0x06F()[21].receipt
    runtime, req = _compose(tree, step.receipt, frontier)
    _, decision = g.reuse_or_recompute(runtime, req)
    assert decision.mode == "recompute" and decision.rejection is g.ReuseRejection.STALE_TREE_VERSION
    assert decision.prefill_tokens == 7
