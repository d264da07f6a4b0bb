"""The allocator adapter protocol, and the normative reference behind it (:class:`ReferenceAdapter`).

A runtime developer wraps their allocator in a class with the methods of :class:`AllocatorAdapter` (or
their radix / prefix index in one with the methods of :class:`kvexact.reference.index.PrefixIndex`) and
passes ``--adapter module:factory`` to ``kvexact conform``, ``fuzz`` or ``gate``; ``factory(config)``
returns the adapter. A factory declares its protocol with the attribute ``adapter_protocol``
(``"allocator"``, the default, ``"prefix-index"`` or ``"hybrid-cache"``); an allocator adapter stands in for
the reference in the KVAllocation and CowPublication machines, a prefix index in the Radix machine, a
hybrid-group cache (``kvexact.reference.hybrid_adapter.HybridCache``) in the Hybrid machine. The machines drive
the adapter and the normative reference in lockstep: both must accept and reject the same operations
(with the same rejection names where the adapter reports them), and the adapter's block tables, and the
copies its operations report, drive a real paged pool through the kernels, so a wrong block or a missed
copy shows up as wrong attention numbers. The adapter reports only observable facts: block tables,
lengths and the blocks it copied.

What the allocator machines call on an adapter (:data:`REQUIRED_METHODS`, :data:`OPTIONAL_METHODS`):
``block_ids``, ``start``, ``append``, ``release``, ``table``, ``length`` and ``self_check`` always;
``fork``, ``truncate``, ``cache``, ``evict``, ``lookup``, ``append_with_failure`` and the generation fence
``generation`` with ``stale_write``, ``observe`` (queues and COW steps,
:mod:`kvexact.conformance.observation`), ``cached_prefixes`` (what a hit may reuse) and ``kv_events`` (the
runtime's KV-cache events) when the adapter has them; the attributes ``name``, ``config`` and
(optional, default true) ``lockstep``. Nothing else: no digest is read from an adapter. Every argument is positional. ``--adapter`` checks these names and arities before any example.

Invariant of every adapter method: a rejected operation returns ``OpResult(accepted=False, ...)`` and
leaves the adapter's observable state (tables and lengths) unchanged.

The reference's trace recorder (:class:`TraceRecorder`, which :class:`ReferenceAdapter` attaches when a
spec is named) closes this module: the projection of the allocator onto the specs' variables, one record
per spec action.

Projection of the reference allocator onto the variables of ``spec/KVAllocation.tla`` and
``spec/CowPublication.tla``, and a trace recorder that keeps one record per spec action.

A projection is built of Python values: sets, :class:`~kvexact.spec.itf.Fn` for a TLA+ function, dicts
for records, lists for sequences, tuples, integers, and strings for model values (request ids, reader ids,
``NoReq``). The recorder keeps the checker's value of each (:func:`checker_value`), which trace validation
checks as it is; :func:`project_state` gives the ITF JSON of one state (Apalache's Informal Trace Format).

KVAllocation, variable by variable (``g`` a cache group id, ``b`` a block id of that group's pool):

* ``gen[g][b]``: the block record's generation.
* ``ref[g][b]``: references from committed request maps only (the pool refcount minus COW source leases,
  read leases and reader snapshots, which this spec does not model).
* ``ident[g][b]``: ``ident_of(cache_key)`` (by default ``int(key)``; the spec's identity j is the
  logical index of a full block of the shared token stream), 0 without a cache identity.
* ``rows[g][b]``: the block's written rows, 0 for a FREE block (refcount 0, no identity, unreserved):
  the spec resets rows when a block is freed; the reference keeps the bytes but they are dead.
* ``reserved[g]``: blocks reserved by the in-flight transaction.
* ``tables[r][g]``: the request's handles as ``[block, gen]`` records; ``<<>>`` for an absent request.
* ``len[r]``, ``tver[r]``: context tokens and table version (0 for an absent request).
* ``rgen[r]`` (not a variable of the current spec; projected for the record): ended lifetimes.
* ``epoch``: the allocator epoch.
* ``txn[r]``: r's in-flight boundary append (phase ``reserved`` until ``append_write``, then ``ready``;
  ``dest`` the reserved blocks, ``prev`` the identity each reservation evicted; ``alone`` always true: the
  reference runs one transaction at a time, ``Concurrent = 1``); ``idle`` for every other request.
* ``hist[r]``, ``undone``, ``stale``: history variables, kept by :class:`TraceRecorder` (the snapshot before
  r's first ``append_reserve``; after ``append_rollback`` until the next committed step, ``undone`` holds
  that snapshot; ``[grp, block, gen]``, the first group's old tail that a ``truncate`` returned to the
  free pool, held by a delayed writer, ``NoStale`` (block 0) after ``stale_write_rejected``).
* ``sharedStep``: always false (the reference copies every shared partial tail: ``TailPolicy = "eager"``).

CowPublication:

* ``data[g][b]``: the rows written (token ids), ``<<>>`` for a block without references that is not
  reserved; ``valid[g][b]``: ``Len(data)`` except 0 for a COW destination before ``cow_validate``;
  ``bundle[g][b]``: the block's bundle epoch (0 when free or not yet validated).
* ``ref[g][b]``: the whole refcount (maps + reader snapshots + COW source leases).
* ``gen``, ``tables``, ``len``, ``tver``, ``epoch`` as above; ``tokens[r]``: the request's token history.
* ``txn[r]``: r's in-flight COW transaction (phase ``begun``/``validated``/``published``, ``tok``,
  ``rows`` the predecessor's tail rows, ``src``/``dest`` per group, ``copied``/``written`` sets of
  groups); ``idle`` for every other request (the reference runs one transaction at a time,
  ``Concurrent = 1``).
* ``snap[x]``: reader snapshots; ``wrote``: the ``<<g, b>>`` pairs the step wrote.

Which records a spec keeps follows from its actions (the checker's list, :mod:`kvexact.spec.checker.model`)
and the nesting of the reference's steps, with no table: a step named for one of the spec's actions is
recorded with that action's parameters, unless a step enclosing it is also one of them (CowPublication
records ``append_boundary`` whole; KVAllocation records the ``append_reserve``, ``append_write`` and
``append_publish`` it encloses). A step the spec does not name is recorded with ``"in_spec": false``
(``allocate``, ``fork`` and ``cow_*`` in KVAllocation; ``cache_block``, ``prefix_hit``, ``evict``,
``truncate`` in CowPublication; ``retain_read``), unless it enclosed recorded steps.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from kvexact.reference import lifecycle
from kvexact.reference import prefix as px
from kvexact.reference.allocator import AllocationReceipt, Allocator, AllocRejection
from kvexact.reference.handles import BlockHandle
from kvexact.reference.keys import KeyInputs, hash_full_blocks
from kvexact.reference.namespaces import CacheIsolationNamespace, NamespaceRegistry, create_namespace
from kvexact.reference.pool import BlockState, GroupConfig, QueuePolicy
from kvexact.reference.rejections import Rejected
from kvexact.spec import itf
from kvexact.spec.checker.model import snake_case, spec_actions
from kvexact.spec.checker.values import ModelValue, mk_fcn
from kvexact.spec.itf import Fn


@attrs.frozen
class AdapterConfig:
    """Pool geometry shared by the reference and the adapter under test."""

    block_tokens: int = 2
    num_groups: int = 2
    blocks_per_group: int = 6
    row_bytes: tuple[int, ...] = (8, 4)  # group g's bytes a token row: row_bytes[g mod len(row_bytes)]


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
# observe() -> dict: the runtime's queues of unreferenced blocks and its COW steps, which the machines hold to
# the promises of kvexact.conformance.observation after every step. cached_prefixes() -> the full-block token
# prefixes the prefix cache can hit on now: a home start must hit exactly the longest chain of them (short of the
# prompt's last token), and after an accepted cache() every full-block prefix of the request is among them.
# kv_events() -> the runtime's KV-cache events since the previous call (vLLM's BlockStored, BlockRemoved and
# AllBlocksCleared, objects or maps with "type"): replayed after every step, they must leave stored in every group
# exactly the prefixes cached_prefixes() holds (kvexact.conformance.machines.kv_events).
OPTIONAL_METHODS = {"fork": 2, "truncate": 2, "cache": 1, "evict": 1, "append_with_failure": 2, "generation": 2,
                    "stale_write": 3, "lookup": 2, "observe": 0, "cached_prefixes": 0, "kv_events": 0}

AdapterFactory = Callable[[Any], Any]


PROTOCOLS = ("allocator", "prefix-index", "hybrid-cache")


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
    BAD_DECLARATION = "an adapter attribute declares a promise the machines do not know"
    CALL_TIMEOUT = "an adapter call did not return within the per-call limit"


# "could not run" (exit 3): the adapter is well formed but did not work; the others are bad arguments (exit 2),
# a factory that raises included (the user's adapter failed: its message is the answer, not an internal error)
COULD_NOT_RUN = frozenset({AdapterProblem.CALL_TIMEOUT})


class AdapterError(ValueError):
    """A ``--adapter`` that cannot be used: one line naming the adapter and what is wrong (``problem``)."""

    def __init__(self, problem: AdapterProblem, message: str):
        super().__init__(message)
        self.problem = problem

    def __reduce__(self) -> Any:  # pickled across the guard's fork with both arguments
        return (AdapterError, (self.problem, str(self)))

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
                           f"adapter {adapter_kind(adapter)} has no AdapterConfig 'config'")


def adapter_kind(adapter: Any) -> str:
    """The adapter's class name, through the machines' time-limiting wrapper (its ``wrapped_kind``)."""
    return getattr(adapter, "wrapped_kind", None) or type(adapter).__name__


def check_methods(adapter: Any, protocol: str, required: dict[str, int], optional: dict[str, int]) -> None:
    """Every required method present, and every present method callable with the machines' arguments."""
    kind = adapter_kind(adapter)
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
    keeps_published_blocks = False  # the adapter reference_factory builds declares it (see there)

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
        if self.prefix is None:  # no prefix cache, so no scoped lookup to offer (the machines count it missing)
            self.lookup = None  # type: ignore[assignment]
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

    def _key(self, prefix: tuple[int, ...]) -> str:
        """The content key of a full-block prefix without a stream (with one, ``cache`` goes through
        :meth:`_publish` and the prefix cache instead)."""
        return self.keys.setdefault(prefix, str(len(self.keys) + 1))

    def start(self, request_id: str, prompt: Sequence[int], scope: LookupScope = HOME) -> OpResult:
        """Admit a new request (a live request's id is refused as DUPLICATE_REQUEST, changing nothing)."""
        if request_id in self.alloc.requests:
            return OpResult(False, AllocRejection.DUPLICATE_REQUEST.name)
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

    def observe(self) -> dict[str, Any]:
        """Each group's free+evictable queue, head first (released blocks join the tail, a hit takes one out)."""
        return {"queues": {"reuse": {g: pool.queue_order() for g, pool in enumerate(self.alloc.pools)}}}

    def table(self, request_id: str, group: int) -> list[int]:
        return [h.block_id for h in self.alloc.request(request_id).tables[group]]

    def length(self, request_id: str) -> int:
        return self.alloc.request(request_id).context_tokens

    def self_check(self) -> None:
        self.alloc.self_check()

    def digest(self) -> str:
        return self.alloc.digest()


