"""``kvexact validate-trace SPEC TRACE``: validate a trace recorded elsewhere (NDJSON or ITF)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click


@click.command()
@click.argument("spec", type=click.Path(path_type=Path))
@click.argument("trace_path", metavar="TRACE", type=click.Path(path_type=Path))
@click.option("--config", "cfg", type=click.Path(path_type=Path), default=None,
              help="Model config (default: SPEC's .cfg); the trace's constants override its values.")
@click.option("--engine", type=click.Choice(["steps", "module", "tlc"]), default="steps", show_default=True,
              help="steps: the embedded step API, step by step (names the failing step); module: the "
                   "embedded engine over a generated trace module; tlc: TLC over that module (needs a jar).")
@click.option("--tlc-jar", type=click.Path(path_type=Path), default=None, help="tla2tools.jar (or TLA2TOOLS_JAR).")
@click.option("--write-module", type=click.Path(path_type=Path), default=None,
              help="Also write the generated <Spec>Trace.tla/.cfg into this folder.")
def validate_trace(spec: Path, trace_path: Path, cfg: Path | None, engine: str, tlc_jar: Path | None,
                   write_module: Path | None) -> int:
    """Check every step of TRACE as a step of its named action of SPEC (a .tla path or a shipped spec name)."""
    from kvexact.conformance.trace import TraceFormatError, read_trace, validate
    from kvexact.conformance.trace_module import accepted, write_trace_module

    spec_path = _resolve_spec(spec)
    try:
        trace = read_trace(trace_path)
    except TraceFormatError as exc:
        raise click.UsageError(str(exc)) from None
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
            if engine == "module":
                from kvexact.spec.checker import check_model

                mc = check_model(module, module.with_suffix(".cfg"))
            else:
                jar = str(tlc_jar) if tlc_jar else os.environ.get("TLA2TOOLS_JAR")
                if not jar:
                    click.echo("validate-trace: --engine tlc needs --tlc-jar or TLA2TOOLS_JAR", err=True)
                    return 3
                from kvexact.spec.tlc import run_tlc

                mc = run_tlc(module, module.with_suffix(".cfg"), jar)
    except Exception as exc:  # a spec that does not load, constants it does not declare, no JVM
        click.echo(f"validate-trace: could not validate: {type(exc).__name__}: {exc}", err=True)
        return 3
    ok = accepted(mc)
    click.echo(f"trace {'accepted' if ok else 'rejected'} by the {engine} engine over the generated trace module "
               f"({len(trace.records)} steps; {mc.distinct_states} states replayed)")
    return 0 if ok else 1


def _resolve_spec(spec: Path) -> Path:
    if spec.suffix != ".tla":
        from kvexact.spec import spec_dir

        shipped = spec_dir() / f"{spec.name}.tla"
        if shipped.is_file():
            return shipped
        raise click.UsageError(f"{spec}: not a .tla file and not a shipped spec name")
    if not spec.is_file():
        raise click.UsageError(f"{spec}: no such spec file")
    return spec
