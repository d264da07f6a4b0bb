"""What the `tla` parser's syntax trees need before they mean what SANY reads: SANY's operator
precedence table (prefix operators regrouped where the parser's table differs), and syntax errors
described in TLA+ terms rather than parser token names.

Invariant: ``regroup`` changes a tree only where SANY's table (tla2sany ConfigConstants, precedence
ranges x10) says a prefix operator binds tighter than the infix operator the parser put under it;
SANY reads ``P a Q b`` as ``(P a) Q b`` when P's lowest precedence exceeds Q's highest.
"""

from __future__ import annotations

import re
from typing import Any

# SANY's (low, high) precedence of every operator that has one; synonyms share their entry
INFIX: dict[str, tuple[int, int]] = {
    "=>": (10, 10), "<=>": (20, 20), "\\equiv": (20, 20), "~>": (20, 20), "-+->": (20, 20),
    "/\\": (30, 30), "\\land": (30, 30), "\\/": (30, 30), "\\lor": (30, 30),
    "\\cdot": (50, 140), "@@": (60, 60), ":>": (70, 70), "<:": (70, 70),
    "\\": (80, 80), "\\cap": (80, 80), "\\intersect": (80, 80), "\\cup": (80, 80), "\\union": (80, 80),
    "..": (90, 90), "...": (90, 90), "$": (90, 130), "$$": (90, 130), "??": (90, 130), "##": (90, 130),
    "!!": (90, 130), "\\uplus": (90, 130), "\\sqcap": (90, 130), "\\sqcup": (90, 130), "\\wr": (90, 140),
    "+": (100, 100), "++": (100, 100), "(+)": (100, 100), "\\oplus": (100, 100),
    "%": (100, 110), "%%": (100, 110), "|": (100, 110), "||": (100, 110),
    "\\X": (100, 130), "\\times": (100, 130),
    "-": (110, 110), "--": (110, 110), "(-)": (110, 110), "\\ominus": (110, 110),
    "*": (130, 130), "**": (130, 130), "/": (130, 130), "//": (130, 130), "&": (130, 130), "&&": (130, 130),
    "(.)": (130, 130), "\\odot": (130, 130), "(/)": (130, 130), "\\oslash": (130, 130), "(\\X)": (130, 130),
    "\\otimes": (130, 130), "\\div": (130, 130), "\\star": (130, 130), "\\o": (130, 130), "\\circ": (130, 130),
    "\\bigcirc": (130, 130), "\\bullet": (130, 130), "^": (140, 140), "^^": (140, 140),
}
for _op in ["=", "/=", "#", "\\in", "\\notin", "\\subseteq", "<", ">", "<=", "=<", "\\leq", ">=", "\\geq",
            "|-", "|=", "-|", "=|", ":=", "::=", "\\prec", "\\succ", "\\preceq", "\\succeq", "\\sim", "\\simeq",
            "\\ll", "\\gg", "\\asymp", "\\subset", "\\supset", "\\supseteq", "\\approx", "\\cong", "\\sqsubset",
            "\\sqsubseteq", "\\sqsupset", "\\sqsupseteq", "\\doteq", "\\propto"]:
    INFIX[_op] = (50, 50)

PREFIX: dict[str, tuple[int, int]] = {
    "~": (40, 40), "\\lnot": (40, 40), "\\neg": (40, 40), "[]": (40, 150), "<>": (40, 150),
    "ENABLED": (40, 150), "UNCHANGED": (40, 150), "SUBSET": (100, 130), "UNION": (100, 130),
    "DOMAIN": (100, 130), "-": (120, 120),
}
POSTFIX = {"'", "^+", "^*", "^#"}


def _infix(node: Any) -> tuple[int, int] | None:
    if type(node).__name__ == "OperatorApplication" and node.arguments and len(node.arguments) == 2:
        return INFIX.get(node.operator)
    return None


def _prefix_of(node: Any) -> tuple[int, int] | None:
    if (type(node).__name__ == "OperatorApplication" and node.arguments and len(node.arguments) == 1
            and node.operator not in POSTFIX):
        return PREFIX.get(node.operator)
    return None


