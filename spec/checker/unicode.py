"""TLA+'s Unicode spellings (``≜``, ``∀``, ``∈``, ``⟨ ⟩``, ``∧`` ...), read as the ASCII operators
SANY takes them for, before the parser (which knows only ASCII) sees the text.

Invariant: ``to_ascii`` changes only code (never a string literal; comments may gain spaces), maps
each symbol SANY reads as a synonym to that synonym, and keeps alignment: every token that starts
after a blank or is a replaced symbol lands on the same new column in every line, so the columns of
conjunction and disjunction bullets compare as they did. A character SANY does not read as a synonym
(``ℕ``, ``⊤``, box-drawing dashes) is left alone, so the parser rejects it as SANY does.
"""

from __future__ import annotations

# Each symbol SANY 1.8 (tla2sany's operator table and token manager) reads as the ASCII spelling;
# every entry was checked by running SANY on a module that uses it.
SYNONYMS: dict[str, str] = {
    "≜": "==", "∀": "\\A", "∃": "\\E", "⟨": "<<", "⟩": ">>", "↦": "|->", "→": "->", "←": "<-",
    "∧": "/\\", "∨": "\\/", "¬": "~", "⇒": "=>", "⇔": "<=>", "≡": "\\equiv", "≠": "/=",
    "∈": "\\in", "∉": "\\notin", "≤": "=<", "≥": ">=", "⊆": "\\subseteq", "⊂": "\\subset",
    "⊃": "\\supset", "⊇": "\\supseteq", "∩": "\\cap", "∪": "\\cup", "×": "\\X", "□": "[]", "◇": "<>",
    "↝": "~>", "⇸": "-+->", "‥": "..", "…": "...", "∘": "\\o", "⋅": "\\cdot", "⊕": "\\oplus",
    "⊖": "\\ominus", "⊗": "\\otimes", "⊘": "\\oslash", "⊙": "\\odot", "⊎": "\\uplus", "⊓": "\\sqcap",
    "⊔": "\\sqcup", "⊏": "\\sqsubset", "⊑": "\\sqsubseteq", "⊐": "\\sqsupset", "⊒": "\\sqsupseteq",
    "≺": "\\prec", "≻": "\\succ", "⪯": "\\preceq", "⪰": "\\succeq", "∼": "\\sim", "≃": "\\simeq",
    "≈": "\\approx", "≅": "\\cong", "≍": "\\asymp", "≐": "\\doteq", "≪": "\\ll", "≫": "\\gg",
    "∝": "\\propto", "⋆": "\\star", "●": "\\bullet", "◯": "\\bigcirc", "≀": "\\wr", "÷": "\\div",
    "⊢": "|-", "⊣": "-|", "⊨": "|=", "⫤": "=|", "≔": ":=", "⩴": "::=", "‖": "||", "‼": "!!", "⁇": "??",
    "⁺": "^+",
}
_OPERATOR_CHARS = set("~!@#$%^&*-+=|\\/<>:.?")
_SYMBOLS = frozenset(SYNONYMS)


def _replacement(ch: str, nxt: str) -> str:
    """The ASCII for one symbol, with a blank after it where the next character would otherwise
    join it into another token (``∈S`` is ``\\in S``, not ``\\inS``)."""
    rep = SYNONYMS[ch]
    if rep[-1].isalpha():
        glue = nxt.isalnum() or nxt == "_"
    else:
        glue = nxt in _OPERATOR_CHARS
    return rep + " " if glue else rep


def _code_mask(text: str) -> list[bool]:
    """For each character: is it code (not inside a comment or a string literal)?"""
    mask = [True] * len(text)
    i, n, depth = 0, len(text), 0
    while i < n:
        if depth:
            if text.startswith("(*", i):
                depth, step = depth + 1, 2
            elif text.startswith("*)", i):
                depth, step = depth - 1, 2
            else:
                step = 1
            mask[i:i + step] = [False] * step
            i += step
        elif text.startswith("(*", i):
            depth = 1
            mask[i:i + 2] = [False, False]
            i += 2
        elif text.startswith("\\*", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            mask[i:end] = [False] * (end - i)
            i = end
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 2 if text[j] == "\\" else 1
            end = min(j + 1, n)
            mask[i:end] = [False] * (end - i)
            i = end
        else:
            i += 1
    return mask


class Translation:
    """The ASCII text and the way back from its columns to the original ones."""

    def __init__(self, text: str, starts: dict[int, list[int]]):
        self.text = text
        self._starts = starts  # line (1-based) -> new column (0-based) of each original column

    def original_column(self, line: int, col: int) -> int:
        """The original 1-based column of 1-based ``col`` on 1-based ``line``."""
        starts = self._starts.get(line)
        if not starts:
            return col
        best = 0
        for orig, new in enumerate(starts):
            if new <= col - 1:
                best = orig
            else:
                break
        return best + 1


def to_ascii(text: str) -> Translation:
    """``text`` with every Unicode synonym spelled in ASCII, alignment kept (see the module)."""
    if _SYMBOLS.isdisjoint(text):
        return Translation(text, {})
    mask = _code_mask(text)
    lines, reps, offset = text.split("\n"), [], 0
    for line in lines:
        row = {}
        for c, ch in enumerate(line):
            if ch in SYNONYMS and mask[offset + c]:
                row[c] = _replacement(ch, line[c + 1] if c + 1 < len(line) else "")
        reps.append(row)
        offset += len(line) + 1
    width = [1] * (max(len(line) for line in lines) + 1)
    for row in reps:
        for c, rep in row.items():
            width[c] = max(width[c], len(rep))
    target = [0]
    for w in width:
        target.append(target[-1] + w)
    out_lines, starts, offset = [], {}, 0
    for number, (line, row) in enumerate(zip(lines, reps, strict=True), start=1):
        if not row and not any(width[c] > 1 for c in range(len(line))):
            out_lines.append(line)
            offset += len(line) + 1
            continue
        out: list[str] = []
        size, cols = 0, []
        for c, ch in enumerate(line):
            movable = c in row or c == 0 or line[c - 1] == " "
            if movable and mask[offset + c] and size < target[c]:
                out.append(" " * (target[c] - size))
                size = target[c]
            cols.append(size)
            piece = row.get(c, ch)
            out.append(piece)
            size += len(piece)
        out_lines.append("".join(out))
        starts[number] = cols
        offset += len(line) + 1
    return Translation("\n".join(out_lines), starts)

