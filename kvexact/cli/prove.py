"""``kvexact prove``: discharge every z3 proof obligation, list each with its verdict and time."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kvexact.spec.files import write_atomic


@click.command()
@click.option("--timeout-ms", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="z3 timeout per obligation; a timeout is 'unknown', which fails.")
@click.option("--match", "pattern", default=None, help="Only obligations whose name contains this text.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write results as JSON.")
def prove(timeout_ms: int, pattern: str | None, json_path: Path | None) -> int:
    """Prove the obligations (address injectivity, headroom, ledger identities); exit 1 unless all proved."""
    try:
        import z3  # noqa: F401
    except ImportError:
        click.echo("kvexact prove: z3-solver is not installed; nothing was proved", err=True)
        return 3
    from kvexact.conformance.obligations import discharge
    from kvexact.conformance.proofs import all_obligations

    obligations = [o for o in all_obligations() if pattern is None or pattern in o.name]
    if not obligations:
        raise click.UsageError(f"no obligation matches {pattern!r}")
    console = Console()
    table = Table(title="kvexact prove")
    for col in ("obligation", "section", "verdict", "seconds"):
        table.add_column(col)
    results = []
    with console.status("proving") as status:
        for ob in obligations:
            status.update(f"proving {ob.name}")
            r = discharge(ob, timeout_ms)
            results.append((ob, r))
            color = "green" if r.verdict == "proved" else "red"
            table.add_row(escape(ob.name), ob.section, f"[{color}]{r.verdict}[/]", f"{r.seconds:.3f}")
    console.print(table)
    failed = [(o, r) for o, r in results if r.verdict != "proved"]
    for ob, r in failed:
        console.print(f"[bold]{escape(ob.name)}[/] ({escape(ob.description)}): {r.verdict} {escape(r.detail)}",
                      highlight=False)
    if json_path is not None:
        write_atomic(json_path, json.dumps([
            {"name": o.name, "section": o.section, "description": o.description, "verdict": r.verdict,
             "seconds": round(r.seconds, 4), "detail": r.detail} for o, r in results], indent=2) + "\n")
    click.echo(f"prove: {len(results) - len(failed)}/{len(results)} proved")
    return 1 if failed else 0