def _rotate(prefix: Any, operand: Any) -> Any:
    """``prefix`` applied to ``operand``, regrouped as SANY reads it."""
    low = PREFIX[prefix.operator][0]
    rng = _infix(operand)
    if rng is None or rng[1] >= low:
        return prefix._replace(arguments=[operand], end=getattr(operand, "end", None))
    left, right = operand.arguments
    inner = _rotate(prefix, left)
    return operand._replace(arguments=[inner, right], start=getattr(prefix, "start", None))


def regroup(node: Any) -> Any:
    """The tree with every prefix operator regrouped by SANY's table (children first); an unchanged
    subtree is returned as the same object."""
    if isinstance(node, (list, tuple)) and not hasattr(node, "_fields"):
        items = [regroup(x) for x in node]
        if all(a is b for a, b in zip(items, node, strict=True)):
            return node
        return items if isinstance(node, list) else tuple(items)
    if not hasattr(node, "_fields"):
        return node
    changes = {}
    for f in node._fields:
        if f not in ("symbol", "start", "end"):
            v = getattr(node, f)
            nv = regroup(v)
            if nv is not v:
                changes[f] = nv
    if changes:
        node = node._replace(**changes)
    if _prefix_of(node) is not None:
        operand = node.arguments[0]
        rng = _infix(operand)
        if rng is not None and rng[1] < PREFIX[node.operator][0]:
            return _rotate(node, operand)
    return node


# ----------------------------------------------------------------------------- syntax errors

_TOKEN_WORDS = {
    "DEF_SIG": "the start of the next definition", "EQ_LINE": "the end of the module (====)",
    "DASH_LINE": "a ---- separator line", "END_IF": "ELSE", "EOF": "the end of the file",
}
_KEYWORD_WORDS = {"IF": "IF ... THEN without ELSE", "LET": "LET without IN", "CASE": "an unfinished CASE"}
_OPENERS = {"(": ")", "[": "]", "{": "}", "<<": ">>"}
_CLOSERS = {v: k for k, v in _OPENERS.items()}
_SCAN = re.compile(r'\(\*|\\\*[^\n]*|"(?:[^"\\\n]|\\.)*"|<<|>>_?|[()\[\]{}]|\n')


def _unclosed(text: str, upto: int) -> tuple[str, int] | None:
    """The innermost bracket opened before offset ``upto`` and not closed by then (comments and strings
    skipped): (bracket, offset)."""
    stack: list[tuple[str, int]] = []
    pos = 0
    while pos < upto:
        m = _SCAN.search(text, pos)
        if m is None or m.start() >= upto:
            break
        tok = m.group(0)
        pos = m.end()
        if tok == "(*":
            depth = 1
            while depth and pos < len(text):
                nxt = min((i for i in (text.find("(*", pos), text.find("*)", pos)) if i >= 0), default=-1)
                if nxt < 0:
                    pos = len(text)
                    break
                depth += 1 if text.startswith("(*", nxt) else -1
                pos = nxt + 2
        elif tok in _OPENERS:
            stack.append((tok, m.start()))
        elif tok.rstrip("_") in _CLOSERS:
            want = _CLOSERS[tok.rstrip("_")]
            if stack and stack[-1][0] == want:
                stack.pop()
    return stack[-1] if stack else None


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _offset(text: str, line: int, col: int) -> int:
    """Offset of a 1-based line and column."""
    pos = 0
    for _ in range(line - 1):
        nl = text.find("\n", pos)
        if nl < 0:
            return len(text)
        pos = nl + 1
    return min(pos + col - 1, len(text))


