"""Prompt Cache markup (seed 0x0CB): a schema declares modules at fixed positions, a prompt imports them.

Invariant: positions come from the schema alone. A schema lays its modules out in order from position
0; a ``<param len=n>`` reserves n positions inside its module; the members of a ``<union>`` start at
the same position and the union spans its longest member. A module's cached states cover its text
tokens at their declared positions, so a parameter slot is a gap in the module's position ids
(N_module = |token_ids| = |position_ids|). A prompt's arguments are computed in their slots, and its
uncached text after the schema's last position. Populated modules are keyed by schema, module and
parameters; revising a schema or rotating a namespace advances a generation and drops every module of
the older one, so stale states cannot become a hit of the new generation (0x06, "Invalidation Produces
A Successor Namespace"). Markup is parsed with the stdlib expat parser; every malformed case is a
named :class:`MarkupRejection` whose detail says what and on which line.
"""

from __future__ import annotations

import enum
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from xml.parsers import expat

import attrs

from kvexact.reference.modules import (
    DeclaredModule,
    ModuleRejection,
    Namespace,
    PromptItem,
    PromptModuleReceipt,
    PromptSchema,
    Segment,
    assemble_declared_prompt,
)
from kvexact.reference.rejections import Rejected


class MarkupRejection(enum.Enum):
    NOT_WELL_FORMED = "the markup is not well-formed XML"
    WRONG_ROOT = "the document element is not the one expected (<schema> or <prompt>)"
    MISSING_ATTRIBUTE = "a required attribute is absent"
    BAD_NUMBER = "a length or generation is not a non-negative integer (a length must be positive)"
    UNKNOWN_ELEMENT = "an element not allowed at this place"
    STRAY_TEXT = "text outside any module in a schema or union"
    DUPLICATE_MODULE = "two modules declare the same name"
    DUPLICATE_PARAMETER = "a module declares a parameter name twice"
    EMPTY_UNION = "a union declares no module"
    UNDECLARED_MODULE = "the prompt imports a module its schema does not declare"
    UNDECLARED_PARAMETER = "the prompt passes an argument the module does not declare"
    ARGUMENT_TOO_LONG = "an argument has more tokens than its parameter slot"
    REPEATED_MODULE = "the prompt imports one module twice"
    UNION_CONFLICT = "the prompt imports two members of one union"
    CONTENT_IN_IMPORT = "a module import in a prompt carries text or elements"
    STALE_REVISION = "a schema revision must advance the schema generation"


Tokenizer = Callable[[str], tuple[int, ...]]


def word_tokens(text: str) -> tuple[int, ...]:
    """The teaching tokenizer: one token per whitespace-separated word, id = CRC-32 of its UTF-8 bytes."""
    return tuple(zlib.crc32(w.encode()) for w in text.split())


@attrs.frozen
class _Node:
    tag: str
    attrs: Mapping[str, str]
    line: int
    content: tuple[Any, ...]  # str runs (with their line) and _Node children, in document order


def _parse_xml(text: str) -> _Node:
    parser = expat.ParserCreate()
    parser.buffer_text = True
    stack: list[tuple[str, dict[str, str], int, list[Any]]] = []
    done: list[_Node] = []

    def start(tag: str, attributes: dict[str, str]) -> None:
        stack.append((tag, attributes, parser.CurrentLineNumber, []))

    def end(tag: str) -> None:
        name, attributes, line, content = stack.pop()
        node = _Node(name, attributes, line, tuple(content))
        (stack[-1][3] if stack else done).append(node)

    def chars(data: str) -> None:
        if stack:
            stack[-1][3].append((data, parser.CurrentLineNumber))

    parser.StartElementHandler, parser.EndElementHandler, parser.CharacterDataHandler = start, end, chars
    try:
        parser.Parse(text, True)
    except expat.ExpatError as exc:
        raise Rejected(MarkupRejection.NOT_WELL_FORMED,
                       f"line {exc.lineno} column {exc.offset + 1}: {expat.ErrorString(exc.code)}") from None
    return done[0]


