"""SGLang 0.5.23's cache-aware queue orders (docs/peers/sglang.md §6), as functions over the profile's tree.

The normative index never orders a queue (seed 0x08G); these functions exist only so that a user can
compare a runtime's LPM and DFS-weight orders with SGLang's. Both return queue indices.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from kvexact.reference.peers.sglang import RadixCache, Req, TreeNode, match_kv_cache

WAITING_QUEUE_PREFIX_MATCH_MAX = 128
IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD = 32
IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD = 32


@attrs.frozen
class PrefixMatches:
    """Per request (queue order): matched units against the real tree, and who was deprioritized."""

    num_matched_prefix_tokens: tuple[int, ...]
    deprioritized: frozenset[int]


def compute_prefix_matches(cache: RadixCache, queue: Sequence[Req],
                           check_threshold: int = IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD,
                           deprioritize_threshold: int = IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD,
                           ) -> PrefixMatches:
    """Match every request against the real tree (mutating it, as SGLang does), then run the in-batch
    check on a fresh simulated tree: a short-matching request whose tokens an earlier queued request
    already shares (>= ``deprioritize_threshold``) waits; otherwise its tokens join the simulated tree."""
    simulated = RadixCache.create_simulated(page_size=cache.page_size)
    deprioritized = set()
    for i, req in enumerate(queue):
        match_kv_cache(cache, req)
        if check_threshold != -1 and len(req.prefix_indices) <= check_threshold:
            key = req.key(req.tokens())
            if simulated.match_prefix(key).device_prefix_len >= deprioritize_threshold:
                deprioritized.add(i)
            else:
                simulated.insert(key)
    return PrefixMatches(tuple(r.num_matched_prefix_tokens for r in queue), frozenset(deprioritized))


def lpm_order(cache: RadixCache, queue: Sequence[Req]) -> list[int]:
    """Longest-prefix-match: stable sort by matched length, deprioritized requests last in arrival order;
    FCFS when the cache is disabled or the queue is longer than 128."""
    if cache.disable or len(queue) > WAITING_QUEUE_PREFIX_MATCH_MAX:
        return list(range(len(queue)))
    pm = compute_prefix_matches(cache, queue)

    def rank(i: int) -> float:
        return float("inf") if i in pm.deprioritized else -pm.num_matched_prefix_tokens[i]

    return sorted(range(len(queue)), key=rank)


def dfs_weight_order(cache: RadixCache, last_nodes: Sequence[TreeNode]) -> list[int]:
    """DFS-weight: weight = own requests + children's weights; visit heavier children first (stable on
    insertion order), emit a node's own requests after its subtree."""
    if cache.disable:
        return list(range(len(last_nodes)))
    own: dict[TreeNode, list[int]] = {}
    for i, node in enumerate(last_nodes):
        own.setdefault(node, []).append(i)
    weight: dict[TreeNode, int] = {}

    def calc(node: TreeNode) -> int:
        weight[node] = len(own.get(node, ())) + sum(calc(c) for c in node.children.values())
        return weight[node]

    calc(cache.root_node)
    order: list[int] = []

    def visit(node: TreeNode) -> None:
        for child in sorted(node.children.values(), key=lambda c: -weight[c]):
            visit(child)
        order.extend(own.get(node, ()))

    visit(cache.root_node)
    return order
