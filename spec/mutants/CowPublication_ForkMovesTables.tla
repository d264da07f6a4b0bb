---- MODULE CowPublication_ForkMovesTables ----
\* VIOLATES: RefinesExactHistory. Mutant of CowPublication.tla (seeded bug, kept on purpose): fork moves the parent's tables to the child instead of sharing them: the parent's history vanishes in the same step, without a release.
(***************************************************************************)
(* Copy-on-write publication of a shared partial tail (seed 0x05, 0x05B-  *)
(* 0x05D, 0x09C).  Blocks hold the token ids written into their rows, so  *)
(* exactness is checkable: every request's rows, read through its block   *)
(* tables, equal its logical token history.  A fork shares every handle;  *)
(* an append into a shared partial tail is a copy-on-write transaction of *)
(* several actions (0x05C): begin (validate, retain source leases),       *)
(* reserve per group, copy per group, write per group, validate, publish  *)
(* atomically, release the source leases; or roll back before publishing. *)
(* Readers take a snapshot of a request's tables (with leases) and read   *)
(* through it later.                                                       *)
(* Up to Concurrent COW transactions of different requests are in flight  *)
(* at once (txn is a function of the request); with Concurrent = 1 a COW  *)
(* begins only when none is in flight: the serialized model, which the    *)
(* reference runs (a second transaction is TRANSACTION_IN_FLIGHT).        *)
(*                                                                         *)
(* Counters (docs/design.md "Counters"; same rule in the reference):       *)
(*  - epoch advances by one when a transaction that reserved physical      *)
(*    blocks publishes (a boundary append or a COW publication), never on  *)
(*    a rollback, an in-place append or a fork (0x05B: A's in-place append *)
(*    keeps 43, D's COW publication makes it 44; 0x04F).                   *)
(*  - gen[g][b] advances by one when block b is reserved for a new owner;  *)
(*    a rollback restores it (0x05B: destinations 1003@12, 2003@6; 0x05E). *)
(*  - tver[r] advances by one on every publication that changes r's        *)
(*    snapshot: in-place append (0x05B A 5 -> 6), a fork publishes the     *)
(*    child at version 1, its COW publication makes it 2 (0x05B D 1 -> 2). *)
(*    A released request starts again at 0.                                *)
(*  - bundle[g][b] is the epoch at which b's bundle was published (the     *)
(*    epoch after the publishing transaction); blocks of one bundle agree. *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets

CONSTANTS
    Groups,     \* cache group ids (integers), each with its own pool
    Blocks,     \* block ids of each group's pool (positive integers)
    Requests,   \* request ids (model values)
    Readers,    \* snapshot readers (model values)
    NoReq,      \* model value: no request (kept for the models' constants; txn is per request)
    Tokens,     \* token ids that appends write (positive integers)
    P,          \* rows per block (0x04E)
    MaxTokens,  \* longest request, in tokens
    MaxGen,     \* state bound: largest block generation explored
    MaxEpoch,   \* state bound: largest allocator epoch explored
    MaxVersion, \* state bound: largest request table version explored
    Concurrent  \* most COW transactions in flight at once; 1 serializes them

VARIABLES
    data,    \* [Groups -> [Blocks -> Seq(Tokens)]]: the rows physically written in each block
    valid,   \* [Groups -> [Blocks -> 0..P]]: valid rows (the validated data frontier)
    ref,     \* [Groups -> [Blocks -> Nat]]: recorded refcount (map references + leases, 0x04B)
    gen,     \* [Groups -> [Blocks -> Nat]]: block generation
    bundle,  \* [Groups -> [Blocks -> Nat]]: epoch of the publication that created the block's bundle
    tables,  \* [Requests -> [Groups -> Seq([block: Blocks, gen: Nat])]]: block tables
    len,     \* [Requests -> Nat]: tokens visible to the request
    tokens,  \* [Requests -> Seq(Tokens)]: the request's logical token history
    tver,    \* [Requests -> Nat]: request table version
    epoch,   \* Nat: allocator epoch
    txn,     \* [Requests -> COW transaction of the request]: [phase: {"idle","begun","validated",
             \*  "published"}, tok: Tokens \cup {0}, rows: 0..P (valid tail rows copied),
             \*  src: [Groups -> Blocks \cup {0}] (leased source tail), dest: [Groups -> Blocks \cup {0}],
             \*  copied: SUBSET Groups, written: SUBSET Groups]
    snap,    \* [Readers -> [on: BOOLEAN, tables: [Groups -> Seq(handle)], len: Nat, tokens: Seq(Tokens)]]
    wrote    \* set of <<group, block>> whose rows the last step wrote (for SharedNeverWritten)

vars == <<data, valid, ref, gen, bundle, tables, len, tokens, tver, epoch, txn, snap, wrote>>

MaxBlocks == (MaxTokens + P - 1) \div P
NumBlocks(n) == (n + P - 1) \div P
Handle(g, b) == [block |-> b, gen |-> gen[g][b]]
HandleSet == [block : Blocks, gen : Nat]
Range(s) == {s[i] : i \in DOMAIN s}
TailBlock(r, g) == tables[r][g][Len(tables[r][g])].block
InFlight == {r \in Requests : txn[r].phase # "idle"}
Busy(r) == txn[r].phase # "idle"
\* Block b of group g is the unpublished destination of some transaction in flight.
Reserved(g, b) == \E r \in Requests : txn[r].phase \in {"begun", "validated"} /\ txn[r].dest[g] = b
Free(g, b) == ref[g][b] = 0 /\ ~Reserved(g, b)

IdleTxn == [phase |-> "idle", tok |-> 0, rows |-> 0, src |-> [g \in Groups |-> 0],
            dest |-> [g \in Groups |-> 0], copied |-> {}, written |-> {}]
NoSnap == [on |-> FALSE, tables |-> [g \in Groups |-> <<>>], len |-> 0, tokens |-> <<>>]

\* References derived from reachability (0x04B): request maps, reader snapshot leases and the
\* source leases of the transactions in flight (one per transaction).
MapRefs(g, b) ==
    Cardinality({rj \in Requests \X (1..MaxBlocks) :
                    rj[2] <= Len(tables[rj[1]][g]) /\ tables[rj[1]][g][rj[2]].block = b})
SnapRefs(g, b) ==
    Cardinality({xj \in Readers \X (1..MaxBlocks) :
                    snap[xj[1]].on /\ xj[2] <= Len(snap[xj[1]].tables[g])
                    /\ snap[xj[1]].tables[g][xj[2]].block = b})
LeaseRefs(g, b) == Cardinality({r \in InFlight : txn[r].src[g] = b})

\* What a table set shows for n tokens in group g: the token of every position, read through the
\* handles, provided the row is valid and the handle current; 0 marks an unreadable row.
RowAt(tbl, g, i) ==
    LET h == tbl[g][(i - 1) \div P + 1]
        o == ((i - 1) % P) + 1
    IN IF h.gen = gen[g][h.block] /\ o <= valid[g][h.block] /\ o <= Len(data[g][h.block])
       THEN data[g][h.block][o] ELSE 0
Exact(tbl, n, toks) ==
    /\ Len(toks) = n
    /\ \A g \in Groups : Len(tbl[g]) = NumBlocks(n) /\ \A i \in 1..n : RowAt(tbl, g, i) = toks[i]

\* Drop one reference from each block in Drop[g]; a block left without references is free:
\* its rows, valid count and bundle stamp are reset.
DropRefs(Drop) ==
    LET newRef == [g \in Groups |-> [b \in Blocks |-> IF b \in Drop[g] THEN ref[g][b] - 1 ELSE ref[g][b]]]
        freed(g, b) == b \in Drop[g] /\ newRef[g][b] = 0
    IN /\ ref' = newRef
       /\ data' = [g \in Groups |-> [b \in Blocks |-> IF freed(g, b) THEN <<>> ELSE data[g][b]]]
       /\ valid' = [g \in Groups |-> [b \in Blocks |-> IF freed(g, b) THEN 0 ELSE valid[g][b]]]
       /\ bundle' = [g \in Groups |-> [b \in Blocks |-> IF freed(g, b) THEN 0 ELSE bundle[g][b]]]

\* Types of every variable.
TypeOK ==
    /\ \A g \in Groups, b \in Blocks :
          /\ Len(data[g][b]) <= P
          /\ \A i \in DOMAIN data[g][b] : data[g][b][i] \in Tokens
    /\ valid \in [Groups -> [Blocks -> 0..P]]
    /\ ref \in [Groups -> [Blocks -> Nat]]
    /\ gen \in [Groups -> [Blocks -> Nat]]
    /\ \A r \in Requests, g \in Groups : \A i \in DOMAIN tables[r][g] : tables[r][g][i] \in HandleSet
    /\ len \in [Requests -> 0..MaxTokens]
    /\ \A r \in Requests :
          /\ txn[r].phase \in {"idle", "begun", "validated", "published"}
          /\ txn[r].dest \in [Groups -> Blocks \cup {0}]
          /\ txn[r].src \in [Groups -> Blocks \cup {0}]

Init ==
    /\ data = [g \in Groups |-> [b \in Blocks |-> <<>>]]
    /\ valid = [g \in Groups |-> [b \in Blocks |-> 0]]
    /\ ref = [g \in Groups |-> [b \in Blocks |-> 0]]
    /\ gen = [g \in Groups |-> [b \in Blocks |-> 0]]
    /\ bundle = [g \in Groups |-> [b \in Blocks |-> 0]]
    /\ tables = [r \in Requests |-> [g \in Groups |-> <<>>]]
    /\ len = [r \in Requests |-> 0]
    /\ tokens = [r \in Requests |-> <<>>]
    /\ tver = [r \in Requests |-> 0]
    /\ epoch = 0
    /\ txn = [r \in Requests |-> IdleTxn]
    /\ snap = [x \in Readers |-> NoSnap]
    /\ wrote = {}

-----------------------------------------------------------------------------
(* Actions.  Each is one reference step with the same name in snake_case.  *)

\* 0x04E (o = 0): append token t at a block boundary: reserve block dest[g] in every group, write
\* row 0, publish one new entry per group together (the fine-grained form is in KVAllocation).
\* The destination is the lowest free block of each group (KVAllocation explores every choice).
AppendBoundary(r, t, dest) ==
    /\ ~Busy(r)
    /\ len[r] % P = 0
    /\ len[r] < MaxTokens
    /\ \A g \in Groups : Free(g, dest[g]) /\ \A c \in Blocks : Free(g, c) => dest[g] <= c
    /\ data' = [g \in Groups |-> [data[g] EXCEPT ![dest[g]] = <<t>>]]
    /\ valid' = [g \in Groups |-> [valid[g] EXCEPT ![dest[g]] = 1]]
    /\ ref' = [g \in Groups |-> [ref[g] EXCEPT ![dest[g]] = 1]]
    /\ gen' = [g \in Groups |-> [gen[g] EXCEPT ![dest[g]] = @ + 1]]
    /\ bundle' = [g \in Groups |-> [bundle[g] EXCEPT ![dest[g]] = epoch + 1]]
    /\ tables' = [tables EXCEPT ![r] = [g \in Groups |-> Append(tables[r][g], [block |-> dest[g],
                                                                            gen |-> gen[g][dest[g]] + 1])]]
    /\ len' = [len EXCEPT ![r] = @ + 1]
    /\ tokens' = [tokens EXCEPT ![r] = Append(@, t)]
    /\ tver' = [tver EXCEPT ![r] = @ + 1]
    /\ epoch' = epoch + 1
    /\ wrote' = {<<g, dest[g]>> : g \in Groups}
    /\ UNCHANGED <<txn, snap>>

\* 0x04E (o > 0, every tail handle has one strong owner): write row o into the private tail of
\* every group and publish valid_rows = o + 1 (0x05B: A at token 33, version 5 -> 6).
AppendInPlace(r, t) ==
    /\ ~Busy(r)
    /\ len[r] % P # 0
    /\ len[r] < MaxTokens
    /\ \A g \in Groups : ref[g][TailBlock(r, g)] = 1
    /\ data' = [g \in Groups |-> [data[g] EXCEPT ![TailBlock(r, g)] = Append(@, t)]]
    /\ valid' = [g \in Groups |-> [valid[g] EXCEPT ![TailBlock(r, g)] = @ + 1]]
    /\ len' = [len EXCEPT ![r] = @ + 1]
    /\ tokens' = [tokens EXCEPT ![r] = Append(@, t)]
    /\ tver' = [tver EXCEPT ![r] = @ + 1]
    /\ wrote' = {<<g, TailBlock(r, g)>> : g \in Groups}
    /\ UNCHANGED <<ref, gen, bundle, tables, epoch, txn, snap>>

\* 0x05, 0x05B: fork r to the empty request c: every mapped handle gains one strong reference;
\* c is published at table version 1.
Fork(r, c) ==
    /\ r # c
    /\ ~Busy(r) /\ ~Busy(c)
    /\ len[r] > 0
    /\ len[c] = 0
    /\ tables' = [tables EXCEPT ![c] = tables[r], ![r] = [g \in Groups |-> <<>>]]
    /\ ref' = ref
    /\ len' = [len EXCEPT ![c] = len[r], ![r] = 0]
    /\ tokens' = [tokens EXCEPT ![c] = tokens[r], ![r] = <<>>]
    /\ tver' = [tver EXCEPT ![c] = @ + 1]
    /\ wrote' = {}
    /\ UNCHANGED <<data, valid, gen, bundle, epoch, txn, snap>>

\* 0x05C steps 1, 2, 4 and 0x05D retain_read_bundle: r's tail bundle is shared, so appending t
\* starts a COW transaction: the source handles are loaded and leased in every group.  At most
\* Concurrent transactions are in flight (Concurrent = 1: none may be).
CowBegin(r, t) ==
    /\ txn[r].phase = "idle"
    /\ Cardinality(InFlight) < Concurrent
    /\ len[r] % P # 0
    /\ len[r] < MaxTokens
    /\ \E g \in Groups : ref[g][TailBlock(r, g)] > 1
    /\ txn' = [txn EXCEPT ![r] = [IdleTxn EXCEPT !.phase = "begun", !.tok = t, !.rows = len[r] % P,
                                                !.src = [g \in Groups |-> TailBlock(r, g)]]]
    /\ ref' = [g \in Groups |-> [ref[g] EXCEPT ![TailBlock(r, g)] = @ + 1]]
    /\ wrote' = {}
    /\ UNCHANGED <<data, valid, gen, bundle, tables, len, tokens, tver, epoch, snap>>

\* 0x05C step 3: reserve block b of group g as the unpublished destination; its generation
\* advances (0x05B: 1003@12, 2003@6).
CowReserve(r, g, b) ==
    /\ txn[r].phase = "begun"
    /\ txn[r].dest[g] = 0
    /\ Free(g, b)
    /\ gen' = [gen EXCEPT ![g][b] = @ + 1]
    /\ txn' = [txn EXCEPT ![r].dest[g] = b]
    /\ wrote' = {}
    /\ UNCHANGED <<data, valid, ref, bundle, tables, len, tokens, tver, epoch, snap>>

\* 0x05C step 5, 0x05A, 0x09C: copy exactly the predecessor's valid tail rows [0, rows) from the
\* leased source to the destination of group g.
CowCopy(r, g) ==
    /\ txn[r].phase = "begun"
    /\ txn[r].dest[g] # 0
    /\ g \notin txn[r].copied
    /\ data' = [data EXCEPT ![g][txn[r].dest[g]] = SubSeq(data[g][txn[r].src[g]], 1, txn[r].rows)]
    /\ txn' = [txn EXCEPT ![r].copied = @ \cup {g}]
    /\ wrote' = {<<g, txn[r].dest[g]>>}
    /\ UNCHANGED <<valid, ref, gen, bundle, tables, len, tokens, tver, epoch, snap>>

\* 0x05C step 6: write the appended row (offset rows) into the destination of group g.
CowWrite(r, g) ==
    /\ txn[r].phase = "begun"
    /\ g \in txn[r].copied
    /\ g \notin txn[r].written
    /\ data' = [data EXCEPT ![g][txn[r].dest[g]] = Append(@, txn[r].tok)]
    /\ txn' = [txn EXCEPT ![r].written = @ \cup {g}]
    /\ wrote' = {<<g, txn[r].dest[g]>>}
    /\ UNCHANGED <<valid, ref, gen, bundle, tables, len, tokens, tver, epoch, snap>>

\* 0x05C step 7: every group's destination holds rows + 1 written rows; they become valid and
\* the transaction is READY_TO_PUBLISH (0x04A).
CowValidate(r) ==
    /\ txn[r].phase = "begun"
    /\ txn[r].written = Groups
    /\ \A g \in Groups : Len(data[g][txn[r].dest[g]]) = txn[r].rows + 1
    /\ valid' = [g \in Groups |-> [valid[g] EXCEPT ![txn[r].dest[g]] = txn[r].rows + 1]]
    /\ bundle' = [g \in Groups |-> [bundle[g] EXCEPT ![txn[r].dest[g]] = epoch + 1]]
    /\ txn' = [txn EXCEPT ![r].phase = "validated"]
    /\ wrote' = {}
    /\ UNCHANGED <<data, ref, gen, tables, len, tokens, tver, epoch, snap>>

\* 0x05C step 8 (the linearization point), 0x05D publish_bundle_and_ref_deltas: replace the tail
\* handle of every group at once, with the new length, token history, table version and refcount
\* deltas (destination +1, source -1); the epoch advances (0x05B: 43 -> 44, D version 1 -> 2).
CowPublish(r) ==
    /\ txn[r].phase = "validated"
    /\ tables' = [tables EXCEPT ![r] = [g \in Groups |->
                     [tables[r][g] EXCEPT ![Len(tables[r][g])] = Handle(g, txn[r].dest[g])]]]
    /\ ref' = [g \in Groups |-> [b \in Blocks |->
                  IF b = txn[r].dest[g] THEN ref[g][b] + 1
                  ELSE IF b = txn[r].src[g] THEN ref[g][b] - 1 ELSE ref[g][b]]]
    /\ len' = [len EXCEPT ![r] = @ + 1]
    /\ tokens' = [tokens EXCEPT ![r] = Append(@, txn[r].tok)]
    /\ tver' = [tver EXCEPT ![r] = @ + 1]
    /\ epoch' = epoch + 1
    /\ txn' = [txn EXCEPT ![r].phase = "published"]
    /\ wrote' = {}
    /\ UNCHANGED <<data, valid, gen, bundle, snap>>

