"""Cache isolation namespaces with generations and successors (0x01A, 0x07F).

A namespace scopes discovery: lookups are authorized against the namespace *before* any key is
derived, and an entry is visible only to lookups of the same namespace id at the same generation.
Invalidation (weights, adapter, transform, position, representation, shard ownership, isolation
reset) never relabels old entries: it retires the old generation (frozen for its still-live owners,
closed to new lookups and publications) and creates a successor with ``generation + 1``.

Invariant of :class:`NamespaceRegistry`: each namespace id has exactly one current generation; every
retired ``(namespace_id, generation)`` is below it; an entry scoped to a retired generation can never
be a hit of the current one (:func:`entry_visible`).
"""

from __future__ import annotations

import enum

import attrs

from kvexact.reference.digests import sha256_hex
from kvexact.reference.rejections import Rejected


class NamespaceRejection(enum.Enum):
    UNKNOWN_NAMESPACE = "no such cache namespace"
    UNAUTHORIZED_TENANT = "the principal is not a member of the namespace's isolation domain"
    RETIRED_GENERATION = "the namespace generation was retired by an invalidation"
    FUTURE_GENERATION = "the namespace generation has not been created"
    PUBLISH_TO_RETIRED_GENERATION = "a retired generation accepts no new publications"
    CROSS_NAMESPACE_ENTRY = "the entry belongs to another namespace"
    STALE_ENTRY_GENERATION = "the entry was published under another namespace generation"
    DUPLICATE_NAMESPACE = "a namespace with this id already exists"
    BAD_NAMESPACE_FIELD = "namespace fields must be non-empty strings and non-negative generations"


class InvalidationReason(enum.Enum):
    WEIGHTS = "model weights changed"
    ADAPTER = "adapter set changed"
    WEIGHT_TRANSFORM = "weight transform changed"
    POSITION_CONTRACT = "position semantics changed"
    REPRESENTATION = "storage dtype or quantization changed"
    SHARD_OWNERSHIP = "tensor-parallel shard ownership changed"
    ISOLATION_RESET = "the isolation domain was reset"


