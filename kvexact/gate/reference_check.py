"""The gate's thin self-check of the installed reference (``reference-seed``): a handful of the seed's worked
numbers, enough to tell a broken install from a working one. The reference's golden tests (every case, every
section) live with the project's tests, not in the gate.

Invariant: the check passes only when every row below gives the seed's number (written beside the arithmetic
that gives it) and nothing raises; each mismatch is named by its case and row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvexact.gate.framework import CheckResult, GateCheck, GateContext, Verdict

Rows = list[tuple[str, Any, Any]]
KIB = 1024
MIB = 1024 * KIB


def translate_0x03F() -> Rows:
    """0x03F: request A's K row at layer 24, token 16, head 1, lane 5 of Loop 4's snapshot."""
    from kvexact.reference.labs.translate import loop4_snapshot
    from kvexact.reference.translate import resolve_kv_address

    a = resolve_kv_address(loop4_snapshot(), "A", 16, 24, "K", 1, 5)
    return [("slot, element offset, byte offset", (a.slot_id, a.element_offset, a.byte_offset), (96, 49_285, 98_570)),
            ("byte address", a.byte_address, 4_311_744_512 + 98_570)]


def ledger_0x0D() -> Rows:
    """0x0D's worked ledger (P = 16 tokens, 64 KiB rows): 3 unique blocks of 16 slots, 33 materialized rows."""
    from kvexact.reference.labs.ledgers import worked_fixture
    from kvexact.reference.ledgers import compute_ledger

    led = compute_ledger(worked_fixture())
    return [("unique blocks, rows, slots", (led.unique_blocks, led.unique_materialized_rows, led.unique_slots),
             (3, 33, 3 * 16)),
            ("unique capacity, metadata bytes", (led.unique_capacity_bytes, led.metadata_bytes), (3 * MIB, 482))]


def prefix_0x07B() -> Rows:
    """0x07B: a prompt changed at token 37 over a 50-token cached stream: S_sem 37, a hit of 2 blocks of 16."""
    from kvexact.reference.labs import prefix as px_lab

    s = list(px_lab.STREAM[:50])
    changed = [*s[:37], 7, *s[38:]]
    b = px_lab.cache_with(s).lookup(px_lab.request("B", changed))
    return [("S_sem, hit", (b.semantic_match_tokens, b.runtime_hit_tokens), (37, 2 * 16))]


def radix_0x08F() -> Rows:
    """0x08F: the 18-operation trace ends with 24 pool slots, 6 in the tree, 18 free, none private."""
    from kvexact.reference import radix as rx
    from kvexact.reference.labs import radix as rx_lab

    r = rx.check_state(rx_lab.seed_trace_0x08F()[-1].state)
    return [("pool/tree/free/private slots", (r.pool_slots, r.tree_owned_slots, r.free_slots, r.private_slots),
             (24, 6, 24 - 6, 0))]


CASES: dict[str, Callable[[], Rows]] = {"translate 0x03F": translate_0x03F, "ledger 0x0D": ledger_0x0D,
                                        "prefix 0x07B": prefix_0x07B, "radix 0x08F": radix_0x08F}


def run_cases(cases: dict[str, Callable[[], Rows]]) -> CheckResult:
    """Every case's rows; a case that raises is a mismatch named by the case."""
    wrong, compared = [], 0
    for name, case in cases.items():
        try:
            rows = case()
        except Exception as exc:  # a crash inside a case is that case's failure
            wrong.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        compared += len(rows)
        wrong += [f"{name}: {what} = {got!r}, expected {expected!r}" for what, got, expected in rows if got != expected]
    figures = {"cases": len(cases), "comparisons": compared}
    verdict = Verdict.FAILED if wrong else Verdict.PASSED
    return CheckResult(verdict, figures, "; ".join(wrong[:5]) or "every case gives the seed's numbers",
                       examples=len(cases))


def reference_seed(ctx: GateContext) -> CheckResult:
    return run_cases(CASES)


CHECKS = [GateCheck("reference-seed", "reference", "the installed reference gives a handful of the seed's worked "
                    "numbers (translation, ledger, prefix hit, radix pool)", reference_seed)]