\* 0x05C step 9: release the temporary source leases (0x05B: old tail refs 2 -> 1).
CowReleaseSources(r) ==
    /\ txn[r].phase = "published"
    /\ DropRefs([g \in Groups |-> {txn[r].src[g]}])
    /\ txn' = [txn EXCEPT ![r] = IdleTxn]
    /\ wrote' = {}
    /\ UNCHANGED <<gen, tables, len, tokens, tver, epoch, snap>>

\* 0x04F, 0x05D except BeforePublication: roll back: the reserved destinations return to the
\* pool with their predecessor generation and empty rows, the source leases are released; no
\* request, counter or epoch changes.
CowRollback(r) ==
    /\ txn[r].phase \in {"begun", "validated"}
    /\ gen' = [g \in Groups |-> [b \in Blocks |-> IF b = txn[r].dest[g] THEN gen[g][b] - 1 ELSE gen[g][b]]]
    /\ LET newRef == [g \in Groups |-> [ref[g] EXCEPT ![txn[r].src[g]] = @ - 1]]
           reset(g, b) == b = txn[r].dest[g] \/ (b = txn[r].src[g] /\ newRef[g][b] = 0)
       IN /\ ref' = newRef
          /\ data' = [g \in Groups |-> [b \in Blocks |-> IF reset(g, b) THEN <<>> ELSE data[g][b]]]
          /\ valid' = [g \in Groups |-> [b \in Blocks |-> IF reset(g, b) THEN 0 ELSE valid[g][b]]]
          /\ bundle' = [g \in Groups |-> [b \in Blocks |-> IF reset(g, b) THEN 0 ELSE bundle[g][b]]]
    /\ txn' = [txn EXCEPT ![r] = IdleTxn]
    /\ wrote' = {}
    /\ UNCHANGED <<tables, len, tokens, tver, epoch, snap>>

