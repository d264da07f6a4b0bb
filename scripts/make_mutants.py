"""Generate spec/mutants/<Spec>_<bug>.tla/.cfg from the specs, one textual edit each (run after a spec change).

Each mutant is its spec with one realistic protocol bug seeded; its cfg is the spec's CI model (the same
invariants in the same order, so the mutant must not die of another one first). A liveness mutant
(LIVENESS_MUTANTS) breaks a PROPERTY instead, and its cfg is the spec's liveness model
(<Spec>.liveness.cfg, whole); a refinement mutant (REFINEMENT_MUTANTS) breaks PROPERTY RefinesExactHistory
of the CI model and no invariant, and its cfg is the CI model whole. An invariant mutant's cfg leaves the
CI model's PROPERTY out. tests/spec/test_specs_mutants.py checks the files are current.
"""
from pathlib import Path

SPEC = Path(__file__).resolve().parents[1] / "spec"
OUT = SPEC / "mutants"

MUTANTS = {
"KVAllocation": [
 ("PublishOneGroup", "NoHalfBundle",
  "a boundary append publishes the new table entry of the first cache group only (group 1 is lost)",
  [("""    /\\ tables' = [tables EXCEPT ![r] = [g \\in Groups |-> Append(tables[r][g], Handle(g, txn[r].dest[g]))]]""",
    """    /\\ tables' = [tables EXCEPT ![r] = [g \\in Groups |->
                     IF g = NoStale.grp THEN Append(tables[r][g], Handle(g, txn[r].dest[g])) ELSE tables[r][g]]]"""),
   ("""    /\\ ref' = [g \\in Groups |-> [ref[g] EXCEPT ![txn[r].dest[g]] = @ + 1]]
    /\\ reserved' = [g \\in Groups |-> reserved[g] \\ {txn[r].dest[g]}]""",
    """    /\\ ref' = [ref EXCEPT ![NoStale.grp][txn[r].dest[NoStale.grp]] = @ + 1]
    /\\ reserved' = [g \\in Groups |-> reserved[g] \\ {txn[r].dest[g]}]""")]),
 ("NoGenerationBump", "StaleHandleFenced",
  "reserving a block from the free pool forgets to advance its generation (and rollback forgets to restore it)",
  [("""    /\\ gen' = [gen EXCEPT ![g][b] = @ + 1]
    /\\ ident' = [ident EXCEPT ![g][b] = 0]""", """    /\\ gen' = gen
    /\\ ident' = [ident EXCEPT ![g][b] = 0]"""),
   ("""       /\\ gen' = [g \\in Groups |-> [b \\in Blocks |-> IF b = d[g] THEN gen[g][b] - 1 ELSE gen[g][b]]]""",
    """       /\\ gen' = gen""")]),
 ("TruncateKeepsRefs", "RefcountDerived",
  "truncate drops the suffix from the table but not the refcount decrement",
  [("""    /\\ DropRefs([g \\in Groups |-> {tables[r][g][i].block : i \\in (k + 1)..Len(tables[r][g])}])""",
    """    /\\ DropRefs([g \\in Groups |-> {}])""")]),
 ("RollbackKeepsGeneration", "RollbackRestoresPredecessor",
  "rollback returns the reservations but leaves the advanced generations",
  [("""       /\\ gen' = [g \\in Groups |-> [b \\in Blocks |-> IF b = d[g] THEN gen[g][b] - 1 ELSE gen[g][b]]]""",
    """       /\\ gen' = gen""")]),
 ("ReserveMappedCachedBlock", "PoolPartition",
  "the allocator reuses any cached block, even one a request still maps: it is live and reserved at once",
  [("""    /\\ txn[r].dest[g] = 0
    /\\ b \\in pool[g]""", """    /\\ txn[r].dest[g] = 0
    /\\ (b \\in pool[g] \\/ ident[g][b] # 0)""")]),
 ("DuplicateIdentity", "UniqueIdentity",
  "cache publication does not check whether the identity is already cached in the group",
  [("""          /\\ \\A c \\in Blocks : ident[g][c] # j
""", "")]),
 ("LengthBeforeRow", "VisibleWithinRows",
  "an in-place append publishes the new length before the row is written (valid rows not advanced)",
  [("""    /\\ rows' = [g \\in Groups |-> [rows[g] EXCEPT ![TailBlock(r, g)] = (len[r] % P) + 1]]
    /\\ len' = [len EXCEPT ![r] = @ + 1]""", """    /\\ UNCHANGED rows
    /\\ len' = [len EXCEPT ![r] = @ + 1]""")]),
 ("TruncateRoundsDown", "NoHalfBundle",
  "truncate to a token count inside a block rounds the kept block count down: the partial last block is dropped",
  [(r"""    /\ LET k == NumBlocks(n) IN""", r"""    /\ LET k == n \div P IN""")]),
 ("WriteCachedTail", "CachedBlocksImmutable",
  "the in-place append checks only the refcount of the tail: a partial tail published in the prefix cache is written",
  [(r"""    /\ \A g \in Groups : ~SharedTail(r, g)""",
    r"""    /\ \A g \in Groups : ref[g][TailBlock(r, g)] = 1""")]),
],
"CowPublication": [
 ("WriteSharedTail", "SharedNeverWritten",
  "an append writes in place into a tail whose bundle is shared (the sharing check is missing)",
  [("""    /\\ \\A g \\in Groups : ref[g][TailBlock(r, g)] = 1
    /\\ data' = [g \\in Groups |-> [data[g] EXCEPT ![TailBlock(r, g)] = Append(@, t)]]""",
    """    /\\ \\A g \\in Groups : ref[g][TailBlock(r, g)] >= 1
    /\\ data' = [g \\in Groups |-> [data[g] EXCEPT ![TailBlock(r, g)] = Append(@, t)]]""")]),
 ("PublishBeforeCopy", "RequestsExact",
  "the COW transaction publishes as soon as every destination is reserved, before the copy completes",
  [("""CowPublish(r) ==
    /\\ txn[r].phase = "validated"
""", """CowPublish(r) ==
    /\\ txn[r].phase \\in {"begun", "validated"}
    /\\ \\A g \\in Groups : txn[r].dest[g] # 0
""")]),
 ("ValidateBeforeWrite", "ValidWithinWritten",
  "validation marks the destination rows valid without checking the data frontier",
  [("""    /\\ txn[r].written = Groups
    /\\ \\A g \\in Groups : Len(data[g][txn[r].dest[g]]) = txn[r].rows + 1
""", """    /\\ \\A g \\in Groups : txn[r].dest[g] # 0
""")]),
 ("PublishFirstGroupOnly", "NoMixedGroups",
  "the COW publication swaps the tail handle of the first group alone (the others would follow later)",
  [("""    /\\ tables' = [tables EXCEPT ![r] = [g \\in Groups |->
                     [tables[r][g] EXCEPT ![Len(tables[r][g])] = Handle(g, txn[r].dest[g])]]]
    /\\ ref' = [g \\in Groups |-> [b \\in Blocks |->
                  IF b = txn[r].dest[g] THEN ref[g][b] + 1
                  ELSE IF b = txn[r].src[g] THEN ref[g][b] - 1 ELSE ref[g][b]]]
    /\\ len' = [len EXCEPT ![r] = @ + 1]
    /\\ tokens' = [tokens EXCEPT ![r] = Append(@, txn[r].tok)]
    /\\ tver' = [tver EXCEPT ![r] = @ + 1]
    /\\ epoch' = epoch + 1
    /\\ txn' = [txn EXCEPT ![r].phase = "published"]
    /\\ wrote' = {}
    /\\ UNCHANGED <<data, valid, gen, bundle, snap>>""",
    """    /\\ LET g0 == CHOOSE g \\in Groups : \\A h \\in Groups : g <= h IN
       /\\ tables' = [tables EXCEPT ![r][g0] =
                          [tables[r][g0] EXCEPT ![Len(tables[r][g0])] = Handle(g0, txn[r].dest[g0])]]
       /\\ ref' = [ref EXCEPT ![g0][txn[r].dest[g0]] = @ + 1, ![g0][txn[r].src[g0]] = @ - 1]
    /\\ txn' = [txn EXCEPT ![r].phase = "published"]
    /\\ wrote' = {}
    /\\ UNCHANGED <<data, valid, gen, bundle, snap, len, tokens, tver, epoch>>""")]),
 ("NoSourceLease", "RefcountDerived",
  "the COW transaction does not retain its source handles while the copy is in flight",
  [("""    /\\ ref' = [g \\in Groups |-> [ref[g] EXCEPT ![TailBlock(r, g)] = @ + 1]]
    /\\ wrote' = {}
    /\\ UNCHANGED <<data, valid, gen, bundle, tables, len, tokens, tver, epoch, snap>>""",
    """    /\\ wrote' = {}
    /\\ UNCHANGED <<ref, data, valid, gen, bundle, tables, len, tokens, tver, epoch, snap>>""")]),
 ("ForkWithoutRefs", "RefcountDerived",
  "fork shares every handle without taking a strong reference per handle",
  [("""    /\\ tables' = [tables EXCEPT ![c] = tables[r]]
    /\\ ref' = [g \\in Groups |-> [b \\in Blocks |->
                  ref[g][b] + Cardinality({i \\in DOMAIN tables[r][g] : tables[r][g][i].block = b})]]""",
    """    /\\ tables' = [tables EXCEPT ![c] = tables[r]]
    /\\ ref' = ref""")]),
],
"NamespaceRevocation": [
 ("LookupBeforeAuth", "NoLookupBeforeAuth",
  "the index is looked up when the request arrives, before authorization",
  [("""Lookup(p) ==
    /\\ req[p].phase = "authorized"
    /\\ Current(p)""", """Lookup(p) ==
    /\\ req[p].phase \\in {"arrived", "authorized"}
    /\\ req[p].ns # NoTenant
    /\\ req[p].gen = nsGen[req[p].ns]""")]),
 ("CrossNamespaceHit", "NoCrossNamespaceHit",
  "the index is keyed by prefix and generation only: lookup and lease ignore the namespace",
  [("""    /\\ LET hits == {e \\in index : e.ns = req[p].ns /\\ e.gen = req[p].gen}""",
    """    /\\ LET hits == {e \\in index : e.gen = req[p].gen}"""),
   ("""    /\\ [ns |-> req[p].ns, gen |-> req[p].gen, block |-> req[p].block] \\in index
    /\\ leases' = leases \\cup {Lease(p)}""", """    /\\ \\E e \\in index : e.gen = req[p].gen /\\ e.block = req[p].block
    /\\ leases' = leases \\cup {Lease(p)}""")]),
 ("CompleteWithLiveLease", "RevocationComplete",
  "revocation does not wait for live leases of the old generation before reporting complete",
  [("""    /\\ rev[n] = "invalidated"
    /\\ \\A l \\in leases : ~(l.ns = n /\\ Old(n, l.gen))
""", """    /\\ rev[n] = "invalidated"
""")]),
 ("RecycleWithoutScrub", "NoStaleBytes",
  "a recycled physical block is handed to a new owner without scrubbing the previous tenant's bytes",
  [("""    /\\ bytes' = [bytes EXCEPT ![b] = NoTenant]
    /\\ req' = [req EXCEPT ![p].phase = "computing", ![p].block = b]""",
    """    /\\ UNCHANGED bytes
    /\\ req' = [req EXCEPT ![p].phase = "computing", ![p].block = b]""")]),
 ("KeepExternalCopies", "RevocationComplete",
  "revocation deletes the index entries but leaves the external-tier copies of the old generation",
  [("""    /\\ external' = {c \\in external : ~(c.ns = n /\\ Old(n, c.gen))}
    /\\ rev' = [rev EXCEPT ![n] = "purged"]""", """    /\\ UNCHANGED external
    /\\ rev' = [rev EXCEPT ![n] = "purged"]""")]),
 ("KeepOldBlocks", "RevocationComplete",
  "revocation reports complete without releasing the physical objects of the old generation",
  [("""    /\\ owner' = [b \\in Blocks |-> IF owner[b].ns = n /\\ Old(n, owner[b].gen) THEN NoOwner ELSE owner[b]]""",
    """    /\\ UNCHANGED owner""")]),
],
}