def reference_factory(config: AdapterConfig) -> ReferenceAdapter:
    """``--adapter kvexact.reference.adapters:reference_factory``: the reference as a system under test. Not in
    lockstep: it keys prefixes by content and publishes any request's full blocks on ``cache()``, while the
    machines' reference publishes only requests on the canonical stream, so under memory pressure the two
    may accept different operations; its tables, hits and queues are still checked."""
    adapter = ReferenceAdapter(config, spec=None)
    adapter.lockstep = False
    adapter.keeps_published_blocks = True  # a published block a live request maps is never evicted (refcount > 0)
    return adapter


def _copies(receipt: Any) -> tuple[tuple[int, int, int], ...]:
    """The (group, source block, destination block) copies a receipt reports (none for other outcomes)."""
    return tuple((src.cache_group_id, src.block_id, dst.block_id) for src, dst in getattr(receipt, "copies", ()))


# ---- the trace recorder: the allocator projected onto the specs' variables ------------------------------

SPECS = ("KVAllocation", "CowPublication")

NO_REQ = "NoReq"
NO_STALE_BLOCK = 0


def default_ident(key: str) -> int:
    return int(key)


def checker_value(value: Any, model_values: frozenset[str] | set[str]) -> Any:
    """The checker's value of a projection value: :class:`Fn` and dicts become functions (records keep their
    string keys), sets frozensets, lists and tuples sequences, a string named in ``model_values`` that model
    value. Invariant: equal to ``itf.decode(itf.encode_plain(value), model_values)``, with no JSON between."""
    t = type(value)
    if t is str:
        return ModelValue(value) if value in model_values else value
    if t is int or t is bool:
        return value
    if isinstance(value, Fn):
        return mk_fcn({checker_value(k, model_values): checker_value(v, model_values) for k, v in value.items()})
    if isinstance(value, dict):
        return mk_fcn({str(k): checker_value(v, model_values) for k, v in value.items()})
    if isinstance(value, (set, frozenset)):
        return frozenset(checker_value(v, model_values) for v in value)
    if isinstance(value, (list, tuple)):
        return tuple(checker_value(v, model_values) for v in value)
    return value


