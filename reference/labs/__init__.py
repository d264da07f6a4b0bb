"""The seed's fixtures, seed traces and failure labs, one module per seed family, kept out of the product
modules. Nothing registers at import: :func:`register_all` registers every lab's negative cases, once.

Failure-lab counts the seed states (docs/design.md, "Named failures"): 0x05G 22, 0x06I 20, 0x07G 22, 0x08I 18,
0x0D 14 and Loop 11 27 (registered under 0x0CG), 211 in all. The four labs whose counts the seed does not
state (:data:`UNSTATED_LABS`) hold what is distinct, not a quota. A reason registered more than once in
one section must be listed in :data:`DISTINCT_VARIANTS` with what makes the variants different contracts.
"""

from __future__ import annotations

from kvexact.reference.labs import (
    allocator,
    modules,
    prefix,
    radix,
    reference1,
    reuse_gate,
    revocation,
    sessions,
    shared_prefix,
    telemetry,
    vmm,
)
from kvexact.reference.rejections import NegativeCase, negative_cases

LABS = (reference1, allocator, vmm, prefix, radix, shared_prefix, modules, sessions, reuse_gate, revocation,
        telemetry)

SEED_COUNTS = {
    "0x05G": 22,  # allocator, refcount and COW transitions
    "0x06I": 20,  # vAttention mapping
    "0x07G": 22,  # prefix caching
    "0x08I": 18,  # radix index
    "0x0D": 14,  # worked ledger: one-field accounting failures
    "0x0CG": 27,  # Loop 11: declared modules, sessions, reuse gate, isolation, telemetry
}
# Failure labs the seed names without a count: identity, addressing, shared-prefix execution, granularity.
UNSTATED_LABS = ("0x01A", "0x03I", "0x0BH", "0x0BN")
# (section, Family.REASON) -> why the cases sharing that reason in that section check different contracts
DISTINCT_VARIANTS = {
    ("0x01A", "CompatibilityRejection.INPUT_SIDE_DATA_MISMATCH"):
        "two side inputs behind equal tokens: multimodal features and prompt embeddings",
    ("0x01A", "CompatibilityRejection.NAMESPACE_MISMATCH"):
        "another tenant versus the same tenant's successor generation",
    ("0x08I", "RadixRejection.OWNED_SLOT_REUSE"): "a slot the tree owns versus a slot another request reserved",
    ("0x08I", "RadixRejection.PARTITION_VIOLATION"): "overlap versus leak: the two halves of 0x08A's disjoint cover",
    ("0x08I", "RadixRejection.STALE_VERSION"): "a prepared mutation (0x08B) versus a handoff receipt (0x08G)",
    ("0x08I", "RadixRejection.TOKEN_SLOT_LENGTH_MISMATCH"): "an insert's input versus a stored edge (0x08A)",
    ("0x0BH", "SharedPrefixRejection.BAD_COVERAGE"): "an empty interval versus one outside the batch",
    ("0x0BH", "SharedPrefixRejection.INVALID_STATE"):
        "a valid flag with no keys (c = 0) versus the empty partition's m = -inf (0x0BA)",
    ("0x0BN", "BlockMapRejection.KERNEL_BLOCK_DOES_NOT_DIVIDE"):
        "a kernel block larger than the allocator block (0x0AC's reverse direction) versus a smaller non-divisor",
}
SEED_LOOPS_2_TO_10 = 184
SEED_LOOP_11 = 27
SEED_TOTAL = SEED_LOOPS_2_TO_10 + SEED_LOOP_11  # 211

_registered = False


def register_all() -> None:
    """Register the negative cases of every lab (a second call changes nothing)."""
    global _registered
    if not _registered:
        for lab in LABS:
            lab.register()
        _registered = True


def cases(section: str | None = None) -> list[NegativeCase]:
    """Every registered case (of ``section``), every lab registered first."""
    register_all()
    return negative_cases(section)


def repeated_reasons() -> dict[tuple[str, str], list[str]]:
    """(section, Family.REASON) -> descriptions, for every reason registered more than once in a section."""
    groups: dict[tuple[str, str], list[str]] = {}
    for c in cases():
        groups.setdefault((c.section, f"{type(c.reason).__name__}.{c.reason.name}"), []).append(c.description)
    return {k: v for k, v in groups.items() if len(v) > 1}