# Bugs that only a temporal property catches: a step the protocol needs can be postponed forever.
LIVENESS_MUTANTS = {
"KVAllocation": [
 ("RollbackOnlyWhenReady", "TxnEventuallyEnds",
  "a transaction can roll back only after its write: a reservation whose writer never comes is held forever",
  [("""    /\\ txn[r].phase \\in {"reserved", "ready"}
    /\\ LET d == txn[r].dest""", """    /\\ txn[r].phase = "ready"
    /\\ LET d == txn[r].dest""")]),
],
"CowPublication": [
 ("ReleaseSourcesWaitsForReaders", "FreedBlockEventuallyReusable",
  "the source leases of a published COW transaction are released only once no reader holds a snapshot",
  [("""    /\\ txn[r].phase = "published"
""", """    /\\ txn[r].phase = "published"
    /\\ \\A x \\in Readers : ~snap[x].on
""")]),
],
"NamespaceRevocation": [
 ("NoLeaseCancel", "RevocationEventuallyCompletes",
  "revocation waits for the old generation's leases to drain and never cancels them (0x0CE step 4)",
  [("""    \\/ \\E p \\in Tenants : RevokeCancelLease(n, p)
""", "")]),
],
}


def _mutant_text(spec: str, name: str, violates: str, why: str, edits: list) -> str:
    body = (SPEC / f"{spec}.tla").read_text()
    for old, new in edits:
        if body.count(old) != 1:
            raise ValueError(f"{name}: the edited text no longer occurs exactly once in {spec}.tla:\n{old}")
        body = body.replace(old, new)
    _head, rest = body.split("\n", 1)
    return (f"---- MODULE {name} ----\n"
            f"\\* VIOLATES: {violates}. Mutant of {spec}.tla (seeded bug, kept on purpose): {why}.\n{rest}")


