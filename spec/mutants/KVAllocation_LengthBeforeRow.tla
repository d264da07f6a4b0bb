---- MODULE KVAllocation_LengthBeforeRow ----
\* VIOLATES: VisibleWithinRows. Mutant of KVAllocation.tla (seeded bug, kept on purpose): an in-place append publishes the new length before the row is written (valid rows not advanced).
(***************************************************************************)
(* Block allocation for a paged K/V cache with several cache groups        *)
(* (seed 0x02-0x05, 0x07C, 0x0CF).  Each cache group has its own pool of   *)
(* physical blocks.  A request maps logical blocks to generation-fenced    *)
(* handles, one table per group; a boundary append reserves one block in   *)
(* every group and publishes them together.                               *)
(*                                                                         *)
(* Every request replays one shared token stream, so the identity of a     *)
(* full block is its logical index j (identity j = the prefix of j*P       *)
(* tokens); 0 means "no cached identity".                                  *)
(*                                                                         *)
(* Counters (docs/design.md "Counters"; same rule in the reference):       *)
(*  - epoch advances by one when a transaction that reserved physical      *)
(*    blocks publishes, never on a rollback or a rejection (0x04F: the     *)
(*    rolled-back trace keeps epoch 43; 0x05B: the in-place append keeps   *)
(*    43, the COW publication makes it 44).                                *)
(*  - gen[g][b] advances by one each time block b leaves the free pool for *)
(*    a new owner, i.e. when a transaction reserves it (0x05E: 1003@12 is  *)
(*    freed by truncate and reserved for F as 1003@13).  A rollback        *)
(*    restores the predecessor generation (0x04F: exact predecessor        *)
(*    digest).  A prefix hit re-maps a cached block without a new owner    *)
(*    of its bytes, so it keeps the generation.                            *)
(*  - tver[r] advances by one on every publication that changes r's        *)
(*    snapshot (tables, length or valid rows): 0x05B A 5 -> 6 on an        *)
(*    in-place append; a fork publishes D at 1, its COW append makes it 2. *)
(*    A new request starts at 0.                                           *)
(*  - the request generation advances when r's lifetime ends (release);   *)
(*    it is not a variable here: a released request restarts at tver 0.    *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets

CONSTANTS
    Groups,     \* cache group ids (integers), each with its own pool (0x03B)
    Blocks,     \* block ids of each group's pool (positive integers)
    Requests,   \* request ids (model values)
    NoReq,      \* model value: no request
    P,          \* rows (tokens) per block, the same in every group (0x04E)
    MaxTokens,  \* longest request, in tokens
    MaxGen,     \* state bound: largest block generation explored
    MaxEpoch,   \* state bound: largest allocator epoch explored
    MaxVersion, \* state bound: largest request table version explored
    Concurrent, \* most boundary-append transactions in flight at once; 1 serializes every step
    TailPolicy  \* "eager": an append onto a shared partial tail copies it; "shared": it shares the
                \*  tail while the appended row is already there, and copies at the first write (0x07D)

VARIABLES
    gen,      \* [Groups -> [Blocks -> Nat]]: each block's current generation
    ref,      \* [Groups -> [Blocks -> Nat]]: recorded refcount (0x04B)
    ident,    \* [Groups -> [Blocks -> Nat]]: cached identity, 0 = none (weak ref)
    rows,     \* [Groups -> [Blocks -> 0..P]]: valid rows written in the block
    reserved, \* [Groups -> SUBSET Blocks]: blocks held unpublished by the transaction
    tables,   \* [Requests -> [Groups -> Seq([block: Blocks, gen: Nat])]]: block tables
    len,      \* [Requests -> Nat]: tokens visible to the request (its context length)
    tver,     \* [Requests -> Nat]: request table version
    epoch,    \* Nat: allocator epoch
    txn,      \* [Requests -> [phase: {"idle","reserved","ready"}, dest: [Groups -> Blocks \cup {0}],
              \*  prev: [Groups -> Nat], alone: BOOLEAN]]: each request's in-flight boundary append;
              \*  prev[g] is the identity its reservation evicted in g; alone: no other step has
              \*  changed the state since it began
    hist,     \* history variable: [Requests -> snapshot taken when r's transaction began]
    undone,   \* history variable: [on: BOOLEAN, before: snapshot]: the last step rolled back a
              \*  transaction that ran alone, whose predecessor snapshot is before
    stale,    \* [grp: Groups, block: Blocks \cup {0}, gen: Nat]: the handle a delayed writer of a
              \*  truncated request still holds (0x05E, 0x05F); block 0 means none
    pool,     \* [Groups -> SUBSET Blocks]: the free queue (0x04B, 0x05E): free and evictable blocks
    wroteCached, \* history variable: the <<g, b>> blocks the last step wrote rows into that carry a
              \*  cached identity after it (0x07D: a cached identity is immutable, so always {})
    sharedStep \* history variable: the last step appended onto a shared partial tail without a copy

vars == <<gen, ref, ident, rows, reserved, tables, len, tver, epoch, txn, hist, undone, stale, pool,
          wroteCached, sharedStep>>

MaxBlocks == (MaxTokens + P - 1) \div P
NumBlocks(n) == (n + P - 1) \div P
Handle(g, b) == [block |-> b, gen |-> gen[g][b]]
HandleSet == [block : Blocks, gen : Nat]
NoStale == [grp |-> CHOOSE g \in Groups : \A h \in Groups : g <= h, block |-> 0, gen |-> 0]
Range(s) == {s[i] : i \in DOMAIN s}
TailBlock(r, g) == tables[r][g][Len(tables[r][g])].block
\* 0x04E, 0x07D: r's partial tail in group g may not be written in place: another request maps it, or
\* it is published in the prefix cache (its rows are an immutable identity).
SharedTail(r, g) == ref[g][TailBlock(r, g)] > 1 \/ ident[g][TailBlock(r, g)] # 0
\* 0x07D, TailPolicy "shared": the row r appends next is already written in its tail in every group.
ShareTail(r) == TailPolicy = "shared" /\ \A g \in Groups : rows[g][TailBlock(r, g)] > len[r] % P
\* The step writes rows into the blocks W (a set of <<g, b>>): those still cached after it are recorded.
Wrote(W) == wroteCached' = {w \in W : ident'[w[1]][w[2]] # 0} /\ sharedStep' = FALSE
NoWrite == wroteCached' = {} /\ sharedStep' = FALSE

\* Block states of the pool (0x04A, 0x04B, 0x0CF); the four are meant to partition it.
IsReserved(g, b) == b \in reserved[g]
IsLive(g, b) == ref[g][b] > 0
IsFree(g, b) == ref[g][b] = 0 /\ ident[g][b] = 0 /\ ~IsReserved(g, b)
IsEvictable(g, b) == ref[g][b] = 0 /\ ident[g][b] # 0 /\ ~IsReserved(g, b)
Pooled(g, b) == ref[g][b] = 0 /\ ~IsReserved(g, b)   \* in the free queue: free or evictable

\* References to block b of group g from committed request maps (0x04B).
MapRefs(g, b) ==
    Cardinality({rj \in Requests \X (1..MaxBlocks) :
                    rj[2] <= Len(tables[rj[1]][g]) /\ tables[rj[1]][g][rj[2]].block = b})

IdleTxn == [phase |-> "idle", dest |-> [g \in Groups |-> 0], prev |-> [g \in Groups |-> 0], alone |-> TRUE]
InFlight == {r \in Requests : txn[r].phase # "idle"}
\* Request r may take a committed step (one outside a transaction): it has no transaction in flight,
\* and with Concurrent = 1 no other request has one either (every step is serialized).
TxnIdle(r) == txn[r].phase = "idle" /\ (Concurrent > 1 \/ InFlight = {})

Snapshot == [gen |-> gen, ref |-> ref, ident |-> ident, rows |-> rows, reserved |-> reserved,
             tables |-> tables, len |-> len, tver |-> tver, epoch |-> epoch]

ZeroBlocks == [g \in Groups |-> [b \in Blocks |-> 0]]
EmptyTables == [r \in Requests |-> [g \in Groups |-> <<>>]]
ZeroReqs == [r \in Requests |-> 0]
NoReserved == [g \in Groups |-> {}]
InitSnapshot == [gen |-> ZeroBlocks, ref |-> ZeroBlocks, ident |-> ZeroBlocks, rows |-> ZeroBlocks,
                 reserved |-> NoReserved, tables |-> EmptyTables, len |-> ZeroReqs, tver |-> ZeroReqs,
                 epoch |-> 0]

NoUndo == [on |-> FALSE, before |-> InitSnapshot]
\* A step of request r (NoReq: of no request) that changes the state: every other transaction in
\* flight no longer runs alone.
Disturb(r) == [s \in Requests |-> IF s # r /\ s \in InFlight THEN [txn[s] EXCEPT !.alone = FALSE] ELSE txn[s]]
\* A committed step of r outside a transaction: the last rollback is forgotten.
ClearTxn(r) == txn' = Disturb(r) /\ undone' = NoUndo /\ UNCHANGED hist

\* Types of every variable.
TypeOK ==
    /\ gen \in [Groups -> [Blocks -> Nat]]
    /\ ref \in [Groups -> [Blocks -> Nat]]
    /\ ident \in [Groups -> [Blocks -> 0..MaxBlocks]]
    /\ rows \in [Groups -> [Blocks -> 0..P]]
    /\ reserved \in [Groups -> SUBSET Blocks]
    /\ \A r \in Requests, g \in Groups :
          /\ Len(tables[r][g]) <= MaxBlocks
          /\ \A i \in DOMAIN tables[r][g] : tables[r][g][i] \in HandleSet
    /\ len \in [Requests -> 0..MaxTokens]
    /\ tver \in [Requests -> Nat]
    /\ epoch \in Nat
    /\ \A r \in Requests :
          /\ txn[r].phase \in {"idle", "reserved", "ready"}
          /\ txn[r].dest \in [Groups -> Blocks \cup {0}]
          /\ txn[r].alone \in BOOLEAN
    /\ undone.on \in BOOLEAN
    /\ stale.grp \in Groups /\ stale.block \in Blocks \cup {0} /\ stale.gen \in Nat
    /\ pool \in [Groups -> SUBSET Blocks]
    /\ wroteCached \subseteq Groups \X Blocks
    /\ sharedStep \in BOOLEAN

Init ==
    /\ gen = ZeroBlocks
    /\ ref = ZeroBlocks
    /\ ident = ZeroBlocks
    /\ rows = ZeroBlocks
    /\ reserved = NoReserved
    /\ tables = EmptyTables
    /\ len = ZeroReqs
    /\ tver = ZeroReqs
    /\ epoch = 0
    /\ txn = [r \in Requests |-> IdleTxn]
    /\ hist = [r \in Requests |-> InitSnapshot]
    /\ undone = NoUndo
    /\ stale = NoStale
    /\ pool = [g \in Groups |-> Blocks]
    /\ wroteCached = {}
    /\ sharedStep = FALSE

\* Drop one reference to each block in Drop[g] (a set per group): a block whose count reaches 0
\* joins the free queue; without a cached identity it becomes free (rows reset) (0x05E).
DropRefs(Drop) ==
    LET newRef == [g \in Groups |-> [b \in Blocks |-> IF b \in Drop[g] THEN ref[g][b] - 1 ELSE ref[g][b]]]
        freed(g) == {b \in Drop[g] : newRef[g][b] = 0 /\ ident[g][b] = 0}
    IN /\ ref' = newRef
       /\ rows' = [g \in Groups |-> [b \in Blocks |-> IF b \in freed(g) THEN 0 ELSE rows[g][b]]]
       /\ pool' = [g \in Groups |-> pool[g] \cup {b \in Drop[g] : newRef[g][b] = 0}]


-----------------------------------------------------------------------------
(* Actions.  Each is one reference step with the same name in snake_case.  *)

\* 0x04E (o = 0) and 0x05C step 3: reserve one unpublished destination in group g for a boundary
\* append of r.  Taking a block from the free pool evicts its cached identity (0x05E) and advances
\* its generation (0x05F).  The first reservation begins r's transaction, at most Concurrent in
\* flight, and records the predecessor snapshot (0x04F); a block another transaction reserved is not
\* in the free pool.
AppendReserve(r, g, b) ==
    /\ \/ /\ TxnIdle(r)
          /\ Cardinality(InFlight) < Concurrent
          /\ hist' = [hist EXCEPT ![r] = Snapshot]
       \/ /\ txn[r].phase = "reserved"
          /\ UNCHANGED hist
    /\ len[r] % P = 0
    /\ len[r] < MaxTokens
    /\ txn[r].dest[g] = 0
    /\ b \in pool[g]
    /\ pool' = [pool EXCEPT ![g] = @ \ {b}]
    /\ gen' = [gen EXCEPT ![g][b] = @ + 1]
    /\ ident' = [ident EXCEPT ![g][b] = 0]
    /\ rows' = [rows EXCEPT ![g][b] = 0]
    /\ reserved' = [reserved EXCEPT ![g] = @ \cup {b}]
    /\ txn' = [Disturb(r) EXCEPT ![r] = [phase |-> "reserved", dest |-> [txn[r].dest EXCEPT ![g] = b],
                                         prev |-> [txn[r].prev EXCEPT ![g] = ident[g][b]],
                                         alone |-> txn[r].alone]]
    /\ undone' = NoUndo
    /\ NoWrite
    /\ UNCHANGED <<ref, tables, len, tver, epoch, stale>>

\* 0x04E and 0x05C steps 6-7: once every group holds a destination, write row 0 into each and
\* validate the data frontiers; the transaction becomes READY_TO_PUBLISH (0x04A).
AppendWrite(r) ==
    /\ txn[r].phase = "reserved"
    /\ \A g \in Groups : txn[r].dest[g] # 0
    /\ rows' = [g \in Groups |-> [rows[g] EXCEPT ![txn[r].dest[g]] = 1]]
    /\ txn' = [Disturb(r) EXCEPT ![r].phase = "ready"]
    /\ undone' = NoUndo
    /\ UNCHANGED <<gen, ref, ident, reserved, tables, len, tver, epoch, hist, stale, pool>>
    /\ Wrote({<<g, txn[r].dest[g]>> : g \in Groups})

\* 0x04E, 0x05C step 8: publish one new table entry per group together, with the refcount deltas,
\* the new length and table version; the allocator epoch advances (Counters).
AppendPublish(r) ==
    /\ txn[r].phase = "ready"
    /\ tables' = [tables EXCEPT ![r] = [g \in Groups |-> Append(tables[r][g], Handle(g, txn[r].dest[g]))]]
    /\ ref' = [g \in Groups |-> [ref[g] EXCEPT ![txn[r].dest[g]] = @ + 1]]
    /\ reserved' = [g \in Groups |-> reserved[g] \ {txn[r].dest[g]}]
    /\ len' = [len EXCEPT ![r] = @ + 1]
    /\ tver' = [tver EXCEPT ![r] = @ + 1]
    /\ epoch' = epoch + 1
    /\ txn' = [Disturb(r) EXCEPT ![r] = IdleTxn]
    /\ hist' = [hist EXCEPT ![r] = InitSnapshot]
    /\ undone' = NoUndo
    /\ NoWrite
    /\ UNCHANGED <<gen, ident, rows, stale, pool>>

\* 0x04F: a failure injected before publication (between group reservations, or after the write)
\* returns every reservation: generations, cached identities and rows are restored, no request
\* changes, the epoch does not advance.  An evicted identity comes back unless another request
\* published it again meanwhile (then the block returns free).  When the transaction ran alone,
\* undone records its predecessor for RollbackRestoresPredecessor.
AppendRollback(r) ==
    /\ txn[r].phase \in {"reserved", "ready"}
    /\ LET d == txn[r].dest
           back(g) == txn[r].prev[g] # 0 /\ \A c \in Blocks : ident[g][c] # txn[r].prev[g]
       IN
       /\ gen' = [g \in Groups |-> [b \in Blocks |-> IF b = d[g] THEN gen[g][b] - 1 ELSE gen[g][b]]]
       /\ ident' = [g \in Groups |-> [b \in Blocks |->
                      IF b = d[g] THEN (IF back(g) THEN txn[r].prev[g] ELSE 0) ELSE ident[g][b]]]
       /\ rows' = [g \in Groups |-> [b \in Blocks |->
                      IF b = d[g] THEN (IF back(g) THEN P ELSE 0) ELSE rows[g][b]]]
    /\ reserved' = [g \in Groups |-> reserved[g] \ {txn[r].dest[g]}]
    /\ pool' = [g \in Groups |-> pool[g] \cup ({txn[r].dest[g]} \ {0})]
    /\ txn' = [Disturb(r) EXCEPT ![r] = IdleTxn]
    /\ hist' = [hist EXCEPT ![r] = InitSnapshot]
    /\ undone' = IF txn[r].alone THEN [on |-> TRUE, before |-> hist[r]] ELSE NoUndo
    /\ NoWrite
    /\ UNCHANGED <<ref, tables, len, tver, epoch, stale>>

