"""TLA+ specifications of the ownership protocols and the model-checker front (embedded and TLC)."""

from importlib import resources
from pathlib import Path


def spec_dir() -> Path:
    """Folder holding the shipped ``.tla``/``.cfg`` files, from an installed copy or the source tree."""
    return Path(str(resources.files(__name__)))

# Files the distribution must ship (relative to spec_dir()); each spec issue appends its models.
_SPECS = ("KVAllocation", "CowPublication", "NamespaceRevocation")
_MUTANTS = (
    "CowPublication_ForkWithoutRefs",
    "CowPublication_NoSourceLease",
    "CowPublication_PublishBeforeCopy",
    "CowPublication_PublishFirstGroupOnly",
    "CowPublication_ValidateBeforeWrite",
    "CowPublication_WriteSharedTail",
    "KVAllocation_DuplicateIdentity",
    "KVAllocation_LengthBeforeRow",
    "KVAllocation_NoGenerationBump",
    "KVAllocation_PublishOneGroup",
    "KVAllocation_ReserveMappedCachedBlock",
    "KVAllocation_RollbackKeepsGeneration",
    "KVAllocation_TruncateKeepsRefs",
    "NamespaceRevocation_CompleteWithLiveLease",
    "NamespaceRevocation_CrossNamespaceHit",
    "NamespaceRevocation_KeepExternalCopies",
    "NamespaceRevocation_KeepOldBlocks",
    "NamespaceRevocation_LookupBeforeAuth",
    "NamespaceRevocation_RecycleWithoutScrub",
)
_WITNESSES = (
    "CowPublication_CowPublished",
    "KVAllocation_EvictThenReuse",
    "NamespaceRevocation_RevocationCompleted",
)
SHIPPED_MODELS: tuple[str, ...] = (
    *(f"{s}{ext}" for s in _SPECS for ext in (".tla", ".cfg", ".deep.cfg")),
    "NamespaceRevocation.liveness.cfg",
    *(f"mutants/{m}{ext}" for m in _MUTANTS for ext in (".tla", ".cfg")),
    *(f"witnesses/{w}.cfg" for w in _WITNESSES),
)