# Bugs that only the refinement catches (PROPERTY RefinesExactHistory of the CI model): every state still
# satisfies every invariant, but a step is no ExactHistory step. The cfg is the spec's CI model, whole.
REFINEMENT_MUTANTS = {
"KVAllocation": [
 ("PrefixHitEveryEmptyRequest", "RefinesExactHistory",
  "a prefix hit is published into every empty request at once: one step changes two requests' histories",
  [(r"""       /\ tables' = [tables EXCEPT ![r] = [g \in Groups |-> [i \in 1..k |-> Handle(g, at(g, i))]]]
       /\ ref' = [g \in Groups |-> [b \in Blocks |->
                     IF ident[g][b] \in 1..k THEN ref[g][b] + 1 ELSE ref[g][b]]]
    /\ pool' = [g \in Groups |-> {b \in pool[g] : ident[g][b] \notin 1..k}]
    /\ len' = [len EXCEPT ![r] = k * P]
    /\ tver' = [tver EXCEPT ![r] = @ + 1]""",
    r"""       /\ tables' = [q \in Requests |-> IF len[q] = 0
                     THEN [g \in Groups |-> [i \in 1..k |-> Handle(g, at(g, i))]] ELSE tables[q]]
       /\ ref' = [g \in Groups |-> [b \in Blocks |->
                     IF ident[g][b] \in 1..k THEN ref[g][b] + Cardinality({q \in Requests : len[q] = 0})
                     ELSE ref[g][b]]]
    /\ pool' = [g \in Groups |-> {b \in pool[g] : ident[g][b] \notin 1..k}]
    /\ len' = [q \in Requests |-> IF len[q] = 0 THEN k * P ELSE len[q]]
    /\ tver' = [q \in Requests |-> IF len[q] = 0 THEN tver[q] + 1 ELSE tver[q]]""")]),
],
"CowPublication": [
 ("ForkMovesTables", "RefinesExactHistory",
  "fork moves the parent's tables to the child instead of sharing them: the parent's history vanishes in "
  "the same step, without a release",
  [(r"""    /\ tables' = [tables EXCEPT ![c] = tables[r]]
    /\ ref' = [g \in Groups |-> [b \in Blocks |->
                  ref[g][b] + Cardinality({i \in DOMAIN tables[r][g] : tables[r][g][i].block = b})]]
    /\ len' = [len EXCEPT ![c] = len[r]]
    /\ tokens' = [tokens EXCEPT ![c] = tokens[r]]""",
    r"""    /\ tables' = [tables EXCEPT ![c] = tables[r], ![r] = [g \in Groups |-> <<>>]]
    /\ ref' = ref
    /\ len' = [len EXCEPT ![c] = len[r], ![r] = 0]
    /\ tokens' = [tokens EXCEPT ![c] = tokens[r], ![r] = <<>>]""")]),
],
}


