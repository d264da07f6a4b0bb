"""``kvexact prompt-cache SCHEMA PROMPT``: parse Prompt Cache markup (seed 0x0CB), populate the schema's
modules, assemble the prompt and print each segment with its source (cache or compute) and positions.

Exit codes: 0 assembled; 1 the assembly was refused by name (a stale or mismatched module); 2 usage
error or malformed markup (one line naming the file, the rejection and the line).
"""

from __future__ import annotations

import json
from pathlib import Path

import click


def _ranges(positions: tuple[int, ...]) -> str:
    runs: list[list[int]] = []
    for p in positions:
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs) or "-"


@click.command("prompt-cache")
@click.argument("schema_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("prompt_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--cached", default="all", show_default=True,
              help="Modules populated before the prompt arrives: all, none, or a comma-separated list.")
@click.option("--populated-generation", type=int, default=None,
              help="Populate under this schema generation instead of the schema's own (shows invalidation).")
@click.option("--json", "as_json", is_flag=True, help="Print the segments as JSON.")
def prompt_cache(schema_file: Path, prompt_file: Path, cached: str, populated_generation: int | None,
                 as_json: bool) -> int:
    """Assemble PROMPT against SCHEMA: declared modules are imported only on a full H_module hit."""
    import attrs

    from kvexact.reference import prompt_cache as pc
    from kvexact.reference.modules import Namespace
    from kvexact.reference.rejections import Rejected

    namespace = Namespace("cli", 0, frozenset({"cli"}))
    current = "schema"
    try:
        schema = pc.parse_schema(schema_file.read_text())
        names = {"all": list(schema.modules), "none": []}.get(cached)
        names = names if names is not None else [n.strip() for n in cached.split(",") if n.strip()]
        unknown = [n for n in names if n not in schema.modules]
        if unknown:
            raise click.UsageError(f"--cached: {', '.join(unknown)} not declared in {schema_file}")
        producer = schema if populated_generation is None else attrs.evolve(schema, generation=populated_generation)
        store = pc.ModuleStore().populate(producer, names, namespace, "cli", "cli")
        if producer is not schema:
            store, dropped = store.revise_schema(schema)
            click.echo(f"invalidated (generation {populated_generation} -> {schema.generation}): "
                       f"{', '.join(dropped) or 'none'}", err=True)
        current = "prompt"
        segments = pc.assemble_markup("cli", prompt_file.read_text(), schema, store, namespace, "cli", "cli")
    except Rejected as exc:
        where = schema_file if current == "schema" else prompt_file
        if isinstance(exc.reason, pc.MarkupRejection):
            raise click.UsageError(f"{where}: {exc}") from None
        click.echo(f"refused: {where}: {exc}")
        return 1
    except (OSError, UnicodeDecodeError) as exc:
        raise click.UsageError(f"cannot read: {exc}") from None
    if as_json:
        click.echo(json.dumps([{"segment": s.module_id, "source": s.source, "positions": list(s.position_ids)}
                               for s in segments], indent=2))
        return 0
    width = max((len(s.module_id) for s in segments), default=7)
    for s in segments:
        click.echo(f"{s.module_id:<{width}}  {s.source:<7}  {len(s.position_ids):>3} tokens  "
                   f"positions {_ranges(s.position_ids)}")
    click.echo(f"gaps below {schema.end}: {_ranges(pc.gaps(segments, schema.end))}")
    return 0