@attrs.frozen
class CacheIsolationNamespace:
    """One generation of a cache namespace: who may discover entries, and under which salt and model."""

    deployment_namespace: str
    tenant_id: str
    namespace_id: str
    generation: int
    cache_salt: str | None
    model_generation: int
    publication_policy: str = "publish-full-blocks"

    def __attrs_post_init__(self) -> None:
        for name in ("deployment_namespace", "tenant_id", "namespace_id", "publication_policy"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise Rejected(NamespaceRejection.BAD_NAMESPACE_FIELD, f"{name}={value!r}")
        for name in ("generation", "model_generation"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise Rejected(NamespaceRejection.BAD_NAMESPACE_FIELD, f"{name}={value!r}")

    @property
    def scope(self) -> tuple[str, int]:
        """The scope an entry is published under: ``(namespace_id, generation)``."""
        return (self.namespace_id, self.generation)

    @property
    def digest(self) -> str:
        return sha256_hex(self)


@attrs.frozen
class SuccessionReceipt:
    """What an invalidation did: the retired generation, its successor, and why."""

    retired: CacheIsolationNamespace
    successor: CacheIsolationNamespace
    reason: InvalidationReason


@attrs.frozen
class NamespaceRegistry:
    """Current generation per namespace id plus the set of retired scopes (a value; never mutated)."""

    current: tuple[CacheIsolationNamespace, ...] = ()
    retired: frozenset[tuple[str, int]] = frozenset()

    def __attrs_post_init__(self) -> None:
        """The invariant: a namespace's current generation is above every retired one of its id (a registry
        listing its current generation, or a later one, as retired is refused by name)."""
        generation = {ns.namespace_id: ns.generation for ns in self.current}
        for namespace_id, retired in self.retired:
            if namespace_id in generation and retired >= generation[namespace_id]:
                raise Rejected(NamespaceRejection.RETIRED_GENERATION,
                               f"{namespace_id}@{retired} retired, current is {generation[namespace_id]}")

    def get(self, namespace_id: str) -> CacheIsolationNamespace:
        for ns in self.current:
            if ns.namespace_id == namespace_id:
                return ns
        raise Rejected(NamespaceRejection.UNKNOWN_NAMESPACE, namespace_id)


def create_namespace(registry: NamespaceRegistry, ns: CacheIsolationNamespace) -> NamespaceRegistry:
    """Registry with ``ns`` added as the current generation of a new namespace id."""
    if any(c.namespace_id == ns.namespace_id for c in registry.current):
        raise Rejected(NamespaceRejection.DUPLICATE_NAMESPACE, ns.namespace_id)
    return attrs.evolve(registry, current=(*registry.current, ns))


def invalidate(registry: NamespaceRegistry, namespace_id: str, reason: InvalidationReason, *,
               model_generation: int | None = None, cache_salt: str | None = None,
               ) -> tuple[NamespaceRegistry, SuccessionReceipt]:
    """Retire the current generation of ``namespace_id`` and make ``generation + 1`` current.

    A model-affecting reason advances ``model_generation`` by one unless a value is given; the salt is
    kept unless a new one is given.
    """
    old = registry.get(namespace_id)
    model_changes = reason is not InvalidationReason.ISOLATION_RESET
    new_model = model_generation if model_generation is not None else old.model_generation + int(model_changes)
    successor = attrs.evolve(old, generation=old.generation + 1, model_generation=new_model,
                             cache_salt=cache_salt if cache_salt is not None else old.cache_salt)
    current = tuple(successor if c.namespace_id == namespace_id else c for c in registry.current)
    new_registry = NamespaceRegistry(current=current, retired=registry.retired | {old.scope})
    return new_registry, SuccessionReceipt(retired=old, successor=successor, reason=reason)


def authorize_lookup(registry: NamespaceRegistry, tenant_id: str, namespace_id: str,
                     generation: int) -> CacheIsolationNamespace:
    """Step 1 of the legal order: enter the namespace before any key is derived or looked up."""
    ns = registry.get(namespace_id)
    if tenant_id != ns.tenant_id:
        raise Rejected(NamespaceRejection.UNAUTHORIZED_TENANT, f"{tenant_id!r} in {namespace_id!r}")
    if (namespace_id, generation) in registry.retired:
        raise Rejected(NamespaceRejection.RETIRED_GENERATION, f"{namespace_id}@{generation}")
    if generation != ns.generation:
        raise Rejected(NamespaceRejection.FUTURE_GENERATION,
                       f"{namespace_id}@{generation}, current is {ns.generation}")
    return ns


def authorize_publish(registry: NamespaceRegistry, scope: tuple[str, int]) -> None:
    """Only the current generation accepts publications; a retired one is frozen for its live owners."""
    namespace_id, generation = scope
    ns = registry.get(namespace_id)
    if scope in registry.retired:
        raise Rejected(NamespaceRejection.PUBLISH_TO_RETIRED_GENERATION, f"{namespace_id}@{generation}")
    if generation != ns.generation:
        raise Rejected(NamespaceRejection.FUTURE_GENERATION, f"{namespace_id}@{generation}")


def check_entry_scope(lookup: CacheIsolationNamespace, entry_scope: tuple[str, int]) -> None:
    """Reject an entry that is not scoped to exactly the lookup's namespace and generation."""
    if entry_scope[0] != lookup.namespace_id:
        raise Rejected(NamespaceRejection.CROSS_NAMESPACE_ENTRY, f"{entry_scope[0]} != {lookup.namespace_id}")
    if entry_scope[1] != lookup.generation:
        raise Rejected(NamespaceRejection.STALE_ENTRY_GENERATION,
                       f"entry generation {entry_scope[1]}, lookup generation {lookup.generation}")


def entry_visible(lookup: CacheIsolationNamespace, entry_scope: tuple[str, int]) -> bool:
    """True only when the entry was published under the lookup's namespace id and generation."""
    return entry_scope == lookup.scope