\* 0x04E (o > 0, one strong owner, no cached identity): write row o of the tail in every group and
\* publish valid_rows = o + 1 (rows past o, left by a truncate, are dead); no block is reserved, so
\* the epoch stays (0x05B: A 33 -> 34, version 5 -> 6).
AppendInPlace(r) ==
    /\ TxnIdle(r)
    /\ len[r] % P # 0
    /\ len[r] < MaxTokens
    /\ \A g \in Groups : ~SharedTail(r, g)
    /\ UNCHANGED rows
    /\ len' = [len EXCEPT ![r] = @ + 1]
    /\ tver' = [tver EXCEPT ![r] = @ + 1]
    /\ ClearTxn(r)
    /\ UNCHANGED <<gen, ref, ident, reserved, tables, epoch, stale, pool>>
    /\ Wrote({<<g, TailBlock(r, g)>> : g \in Groups})

\* AppendCopy's copy on write onto fresh blocks d[g] (its length, version and transaction are set
\* by AppendCopy).
CopyTail(r, d) ==
    /\ \A g \in Groups : d[g] \in pool[g]
    /\ LET old(g) == TailBlock(r, g)
           newRef == [g \in Groups |-> [b \in Blocks |->
                        IF b = d[g] THEN 1 ELSE IF b = old(g) THEN ref[g][b] - 1 ELSE ref[g][b]]]
       IN /\ ref' = newRef
          /\ rows' = [g \in Groups |-> [b \in Blocks |->
                        IF b = d[g] THEN (len[r] % P) + 1
                        ELSE IF b = old(g) /\ newRef[g][b] = 0 /\ ident[g][b] = 0 THEN 0 ELSE rows[g][b]]]
          /\ pool' = [g \in Groups |-> (pool[g] \ {d[g]}) \cup {b \in {old(g)} : newRef[g][b] = 0}]
    /\ gen' = [g \in Groups |-> [gen[g] EXCEPT ![d[g]] = @ + 1]]
    /\ ident' = [g \in Groups |-> [ident[g] EXCEPT ![d[g]] = 0]]
    /\ tables' = [tables EXCEPT ![r] = [g \in Groups |->
                     [tables[r][g] EXCEPT ![Len(tables[r][g])] = [block |-> d[g], gen |-> gen[g][d[g]] + 1]]]]
    /\ epoch' = epoch + 1
    /\ UNCHANGED <<reserved, stale>>
    /\ Wrote({<<g, d[g]>> : g \in Groups})