\* 0x05E release: r's strong references go; a block left without references is free.
Release(r) ==
    /\ ~Busy(r)
    /\ len[r] > 0
    /\ DropRefs([g \in Groups |-> {h.block : h \in Range(tables[r][g])}])
    /\ tables' = [tables EXCEPT ![r] = [g \in Groups |-> <<>>]]
    /\ len' = [len EXCEPT ![r] = 0]
    /\ tokens' = [tokens EXCEPT ![r] = <<>>]
    /\ tver' = [tver EXCEPT ![r] = 0]
    /\ wrote' = {}
    /\ UNCHANGED <<gen, epoch, txn, snap>>

\* 0x05C: a reader takes a snapshot of r's published tables and length, leasing every handle,
\* and reads through it later.
ReaderSnapshot(x, r) ==
    /\ ~snap[x].on
    /\ len[r] > 0
    /\ snap' = [snap EXCEPT ![x] = [on |-> TRUE, tables |-> tables[r], len |-> len[r], tokens |-> tokens[r]]]
    /\ ref' = [g \in Groups |-> [b \in Blocks |->
                  ref[g][b] + Cardinality({i \in DOMAIN tables[r][g] : tables[r][g][i].block = b})]]
    /\ wrote' = {}
    /\ UNCHANGED <<data, valid, gen, bundle, tables, len, tokens, tver, epoch, txn>>

