---- MODULE VirtualMapping_UnmapLosesHandle ----
\* VIOLATES: PoolReconciles. Mutant of VirtualMapping.tla (seeded bug, kept on purpose): unmapping a page does not return its handle to the free pool.
(***************************************************************************)
(* vAttention's virtual K/V mapping (seed 0x06-0x06F).  Each request slot  *)
(* owns a reserved virtual range of MaxPages pages; physical handles are   *)
(* created separately and mapped into a slot's range on demand, at its     *)
(* contiguous frontier, synchronously or asynchronously (published ready   *)
(* only once awaited).  A slot serves one request generation at a time;    *)
(* its rows are valid K/V only when that generation wrote them, inside the *)
(* ready frontier.  Freeing a slot retains or unmaps its pages; a retained *)
(* page is capacity for the next owner, never its K/V (0x06E).             *)
(*                                                                         *)
(* One handle stands for one complete K/V-layer page bundle (0x06D: all K  *)
(* and V pages of a frontier become visible together).                     *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets

CONSTANTS
    Slots,      \* request slot ids (integers), each with its own virtual range
    Handles,    \* physical page-bundle handle ids (integers)
    PageTokens, \* token rows per page (0x06A: P_tokens = G / B_tensor,row)
    MaxPages,   \* pages of one slot's virtual range (0x06A: R / G)
    MaxGen      \* state bound: largest slot generation explored

VARIABLES
    phase,   \* "UNRESERVED", "VA_RESERVED" or "VA_RELEASED": the virtual range machine (0x06B)
    created, \* BOOLEAN: the physical handles exist (CREATED_FREE or MAPPED)
    freeH,   \* SUBSET Handles: created, unmapped handles
    pages,   \* [Slots -> Seq(Handles)]: the handle mapped at each page of the slot's range
    ready,   \* [Slots -> Nat]: pages published ready (the mapped frontier a kernel may cross)
    gen,     \* [Slots -> Nat]: the slot's request generation
    active,  \* [Slots -> BOOLEAN]: the slot is bound to a live request
    valid,   \* [Slots -> Nat]: K/V rows the live generation produced
    data,    \* [Handles -> Slots \X Nat]: the (slot, generation) whose rows a handle last received
    readOk   \* BOOLEAN history: every kernel read so far saw only rows valid for its reader

vars == <<phase, created, freeH, pages, ready, gen, active, valid, data, readOk>>

Range(s) == {s[i] : i \in DOMAIN s}
NoOwner == <<CHOOSE s \in Slots : \A t \in Slots : s <= t, 0>>
Owner(s) == <<s, gen[s]>>
Mapped == UNION {Range(pages[s]) : s \in Slots}
\* The handle backing token row t (0-based) of slot s: page t \div PageTokens, index + 1.
PageOf(t) == t \div PageTokens + 1
Backing(s, t) == pages[s][PageOf(t)]

TypeOK ==
    /\ phase \in {"UNRESERVED", "VA_RESERVED", "VA_RELEASED"}
    /\ created \in BOOLEAN
    /\ freeH \subseteq Handles
    /\ \A s \in Slots : Range(pages[s]) \subseteq Handles /\ Len(pages[s]) <= Cardinality(Handles)
    /\ ready \in [Slots -> Nat]
    /\ gen \in [Slots -> Nat]
    /\ active \in [Slots -> BOOLEAN]
    /\ valid \in [Slots -> Nat]
    /\ data \in [Handles -> Slots \X Nat]
    /\ readOk \in BOOLEAN

Init ==
    /\ phase = "UNRESERVED"
    /\ created = FALSE
    /\ freeH = {}
    /\ pages = [s \in Slots |-> <<>>]
    /\ ready = [s \in Slots |-> 0]
    /\ gen = [s \in Slots |-> 0]
    /\ active = [s \in Slots |-> FALSE]
    /\ valid = [s \in Slots |-> 0]
    /\ data = [h \in Handles |-> NoOwner]
    /\ readOk = TRUE

\* Unmap the highest page of slot s; its handle returns to the pool (0x06B MAPPED -> CREATED_FREE).
UnmapTop(s) ==
    /\ pages[s] # <<>>
    /\ pages' = [pages EXCEPT ![s] = SubSeq(@, 1, Len(@) - 1)]
    /\ ready' = [ready EXCEPT ![s] = IF @ < Len(pages[s]) - 1 THEN @ ELSE Len(pages[s]) - 1]
    /\ UNCHANGED freeH

-----------------------------------------------------------------------------
(* Actions.  Each is one reference step with the same name in snake_case.  *)

\* 0x06A, 0x06B init: reserve every slot's virtual range (address space, not HBM).
ReserveVirtual ==
    /\ phase = "UNRESERVED"
    /\ phase' = "VA_RESERVED"
    /\ UNCHANGED <<created, freeH, pages, ready, gen, active, valid, data, readOk>>

\* 0x06A, 0x06B init: create the physical handles, all CREATED_FREE (none mapped).
CreateHandles ==
    /\ phase = "VA_RESERVED"
    /\ ~created
    /\ created' = TRUE
    /\ freeH' = Handles
    /\ UNCHANGED <<phase, pages, ready, gen, active, valid, data, readOk>>

\* 0x06B alloc_reqid, 0x06E: bind an inactive slot to a new request: a new generation with no
\* valid rows; retained pages stay mapped as capacity only.
AllocReqid(s) ==
    /\ phase = "VA_RESERVED"
    /\ ~active[s]
    /\ active' = [active EXCEPT ![s] = TRUE]
    /\ gen' = [gen EXCEPT ![s] = @ + 1]
    /\ valid' = [valid EXCEPT ![s] = 0]
    /\ UNCHANGED <<phase, created, freeH, pages, ready, data, readOk>>

\* 0x06D map before use: map a free handle at the contiguous frontier of a live slot's range.
\* A synchronous map publishes the page ready at once; an asynchronous one stays behind the
\* ready frontier until awaited (and no synchronous map may overtake a pending one).
MapBundle(s, async) ==
    /\ created
    /\ active[s]
    /\ Len(pages[s]) < MaxPages
    /\ freeH # {}
    /\ async \/ ready[s] = Len(pages[s])
    /\ LET h == CHOOSE x \in freeH : \A y \in freeH : x <= y IN
       /\ pages' = [pages EXCEPT ![s] = Append(@, h)]
       /\ freeH' = freeH \ {h}
    /\ ready' = [ready EXCEPT ![s] = IF async THEN @ ELSE Len(pages[s]) + 1]
    /\ UNCHANGED <<phase, created, gen, active, valid, data, readOk>>

\* 0x06D step_async: await the background mapping: every pending page of the slot is published.
AwaitMapping(s) ==
    /\ active[s]
    /\ ready[s] < Len(pages[s])
    /\ ready' = [ready EXCEPT ![s] = Len(pages[s])]
    /\ UNCHANGED <<phase, created, freeH, pages, gen, active, valid, data, readOk>>

\* 0x06D, 0x06F (D's row 8 only after readiness): the live generation writes its next K/V row;
\* the row must lie inside the ready frontier and the virtual range.
WriteRows(s) ==
    /\ active[s]
    /\ valid[s] < MaxPages * PageTokens
    /\ valid[s] + 1 <= ready[s] * PageTokens
    /\ data' = [data EXCEPT ![Backing(s, valid[s])] = Owner(s)]
    /\ valid' = [valid EXCEPT ![s] = @ + 1]
    /\ UNCHANGED <<phase, created, freeH, pages, ready, gen, active, readOk>>

\* 0x06C, 0x06D require_use: a kernel attends over rows [0, n) of slot s's live generation; it
\* checks that this generation produced them and that the awaited frontier covers them.  The
\* history records whether every row it read was mapped, published and written by the reader.
RequireUse(s, n) ==
    /\ active[s]
    /\ n <= valid[s]
    /\ n <= ready[s] * PageTokens
    /\ readOk' = (readOk /\ \A t \in 0..(n - 1) :
                     /\ t < valid[s]
                     /\ PageOf(t) <= ready[s]
                     /\ data[Backing(s, t)] = Owner(s))
    /\ UNCHANGED <<phase, created, freeH, pages, ready, gen, active, valid, data>>

\* 0x06B free_reqid, 0x06E: the slot becomes inactive and its rows stop being valid; its pages
\* are retained (capacity for a later request, published as they are) or unmapped at once.
FreeReqid(s, unmap) ==
    /\ active[s]
    /\ active' = [active EXCEPT ![s] = FALSE]
    /\ valid' = [valid EXCEPT ![s] = 0]
    /\ IF unmap
       THEN /\ pages' = [pages EXCEPT ![s] = <<>>]
            /\ ready' = [ready EXCEPT ![s] = 0]
            /\ freeH' = freeH \cup Range(pages[s])
       ELSE /\ ready' = [ready EXCEPT ![s] = Len(pages[s])]
            /\ UNCHANGED <<pages, freeH>>
    /\ UNCHANGED <<phase, created, gen, data, readOk>>

\* 0x06D, 0x06G: a live slot unmaps its highest page, which must not back any of its valid rows.
UnmapBundle(s) ==
    /\ active[s]
    /\ valid[s] <= (Len(pages[s]) - 1) * PageTokens
    /\ UnmapTop(s)
    /\ UNCHANGED <<phase, created, gen, active, valid, data, readOk>>

\* 0x06E, 0x06F (D reclaims B's bundle): under pressure, unmap an inactive slot's highest page.
ReclaimInactive(s) ==
    /\ ~active[s]
    /\ UnmapTop(s)
    /\ UNCHANGED <<phase, created, gen, active, valid, data, readOk>>

\* 0x06B shutdown: release the physical handles, all unmapped (CREATED_FREE -> RELEASED).
ReleaseHandles ==
    /\ created
    /\ freeH = Handles
    /\ created' = FALSE
    /\ freeH' = {}
    /\ UNCHANGED <<phase, pages, ready, gen, active, valid, data, readOk>>

\* 0x06B shutdown: free the virtual ranges once no handle exists (VA_RESERVED -> VA_RELEASED).
ReleaseVirtual ==
    /\ phase = "VA_RESERVED"
    /\ ~created
    /\ \A s \in Slots : ~active[s]
    /\ phase' = "VA_RELEASED"
    /\ UNCHANGED <<created, freeH, pages, ready, gen, active, valid, data, readOk>>

Next ==
    \/ ReserveVirtual \/ CreateHandles \/ ReleaseHandles \/ ReleaseVirtual
    \/ \E s \in Slots :
          \/ AllocReqid(s) \/ AwaitMapping(s) \/ WriteRows(s) \/ UnmapBundle(s) \/ ReclaimInactive(s)
          \/ \E async \in BOOLEAN : MapBundle(s, async) \/ FreeReqid(s, async)
          \/ \E n \in 1..(MaxPages * PageTokens) : RequireUse(s, n)

Spec == Init /\ [][Next]_vars

\* State bound of the finite models (a CONSTRAINT, so bounded states are not deadlocks).
StateBound == \A s \in Slots : gen[s] <= MaxGen

-----------------------------------------------------------------------------
(* Invariants.                                                             *)

\* 0x06B: physical backing exists only inside reserved virtual ranges: a handle is created only
\* while the ranges are reserved, and a page is mapped only while its handle exists.
VirtualBeforeBacking ==
    /\ created => phase = "VA_RESERVED"
    /\ Mapped # {} => created

\* 0x06A, 0x06C: a slot maps pages only inside its reserved range, contiguously from page 0, and
\* publishes ready only what it mapped.
MappedWithinReservation ==
    \A s \in Slots : Len(pages[s]) <= MaxPages /\ ready[s] <= Len(pages[s])

\* 0x06B: no virtual address is mapped to two owners and no handle backs two virtual pages.
NoDoubleMapping ==
    \A s, t \in Slots : \A i \in DOMAIN pages[s], j \in DOMAIN pages[t] :
        pages[s][i] = pages[t][j] => (s = t /\ i = j)

\* 0x06A: M_phys,pool = M_mapped + M_free-handles, the two disjoint.
PoolReconciles ==
    created => (Mapped \cap freeH = {} /\ Mapped \cup freeH = Handles)

\* 0x06D map before use: every valid row lies inside the slot's ready (published) frontier.
MapBeforeUse == \A s \in Slots : valid[s] <= ready[s] * PageTokens

\* 0x06E: a slot's valid rows are its live generation's own: an inactive slot has none, and each
\* valid row's page holds rows the current generation wrote (a retained page is capacity, not K/V).
ValidRowsOwned ==
    \A s \in Slots :
        /\ ~active[s] => valid[s] = 0
        /\ \A t \in 0..(valid[s] - 1) : PageOf(t) <= Len(pages[s]) /\ data[Backing(s, t)] = Owner(s)

\* 0x06D, 0x06E: no kernel read took an unmapped, unpublished or retained page as valid K/V.
NoInvalidRead == readOk

THEOREM Spec => []TypeOK
THEOREM Spec => []VirtualBeforeBacking
THEOREM Spec => []MappedWithinReservation
THEOREM Spec => []NoDoubleMapping
THEOREM Spec => []PoolReconciles
THEOREM Spec => []MapBeforeUse
THEOREM Spec => []ValidRowsOwned
THEOREM Spec => []NoInvalidRead

\* Witness (spec/witnesses/, non-vacuity): negated; a model check must find it violated: a new
\* generation of a slot found a retained mapping (a ready page still holding the previous
\* generation's rows) and wrote nothing into it yet (0x06E: C@2 reuses A's page 0).
WitnessNoRetainedReuse ==
    ~(\E s \in Slots : active[s] /\ gen[s] >= 2 /\ valid[s] = 0 /\ ready[s] > 0
                       /\ data[pages[s][1]][1] = s /\ 0 < data[pages[s][1]][2]
                       /\ data[pages[s][1]][2] < gen[s])

=============================================================================