\* 0x04E (o > 0), 0x05C, 0x07D: an append onto a partial tail that is shared in some group (another
\* request maps it, or it is published in the prefix cache) copies on write, as one transaction: in
\* every group a block d[g] leaves the free pool (a new owner: its generation advances, a cached
\* identity it held is evicted), receives the o visible rows and the new row, and replaces the tail;
\* the old tail loses r's reference and keeps its identity.  Blocks were reserved: the epoch advances.
\* Under TailPolicy "shared" (0x07D), when the row to append is already in the shared tail of every
\* group and holds the appended token, r shares the tail and only its length grows (no write, no
\* block, the epoch stays); a divergent token is the first write and copies as above.  Every
\* request replays one stream, so which of the two an append is stays a free choice of the model.
AppendCopy(r, d) ==
    /\ TxnIdle(r)
    /\ len[r] % P # 0
    /\ len[r] < MaxTokens
    /\ \E g \in Groups : SharedTail(r, g)
    /\ len' = [len EXCEPT ![r] = @ + 1]
    /\ tver' = [tver EXCEPT ![r] = @ + 1]
    /\ ClearTxn(r)
    /\ \/ /\ ShareTail(r)
          /\ d = [g \in Groups |-> CHOOSE b \in Blocks : \A c \in Blocks : b <= c]
          /\ UNCHANGED <<gen, ref, ident, rows, reserved, tables, epoch, stale, pool>>
          /\ wroteCached' = {}
          /\ sharedStep' = TRUE
       \/ CopyTail(r, d)