def _requests(alloc: Allocator, requests: Sequence[str] | None) -> list[str]:
    if requests is not None:
        return list(requests)
    return sorted(set(alloc.requests.data) | set(alloc.ended.data))


def _handle(h) -> dict:
    return {"block": h.block_id, "gen": h.generation}


def _other_refs(alloc: Allocator) -> list[dict[int, int]]:
    """References that are not request-map references: leases and reader snapshots."""
    out: list[dict[int, int]] = [{} for _ in alloc.groups]
    for h in alloc.leases.data.values():
        out[h.cache_group_id][h.block_id] = out[h.cache_group_id].get(h.block_id, 0) + 1
    for rec, _tokens in alloc.readers.data.values():
        for table in rec.tables:
            for h in table:
                out[h.cache_group_id][h.block_id] = out[h.cache_group_id].get(h.block_id, 0) + 1
    return out


def _all_blocks(alloc: Allocator) -> list[int]:
    """The union of every pool's block ids: the specs have one ``Blocks`` constant for all groups, so each
    group's functions range over the union (a block id a pool lacks projects as free, generation 0)."""
    return sorted({b for pool in alloc.pools for b in pool.blocks.data})


def _open_txn(alloc: Allocator):
    return next(iter(alloc.txns.data.values()), None)


def _request_vars(alloc: Allocator, requests: list[str]) -> tuple[Fn, Fn, Fn]:
    tables, lens, tvers = Fn(), Fn(), Fn()
    for r in requests:
        rec = alloc.requests.get(r)
        tables[r] = Fn({g: [_handle(h) for h in rec.tables[g]] if rec else [] for g in range(len(alloc.groups))})
        lens[r] = rec.context_tokens if rec else 0
        tvers[r] = rec.table_version if rec else 0
    return tables, lens, tvers


