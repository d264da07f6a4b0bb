"""CachedAttention session reuse receipts (seed 0x0CC): inactive lifetime is a cross-article handoff.

Invariant: M5.3 emits a :class:`SessionReuseReceipt` naming exactly what identity was proved (session and
tenant, semantic and layout digests, covered interval ``[0, H)``, position contract, publication
generation, source-tier object); the placement layer (M5.5) may resume a turn from it only if every
field still matches the current turn. A matching session id alone is never enough. Resuming prefills
``U`` tokens instead of ``H + U``; no latency is inferred from that count.
"""

from __future__ import annotations

import enum

import attrs

from kvexact.reference.rejections import Rejected


class SessionRejection(enum.Enum):
    SESSION_MISMATCH = "the receipt names another session"
    TENANT_MISMATCH = "the receipt was proved for another tenant"
    SEMANTIC_CHANGED = "model, adapter or cache quantizer changed since the history was saved"
    LAYOUT_CHANGED = "the physical representation/layout changed"
    POSITION_CONTRACT_CHANGED = "the position or truncation contract changed"
    NAMESPACE_ROTATED = "the namespace generation advanced (rotation or revocation)"
    INCOMPLETE_SAVE = "the history was not completely saved"
    INTERVAL_MISMATCH = "the receipt does not cover exactly [0, H) of the current history"
    STALE_PUBLICATION = "a newer publication of this session supersedes the receipt"


@attrs.frozen
class SessionReuseReceipt:
    """What M5.3 hands to M5.5 (placement, loading and fallback stay there)."""

    session_id: str
    tenant_id: str
    namespace_id: str
    namespace_generation: int
    semantic_digest: str
    layout_digest: str
    covered_interval: tuple[int, int]
    position_contract: str
    publication_generation: int
    source_tier_object_id: str
    save_complete: bool = True


@attrs.frozen
class SessionTurn:
    """The current turn's view: who asks, under which identity, for a history of ``history_tokens``."""

    session_id: str
    tenant_id: str
    namespace_id: str
    namespace_generation: int
    semantic_digest: str
    layout_digest: str
    position_contract: str
    history_tokens: int
    new_tokens: int
    latest_publication_generation: int


def check_resume(receipt: SessionReuseReceipt, turn: SessionTurn) -> None:
    """Accept the receipt for this turn, or name the first field that breaks compatibility."""
    if receipt.session_id != turn.session_id:
        raise Rejected(SessionRejection.SESSION_MISMATCH, f"{receipt.session_id} != {turn.session_id}")
    if receipt.tenant_id != turn.tenant_id:
        raise Rejected(SessionRejection.TENANT_MISMATCH, f"{receipt.tenant_id} != {turn.tenant_id}")
    if (receipt.namespace_id, receipt.namespace_generation) != (turn.namespace_id, turn.namespace_generation):
        raise Rejected(SessionRejection.NAMESPACE_ROTATED,
                       f"{receipt.namespace_id}@{receipt.namespace_generation} vs "
                       f"{turn.namespace_id}@{turn.namespace_generation}")
    if receipt.semantic_digest != turn.semantic_digest:
        raise Rejected(SessionRejection.SEMANTIC_CHANGED, receipt.session_id)
    if receipt.layout_digest != turn.layout_digest:
        raise Rejected(SessionRejection.LAYOUT_CHANGED, receipt.session_id)
    if receipt.position_contract != turn.position_contract:
        raise Rejected(SessionRejection.POSITION_CONTRACT_CHANGED,
                       f"{receipt.position_contract} != {turn.position_contract}")
    if not receipt.save_complete:
        raise Rejected(SessionRejection.INCOMPLETE_SAVE, receipt.source_tier_object_id)
    if receipt.covered_interval != (0, turn.history_tokens):
        raise Rejected(SessionRejection.INTERVAL_MISMATCH, f"{receipt.covered_interval} vs [0, {turn.history_tokens})")
    if receipt.publication_generation != turn.latest_publication_generation:
        raise Rejected(SessionRejection.STALE_PUBLICATION,
                       f"{receipt.publication_generation} < {turn.latest_publication_generation}")


@attrs.frozen
class ResumePlan:
    """The logical work boundary only: tokens to prefill and whether history is reused."""

    resume: bool
    prefill_tokens: int
    rejection: SessionRejection | None = None


def plan_turn(receipt: SessionReuseReceipt | None, turn: SessionTurn) -> ResumePlan:
    """T_prefill = U when the history [0, H) is compatible and ready, else H + U (recompute)."""
    if receipt is None:
        return ResumePlan(False, turn.history_tokens + turn.new_tokens)
    try:
        check_resume(receipt, turn)
    except Rejected as exc:
        assert isinstance(exc.reason, SessionRejection)
        return ResumePlan(False, turn.history_tokens + turn.new_tokens, exc.reason)
    return ResumePlan(True, turn.new_tokens)
