"""What every vLLM-backed allocator adapter shares: the profile's (``vllm_protocol``) and the real
manager's (``kvexact.conformance.live.vllm``).

Both serve the protocol's ``num_groups`` cache groups as identical full-attention groups, one manager per
group with ``blocks_per_group + 1`` blocks (block 0 is vLLM's null block, so the usable ids are
``1..blocks_per_group``). Identical groups fed identical streams hold identical states, so an operation is
accepted in every group or in none. vLLM caches every full block when it allocates it, so ``cache()`` has
nothing left to publish, and the adapters are not in lockstep with the normative one (which reuses only
what ``cache()`` published).

Invariant: the protocol's refusals are decided here, before a manager is touched, with the reference's
names (``DUPLICATE_REQUEST``, ``EMPTY_APPEND``, ``UNKNOWN_REQUEST``), and ``INSUFFICIENT_BLOCKS`` where vLLM
has no room; a refused operation changes nothing (subclasses keep that in :meth:`admit` and :meth:`decode`).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvexact.reference.adapters import AdapterConfig, OpResult

NO_ROOM = "INSUFFICIENT_BLOCKS"  # the name a refusal for lack of blocks carries (vLLM returns None)


class VllmGroups:
    """The protocol's border over per-group vLLM managers; subclasses say how a manager admits, decodes,
    frees and reports a request."""

    lockstep = False

    def __init__(self, config: AdapterConfig):
        self.config = config

    # what a subclass provides
    def holds(self, request_id: str) -> bool:
        raise NotImplementedError

    def admit(self, request_id: str, prompt: Sequence[int]) -> int | None:
        """Look the prompt up and allocate the rest in every group: the hit in tokens, None without room."""
        raise NotImplementedError

    def decode(self, request_id: str, token: int) -> bool:
        """One decoded token in every group; False (and nothing changed) without room."""
        raise NotImplementedError

    def free(self, request_id: str) -> None:
        raise NotImplementedError

    def tokens(self, request_id: str) -> int:
        raise NotImplementedError

    # the protocol
    def block_ids(self, group: int) -> Sequence[int]:
        return list(range(1, self.config.blocks_per_group + 1))

    def start(self, request_id: str, prompt: Sequence[int]) -> OpResult:
        """Lookup, then allocate the rest of the prompt, in every group or none."""
        if self.holds(request_id):
            return OpResult(False, "DUPLICATE_REQUEST")
        if not prompt:
            return OpResult(False, "EMPTY_APPEND")
        hit = self.admit(request_id, prompt)
        return OpResult(False, NO_ROOM) if hit is None else OpResult(True, None, hit)

    def append(self, request_id: str, token: int) -> OpResult:
        if not self.holds(request_id):
            return OpResult(False, "UNKNOWN_REQUEST")
        return OpResult(True) if self.decode(request_id, token) else OpResult(False, NO_ROOM)

    def release(self, request_id: str) -> OpResult:
        if not self.holds(request_id):
            return OpResult(False, "UNKNOWN_REQUEST")
        self.free(request_id)
        return OpResult(True)

    def cache(self, request_id: str) -> OpResult:
        """vLLM cached the request's full blocks when it allocated them: nothing left to publish."""
        if not self.holds(request_id):
            return OpResult(False, "UNKNOWN_REQUEST")
        return OpResult(True)

    def length(self, request_id: str) -> int:
        return self.tokens(request_id) if self.holds(request_id) else 0
