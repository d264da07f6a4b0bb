"""The trace of an adapter's own steps: what the system under test did, next to what the reference did.

A black-box adapter shows only observable facts, so its trace is not a trace of the spec's variables: each
state is one operation the machine applied (``action``, ``params``), the adapter's answer (``accepted``,
``rejection``, ``copies``) and its observable state after it (``tables``: request -> one block list per
group; ``lengths``), with the reference's answer, copies and tables for the same step (``reference_*``). Written as
ITF JSON (Apalache's Informal Trace Format), so the failing step is the one where the two disagree.

Invariant: one state per adapter operation, in the order the machine applied them, after an ``Init``
state; each state's ``tables`` and ``lengths`` are read after its operation (and before the next one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvexact.spec import itf
from kvexact.spec.files import write_atomic

VARIABLES = ("accepted", "action", "copies", "lengths", "params", "reference_accepted", "reference_copies",
             "reference_rejection", "reference_tables", "rejection", "tables")


class AdapterTrace:
    """The steps of one example, recorded by a machine as it applies them."""

    def __init__(self, spec: str, adapter: str):
        self.spec = spec
        self.adapter = adapter
        self.steps: list[dict[str, Any]] = []

    def step(self, op: str, args: tuple[Any, ...], result: Any, reference: Any) -> None:
        self.steps.append({"action": op, "params": [_plain(a) for a in args], "accepted": result.accepted,
                           "rejection": result.rejection or "", "copies": [list(c) for c in result.copies],
                           "reference_accepted": reference.accepted, "reference_rejection": reference.rejection or "",
                           "reference_copies": [list(c) for c in reference.copies]})

    def observe(self, tables: dict[str, list[list[int]]], lengths: dict[str, int],
                reference_tables: dict[str, list[list[int]]]) -> None:
        """The observable state after the latest step (once per step; later calls change nothing)."""
        if self.steps and "tables" not in self.steps[-1]:
            self.steps[-1].update(tables=tables, lengths=lengths, reference_tables=reference_tables)

    def write(self, path: Path) -> None:
        empty = {"accepted": True, "action": "Init", "copies": [], "lengths": {}, "params": [],
                 "reference_accepted": True, "reference_copies": [], "reference_rejection": "", "reference_tables": {}, "rejection": "",
                 "tables": {}}
        states = [({"index": 0, "action": "Init"}, empty)]
        for i, s in enumerate(self.steps, start=1):
            full = {**empty, **s}
            states.append(({"index": i, "action": s["action"]}, {k: itf.encode_plain(full[k]) for k in VARIABLES}))
        doc = itf.document(states, VARIABLES, {
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