def _properties(lines: list[str]) -> list[str]:
    """The names under a model's PROPERTY line (up to the next section header or the end)."""
    if "PROPERTY" not in lines:
        return []
    names = []
    for ln in lines[lines.index("PROPERTY") + 1:]:
        if not ln.startswith(" "):
            break
        names.append(ln.strip())
    return names


def _whole_model_mutants(table: dict, suffix: str, head: str) -> dict[Path, str]:
    """Mutants that break a PROPERTY of the model ``<Spec><suffix>``, whose cfg is that model whole;
    ``head`` words their first comment (``{name}``, ``{prop}``, ``{model}``)."""
    files: dict[Path, str] = {}
    for spec, mutants in table.items():
        model = f"{spec}{suffix}"
        cfg = (SPEC / model).read_text()
        for bug, prop, why, edits in mutants:
            name = f"{spec}_{bug}"
            if prop not in _properties(cfg.splitlines()):
                raise ValueError(f"{name}: {prop} is not a PROPERTY of {model}")
            files[OUT / f"{name}.tla"] = _mutant_text(spec, name, prop, why, edits)
            body = [ln for ln in cfg.splitlines() if not ln.startswith("\\*")]
            files[OUT / f"{name}.cfg"] = "\n".join([head.format(name=name, prop=prop, model=model)] + body) + "\n"
    return files


