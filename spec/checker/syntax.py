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
