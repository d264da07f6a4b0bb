"""``kvexact bench parity``: a campaign of generated models checked by both engines (embedded and TLC);
every disagreement is shrunk and written as a reproducer (Gen.tla, Gen.cfg, WHY.txt) under --out.

Invariant: exit 0 when every compared model agreed, 1 when any disagreed (each one written), 2 on bad
options, 3 when TLC cannot run; the summary line says how many models were compared.
"""

from __future__ import annotations

import time
from pathlib import Path

import click


class _TimeUp(Exception):
    pass


@click.command("parity")
@click.option("--minutes", type=float, default=5.0, show_default=True, help="how long to generate and compare")
@click.option("--max-specs", type=int, default=None, help="stop after this many models as well")
@click.option("--seed", type=int, default=0, show_default=True, help="Hypothesis seed of the campaign")
@click.option("--out", "out", type=click.Path(path_type=Path), default=Path("parity-disagreements"),
              show_default=True, help="folder for the reproducers")
@click.option("--tlc-jar", default=None, help="tla2tools.jar (default: TLA2TOOLS_JAR, then shared/tlc)")
def bench_parity(minutes: float, max_specs: int | None, seed: int, out: Path, tlc_jar: str | None) -> int:
    """Generate small TLA+ models and check each with both engines; write every disagreement."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from kvexact.spec.checker.genspec import gen_specs
    from kvexact.spec.checker.parity import compare, shrink, write_reproducer
    from kvexact.spec.checker.sany import find_jar
    from kvexact.spec.tlc import TlcFailed, TlcUnavailable

    if minutes <= 0 or (max_specs is not None and max_specs < 1):
        raise click.UsageError("--minutes and --max-specs must be positive")
    jar = tlc_jar or find_jar()
    if jar is None or not Path(jar).is_file():
        click.echo("kvexact bench parity: no tla2tools.jar (give --tlc-jar or set TLA2TOOLS_JAR)", err=True)
        return 3
    deadline = time.monotonic() + minutes * 60
    counts = {"compared": 0, "disagreed": 0, "tlc_failed": 0}

    @hseed(seed)
    @settings(max_examples=max_specs or 10**9, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(gen_specs())
    def campaign(spec) -> None:
        if time.monotonic() > deadline or (max_specs is not None and counts["compared"] >= max_specs):
            raise _TimeUp
        try:
            found = compare(spec, jar)
        except TlcFailed:
            counts["tlc_failed"] += 1
            return
        counts["compared"] += 1
        if counts["compared"] % 25 == 0:
            click.echo(f"... {counts['compared']} compared, {counts['disagreed']} disagreements", err=True)
        if not found.agree:
            counts["disagreed"] += 1
            small = shrink(found, jar)
            where = write_reproducer(small, out, counts["disagreed"])
            click.echo(f"disagreement {counts['disagreed']}: {small.why()} -> {where}")

    try:
        campaign()
    except _TimeUp:
        pass
    except TlcUnavailable as exc:
        click.echo(f"kvexact bench parity: {exc}", err=True)
        return 3
    click.echo(f"{counts['compared']} generated models compared, {counts['disagreed']} disagreements"
               + (f", {counts['tlc_failed']} TLC runs failed" if counts["tlc_failed"] else "")
               + (f" (reproducers in {out})" if counts["disagreed"] else ""))
    return 1 if counts["disagreed"] else 0
