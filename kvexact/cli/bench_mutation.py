"""``kvexact bench mutation``: mutation testing over ``reference/`` and the kernels' host code, killed by the
golden tests (a pytest selection) and the kernels' differential check (:mod:`kvexact.gate.mutation`), or with
``--target adapter`` over the code behind the adapters, killed only by the machines run through them; a
benchmark, not a test.

It mutates the source files in place one mutant at a time (cosmic-ray restores each), so nothing else may
run from this checkout meanwhile. Exit 0 when it ran (survivors are figures, not failures), 2 on bad usage
(an unknown module, an equivalent without a reason), 130 on Ctrl-C (the file being mutated is restored).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from kvexact.spec.files import write_atomic


@click.command("mutation")
@click.option("--target", type=click.Choice(["reference", "adapter"]), default="reference", show_default=True,
              help="reference: kvexact's reference and kernels' host code, killed by the golden tests and the kernel "
                   "differential; adapter: the code behind the adapters (profiles, reference adapter, example "
                   "runtime), killed only by the machines run through each adapter")
@click.option("--module", "modules", multiple=True, metavar="PATTERN",
              help="module(s) to mutate, e.g. reference.prefix or 'reference.*' (repeatable; default: reference.* "
                   "but the failure lab, kernels.paged, kernels.shared, kernels.device)")
@click.option("--max-mutants", type=int, default=None, help="run a uniform sample of this many (fixed by --seed)")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the sample")
@click.option("--list", "list_only", is_flag=True, help="count the mutants per module and exit")
@click.option("--coverage-map", "map_path", type=click.Path(path_type=Path), default=None,
              help="reuse (or write) the checks' line coverage here; remeasured when the sources changed")
@click.option("--timeout-factor", type=float, default=4.0, show_default=True,
              help="a probe may take 60 s + this times its checks' unmutated seconds (then it counts as killed)")
@click.option("--checks", "only", default="", metavar="NAME,...",
              help="the killers: pytest selections (golden: tests/reference/golden/test_golden.py) and quick gate checks "
                   "(default: golden,kernels-differential; a mutant no killer executes counts as not executed)")
@click.option("--rejudge", "rejudge_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="judge again the mutants a previous --json report left unkilled (found by key in today's sources) "
                   "instead of a sample")
@click.option("--then", "then", default="", metavar="NAME,...",
              help="then probe every survivor on a line these killers execute with them (e.g. machines)")
@click.option("--then-map", "then_map_path", type=click.Path(path_type=Path), default=None,
              help="reuse (or write) the --then checks' line coverage here")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="write every result here")
@click.option("--table", "table_path", type=click.Path(path_type=Path), default=None,
              help="write the Markdown score table and the survivors here")
def bench_mutation(target: str, modules: tuple[str, ...], max_mutants: int | None, seed: int, list_only: bool,
                   map_path: Path | None, timeout_factor: float, only: str, rejudge_path: Path | None, then: str,
                   then_map_path: Path | None, json_path: Path | None, table_path: Path | None) -> int:
    """Mutate reference/ and the kernels' host code; report the score per module and the survivors."""
    from kvexact.gate import mutation as mu

    if max_mutants is not None and max_mutants < 1:
        raise click.UsageError(f"--max-mutants must be at least 1, got {max_mutants}")
    try:
        default_modules, default_killers = mu.TARGETS[target]
        chosen = mu.select_modules(modules or default_modules)
        equivalents = mu.load_equivalents(target=target)
        checks = mu.fast_checks((n for n in only.split(",") if n), default_killers)
        then_checks = mu.fast_checks(n for n in then.split(",") if n) if then else []
    except mu.MutationInputError as exc:
        raise click.UsageError(str(exc)) from None
    every = mu.enumerate_mutants(chosen, mu.SKIPPED_BY_TARGET.get(target))
    if list_only:
        for name in chosen:
            click.echo(f"{name:36} {sum(m.module == name for m in every):6} mutants")
        click.echo(f"{'total':36} {len(every):6} mutants")
        return 0
    missing: list[str] = []
    if rejudge_path is not None:
        try:
            previous = json.loads(rejudge_path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise click.UsageError(f"--rejudge {rejudge_path}: not a JSON report: {exc}") from None
        picked, missing = mu.rejudge_list(previous, every)
        click.echo(f"bench mutation: re-judging {len(picked)} unkilled mutants of {rejudge_path}"
                   + (f"; {len(missing)} no longer found: " + "; ".join(missing) if missing else ""), err=True)
    else:
        picked = mu.sample(every, max_mutants, seed)
        click.echo(f"bench mutation: {len(picked)} of {len(every)} mutants of {len(chosen)} modules"
                   + (f" (uniform sample, seed {seed})" if len(picked) < len(every) else ""), err=True)
    coverage_map = _coverage_map(map_path, checks)
    started = time.monotonic()
    meta = {"target": target, "seed": seed, "sampled": len(picked), "of": len(every), "modules": list(chosen),
            "rejudged": str(rejudge_path) if rejudge_path else None, "missing": missing,
            "fast_level": {"level": mu.FAST_CHECKS_LEVEL, "profile": "ci", "gate_seed": 0, "checks": checks,
                           "then": then_checks}}
    done: list[mu.MutantResult] = []

    def on_result(i: int, n: int, r: mu.MutantResult) -> None:
        done.append(r)
        if json_path is not None:  # after each mutant, so an interrupted run keeps its figures
            write_atomic(json_path, json.dumps(mu.report(done, {**meta, "complete": False}), indent=1) + "\n")
        m = r.mutant
        by = f" by {r.killed_by}" if r.killed_by else ""
        click.echo(f"[{i + 1}/{n}] {m.module}:{m.line} {m.operator.removeprefix('core/')} -> {r.outcome.value}{by} "
                   f"({r.seconds:.1f} s; {time.monotonic() - started:.0f} s elapsed)", err=True)

    results = mu.run_mutants(picked, coverage_map, equivalents, timeout_factor, on_result,
                             uncalled=mu.UNCALLED_BY_ADAPTERS if target == "adapter" else None)
    if then_checks:
        then_map = _coverage_map(then_map_path, then_checks)
        done[:] = results

        def on_second(i: int, n: int, r: mu.MutantResult) -> None:
            done[:] = [r if d.mutant == r.mutant else d for d in done]
            if json_path is not None:
                write_atomic(json_path, json.dumps(mu.report(done, {**meta, "complete": False}), indent=1) + "\n")
            m = r.mutant
            by = f" by {r.killed_by}" if r.killed_by else ""
            click.echo(f"[then {i + 1}/{n}] {m.module}:{m.line} {m.operator.removeprefix('core/')} -> "
                       f"{r.outcome.value}{by} ({r.seconds:.1f} s; {time.monotonic() - started:.0f} s elapsed)",
                       err=True)

        results = mu.second_stage(results, then_map, timeout_factor, on_second)
    table = mu.render_table(mu.scores(results))
    survivors = mu.survivors_text(results)
    click.echo(table + ("\nSurvivors and equivalents:\n" + survivors if survivors else ""))
    if table_path is not None:
        write_atomic(table_path, table + ("\n" + survivors if survivors else ""))
    if json_path is not None:
        meta.update(complete=True, seconds=round(time.monotonic() - started, 1))
        write_atomic(json_path, json.dumps(mu.report(results, meta), indent=1) + "\n")
    return 0


def _coverage_map(path: Path | None, checks: list[str]) -> dict[str, Any]:
    """The checks' coverage map, read from ``path`` when it is for today's sources and these checks, else measured
    (and written there)."""
    from kvexact.gate import mutation as mu

    if path is not None and path.exists():
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached.get("digest") == mu.sources_digest() and sorted(cached["checks"]) == sorted(checks):
            return dict(cached)
        click.echo(f"bench mutation: the sources or the checks changed since {path}; measuring again", err=True)
    measured = mu.measure_coverage(lambda text: click.echo(text, err=True), checks)
    if path is not None:
        write_atomic(path, json.dumps(measured) + "\n")
    return measured