\* 0x05C, 0x04B: the reader finishes reading and releases its leases (refcount -1 per handle).
ReaderRelease(x) ==
    /\ snap[x].on
    /\ DropRefs([g \in Groups |-> {h.block : h \in Range(snap[x].tables[g])}])
    /\ snap' = [snap EXCEPT ![x] = NoSnap]
    /\ wrote' = {}
    /\ UNCHANGED <<gen, tables, len, tokens, tver, epoch, txn>>

Next ==
    \/ \E r \in Requests, t \in Tokens, dest \in [Groups -> Blocks] : AppendBoundary(r, t, dest)
    \/ \E r \in Requests, t \in Tokens : AppendInPlace(r, t) \/ CowBegin(r, t)
    \/ \E r, c \in Requests : Fork(r, c)
    \/ \E r \in Requests, g \in Groups, b \in Blocks : CowReserve(r, g, b)
    \/ \E r \in Requests, g \in Groups : CowCopy(r, g) \/ CowWrite(r, g)
    \/ \E r \in Requests :
          \/ CowValidate(r)
          \/ CowPublish(r)
          \/ CowReleaseSources(r)
          \/ CowRollback(r)
          \/ Release(r)
    \/ \E x \in Readers, r \in Requests : ReaderSnapshot(x, r)
    \/ \E x \in Readers : ReaderRelease(x)

