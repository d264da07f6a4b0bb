"""The trace of an adapter's own steps: what the system under test did, next to what the reference did.

A black-box adapter shows only observable facts, so its trace is not a trace of the spec's variables: each
state is one operation the machine applied (``action``, ``params``), the adapter's answer and its
observable state after it, with the reference's answer and state for the same step (``reference_*``).
Written as ITF JSON (Apalache's Informal Trace Format), so the failing step is the one where the two
disagree. Two layouts, one per adapter protocol:

- allocator (:data:`ALLOCATOR_FIELDS`): ``accepted``, ``rejection``, ``copies``, ``tables`` (request -> one
  block list per group) and ``lengths``;
- prefix-index (:data:`INDEX_FIELDS`): ``answer`` (the matched length, the slot granted, the evicted
  slots, or a refusal), ``rows`` (request -> its slots) and ``free_slots``; ``reference_answer`` is what
  the normative index said to the same step (its matched length, or why it refused to follow).

Invariant: one state per adapter operation, in the order the machine applied them, after an ``Init``
state; each state's observable fields are read after its operation (and before the next one).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvexact.spec import itf
from kvexact.spec.files import write_atomic

# field -> its value in the Init state (and in a step that never set it)
ALLOCATOR_FIELDS: dict[str, Any] = {
    "accepted": True, "copies": [], "lengths": {}, "rejection": "", "reference_accepted": True,
    "reference_copies": [], "reference_rejection": "", "reference_tables": {}, "tables": {}}
INDEX_FIELDS: dict[str, Any] = {
    "answer": "", "free_slots": [], "reference_answer": "", "reference_free_slots": [], "rows": {}}


class AdapterTrace:
    """The steps of one example, recorded by a machine as it applies them."""

    def __init__(self, spec: str, adapter: str, fields: dict[str, Any] | None = None):
        self.spec = spec
        self.adapter = adapter
        self.fields = ALLOCATOR_FIELDS if fields is None else fields
        self.steps: list[dict[str, Any]] = []
        self._observed = 0  # steps whose observable state was read

    def record(self, op: str, args: tuple[Any, ...], **fields: Any) -> None:
        """One operation the machine applied to the adapter, with what it answered."""
        self.steps.append({"action": op, "params": [_plain(a) for a in args], **fields})

    def step(self, op: str, args: tuple[Any, ...], result: Any, reference: Any) -> None:
        """An allocator operation: the adapter's and the reference's ``OpResult``."""
        self.record(op, args, accepted=result.accepted, rejection=result.rejection or "",
                    copies=[list(c) for c in result.copies], reference_accepted=reference.accepted,
                    reference_rejection=reference.rejection or "",
                    reference_copies=[list(c) for c in reference.copies])

    def note(self, **fields: Any) -> None:
        """Add to the latest step what was learnt after it was recorded (the reference's answer)."""
        if self.steps:
            self.steps[-1].update(fields)

    def observe(self, **state: Any) -> None:
        """The observable state after the latest step (once per step; later calls change nothing)."""
        if self.steps and self._observed < len(self.steps):
            self.steps[-1].update(state)
            self._observed = len(self.steps)

    def write(self, path: Path) -> None:
        variables = tuple(sorted({"action", "params", *self.fields}))
        empty = {"action": "Init", "params": [], **self.fields}
        states = [({"index": 0, "action": "Init"}, {k: itf.encode_plain(empty[k]) for k in variables})]
        for i, s in enumerate(self.steps, start=1):
            full = {**empty, **s}
            states.append(({"index": i, "action": s["action"]}, {k: itf.encode_plain(full[k]) for k in variables}))
        doc = itf.document(states, variables, {
            "source": f"kvexact: the steps of adapter {self.adapter} in the {self.spec} machine "
                      "(observable state; not the spec's variables)", "spec": self.spec, "adapter": self.adapter})
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")


def _plain(value: Any) -> Any:
    """An operation argument as JSON (sequences as lists, anything else unusual by its repr)."""
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return repr(value)


def start_trace(spec: str, sut: Any, fields: dict[str, Any] | None = None) -> AdapterTrace | None:
    """A trace for ``sut``'s steps when traces are written (``KVEXACT_TRACE_DIR`` set), else None."""
    if sut is None or not os.environ.get("KVEXACT_TRACE_DIR"):
        return None
    return AdapterTrace(spec, str(getattr(sut, "name", "adapter")), fields)


def finish_trace(trace: AdapterTrace | None, failed: bool, observe: Callable[[], None]) -> None:
    """Write ``<spec>.adapter.itf.json`` in ``KVEXACT_TRACE_DIR`` when the example failed (or
    ``KVEXACT_TRACE_ALWAYS=1``), after ``observe`` read the state after the last step."""
    out = os.environ.get("KVEXACT_TRACE_DIR")
    if trace is None or not out or not (failed or os.environ.get("KVEXACT_TRACE_ALWAYS") == "1"):
        return
    try:
        observe()
    except Exception:  # the adapter is broken: keep the steps recorded so far
        pass
    trace.write(Path(out) / f"{trace.spec}.adapter.itf.json")