def describe_syntax_error(text: str, parser_output: str) -> tuple[str, int, int] | None:
    """A TLA+ reading of the parser's failure report: (message, line, column), 1-based; None when the
    report has no position."""
    nxt = re.search(r"Next symbol in input:\s*Result\(symbol='(\w+)', value=(.*?), line=(\d+), column=(\d+)",
                    parser_output)
    if nxt is None:
        return None
    symbol, value = nxt.group(1), nxt.group(2).strip("'\"").replace("\\\\", "\\")
    line, col = int(nxt.group(3)) + 1, int(nxt.group(4)) + 1
    top = re.search(r"Top of stack `results` has end line: (\d+), and column: (\d+)", parser_output)
    scopes = re.search(r"`scopes_stack`:\s*\[(.*?)\]", parser_output)
    expected = re.search(r"Expected to insert token:\s*(\w+)", parser_output)
    what = _TOKEN_WORDS.get(symbol, f"'{value}'")
    ends_unit = symbol in ("DEF_SIG", "EQ_LINE", "DASH_LINE") or value in (
        "VARIABLE", "VARIABLES", "CONSTANT", "CONSTANTS", "ASSUME", "THEOREM", "INSTANCE")
    offset = _offset(text, line, col)
    open_ = _unclosed(text, offset)
    if ends_unit:
        # the mistake is before: point at the end of what was read, say what is unfinished
        if top is not None:
            line, col = int(top.group(1)) + 1, int(top.group(2)) + 1
        if open_ is not None:
            bl, bc = _line_col(text, open_[1])
            return (f"'{open_[0]}' opened at line {bl}, column {bc} is never closed with '{_OPENERS[open_[0]]}' "
                    f"before {what}", bl, bc)
        scope = scopes.group(1).strip("'\" ") if scopes else ""
        if expected is not None and expected.group(1) in _TOKEN_WORDS:
            return f"IF ... THEN without ELSE: the expression ends before {what}", line, col
        if scope in _KEYWORD_WORDS:
            return f"{_KEYWORD_WORDS[scope]}: the expression ends before {what}", line, col
        return f"the expression is incomplete (an operand or keyword is missing) before {what}", line, col
    prev = text[:offset].rstrip()
    prev_tok = prev.split()[-1] if prev.split() else ""
    rest = text[offset:].split("\n", 1)
    if len(rest) == 2 and symbol == "NAME" and not rest[0].strip()[len(value):].strip() and value in INFIX:
        return f"the operator {value} at the end of the line has no right operand", line, col
    if value in INFIX and prev_tok in INFIX:
        return f"unexpected {what} right after '{prev_tok}': an operand is missing between them", line, col
    if open_ is not None and symbol in ("EQ_LINE",):
        bl, bc = _line_col(text, open_[1])
        return f"'{open_[0]}' opened at line {bl}, column {bc} is never closed", bl, bc
    return f"unexpected {what}" + (f" after '{prev_tok}'" if prev_tok else ""), line, col


# ----------------------------------------------------------------------------- precedence conflicts

# synonyms read as one operator (SANY compares the canonical operator, so `\cup` after `\union` is the
# same operator and associates)
_CANON = {"\\land": "/\\", "\\lor": "\\/", "\\equiv": "<=>", "#": "/=", "=<": "<=", "\\leq": "<=",
          "\\geq": ">=", "\\times": "\\X", "\\intersect": "\\cap", "\\union": "\\cup", "\\circ": "\\o",
          "(+)": "\\oplus", "(-)": "\\ominus", "(.)": "\\odot", "(/)": "\\oslash", "(\\X)": "\\otimes",
          "\\lnot": "~", "\\neg": "~"}
# the infix operators SANY lets repeat without parentheses (`a + b + c`), grouped to the left
LEFT_ASSOC = {"/\\", "\\/", "\\cdot", "@@", "\\cap", "\\cup", "+", "++", "\\oplus", "-", "--", "\\ominus",
              "%%", "|", "||", "*", "**", "&", "&&", "\\odot", "\\otimes", "\\star", "\\o", "\\bigcirc",
              "\\bullet", "$", "$$", "??", "##", "\\uplus", "\\sqcap", "\\sqcup", "\\X"}
POSTFIX_PREC = (150, 150)


class PrecedenceConflict(Exception):
    """Two operators whose precedence ranges overlap, written without parentheses (as SANY rejects)."""

    def __init__(self, left: str, right: str, before: Any):
        super().__init__(f"{left} and {right}")
        self.left, self.right, self.before = left, right, before  # ``before``: the operand ``right`` follows


def _canon(op: str) -> str:
    return _CANON.get(op, op)


def _kind_of(node: Any) -> tuple[str, tuple[int, int]] | None:
    """('infix' | 'prefix' | 'postfix', precedence) of an operator application written with its symbol."""
    if type(node).__name__ != "OperatorApplication" or not node.arguments or node.nonfix:
        return None
    if len(node.arguments) == 2 and node.operator in INFIX:
        return "infix", INFIX[node.operator]
    if len(node.arguments) == 1:
        if node.operator in POSTFIX:
            return "postfix", POSTFIX_PREC
        if node.operator in PREFIX:
            return "prefix", PREFIX[node.operator]
    return None


