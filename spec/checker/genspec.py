"""Small TLA+ models drawn by Hypothesis, for holding the embedded engine to TLC (parity.py).

A model is a :class:`GenSpec`: variables of a few kinds (an integer, a boolean, a set, a function, a
record, a sequence, a function over symmetric model values), actions that update some variables and
leave the rest UNCHANGED (sets, functions, records, sequences, quantifiers, CHOOSE, LET, a recursive
operator, a recursive function and functions applied as guards (which TLC enumerates), EXCEPT, IF/CASE,
stuttering, a guard before or after the assignments), invariants, and optionally action and temporal
properties under weak fairness and a SYMMETRY. Invariant of the strategy: every model is valid TLA+ (SANY accepts it)
and its state space is finite and small (every value stays in a small bounded range), so both engines
finish it in well under a second of search; an evaluation error is drawn only on purpose (``Oops``).
"""

from __future__ import annotations

import attrs
from hypothesis import strategies as st

K = 3  # integers stay in 0..K-1
SEQ_MAX = 2


@attrs.frozen
class GenSpec:
    variables: tuple[str, ...]
    init: tuple[str, ...]  # one conjunct per variable
    actions: tuple[tuple[str, str], ...]  # (name, body)
    invariants: tuple[tuple[str, str], ...]
    properties: tuple[tuple[str, str], ...]
    fairness: bool
    symmetry: bool
    deadlock: bool

    def parts(self) -> list[tuple[str, int]]:
        """The removable pieces, for shrinking a reproducer: (field, index)."""
        return ([("actions", i) for i in range(len(self.actions))]
                + [("invariants", i) for i in range(len(self.invariants))]
                + [("properties", i) for i in range(len(self.properties))])

    def without(self, part: tuple[str, int]) -> GenSpec | None:
        field, i = part
        items = getattr(self, field)
        if field == "actions" and len(items) == 1:
            return None
        return attrs.evolve(self, **{field: items[:i] + items[i + 1:]})

    def module(self, name: str = "Gen") -> str:
        vs = ", ".join(self.variables)
        lines = [f"---- MODULE {name} ----", "EXTENDS Naturals, Sequences, FiniteSets, TLC",
                 "CONSTANT P", f"VARIABLES {vs}", f"vars == <<{vs}>>",
                 "RECURSIVE Sum(_)", "Sum(n) == IF n = 0 THEN 0 ELSE n + Sum(n - 1)",
                 "Up[i \\in 0..3] == IF i = 0 THEN TRUE ELSE \\E j \\in 1..3 : j >= i /\\ Up[i - 1]",
                 "Oops == CHOOSE v \\in {} : TRUE",
                 "Init ==\n    " + "\n    ".join(f"/\\ {c}" for c in self.init)]
        for aname, body in self.actions:
            lines.append(f"{aname} ==\n    {body}")
        lines.append("Next == " + " \\/ ".join(a for a, _ in self.actions))
        fair = " /\\ WF_vars(Next)" if self.fairness else ""
        lines.append(f"Spec == Init /\\ [][Next]_vars{fair}")
        for iname, body in self.invariants + self.properties:
            lines.append(f"{iname} == {body}")
        lines.append("Sym == Permutations(P)")
        lines.append("====")
        return "\n".join(lines) + "\n"

    def cfg(self) -> str:
        out = ["CONSTANT P = {p1, p2}", "SPECIFICATION Spec"]
        out += [f"INVARIANT {n}" for n, _ in self.invariants]
        out += [f"PROPERTY {n}" for n, _ in self.properties]
        if self.symmetry:
            out.append("SYMMETRY Sym")
        if not self.deadlock:
            out.append("CHECK_DEADLOCK FALSE")
        return "\n".join(out) + "\n"


# variable kinds: (name, type invariant, initial values, update expressions, a state predicate)
def _int_exprs(v: str) -> list[str]:
    return [f"({v} + 1) % {K}", f"({v} * 2) % {K}", f"IF {v} = 0 THEN {K - 1} ELSE {v} - 1",
            f"LET t == {v} + 2 IN t % {K}", f"CHOOSE w \\in 0..{K - 1} : w # {v}",
            f"CASE {v} = 0 -> 1 [] {v} = 1 -> 2 [] OTHER -> 0", f"Sum({v}) % {K}", "0"]


