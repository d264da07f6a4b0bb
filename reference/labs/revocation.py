"""Revocation's seed scenario (0x0CE: publish, offload, lease, execute, then the seven steps) and its
failure cases (Loop 11, registered under 0x0CG)."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from kvexact.reference.rejections import NegativeCase, register_negative
from kvexact.reference.revocation import (
    Entry,
    Plan,
    RevocationRejection,
    RevState,
    acquire_lease,
    allocate,
    arrive,
    authorize,
    execute,
    lookup,
    offload,
    play,
    publish_entry,
    revoke_advance_generation,
    revoke_cancel_lease,
    revoke_complete,
    revoke_invalidate_index,
    revoke_leases_drained,
    revoke_purge_external,
    revoke_release_blocks,
    revoke_stop_admission,
    write_block,
)

PUBLISH_T1: Plan = [(arrive, ("t1", "t1")), (authorize, ("t1",)), (lookup, ("t1",)), (allocate, ("t1", 1)),
                    (write_block, ("t1",)), (publish_entry, ("t1",))]
LEASE_T1: Plan = [(arrive, ("t1", "t1")), (authorize, ("t1",)), (lookup, ("t1",)), (acquire_lease, ("t1",))]
REVOKE_T1: Plan = [(revoke_stop_admission, ("t1",)), (revoke_advance_generation, ("t1",)),
                   (revoke_invalidate_index, ("t1",)), (revoke_cancel_lease, ("t1", "t1")),
                   (revoke_leases_drained, ("t1",)), (revoke_release_blocks, ("t1",)),
                   (revoke_purge_external, ("t1",)), (revoke_complete, ("t1",))]


# the seed's seven-step scenario -------------------------------------------------------------------
def seven_step_scenario() -> list[dict[str, Any]]:
    """t1 publishes an entry and offloads it, a second t1 request executes on it; then t1 is revoked
    in seven steps with the live lease cancelled. Returns one trace record per action."""
    plan = PUBLISH_T1 + [(offload, (Entry("t1", 0, 1),))] + LEASE_T1 + [(execute, ("t1",))] + REVOKE_T1
    return play(RevState.init(), plan)[1]


# Loop 11 cases (0x0CG) --------------------------------------------------------------------------
def _executing() -> RevState:
    """t1 published block 1 at generation 0 and a second t1 request is executing on it."""
    return play(RevState.init(), PUBLISH_T1 + LEASE_T1 + [(execute, ("t1",))])[0]


def _revoking(until: str) -> RevState:
    s = _executing()
    for fn in (revoke_stop_admission, revoke_advance_generation, revoke_invalidate_index):
        s, _ = fn(s, "t1")
        if fn.__name__ == until:
            break
    return s


def _cases() -> list[tuple[enum.Enum, str, Callable[[], Any]]]:
    R = RevocationRejection
    return [
        (R.UNAUTHORIZED_PRINCIPAL, "principal authorizes into another tenant's namespace",
         lambda: authorize(arrive(RevState.init(), "t2", "t1")[0], "t2")),
        (R.ADMISSION_STOPPED, "request admitted to a namespace whose revocation stopped admission",
         lambda: authorize(arrive(revoke_stop_admission(RevState.init(), "t1")[0], "t1", "t1")[0], "t1")),
        (R.LEASES_LIVE, "revocation reports drained while an old-generation lease is live",
         lambda: revoke_leases_drained(_revoking("revoke_invalidate_index"), "t1")),
        (R.REVOCATION_STEP_OUT_OF_ORDER, "external copies purged before the old generation's leases drained",
         lambda: revoke_purge_external(_revoking("revoke_invalidate_index"), "t1")),
        (R.STALE_GENERATION, "old-generation request executes after the generation advanced",
         lambda: execute(acquire_lease_stale(), "t1")),
        (R.BLOCK_OWNED, "recycled block allocated while another owner still holds it",
         lambda: allocate(lookup(authorize(arrive(_executing(), "t2", "t2")[0], "t2")[0], "t2")[0], "t2", 1)),
    ]


def acquire_lease_stale() -> RevState:
    """A t1 request leased at generation 0, then t1's generation advanced under it."""
    return play(RevState.init(), PUBLISH_T1 + LEASE_T1 + REVOKE_T1[:2])[0]


def register() -> None:
    """Register the lab's cases (called once, by :func:`kvexact.reference.labs.register_all`)."""
    for reason, description, trigger in _cases():
        register_negative(NegativeCase("0x0CG", reason, description, trigger))