def _require(node: _Node, name: str) -> str:
    if name not in node.attrs:
        raise Rejected(MarkupRejection.MISSING_ATTRIBUTE, f"<{node.tag}> on line {node.line} needs {name}=")
    return node.attrs[name]


def _number(node: _Node, name: str, default: int | None = None, positive: bool = False) -> int:
    if default is not None and name not in node.attrs:
        return default
    raw = _require(node, name)
    if not raw.isdigit() or (positive and int(raw) == 0):
        raise Rejected(MarkupRejection.BAD_NUMBER, f"{name}={raw!r} on <{node.tag}> line {node.line}")
    return int(raw)


def _texts(node: _Node) -> list[tuple[str, int]]:
    return [c for c in node.content if isinstance(c, tuple) and c[0].strip()]


def _children(node: _Node) -> list[_Node]:
    return [c for c in node.content if isinstance(c, _Node)]


@attrs.frozen
class MarkupModule:
    """A declared module: its text tokens at their positions, and its parameter slots."""

    name: str
    token_ids: tuple[int, ...]
    position_ids: tuple[int, ...]
    slots: Mapping[str, tuple[int, ...]]
    union: int | None  # index of its union in the schema, None outside a union
    line: int

    def declared(self) -> DeclaredModule:
        first = self.position_ids[0] if self.position_ids else 0
        return DeclaredModule(self.name, first, len(self.position_ids), self.position_ids)


@attrs.frozen
class MarkupSchema:
    schema_id: str
    generation: int
    modules: Mapping[str, MarkupModule]
    end: int  # first position after every declared module; uncached prompt text starts here

    def module(self, name: str) -> MarkupModule:
        if name not in self.modules:
            raise Rejected(ModuleRejection.UNDECLARED_MODULE, f"{name!r} in {self.schema_id}")
        return self.modules[name]


def _layout_module(node: _Node, start: int, union: int | None, encode: Tokenizer) -> tuple[MarkupModule, int]:
    name = _require(node, "name")
    cursor = start
    tokens: list[int] = []
    positions: list[int] = []
    slots: dict[str, tuple[int, ...]] = {}
    for part in node.content:
        if isinstance(part, tuple):
            ids = encode(part[0])
            tokens.extend(ids)
            positions.extend(range(cursor, cursor + len(ids)))
            cursor += len(ids)
            continue
        if part.tag != "param":
            raise Rejected(MarkupRejection.UNKNOWN_ELEMENT, f"<{part.tag}> on line {part.line} inside module {name!r}")
        pname, length = _require(part, "name"), _number(part, "len", positive=True)
        if pname in slots:
            raise Rejected(MarkupRejection.DUPLICATE_PARAMETER, f"{pname!r} on line {part.line} in module {name!r}")
        slots[pname] = tuple(range(cursor, cursor + length))
        cursor += length
    return MarkupModule(name, tuple(tokens), tuple(positions), slots, union, node.line), cursor