def render_refinement() -> dict[Path, str]:
    """Every refinement mutant (path -> text): the spec with one edit, and the spec's CI model whole."""
    return _whole_model_mutants(REFINEMENT_MUTANTS, ".cfg", "\\* Mutant model: {name} must violate the refinement "
                                "{prop} (an action property) and no invariant; the CI model {model}.")


def render_liveness() -> dict[Path, str]:
    """Every liveness mutant (path -> text): the spec with one edit, and the spec's liveness model."""
    return _whole_model_mutants(LIVENESS_MUTANTS, ".liveness.cfg", "\\* Mutant model: {name} must violate the "
                                "temporal property {prop}; the liveness model {model}.")


# Mutants of the radix index and virtual mapping specs, and those that give every CI invariant a mutant
# (tests/spec/test_specs_vacuity.py); each entry as in MUTANTS.
# Two requests computing the same tokens at once, or one diverging inside an edge another just
# published, need a private copy each: four slots instead of the CI model's two. A KVAllocation bug that
# only an interleaving exposes needs two transactions in flight (the constants of KVAllocation.concurrent.cfg);
# one of the shared-tail policy needs TailPolicy "shared" (those of KVAllocation.shared.cfg).
CONSTANTS_II = {
    "KVAllocation_ReserveIgnoresOtherTxns": [("Groups = {0, 1}", "Groups = {0}"), ("MaxVersion = 2", "MaxVersion = 1"),
                              ("Concurrent = 1", "Concurrent = 2")],
    "KVAllocation_RollbackRestoresRepublished": [("Groups = {0, 1}", "Groups = {0}"), ("MaxVersion = 2", "MaxVersion = 1"),
                              ("Concurrent = 1", "Concurrent = 2")],
    "KVAllocation_PublishDropsOtherReservations": [("Groups = {0, 1}", "Groups = {0}"), ("MaxVersion = 2", "MaxVersion = 1"),
                              ("Concurrent = 1", "Concurrent = 2")],
    "KVAllocation_ShareWritesInPlace": [("Groups = {0, 1}", "Groups = {0}"), ('"eager"', '"shared"')],
    **{f"CowPublication_{bug}": [("Groups = {0, 1}", "Groups = {0}"), ("Blocks = {1, 2}", "Blocks = {1, 2, 3}"),
                                 ("Concurrent = 1", "Concurrent = 2")]
       for bug in ("ReserveIgnoresOtherTxns", "LeaseOncePerSource", "RollbackResetsEveryReservation")},
    "RadixIndex_InsertWithoutSplit": [("Slots = {1, 2}", "Slots = {1, 2, 3, 4}")],
    "RadixIndex_KeepDuplicateSlots": [("Slots = {1, 2}", "Slots = {1, 2, 3, 4}")],
}

