"""Step validation of the vAttention reference against ``spec/VirtualMapping.tla``.

:class:`VmmTraceRecorder` observes every committed reference step (:func:`kvexact.reference.vmm.observe`),
whose name is its spec action in snake_case, and records it with the projection of the successor state onto
the spec's variables; :meth:`VmmTraceRecorder.validate` checks every step as a step of its action (and every
state against the CI model's invariants) with the trace validator the allocator machines use.

Projection, variable by variable: ``phase``, ``created`` as they are; a spec handle is one complete page
bundle (``config.tensors`` reference handles ``k*T .. k*T+T-1`` are spec handle ``k+1``; the reference takes
the lowest free handles, so bundles stay aligned, and a misaligned one is reported); ``freeH`` the bundles
whose handles are all free; ``pages``, ``ready``, ``gen``, ``active``, ``valid`` per slot. ``data`` (who last
wrote each bundle) is kept here from the ``write_rows`` steps, and ``readOk`` stays TRUE: a read the reference
accepts claims its rows are valid, and the spec's ``RequireUse`` judges that claim. One ``write_rows`` of k rows
is k ``WriteRows`` steps (the spec writes a row per step), recorded with the valid count after each row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvexact.reference import vmm
from kvexact.spec import itf
from kvexact.spec.itf import Fn

SPEC = "VirtualMapping"
MAX_GEN = 10**6  # only the finite models' CONSTRAINT reads it: out of the way of a trace


class ProjectionError(ValueError):
    """A reference state the spec cannot represent (a page bundle that is not an aligned handle group)."""


class VmmTraceRecorder:
    """The reference's committed steps as VirtualMapping actions; attach with :meth:`attach`."""

    spec = SPEC

    def __init__(self, config: vmm.VmmConfig) -> None:
        self.config = config
        self.tensors = config.tensors
        self.data: dict[int, tuple[int, int]] = {h: (0, 0) for h in self.handles()}  # NoOwner: <<min slot, 0>>
        self.initial_state: dict[str, Any] | None = None
        self.records: list[dict[str, Any]] = []
        self.error: str | None = None

    def handles(self) -> list[int]:
        return list(range(1, self.config.handles // self.tensors + 1))

    def constants(self) -> dict[str, Any]:
        return {"Slots": set(range(self.config.request_slots)), "Handles": set(self.handles()),
                "PageTokens": self.config.page_tokens, "MaxPages": self.config.pages_per_request,
                "MaxGen": MAX_GEN}

    def attach(self, state: vmm.VmmState) -> None:
        """Start recording from ``state`` (the initial state of the trace)."""
        self.initial_state = self.project(state)
        vmm.observe(self.on_step)

    def detach(self) -> None:
        vmm.unobserve(self.on_step)

    def mark(self) -> tuple[int, dict[int, tuple[int, int]]]:
        """Where the trace stands, to :meth:`rollback` to when a composite step is rejected (the reference
        is functional: a rejected step leaves its input state, whatever its inner steps committed)."""
        return len(self.records), dict(self.data)

    def rollback(self, mark: tuple[int, dict[int, tuple[int, int]]]) -> None:
        del self.records[mark[0]:]
        self.data = dict(mark[1])

    def _bundle(self, page: tuple[int, ...]) -> int:
        k = page[0] // self.tensors
        if tuple(page) != tuple(range(k * self.tensors, (k + 1) * self.tensors)):
            raise ProjectionError(f"page bundle {page} is not one aligned group of {self.tensors} handles")
        return k + 1

    def project(self, state: vmm.VmmState, valid: dict[int, int] | None = None) -> dict[str, Any]:
        """The ITF values of the spec's variables (``valid`` overrides some slots' valid rows)."""
        free = {h // self.tensors + 1 for h in state.free_handles}
        free = {b for b in free if all(h in state.free_handles
                                       for h in range((b - 1) * self.tensors, b * self.tensors))}
        slots = state.slots
        return itf.encode_plain({
            "phase": state.phase, "created": state.handles_created, "freeH": free,
            "pages": Fn({s.slot: [self._bundle(p) for p in s.pages] for s in slots}),
            "ready": Fn({s.slot: s.ready_pages for s in slots}),
            "gen": Fn({s.slot: s.generation for s in slots}),
            "active": Fn({s.slot: s.active for s in slots}),
            "valid": Fn({s.slot: (valid or {}).get(s.slot, s.valid_tokens) for s in slots}),
            "data": Fn({h: owner for h, owner in self.data.items()}),
            "readOk": True,
        })

    def on_step(self, op: str, before: vmm.VmmState, after: vmm.VmmState, detail: Any) -> None:
        if self.error is not None:
            return
        try:
            self._record(op, before, after, detail)
        except ProjectionError as exc:
            self.error = f"{op}: {exc}"

    def _add(self, action: str, params: dict[str, Any], state: dict[str, Any]) -> None:
        self.records.append({"action": action, "params": itf.encode_plain(params), "state": state})

    def _record(self, op: str, before: vmm.VmmState, after: vmm.VmmState, detail: Any) -> None:
        d = detail if isinstance(detail, dict) else {}
        if op == "write_rows":  # one WriteRows step per row
            s = after.slot(d["slot"])
            start, end = d["rows"]
            for t in range(start, end):
                self.data[self._bundle(s.pages[t // self.config.page_tokens])] = (s.slot, s.generation)
                self._add(op, {"s": s.slot}, self.project(after, {s.slot: t + 1}))
            return
        params: dict[str, Any] = {}
        if "slot" in d:
            params["s"] = d["slot"]
        if op == "map_bundle":
            params["async"] = bool(d["asynchronous"])
        elif op == "free_reqid":
            params["unmap"] = bool(d["unmap"])
        elif op == "require_use":
            params["n"] = d["tokens"]
        self._add(op, params, self.project(after))

    def validate(self, out: Path | None = None) -> Any:
        """The trace validator's verdict on the recorded steps (``out``: also write the trace there)."""
        from kvexact.conformance.trace import trace_from_recorder, validate, write_itf
        from kvexact.spec import spec_dir

        assert self.initial_state is not None, "attach() first"
        trace = trace_from_recorder(self, self.constants(), ())
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            write_itf(trace, out / f"{SPEC}.itf.json")
        return validate(trace, spec_dir() / f"{SPEC}.tla", spec_dir() / f"{SPEC}.cfg")