Spec == Init /\ [][Next]_vars

\* The liveness model (CowPublication.liveness.cfg): the allocator finishes what it starts:
\* releasing the source leases of a published COW transaction and rolling back an unpublished one
\* are weakly fair (copies, writes and readers are not).
LiveSpec == Spec /\ \A r \in Requests : WF_vars(CowReleaseSources(r)) /\ WF_vars(CowRollback(r))

\* State bound of the finite models (a CONSTRAINT, so bounded states are not deadlocks).
StateBound ==
    /\ \A g \in Groups, b \in Blocks : gen[g][b] <= MaxGen
    /\ epoch <= MaxEpoch
    /\ \A r \in Requests : tver[r] <= MaxVersion

-----------------------------------------------------------------------------
(* Invariants.                                                             *)

\* 0x05, 0x09C exactness: every request's visible rows, read through its tables, equal its
\* logical token history.
RequestsExact == \A r \in Requests : Exact(tables[r], len[r], tokens[r])

\* 0x05C: a reader's snapshot, read at any later time, still shows exactly the tokens it had.
SnapshotsExact == \A x \in Readers : snap[x].on => Exact(snap[x].tables, snap[x].len, snap[x].tokens)

\* 0x05, 0x04E: a block referenced more than once (by maps or leases) is never written.
SharedNeverWritten == \A w \in wrote : ref[w[1]][w[2]] <= 1

