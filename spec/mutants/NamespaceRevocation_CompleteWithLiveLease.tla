---- MODULE NamespaceRevocation_CompleteWithLiveLease ----
\* VIOLATES: RevocationComplete. Mutant of NamespaceRevocation.tla (seeded bug, kept on purpose): revocation does not wait for live leases of the old generation before reporting complete.
(***************************************************************************)
(* Cache isolation namespaces and their revocation (seed 0x01A            *)
(* CacheIsolationNamespace, 0x0CD, 0x0CE).  Tenants are both principals   *)
(* and namespaces: principal t is authorized for namespace t only.  A     *)
(* request arrives naming a namespace, is authorized (before any lookup), *)
(* looks the index up at the namespace's current generation, leases the   *)
(* hit block, receives an executable receipt, executes and finishes; on a *)
(* miss it allocates a recycled physical block (scrubbed), writes it and  *)
(* publishes an index entry.  Index entries, leases, receipts, block      *)
(* owners and external-tier copies are tagged with namespace and          *)
(* generation.  Revocation of a namespace follows the seven steps of      *)
(* 0x0CE, one action per step.                                            *)
(*                                                                         *)
(* Counters: nsGen[t] advances by one at step 2 of a revocation (0x0CE:   *)
(* g -> g+1) and at no other time; done[t] is the generation below which  *)
(* every revocation of t has reported completion.                         *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets

CONSTANTS
    Tenants,    \* tenants: each is a principal and its cache namespace (model values)
    NoTenant,   \* model value: no tenant (a free block's owner, no request)
    Revocable,  \* the namespaces this model revokes (a subset of Tenants; a model bound)
    Blocks,     \* physical block ids (positive integers), shared by all namespaces
    MaxGen      \* model bound: revocations per namespace (a guard, so liveness needs no CONSTRAINT)

VARIABLES
    nsGen,    \* [Tenants -> Nat]: authorized namespace generation
    rev,      \* [Tenants -> {"none","stopped","advanced","invalidated","drained","released","purged"}]:
              \*  the revocation step each namespace has reached ("none": not being revoked)
    done,     \* [Tenants -> Nat]: every generation below done[t] is revoked and reported complete
    req,      \* [Tenants -> [phase: Phases, ns: Tenants \cup {NoTenant}, gen: Nat,
              \*  block: Blocks \cup {0}, authorized: BOOLEAN]]: each principal's one request
    index,    \* SUBSET [ns: Tenants, gen: Nat, block: Blocks]: prefix index entries (one prefix)
    owner,    \* [Blocks -> [ns: Tenants \cup {NoTenant}, gen: Nat]]: who owns each physical block
    bytes,    \* [Blocks -> Tenants \cup {NoTenant}]: whose K/V bytes the block physically holds
    leases,   \* SUBSET [p: Tenants, ns: Tenants, gen: Nat, block: Blocks]: live leases
    receipts, \* SUBSET [p: Tenants, ns: Tenants, gen: Nat, block: Blocks]: executable receipts
    external  \* SUBSET [ns: Tenants, gen: Nat]: copies in the external tier (M5.5 directory)

vars == <<nsGen, rev, done, req, index, owner, bytes, leases, receipts, external>>

Phases == {"idle", "arrived", "authorized", "hit", "miss", "leased", "executing", "computing", "written"}
Authz(p, n) == p = n                          \* principal p may use namespace n (0x01A)
NoOwner == [ns |-> NoTenant, gen |-> 0]
IdleReq == [phase |-> "idle", ns |-> NoTenant, gen |-> 0, block |-> 0, authorized |-> FALSE]
Lease(p) == [p |-> p, ns |-> req[p].ns, gen |-> req[p].gen, block |-> req[p].block]
Current(p) == req[p].gen = nsGen[req[p].ns]
BlockBusy(b) == \E l \in leases : l.block = b

Tagged == [ns : Tenants, gen : Nat, block : Blocks]
Held == [p : Tenants, ns : Tenants, gen : Nat, block : Blocks]
\* Types of every variable.
TypeOK ==
    /\ nsGen \in [Tenants -> Nat]
    /\ rev \in [Tenants -> {"none", "stopped", "advanced", "invalidated", "drained", "released", "purged"}]
    /\ done \in [Tenants -> Nat]
    /\ \A p \in Tenants :
          /\ req[p].phase \in Phases
          /\ req[p].ns \in Tenants \cup {NoTenant}
          /\ req[p].block \in Blocks \cup {0}
          /\ req[p].authorized \in BOOLEAN
    /\ index \subseteq Tagged
    /\ owner \in [Blocks -> [ns : Tenants \cup {NoTenant}, gen : Nat]]
    /\ bytes \in [Blocks -> Tenants \cup {NoTenant}]
    /\ leases \subseteq Held
    /\ receipts \subseteq Held
    /\ external \subseteq [ns : Tenants, gen : Nat]

Init ==
    /\ nsGen = [t \in Tenants |-> 0]
    /\ rev = [t \in Tenants |-> "none"]
    /\ done = [t \in Tenants |-> 0]
    /\ req = [p \in Tenants |-> IdleReq]
    /\ index = {}
    /\ owner = [b \in Blocks |-> NoOwner]
    /\ bytes = [b \in Blocks |-> NoTenant]
    /\ leases = {}
    /\ receipts = {}
    /\ external = {}

-----------------------------------------------------------------------------
(* Requests.  Each action is one reference step with the same name.        *)

\* 0x0CE, 0x01A: a request of principal p arrives naming namespace n (authorized for it or not).
Arrive(p, n) ==
    /\ req[p].phase = "idle"
    /\ req' = [req EXCEPT ![p] = [IdleReq EXCEPT !.phase = "arrived", !.ns = n]]
    /\ UNCHANGED <<nsGen, rev, done, index, owner, bytes, leases, receipts, external>>

\* 0x0CE "Authorization Before Lookup", 0x0CD step 1: authorize the namespace while it admits
\* requests (step 1 of a revocation stops admission), fixing the generation validated (step 2).
Authorize(p) ==
    /\ req[p].phase = "arrived"
    /\ Authz(p, req[p].ns)
    /\ rev[req[p].ns] = "none"
    /\ req' = [req EXCEPT ![p].phase = "authorized", ![p].authorized = TRUE,
                          ![p].gen = nsGen[req[p].ns]]
    /\ UNCHANGED <<nsGen, rev, done, index, owner, bytes, leases, receipts, external>>

\* 0x0CE, 0x01A: a request that is not authorized (or whose namespace stopped admitting) is
\* rejected before anything about the cache is looked at.
AuthorizationRejected(p) ==
    /\ req[p].phase = "arrived"
    /\ ~Authz(p, req[p].ns) \/ rev[req[p].ns] # "none"
    /\ req' = [req EXCEPT ![p] = IdleReq]
    /\ UNCHANGED <<nsGen, rev, done, index, owner, bytes, leases, receipts, external>>

\* 0x0CD step 3, 0x07C: look the index up for the request's namespace and generation only.
Lookup(p) ==
    /\ req[p].phase = "authorized"
    /\ Current(p)
    /\ LET hits == {e \in index : e.ns = req[p].ns /\ e.gen = req[p].gen}
       IN IF hits # {}
          THEN req' = [req EXCEPT ![p].phase = "hit", ![p].block = (CHOOSE e \in hits : TRUE).block]
          ELSE req' = [req EXCEPT ![p].phase = "miss"]
    /\ UNCHANGED <<nsGen, rev, done, index, owner, bytes, leases, receipts, external>>

\* 0x0CD steps 4-5: lease the hit block after re-validating the entry and the generation.
AcquireLease(p) ==
    /\ req[p].phase = "hit"
    /\ Current(p)
    /\ [ns |-> req[p].ns, gen |-> req[p].gen, block |-> req[p].block] \in index
    /\ leases' = leases \cup {Lease(p)}
    /\ req' = [req EXCEPT ![p].phase = "leased"]
    /\ UNCHANGED <<nsGen, rev, done, index, owner, bytes, receipts, external>>

\* 0x0CD steps 2, 5: a request whose generation is no longer current (or whose hit entry was
\* invalidated) and that holds nothing is rejected.
StaleRequestRejected(p) ==
    /\ req[p].phase \in {"authorized", "hit", "miss"}
    /\ \/ ~Current(p)
       \/ req[p].phase = "hit" /\ [ns |-> req[p].ns, gen |-> req[p].gen, block |-> req[p].block] \notin index
    /\ req' = [req EXCEPT ![p] = IdleReq]
    /\ UNCHANGED <<nsGen, rev, done, index, owner, bytes, leases, receipts, external>>

\* 0x0CD steps 5-8: the use gate passes (generation still current): an executable receipt.
Execute(p) ==
    /\ req[p].phase = "leased"
    /\ Current(p)
    /\ receipts' = receipts \cup {Lease(p)}
    /\ req' = [req EXCEPT ![p].phase = "executing"]
    /\ UNCHANGED <<nsGen, rev, done, index, owner, bytes, leases, external>>

\* 0x0CD step 10: the request finishes: its receipt and lease are released.
Finish(p) ==
    /\ req[p].phase \in {"leased", "executing"}
    /\ receipts' = receipts \ {Lease(p)}
    /\ leases' = leases \ {Lease(p)}
    /\ req' = [req EXCEPT ![p] = IdleReq]
    /\ UNCHANGED <<nsGen, rev, done, index, owner, bytes, external>>

\* 0x0CE "Revocation And Purge" (last paragraph): on a miss, a recycled physical block is
\* allocated to the namespace; its stale bytes are scrubbed before the new owner can see them.
Allocate(p, b) ==
    /\ req[p].phase = "miss"
    /\ Current(p)
    /\ owner[b] = NoOwner
    /\ ~BlockBusy(b)
    /\ owner' = [owner EXCEPT ![b] = [ns |-> req[p].ns, gen |-> req[p].gen]]
    /\ bytes' = [bytes EXCEPT ![b] = NoTenant]
    /\ req' = [req EXCEPT ![p].phase = "computing", ![p].block = b]
    /\ leases' = leases \cup {[p |-> p, ns |-> req[p].ns, gen |-> req[p].gen, block |-> b]}
    /\ UNCHANGED <<nsGen, rev, done, index, receipts, external>>

\* 0x0CE, 0x0CD step 9: the request computes its K/V into the block.
WriteBlock(p) ==
    /\ req[p].phase = "computing"
    /\ bytes' = [bytes EXCEPT ![req[p].block] = req[p].ns]
    /\ req' = [req EXCEPT ![p].phase = "written"]
    /\ UNCHANGED <<nsGen, rev, done, index, owner, leases, receipts, external>>

\* 0x01A publication policy: publish the block as the namespace's index entry at the current
\* generation (a stale generation publishes nothing) and release the lease.
PublishEntry(p) ==
    /\ req[p].phase = "written"
    /\ index' = IF Current(p) THEN index \cup {[ns |-> req[p].ns, gen |-> req[p].gen, block |-> req[p].block]}
                ELSE index
    /\ leases' = leases \ {Lease(p)}
    /\ req' = [req EXCEPT ![p] = IdleReq]
    /\ UNCHANGED <<nsGen, rev, done, owner, bytes, receipts, external>>

\* 0x05E, 0x0CE: an index entry is evicted (cache pressure): the weak identity goes.
EvictEntry(e) ==
    /\ e \in index
    /\ index' = index \ {e}
    /\ UNCHANGED <<nsGen, rev, done, req, owner, bytes, leases, receipts, external>>

\* 0x0CE: a block that no index entry names and no lease holds returns to the free pool; its bytes stay
\* (stale) until the next owner's allocation scrubs them.
FreeBlock(b) ==
    /\ owner[b] # NoOwner
    /\ ~BlockBusy(b)
    /\ \A e \in index : e.block # b
    /\ owner' = [owner EXCEPT ![b] = NoOwner]
    /\ UNCHANGED <<nsGen, rev, done, req, index, bytes, leases, receipts, external>>

\* 0x0CE, M5.5: an index entry is copied to the external tier.
Offload(e) ==
    /\ e \in index
    /\ [ns |-> e.ns, gen |-> e.gen] \notin external
    /\ external' = external \cup {[ns |-> e.ns, gen |-> e.gen]}
    /\ UNCHANGED <<nsGen, rev, done, req, index, owner, bytes, leases, receipts>>

-----------------------------------------------------------------------------
(* Revocation of namespace n: the seven steps of 0x0CE, one action each.   *)

Old(n, g) == g < nsGen[n]     \* generation g of n has been revoked (after step 2)

\* 0x0CE step 1: stop admitting requests to generation g.
RevokeStopAdmission(n) ==
    /\ rev[n] = "none"
    /\ n \in Revocable
    /\ nsGen[n] < MaxGen     \* model bound: at most MaxGen revocations per namespace
    /\ rev' = [rev EXCEPT ![n] = "stopped"]
    /\ UNCHANGED <<nsGen, done, req, index, owner, bytes, leases, receipts, external>>

\* 0x0CE step 2: advance the authorized namespace generation to g+1.
RevokeAdvanceGeneration(n) ==
    /\ rev[n] = "stopped"
    /\ nsGen' = [nsGen EXCEPT ![n] = @ + 1]
    /\ rev' = [rev EXCEPT ![n] = "advanced"]
    /\ UNCHANGED <<done, req, index, owner, bytes, leases, receipts, external>>

\* 0x0CE step 3: invalidate the index candidates of the old generation.
RevokeInvalidateIndex(n) ==
    /\ rev[n] = "advanced"
    /\ index' = {e \in index : ~(e.ns = n /\ Old(n, e.gen))}
    /\ rev' = [rev EXCEPT ![n] = "invalidated"]
    /\ UNCHANGED <<nsGen, done, req, owner, bytes, leases, receipts, external>>

\* 0x0CE step 4: cancel one live lease (and receipt) of the old generation: its request ends.
RevokeCancelLease(n, p) ==
    /\ rev[n] = "invalidated"
    /\ req[p].ns = n
    /\ req[p].phase \in {"leased", "executing", "computing", "written"}
    /\ Old(n, req[p].gen)
    /\ leases' = leases \ {Lease(p)}
    /\ receipts' = receipts \ {Lease(p)}
    /\ req' = [req EXCEPT ![p] = IdleReq]
    /\ UNCHANGED <<nsGen, rev, done, index, owner, bytes, external>>

\* 0x0CE step 4: no live lease of the old generation remains (waited for or cancelled).
RevokeLeasesDrained(n) ==
    /\ rev[n] = "invalidated"
    /\ rev' = [rev EXCEPT ![n] = "drained"]
    /\ UNCHANGED <<nsGen, done, req, index, owner, bytes, leases, receipts, external>>

\* 0x0CE step 5: release the physical objects of the old generation (threat model: released
\* memory keeps its bytes until the next allocation scrubs it).
RevokeReleaseBlocks(n) ==
    /\ rev[n] = "drained"
    /\ owner' = [b \in Blocks |-> IF owner[b].ns = n /\ Old(n, owner[b].gen) THEN NoOwner ELSE owner[b]]
    /\ rev' = [rev EXCEPT ![n] = "released"]
    /\ UNCHANGED <<nsGen, done, req, index, bytes, leases, receipts, external>>

\* 0x0CE step 6: remove the external-tier copies of the old generation.
RevokePurgeExternal(n) ==
    /\ rev[n] = "released"
    /\ external' = {c \in external : ~(c.ns = n /\ Old(n, c.gen))}
    /\ rev' = [rev EXCEPT ![n] = "purged"]
    /\ UNCHANGED <<nsGen, done, req, index, owner, bytes, leases, receipts>>

\* 0x0CE step 7: emit completion only when no executable receipt of the old generation remains;
\* the namespace admits requests again, at the new generation.
RevokeComplete(n) ==
    /\ rev[n] = "purged"
    /\ \A x \in receipts : ~(x.ns = n /\ Old(n, x.gen))
    /\ done' = [done EXCEPT ![n] = nsGen[n]]
    /\ rev' = [rev EXCEPT ![n] = "none"]
    /\ UNCHANGED <<nsGen, req, index, owner, bytes, leases, receipts, external>>

RevokeStep(n) ==
    \/ RevokeAdvanceGeneration(n)
    \/ RevokeInvalidateIndex(n)
    \/ \E p \in Tenants : RevokeCancelLease(n, p)
    \/ RevokeLeasesDrained(n)
    \/ RevokeReleaseBlocks(n)
    \/ RevokePurgeExternal(n)
    \/ RevokeComplete(n)

Next ==
    \/ \E p, n \in Tenants : Arrive(p, n)
    \/ \E p \in Tenants :
          \/ Authorize(p)
          \/ AuthorizationRejected(p)
          \/ Lookup(p)
          \/ AcquireLease(p)
          \/ StaleRequestRejected(p)
          \/ Execute(p)
          \/ Finish(p)
          \/ WriteBlock(p)
          \/ PublishEntry(p)
    \/ \E p \in Tenants, b \in Blocks : Allocate(p, b)
    \/ \E e \in [ns : Tenants, gen : 0..MaxGen, block : Blocks] : EvictEntry(e) \/ Offload(e)
    \/ \E b \in Blocks : FreeBlock(b)
    \/ \E n \in Tenants : RevokeStopAdmission(n) \/ RevokeStep(n)

Spec == Init /\ [][Next]_vars

\* The liveness model (NamespaceRevocation.liveness.cfg): revocation steps are weakly fair.
LiveSpec == Spec /\ \A n \in Tenants : WF_vars(RevokeStep(n))

-----------------------------------------------------------------------------
(* Invariants.                                                             *)


\* 0x0CE "Authorization Before Lookup", 0x01A, 0x0CD step 1: no lookup (not even a miss) happens
\* before the request is authorized for its namespace.
NoLookupBeforeAuth ==
    \A p \in Tenants :
        req[p].phase \in Phases \ {"idle", "arrived"} => req[p].authorized /\ Authz(p, req[p].ns)

\* 0x01A, 0x0CE: no hit across namespaces: a block a request leased or executes on belongs to the
\* request's own namespace and generation (a bare candidate is re-validated before its lease).
NoCrossNamespaceHit ==
    \A p \in Tenants :
        req[p].phase \in {"leased", "executing"} =>
            /\ owner[req[p].block].ns = req[p].ns
            /\ owner[req[p].block].gen = req[p].gen

\* 0x0CE step 7: once a revocation reports complete, no executable receipt from a revoked
\* generation exists.
NoReceiptAfterRevocation == \A x \in receipts : x.gen >= done[x.ns]

\* 0x0CE steps 3-6: completion implies no index entry, lease, external copy or physical owner of
\* the old generation remains.
RevocationComplete ==
    \A n \in Tenants :
        /\ \A e \in index : e.ns = n => e.gen >= done[n]
        /\ \A l \in leases : l.ns = n => l.gen >= done[n]
        /\ \A c \in external : c.ns = n => c.gen >= done[n]
        /\ \A b \in Blocks : owner[b].ns = n => owner[b].gen >= done[n]

\* 0x0CE last paragraph: stale bytes never become visible to a new owner of a recycled block: an
\* owned block holds no bytes, or its owner's.
NoStaleBytes == \A b \in Blocks : owner[b] # NoOwner => bytes[b] \in {NoTenant, owner[b].ns}

\* 0x0CD: every receipt is backed by a lease of the same request.
ReceiptsLeased == receipts \subseteq leases

THEOREM Spec => []TypeOK
THEOREM Spec => []NoLookupBeforeAuth
THEOREM Spec => []NoCrossNamespaceHit
THEOREM Spec => []NoReceiptAfterRevocation
THEOREM Spec => []RevocationComplete
THEOREM Spec => []NoStaleBytes
THEOREM Spec => []ReceiptsLeased

-----------------------------------------------------------------------------
(* Liveness (NamespaceRevocation.liveness.cfg, under LiveSpec).            *)

\* 0x0CE: a revocation that has started eventually reports completion (weak fairness).
RevocationEventuallyCompletes == \A n \in Tenants : (rev[n] # "none") ~> (rev[n] = "none")

\* Witness (spec/witnesses/, non-vacuity): negated; a model check must find it violated: some
\* revocation reported completion (0x0CE step 7).
WitnessNoCompletedRevocation == \A n \in Tenants : done[n] = 0

=============================================================================
