"""``kvexact prove``: discharge every z3 proof obligation, list each with its verdict, z3 resource use and time."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kvexact.spec.files import write_atomic


@click.command()
@click.option("--rlimit", type=click.IntRange(min=1), default=None,
              help="z3 resource limit per obligation (default: PROOF_RLIMIT, 7,000,000); running out of it is "
                   "'unknown: rlimit exhausted', which fails. Deterministic: it does not depend on load.")
@click.option("--match", "pattern", default=None, help="Only obligations whose name contains this text.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write results as JSON.")
def prove(rlimit: int | None, pattern: str | None, json_path: Path | None) -> int:
    """Prove the obligations (address injectivity, headroom, ledger identities); exit 1 unless all proved."""
    try:
        import z3  # noqa: F401
    except ImportError:
        click.echo("kvexact prove: z3-solver is not installed; nothing was proved", err=True)
        return 3
    from kvexact.conformance.obligations import PROOF_RLIMIT, ProofVerdict, discharge
    from kvexact.conformance.proofs import all_obligations

    obligations = [o for o in all_obligations() if pattern is None or pattern in o.name]
    if not obligations:
        raise click.UsageError(f"no obligation matches {pattern!r}")
    console = Console()
    table = Table(title="kvexact prove")
    limit = PROOF_RLIMIT if rlimit is None else rlimit
    for col in ("obligation", "section", "verdict", "rlimit used", "seconds"):
        table.add_column(col)
    results = []
    with console.status("proving") as status:
        for ob in obligations:
            status.update(f"proving {ob.name}")
            r = discharge(ob, limit)
            results.append((ob, r))
            color = "green" if r.verdict is ProofVerdict.PROVED else "red"
            table.add_row(escape(ob.name), ob.section, f"[{color}]{r.verdict.value}[/]", f"{r.rlimit_used:,}",
                          f"{r.seconds:.3f}")
    console.print(table)
    failed = [(o, r) for o, r in results if r.verdict is not ProofVerdict.PROVED]
    for ob, r in failed:
        console.print(f"[bold]{escape(ob.name)}[/] ({escape(ob.description)}): {r.verdict.value} ({r.verdict.name}) "
                      f"{escape(r.detail)}",
                      highlight=False)
    if json_path is not None:
        write_atomic(json_path, json.dumps([
            {"name": o.name, "section": o.section, "description": o.description, "verdict": r.verdict.value,
             "rlimit": limit, "rlimit_used": r.rlimit_used, "seconds": round(r.seconds, 4), "detail": r.detail} for o, r in results], indent=2) + "\n")
    costliest = max(results, key=lambda p: p[1].rlimit_used)
    click.echo(f"prove: {len(results) - len(failed)}/{len(results)} proved; rlimit {limit:,} per obligation, "
               f"the costliest ({costliest[0].name}) used {costliest[1].rlimit_used:,}")
    return 1 if failed else 0
