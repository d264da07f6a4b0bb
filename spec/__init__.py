"""TLA+ specifications of the ownership protocols and the model-checker front (embedded and TLC)."""

from importlib import resources
from pathlib import Path


def spec_dir() -> Path:
    """Folder holding the shipped ``.tla``/``.cfg`` files, from an installed copy or the source tree."""
    return Path(str(resources.files(__name__)))

# Every CI model (spec/<Spec>.cfg) has at most this many distinct states, so that CI's work is bounded by
# states, not by a clock (the largest, KVAllocation.cfg, has 24,802); a bigger model is a .deep.cfg.
CI_STATE_BUDGET = 25_000

# Files the distribution must ship (relative to spec_dir()); each spec issue appends its models.
_SPECS = ("KVAllocation", "CowPublication", "NamespaceRevocation", "RadixIndex", "VirtualMapping", "HybridAllocation")
_MUTANTS = (
    "CowPublication_ForkMovesTables",
    "CowPublication_ForkWithoutRefs",
    "CowPublication_LeaseOncePerSource",
    "CowPublication_NoSourceLease",
    "CowPublication_PublishStaysValidated",
    "CowPublication_PublishBeforeCopy",
    "CowPublication_PublishFirstGroupOnly",
    "CowPublication_ReserveIgnoresOtherTxns",
    "CowPublication_RollbackResetsEveryReservation",
    "CowPublication_ReleaseSourcesWaitsForReaders",
    "CowPublication_SnapshotDuringCow",
    "CowPublication_ValidateBeforeWrite",
    "CowPublication_WriteSharedTail",
    "KVAllocation_DuplicateIdentity",
    "KVAllocation_HandleOfOldGeneration",
    "KVAllocation_LengthBeforeRow",
    "KVAllocation_NoGenerationBump",
    "KVAllocation_PublishDropsOtherReservations",
    "KVAllocation_PublishOneGroup",
    "KVAllocation_ReserveMappedCachedBlock",
    "KVAllocation_RollbackKeepsGeneration",
    "KVAllocation_RollbackKeepsReservation",
    "KVAllocation_RollbackOnlyWhenReady",
    "KVAllocation_RollbackRestoresRepublished",
    "KVAllocation_ReserveIgnoresOtherTxns",
    "KVAllocation_ShareWritesInPlace",
    "KVAllocation_TouchKeepsQueued",
    "KVAllocation_TruncateKeepsRefs",
    "KVAllocation_PrefixHitEveryEmptyRequest",
    "KVAllocation_TruncateRoundsDown",
    "KVAllocation_WriteCachedTail",
    "NamespaceRevocation_CompleteWithLiveLease",
    "NamespaceRevocation_CancelKeepsReceipt",
    "NamespaceRevocation_CrossNamespaceHit",
    "NamespaceRevocation_KeepExternalCopies",
    "NamespaceRevocation_KeepOldBlocks",
    "NamespaceRevocation_LookupBeforeAuth",
    "NamespaceRevocation_NoLeaseCancel",
    "NamespaceRevocation_RecycleWithoutScrub",
    "RadixIndex_EvictLockedLeaf",
    "RadixIndex_InsertWithoutSplit",
    "RadixIndex_KeepDuplicateSlots",
    "RadixIndex_MatchAcrossNamespaces",
    "RadixIndex_SplitDropsLock",
    "RadixIndex_SplitKeyOnly",
    "RadixIndex_UnlockMiscounted",
    "VirtualMapping_FreeKeepsRows",
    "VirtualMapping_MapBeyondReservation",
    "VirtualMapping_MapMappedHandle",
    "VirtualMapping_ReadRetainedPage",
    "VirtualMapping_ReleaseHandlesWhileMapped",
    "VirtualMapping_UnmapLosesHandle",
    "VirtualMapping_WriteBeforeAwait",
    "HybridAllocation_BoundaryOfFirstGroup",
    "HybridAllocation_HitAtFinestAlignment",
    "HybridAllocation_PositionOffByOne",
    "HybridAllocation_PublishDuplicateIdentity",
    "HybridAllocation_PublishPartialTail",
    "HybridAllocation_ReleaseKeepsRefs",
)
_WITNESSES = (
    "CowPublication_CowPublished",
    "CowPublication_PublishDuringCopy",
    "CowPublication_RacingCows",
    "KVAllocation_CachedPartialTail",
    "KVAllocation_EvictThenReuse",
    "KVAllocation_PartialTail",
    "KVAllocation_RacingAppends",
    "KVAllocation_RollbackAfterRepublish",
    "KVAllocation_SharedPartialTail",
    "NamespaceRevocation_RevocationCompleted",
    "RadixIndex_SharedSplitLocked",
    "VirtualMapping_RetainedReuse",
)
SHIPPED_MODELS: tuple[str, ...] = (
    *(f"{s}{ext}" for s in _SPECS for ext in (".tla", ".cfg", ".deep.cfg")),
    *(f"{s}.liveness.cfg" for s in ("KVAllocation", "CowPublication", "NamespaceRevocation")),
    *(f"RadixIndex.{m}.cfg" for m in ("page2", "page3", "page2.deep", "page3.deep")),  # SGLang's paged cache
    "KVAllocation.concurrent.cfg",  # two transactions in flight (Concurrent = 2)
    "CowPublication.concurrent.cfg",  # two COW transactions in flight (Concurrent = 2)
    "KVAllocation.shared.cfg",  # the shared partial-tail policy (TailPolicy = "shared")
    "ExactHistory.tla",  # the abstract protocol; KVAllocation.cfg and CowPublication.cfg check PROPERTY RefinesExactHistory
    *(f"mutants/{m}{ext}" for m in _MUTANTS for ext in (".tla", ".cfg")),
    *(f"witnesses/{w}.cfg" for w in _WITNESSES),
)