\* 0x04C cache publication, 0x07C: publish the identity of r's full logical block j in every
\* group at once; an identity names at most one block per group.
CacheBlock(r, j) ==
    /\ TxnIdle(r)
    /\ j * P <= len[r]
    /\ \A g \in Groups :
          LET b == tables[r][g][j].block IN
          /\ rows[g][b] = P
          /\ ident[g][b] = 0
          /\ \A c \in Blocks : ident[g][c] # j
    /\ ident' = [g \in Groups |-> [ident[g] EXCEPT ![tables[r][g][j].block] = j]]
    /\ ClearTxn(r)
    /\ NoWrite
    /\ UNCHANGED <<gen, ref, rows, reserved, tables, len, tver, epoch, stale, pool>>

\* 0x07C, 0x05E touch: an empty request r maps the cached prefix of k full blocks, which must be
\* present contiguously in every group; evictable blocks leave the free queue and become live.
PrefixHit(r, k) ==
    /\ TxnIdle(r)
    /\ len[r] = 0
    /\ k * P <= MaxTokens
    /\ \A g \in Groups : \A i \in 1..k : \E b \in Blocks : ident[g][b] = i
    /\ LET at(g, i) == CHOOSE b \in Blocks : ident[g][b] = i IN
       /\ tables' = [tables EXCEPT ![r] = [g \in Groups |-> [i \in 1..k |-> Handle(g, at(g, i))]]]
       /\ ref' = [g \in Groups |-> [b \in Blocks |->
                     IF ident[g][b] \in 1..k THEN ref[g][b] + 1 ELSE ref[g][b]]]
    /\ pool' = [g \in Groups |-> {b \in pool[g] : ident[g][b] \notin 1..k}]
    /\ len' = [len EXCEPT ![r] = k * P]
    /\ tver' = [tver EXCEPT ![r] = @ + 1]
    /\ ClearTxn(r)
    /\ NoWrite
    /\ UNCHANGED <<gen, ident, rows, reserved, epoch, stale>>