def project_kv_allocation(alloc: Allocator, requests: Sequence[str] | None = None,
                          ident_of: Callable[[str], int] = default_ident,
                          wrote: Iterable[tuple[int, int]] = ()) -> dict[str, Any]:
    """The KVAllocation variables (history variables at their idle values; ``wroteCached`` from the blocks
    the step wrote, ``wrote``)."""
    reqs = _requests(alloc, requests)
    other = _other_refs(alloc)
    gen, ref, ident, rows, reserved, queued = Fn(), Fn(), Fn(), Fn(), Fn(), Fn()
    blocks = _all_blocks(alloc)
    for g, pool in enumerate(alloc.pools):
        gen[g], ref[g], ident[g], rows[g] = Fn(), Fn(), Fn(), Fn()
        reserved[g] = set()
        # the free+evictable queue; a block id the group does not have is never taken, as if queued
        queued[g] = set(pool.queue_order()) | {b for b in blocks if b not in pool.blocks}
        for b in blocks:
            if b not in pool.blocks:
                gen[g][b] = ref[g][b] = ident[g][b] = rows[g][b] = 0
                continue
            rec = pool.blocks[b]
            gen[g][b] = rec.generation
            ref[g][b] = pool.refcount(b) - other[g].get(b, 0)
            ident[g][b] = ident_of(rec.cache_key) if rec.cache_key is not None else 0
            rows[g][b] = 0 if pool.state_of(b) is BlockState.FREE else rec.valid_rows
            if rec.reserved_by is not None:
                reserved[g].add(b)
    tables, lens, tvers = _request_vars(alloc, reqs)
    rgen = Fn({r: (alloc.requests[r].request_generation - 1) if r in alloc.requests else alloc.ended.get(r, 0)
               for r in reqs})
    groups = range(len(alloc.groups))
    txn = Fn({r: {"phase": "idle", "dest": Fn({g: 0 for g in groups}), "prev": Fn({g: 0 for g in groups}),
                  "alone": True} for r in reqs})
    open_txn = _open_txn(alloc)
    if open_txn is not None and "new" in open_txn.plan and open_txn.request_id in txn:
        mine = txn[open_txn.request_id]  # the reference serializes: the one transaction runs alone
        mine["phase"] = "ready" if open_txn.publication_state == "READY_TO_PUBLISH" else "reserved"
        for h, key in zip(open_txn.reserved_handles, open_txn.evicted_keys, strict=True):
            mine["dest"][h.cache_group_id] = h.block_id
            mine["prev"][h.cache_group_id] = ident_of(key) if key is not None else 0
    state = {"gen": gen, "ref": ref, "ident": ident, "rows": rows, "reserved": reserved, "tables": tables,
             "len": lens, "tver": tvers, "rgen": rgen, "epoch": alloc.epoch, "txn": txn, "pool": queued}
    idle = init_snapshot(state)
    state["hist"] = Fn({r: idle for r in reqs})
    state["undone"] = {"on": False, "before": idle}
    state["stale"] = no_stale(groups)
    state["wroteCached"] = {(g, b) for g, b in wrote if ident[g][b] != 0}
    state["sharedStep"] = False  # the reference copies every shared partial tail (TailPolicy "eager")
    return state


