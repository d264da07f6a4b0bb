"""``kvexact validate-trace SPEC TRACE``: validate a trace recorded elsewhere (NDJSON or ITF)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click


@click.command()
@click.argument("args", nargs=-1, metavar="SPEC TRACE | --events vllm|sglang [FILE]")
@click.option("--config", "cfg", type=click.Path(path_type=Path), default=None,
              help="Model config (default: SPEC's .cfg); the trace's constants override its values.")
@click.option("--engine", type=click.Choice(["steps", "module", "tlc"]), default="steps", show_default=True,
              help="steps: the embedded step API, step by step (names the failing step); module: the "
                   "embedded engine over a generated trace module; tlc: TLC over that module (needs a jar). "
                   "With --events: the log's generated trace spec (every explanation; keep logs short).")
@click.option("--tlc-jar", type=click.Path(path_type=Path), default=None, help="tla2tools.jar (or TLA2TOOLS_JAR).")
@click.option("--write-module", type=click.Path(path_type=Path), default=None,
              help="Also write the generated <Spec>Trace.tla/.cfg into this folder.")
@click.option("--events", type=click.Choice(["vllm", "sglang"]), default=None,
              help="FILE is a runtime's event log (MessagePack batches as its publisher sends them, or their "
                   "JSON form), checked through the event mapping: vLLM's against KVAllocation, SGLang's "
                   "against RadixIndex.")
@click.option("--live", metavar="ENDPOINT", default=None, help="With --events: read a running publisher "
              "(a ZMQ address such as tcp://127.0.0.1:5557) until it is idle for --idle seconds.")
@click.option("--idle", "idle_s", type=float, default=2.0, show_default=True)
@click.option("--max-batches", type=int, default=None, help="With --live: stop after this many batches.")
@click.option("--blocks", type=click.IntRange(1), default=8, show_default=True,
              help="With --events: the runtime's usable blocks (Blocks = 1..N).")
@click.option("--requests", type=click.IntRange(1), default=None,
              help="With --events: requests that may hold blocks at once (Requests = r1..rN; default 2 for "
                   "vllm, 1 for sglang).")
@click.option("--internal-max", type=click.IntRange(0), default=5, show_default=True,
              help="With --events: unlogged allocator steps allowed before each spec step.")
@click.option("--mode", type=click.Choice(["minimal", "exhaustive"]), default="minimal", show_default=True)
def validate_trace(args: tuple[str, ...], cfg: Path | None, engine: str, tlc_jar: Path | None,
                   write_module: Path | None, events: str | None, live: str | None, idle_s: float,
                   max_batches: int | None, blocks: int, requests: int | None, internal_max: int, mode: str) -> int:
    """Check every step of TRACE as a step of its named action of SPEC (a .tla path or a shipped spec name);
    a partial trace (header kind "partial") or a runtime's event log (--events) by a constrained search."""
    from kvexact.conformance.line_schemas import TraceInputError
    from kvexact.conformance.trace import check_fits, read_trace, trace_model, validate
    from kvexact.conformance.trace_module import accepted, write_trace_module

    if events is not None:
        if len(args) != (0 if live else 1):
            raise click.UsageError(f"--events {events} takes one FILE, or none with --live ENDPOINT")
        if engine != "steps":
            return _events_module(events, args[0] if args else None, live, engine, tlc_jar, write_module, blocks,
                                  requests or (1 if events == "sglang" else 2), internal_max, idle_s, max_batches)
        if events == "sglang":
            from kvexact.conformance import sglang_events

            code, text = sglang_events.run_event_log(args[0] if args else None, live, requests=requests or 1,
                                                     internal_max=internal_max, mode=mode, idle_s=idle_s,
                                                     max_batches=max_batches)
        else:
            from kvexact.conformance.vllm_events import run_event_log

            code, text = run_event_log(args[0] if args else None, live, blocks=blocks, requests=requests or 2,
                                       internal_max=internal_max, mode=mode, idle_s=idle_s,
                                       max_batches=max_batches)
        click.echo(text, err=code >= 2)
        return code
    if len(args) != 2:
        raise click.UsageError("validate-trace takes SPEC and TRACE (or --events vllm FILE)")
    spec_path, trace_path = _resolve_spec(Path(args[0])), Path(args[1])
    if _is_partial(trace_path):
        return _partial(spec_path, trace_path, engine, tlc_jar, write_module)
    try:
        trace = read_trace(trace_path)
        check_fits(trace, trace_model(trace, spec_path, cfg), spec_path, str(trace_path))
    except TraceInputError as exc:
        raise click.UsageError(f"{exc} [{exc.kind.name}]") from None
    if trace.spec != spec_path.stem:
        click.echo(f"validate-trace: note: the trace names spec {trace.spec!r}, checking against {spec_path.name}")
    if write_module is not None:
        written = write_trace_module(trace, spec_path, write_module, cfg)
        click.echo(f"validate-trace: wrote {written} and {written.with_suffix('.cfg').name}")
    try:
        if engine == "steps":
            result = validate(trace, spec_path, cfg)
            click.echo(result.summary())
            return 0 if result.ok else 1
        with tempfile.TemporaryDirectory(prefix="kvexact-trace-") as tmp:
            module = write_trace_module(trace, spec_path, Path(tmp), cfg)
            mc = _run_module(module, engine, tlc_jar)
            if mc is None:
                return 3
    except TraceInputError as exc:  # found while stepping: params that are not the action's
        raise click.UsageError(f"{trace_path}: {exc} [{exc.kind.name}]") from None
    except Exception as exc:  # a spec that does not load, constants it does not declare, no JVM
        click.echo(f"validate-trace: could not validate: {type(exc).__name__}: {exc}", err=True)
        return 3
    ok = accepted(mc)
    click.echo(f"trace {'accepted' if ok else 'rejected'} by the {engine} engine over the generated trace module "
               f"({len(trace.records)} steps; {mc.distinct_states} states replayed)")
    return 0 if ok else 1


