---- MODULE HybridAllocation_PublishPartialTail ----
\* VIOLATES: CachedBlocksFull. Mutant of HybridAllocation.tla (seeded bug, kept on purpose): publication keys every block of the table, the partial tail included, instead of the A-aligned full blocks.
(***************************************************************************)
(* Cache groups of different block sizes under one allocator, with prefix *)
(* hits that every group serves (seed 0x03B, 0x03C, 0x07C, 0x01A).  Each  *)
(* group g has its own pool and block size P[g]; a request's table in g   *)
(* covers its length in blocks of P[g] (group-specific quotient and       *)
(* remainder), so an append reaches a block boundary in one group while   *)
(* writing in place in another.  Every request reads one shared token     *)
(* stream, so a block's content is its logical index and its valid rows,  *)
(* and a cached identity is the fine hash index of the block's last row   *)
(* at the hash block size H, which divides every P[g].  A prefix hit of L *)
(* tokens is a multiple of A = lcm(P[g]) below MaxLen and maps, in every  *)
(* group, L / P[g] cached blocks; a prefix only one group holds is no hit.*)
(* Admission, an append and a release are each one atomic step.           *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets

CONSTANTS
    P1,        \* block size in tokens of cache group 1
    P2,        \* block size in tokens of cache group 2
    H,         \* the hash block size: divides every P[g] (0x01A)
    Blocks,    \* block ids of every group's pool (integers)
    Requests,  \* request ids
    MaxLen     \* tokens a request may hold

Groups == {1, 2}
P == <<P1, P2>>  \* [Groups -> Nat \ {0}]: each group's block size

ASSUME H \in Nat \ {0}
ASSUME \A g \in Groups : P[g] \in Nat \ {0} /\ P[g] % H = 0

VARIABLES
    len,     \* [Requests -> Nat]: tokens of the request (0: not admitted)
    active,  \* [Requests -> BOOLEAN]
    tables,  \* [Requests -> [Groups -> Seq(Blocks)]]: one block table per group
    ref,     \* [Groups -> [Blocks -> Nat]]: strong references (request-table entries)
    ident,   \* [Groups -> [Blocks -> Nat]]: cached identity (fine hash index), 0: none
    pos,     \* [Groups -> [Blocks -> Nat]]: the logical block index whose rows the block holds (0: none)
    rows,    \* [Groups -> [Blocks -> Nat]]: valid rows written into the block
    hits     \* [Requests -> Nat]: the prefix hit the request was admitted with (history)

vars == <<len, active, tables, ref, ident, pos, rows, hits>>

\* A = lcm(P1, P2): the least positive multiple of both block sizes.
A == CHOOSE a \in 1..(P1 * P2) : /\ a % P1 = 0 /\ a % P2 = 0
                                 /\ \A b \in 1..(a - 1) : b % P1 # 0 \/ b % P2 # 0
NumBlocks(n, g) == (n + P[g] - 1) \div P[g]
Key(g, i) == (i * P[g]) \div H           \* identity of logical block i of group g (1-based)
\* Group g holds a current cached block for each of its blocks 1..L / P[g].
Holds(g, L) == \A i \in 1..(L \div P[g]) : \E b \in Blocks : ident[g][b] = Key(g, i)
Served(L) == L % A = 0 /\ L < MaxLen /\ \A g \in Groups : Holds(g, L)
CachedBlock(g, i) == CHOOSE b \in Blocks : ident[g][b] = Key(g, i)
\* An append of r reaches a block boundary in group g (each group by its own block size, 0x03C).
AtBoundary(r, g) == len[r] % P[g] = 0
\* Blocks of group g that r publishes: its full blocks inside its A-aligned length.
Cacheable(r, g) == NumBlocks(len[r], g)
FreeBlock(g) == CHOOSE b \in Blocks : ref[g][b] = 0 /\ \A c \in Blocks : ref[g][c] = 0 => b <= c

TypeOK ==
    /\ len \in [Requests -> 0..MaxLen]
    /\ active \in [Requests -> BOOLEAN]
    /\ \A r \in Requests : \A g \in Groups : tables[r][g] \in Seq(Blocks)
    /\ \A g \in Groups : \A b \in Blocks : ref[g][b] \in Nat /\ ident[g][b] \in Nat /\ pos[g][b] \in Nat
                                          /\ rows[g][b] \in 0..P[g]
    /\ hits \in [Requests -> 0..MaxLen]

Init ==
    /\ len = [r \in Requests |-> 0]
    /\ active = [r \in Requests |-> FALSE]
    /\ tables = [r \in Requests |-> [g \in Groups |-> <<>>]]
    /\ ref = [g \in Groups |-> [b \in Blocks |-> 0]]
    /\ ident = [g \in Groups |-> [b \in Blocks |-> 0]]
    /\ pos = [g \in Groups |-> [b \in Blocks |-> 0]]
    /\ rows = [g \in Groups |-> [b \in Blocks |-> 0]]
    /\ hits = [r \in Requests |-> 0]

-----------------------------------------------------------------------------
(* Actions.                                                                *)

\* 0x07C: admit r with a hit of L tokens every group serves (any served L: a runtime may take less
\* than the longest); each group maps its L / P[g] cached blocks (+1 reference each).
AdmitWithHit(r, L) ==
    /\ ~active[r]
    /\ Served(L)
    /\ active' = [active EXCEPT ![r] = TRUE]
    /\ len' = [len EXCEPT ![r] = L]
    /\ hits' = [hits EXCEPT ![r] = L]
    /\ tables' = [tables EXCEPT ![r] = [g \in Groups |-> [i \in 1..(L \div P[g]) |-> CachedBlock(g, i)]]]
    /\ ref' = [g \in Groups |-> [b \in Blocks |->
                 IF \E i \in 1..(L \div P[g]) : CachedBlock(g, i) = b THEN ref[g][b] + 1 ELSE ref[g][b]]]
    /\ UNCHANGED <<ident, pos, rows>>

\* 0x03C: one token.  A group at a block boundary (len % P[g] = 0) takes its lowest unreferenced
\* block (a cached one loses its identity: eviction) and writes row 1; any other group writes in
\* place into its tail block, which it alone references.  All groups or none (no block: no step).
AppendToken(r) ==
    /\ active[r]
    /\ len[r] < MaxLen
    /\ \A g \in Groups : AtBoundary(r, g) => \E b \in Blocks : ref[g][b] = 0
    /\ \A g \in Groups : ~AtBoundary(r, g) => ref[g][tables[r][g][Len(tables[r][g])]] = 1
    /\ LET new == [g \in Groups |-> IF AtBoundary(r, g) THEN FreeBlock(g) ELSE 0]
           tail == [g \in Groups |-> IF AtBoundary(r, g) THEN new[g] ELSE tables[r][g][Len(tables[r][g])]]
       IN /\ tables' = [tables EXCEPT ![r] = [g \in Groups |->
                          IF AtBoundary(r, g) THEN Append(tables[r][g], new[g]) ELSE tables[r][g]]]
          /\ ref' = [g \in Groups |-> IF AtBoundary(r, g) THEN [ref[g] EXCEPT ![new[g]] = 1] ELSE ref[g]]
          /\ ident' = [g \in Groups |-> IF AtBoundary(r, g) THEN [ident[g] EXCEPT ![new[g]] = 0] ELSE ident[g]]
          /\ pos' = [g \in Groups |->
                       IF AtBoundary(r, g) THEN [pos[g] EXCEPT ![new[g]] = Len(tables[r][g]) + 1] ELSE pos[g]]
          /\ rows' = [g \in Groups |-> [rows[g] EXCEPT ![tail[g]] = (len[r] % P[g]) + 1]]
    /\ len' = [len EXCEPT ![r] = @ + 1]
    /\ UNCHANGED <<active, hits>>

