"""TLC model configuration (.cfg) files: the grammar of TLC's ModelConfig.

Invariant: every keyword is recognized or reported with file:line:col; a value is an integer, a string,
TRUE/FALSE, a set ``{...}`` (nested), or any other identifier, which is a model value.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs

from kvexact.spec.checker.values import ModelValue

LIST_KEYWORDS = {
    "CONSTANT": "constants", "CONSTANTS": "constants",
    "CONSTRAINT": "constraints", "CONSTRAINTS": "constraints",
    "ACTION_CONSTRAINT": "action_constraints", "ACTION_CONSTRAINTS": "action_constraints",
    "INVARIANT": "invariants", "INVARIANTS": "invariants",
    "PROPERTY": "properties", "PROPERTIES": "properties",
    "POSTCONDITION": "postconditions", "POSTCONDITIONS": "postconditions",
}
SINGLE_KEYWORDS = {"INIT", "NEXT", "SPECIFICATION", "VIEW", "SYMMETRY", "ALIAS", "CHECK_DEADLOCK"}


class ConfigError(Exception):
    """A malformed or inconsistent cfg (TLC exit 151)."""


@attrs.define
class Config:
    path: str = ""
    constants: dict[str, Any] = attrs.field(factory=dict)  # name -> value
    overrides: dict[str, str] = attrs.field(factory=dict)  # name -> definition name (C <- Def)
    # module-scoped forms C = [M] v and C <- [M] Def, keyed by (module, name)
    scoped_constants: dict[tuple[str, str], Any] = attrs.field(factory=dict)
    scoped_overrides: dict[tuple[str, str], str] = attrs.field(factory=dict)
    constraints: list[str] = attrs.field(factory=list)
    action_constraints: list[str] = attrs.field(factory=list)
    invariants: list[str] = attrs.field(factory=list)
    properties: list[str] = attrs.field(factory=list)
    postconditions: list[str] = attrs.field(factory=list)
    init: str | None = None
    next: str | None = None
    specification: str | None = None
    view: str | None = None
    symmetry: str | None = None
    alias: str | None = None
    check_deadlock: bool = True
    locations: dict[str, str] = attrs.field(factory=dict)  # name -> "file:line:col"


_TOKEN = re.compile(r'\s+|\\\*[^\n]*|\(\*|"(?:[^"\\]|\\.)*"|<-|[A-Za-z0-9_]+(?:!\w+)*|[{}=,\[\]()!]|.')


def _tokens(text: str, path: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    depth = 0
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def where(p: int) -> str:
        line = max(i for i, s in enumerate(line_starts) if s <= p)
        return f"{path}:{line + 1}:{p - line_starts[line] + 1}"

    while pos < len(text):
        if depth:
            nxt_open = text.find("(*", pos)
            nxt_close = text.find("*)", pos)
            if nxt_close < 0:
                raise ConfigError(f"{where(pos)}: unterminated comment")
            if 0 <= nxt_open < nxt_close:
                depth += 1
                pos = nxt_open + 2
            else:
                depth -= 1
                pos = nxt_close + 2
            continue
        m = _TOKEN.match(text, pos)
        assert m is not None
        tok = m.group(0)
        if tok == "(*":
            depth = 1
        elif not tok.isspace() and not tok.startswith("\\*"):
            out.append((tok, where(pos)))
        pos = m.end()
    return out


def parse_cfg(path: str | Path) -> Config:
    """Parse a cfg file; raise ConfigError with file:line:col on bad input."""
    text = Path(path).read_text()
    return parse_cfg_text(text, str(path))


def parse_cfg_text(text: str, path: str = "<cfg>") -> Config:
    toks = _tokens(text, path)
    cfg = Config(path=path)
    i = 0
    section: str | None = None
    seen_single: set[str] = set()

    def value(j: int) -> tuple[Any, int]:
        tok, loc = toks[j]
        if tok == "{":
            items = []
            j += 1
            if toks[j][0] == "}":
                return frozenset(), j + 1
            while True:
                v, j = value(j)
                items.append(v)
                if j >= len(toks):
                    raise ConfigError(f"{loc}: unterminated set")
                if toks[j][0] == ",":
                    j += 1
                elif toks[j][0] == "}":
                    return frozenset(items), j + 1
                else:
                    raise ConfigError(f"{toks[j][1]}: expected ',' or '}}' in a set, found {toks[j][0]!r}")
        if tok.startswith('"'):
            return tok[1:-1].encode().decode("unicode_escape"), j + 1
        if tok.isdigit():
            return int(tok), j + 1
        if tok in ("TRUE", "FALSE"):
            return tok == "TRUE", j + 1
        if re.fullmatch(r"\w+", tok):
            return ModelValue(tok), j + 1
        raise ConfigError(f"{loc}: expected a value, found {tok!r}")

    while i < len(toks):
        tok, loc = toks[i]
        if tok in LIST_KEYWORDS:
            section = LIST_KEYWORDS[tok]
            i += 1
            continue
        if tok in SINGLE_KEYWORDS:
            if tok in seen_single:
                raise ConfigError(f"{loc}: {tok} may appear only once")
            seen_single.add(tok)
            section = None
            if i + 1 >= len(toks):
                raise ConfigError(f"{loc}: {tok} needs a value")
            arg, aloc = toks[i + 1]
            if tok == "CHECK_DEADLOCK":
                if arg not in ("TRUE", "FALSE"):
                    raise ConfigError(f"{aloc}: CHECK_DEADLOCK takes TRUE or FALSE, found {arg!r}")
                cfg.check_deadlock = arg == "TRUE"
            else:
                if not re.fullmatch(r"\w+", arg):
                    raise ConfigError(f"{aloc}: {tok} needs an identifier, found {arg!r}")
                setattr(cfg, tok.lower(), arg)
                cfg.locations[arg] = aloc
            i += 2
            continue
        if section is None:
            raise ConfigError(f"{loc}: unexpected {tok!r} (expected a keyword such as CONSTANTS, INIT, "
                              f"NEXT, SPECIFICATION, INVARIANT)")
        if section == "constants":
            name = tok
            if not re.fullmatch(r"[\w!]+", name):
                raise ConfigError(f"{loc}: expected a constant name, found {tok!r}")
            j = i + 1
            if j < len(toks) and toks[j][0] == "(":  # Op(v1, ...) = v: not supported
                raise ConfigError(f"{loc}: constant operator assignments 'Op(...) = v' are not supported; "
                                  f"use 'Op <- Def'")
            if j >= len(toks):
                raise ConfigError(f"{loc}: constant {name} has no value")
            op = toks[j][0]
            k = j + 1
            module = None
            if op in ("=", "<-") and k < len(toks) and toks[k][0] == "[":  # C = [M] v, C <- [M] Def
                if k + 3 > len(toks) or toks[k + 2][0] != "]" or not re.fullmatch(r"\w+", toks[k + 1][0]):
                    raise ConfigError(f"{toks[k][1]}: expected [Module] after {name} {op}")
                module = toks[k + 1][0]
                k += 3
            if k >= len(toks):
                raise ConfigError(f"{loc}: constant {name} has no value")
            if op == "=":
                v, i = value(k)
                if module is None:
                    cfg.constants[name] = v
                else:
                    cfg.scoped_constants[(module, name)] = v
            elif op == "<-":
                if not re.fullmatch(r"\w+", toks[k][0]):
                    raise ConfigError(f"{toks[k][1]}: expected a definition name after {name} <-")
                if module is None:
                    cfg.overrides[name] = toks[k][0]
                else:
                    cfg.scoped_overrides[(module, name)] = toks[k][0]
                i = k + 1
            else:
                raise ConfigError(f"{toks[j][1]}: expected '=' or '<-' after constant {name}, found {op!r}")
            cfg.locations[name] = loc
            continue
        if not re.fullmatch(r"\w+", tok):
            raise ConfigError(f"{loc}: expected an identifier, found {tok!r}")
        getattr(cfg, section).append(tok)
        cfg.locations[tok] = loc
        i += 1
    if cfg.specification and (cfg.init or cfg.next):
        raise ConfigError(f"{path}: SPECIFICATION excludes INIT/NEXT")
    if bool(cfg.init) != bool(cfg.next):
        raise ConfigError(f"{path}: the cfg names {'INIT' if cfg.init else 'NEXT'} without "
                          f"{'NEXT' if cfg.init else 'INIT'}")
    return cfg