def _run_module(module: Path, engine: str, tlc_jar: Path | None):
    """Model-check a generated trace module with the embedded engine or TLC (None: no jar given)."""
    if engine == "module":
        from kvexact.spec.checker import check_model

        return check_model(module, module.with_suffix(".cfg"))
    from kvexact.spec.tlc import TlcUnavailable, resolve_jar, run_tlc

    try:  # --tlc-jar, else TLA2TOOLS_JAR, else the CI copy beside the clone (as kvexact check)
        jar = resolve_jar(tlc_jar)
    except TlcUnavailable as exc:
        click.echo(f"validate-trace: --engine tlc: {exc}", err=True)
        return None
    return run_tlc(module, module.with_suffix(".cfg"), jar)


def _partial(spec_path: Path, trace_path: Path, engine: str, tlc_jar: Path | None, write_module: Path | None) -> int:
    """A partial trace: the constrained search (engine steps), or its generated trace spec (module, tlc)."""
    from kvexact.conformance.line_schemas import TraceInputError
    from kvexact.conformance.partial_file import read_partial, validate_partial, write_partial_module

    try:
        pf = read_partial(trace_path)
        if write_module is not None:
            written = write_partial_module(pf, spec_path, write_module)
            click.echo(f"validate-trace: wrote {written} and {written.with_suffix('.cfg').name}")
        if engine == "steps":
            result = validate_partial(pf, spec_path, trace_path.name)
            click.echo(result.summary())
            return 0 if result.ok else 1
        with tempfile.TemporaryDirectory(prefix="kvexact-partial-") as tmp:
            mc = _run_module(write_partial_module(pf, spec_path, Path(tmp)), engine, tlc_jar)
    except TraceInputError as exc:
        raise click.UsageError(f"{exc} [{exc.kind.name}]") from None
    return _module_verdict(mc, "partial trace", engine, f"{len(pf.lines)} lines")


def _module_verdict(mc, what: str, engine: str, size: str) -> int:
    """Exit code and line of a generated trace spec's check (``mc`` None: it could not run)."""
    from kvexact.conformance.trace_module import accepted

    if mc is None:
        return 3
    ok = accepted(mc)
    click.echo(f"{what} {'accepted' if ok else 'rejected'} by the {engine} engine over the generated trace spec "
               f"({size}; {mc.distinct_states} states explored)")
    return 0 if ok else 1


def _events_module(events: str, source: str | None, live: str | None, engine: str, tlc_jar: Path | None,
                   write_module: Path | None, blocks: int, requests: int, internal_max: int, idle_s: float,
                   max_batches: int | None) -> int:
    """A runtime's event log through its generated trace spec (``KVAllocationPartial`` for vLLM,
    ``RadixIndexPartial`` for SGLang) under ``engine``."""
    from kvexact.conformance import sglang_events as se
    from kvexact.conformance import vllm_events as ve
    from kvexact.conformance.partial_trace import PartialRejection, Unmapped

    try:
        raw = ve.load_log(source, live, idle_s, max_batches)
    except ve.EventFormatError as exc:
        click.echo(f"validate-trace: {exc}", err=True)
        return 2
    if not raw:
        click.echo(f"validate-trace: no event batch arrived from {live} within {idle_s} s", err=True)
        return 3

    def write(out: Path) -> Path:
        if events == "vllm":
            return ve.write_event_module(raw, out, blocks, requests, internal_max)
        return se.write_event_module(raw, out, requests, internal_max)

    with tempfile.TemporaryDirectory(prefix=f"kvexact-{events}-") as tmp:
        try:
            for out in [write_module, Path(tmp)] if write_module is not None else [Path(tmp)]:
                module = write(out)
        except Unmapped as exc:
            click.echo(f"rejected at {exc.where}: {PartialRejection.EVENT_NOT_MAPPED.name}: {exc.reason}")
            return 1
        if write_module is not None:
            click.echo(f"validate-trace: wrote {write_module / module.name} and {module.with_suffix('.cfg').name}")
        mc = _run_module(module, engine, tlc_jar)
    name = "vLLM" if events == "vllm" else "SGLang"
    return _module_verdict(mc, f"{name} event log", engine, f"{len(raw)} events")


def _is_partial(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            first = fh.readline(1 << 16)
    except OSError:  # a directory or a missing file: the trace reader names it
        return False
    return b'"partial"' in first and b'"kind"' in first


def _resolve_spec(spec: Path) -> Path:
    if spec.suffix != ".tla":
        from kvexact.spec import spec_dir

        shipped = spec_dir() / f"{spec.name}.tla"
        if shipped.is_file():
            return shipped
        raise click.UsageError(f"{spec}: not a .tla file and not a shipped spec name")
    from kvexact.conformance.line_schemas import TraceInputError
    from kvexact.conformance.trace import read_text

    try:
        read_text(spec, TraceInputError, "a TLA+ spec is a .tla text file")
    except TraceInputError as exc:
        raise click.UsageError(f"{exc} [{exc.kind.name}]") from None
    return spec
