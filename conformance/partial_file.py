"""The partial-trace file (NDJSON), its schema, and its validation (``kvexact validate-trace``).

Line 1 is the header: ``{"kind": "partial", "spec": ..., "constants": {...}, "model_values": [...],
"init": {var: value}, "internal": [action, ...], "silent": [var, ...], "internal_max": n, "mode":
"exhaustive" | "minimal"}``; with ``"events": "vllm"`` the file is checked through the vLLM event mapping
(``blocks`` and ``requests`` then give its constants). Every line after it but the last is one step:

- an action line ``{"action": "CacheBlock" | [names], "params": {...}, "state": {var: value},
  "internal_max": n}``: one step of one of the named actions (``[]``: a checkpoint reached by internal
  steps only), with the given parameters and the given variables after it; everything not given is unknown;
- an event line ``{"event": "BlockStored" | "BlockRemoved" | "AllBlocksCleared", "fields": {...}}``: a
  vLLM event with its fields, mapped to spec steps by :mod:`kvexact.conformance.vllm_events`;
- the last line, the end line ``{"kind": "end", "steps": N}``, N counting the step lines: a file without it
  (cut short) is refused as TRUNCATED.

Values are ITF JSON (``{"#set": [...]}``, ``{"#map": [[k, v], ...]}``, ``{"#tup": [...]}``, records as
objects; a string listed in ``model_values`` is that model value). Invariant: every line is checked against
:data:`HEADER_SCHEMA` or :data:`LINE_SCHEMAS` before anything is evaluated; a line that does not fit is
reported as ``FILE:LINE: field F: what is wrong`` (:class:`PartialFormatError`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from kvexact.conformance.line_schemas import (
    HEADER_SCHEMA,
    LINE_SCHEMAS,
    PartialFormatError,
    Rejection,
    shape_problem,
)
from kvexact.conformance.partial_trace import Expect, PartialResult, Search
from kvexact.conformance.trace import ndjson_lines, read_text, step_lines


@attrs.frozen
class PartialFile:
    header: dict[str, Any]
    lines: tuple[tuple[int, dict[str, Any]], ...]  # (line number, parsed line)


def read_partial(path: Path) -> PartialFile:
    """Read and shape-check a partial trace; raises :class:`PartialFormatError` with its :class:`Rejection`."""
    parsed = ndjson_lines(path, read_text(path, PartialFormatError), PartialFormatError, "partial trace")
    n0, header = parsed[0]
    _require(shape_problem(HEADER_SCHEMA, header, f"{path}:{n0}"), " (the first line is the header)")
    steps = step_lines(path, parsed, PartialFormatError)
    for n, doc in steps:
        kind = "event" if isinstance(doc, dict) and "event" in doc else "action"
        _require(shape_problem(LINE_SCHEMAS[kind], doc, f"{path}:{n}"))
        if kind == "event":
            _require(shape_problem(LINE_SCHEMAS[doc["event"]], doc.get("fields", {}), f"{path}:{n}", "fields/"))
            if header.get("events") != "vllm":
                raise PartialFormatError(f"{path}:{n}: field event: an event line needs \"events\": \"vllm\" in "
                                         "the header")
    return PartialFile(header, tuple(steps))


def _require(problem: tuple[Rejection, str] | None, suffix: str = "") -> None:
    if problem is not None:
        raise PartialFormatError(problem[1] + suffix, problem[0])


def file_expects(pf: PartialFile, mvs: frozenset[str], mapping: Any, name: str) -> Iterator[Expect]:
    from kvexact.spec.itf import decode as from_itf

    default_max = pf.header.get("internal_max", 0)
    for n, doc in pf.lines:
        where = f"{name}:{n}"
        if "event" in doc:
            from kvexact.conformance.vllm_events import KVEvent, _event

            ev: KVEvent = _event({"type": doc["event"], **doc.get("fields", {})}, n, where)
            yield from mapping.expects(ev, where)
            continue
        actions = doc["action"] if isinstance(doc["action"], list) else [doc["action"]]
        yield Expect(where, tuple(actions), {k: from_itf(v, mvs) for k, v in doc.get("params", {}).items()},
                     {k: from_itf(v, mvs) for k, v in doc.get("state", {}).items()},
                     doc.get("internal_max", default_max), source=n)


def validate_partial(pf: PartialFile, spec_path: Path, name: str = "trace") -> PartialResult:
    """Run the constrained search of :mod:`partial_trace` over a partial-trace file."""
    from kvexact.conformance.trace import Trace, trace_model
    from kvexact.spec.itf import decode as from_itf

    h = pf.header
    mvs = frozenset(h.get("model_values", []))
    mapping = None
    if h.get("events") == "vllm":
        from kvexact.conformance import vllm_events as ve

        depth = ve.max_depth(ve.normalize((str(n), {"type": d["event"], **d.get("fields", {})})
                                          for n, d in pf.lines if "event" in d))
        requests = h.get("requests", 2)
        model = ve.kv_model(h.get("blocks", 8), requests, depth)
        mapping = ve.VllmMapping(depth, requests, h.get("internal_max", 5))
        search = Search(model, h.get("internal", ve.INTERNAL), h.get("silent", ve.SILENT), view=ve.kv_view,
                        mode=h.get("mode", "minimal"), max_candidates=h.get("max_candidates", 100_000))
    else:
        trace = Trace(h["spec"], h.get("constants", {}), tuple(sorted(mvs)), {}, ())
        model = trace_model(trace, spec_path)
        search = Search(model, h.get("internal", ()), h.get("silent", ()), mode=h.get("mode", "exhaustive"),
                        max_candidates=h.get("max_candidates", 100_000))
    unknown = [a for a in search.internal if a not in search.labels]
    if unknown:
        raise PartialFormatError(f"{name}:1: field internal: {', '.join(unknown)} is not an action "
                                 f"of {spec_path.name}")
    init = {k: from_itf(v, mvs) for k, v in h.get("init", {}).items()}
    return search.run(file_expects(pf, mvs, mapping, name), init)


def generate(pf: PartialFile, spec_path: Path) -> tuple[str, str]:
    """(module text, cfg text) of ``<Spec>Partial`` for an action-line partial trace."""
    from kvexact.conformance.partial_module import trace_spec
    from kvexact.conformance.trace import Trace, trace_model
    from kvexact.conformance.trace_module import declared_constants, tla_literal, trace_cfg

    h = pf.header
    if h.get("events"):
        raise PartialFormatError("an event-mapped partial trace has no generated TLA+ module (use the "
                                 "embedded search)")
    mvs = frozenset(h.get("model_values", []))
    trace = Trace(h["spec"], h.get("constants", {}), tuple(sorted(mvs)), {}, ())
    model = trace_model(trace, spec_path)
    init = tuple(f"{v} = {tla_literal(x, mvs)}" for v, x in h.get("init", {}).items())
    declared = declared_constants(spec_path)
    module = trace_spec(spec_path.stem, f"a partial trace of {h['spec']}", model,
                        file_expects(pf, mvs, None, "trace"), tuple(h.get("internal", [])), tuple(h.get("silent", [])),
                        init, fresh=tuple(sorted(mvs - declared)))
    cfg_path = spec_path.with_suffix(".cfg")
    cfg_text = cfg_path.read_text(encoding="utf-8") if cfg_path.is_file() else ""
    return module, trace_cfg(trace, cfg_text, declared)


def write_partial_module(pf: PartialFile, spec_path: Path, out_dir: Path) -> Path:
    """Write ``<Spec>Partial.tla/.cfg`` and a copy of the spec into ``out_dir``; return the module path."""
    from kvexact.conformance.trace_module import write_beside_spec

    module, cfg = generate(pf, spec_path)
    return write_beside_spec(spec_path, out_dir, f"{spec_path.stem}Partial", module, cfg)
