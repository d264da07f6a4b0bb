"""``kvexact formulas``: list the formula registry (id, units, convention, seed location), or the seed's catalog."""

from __future__ import annotations

import json

import click

SEED_STATED = 78  # 0x10A: "The final registry contains 78 formulas from Loops 3-11."


@click.command("formulas")
@click.option("--json", "as_json", is_flag=True, help="Print the registry as JSON.")
@click.option("--section", default=None, help="Only formulas whose seed location mentions this id, e.g. 0x02.")
@click.option("--catalog", is_flag=True, help="List the seed's display equations and the ids implementing each.")
def formulas(as_json: bool, section: str | None, catalog: bool) -> int:
    """List every registered formula; exit 1 if one lacks units, a convention or a location."""
    from kvexact.reference.formulas_all import load_all
    from kvexact.reference.formulas_seed import CATALOG, PROSE, seed_formula_ids

    registry = load_all()
    if catalog:
        for e in CATALOG:
            if section is None or e.section.startswith(section):
                click.echo(f"{e.section:<6} line {e.line:<5} {e.shows}\n    -> {', '.join(e.ids) or e.none_because}")
        return 0
    rows = [f for f in registry.values() if section is None or section in f.location]
    if section is not None and not rows:
        raise click.UsageError(f"no formula has a seed location matching {section!r}")
    broken = [f.id for f in registry.values() if not (f.units.strip() and f.convention.strip() and f.location.strip())]
    display = seed_formula_ids()
    if as_json:
        click.echo(json.dumps([{"id": f.id, "units": f.units, "convention": f.convention, "location": f.location,
                                "params": list(f.params), "arithmetic": f.arithmetic,
                                "stated_in": "display equation" if f.id in display else PROSE.get(f.id, "")}
                               for f in rows], indent=2))
    else:
        width = max(len(f.id) for f in rows)
        for f in rows:
            kind = "z3" if f.arithmetic else "int"
            click.echo(f"{f.id:<{width}}  {f.location:<12}  {kind:<3}  [{f.units}]  {f.convention}")
        click.echo(f"{len(rows)} formulas" + (f" (of {len(registry)})" if section else ""))
        if section is None:
            shown = sum(1 for e in CATALOG if e.ids)
            click.echo(f"{len(display)} from {shown} of the seed's {len(CATALOG)} display equations, {len(PROSE)} "
                       f"from its prose and code blocks; 0x10A states {SEED_STATED} (kvexact formulas --catalog)")
    if broken:
        click.echo(f"formulas without units, convention or location: {', '.join(broken)}", err=True)
        return 1
    return 0
