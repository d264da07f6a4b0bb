"""The allocator adapter protocol, and the normative reference behind it (:class:`ReferenceAdapter`).

A runtime developer wraps their allocator in a class with the methods of :class:`AllocatorAdapter` (or
their radix / prefix index in one with the methods of :class:`kvexact.reference.index.PrefixIndex`) and
passes ``--adapter module:factory`` to ``kvexact conform``, ``fuzz`` or ``gate``; ``factory(config)``
returns the adapter. A factory declares its protocol with the attribute ``adapter_protocol``
(``"allocator"``, the default, or ``"prefix-index"``); an allocator adapter stands in for the reference
in the KVAllocation and CowPublication machines, a prefix index in the Radix machine. The machines drive
the adapter and the normative reference in lockstep: both must accept and reject the same operations
(with the same rejection names where the adapter reports them), and the adapter's block tables, and the
copies its operations report, drive a real paged pool through the kernels, so a wrong block or a missed
copy shows up as wrong attention numbers. The adapter reports only observable facts: block tables,
lengths and the blocks it copied.

What the allocator machines call on an adapter (:data:`REQUIRED_METHODS`, :data:`OPTIONAL_METHODS`):
``block_ids``, ``start``, ``append``, ``release``, ``table``, ``length`` and ``self_check`` always;
``fork``, ``truncate``, ``cache``, ``evict``, ``lookup``, ``append_with_failure`` and the generation fence
``generation`` with ``stale_write`` when the adapter has them; the attributes ``name``, ``config`` and
(optional, default true) ``lockstep``. Nothing else: no digest is read from an adapter. Every argument is positional. ``--adapter`` checks these names and arities before any example.

Invariant of every adapter method: a rejected operation returns ``OpResult(accepted=False, ...)`` and
leaves the adapter's observable state (tables and lengths) unchanged.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from kvexact.reference import lifecycle
from kvexact.reference import prefix as px
from kvexact.reference.allocator import AllocationReceipt, Allocator, AllocRejection
from kvexact.reference.handles import BlockHandle
from kvexact.reference.keys import KeyInputs, hash_full_blocks
from kvexact.reference.namespaces import CacheIsolationNamespace, NamespaceRegistry, create_namespace
from kvexact.reference.pool import GroupConfig, QueuePolicy
from kvexact.reference.projection import TraceRecorder
from kvexact.reference.rejections import Rejected


@attrs.frozen
class AdapterConfig:
    """Pool geometry shared by the reference and the adapter under test."""

    block_tokens: int = 2
    num_groups: int = 2
    blocks_per_group: int = 6
    row_bytes: tuple[int, ...] = (8, 4)


@attrs.frozen
class OpResult:
    accepted: bool
    rejection: str | None = None  # the adapter's rejection name (None when accepted or unnamed)
    hit_tokens: int = 0  # for start(): rows reused from the prefix cache (not written by this operation)
    copies: tuple[tuple[int, int, int], ...] = ()  # (group, source block, destination block) copied on write


@attrs.frozen
class LookupScope:
    """Who looks a prompt up, and under which extra keys (0x07B, 0x07F): the reference publishes under
    :data:`HOME` only, so a lookup under any other salt, LoRA or namespace must miss, and a tenant that
    does not own the namespace is refused (``UNAUTHORIZED_TENANT``)."""

    tenant_id: str = "t0"
    namespace_id: str = "home"
    cache_salt: str | None = None
    lora_name: str | None = None


HOME = LookupScope()
MANIFEST = "kvexact-machines-manifest"


def _registry() -> NamespaceRegistry:
    registry = NamespaceRegistry()
    for tenant, ns in (("t0", "home"), ("t1", "other")):
        registry = create_namespace(registry, CacheIsolationNamespace("machines", tenant, ns, 1, None, 1))
    return registry


@runtime_checkable
class AllocatorAdapter(Protocol):
    """What a system under test provides to the allocator machine (block ids are slots of its pool)."""

    name: str
    config: AdapterConfig

    def block_ids(self, group: int) -> Sequence[int]: ...
    def start(self, request_id: str, prompt: Sequence[int]) -> OpResult: ...
    def append(self, request_id: str, token: int) -> OpResult: ...
    def release(self, request_id: str) -> OpResult: ...
    def table(self, request_id: str, group: int) -> Sequence[int]: ...
    def length(self, request_id: str) -> int: ...
    def self_check(self) -> None: ...


# method -> how many positional arguments the machines pass it
REQUIRED_METHODS = {"block_ids": 1, "start": 2, "append": 2, "release": 1, "table": 2, "length": 1,
                    "self_check": 0}
# Used when present (a missing one is reported by the run, and the rules that need it do not count as
# fired): fork(parent, child); truncate(request, keep_tokens) (KVAllocation); cache(request) (publish full
# blocks as prefix identities, KVAllocation); evict(prefix) (drop the identity of a cached full-block
# prefix); append_with_failure(request, token) (append with a fault after the first group's reservation:
# must roll back, 0x04F); the generation fence of 0x05F: generation(group, block_id) -> int (the
# generation a handle to the block carries now) with stale_write(group, block_id, generation) -> OpResult
# (a delayed writer presents that handle; the adapter must refuse it once the block was freed, whether or
# not it has been reused since); lookup(prompt, scope) -> OpResult (a read-only prefix lookup under a
# LookupScope: hit_tokens, or the rejection). digest() -> str, when present, must be unchanged by rejections.
OPTIONAL_METHODS = {"fork": 2, "truncate": 2, "cache": 1, "evict": 1, "append_with_failure": 2, "generation": 2,
                    "stale_write": 3, "lookup": 2}

AdapterFactory = Callable[[Any], Any]


PROTOCOLS = ("allocator", "prefix-index")


class AdapterProblem(enum.Enum):
    """What is wrong with a ``--adapter`` (before or while a machine runs it); never a conformance failure."""

    NOT_MODULE_FACTORY = "not of the form MODULE:FACTORY"
    NOT_IMPORTABLE = "the module cannot be found"
    IMPORT_FAILED = "importing the module raised (a syntax error, a failing import inside it)"
    NO_FACTORY = "the module has no callable of that name"
    BAD_PROTOCOL = "the factory declares an unknown protocol"
    WRONG_MACHINE = "the adapter's protocol does not fit the machine asked for"
    FACTORY_SIGNATURE = "the factory cannot be called as factory(config)"
    FACTORY_RAISED = "the factory raised while building an adapter"
    NOT_AN_ADAPTER = "the factory returned an object with none of the protocol's methods"
    MISSING_METHOD = "the adapter lacks a method or attribute of its protocol"
    METHOD_SIGNATURE = "an adapter method cannot take the arguments the machines pass"
    CALL_TIMEOUT = "an adapter call did not return within the per-call limit"


# "could not run" (exit 3): the adapter is well formed but did not work; the others are bad arguments (exit 2)
COULD_NOT_RUN = frozenset({AdapterProblem.FACTORY_RAISED, AdapterProblem.CALL_TIMEOUT})


class AdapterError(ValueError):
    """A ``--adapter`` that cannot be used: one line naming the adapter and what is wrong (``problem``)."""

    def __init__(self, problem: AdapterProblem, message: str):
        super().__init__(message)
        self.problem = problem

    @property
    def exit_code(self) -> int:
        return 3 if self.problem in COULD_NOT_RUN else 2


def adapter_protocol(factory: AdapterFactory) -> str:
    """The protocol a factory declares (``adapter_protocol`` attribute; ``allocator`` when absent)."""
    protocol = getattr(factory, "adapter_protocol", "allocator")
    if protocol not in PROTOCOLS:
        raise AdapterError(AdapterProblem.BAD_PROTOCOL,
                           f"adapter factory {getattr(factory, '__name__', factory)!r} declares protocol "
                           f"{protocol!r}; expected one of {', '.join(PROTOCOLS)}")
    return protocol


def check_adapter(adapter: Any) -> None:
    """Reject an object that is not an allocator adapter, naming the first missing or ill-formed method."""
    check_methods(adapter, "allocator", REQUIRED_METHODS, OPTIONAL_METHODS)
    if not isinstance(getattr(adapter, "config", None), AdapterConfig):
        raise AdapterError(AdapterProblem.MISSING_METHOD,
                           f"adapter {type(adapter).__name__} has no AdapterConfig 'config'")


def check_methods(adapter: Any, protocol: str, required: dict[str, int], optional: dict[str, int]) -> None:
    """Every required method present, and every present method callable with the machines' arguments."""
    kind = type(adapter).__name__
    present = [m for m in required if callable(getattr(adapter, m, None))]
    if not present:
        raise AdapterError(AdapterProblem.NOT_AN_ADAPTER,
                           f"{kind} is not an adapter of the {protocol} protocol: it has none of {', '.join(required)}")
    for method in required:
        if method not in present:
            raise AdapterError(AdapterProblem.MISSING_METHOD, f"{protocol} adapter {kind} has no method {method}()")
    for method, arity in {**required, **optional}.items():
        fn = getattr(adapter, method, None)
        if not callable(fn):
            continue
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):  # a builtin without a signature: nothing to check
            continue
        try:
            signature.bind(*range(arity))
        except TypeError as exc:
            raise AdapterError(AdapterProblem.METHOD_SIGNATURE,
                               f"{protocol} adapter {kind}: {method}{signature} cannot be called with {arity} "
                               f"positional argument(s) ({exc})") from None