MUTANTS_II = {
"KVAllocation": [
 ("ReserveIgnoresOtherTxns", "ReservationsDisjoint",
  "a reservation checks only that no request maps the block (refcount 0), not that another transaction in flight "
  "reserved it",
  [(r"""    /\ txn[r].dest[g] = 0
    /\ b \in pool[g]""", r"""    /\ txn[r].dest[g] = 0
    /\ ref[g][b] = 0""")]),
 ("RollbackRestoresRepublished", "UniqueIdentity",
  "a rollback restores the identity its reservation evicted even when another request published it again meanwhile",
  [(r"""           back(g) == txn[r].prev[g] # 0 /\ \A c \in Blocks : ident[g][c] # txn[r].prev[g]""",
    r"""           back(g) == txn[r].prev[g] # 0""")]),
 ("PublishDropsOtherReservations", "ReservedUnreachable",
  "a publication clears every reservation of the pool, also those of another transaction in flight",
  [(r"""    /\ reserved' = [g \in Groups |-> reserved[g] \ {txn[r].dest[g]}]
    /\ len' = [len EXCEPT ![r] = @ + 1]""", r"""    /\ reserved' = NoReserved
    /\ len' = [len EXCEPT ![r] = @ + 1]""")]),
 ("ShareWritesInPlace", "CachedBlocksImmutable",
  "the shared-tail policy writes the appended token into the shared tail in place instead of only sharing it",
  [(r"""          /\ wroteCached' = {}
          /\ sharedStep' = TRUE""", r"""          /\ wroteCached' = {w \in {<<g, TailBlock(r, g)>> : g \in Groups} : ident[w[1]][w[2]] # 0}
          /\ sharedStep' = TRUE""")]),
 ("TouchKeepsQueued", "ZeroRefIffPooled",
  "a prefix hit maps an evictable block but leaves it in the free queue, where the allocator can take it",
  [(r"""    /\ pool' = [g \in Groups |-> {b \in pool[g] : ident[g][b] \notin 1..k}]""", r"""    /\ UNCHANGED pool""")]),
 ("HandleOfOldGeneration", "HandlesCurrent",
  "a boundary append publishes the handle with the generation read before its reservation advanced it",
  [(r"""Append(tables[r][g], Handle(g, txn[r].dest[g]))""",
    r"""Append(tables[r][g], [block |-> txn[r].dest[g], gen |-> gen[g][txn[r].dest[g]] - 1])""")]),
 ("RollbackKeepsReservation", "ReservedUnreachable",
  "a rollback forgets to return its reservations: the blocks stay reserved by no transaction",
  [(r"""    /\ reserved' = [g \in Groups |-> reserved[g] \ {txn[r].dest[g]}]
    /\ pool' = [g \in Groups |-> pool[g] \cup ({txn[r].dest[g]} \ {0})]""", r"""    /\ UNCHANGED <<reserved, pool>>""")]),
],
"CowPublication": [
 ("ReserveIgnoresOtherTxns", "ReservationsDisjoint",
  "a COW reservation checks only that no request or lease references the block, not that another transaction "
  "in flight reserved it",
  [(r"""    /\ txn[r].dest[g] = 0
    /\ Free(g, b)""", r"""    /\ txn[r].dest[g] = 0
    /\ ref[g][b] = 0""")]),
 ("LeaseOncePerSource", "RefcountDerived",
  "a COW transaction takes no lease on a source tail that another transaction in flight already leases (one "
  "lease per block, not per transaction): the first to release frees a block the other still copies",
  [(r"""    /\ ref' = [g \in Groups |-> [ref[g] EXCEPT ![TailBlock(r, g)] = @ + 1]]""",
    r"""    /\ ref' = [g \in Groups |-> [ref[g] EXCEPT ![TailBlock(r, g)] =
                  IF \E s \in InFlight : txn[s].src[g] = TailBlock(r, g) THEN @ ELSE @ + 1]]""")]),
 ("RollbackResetsEveryReservation", "ReservationsHoldTheirCopy",
  "a rollback returns every reserved destination of the group to the pool (empty rows, generation back), "
  "not only its own: another transaction's copy is lost",
  [(r"""    /\ gen' = [g \in Groups |-> [b \in Blocks |-> IF b = txn[r].dest[g] THEN gen[g][b] - 1 ELSE gen[g][b]]]""",
    r"""    /\ gen' = [g \in Groups |-> [b \in Blocks |-> IF Reserved(g, b) THEN gen[g][b] - 1 ELSE gen[g][b]]]"""),
   (r"""           reset(g, b) == b = txn[r].dest[g] \/""", r"""           reset(g, b) == Reserved(g, b) \/""")]),
 ("PublishStaysValidated", "ReservedUnreachable",
  "the COW publication swaps the tables but leaves the transaction validated: its destinations stay reserved",
  [(r"""    /\ txn' = [txn EXCEPT ![r].phase = "published"]""", r"""    /\ UNCHANGED txn""")]),
 ("SnapshotDuringCow", "SnapshotsExact",
  "a reader snapshot taken during a COW append already counts the token being appended",
  [(r"""    /\ snap' = [snap EXCEPT ![x] = [on |-> TRUE, tables |-> tables[r], len |-> len[r], tokens |-> tokens[r]]]""",
    r"""    /\ snap' = [snap EXCEPT ![x] = [on |-> TRUE, tables |-> tables[r],
                 len |-> IF Busy(r) THEN len[r] + 1 ELSE len[r],
                 tokens |-> IF Busy(r) THEN Append(tokens[r], txn[r].tok) ELSE tokens[r]]]""")]),
],
"NamespaceRevocation": [
 ("CancelKeepsReceipt", "ReceiptsLeased",
  "cancelling a lease of the revoked generation leaves its executable receipt behind",
  [(r"""    /\ leases' = leases \ {Lease(p)}
    /\ receipts' = receipts \ {Lease(p)}
    /\ req' = [req EXCEPT ![p] = IdleReq]""", r"""    /\ leases' = leases \ {Lease(p)}
    /\ receipts' = receipts
    /\ req' = [req EXCEPT ![p] = IdleReq]""")]),
],
"RadixIndex": [
 ("EvictLockedLeaf", "LockedPathNeverEvicted",
  "eviction picks any leaf, even one a running request has locked",
  [(r"""    /\ lock[v] = 0
    /\ IsLeaf(tree, v)""", r"""    /\ IsLeaf(tree, v)""")]),
 ("MatchAcrossNamespaces", "MatchInOwnNamespace",
  "the prefix lookup ignores the namespace: a request can match another tenant's cached tokens",
  [(r"""\E v \in Nodes : Alive(nd, v) /\ nd[v].ns = n /\ Len(nd[v].path) >= k""",
    r"""\E v \in Nodes : Alive(nd, v) /\ Len(nd[v].path) >= k"""),
   (r"""    LET at == {v \in Nodes : Alive(nd, v) /\ nd[v].ns = n /\ nd[v].path = s}
        below == {v \in Nodes : Alive(nd, v) /\ nd[v].ns = n /\ IsPrefix(s, nd[v].path)}""",
    r"""    LET at == {v \in Nodes : Alive(nd, v) /\ nd[v].path = s}
        below == {v \in Nodes : Alive(nd, v) /\ IsPrefix(s, nd[v].path)}""")]),
 ("InsertWithoutSplit", "ChildSelectorsDistinct",
  "publication hangs the new suffix under the last whole node instead of splitting the edge it diverges in",
  [(r"""        w == NodeAt(tree, lock, n, SubSeq(q, 1, p))
        u == Fresh(w.tree)""", r"""        w == [tree |-> tree, lock |-> lock, node |-> 0]
        u == Fresh(w.tree)""")]),
 ("SplitDropsLock", "LockCountsDerived",
  "an edge split does not copy the old child's lock count onto the new shared parent",
  [(r"""             lock |-> [lk EXCEPT ![u] = lk[c]],""", r"""             lock |-> [lk EXCEPT ![u] = 0],""")]),
 ("SplitKeyOnly", "EdgeOwnsSlots",
  "an edge split moves the shared tokens to the new parent but leaves all the slots on the old child",
  [(r"""       ELSE [tree |-> [nd EXCEPT ![u] = [ns |-> n, path |-> s, slots |-> SubSeq(nd[c].slots, 1, cut)],
                                 ![c].slots = SubSeq(@, cut + 1, Len(@))],""",
    r"""       ELSE [tree |-> [nd EXCEPT ![u] = [ns |-> n, path |-> s, slots |-> <<>>]],""")]),
 ("KeepDuplicateSlots", "SlotsHeldOnce",
  "publication drops the request's duplicate copies of tokens another request cached first without freeing them",
  [(r"""        dup |-> Range(SubSeq(priv[r], 1, p - m)),""", r"""        dup |-> {},""")]),
 ("UnlockMiscounted", "EvictableSizeDerived",
  "dec_lock_ref credits the evictable size with the nodes already at zero instead of those reaching zero",
  [(r"""BecameUnlocked(nd, lk, t) == Cardinality(SlotsOf(nd, {v \in PathIn(nd, t) : lk[v] = 1}))""",
    r"""BecameUnlocked(nd, lk, t) == Cardinality(SlotsOf(nd, {v \in PathIn(nd, t) : lk[v] = 0}))""")]),
],
"VirtualMapping": [
 ("ReleaseHandlesWhileMapped", "VirtualBeforeBacking",
  "shutdown releases the physical handles without checking that every one is unmapped",
  [(r"""    /\ created
    /\ freeH = Handles
    /\ created' = FALSE""", r"""    /\ created
    /\ created' = FALSE""")]),
 ("MapBeyondReservation", "MappedWithinReservation",
  "the mapper grows a slot's frontier one page past its reserved virtual range",
  [(r"""    /\ Len(pages[s]) < MaxPages
    /\ freeH # {}""", r"""    /\ Len(pages[s]) <= MaxPages
    /\ freeH # {}""")]),
 ("MapMappedHandle", "NoDoubleMapping",
  "the mapper takes the lowest handle of the pool without checking that it is unmapped",
  [(r"""    /\ LET h == CHOOSE x \in freeH : \A y \in freeH : x <= y IN""",
    r"""    /\ LET h == CHOOSE x \in Handles : \A y \in Handles : x <= y IN""")]),
 ("UnmapLosesHandle", "PoolReconciles",
  "unmapping a page does not return its handle to the free pool",
  [(r"""    /\ freeH' = freeH \cup {pages[s][Len(pages[s])]}""", r"""    /\ UNCHANGED freeH""")]),
 ("WriteBeforeAwait", "MapBeforeUse",
  "a row is written as soon as its page is mapped, before an asynchronous mapping is awaited",
  [(r"""    /\ valid[s] + 1 <= ready[s] * PageTokens""", r"""    /\ valid[s] + 1 <= Len(pages[s]) * PageTokens""")]),
 ("FreeKeepsRows", "ValidRowsOwned",
  "freeing a slot keeps its valid-row count, so the next owner inherits the old rows as valid K/V",
  [(r"""    /\ active' = [active EXCEPT ![s] = FALSE]
    /\ valid' = [valid EXCEPT ![s] = 0]""", r"""    /\ active' = [active EXCEPT ![s] = FALSE]
    /\ UNCHANGED valid""")]),
 ("ReadRetainedPage", "NoInvalidRead",
  "the kernel checks only that its rows are mapped and published, not that this generation wrote them",
  [(r"""    /\ n <= valid[s]
    /\ n <= ready[s] * PageTokens""", r"""    /\ n <= ready[s] * PageTokens""")]),
],
}