SNAPSHOT_VARS = ("gen", "ref", "ident", "rows", "reserved", "tables", "len", "tver", "epoch")


def no_stale(groups: Iterable[int]) -> dict[str, int]:
    """KVAllocation's NoStale: no delayed writer (block 0) in the smallest group."""
    return {"grp": min(groups), "block": NO_STALE_BLOCK, "gen": 0}


def snapshot_of(state: dict[str, Any]) -> dict[str, Any]:
    return {k: state[k] for k in SNAPSHOT_VARS}


def init_snapshot(state: dict[str, Any]) -> dict[str, Any]:
    """KVAllocation's InitSnapshot over the domains of ``state``."""

    def zero_blocks(f: Fn) -> Fn:
        return Fn({g: Fn({b: 0 for b in f[g]}) for g in f})

    return {"gen": zero_blocks(state["gen"]), "ref": zero_blocks(state["gen"]),
            "ident": zero_blocks(state["gen"]), "rows": zero_blocks(state["gen"]),
            "reserved": Fn({g: set() for g in state["gen"]}),
            "tables": Fn({r: Fn({g: [] for g in state["gen"]}) for r in state["tables"]}),
            "len": Fn({r: 0 for r in state["len"]}), "tver": Fn({r: 0 for r in state["tver"]}), "epoch": 0}