KINDS = {
    "x": (f"x \\in 0..{K - 1}", ["x = 0", "x \\in 0..1"], _int_exprs("x"),
          ["x = 0", "x < 2", "x # 1", "Up[x + 1]", f"[i \\in 0..{K - 1} |-> \\E j \\in 0..{K - 1} : j >= i][x]",
           f"\\E j \\in 0..{K - 1} : j >= x"]),
    "b": ("b \\in BOOLEAN", ["b = FALSE", "b \\in BOOLEAN"], ["~b", "TRUE", "b = FALSE"], ["b", "~b"]),
    "s": ("s \\subseteq 1..3", ["s = {}", "s = {1}"],
          ["s \\cup {1}", "s \\ {1}", "{v \\in s : v # 2}", "{(v % 3) + 1 : v \\in s}", "s \\cup {Cardinality(s) + 1}"],
          ["s = {}", "2 \\in s", "Cardinality(s) < 2", "\\A v \\in s : v < 3", "\\E v \\in s : v = 1"]),
    "f": (f"f \\in [{{1, 2}} -> 0..{K - 1}]", ["f = [i \\in {1, 2} |-> 0]", "f \\in [{1, 2} -> {0, 1}]"],
          [f"[f EXCEPT ![1] = (@ + 1) % {K}]", "[i \\in {1, 2} |-> f[3 - i]]", f"[f EXCEPT ![2] = (f[1] + 1) % {K}]"],
          ["f[1] = 0", "f[1] = f[2]", "\\E i \\in DOMAIN f : f[i] > 0"]),
    "r": (f"r \\in [a : 0..{K - 1}, c : BOOLEAN]", ["r = [a |-> 0, c |-> TRUE]"],
          [f"[r EXCEPT !.a = (@ + 1) % {K}]", "[r EXCEPT !.c = ~@]", "[a |-> 0, c |-> r.a = 1]"],
          ["r.c", "r.a = 0", "r.a < 2 \\/ r.c"]),
    "q": (f"q \\in Seq(0..{K - 1}) /\\ Len(q) <= {SEQ_MAX}", ["q = <<>>", "q = <<1>>"],
          [f"IF Len(q) < {SEQ_MAX} THEN Append(q, Len(q)) ELSE Tail(q)", "IF q = <<>> THEN q ELSE Tail(q)",
           f"IF Len(q) < {SEQ_MAX} THEN <<0>> \\o q ELSE <<>>", "SubSeq(q, 1, 1)"],
          ["q = <<>>", "Len(q) < 2", "\\A i \\in 1..Len(q) : q[i] < 2"]),
    "g": ("g \\in [P -> 0..1]", ["g = [p \\in P |-> 0]"],
          ["[g EXCEPT ![CHOOSE p \\in P : g[p] = 0] = 1]", "[p \\in P |-> 0]"],
          ["\\A p \\in P : g[p] = 0", "\\E p \\in P : g[p] = 1"]),
}


@st.composite
def _action(draw, name: str, variables: tuple[str, ...], oops: bool) -> tuple[str, str]:
    changed = draw(st.lists(st.sampled_from(variables), min_size=0, max_size=len(variables), unique=True))
    conj = []
    guard = None
    if draw(st.booleans()):
        v = draw(st.sampled_from(variables))
        guard = draw(st.sampled_from(KINDS[v][3]))
    guard_last = guard is not None and draw(st.booleans())  # after every assignment: TLC's fast path tests it
    if guard is not None and not guard_last:
        conj.append(guard)
    for v in variables:
        if v in changed:
            e = draw(st.sampled_from(KINDS[v][2]))
            if v == "g" and draw(st.booleans()):  # an existential over the symmetric set
                conj.append("\\E p \\in P : g' = [g EXCEPT ![p] = 1 - @]")
            elif v == "x" and draw(st.integers(0, 3)) == 0:
                conj.append(f"\\E k \\in 0..1 : x' = (x + k) % {K}")
            else:
                conj.append(f"{v}' = ({e})")
    unchanged = [v for v in variables if v not in changed]
    if unchanged:
        conj.append("UNCHANGED <<" + ", ".join(unchanged) + ">>")
    if guard_last:
        conj.append(guard)
    if oops:
        conj.append("Oops = 1")
    return name, "\n    ".join(f"/\\ {c}" for c in conj)


@st.composite
def gen_specs(draw) -> GenSpec:
    """A small model (see the module docstring)."""
    variables = tuple(draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=3, unique=True)))
    init = tuple(draw(st.sampled_from(KINDS[v][1])) for v in variables)
    n_actions = draw(st.integers(1, 3))
    oops_at = draw(st.integers(0, 12))  # an evaluation error in one action, now and then
    actions = tuple(draw(_action(f"A{i}", variables, oops_at == i)) for i in range(n_actions))
    invariants = [("TypeOK", " /\\ ".join(f"({KINDS[v][0]})" for v in variables))]
    if draw(st.booleans()):
        v = draw(st.sampled_from(variables))
        invariants.append(("Inv", draw(st.sampled_from(KINDS[v][3]))))
    properties = []
    fairness = draw(st.booleans())
    if draw(st.integers(0, 2)) == 0:
        v = draw(st.sampled_from(variables))
        p, q = draw(st.sampled_from(KINDS[v][3])), draw(st.sampled_from(KINDS[v][3]))
        form = draw(st.sampled_from(["[]<>({p})", "<>[]({p})", "({p}) ~> ({q})", "[](({p}) => <>({q}))",
                                     "[][{v}' = {v} \\/ ({q})']_vars", "<>({p})"]))
        properties.append(("Prop", form.format(p=p, q=q, v=v)))
    symmetry = "g" in variables and not properties and draw(st.booleans())
    return GenSpec(variables, init, actions, tuple(invariants), tuple(properties), fairness, symmetry,
                   draw(st.booleans()))