for _spec, _extra in MUTANTS_II.items():
    MUTANTS.setdefault(_spec, []).extend(_extra)

# Mutants of the hybrid allocation spec (cache groups of different block sizes); entries as in MUTANTS.
MUTANTS_HYBRID = {
"HybridAllocation": [
 ("HitAtFinestAlignment", "HitAligned",
  "a hit is aligned to the first (finest) group's block size instead of the lcm: group 2 maps a block short",
  [(r"""Served(L) == L % A = 0 /\ L < MaxLen""", r"""Served(L) == L % P1 = 0 /\ L < MaxLen""")]),
 ("BoundaryOfFirstGroup", "TablesCoverLength",
  "appends test the block boundary with the first group's block size in every group (one shared quotient)",
  [(r"""AtBoundary(r, g) == len[r] % P[g] = 0""", r"""AtBoundary(r, g) == len[r] % P1 = 0""")]),
 ("PublishPartialTail", "CachedBlocksFull",
  "publication keys every block of the table, the partial tail included, instead of the A-aligned full blocks",
  [(r"""Cacheable(r, g) == (len[r] - (len[r] % A)) \div P[g]""", r"""Cacheable(r, g) == NumBlocks(len[r], g)""")]),
 ("PublishDuplicateIdentity", "UniqueIdentity",
  "publication does not check whether another block of the group already carries the identity",
  [(r"""                          /\ \A c \in Blocks : ident[g][c] # Key(g, i)
""", "")]),
 ("PositionOffByOne", "MappedRowsMatch",
  "a boundary append records the new block's logical index as the table length before the append",
  [(r"""[pos[g] EXCEPT ![new[g]] = Len(tables[r][g]) + 1]""", r"""[pos[g] EXCEPT ![new[g]] = Len(tables[r][g])]""")]),
 ("ReleaseKeepsRefs", "RefcountDerived",
  "release empties the tables but does not drop the references they held",
  [(r"""                 ref[g][b] - Cardinality({i \in 1..Len(tables[r][g]) : tables[r][g][i] = b})]]""",
    r"""                 ref[g][b]]]""")]),
],
}
for _spec, _extra in MUTANTS_HYBRID.items():
    MUTANTS.setdefault(_spec, []).extend(_extra)