def project_cow_publication(alloc: Allocator, requests: Sequence[str] | None = None,
                            readers: Sequence[str] = (), wrote: Iterable[tuple[int, int]] = ()
                            ) -> dict[str, Any]:
    """The CowPublication variables."""
    reqs = _requests(alloc, requests)
    open_txn = _open_txn(alloc)
    cow_txn = open_txn if open_txn is not None and "cow" in open_txn.plan else None
    validated = cow_txn is not None and cow_txn.publication_state in ("VALIDATED", "PUBLISHED")
    data, valid, ref, gen, bundle = Fn(), Fn(), Fn(), Fn(), Fn()
    blocks = _all_blocks(alloc)
    for g, pool in enumerate(alloc.pools):
        data[g], valid[g], ref[g], gen[g], bundle[g] = Fn(), Fn(), Fn(), Fn(), Fn()
        for b in blocks:
            if b not in pool.blocks:
                data[g][b], valid[g][b], ref[g][b], gen[g][b], bundle[g][b] = [], 0, 0, 0, 0
                continue
            rec = pool.blocks[b]
            live = pool.refcount(b) > 0 or rec.reserved_by is not None
            pending = rec.reserved_by is not None and not validated
            data[g][b] = list(rec.rows) if live else []
            valid[g][b] = 0 if (not live or pending) else rec.valid_rows
            bundle[g][b] = 0 if (not live or pending) else rec.bundle_epoch
            ref[g][b] = pool.refcount(b)
            gen[g][b] = rec.generation
    tables, lens, tvers = _request_vars(alloc, reqs)
    tokens = Fn({r: list(alloc.tokens_of(r)) if r in alloc.requests else [] for r in reqs})
    groups = range(len(alloc.groups))
    txn = Fn({r: {"phase": "idle", "tok": 0, "rows": 0, "src": Fn({g: 0 for g in groups}),
                  "dest": Fn({g: 0 for g in groups}), "copied": set(), "written": set()} for r in reqs})
    if (cow_txn is not None and cow_txn.publication_state in ("BEGUN", "VALIDATED", "PUBLISHED")
            and cow_txn.request_id in txn):
        mine = txn[cow_txn.request_id]  # the reference serializes: one COW transaction at a time
        mine["phase"] = {"BEGUN": "begun", "VALIDATED": "validated", "PUBLISHED": "published"}[
            cow_txn.publication_state]
        mine.update(tok=cow_txn.new_tokens[0], rows=cow_txn.source_tail_rows,
                    copied=set(cow_txn.copied_groups), written=set(cow_txn.written_groups))
        for g, h in enumerate(cow_txn.touched_handles):
            mine["src"][g] = h.block_id
        for h in cow_txn.reserved_handles:
            mine["dest"][h.cache_group_id] = h.block_id
    snap = Fn()
    for x in readers:
        held = alloc.readers.get(x)
        if held is None:
            snap[x] = {"on": False, "tables": Fn({g: [] for g in groups}), "len": 0, "tokens": []}
        else:
            rec, toks = held
            snap[x] = {"on": True, "tables": Fn({g: [_handle(h) for h in rec.tables[g]] for g in groups}),
                       "len": rec.context_tokens, "tokens": list(toks)}
    return {"data": data, "valid": valid, "ref": ref, "gen": gen, "bundle": bundle, "tables": tables,
            "len": lens, "tokens": tokens, "tver": tvers, "epoch": alloc.epoch, "txn": txn, "snap": snap,
            "wrote": {(g, b) for g, b in wrote}}