\* 0x05E cache, 0x07B: publish r's full blocks up to its A-aligned length, in every group, under
\* identities no block of that group carries yet (vLLM caches up to the scheduler block size).
Publish(r) ==
    /\ active[r]
    /\ LET fresh(g, i) == /\ ident[g][tables[r][g][i]] = 0
                          /\ \A c \in Blocks : ident[g][c] # Key(g, i)
       IN /\ \E g \in Groups : \E i \in 1..Cacheable(r, g) : fresh(g, i)
          /\ ident' = [g \in Groups |-> [b \in Blocks |->
                         IF \E i \in 1..Cacheable(r, g) : tables[r][g][i] = b /\ fresh(g, i)
                         THEN Key(g, CHOOSE i \in 1..Cacheable(r, g) : tables[r][g][i] = b)
                         ELSE ident[g][b]]]
    /\ UNCHANGED <<len, active, tables, ref, pos, rows, hits>>

\* 0x05E release: every table entry drops its reference; a cached block keeps its identity (evictable).
Release(r) ==
    /\ active[r]
    /\ active' = [active EXCEPT ![r] = FALSE]
    /\ len' = [len EXCEPT ![r] = 0]
    /\ tables' = [tables EXCEPT ![r] = [g \in Groups |-> <<>>]]
    /\ ref' = [g \in Groups |-> [b \in Blocks |->
                 ref[g][b] - Cardinality({i \in 1..Len(tables[r][g]) : tables[r][g][i] = b})]]
    /\ UNCHANGED <<ident, pos, rows, hits>>

