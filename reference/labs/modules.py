"""Prompt Cache's failure cases (Loop 11, registered under 0x0CG) on a fixed declared prompt."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

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
from kvexact.reference.rejections import NegativeCase, register_negative

# Loop 11 cases (0x0CG) --------------------------------------------------------------------------
SCHEMA = PromptSchema("travel-plan", 2, {
    "system": DeclaredModule("system", 0, 4),
    "city": DeclaredModule("city", 6, 3),  # positions 4, 5 are a declared parameter gap
    "question": DeclaredModule("question", 9, 2),
})
NS = Namespace("tenant-a/prompts", 1, frozenset({"alice"}))


def sample_receipt(**changes: Any) -> PromptModuleReceipt:
    base = PromptModuleReceipt("travel-plan", 2, "city", "p0", (501, 502, 503), (6, 7, 8), "sem-1", "lay-1",
                               "tenant-a/prompts", 1)
    return attrs.evolve(base, **changes)


def _assemble(principal: str = "alice", generation: int = 2, **receipt_changes: Any) -> tuple[Segment, ...]:
    cache = {("travel-plan", "city", "p0"): sample_receipt(**receipt_changes)}
    items = [PromptItem("system", (1, 2, 3, 4), cached=False), PromptItem("city", (501, 502, 503), True, "p0")]
    return assemble_declared_prompt(principal, "travel-plan", generation, items, SCHEMA, cache, NS, "sem-1", "lay-1")


def _cases() -> list[tuple[enum.Enum, str, Callable[[], Any]]]:
    R = ModuleRejection
    return [
        (R.UNAUTHORIZED_NAMESPACE, "module lookup by a principal outside the namespace", lambda: _assemble("mallory")),
        (R.SCHEMA_GENERATION_MISMATCH, "prompt written against an older schema generation",
         lambda: _assemble(generation=1)),
        (R.POSITION_MISMATCH, "module text equal but cached at other positions",
         lambda: _assemble(position_ids=(4, 5, 6))),
        (R.TOKEN_MISMATCH, "cached module tokens differ from the rendered text",
         lambda: _assemble(token_ids=(501, 502, 504))),
        (R.SEMANTIC_ABI_MISMATCH, "module produced under another semantic cache ABI",
         lambda: _assemble(semantic_manifest_digest="sem-2")),
        (R.TOKEN_POSITION_LENGTH_MISMATCH, "module receipt with fewer positions than tokens",
         lambda: sample_receipt(position_ids=(6, 7))),
        (R.UNDECLARED_MODULE, "prompt uses a module the schema does not declare",
         lambda: assemble_declared_prompt("alice", "travel-plan", 2, [PromptItem("hotel", (9,))], SCHEMA, {}, NS,
                                          "sem-1", "lay-1")),
    ]


def register() -> None:
    """Register the lab's cases (called once, by :func:`kvexact.reference.labs.register_all`)."""
    for reason, description, trigger in _cases():
        register_negative(NegativeCase("0x0CG", reason, description, trigger))


