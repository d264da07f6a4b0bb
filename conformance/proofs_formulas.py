"""Proof obligations over the reference's formula registry, evaluated with its z3 arithmetic (``Z3Ops``).

The same registered formula code that computes the seed's worked numbers is evaluated over z3 terms;
floor and ceiling divisions become explicit quotient witnesses (``ops.side``), so the claims hold for
all positive block sizes and non-negative lengths. Each symbolic claim is also enumerated over every
concrete block size the project supports (``SUPPORTED_BLOCK_TOKENS``), where the arithmetic is linear.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kvexact.conformance.obligations import Obligation

SUPPORTED_BLOCK_TOKENS = (1, 2, 4, 8, 16, 32, 64)
REQUESTS = 3  # symbolic requests in the ledger identities


def _with_ops(body: Callable[[Any, Any, Any], tuple[list[Any], Any]]) -> Callable[[Any], tuple[list[Any], Any, str]]:
    def build(z3: Any) -> tuple[list[Any], Any, str]:
        from kvexact.reference.formulas import Z3Ops
        from kvexact.reference.formulas_all import load_all

        load_all()
        ops = Z3Ops()
        cons, claim = body(z3, ops, None)
        return [*cons, *ops.side], claim, "forall"

    return build


def _block(z3: Any, p: int | None) -> tuple[Any, list[Any]]:
    if p is None:
        var = z3.Int("P")
        return var, [var >= 1]
    return z3.IntVal(p), []


def request_view_ledger(p: int | None) -> Obligation:
    """0x02C/0x02D: paged request-view bytes = logical bytes + tail bytes, with 0 <= tail < n P B."""

    def body(z3, ops, _):
        from kvexact.reference.formulas import evaluate

        P, cons = _block(z3, p)
        B = z3.Int("B")
        rows = [z3.Int(f"t{i}") for i in range(REQUESTS)]
        cons += [B >= 1, *[t >= 0 for t in rows]]
        n_ref = ops.total(evaluate("ledger.request_blocks", ops, rows_tokens=t, block_tokens=P) for t in rows)
        paged = evaluate("ledger.paged_ref_bytes", ops, ref_blocks=n_ref, block_tokens=P, row_bytes=B)
        logical = evaluate("ledger.logical_ref_bytes", ops, rows_tokens=rows, row_bytes=B)
        tail = evaluate("ledger.request_view_tail_bytes", ops, paged_bytes=paged, logical_bytes=logical)
        return cons, z3.And(paged == logical + tail, tail >= 0, tail < REQUESTS * P * B)

    return Obligation(f"ledger.request-view[P={'all' if p is None else p}]", "0x02C",
                      "paged = logical + tail, and each request wastes less than one block", _with_ops(body))


def unique_ledger(p: int | None) -> Obligation:
    """0x02D: unique capacity = materialized + unique tail when every block holds 0..P valid rows."""

    def body(z3, ops, _):
        from kvexact.reference.formulas import evaluate

        P, cons = _block(z3, p)
        B = z3.Int("B")
        valid = [z3.Int(f"v{i}") for i in range(REQUESTS)]
        cons += [B >= 1, *[z3.And(v >= 0, v <= P) for v in valid]]
        cap = evaluate("ledger.unique_capacity_bytes", ops, unique_blocks=len(valid), block_tokens=P, row_bytes=B)
        mat = evaluate("ledger.unique_materialized_bytes", ops, valid_rows=valid, row_bytes=B)
        tail = evaluate("ledger.unique_tail_bytes", ops, valid_rows=valid, block_tokens=P, row_bytes=B)
        return cons, z3.And(cap == mat + tail, tail >= 0, mat >= 0)

    return Obligation(f"ledger.unique-physical[P={'all' if p is None else p}]", "0x02D",
                      "unique capacity = materialized + tail, both non-negative", _with_ops(body))


def prefix_chain(p: int | None) -> Obligation:
    """0x07A: the runtime hit satisfies the invariant chain, is block-aligned and maximal; recompute >= 1."""

    def body(z3, ops, _):
        from kvexact.reference.formulas import evaluate

        P, cons = _block(z3, p)
        T, sem, idx = z3.Ints("T S_sem S_indexed")
        cons += [T >= 1, sem >= 0, idx >= 0, sem <= T, idx <= T]
        cap = evaluate("prefix.logits_cap", ops, prompt_tokens=T)
        hit = evaluate("cost.full_hit_tokens_capped", ops, semantic_tokens=sem, indexed_tokens=idx, prompt_tokens=T,
                       block_tokens=P)
        chain = evaluate("prefix.runtime_chain", ops, runtime_tokens=hit, semantic_tokens=sem, indexed_tokens=idx,
                         cap_tokens=cap, prompt_tokens=T)
        rec = evaluate("cost.recompute_tokens", ops, prompt_tokens=T, hit_tokens=hit)
        aligned = ops.mod(hit, P) == 0
        maximal = hit > ops.minimum(sem, idx, cap) - P
        return cons, z3.And(chain, aligned, maximal, rec >= 1, rec == T - hit)

    return Obligation(f"prefix.invariant-chain[P={'all' if p is None else p}]", "0x07A",
                      "capped full-block hit: aligned, maximal, below the logits cap; recompute >= 1",
                      _with_ops(body))


def block_cost_vector(p: int | None) -> Obligation:
    """0x09B: full hit + request tail spans whole blocks: hit <= T <= hit + P - 1 and T + tail = P ceil(T/P)."""

    def body(z3, ops, _):
        from kvexact.reference.formulas import evaluate

        P, cons = _block(z3, p)
        T = z3.Int("T")
        cons += [T >= 0]
        hit = evaluate("cost.full_hit_tokens", ops, rows_tokens=T, block_tokens=P)
        tail = evaluate("cost.request_tail_tokens", ops, rows_tokens=T, block_tokens=P)
        blocks = evaluate("ledger.request_blocks", ops, rows_tokens=T, block_tokens=P)
        return cons, z3.And(hit <= T, T <= hit + P - 1, tail >= 0, tail < P, T + tail == P * blocks)

    return Obligation(f"cost.block-vector[P={'all' if p is None else p}]", "0x09B",
                      "full-block hits, tails and block counts are consistent", _with_ops(body))


def cow_tail(p: int | None) -> Obligation:
    """0x09C/0x05A: the copied tail is the shared length mod P (0 means the boundary path)."""

    def body(z3, ops, _):
        from kvexact.reference.formulas import evaluate

        P, cons = _block(z3, p)
        S, B = z3.Ints("S B")
        cons += [S >= 0, B >= 1]
        r = evaluate("cow.tail_rows", ops, shared_tokens=S, block_tokens=P)
        traffic = evaluate("cow.copy_traffic_bytes", ops, tail_rows=r, row_bytes=B)
        return cons, z3.And(r >= 0, r < P, ops.mod(S - r, P) == 0, traffic == 2 * r * B)

    return Obligation(f"cow.tail-rows[P={'all' if p is None else p}]", "0x05A",
                      "COW copies exactly the partial tail (0 <= r < P), traffic 2 r B", _with_ops(body))


def cow_amplification(p: int | None) -> Obligation:
    """0x05A: copy bytes r sum B_g, traffic 2 B_copy + sum B_g, so the amplification is 2 r + 1 for any rows."""

    def body(z3, ops, _):
        from kvexact.reference.formulas import evaluate

        P, cons = _block(z3, p)
        S = z3.Int("S")
        rows = [z3.Int("B0"), z3.Int("B1")]
        cons += [S >= 0, *[b >= 1 for b in rows]]
        r = evaluate("cow.tail_rows", ops, shared_tokens=S, block_tokens=P)
        copy = evaluate("cow.copy_bytes", ops, tail_rows=r, group_row_bytes=rows)
        traffic = evaluate("cow.traffic_bytes", ops, copy_bytes=copy, group_row_bytes=rows)
        amp = evaluate("cow.amplification", ops, traffic_bytes=traffic, group_row_bytes=rows)
        return cons, amp == z3.ToReal(2 * r + 1)

    return Obligation(f"cow.amplification[P={'all' if p is None else p}]", "0x05A",
                      "COW traffic over one row append is 2 r + 1", _with_ops(body))


def formula_obligations() -> Iterator[Obligation]:
    for make in (request_view_ledger, unique_ledger, prefix_chain, block_cost_vector, cow_tail, cow_amplification):
        yield make(None)
        for p in SUPPORTED_BLOCK_TOKENS:
            yield make(p)