def _flatten(node: Any, out: list) -> None:
    """The operands and operator symbols of an expression as written (parentheses keep a group whole)."""
    todo: list[tuple[Any, bool]] = [(node, False)]
    while todo:
        item, emit = todo.pop()
        kind = None if emit else _kind_of(item)
        if emit or kind is None:
            out.append((item, _kind_of(item) if emit else None))
        elif kind[0] == "infix":
            todo += [(item.arguments[1], False), (item, True), (item.arguments[0], False)]
        elif kind[0] == "prefix":
            todo += [(item.arguments[0], False), (item, True)]
        else:
            todo += [(item, True), (item.arguments[0], False)]


def _name(node: Any, fix: str) -> str:
    return "-." if fix == "prefix" and node.operator == "-" else _canon(node.operator)


def _check_group(node: Any) -> None:
    """Read one operator group as SANY's operator stack does (tla2sany OperatorStack.reduceStack)."""
    tokens: list = []
    _flatten(node, tokens)
    if len(tokens) < 3:
        return
    stack: list = []  # None: an operand; (node, fix, (low, high), canonical name): an operator

    def reduce_before(right: Any, fix: str, rng: tuple[int, int]) -> None:
        name = _name(right, fix)
        while len(stack) >= 2 and stack[-1] is None and stack[-2] is not None:
            left, lfix, (llow, lhigh), lname = stack[-2]
            same = lname == name and fix == lfix == "infix"
            if llow > rng[1] or (same and name in LEFT_ASSOC):
                del stack[-2 if lfix == "prefix" else -3:]
                stack.append(None)
            elif lhigh < rng[0]:
                return
            else:
                raise PrecedenceConflict(left.operator, right.operator, right.arguments[0])

    for tok, kind in tokens:
        if kind is None:
            stack.append(None)
        elif kind[0] == "prefix":
            # a prefix minus right after an operator binding tighter than it (`a ^ -b`): SANY reads the
            # minus as infix first and refuses the pair
            if tok.operator == "-" and stack and stack[-1] is not None and stack[-1][2][0] > kind[1][1]:
                raise PrecedenceConflict(stack[-1][0].operator, "-", stack[-1][0].arguments[-1])
            stack.append((tok, "prefix", kind[1], _name(tok, "prefix")))
        else:
            reduce_before(tok, kind[0], kind[1])
            if kind[0] == "infix":
                stack.append((tok, "infix", kind[1], _name(tok, "infix")))


def check_precedence(tree: Any) -> None:
    """Raise :class:`PrecedenceConflict` at the first pair of operators SANY's precedence table (ranges
    and associativity) leaves ambiguous; parentheses and bulleted lists start fresh groups."""
    stack = [tree]
    while stack:  # depth first, in the order of the text
        node = stack.pop()
        if isinstance(node, (list, tuple)) and not hasattr(node, "_fields"):
            stack.extend(reversed(node))
            continue
        if not hasattr(node, "_fields"):
            continue
        if _kind_of(node) is not None:  # the whole operator group, then the operands it contains
            _check_group(node)
            tokens: list = []
            _flatten(node, tokens)
            stack.extend(tok for tok, kind in reversed(tokens) if kind is None)
            continue
        children = [getattr(node, f) for f in node._fields if f not in ("symbol", "start", "end")]
        stack.extend(c for c in reversed(children) if isinstance(c, (list, tuple)) or hasattr(c, "_fields"))


def conflict_position(text: str, conflict: PrecedenceConflict) -> tuple[int, int]:
    """1-based (line, column) of the second operator of a conflict, found in the text after the operand
    it follows; that operand's start when the token cannot be found."""
    end = getattr(conflict.before, "end", None)
    start = getattr(conflict.before, "start", None)
    if end is None or start is None:
        return 1, 1
    hit = text.find(conflict.right, _offset(text, end.line + 1, end.column + 1))
    return _line_col(text, hit) if hit >= 0 else (start.line + 1, start.column + 1)
