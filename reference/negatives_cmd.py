"""``kvexact negatives``: the cumulative failure closure of 0x0CG.

Imports every reference module that registers failure-lab cases, lists the registered
:class:`~kvexact.reference.rejections.NegativeCase` objects by seed section with counts, and compares
them with the counts the seed states (211 in all: 184 for Loops 2-10 and 27 for Loop 11). With
``--run`` it triggers every case and fails unless each is rejected with exactly its named reason.

Exit codes: 0 passed; 1 a case was not rejected by name (``--run``) or a section is short of the seed's
count (``--strict``); 2 usage error; 3 a registering module failed to import.
"""

from __future__ import annotations

import importlib
import pathlib
import re
from collections import Counter

import click

from kvexact.reference.rejections import NegativeCase, negative_cases, rejection_of

# Every reference module known to register cases; a module that has not landed yet is skipped.
REGISTERING_MODULES = [
    "kvexact.reference.manifest",
    "kvexact.reference.keys",
    "kvexact.reference.digests",
    "kvexact.reference.namespaces",
    "kvexact.reference.ledgers",
    "kvexact.reference.formulas",
    "kvexact.reference.translate",
    "kvexact.reference.blockmap",
    "kvexact.reference.pool",
    "kvexact.reference.allocator",
    "kvexact.reference.cow",
    "kvexact.reference.prefix",
    "kvexact.reference.vmm",
    "kvexact.reference.radix",
    "kvexact.reference.shared_prefix",
    "kvexact.reference.modules",
    "kvexact.reference.sessions",
    "kvexact.reference.reuse_gate",
    "kvexact.reference.revocation",
    "kvexact.reference.telemetry",
    "kvexact.reference.negatives_reference1",
]

# Failure-lab counts the seed states, by section (the seed gives no per-section count elsewhere).
SEED_COUNTS = {
    "0x05G": 22,  # allocator, refcount and COW transitions
    "0x06I": 20,  # vAttention mapping
    "0x07G": 22,  # prefix caching
    "0x08I": 18,  # radix index
    "0x0D": 14,  # worked ledger: one-field accounting failures
    "0x0CG": 27,  # Loop 11: declared modules, sessions, reuse gate, isolation, telemetry
}
# Not stated by the seed: the 88 remaining Loop 2-10 cases split evenly over the four unstated labs
# (the convention of reference/negatives_reference1.py); shown with a "*".
DERIVED_COUNTS = {"0x01A": 22, "0x03I": 22, "0x0BH": 22, "0x0BN": 22}
SEED_LOOPS_2_TO_10 = 184
SEED_LOOP_11 = 27
SEED_TOTAL = SEED_LOOPS_2_TO_10 + SEED_LOOP_11  # 211

_REFERENCE_DIR = pathlib.Path(__file__).resolve().parent


def _discovered() -> list[str]:
    """Reference modules whose source registers cases but which the list above does not name yet."""
    found = []
    for path in sorted(_REFERENCE_DIR.glob("*.py")):
        if path.stem in {"rejections", "negatives_cmd"}:
            continue
        if re.search(r"\bregister_negative\(", path.read_text(encoding="utf-8", errors="replace")):
            found.append(f"kvexact.reference.{path.stem}")
    return [m for m in found if m not in REGISTERING_MODULES]


def load_registering_modules() -> tuple[list[str], list[str], dict[str, str]]:
    """Import every registering module: returns (loaded, not yet present, import failures)."""
    loaded, missing, failed = [], [], {}
    for name in REGISTERING_MODULES + _discovered():
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                missing.append(name)
                continue
            failed[name] = f"{type(exc).__name__}: {exc}"
            continue
        except Exception as exc:  # a broken module is reported, never a traceback
            failed[name] = f"{type(exc).__name__}: {exc}"
            continue
        loaded.append(name)
    return loaded, missing, failed


def _section_key(section: str) -> tuple[int, str]:
    m = re.match(r"0x([0-9A-Fa-f]{2})", section)
    return (int(m.group(1), 16) if m else 999, section)


