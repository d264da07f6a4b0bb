"""CachedAttention's failure cases (Loop 11, registered under 0x0CG) on a fixed session receipt."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import attrs

from kvexact.reference.rejections import NegativeCase, register_negative
from kvexact.reference.sessions import (
    SessionRejection,
    SessionReuseReceipt,
    SessionTurn,
    check_resume,
)

# Loop 11 cases (0x0CG) --------------------------------------------------------------------------
RECEIPT = SessionReuseReceipt("chat-42", "tenant-a", "tenant-a/chat", 3, "sem-1", "lay-1", (0, 120), "rope-abs-v1",
                              5, "tier2://obj/chat-42/5")
TURN = SessionTurn("chat-42", "tenant-a", "tenant-a/chat", 3, "sem-1", "lay-1", "rope-abs-v1", 120, 16, 5)


def _cases() -> list[tuple[enum.Enum, str, Callable[[], Any]]]:
    R = SessionRejection
    ev = attrs.evolve
    return [
        (R.SEMANTIC_CHANGED, "resume after an adapter change under the same session id",
         lambda: check_resume(RECEIPT, ev(TURN, semantic_digest="sem-2"))),
        (R.POSITION_CONTRACT_CHANGED, "resume after a position-contract change",
         lambda: check_resume(RECEIPT, ev(TURN, position_contract="rope-scaled-v2"))),
        (R.NAMESPACE_ROTATED, "resume after a namespace rotation", lambda: check_resume(RECEIPT, ev(TURN, namespace_generation=4))),
        (R.INCOMPLETE_SAVE, "resume from an incomplete save", lambda: check_resume(ev(RECEIPT, save_complete=False), TURN)),
        (R.INTERVAL_MISMATCH, "receipt covers less than the turn's history",
         lambda: check_resume(ev(RECEIPT, covered_interval=(0, 100)), TURN)),
        (R.TENANT_MISMATCH, "session id reused by another tenant", lambda: check_resume(RECEIPT, ev(TURN, tenant_id="tenant-b"))),
    ]


def register() -> None:
    """Register the lab's cases (called once, by :func:`kvexact.reference.labs.register_all`)."""
    for reason, description, trigger in _cases():
        register_negative(NegativeCase("0x0CG", reason, description, trigger))