class TraceRecorder:
    """Collects ``{"action", "params", "state"}`` records for one spec while attached to an allocator.

    ``requests`` and ``readers`` fix the domains of the per-request and per-reader functions (the spec's
    ``Requests`` and ``Readers`` constants). History variables of KVAllocation are kept here. Parameters and
    states are the checker's values (:func:`checker_value`; request ids, reader ids and ``NoReq`` are model
    values), checked as they are; ITF JSON is written only with a trace file
    (:func:`kvexact.conformance.trace.trace_from_recorder`).
    """

    def __init__(self, spec: str, requests: Sequence[str] | None = None, readers: Sequence[str] = (),
                 ident_of: Callable[[str], int] = default_ident) -> None:
        if spec not in SPECS:
            raise ValueError(f"unknown spec {spec!r}; expected one of {sorted(SPECS)}")
        self.spec = spec
        self.actions = {snake_case(a): params for a, params in spec_actions(spec).items()}
        self.requests = None if requests is None else list(requests)
        self.readers = list(readers)
        self.ident_of = ident_of
        self.model_values = {*(self.requests or ()), *self.readers, NO_REQ}  # grows with the ids seen, unfixed
        self.records: list[dict[str, Any]] = []
        self.initial_state: dict[str, Any] | None = None
        self._last: dict[str, Any] | None = None

    def attach(self, alloc: Allocator) -> TraceRecorder:
        """Record the current state as the trace's first state and start recording ``alloc``'s steps."""
        alloc.recorder = self
        self._last = self.snapshot(alloc, ())
        self.initial_state = self._values(self._last)
        return self

    def _values(self, fields: dict[str, Any]) -> dict[str, Any]:
        return {k: checker_value(v, self.model_values) for k, v in fields.items()}

    @property
    def stale(self) -> dict[str, int]:
        """KVAllocation's history variable ``stale``: the handle a delayed writer holds (block 0: none)."""
        assert self._last is not None and self.spec == "KVAllocation"
        return dict(self._last["stale"])

    def snapshot(self, alloc: Allocator, wrote: Iterable[tuple[int, int]]) -> dict[str, Any]:
        if self.requests is None:
            self.model_values.update(_requests(alloc, None))
        if self.spec == "KVAllocation":
            return project_kv_allocation(alloc, self.requests, self.ident_of, wrote)
        return project_cow_publication(alloc, self.requests, self.readers, wrote)

    def record(self, path: tuple[str, ...], params: dict[str, Any], state: dict[str, Any],
               composite: bool = False) -> None:
        """Keep or fold the record of the step ``path[-1]`` (inside the steps ``path[:-1]``)."""
        action = path[-1]
        if any(outer in self.actions for outer in path[:-1]):
            return  # an enclosing step is this spec's action: its own record covers this step
        if action not in self.actions and composite:
            return  # a step of steps this spec records one by one
        if self.spec == "KVAllocation":
            state = self._kv_history(action, params, state)
        self._last = state
        entry: dict[str, Any]
        if action in self.actions:
            entry = {"action": action, "params": self._values({k: _fn(params[k]) for k in self.actions[action]}),
                     "state": self._values(state)}
        else:
            entry = {"action": action, "params": self._values({k: _fn(v) for k, v in params.items()}),
                     "state": self._values(state), "in_spec": False}
        self.records.append(entry)

    def _kv_history(self, action: str, params: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        prev = self._last if self._last is not None else state
        state = dict(state)
        stale = dict(prev["stale"])
        if action in ("append_reserve", "append_write"):
            r = params["r"]
            hist = Fn(prev["hist"])
            if action == "append_reserve" and prev["txn"][r]["phase"] == "idle":
                hist[r] = snapshot_of(prev)
            state["hist"] = hist
        if action == "append_rollback":  # the reference's transaction ran alone: undone records its predecessor
            state["undone"] = {"on": True, "before": prev["hist"][params["r"]]}
        if action == "stale_write_rejected":
            state["txn"], state["hist"], state["undone"] = prev["txn"], prev["hist"], prev["undone"]
            stale = no_stale(state["gen"])
        if action not in self.actions:  # a stuttering step keeps the history variables as they were
            state["hist"], state["undone"] = prev["hist"], prev["undone"]
        if action == "truncate":  # the delayed writer keeps the first group's old tail if it is dropped and freed
            g = min(state["gen"])
            old, kept = prev["tables"][params["r"]][g], state["tables"][params["r"]][g]
            b = old[-1]["block"]
            if len(kept) < len(old) and prev["ref"][g][b] == 1 and prev["ident"][g][b] == 0:
                stale = {"grp": g, "block": b, "gen": prev["gen"][g][b]}
        state["stale"] = stale
        return state


def _fn(value: Any) -> Any:
    if isinstance(value, dict) and value and all(isinstance(k, int) for k in value):
        return Fn(value)
    return value


def project_state(alloc: Allocator, spec: str = "KVAllocation", requests: Sequence[str] | None = None,
                  readers: Sequence[str] = (), ident_of: Callable[[str], int] = default_ident) -> dict[str, Any]:
    """The ITF-encoded values of ``spec``'s variables for the allocator's current state."""
    if spec == "KVAllocation":
        return itf.encode_plain(project_kv_allocation(alloc, requests, ident_of))
    if spec == "CowPublication":
        return itf.encode_plain(project_cow_publication(alloc, requests, readers))
    raise ValueError(f"unknown spec {spec!r}")