def failures(cases: list[NegativeCase]) -> list[tuple[NegativeCase, str]]:
    """Every case not rejected with exactly its reason, with what happened instead."""
    out = []
    for case in cases:
        try:
            got = rejection_of(case.trigger)
        except Exception as exc:  # an unnamed exception is a failure of the case, not of the command
            out.append((case, f"raised {type(exc).__name__}: {exc}"))
            continue
        if got is not case.reason:
            out.append((case, "accepted" if got is None else f"rejected as {type(got).__name__}.{got.name}"))
    return out


@click.command("negatives")
@click.option("--section", "section", default=None, help="Only this seed section (e.g. 0x08I).")
@click.option("--run", "run_cases", is_flag=True, help="Trigger every case; fail unless rejected by name.")
@click.option("--strict", is_flag=True, help="Fail when a section is short of the seed's count.")
@click.option("--verbose", "-v", is_flag=True, help="List every case, not only the counts.")
def negatives(section: str | None, run_cases: bool, strict: bool, verbose: bool) -> int:
    """List every registered failure-lab case by seed section and compare with the seed's 211."""
    if section is not None and not re.fullmatch(r"0x[0-9A-Fa-f]{2}[A-Z]?", section):
        raise click.UsageError(f"--section must look like 0x08I, got {section!r}")
    loaded, missing, failed = load_registering_modules()
    cases = negative_cases(section)
    by_section = Counter(c.section for c in cases)
    sections = sorted(set(by_section) | ({section} if section else set(SEED_COUNTS) | set(DERIVED_COUNTS)),
                      key=_section_key)
    click.echo(f"{'section':<8} {'registered':>10} {'seed':>5}  status")
    short = []
    for sec in sections:
        have, want = by_section.get(sec, 0), SEED_COUNTS.get(sec)
        derived = DERIVED_COUNTS.get(sec)
        if want is None and derived is None:
            status, shown = "not stated by the seed", "-"
        elif want is None and derived is not None:
            status = "ok (derived)" if have >= derived else f"short by {derived - have} (derived)"
            shown = f"{derived}*"
        elif want is not None:
            status, shown = ("ok" if have >= want else f"short by {want - have}"), str(want)
            if have < want:
                short.append(sec)
        click.echo(f"{sec:<8} {have:>10} {shown:>5}  {status}")
        if verbose:
            for c in sorted((c for c in cases if c.section == sec), key=lambda c: c.reason.name):
                click.echo(f"    {type(c.reason).__name__}.{c.reason.name}: {c.description}")
    total = len(cases)
    loop11 = by_section.get("0x0CG", 0)
    if section is None:
        click.echo(f"total    {total:>10} {SEED_TOTAL:>5}  (Loops 2-10: {total - loop11} vs {SEED_LOOPS_2_TO_10}; "
                   f"Loop 11: {loop11} vs {SEED_LOOP_11})")
    click.echo("* not stated by the seed: the 88 remaining Loop 2-10 cases split evenly over four labs")
    click.echo(f"modules: {len(loaded)} loaded, {len(missing)} not present yet"
               + (f" ({', '.join(m.rsplit('.', 1)[1] for m in missing)})" if missing else ""))
    for name, why in failed.items():
        click.echo(f"could not import {name}: {why}", err=True)
    code = 0
    if run_cases:
        bad = failures(cases)
        for case, what in bad:
            click.echo(f"FAILED {case.section} {type(case.reason).__name__}.{case.reason.name} "
                       f"({case.description}): {what}", err=True)
        click.echo(f"ran {total} cases: {total - len(bad)} rejected by name, {len(bad)} failed")
        code = 1 if bad else 0
    if strict and (short or (section is None and total < SEED_TOTAL)):
        click.echo(f"short of the seed: {', '.join(short) or f'total {total} < {SEED_TOTAL}'}", err=True)
        code = code or 1
    if failed:
        return 3
    return code