\* 0x05C step 8: no request and no reader sees a mix of predecessor and successor groups: the
\* blocks at one logical index of a table set come from one published bundle.
OneBundle(tbl) ==
    \A g1, g2 \in Groups : Len(tbl[g1]) = Len(tbl[g2]) /\
        \A i \in DOMAIN tbl[g1] : bundle[g1][tbl[g1][i].block] = bundle[g2][tbl[g2][i].block]
\* 0x05C step 8: every request and every held snapshot sees one bundle per logical index.
NoMixedGroups ==
    /\ \A r \in Requests : OneBundle(tables[r])
    /\ \A x \in Readers : snap[x].on => OneBundle(snap[x].tables)

\* 0x05C step 7: valid rows never run ahead of written rows.
ValidWithinWritten == \A g \in Groups, b \in Blocks : valid[g][b] <= Len(data[g][b])

\* 0x04B: the recorded refcount equals the references derived from reachability.
RefcountDerived ==
    \A g \in Groups, b \in Blocks : ref[g][b] = MapRefs(g, b) + SnapRefs(g, b) + LeaseRefs(g, b)

\* 0x04A: an unpublished destination is never reachable from a request map or a snapshot.
ReservedUnreachable ==
    \A g \in Groups, b \in Blocks : Reserved(g, b) => MapRefs(g, b) + SnapRefs(g, b) = 0