\* 0x05E release: r's strong references go; full cached blocks become EVICTABLE, others free.
\* The request's lifetime ends; a new one starts at table version 0.
Release(r) ==
    /\ TxnIdle(r)
    /\ len[r] > 0
    /\ DropRefs([g \in Groups |-> {h.block : h \in Range(tables[r][g])}])
    /\ tables' = [tables EXCEPT ![r] = [g \in Groups |-> <<>>]]
    /\ len' = [len EXCEPT ![r] = 0]
    /\ tver' = [tver EXCEPT ![r] = 0]
    /\ ClearTxn(r)
    /\ NoWrite
    /\ UNCHANGED <<gen, ident, reserved, epoch, stale>>

\* 0x05E truncate: keep r's first n tokens, i.e. its first NumBlocks(n) logical blocks (rounded up:
\* a partial last block stays mapped, its rows past n dead but not cleared), and drop the suffix
\* bundle in every group (only a suffix: an interior block cannot be removed); dropped blocks lose
\* one reference.  When the old tail of the first group is dropped and goes back to the free pool, a
\* delayed writer of r keeps its handle (0x05E: the stale D writer holding 1003@12).
Truncate(r, n) ==
    /\ TxnIdle(r)
    /\ n < len[r]
    /\ LET k == NumBlocks(n) IN
       /\ DropRefs([g \in Groups |-> {tables[r][g][i].block : i \in (k + 1)..Len(tables[r][g])}])
       /\ stale' = LET g == NoStale.grp
                       b == TailBlock(r, g)
                   IN IF k < Len(tables[r][g]) /\ ref[g][b] = 1 /\ ident[g][b] = 0
                      THEN [grp |-> g, block |-> b, gen |-> gen[g][b]]
                      ELSE stale
       /\ tables' = [tables EXCEPT ![r] = [g \in Groups |-> SubSeq(tables[r][g], 1, k)]]
    /\ len' = [len EXCEPT ![r] = n]
    /\ tver' = [tver EXCEPT ![r] = @ + 1]
    /\ ClearTxn(r)
    /\ NoWrite
    /\ UNCHANGED <<gen, ident, reserved, epoch>>

