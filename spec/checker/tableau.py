"""The tableau of an LTL formula over ``[]`` and ``<>`` (in negation normal form, see temporal.py): a
graph whose infinite paths, read with its acceptance sets, are exactly the behaviours of the formula.

A node is ``(lits, nexts, waiting)``: the literals that hold at its position (a state literal on the
state, an action literal on the step that leaves it), the formulas the next position must satisfy, and
the ``<>f`` whose ``f`` it postpones. Invariant: a path of nodes satisfies the formula iff, for every
``<>f`` of the formula, it passes infinitely often through a node that does not wait on ``<>f``
(generalized Büchi acceptance, one set per ``<>f``).
"""

from __future__ import annotations

import attrs

Node = tuple[frozenset, frozenset, frozenset]


def expand(formulas: list) -> set[Node]:
    """Every consistent way of making ``formulas`` hold at one position."""
    found: set[Node] = set()
    work: list[tuple[list, frozenset, frozenset, frozenset]] = [(list(formulas), frozenset(), frozenset(),
                                                               frozenset())]
    while work:
        todo, lits, nexts, waiting = work.pop()
        dead = False
        while todo and not dead:
            f = todo.pop()
            tag = f[0]
            if tag == "lit":
                if (f[1], not f[2]) in lits:
                    dead = True
                lits = lits | {(f[1], f[2])}
            elif tag == "and":
                todo.extend(f[1])
            elif tag == "or":
                if not f[1]:
                    dead = True
                    continue
                for g in f[1][1:]:
                    work.append((todo + [g], lits, nexts, waiting))
                todo.append(f[1][0])
            elif tag == "box":
                todo.append(f[1])
                nexts = nexts | {f}
            elif tag == "dia":
                if f in nexts:  # already postponed on this branch: fulfilling it now is the other branch
                    continue
                work.append((list(todo), lits, nexts | {f}, waiting | {f}))
                todo.append(f[1])
            else:
                raise ValueError(f"not a temporal formula in NNF: {f!r}")
        if not dead:
            found.add((lits, nexts, waiting))
    return found


@attrs.define
class Tableau:
    nodes: list  # Node
    init: list[int]
    succ: list[list[int]]
    accept: list[frozenset[int]]  # per <>f of the formula: the nodes that do not wait on it

    @property
    def size(self) -> int:
        return len(self.nodes)


def build(formula: tuple) -> Tableau:
    ids: dict[Node, int] = {}
    nodes: list[Node] = []
    succ: list[list[int]] = []

    def node_id(nd: Node) -> int:
        i = ids.get(nd)
        if i is None:
            i = ids[nd] = len(nodes)
            nodes.append(nd)
            succ.append([])
        return i
    init = sorted(node_id(nd) for nd in expand([formula]))
    done = 0
    while done < len(nodes):
        nd = nodes[done]
        succ[done] = sorted(node_id(x) for x in expand(list(nd[1])))
        done += 1
    dias = sorted({f for nd in nodes for f in nd[1] if f[0] == "dia"} | {f for nd in nodes for f in nd[2]},
                  key=repr)
    accept = [frozenset(i for i, nd in enumerate(nodes) if f not in nd[2]) for f in dias]
    return Tableau(nodes, init, succ, accept)
