"""The generated-spec differential: one small model checked by both engines (TLC in a child JVM, one per
model), compared on what the agreement contract names; a disagreement is shrunk to a minimal
reproducer (.tla + .cfg) by dropping actions, invariants and properties while it persists.

Invariant of :func:`compare`: ``agree`` is True exactly when the outcomes are equal, the violated
invariant or property (if any) has the same name, and the distinct and generated state counts are
equal; the TLC result is TLC's own (never filled in from the embedded one).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import attrs

from kvexact.spec.checker.engine import check_model
from kvexact.spec.checker.genspec import GenSpec
from kvexact.spec.checker.result import ModelCheckResult

NAMED_KINDS = {"invariant", "action-property", "property-init", "temporal", "deadlock"}


@attrs.frozen
class Comparison:
    spec: GenSpec
    embedded: ModelCheckResult
    tlc: ModelCheckResult

    def _key(self, r: ModelCheckResult) -> tuple:
        """Outcome (the error class for errors), the violated invariant or property, and the counts
        where TLC reports them (it prints none when an initial state fails or the model does not load)."""
        v = r.violation
        name = v.name if v is not None and v.kind in NAMED_KINDS else None
        if self.tlc.distinct_states == 0 and self.tlc.generated_states == 0:
            return r.outcome, name, None, None
        return r.outcome, name, r.distinct_states, r.generated_states

    @property
    def agree(self) -> bool:
        return self._key(self.embedded) == self._key(self.tlc)

    def why(self) -> str:
        e, t = self._key(self.embedded), self._key(self.tlc)
        fields = ("outcome", "violated", "distinct", "generated")
        return "; ".join(f"{f}: embedded {a} vs TLC {b}" for f, a, b in zip(fields, e, t, strict=True)
                         if a != b)


def _write(spec: GenSpec, folder: Path) -> Path:
    (folder / "Gen.tla").write_text(spec.module())
    (folder / "Gen.cfg").write_text(spec.cfg())
    return folder / "Gen.tla"


def compare(spec: GenSpec, jar: str | Path) -> Comparison:
    """Both engines on one model (TLC with one worker, as the counts are defined for)."""
    from kvexact.spec.tlc import run_tlc
    with tempfile.TemporaryDirectory(prefix="kvexact-parity-") as tmp:
        path = _write(spec, Path(tmp))
        ours = check_model(path, coverage=False)
        theirs = run_tlc(path, None, str(jar), workers=1)
    return Comparison(spec, ours, theirs)


def shrink(found: Comparison, jar: str | Path, budget: int = 12) -> Comparison:
    """The smallest model (fewest parts, greedily) that still disagrees; at most ``budget`` TLC runs."""
    best = found
    changed = True
    while changed and budget > 0:
        changed = False
        for part in best.spec.parts():
            smaller = best.spec.without(part)
            if smaller is None or budget <= 0:
                continue
            budget -= 1
            trial = compare(smaller, jar)
            if not trial.agree:
                best, changed = trial, True
                break
    return best


def write_reproducer(found: Comparison, folder: Path, index: int) -> Path:
    """``folder/disagreement_NNN/Gen.tla`` and ``Gen.cfg``, with both results in ``WHY.txt``."""
    out = Path(folder) / f"disagreement_{index:03d}"
    out.mkdir(parents=True, exist_ok=True)
    _write(found.spec, out)
    lines = [found.why()]
    for name, r in (("embedded", found.embedded), ("TLC", found.tlc)):
        v = r.violation
        lines.append(f"{name}: {r.outcome.value}, {r.distinct_states} distinct, {r.generated_states} generated"
                     + (f"; {v.kind} {v.name}: {v.message}" if v is not None else ""))
    (out / "WHY.txt").write_text("\n".join(lines) + "\n")
    return out