\* 0x05E evict: drop the weak cached identity of block b in group g; a live mapping stays, a
\* zero-ref block becomes free.
Evict(g, b) ==
    /\ Concurrent > 1 \/ InFlight = {}
    /\ ident[g][b] # 0
    /\ ident' = [ident EXCEPT ![g][b] = 0]
    /\ rows' = [rows EXCEPT ![g][b] = IF ref[g][b] = 0 THEN 0 ELSE @]
    /\ ClearTxn(NoReq)
    /\ NoWrite
    /\ UNCHANGED <<gen, ref, reserved, tables, len, tver, epoch, stale, pool>>

\* 0x05E, 0x05F: the delayed writer presents its handle; the pool rejects it because its
\* generation is stale (the block was reused: 1003@12 against 1003@13) or the block has no owner.
StaleWriteRejected ==
    /\ stale.block # 0
    /\ stale.gen # gen[stale.grp][stale.block] \/ Pooled(stale.grp, stale.block)
    /\ stale' = NoStale
    /\ NoWrite
    /\ UNCHANGED <<gen, ref, ident, rows, reserved, tables, len, tver, epoch, txn, hist, undone, pool>>

Next ==
    \/ \E r \in Requests, g \in Groups, b \in Blocks : AppendReserve(r, g, b)
    \/ \E r \in Requests :
          \/ AppendWrite(r)
          \/ AppendPublish(r)
          \/ AppendRollback(r)
          \/ AppendInPlace(r)
          \/ Release(r)
    \/ \E r \in Requests, d \in [Groups -> Blocks] : AppendCopy(r, d)
    \/ \E r \in Requests, j \in 1..MaxBlocks : CacheBlock(r, j) \/ PrefixHit(r, j)
    \/ \E r \in Requests, n \in 0..(MaxTokens - 1) : Truncate(r, n)
    \/ \E g \in Groups, b \in Blocks : Evict(g, b)
    \/ StaleWriteRejected

Spec == Init /\ [][Next]_vars

\* The liveness model (KVAllocation.liveness.cfg): the allocator finishes what it starts:
\* publishing and rolling back a transaction are weakly fair (writers and reservations are not).
LiveSpec == Spec /\ \A r \in Requests : WF_vars(AppendPublish(r)) /\ WF_vars(AppendRollback(r))