def parse_schema(text: str, encode: Tokenizer = word_tokens) -> MarkupSchema:
    """Parse ``<schema name= generation=>`` of ``<module>``s and ``<union>``s and lay out positions."""
    root = _parse_xml(text)
    if root.tag != "schema":
        raise Rejected(MarkupRejection.WRONG_ROOT, f"expected <schema>, found <{root.tag}> on line {root.line}")
    schema_id, generation = _require(root, "name"), _number(root, "generation", default=0)
    modules: dict[str, MarkupModule] = {}
    cursor = 0

    def add(node: _Node, start: int, union: int | None) -> int:
        module, stop = _layout_module(node, start, union, encode)
        if module.name in modules:
            raise Rejected(MarkupRejection.DUPLICATE_MODULE, f"{module.name!r} on line {node.line}, first on line "
                                                             f"{modules[module.name].line}")
        modules[module.name] = module
        return stop

    for holder in (root, *(c for c in _children(root) if c.tag == "union")):
        strays = _texts(holder)
        if strays:
            text, line = strays[0]
            raise Rejected(MarkupRejection.STRAY_TEXT, f"{text.strip()[:20]!r} on line {line} inside <{holder.tag}>")
    for index, child in enumerate(_children(root)):
        if child.tag == "module":
            cursor = add(child, cursor, None)
        elif child.tag == "union":
            members = _children(child)
            if not members:
                raise Rejected(MarkupRejection.EMPTY_UNION, f"<union> on line {child.line}")
            stops = [cursor]
            for member in members:
                if member.tag != "module":
                    raise Rejected(MarkupRejection.UNKNOWN_ELEMENT, f"<{member.tag}> on line {member.line} inside <union>")
                stops.append(add(member, cursor, index))
            cursor = max(stops)
        else:
            raise Rejected(MarkupRejection.UNKNOWN_ELEMENT, f"<{child.tag}> on line {child.line} inside <schema>")
    return MarkupSchema(schema_id, generation, modules, cursor)


@attrs.frozen
class ParsedPrompt:
    """A prompt's schema reference and its items, each with the positions the schema gives it."""

    schema_id: str
    generation: int
    items: tuple[tuple[PromptItem, DeclaredModule], ...]


def parse_prompt(text: str, schema: MarkupSchema, encode: Tokenizer = word_tokens) -> ParsedPrompt:
    """Parse ``<prompt schema= generation=>``: module imports (arguments as attributes) and uncached text."""
    root = _parse_xml(text)
    if root.tag != "prompt":
        raise Rejected(MarkupRejection.WRONG_ROOT, f"expected <prompt>, found <{root.tag}> on line {root.line}")
    schema_id, generation = _require(root, "schema"), _number(root, "generation", default=0)
    if schema_id != schema.schema_id:
        raise Rejected(ModuleRejection.SCHEMA_ID_MISMATCH, f"line {root.line}: {schema_id} != {schema.schema_id}")
    items: list[tuple[PromptItem, DeclaredModule]] = []
    seen: dict[str, int] = {}
    unions: dict[int, str] = {}
    cursor = schema.end
    for part in root.content:
        if isinstance(part, tuple):
            ids = encode(part[0])
            if ids:
                declared = DeclaredModule(f"#text@{cursor}", cursor, len(ids))
                items.append((PromptItem(declared.module_id, ids, cached=False), declared))
                cursor += len(ids)
            continue
        if part.tag not in schema.modules:
            raise Rejected(MarkupRejection.UNDECLARED_MODULE, f"<{part.tag}> on line {part.line} in {schema_id}")
        module = schema.modules[part.tag]
        if part.content and (_texts(part) or _children(part)):
            raise Rejected(MarkupRejection.CONTENT_IN_IMPORT, f"<{part.tag}> on line {part.line} must be empty")
        if part.tag in seen:
            raise Rejected(MarkupRejection.REPEATED_MODULE, f"<{part.tag}> on line {part.line}, first on line "
                                                            f"{seen[part.tag]}")
        seen[part.tag] = part.line
        if module.union is not None:
            if module.union in unions:
                raise Rejected(MarkupRejection.UNION_CONFLICT, f"<{part.tag}> on line {part.line} and "
                                                               f"<{unions[module.union]}> share a union")
            unions[module.union] = part.tag
        items.append((PromptItem(module.name, module.token_ids), module.declared()))
        for pname, value in part.attrs.items():
            if pname not in module.slots:
                raise Rejected(MarkupRejection.UNDECLARED_PARAMETER, f"{pname}= on <{part.tag}> line {part.line}")
            ids, slot = encode(value), module.slots[pname]
            if len(ids) > len(slot):
                raise Rejected(MarkupRejection.ARGUMENT_TOO_LONG, f"{pname}= on <{part.tag}> line {part.line}: "
                                                                  f"{len(ids)} tokens, slot of {len(slot)}")
            arg = DeclaredModule(f"{module.name}.{pname}", slot[0], len(ids), slot[:len(ids)])
            items.append((PromptItem(arg.module_id, ids, cached=False), arg))
    return ParsedPrompt(schema_id, generation, tuple(items))


