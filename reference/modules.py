"""Prompt Cache declared modules (seed 0x0CB): declared reuse is not prefix discovery.

Invariant: a cached module is a hit only if tokens, positions, schema identity and generation, and the
semantic cache ABI are all equal (``H_module`` is a Boolean conjunction); token and position sequences
have equal length; authorization happens before any module-cache lookup; segments are assembled in
declared position order.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from kvexact.reference.rejections import Rejected


class ModuleRejection(enum.Enum):
    UNAUTHORIZED_NAMESPACE = "the principal may not read this namespace (checked before lookup)"
    SCHEMA_ID_MISMATCH = "the prompt names another schema"
    SCHEMA_GENERATION_MISMATCH = "the schema generation differs"
    UNDECLARED_MODULE = "the schema does not declare this module"
    TOKEN_POSITION_LENGTH_MISMATCH = "token and position sequences differ in length"
    TOKEN_MISMATCH = "cached module tokens differ from the rendered module"
    POSITION_MISMATCH = "equal text at other positions is not a hit"
    SEMANTIC_ABI_MISMATCH = "the semantic cache ABI differs"
    LAYOUT_MISMATCH = "the physical layout digest differs"
    NAMESPACE_MISMATCH = "the module was produced in another namespace or namespace generation"
    OVERLAPPING_POSITIONS = "two declared segments claim the same positions"


@attrs.frozen
class DeclaredModule:
    """A module's declared place in the schema: positions ``start .. start + length - 1``, or the
    ``explicit`` positions when the schema leaves gaps inside the module (parameter slots)."""

    module_id: str
    start_position: int
    length_tokens: int
    explicit: tuple[int, ...] | None = None

    def positions(self) -> tuple[int, ...]:
        if self.explicit is not None:
            return self.explicit
        return tuple(range(self.start_position, self.start_position + self.length_tokens))


@attrs.frozen
class PromptSchema:
    schema_id: str
    generation: int
    modules: Mapping[str, DeclaredModule]

    def resolve(self, module_id: str) -> DeclaredModule:
        if module_id not in self.modules:
            raise Rejected(ModuleRejection.UNDECLARED_MODULE, f"{module_id!r} in {self.schema_id}")
        return self.modules[module_id]


@attrs.frozen
class PromptModuleReceipt:
    """The typed teaching contract of 0x0CB (``physical_refs`` name the backing blocks)."""

    schema_id: str
    schema_generation: int
    module_id: str
    module_parameters_digest: str
    token_ids: tuple[int, ...]
    position_ids: tuple[int, ...]
    semantic_manifest_digest: str
    layout_manifest_digest: str
    namespace_id: str
    namespace_generation: int
    physical_refs: tuple[Any, ...] = ()

    def __attrs_post_init__(self) -> None:
        if len(self.token_ids) != len(self.position_ids):
            raise Rejected(ModuleRejection.TOKEN_POSITION_LENGTH_MISMATCH,
                           f"{self.module_id}: {len(self.token_ids)} tokens, {len(self.position_ids)} positions")


def module_hit(producer: PromptModuleReceipt, consumer: PromptModuleReceipt) -> bool:
    """H_module = [T_p = T_c][Pi_p = Pi_c][S_p = S_c][A_p = A_c]."""
    return (producer.token_ids == consumer.token_ids and producer.position_ids == consumer.position_ids
            and (producer.schema_id, producer.schema_generation) == (consumer.schema_id, consumer.schema_generation)
            and producer.semantic_manifest_digest == consumer.semantic_manifest_digest)


def check_module(cached: PromptModuleReceipt, expected: PromptModuleReceipt) -> None:
    """Name the first factor of H_module (then layout and namespace) that fails."""
    if cached.schema_id != expected.schema_id:
        raise Rejected(ModuleRejection.SCHEMA_ID_MISMATCH, f"{cached.schema_id} != {expected.schema_id}")
    if cached.schema_generation != expected.schema_generation:
        raise Rejected(ModuleRejection.SCHEMA_GENERATION_MISMATCH,
                       f"{cached.schema_generation} != {expected.schema_generation}")
    if cached.token_ids != expected.token_ids:
        raise Rejected(ModuleRejection.TOKEN_MISMATCH, cached.module_id)
    if cached.position_ids != expected.position_ids:
        raise Rejected(ModuleRejection.POSITION_MISMATCH,
                       f"{cached.module_id}: cached at {cached.position_ids[:3]}..., needed at "
                       f"{expected.position_ids[:3]}...")
    if cached.semantic_manifest_digest != expected.semantic_manifest_digest:
        raise Rejected(ModuleRejection.SEMANTIC_ABI_MISMATCH, cached.module_id)
    if cached.layout_manifest_digest != expected.layout_manifest_digest:
        raise Rejected(ModuleRejection.LAYOUT_MISMATCH, cached.module_id)
    if (cached.namespace_id, cached.namespace_generation) != (expected.namespace_id, expected.namespace_generation):
        raise Rejected(ModuleRejection.NAMESPACE_MISMATCH,
                       f"{cached.namespace_id}@{cached.namespace_generation}")


@attrs.frozen
class PromptItem:
    """One item of a parsed prompt: a cached module, or uncached text computed at declared positions."""

    module_id: str
    token_ids: tuple[int, ...]
    cached: bool = True
    parameters_digest: str = ""


@attrs.frozen
class Segment:
    module_id: str
    position_ids: tuple[int, ...]
    source: str  # "cache" or "compute"
    receipt: PromptModuleReceipt | None = None


@attrs.frozen
class Namespace:
    namespace_id: str
    generation: int
    readers: frozenset[str]


def assemble_declared_prompt(principal: str, schema_id: str, schema_generation: int, items: Sequence[PromptItem],
                             schema: PromptSchema, cache: Mapping[tuple[str, str, str], PromptModuleReceipt],
                             namespace: Namespace, semantic_digest: str, layout_digest: str,
                             lookups: list[str] | None = None) -> tuple[Segment, ...]:
    """Authorize, check the schema, then take each cached module only on a full H_module hit (else
    compute it at its declared positions); returns segments in declared position order. ``lookups``
    records every cache lookup made, so a test can see that none happens before authorization."""
    if principal not in namespace.readers:
        raise Rejected(ModuleRejection.UNAUTHORIZED_NAMESPACE, f"{principal!r} in {namespace.namespace_id}")
    if schema_id != schema.schema_id:
        raise Rejected(ModuleRejection.SCHEMA_ID_MISMATCH, f"{schema_id} != {schema.schema_id}")
    if schema_generation != schema.generation:
        raise Rejected(ModuleRejection.SCHEMA_GENERATION_MISMATCH, f"{schema_generation} != {schema.generation}")
    segments: list[Segment] = []
    taken: set[int] = set()
    for item in items:
        declared = schema.resolve(item.module_id)
        positions = declared.positions()
        if taken & set(positions):
            raise Rejected(ModuleRejection.OVERLAPPING_POSITIONS, item.module_id)
        taken |= set(positions)
        if not item.cached:
            segments.append(Segment(item.module_id, positions, "compute"))
            continue
        if lookups is not None:
            lookups.append(item.module_id)
        receipt = cache.get((schema.schema_id, item.module_id, item.parameters_digest))
        expected = PromptModuleReceipt(schema.schema_id, schema.generation, item.module_id, item.parameters_digest,
                                       tuple(item.token_ids), positions, semantic_digest, layout_digest,
                                       namespace.namespace_id, namespace.generation)
        if receipt is None:
            segments.append(Segment(item.module_id, positions, "compute"))
            continue
        check_module(receipt, expected)
        segments.append(Segment(item.module_id, positions, "cache", receipt))
    return tuple(sorted(segments, key=lambda s: s.position_ids[0] if s.position_ids else -1))
