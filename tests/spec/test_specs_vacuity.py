"""No invariant of a shipped CI model is vacuous: each one is the first to die in some seeded-bug mutant.

An invariant that no realistic bug can break alone (it follows from the others, or from the definitions
it sits on) checks nothing; the only exceptions are listed with the invariants that imply them.
"""

from __future__ import annotations

from kvexact.gate.spec_checks import SPECS as SPEC_ACTIONS
from kvexact.spec import spec_dir
from kvexact.spec.mutants import discover_mutants

# Invariants implied by later ones of the same model: a violation of these always violates the named ones
# too, so no mutant can break them alone; they stay first in the model to name the first symptom.
IMPLIED = {
    ("NamespaceRevocation", "NoReceiptAfterRevocation"): ("RevocationComplete", "ReceiptsLeased"),
}


def ci_invariants(spec: str) -> list[str]:
    return (spec_dir() / f"{spec}.cfg").read_text().split("INVARIANTS", 1)[1].split()


def test_every_invariant_has_a_mutant_that_dies_of_it():
    named = {(m.name.split("_", 1)[0], m.invariant) for m in discover_mutants()}
    missing = [(spec, inv) for spec in SPEC_ACTIONS for inv in ci_invariants(spec)
               if inv != "TypeOK" and (spec, inv) not in named and (spec, inv) not in IMPLIED]
    assert missing == [], f"invariants no mutant breaks (vacuous or untested): {missing}"


def test_implied_invariants_are_listed_with_invariants_of_the_same_model():
    for (spec, inv), implying in IMPLIED.items():
        invariants = ci_invariants(spec)
        assert inv in invariants and set(implying) <= set(invariants), (spec, inv, implying)
        assert (spec, inv) not in {(m.name.split("_", 1)[0], m.invariant) for m in discover_mutants()}