\* State bound of the finite models (a CONSTRAINT, so bounded states are not deadlocks).  A request
\* may go one table version past MaxVersion when it holds MaxTokens tokens and every other request is
\* at version 0: a copy on write (AppendCopy) needs a cached partial tail, which a request reaches at
\* version MaxVersion at the earliest (prefix hit, then truncate), so the states after a copy onto
\* the last token are explored too.
StateBound ==
    /\ \A g \in Groups, b \in Blocks : gen[g][b] <= MaxGen
    /\ epoch <= MaxEpoch
    /\ \A r \in Requests :
          \/ tver[r] <= MaxVersion
          \/ /\ tver[r] = MaxVersion + 1
             /\ len[r] = MaxTokens
             /\ \A s \in Requests \ {r} : tver[s] = 0

-----------------------------------------------------------------------------
(* Invariants.                                                             *)

\* 0x04B: the recorded refcount equals the references derived from reachability (request maps;
\* this model has no leases).
RefcountDerived == \A g \in Groups, b \in Blocks : ref[g][b] = MapRefs(g, b)

\* 0x04B, 0x05E: the free queue holds exactly the blocks that are not reserved and have refcount 0
\* (free or evictable): a release enqueues, a reservation or a prefix-hit touch dequeues.
ZeroRefIffPooled ==
    \A g \in Groups, b \in Blocks : b \in pool[g] <=> (ref[g][b] = 0 /\ ~IsReserved(g, b))

\* 0x04E: no half-published bundle: every group's table of a request has the same length, the
\* length its token count needs.
NoHalfBundle ==
    \A r \in Requests, g \in Groups : Len(tables[r][g]) = NumBlocks(len[r])

\* 0x0CF reconciliation: pool = free + evictable + live + reserved, the four disjoint.
PoolPartition ==
    \A g \in Groups :
        LET F == {b \in Blocks : IsFree(g, b)}
            E == {b \in Blocks : IsEvictable(g, b)}
            L == {b \in Blocks : IsLive(g, b)}
            R == {b \in Blocks : IsReserved(g, b)}
        IN /\ Cardinality(Blocks) = Cardinality(F) + Cardinality(E) + Cardinality(L) + Cardinality(R)
           /\ F \cup E \cup L \cup R = Blocks

\* 0x05F: every mapped handle carries its block's current generation.
HandlesCurrent ==
    \A r \in Requests, g \in Groups : \A i \in DOMAIN tables[r][g] :
        tables[r][g][i].gen = gen[g][tables[r][g][i].block]

\* 0x04A, 0x04D: an unpublished (reserved) block is held only by the in-flight transaction (the
\* reservations are exactly its destinations) and is never reachable from a request map.
ReservedUnreachable ==
    /\ \A g \in Groups :
          reserved[g] = {txn[r].dest[g] : r \in InFlight} \ {0}
    /\ \A r \in Requests, g \in Groups : \A i \in DOMAIN tables[r][g] :
          ~IsReserved(g, tables[r][g][i].block)

