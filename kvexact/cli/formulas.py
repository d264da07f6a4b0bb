"""``kvexact formulas``: list the formula registry (id, units, convention, seed location)."""

from __future__ import annotations

import json

import click


@click.command("formulas")
@click.option("--json", "as_json", is_flag=True, help="Print the registry as JSON.")
@click.option("--section", default=None, help="Only formulas whose seed location mentions this id, e.g. 0x02.")
def formulas(as_json: bool, section: str | None) -> int:
    """List every registered formula; exit 1 if one lacks units, a convention or a location."""
    from kvexact.reference.formulas import load_all

    registry = load_all()
    rows = [f for f in registry.values() if section is None or section in f.location]
    if section is not None and not rows:
        raise click.UsageError(f"no formula has a seed location matching {section!r}")
    broken = [f.id for f in registry.values() if not (f.units.strip() and f.convention.strip() and f.location.strip())]
    if as_json:
        click.echo(json.dumps([{"id": f.id, "units": f.units, "convention": f.convention, "location": f.location,
                                "params": list(f.params)} for f in rows], indent=2))
    else:
        width = max(len(f.id) for f in rows)
        for f in rows:
            click.echo(f"{f.id:<{width}}  {f.location:<12}  [{f.units}]  {f.convention}")
        click.echo(f"{len(rows)} formulas" + (f" (of {len(registry)})" if section else ""))
    if broken:
        click.echo(f"formulas without units, convention or location: {', '.join(broken)}", err=True)
        return 1
    return 0