@attrs.frozen
class ModuleStore:
    """Populated modules keyed by (schema id, module id, parameters digest)."""

    receipts: Mapping[tuple[str, str, str], PromptModuleReceipt] = attrs.field(factory=dict)

    def populate(self, schema: MarkupSchema, names: Iterable[str], namespace: Namespace, semantic_digest: str,
                 layout_digest: str) -> ModuleStore:
        """Compute each named module at its declared positions (arguments are never cached with it)."""
        receipts = dict(self.receipts)
        for name in names:
            m = schema.module(name)
            receipts[(schema.schema_id, name, "")] = PromptModuleReceipt(
                schema.schema_id, schema.generation, name, "", m.token_ids, m.position_ids, semantic_digest,
                layout_digest, namespace.namespace_id, namespace.generation)
        return ModuleStore(receipts)

    def revise_schema(self, schema: MarkupSchema) -> tuple[ModuleStore, tuple[str, ...]]:
        """Adopt a revision of ``schema.schema_id``: drop (and name) every module of an older generation."""
        held = [r for r in self.receipts.values() if r.schema_id == schema.schema_id]
        newest = max((r.schema_generation for r in held), default=-1)
        if held and schema.generation <= newest:
            raise Rejected(MarkupRejection.STALE_REVISION, f"{schema.schema_id}: generation {schema.generation} "
                                                           f"after {newest}")
        return self._drop(lambda r: r.schema_id == schema.schema_id and r.schema_generation < schema.generation)

    def rotate_namespace(self, namespace: Namespace) -> tuple[ModuleStore, tuple[str, ...]]:
        """Adopt a successor namespace: drop every module produced under an older generation of it."""
        return self._drop(lambda r: r.namespace_id == namespace.namespace_id
                          and r.namespace_generation < namespace.generation)

    def _drop(self, stale: Callable[[PromptModuleReceipt], bool]) -> tuple[ModuleStore, tuple[str, ...]]:
        kept = {k: r for k, r in self.receipts.items() if not stale(r)}
        return ModuleStore(kept), tuple(sorted(k[1] for k in self.receipts if k not in kept))


def assemble_markup(principal: str, prompt: str, schema: MarkupSchema, store: ModuleStore, namespace: Namespace,
                    semantic_digest: str, layout_digest: str, encode: Tokenizer = word_tokens,
                    lookups: list[str] | None = None) -> tuple[Segment, ...]:
    """0x0CB's ``assemble_declared_prompt`` on markup: authorize, parse, then import each module only on
    a full H_module hit and compute arguments, uncached text and missing modules at their positions."""
    if principal not in namespace.readers:
        raise Rejected(ModuleRejection.UNAUTHORIZED_NAMESPACE, f"{principal!r} in {namespace.namespace_id}")
    parsed = parse_prompt(prompt, schema, encode)
    view = PromptSchema(schema.schema_id, schema.generation, {d.module_id: d for _, d in parsed.items})
    return assemble_declared_prompt(principal, parsed.schema_id, parsed.generation, [i for i, _ in parsed.items],
                                    view, store.receipts, namespace, semantic_digest, layout_digest, lookups)


def gaps(segments: Sequence[Segment], end: int) -> tuple[int, ...]:
    """Positions below ``end`` that no segment occupies: the discontinuities of the assembled prompt."""
    taken = {p for s in segments for p in s.position_ids}
    return tuple(p for p in range(end) if p not in taken)
