"""``kvexact validate-trace SPEC TRACE``: validate a trace recorded elsewhere (NDJSON or ITF)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("spec", type=click.Path(path_type=Path))
@click.argument("trace_path", metavar="TRACE", type=click.Path(path_type=Path))
@click.option("--config", "cfg", type=click.Path(path_type=Path), default=None,
              help="Model config (default: SPEC's .cfg); the trace's constants override its values.")
def validate_trace(spec: Path, trace_path: Path, cfg: Path | None) -> int:
    """Check every step of TRACE as a step of its named action of SPEC (a .tla path or a shipped spec name)."""
    from kvexact.conformance.trace import TraceFormatError, read_trace, validate

    spec_path = _resolve_spec(spec)
    try:
        trace = read_trace(trace_path)
    except TraceFormatError as exc:
        raise click.UsageError(str(exc)) from None
    if trace.spec != spec_path.stem:
        click.echo(f"validate-trace: note: the trace names spec {trace.spec!r}, checking against {spec_path.name}")
    try:
        result = validate(trace, spec_path, cfg)
    except Exception as exc:  # a spec that does not load, or constants it does not declare
        click.echo(f"validate-trace: could not validate: {type(exc).__name__}: {exc}", err=True)
        return 3
    click.echo(result.summary())
    return 0 if result.ok else 1


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