def render() -> dict[Path, str]:
    """Every mutant file (path -> text), derived from the current specs and CI models."""
    files: dict[Path, str] = {}
    for spec, mutants in MUTANTS.items():
        cfg = (SPEC / f"{spec}.cfg").read_text()
        for bug, inv, why, edits in mutants:
            name = f"{spec}_{bug}"
            files[OUT / f"{name}.tla"] = _mutant_text(spec, name, inv, why, edits)
            lines = cfg.splitlines()
            i = lines.index("INVARIANTS")
            invs = [ln.strip() for ln in lines[i + 1:] if ln.strip()]
            props = _properties(lines)
            if inv not in invs:
                raise ValueError(f"{name}: {inv} is not an invariant of {spec}.cfg")
            head_cfg = [f"\\* Mutant model: {name} must violate {inv}; the invariants of {spec}.cfg in "
                        f"their order, and its constants."]
            head_cfg += [ln for ln in lines[1:i] if ln != "PROPERTY" and ln.strip() not in props]
            if spec == "CowPublication":  # one token value keeps every COW mutant's search short
                head_cfg = [ln.replace("Tokens = {1, 2}", "Tokens = {1}") for ln in head_cfg]
            for old, new in CONSTANTS_II.get(name, ()):  # a bug that needs a bigger pool than the CI model's
                head_cfg = [ln.replace(old, new) for ln in head_cfg]
            files[OUT / f"{name}.cfg"] = "\n".join(
                head_cfg + ["INVARIANTS"] + [f"    {x}" for x in invs]) + "\n"
    files.update(render_liveness())
    files.update(render_refinement())
    return files


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for path, text in render().items():
        path.write_text(text)
        print("wrote", path.name)


if __name__ == "__main__":
    main()