Next ==
    \/ \E r \in Requests : \E L \in 0..MaxLen : AdmitWithHit(r, L)
    \/ \E r \in Requests : AppendToken(r) \/ Publish(r) \/ Release(r)

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Invariants.                                                             *)

\* Every table has exactly ceil(len / P[g]) blocks in its group (0x03C's per-group quotient).
TablesCoverLength ==
    \A r \in Requests : \A g \in Groups : Len(tables[r][g]) = NumBlocks(len[r], g)

\* 0x04B: a block's reference count is the number of table entries that map it.
RefcountDerived ==
    \A g \in Groups : \A b \in Blocks :
        ref[g][b] = Cardinality({<<r, i>> \in Requests \X (1..MaxLen) :
                                     i <= Len(tables[r][g]) /\ tables[r][g][i] = b})

\* 0x03C, 0x07C: each mapped block holds the rows of the position it is mapped at: the right logical block, and
\* every row the request's length covers there (a hit never maps an unwritten or misplaced block).
MappedRowsMatch ==
    \A r \in Requests : \A g \in Groups : \A i \in 1..Len(tables[r][g]) :
        LET b == tables[r][g][i] IN
        /\ pos[g][b] = i
        /\ rows[g][b] >= IF len[r] >= i * P[g] THEN P[g] ELSE len[r] - (i - 1) * P[g]

\* A cached block is full and carries the identity of the position it holds (0x07C: exact prefix).
CachedBlocksFull ==
    \A g \in Groups : \A b \in Blocks : ident[g][b] # 0 => rows[g][b] = P[g] /\ ident[g][b] = Key(g, pos[g][b])

\* 0x07B: one identity names at most one block of a group.
UniqueIdentity ==
    \A g \in Groups : \A b, c \in Blocks : b # c /\ ident[g][b] # 0 => ident[g][b] # ident[g][c]

\* A hit is a multiple of every group's block size and leaves the last row to compute (0x07E).
HitAligned ==
    \A r \in Requests : hits[r] % A = 0 /\ hits[r] < MaxLen

\* State bound of the models: the pools are finite already; nothing else grows.
StateBound == TRUE

THEOREM Spec => []TypeOK
THEOREM Spec => []HitAligned
THEOREM Spec => []TablesCoverLength
THEOREM Spec => []RefcountDerived
THEOREM Spec => []MappedRowsMatch
THEOREM Spec => []CachedBlocksFull
THEOREM Spec => []UniqueIdentity
=============================================================================
