"""The PromptCache machine: Prompt Cache schemas, prompts and invalidations against the allocator (0x0CB).

Schemas of four modules (random words, one of them with a parameter slot) are revised generation by
generation; modules are populated into pool blocks (:mod:`kvexact.reference.module_blocks`); prompts import
random modules, are assembled, and hold leases while they execute; the namespace rotates. After every step
the store's invariants hold (module blocks hold the module's tokens, refcount = owner + leases, dropped
modules own nothing), the allocator's self-check holds, and every executing prompt's cached segments read
back, through their leased blocks, exactly the tokens the current or older schema declared at their positions.
"""

from __future__ import annotations

from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvexact.conformance.machines import ConformanceFailure, counted_rule, not_applicable
from kvexact.reference.rejections import Rejected

WORDS = ("alpha", "beta", "gamma", "delta", "eps")
MODULES = ("m0", "m1", "m2", "m3")
TEXTS = st.lists(st.lists(st.sampled_from(WORDS), max_size=6), min_size=4, max_size=4)


def schema_markup(generation: int, texts: list[list[str]]) -> str:
    """Four modules in order; m1 carries a two-token parameter slot after its first word."""
    parts = []
    for name, words in zip(MODULES, texts, strict=True):
        body = " ".join(words)
        if name == "m1":
            body = f"{' '.join(words[:1])} <param name=\"p\" len=\"2\"/> {' '.join(words[1:])}"
        parts.append(f'<module name="{name}">{body}</module>')
    return f'<schema name="s" generation="{generation}">{"".join(parts)}</schema>'


class PromptCacheMachine(RuleBasedStateMachine):
    """Revise, populate, prompt (assemble and use), finish and rotate; the backed store checked each step."""

    stats: ClassVar[dict[str, int]] = {}

    def __init__(self) -> None:
        from kvexact.reference import prompt_cache as pc
        from kvexact.reference.allocator import Allocator
        from kvexact.reference.module_blocks import BackedModuleStore
        from kvexact.reference.modules import Namespace
        from kvexact.reference.pool import GroupConfig

        super().__init__()
        self.pc = pc
        groups = [GroupConfig(0, 0, 4, 1024), GroupConfig(1, 1, 4, 512)]
        ids = list(range(1, 17))
        self.backed = BackedModuleStore(Allocator(groups, [ids, ids], check_every_op=True))
        self.namespace = Namespace("tenant", 0, frozenset({"alice"}))
        self.generation = 1
        self.schema = pc.parse_schema(schema_markup(1, [["alpha"], ["beta", "gamma"], [], ["delta"]]))
        self.executing: dict[int, tuple[Any, ...]] = {}  # use id -> (segments, the schema they were assembled on)
        self._count("examples")

    def _count(self, name: str, n: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    @precondition(lambda self: bool(self.backed.owners))
    @rule(texts=TEXTS)
    @counted_rule
    def revise(self, texts: list[list[str]]) -> None:
        """A schema revision (while modules are stored): the next generation; every module of the older one
        releases its blocks."""
        self.generation += 1
        self.schema = self.pc.parse_schema(schema_markup(self.generation, texts))
        dropped = self.backed.revise_schema(self.schema)
        self._count("dropped_modules", len(dropped))

    @rule(mask=st.integers(1, 15))
    @counted_rule
    def populate(self, mask: int) -> None:
        """Populate the modules ``mask`` selects (all or nothing)."""
        names = [m for i, m in enumerate(MODULES) if mask >> i & 1]
        before = self.backed.alloc.digest()
        try:
            stored = self.backed.populate(self.schema, names, self.namespace, "sem", "lay")
        except Rejected as exc:
            if exc.reason.name != "OUT_OF_MEMORY" or self.backed.alloc.digest() != before:
                raise
            return not_applicable(self, "populate:out_of_memory")
        self._count("populated_modules", len(stored))

    @rule(mask=st.integers(0, 15), argument=st.sampled_from(("", "eps", "alpha beta")),
          reader=st.sampled_from(("alice", "alice", "mallory")))
    @counted_rule
    def prompt(self, mask: int, argument: str, reader: str) -> None:
        """Assemble a prompt importing the modules ``mask`` selects (m1 with its argument) and start using it;
        a reader outside the namespace is refused before any lookup and leases nothing."""
        imports = "".join(f'<{m} p="{argument}"/>' if m == "m1" and argument else f"<{m}/>"
                          for i, m in enumerate(MODULES) if mask >> i & 1)
        text = f'<prompt schema="s" generation="{self.generation}">{imports} tail words</prompt>'
        before = self.backed.alloc.digest()
        try:
            segments = self.pc.assemble_markup(reader, text, self.schema, self.backed.store, self.namespace,
                                               "sem", "lay")
        except Rejected as exc:
            if exc.reason.name != "UNAUTHORIZED_NAMESPACE" or self.backed.alloc.digest() != before:
                raise
            return not_applicable(self, "prompt:unauthorized")
        use = self.backed.use(segments)
        self.executing[use.use_id] = (segments, self.schema)
        self._count("cache_segments", len(use.modules))

    @precondition(lambda self: bool(self.executing))
    @rule(choice=st.integers(0, 99))
    @counted_rule
    def finish(self, choice: int) -> None:
        """A prompt finishes: its leases go."""
        use_id = sorted(self.executing)[choice % len(self.executing)]
        self.backed.finish(use_id)
        del self.executing[use_id]

    @precondition(lambda self: bool(self.backed.owners))
    @rule()
    @counted_rule
    def rotate(self) -> None:
        """The namespace's successor generation (while modules are stored): every module
        of the older one releases its blocks."""
        from kvexact.reference.modules import Namespace

        self.namespace = Namespace("tenant", self.namespace.generation + 1, self.namespace.readers)
        self._count("dropped_modules", len(self.backed.rotate_namespace(self.namespace)))

    @invariant()
    def store_consistent(self) -> None:
        """The store's invariants and the allocator's self-check hold."""
        self._count("steps")
        try:
            self.backed.check()
        except AssertionError as exc:
            raise ConformanceFailure(str(exc)) from None
        self.backed.alloc.self_check()

    @invariant()
    def executing_prompts_read_their_modules(self) -> None:
        """Each executing prompt's cached segments hold the declared tokens in their leased blocks."""
        alloc = self.backed.alloc
        for segments, schema in self.executing.values():
            for s in segments:
                if s.source != "cache":
                    continue
                module = schema.modules[s.module_id]
                if s.position_ids != module.position_ids:
                    raise ConformanceFailure(f"{s.module_id} used at {s.position_ids}, declared {module.position_ids}")
                rows: list[int] = []
                for h in s.receipt.physical_refs:
                    if h.cache_group_id == 0:
                        block = alloc.pools[0].blocks[h.block_id]
                        if block.generation != h.generation:
                            raise ConformanceFailure(f"{s.module_id}: leased {h} was reused")
                        rows.extend(block.rows)
                if tuple(rows[:len(module.token_ids)]) != module.token_ids:
                    raise ConformanceFailure(f"{s.module_id}: its blocks hold {rows}, declared {module.token_ids}")

    @classmethod
    def rule_names(cls) -> list[str]:
        return ["finish", "populate", "prompt", "revise", "rotate"]
