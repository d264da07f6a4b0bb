"""SYMMETRY sets that are not groups: TLC checks the group the set generates (MVPerm.permutationSubgroup
composes the given permutations until nothing new appears), so Permutations(A) \\union Permutations(B)
also permutes A and B together."""

from __future__ import annotations

from tla_snippets import NOLOCK, write_spec

from kvexact.spec.checker import check_model
from kvexact.spec.checker.result import Outcome
from kvexact.spec.checker.symmetry import Symmetry
from kvexact.spec.checker.values import Fcn, ModelValue

A = [ModelValue(f"sa{i}") for i in (1, 2, 3)]
B = [ModelValue(f"sb{i}") for i in (1, 2, 3)]
ORDERS = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]


def _perms(vals: list[ModelValue]) -> list[Fcn]:
    """Permutations(vals) of three values, the identity included."""
    return [Fcn({vals[i]: vals[o[i]] for i in range(3)}) for o in ORDERS]


def test_union_of_two_permutation_sets_is_closed_into_their_product_group():
    """5 + 5 moving permutations generate S3 x S3: 36 elements, 35 besides the identity, and the nine
    pairs <<a_i, b_j>> form one orbit (<<a2, b2>> reaches <<a1, b1>> only by moving both)."""
    sym = Symmetry(_perms(A) + _perms(B))
    assert sym.n == 35
    assert len({sym.key((a, b)) for a in A for b in B}) == 1


def test_a_group_is_kept_as_given():
    sym = Symmetry(_perms(A))
    assert sym.n == 5
    assert len({sym.key((a, b)) for a in A for b in A}) == 2  # the diagonal and the rest


def test_symmetry_set_that_is_not_a_group_counts_the_orbits_of_its_group(tmp_path):
    """The nine states <<a_i, b_j>> (no step) under Permutations(A) \\union Permutations(B): one orbit of
    S3 x S3, so one distinct state; 9 initial states and its one (stuttering) successor generated."""
    body = ("CONSTANTS A, B\nVARIABLES x, y\nInit == x \\in A /\\ y \\in B\nNext == UNCHANGED <<x, y>>\n"
            "Sym == Permutations(A) \\union Permutations(B)")
    cfg = NOLOCK + "CONSTANTS A = {sa1, sa2, sa3}\n B = {sb1, sb2, sb3}\nSYMMETRY Sym\n"
    r = check_model(write_spec(tmp_path, body, cfg))
    assert (r.outcome, r.distinct_states, r.generated_states) == (Outcome.SUCCESS, 1, 9 + 1)