\* 0x04A, 0x04D: two transactions in flight never hold the same block: each reservation is one new
\* owner, so the block is published once and returned to the free pool once (no double free).
ReservationsDisjoint ==
    \A r, s \in InFlight, g \in Groups : (r # s /\ txn[r].dest[g] # 0) => txn[r].dest[g] # txn[s].dest[g]

\* 0x07C, 0x05E: at most one block per cached identity per group; only full blocks are cached.
UniqueIdentity ==
    \A g \in Groups, b, c \in Blocks :
        /\ (ident[g][b] # 0 /\ ident[g][b] = ident[g][c]) => b = c
        /\ ident[g][b] # 0 => rows[g][b] = P

\* 0x04E, 0x05C: what a request may see of its logical block i never exceeds the valid rows of
\* the mapped block.
VisibleWithinRows ==
    \A r \in Requests, g \in Groups : \A i \in DOMAIN tables[r][g] :
        LET visible == IF len[r] >= i * P THEN P ELSE len[r] - (i - 1) * P
        IN visible <= rows[g][tables[r][g][i].block]

\* 0x04F: before publication, rollback restores the exact predecessor state (its digest).
\* A transaction that other steps interleaved with cannot restore their effects: it is held to the
\* other invariants (UniqueIdentity: an identity published again meanwhile is not restored).
RollbackRestoresPredecessor == undone.on => Snapshot = undone.before

\* 0x05F: a delayed writer's handle whose generation is still current names a block back in the
\* free pool: a write through it cannot reach a new owner's block (the generation fence holds).
StaleHandleFenced ==
    (stale.block # 0 /\ stale.gen = gen[stale.grp][stale.block]) => Pooled(stale.grp, stale.block)

\* 0x04E, 0x07D: a block published in the prefix cache is immutable: no step writes rows into a block
\* that carries a cached identity (an append onto a cached partial tail copies on write instead).
CachedBlocksImmutable == wroteCached = {}

THEOREM Spec => []TypeOK
THEOREM Spec => []RefcountDerived
THEOREM Spec => []NoHalfBundle
THEOREM Spec => []PoolPartition
THEOREM Spec => []HandlesCurrent
THEOREM Spec => []ReservedUnreachable
THEOREM Spec => []ReservationsDisjoint
THEOREM Spec => []UniqueIdentity
THEOREM Spec => []VisibleWithinRows
THEOREM Spec => []RollbackRestoresPredecessor
THEOREM Spec => []StaleHandleFenced
THEOREM Spec => []ZeroRefIffPooled
THEOREM Spec => []CachedBlocksImmutable

-----------------------------------------------------------------------------
(* Liveness (KVAllocation.liveness.cfg, under LiveSpec).                   *)

\* 0x04A, 0x04F: a transaction in flight (reserved or ready to publish) eventually publishes or
\* rolls back: its reserved blocks never stay held forever.
TxnEventuallyEnds == \A r \in Requests : (txn[r].phase \in {"reserved", "ready"}) ~> (txn[r].phase = "idle")

\* Witness (spec/witnesses/, non-vacuity): negated; a model check must find it violated: a
\* transaction reserved a cached (evictable) block, evicting its identity, and wrote it (0x05E).
WitnessNoEvictThenReuse == ~(\E r \in Requests : txn[r].phase = "ready" /\ \E g \in Groups : txn[r].prev[g] # 0)

\* Witness: a truncate kept a partial last block: a request sees fewer rows of its tail than the
\* block holds (the rows past its length are dead until the next append overwrites them).
WitnessNoPartialTail == ~(\E r \in Requests, g \in Groups :
                             len[r] % P # 0 /\ rows[g][TailBlock(r, g)] > len[r] % P)

\* Witness: a request's partial tail is a block published in the prefix cache and mapped by it alone,
\* so its next append must copy on write because the tail is cached (not because it is shared).
WitnessNoCachedPartialTail == ~(\E r \in Requests, g \in Groups :
                                   len[r] % P # 0 /\ ident[g][TailBlock(r, g)] # 0 /\ ref[g][TailBlock(r, g)] = 1)

\* Witness (Concurrent = 2): two boundary appends are in flight at once, both written and ready to
\* publish, racing for the blocks of one pool.
WitnessNoRacingAppends == ~(Cardinality(InFlight) > 1 /\ \A r \in InFlight : txn[r].phase = "ready")

\* Witness (Concurrent = 2): a transaction that evicted an identity is still in flight while another
\* request has published that identity again: its rollback must not restore it (0x04F, 0x07C).
WitnessNoRollbackAfterRepublish == ~(\E r \in InFlight, g \in Groups :
                                        txn[r].prev[g] # 0 /\ \E c \in Blocks : ident[g][c] = txn[r].prev[g])

\* Witness (TailPolicy "shared"): an append onto a shared partial tail found its row already there and
\* shared the tail instead of copying it (0x07D).
WitnessNoSharedPartialTail == ~sharedStep

-----------------------------------------------------------------------------
(* Refinement (PROPERTY RefinesExactHistory of KVAllocation.cfg).  Every   *)
(* request replays one shared token stream, so its ExactHistory history is *)
(* the positions 1..len; a position is visible when every group's mapped   *)
(* block holds its row under a current handle.  The mapping is a state     *)
(* function: no history variable is added, so the model keeps its states. *)

\* 0x03C, 0x05F: row i of r as every group's table shows it (0: missing, stale or not yet written).
ShownRow(r, i) ==
    LET j == (i - 1) \div P + 1
        o == ((i - 1) % P) + 1
    IN IF \A g \in Groups : /\ j <= Len(tables[r][g])
                            /\ tables[r][g][j].gen = gen[g][tables[r][g][j].block]
                            /\ o <= rows[g][tables[r][g][j].block]
       THEN i ELSE 0

EH == INSTANCE ExactHistory WITH
          Tokens <- 1..MaxTokens,
          history <- [r \in Requests |-> [i \in 1..len[r] |-> i]],
          view <- [r \in Requests |-> [i \in 1..len[r] |-> ShownRow(r, i)]]

\* 0x04-0x05, 0x07C: every KVAllocation behaviour is an ExactHistory behaviour (its Init, then
\* [][Next]_vars on every step); it implies that every visible row is the history (VisibleIsHistory).
RefinesExactHistory == EH!Spec

THEOREM Spec => RefinesExactHistory

=============================================================================