class ReferenceAdapter:
    """The normative allocator (:class:`~kvexact.reference.allocator.Allocator`) behind the adapter protocol,
    with its trace recorder attached when ``spec`` names one.

    Prefix reuse: full blocks are published under content keys; ``start`` maps the longest cached chain
    (capped one token short of the prompt, 0x07A's logits cap) and appends the rest, all in one reference
    transaction. Keys are either one small integer per distinct token prefix (``content`` identity) or, as
    ``KVAllocation.tla`` models identity, the 1-based block position within one canonical token ``stream``
    (``position`` identity: only requests whose tokens follow the stream are published). With a stream,
    publication, lookup and admission go through the prefix cache of ``prefix.py`` (chained SHA-256 keys
    over tokens, salt and LoRA, namespace scopes), publishing under :data:`HOME`; each key projects onto
    the spec as its block position. The machines
    call :meth:`self_check` after every rule, so the allocator does not check after every operation too
    (``check_every_op``). :attr:`delayed_writer` is the handle a delayed writer still holds: the first
    group's old tail that the last truncate returned to the free pool (0x05E), until it is fenced.
    """

    name = "reference"
    lockstep = True

    def __init__(self, config: AdapterConfig, spec: str | None = "KVAllocation",
                 requests: Sequence[str] = (), readers: Sequence[str] = (), check_every_op: bool = False,
                 policy: QueuePolicy = QueuePolicy.LRU, stream: Sequence[int] | None = None):
        self.config = config
        groups = [GroupConfig(g, g, config.block_tokens, config.row_bytes[g % len(config.row_bytes)])
                  for g in range(config.num_groups)]
        ids = list(range(1, config.blocks_per_group + 1))
        self.alloc = Allocator(groups, [ids] * config.num_groups, policy=policy, check_every_op=check_every_op)
        self.keys: dict[tuple[int, ...], str] = {}
        self.stream = tuple(stream) if stream is not None else None
        self.recorder: TraceRecorder | None = None
        self.delayed_writer: BlockHandle | None = None
        self.positions: dict[str, int] = {}  # prefix-cache key -> its block position on the stream
        self.prefix = (px.PrefixCache(self.alloc, _registry(), MANIFEST) if self.stream is not None
                       else None)
        if spec is not None:
            ident_of = self.positions.__getitem__ if self.prefix is not None else int
            self.recorder = TraceRecorder(spec, requests=list(requests), readers=list(readers),
                                          ident_of=ident_of).attach(self.alloc)

    # ---- protocol ---------------------------------------------------------------------------------------
    def block_ids(self, group: int) -> Sequence[int]:
        return list(range(1, self.config.blocks_per_group + 1))

    def _run(self, fn: Any) -> OpResult:
        try:
            outcome = fn()
        except Rejected as exc:
            return OpResult(False, exc.reason.name)
        if getattr(outcome, "outcome", None) == "ROLLED_BACK":
            return OpResult(False, "ROLLED_BACK")
        return OpResult(True, copies=_copies(outcome))

    def _key(self, prefix: tuple[int, ...]) -> str | None:
        """The identity key of a full-block prefix, or None when it cannot be cached (position identity)."""
        if self.stream is None:
            return self.keys.setdefault(prefix, str(len(self.keys) + 1))
        if prefix != self.stream[: len(prefix)]:
            return None
        key = str(len(prefix) // self.config.block_tokens)
        self.keys[prefix] = key
        return key

    def start(self, request_id: str, prompt: Sequence[int], scope: LookupScope = HOME) -> OpResult:
        if self.prefix is not None:
            return self._start_through_prefix_cache(request_id, prompt, scope)
        p = self.config.block_tokens
        hit: list[str] = []
        for j in range((len(prompt) - 1) // p):
            key = self.keys.get(tuple(prompt[: (j + 1) * p]))
            if key is None or lifecycle.lookup_all_groups(self.alloc, key) is None:
                break
            hit.append(key)

        def run() -> list[AllocationReceipt]:
            if hit:
                lifecycle.prefix_hit(self.alloc, request_id, hit)
            elif not prompt:
                raise Rejected(AllocRejection.EMPTY_APPEND, request_id)
            receipts = [self.alloc.append(request_id, t) for t in prompt[len(hit) * p:]]
            if any(r.outcome != "PUBLISHED" for r in receipts):
                raise Rejected(AllocRejection.STEP_OUT_OF_ORDER, "append rolled back during start")
            return receipts

        try:
            receipts = self.alloc.transact(run)
        except Rejected as exc:
            return OpResult(False, exc.reason.name)
        return OpResult(True, None, len(hit) * p, tuple(c for r in receipts for c in _copies(r)))

    def _start_through_prefix_cache(self, request_id: str, prompt: Sequence[int], scope: LookupScope) -> OpResult:
        """Authorize, look up (0x07C/0x07F) and admit the hit plus the recomputed rows in one transaction."""
        policy = px.PrefixPolicy(block_tokens=self.config.block_tokens)
        try:
            receipt = self._lookup(request_id, prompt, scope, policy)
            _, receipts = px.admit(self.prefix, receipt, prompt, policy)  # type: ignore[arg-type]
        except Rejected as exc:
            return OpResult(False, exc.reason.name)
        return OpResult(True, None, receipt.runtime_hit_tokens, tuple(c for r in receipts for c in _copies(r)))

    def _lookup(self, request_id: str, prompt: Sequence[int], scope: LookupScope,
                policy: px.PrefixPolicy) -> px.PrefixMatchReceipt:
        cache = self.prefix
        assert cache is not None
        inputs = KeyInputs(tuple(prompt), lora_name=scope.lora_name, cache_salt=scope.cache_salt)
        generation = cache.registry.get(scope.namespace_id).generation
        return cache.lookup(px.PrefixRequest(request_id, inputs, scope.tenant_id, scope.namespace_id, generation,
                                             MANIFEST), policy)

    def lookup(self, prompt: Sequence[int], scope: LookupScope = HOME) -> OpResult:
        """A read-only prefix lookup (``hit_tokens``: the runtime hit); nothing is admitted or changed."""
        try:
            receipt = self._lookup("lookup", prompt, scope, px.PrefixPolicy(block_tokens=self.config.block_tokens))
        except Rejected as exc:
            return OpResult(False, exc.reason.name)
        return OpResult(True, None, receipt.runtime_hit_tokens)

    def append(self, request_id: str, token: int) -> OpResult:
        return self._run(lambda: self.alloc.append(request_id, token))

    def append_with_failure(self, request_id: str, token: int) -> OpResult:
        """Append with a fault injected after the first group's reservation (0x04F): must roll back."""
        self.alloc.fault_after.update({("append_reserve", 0), ("cow_reserve", 0)})
        try:
            return self.append(request_id, token)
        finally:
            self.alloc.fault_after.clear()

    def release(self, request_id: str) -> OpResult:
        return self._run(lambda: lifecycle.release(self.alloc, request_id))

    def fork(self, parent_id: str, child_id: str) -> OpResult:
        return self._run(lambda: lifecycle.fork(self.alloc, parent_id, child_id))

    def truncate(self, request_id: str, keep_tokens: int) -> OpResult:
        try:
            released = lifecycle.truncate(self.alloc, request_id, keep_tokens)
        except Rejected as exc:
            return OpResult(False, exc.reason.name)
        old_tails = [h for h in released.dropped_handles if h.cache_group_id == 0]
        if old_tails and old_tails[-1] in released.freed_handles:
            self.delayed_writer = old_tails[-1]
        return OpResult(True)

    def cache(self, request_id: str) -> OpResult:
        """Publish every full, not yet keyed block of the request under its content key."""
        if request_id not in self.alloc.requests:
            return OpResult(False, "UNKNOWN_REQUEST")
        tokens = self.alloc.tokens_of(request_id)
        p = self.config.block_tokens
        if self.prefix is not None:
            return self._publish(request_id, tuple(tokens))
        for j in range(len(tokens) // p):
            key = self._key(tuple(tokens[: (j + 1) * p]))
            if key is None:
                break
            if lifecycle.lookup_all_groups(self.alloc, key) is not None:
                continue
            rec = self.alloc.request(request_id)
            if any(self.alloc.pools[g].blocks[rec.tables[g][j].block_id].cache_key is not None
                   for g in range(self.config.num_groups)):
                continue
            result = self._run(lambda j=j, key=key: lifecycle.cache_block(self.alloc, request_id, j, key))
            if not result.accepted:
                return result
        return OpResult(True)

    def _publish(self, request_id: str, tokens: tuple[int, ...]) -> OpResult:
        """Publish the request's full blocks under :data:`HOME` when its tokens follow the stream."""
        assert self.prefix is not None and self.stream is not None
        if tokens != self.stream[: len(tokens)]:
            return OpResult(True)  # position identity: only the stream's blocks have a position
        p = self.config.block_tokens
        for j, digest in enumerate(hash_full_blocks(KeyInputs(tokens), p)):
            self.positions[digest.hex()] = j + 1
            self.keys[tokens[: (j + 1) * p]] = digest.hex()
        generation = self.prefix.registry.get(HOME.namespace_id).generation
        try:
            self.prefix.publish(request_id, KeyInputs(tokens), HOME.namespace_id, generation,
                                px.PrefixPolicy(block_tokens=p))
        except Rejected as exc:
            return OpResult(False, exc.reason.name)
        return OpResult(True)

    def cached_prefixes(self) -> list[tuple[int, ...]]:
        """The published full-block prefixes whose blocks are cached in every group now."""
        return sorted(k for k, key in self.keys.items() if lifecycle.lookup_all_groups(self.alloc, key) is not None)

    def evict(self, prefix: tuple[int, ...]) -> OpResult:
        key = self.keys.get(prefix)
        if key is None:
            return OpResult(False, "CACHE_IDENTITY_MISSING")
        return self._run(lambda: lifecycle.evict(self.alloc, key))

    def generation(self, group: int, block_id: int) -> int:
        return self.alloc.pools[group].blocks[block_id].generation

    def stale_write(self, group: int, block_id: int, generation: int) -> OpResult:
        """The delayed writer presents its handle (0x05F); once fenced, it holds no handle any more."""
        handle = BlockHandle(self.alloc.pools[group].config.pool_id, group, block_id, generation)
        result = self._run(lambda: lifecycle.delayed_write(self.alloc, handle, 0, 1))
        if result.rejection in ("STALE_BLOCK_GENERATION", "HANDLE_NOT_OWNED"):
            self.delayed_writer = None
        return result

    def table(self, request_id: str, group: int) -> list[int]:
        return [h.block_id for h in self.alloc.request(request_id).tables[group]]

    def length(self, request_id: str) -> int:
        return self.alloc.request(request_id).context_tokens

    def self_check(self) -> None:
        self.alloc.self_check()

    def digest(self) -> str:
        return self.alloc.digest()


def reference_factory(config: AdapterConfig) -> ReferenceAdapter:
    """``--adapter kvexact.reference.adapters:reference_factory``: the reference as a system under test."""
    return ReferenceAdapter(config, spec=None)


def _copies(receipt: Any) -> tuple[tuple[int, int, int], ...]:
    """The (group, source block, destination block) copies a receipt reports (none for other outcomes)."""
    return tuple((src.cache_group_id, src.block_id, dst.block_id) for src, dst in getattr(receipt, "copies", ()))
