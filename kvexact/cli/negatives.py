"""``kvexact negatives``: the cumulative failure closure of 0x0CG.

Registers every failure lab (:func:`kvexact.reference.labs.register_all`), lists the registered
:class:`~kvexact.reference.rejections.NegativeCase` objects by seed section with counts, and compares
them with the counts the seed states (211 in all: 184 for Loops 2-10 and 27 for Loop 11). With
``--run`` it triggers every case and fails unless each is rejected with exactly its named reason.

Exit codes: 0 passed; 1 a case was not rejected by name (``--run``) or a section is short of the seed's
count (``--strict``); 2 usage error.
"""

from __future__ import annotations

import re
from collections import Counter

import click

from kvexact.reference import labs
from kvexact.reference.rejections import failures


def _section_key(section: str) -> tuple[int, str]:
    m = re.match(r"0x([0-9A-Fa-f]{2})", section)
    return (int(m.group(1), 16) if m else 999, section)


@click.command("negatives")
@click.option("--section", "section", default=None, help="Only this seed section (e.g. 0x08I).")
@click.option("--run", "run_cases", is_flag=True, help="Trigger every case; fail unless rejected by name.")
@click.option("--strict", is_flag=True, help="Fail when a section is short of the seed's count.")
@click.option("--verbose", "-v", is_flag=True, help="List every case, not only the counts.")
def negatives(section: str | None, run_cases: bool, strict: bool, verbose: bool) -> int:
    """List every registered failure-lab case by seed section and compare with the seed's 211."""
    if section is not None and not re.fullmatch(r"0x[0-9A-Fa-f]{2}[A-Z]?", section):
        raise click.UsageError(f"--section must look like 0x08I, got {section!r}")
    cases = labs.cases(section)
    by_section = Counter(c.section for c in cases)
    sections = sorted(set(by_section) | ({section} if section else set(labs.SEED_COUNTS) | set(labs.UNSTATED_LABS)),
                      key=_section_key)
    click.echo(f"{'section':<8} {'registered':>10} {'seed':>5}  status")
    short = []
    for sec in sections:
        have, want = by_section.get(sec, 0), labs.SEED_COUNTS.get(sec)
        if want is None:
            status, shown = ("lab without a seed count: its distinct cases" if sec in labs.UNSTATED_LABS
                             else "not a failure lab of the seed"), "-"
        else:
            status, shown = ("ok (count from the seed)" if have >= want else f"short by {want - have}"), str(want)
            if have < want:
                short.append(sec)
        click.echo(f"{sec:<8} {have:>10} {shown:>5}  {status}")
        if verbose:
            for c in sorted((c for c in cases if c.section == sec), key=lambda c: c.reason.name):
                click.echo(f"    {type(c.reason).__name__}.{c.reason.name}: {c.description}")
    total = len(cases)
    loop11 = by_section.get("0x0CG", 0)
    if section is None:
        click.echo(f"total    {total:>10} {labs.SEED_TOTAL:>5}  (Loops 2-10: {total - loop11} vs {labs.SEED_LOOPS_2_TO_10}; "
                   f"Loop 11: {loop11} vs {labs.SEED_LOOP_11})")
    click.echo(f"seed counts: {', '.join(f'{s} {n}' for s, n in labs.SEED_COUNTS.items())}; "
               f"no count in the seed: {', '.join(labs.UNSTATED_LABS)}")
    click.echo(f"labs: {len(labs.LABS)}")
    code = 0
    if run_cases:
        bad = failures(cases)
        for case, what in bad:
            click.echo(f"FAILED {case.section} {type(case.reason).__name__}.{case.reason.name} "
                       f"({case.description}): {what}", err=True)
        click.echo(f"ran {total} cases: {total - len(bad)} rejected by name, {len(bad)} failed")
        code = 1 if bad else 0
    if strict and (short or (section is None and total < labs.SEED_TOTAL)):
        click.echo(f"short of the seed: {', '.join(short) or f'total {total} < {labs.SEED_TOTAL}'}", err=True)
        code = code or 1
    return code