\* 0x04A under interleaving: two transactions in flight never hold the same destination, so a
\* block is published once and freed once.
ReservationsDisjoint ==
    \A r, s \in InFlight, g \in Groups :
        (r # s /\ txn[r].dest[g] # 0) => txn[r].dest[g] # txn[s].dest[g]

\* What the unpublished destination of r's transaction in group g must hold: nothing before the
\* copy, the source's valid tail rows after it, and the appended token after the write.
DestRows(r, g) ==
    LET c == SubSeq(data[g][txn[r].src[g]], 1, txn[r].rows)
    IN IF g \notin txn[r].copied THEN <<>> ELSE IF g \notin txn[r].written THEN c ELSE Append(c, txn[r].tok)

\* 0x05C steps 5-7, 0x04F under interleaving (no lost COW; a rollback restores only its own
\* reservations): every unpublished destination holds exactly what its own transaction wrote.
ReservationsHoldTheirCopy ==
    \A r \in InFlight, g \in Groups :
        (txn[r].phase \in {"begun", "validated"} /\ txn[r].dest[g] # 0) =>
            data[g][txn[r].dest[g]] = DestRows(r, g)

THEOREM Spec => []TypeOK
THEOREM Spec => []RequestsExact
THEOREM Spec => []SnapshotsExact
THEOREM Spec => []SharedNeverWritten
THEOREM Spec => []NoMixedGroups
THEOREM Spec => []ValidWithinWritten
THEOREM Spec => []RefcountDerived
THEOREM Spec => []ReservedUnreachable
THEOREM Spec => []ReservationsDisjoint
THEOREM Spec => []ReservationsHoldTheirCopy

-----------------------------------------------------------------------------
(* Liveness (CowPublication.liveness.cfg, under LiveSpec).                 *)

\* 0x05C step 9, 0x05E: a block that no request maps and no snapshot holds (only the source
\* lease of a COW transaction keeps it) is eventually free for reuse.
FreedBlockEventuallyReusable ==
    \A g \in Groups, b \in Blocks : (ref[g][b] > 0 /\ MapRefs(g, b) + SnapRefs(g, b) = 0) ~> Free(g, b)

\* Witness (spec/witnesses/, non-vacuity): negated; a model check must find it violated: a COW
\* transaction published its successor tables (0x05B, 0x05C step 8).
WitnessNoCowPublication == \A r \in Requests : txn[r].phase # "published"

\* Witness (Concurrent = 2): two COW transactions copy one shared source tail at once, both
\* validated and ready to publish (0x05C under interleaving: each holds its own lease).
WitnessNoRacingCows ==
    ~(\E r, s \in Requests : r # s /\ txn[r].phase = "validated" /\ txn[s].phase = "validated"
                             /\ txn[r].src = txn[s].src)

\* Witness (Concurrent = 2): one COW transaction has published and still holds its source lease
\* while another transaction on the same source has copied and not yet published: the source is
\* kept for the second copy by both leases (a publish racing a copy).
WitnessNoPublishDuringCopy ==
    ~(\E r, s \in Requests : r # s /\ txn[r].phase = "published" /\ txn[s].phase = "begun"
                             /\ txn[s].copied # {} /\ txn[r].src = txn[s].src)

-----------------------------------------------------------------------------
(* Refinement (PROPERTY RefinesExactHistory of CowPublication.cfg): a      *)
(* request's ExactHistory history is its logical tokens; a row is visible  *)
(* when every group's table shows the same token there (RowAt: current     *)
(* handle, validated and written).  The mapping is a state function: no    *)
(* history variable is added, so the model keeps its states.               *)

\* 0x05C step 8: row i of r, when all groups agree on it (0 otherwise).
ShownRow(r, i) ==
    LET j == (i - 1) \div P + 1
        g0 == CHOOSE g \in Groups : \A h \in Groups : g <= h
    IN IF \A g \in Groups : j <= Len(tables[r][g]) /\ RowAt(tables[r], g, i) = RowAt(tables[r], g0, i)
       THEN RowAt(tables[r], g0, i) ELSE 0

EH == INSTANCE ExactHistory WITH
          history <- tokens,
          view <- [r \in Requests |-> [i \in 1..len[r] |-> ShownRow(r, i)]]

\* 0x05, 0x05B-0x05D: every CowPublication behaviour is an ExactHistory behaviour (its Init, then
\* [][Next]_vars on every step); it implies that every visible row is the history (VisibleIsHistory).
RefinesExactHistory == EH!Spec

THEOREM Spec => RefinesExactHistory

=============================================================================
