---- MODULE RadixIndex_KeepDuplicateSlots ----
\* VIOLATES: SlotsHeldOnce. Mutant of RadixIndex.tla (seeded bug, kept on purpose): publication drops the request's duplicate copies of tokens another request cached first without freeing them.
(***************************************************************************)
(* The RadixAttention prefix index (seed 0x08-0x08F): a tree of compressed *)
(* token edges, each owning the K/V slots of its tokens.  Running         *)
(* requests match the longest cached prefix of their prompt and lock its   *)
(* path; they reserve private slots for the rest, decode a token at a time *)
(* into private slots, publish their suffix (releasing the slots of tokens *)
(* another request cached first) and release their lease.  Unlocked leaves *)
(* are evicted whole-edge, leaf first.  Every namespace has its own        *)
(* subtree: a match never crosses namespaces (0x01A isolation).  With      *)
(* PageSize P > 1 (SGLang's page size) matches, splits and published edges *)
(* are whole pages and an unaligned tail stays private; P = 1 is the       *)
(* seed's teaching granularity.                                            *)
(*                                                                         *)
(* Representation (no recursion): a node is identified by its full path    *)
(* key from the root; its parent is the longest proper prefix among the    *)
(* nodes of its namespace, its edge tokens are the path's tokens past the  *)
(* parent's, and slots[v] are the slots of exactly those tokens (0x08A).   *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets

CONSTANTS
    Namespaces, \* namespace ids (model values), each an isolated subtree
    Requests,   \* request ids (model values)
    Tokens,     \* token ids (integers)
    Slots,      \* the pool's physical token-slot ids (integers)
    MaxNodes,   \* node ids are 1..MaxNodes; 0 is the root
    MaxLen,     \* longest prompt, in tokens
    Prompts,    \* the prompts requests arrive with (non-empty token sequences of at most MaxLen)
    NoNs,       \* model value: the namespace of an unused node id
    PageSize    \* tokens per page (a positive integer)

VARIABLES
    tree,      \* [1..MaxNodes -> [ns: Namespaces \cup {NoNs}, path: Seq(Tokens), slots: Seq(Slots)]]
    lock,      \* [1..MaxNodes -> Nat]: lock_ref, the lease holders whose path contains the node (0x08D)
    free,      \* SUBSET Slots: free slots of the pool
    priv,      \* [Requests -> Seq(Slots)]: request-private, unpublished slots (0x08A's R)
    req,       \* [Requests -> [phase, ns, q, node, m]]: each request's lease: prompt q, namespace,
               \*  locked terminal node (0 = root) and matched tokens m
    evictable  \* Int: evictable_size, kept incrementally like the runtime's counter (0x08D)

vars == <<tree, lock, free, priv, req, evictable>>

Nodes == 1..MaxNodes
Range(s) == {s[i] : i \in DOMAIN s}
\* The CI model's prompts (cfg: Prompts <- CIPrompts): a one-token prompt that decodes into a chat, and
\* a two-token chat sharing its first token (0x08C).
CIPrompts == {<<1>>, <<1, 2>>}
\* The deep model's prompts (cfg: Prompts <- DeepPrompts): the two chats and their shared prefix.
DeepPrompts == {<<1>>, <<1, 1>>, <<1, 2>>}
\* The page-2 models' prompts (cfg: Prompts <- Page2Prompts): one page and two pages sharing the first, so
\* a cached two-page edge can be split by a one-page lookup; decoding leaves unaligned private tails (0x08C).
Page2Prompts == {<<1, 2>>, <<1, 2, 1, 2>>}
\* The page-3 models' prompts (cfg: Prompts <- Page3Prompts): one whole page, the same page with a
\* one-token tail, and a prompt shorter than a page (never cached: all of it is tail).
Page3Prompts == {<<1, 1, 2>>, <<1, 1, 2, 1>>, <<1, 1>>}
Phases == {"idle", "matched", "reserved", "running"}
ASSUME \A q \in Prompts : q \in Seq(Tokens) /\ Len(q) \in 1..MaxLen
ASSUME PageSize \in Nat \ {0}

TypeOK ==
    /\ \A v \in Nodes :
          /\ tree[v].ns \in Namespaces \cup {NoNs}
          /\ Len(tree[v].path) <= MaxLen /\ Range(tree[v].path) \subseteq Tokens
          /\ Range(tree[v].slots) \subseteq Slots
          /\ Len(tree[v].path) % PageSize = 0
    /\ lock \in [Nodes -> Nat]
    /\ free \subseteq Slots
    /\ \A r \in Requests : Len(priv[r]) <= MaxLen /\ Range(priv[r]) \subseteq Slots
    /\ \A r \in Requests :
          /\ req[r].phase \in Phases
          /\ req[r].ns \in Namespaces \cup {NoNs}
          /\ req[r].node \in Nodes \cup {0}
          /\ req[r].m \in 0..MaxLen
    /\ evictable \in Int

Unused == [ns |-> NoNs, path |-> <<>>, slots |-> <<>>]
Idle == [phase |-> "idle", ns |-> NoNs, q |-> <<>>, node |-> 0, m |-> 0]

IsPrefix(a, b) == Len(a) <= Len(b) /\ SubSeq(b, 1, Len(a)) = a
Alive(nd, v) == nd[v].ns # NoNs
Max(S) == CHOOSE x \in S : \A y \in S : y <= x
Whole(k) == k - (k % PageSize)

\* The nodes on the path root -> t (t included; the root 0 is not a node), in tree nd.
PathIn(nd, t) ==
    IF t = 0 THEN {}
    ELSE {v \in Nodes : Alive(nd, v) /\ nd[v].ns = nd[t].ns /\ IsPrefix(nd[v].path, nd[t].path)}
ParentLen(nd, v) == Max({Len(nd[u].path) : u \in PathIn(nd, v) \ {v}} \cup {0})
Children(nd, v) ==
    {u \in Nodes \ {v} : Alive(nd, u) /\ nd[u].ns = nd[v].ns /\ IsPrefix(nd[v].path, nd[u].path)
                         /\ ParentLen(nd, u) = Len(nd[v].path)}
IsLeaf(nd, v) == \A u \in Nodes \ {v} : ~(Alive(nd, u) /\ nd[u].ns = nd[v].ns /\ IsPrefix(nd[v].path, nd[u].path))
\* The slots of a set of nodes (each slot is held by one node, SlotsHeldOnce).
SlotsOf(nd, S) == UNION {Range(nd[v].slots) : v \in S}
Fresh(nd) == CHOOSE v \in Nodes : ~Alive(nd, v)
\* The k lowest slots of S in increasing order (which free slots a request takes is policy).
Lowest(S, k) == [i \in 1..k |-> CHOOSE x \in S : Cardinality({y \in S : y < x}) = i - 1]
HasFresh(nd) == \E v \in Nodes : ~Alive(nd, v)

\* 0x08B: the longest prefix of q's whole pages cached in namespace n (edges compared token by token).
Cached(nd, n, q) ==
    Max({0} \cup {k \in 1..Whole(Len(q)) : k % PageSize = 0 /\ \E v \in Nodes : Alive(nd, v) /\ nd[v].ns = n /\ Len(nd[v].path) >= k
                                            /\ SubSeq(nd[v].path, 1, k) = SubSeq(q, 1, k)})

\* 0x08B: make the cached prefix s of namespace n a node.  When s ends inside the edge of node c,
\* split c: a new node takes the shared tokens and their slots and c keeps the suffix; the new
\* node copies c's lock count, since it lies on every path that c's did (0x08D).  Returns the
\* tree, the locks and the node whose path is s (0 for the empty prefix).
NodeAt(nd, lk, n, s) ==
    LET at == {v \in Nodes : Alive(nd, v) /\ nd[v].ns = n /\ nd[v].path = s}
        below == {v \in Nodes : Alive(nd, v) /\ nd[v].ns = n /\ IsPrefix(s, nd[v].path)}
        c == CHOOSE v \in below : \A w \in below : Len(nd[v].path) <= Len(nd[w].path)
        u == Fresh(nd)
        cut == Len(s) - ParentLen(nd, c)
    IN IF s = <<>> THEN [tree |-> nd, lock |-> lk, node |-> 0]
       ELSE IF at # {} THEN [tree |-> nd, lock |-> lk, node |-> CHOOSE v \in at : TRUE]
       ELSE [tree |-> [nd EXCEPT ![u] = [ns |-> n, path |-> s, slots |-> SubSeq(nd[c].slots, 1, cut)],
                                 ![c].slots = SubSeq(@, cut + 1, Len(@))],
             lock |-> [lk EXCEPT ![u] = lk[c]],
             node |-> u]
CanPlace(nd, n, s) ==
    s = <<>> \/ HasFresh(nd) \/ \E v \in Nodes : Alive(nd, v) /\ nd[v].ns = n /\ nd[v].path = s

\* 0x08D inc_lock_ref / dec_lock_ref: every node on the path root -> t gains (loses) one reference.
\* The evictable size moves by the slots of the nodes whose count leaves (reaches) zero.
LockPath(nd, lk, t, d) == [v \in Nodes |-> IF v \in PathIn(nd, t) THEN lk[v] + d ELSE lk[v]]
BecameLocked(nd, lk, t) == Cardinality(SlotsOf(nd, {v \in PathIn(nd, t) : lk[v] = 0}))
BecameUnlocked(nd, lk, t) == Cardinality(SlotsOf(nd, {v \in PathIn(nd, t) : lk[v] = 1}))

Init ==
    /\ tree = [v \in Nodes |-> Unused]
    /\ lock = [v \in Nodes |-> 0]
    /\ free = Slots
    /\ priv = [r \in Requests |-> <<>>]
    /\ req = [r \in Requests |-> Idle]
    /\ evictable = 0

-----------------------------------------------------------------------------
(* Actions.  Each is one reference step with the same name in snake_case.  *)

\* 0x08B, 0x08G: a waiting request of namespace n matches its prompt q against its namespace's
\* subtree (a match ending inside an edge splits it) and locks the matched path under a lease.
MatchAndLock(r, n, q) ==
    /\ req[r].phase = "idle"
    /\ LET k == Cached(tree, n, q)
           w == NodeAt(tree, lock, n, SubSeq(q, 1, k))
       IN /\ CanPlace(tree, n, SubSeq(q, 1, k))
          /\ tree' = w.tree
          /\ lock' = LockPath(w.tree, w.lock, w.node, 1)
          /\ evictable' = evictable - BecameLocked(w.tree, w.lock, w.node)
          /\ req' = [req EXCEPT ![r] = [phase |-> "matched", ns |-> n, q |-> q, node |-> w.node, m |-> k]]
    /\ UNCHANGED <<free, priv>>

\* 0x08A, 0x08C: the request takes free slots for the tokens its match did not cover and computes
\* their K/V rows there; the slots are private until published.
Reserve(r) ==
    /\ req[r].phase = "matched"
    /\ LET need == Len(req[r].q) - req[r].m IN
       /\ Cardinality(free) >= need
       /\ LET s == Lowest(free, need) IN
          /\ priv' = [priv EXCEPT ![r] = s]
          /\ free' = free \ Range(s)
    /\ req' = [req EXCEPT ![r].phase = "reserved"]
    /\ UNCHANGED <<tree, lock, evictable>>

\* 0x08C insert (r05, r07): the request's prompt q, whole pages a == Whole(Len(q)), into tree nd
\* with locks lk: p tokens are cached by now (at least its own match: its path is locked), so the
\* private slots of tokens m+1..p are duplicates, tokens p+1..a become a new leaf edge with their
\* private slots (splitting an edge when p ends inside one), and an unaligned tail a+1.. stays
\* private.  Returns the tree, the locks (the new leaf unlocked), the terminal node of q's whole
\* pages, the slots returned (duplicates) and kept (tail), and the tokens that joined the tree.
Insert(r) ==
    LET n == req[r].ns
        q == req[r].q
        m == req[r].m
        a == Whole(Len(q))
        p == Cached(tree, n, q)
        w == NodeAt(tree, lock, n, SubSeq(q, 1, p))
        u == Fresh(w.tree)
        grow == p < a
    IN [tree |-> IF grow THEN [w.tree EXCEPT ![u] = [ns |-> n, path |-> SubSeq(q, 1, a),
                                                     slots |-> SubSeq(priv[r], p - m + 1, a - m)]]
                 ELSE w.tree,
        lock |-> IF grow THEN [w.lock EXCEPT ![u] = 0] ELSE w.lock,
        node |-> IF grow THEN u ELSE w.node,
        dup |-> {},
        tail |-> SubSeq(priv[r], a - m + 1, Len(priv[r])),
        joined |-> a - p,
        a |-> a]
\* Insert(r) has a node id for everything it creates.
CanInsert(r) ==
    LET p == Cached(tree, req[r].ns, req[r].q)
    IN /\ CanPlace(tree, req[r].ns, SubSeq(req[r].q, 1, p))
       /\ p < Whole(Len(req[r].q)) => HasFresh(NodeAt(tree, lock, req[r].ns, SubSeq(req[r].q, 1, p)).tree)

\* 0x08C publish_unfinished (r05, r07): a running request inserts its prompt (Insert: duplicates
\* return to the pool) and its lock moves from the old terminal node to the new one.
PublishUnfinished(r) ==
    /\ req[r].phase = "reserved"
    /\ CanInsert(r)
    /\ LET x == Insert(r)
           lk2 == LockPath(x.tree, x.lock, x.node, 1)
       IN /\ tree' = x.tree
          /\ lock' = LockPath(x.tree, lk2, req[r].node, -1)
          /\ evictable' = evictable + x.joined - BecameLocked(x.tree, x.lock, x.node)
                          + BecameUnlocked(x.tree, lk2, req[r].node)
          /\ free' = free \cup x.dup
          /\ priv' = [priv EXCEPT ![r] = x.tail]
          /\ req' = [req EXCEPT ![r].phase = "running", ![r].node = x.node, ![r].m = x.a]

\* 0x08C decode: a reserved or running request appends one generated token t; its K/V row goes to a
\* free slot that joins the request's private tail (never a slot of the tree: cached rows are
\* shared and immutable).  Which free slot is the allocator's policy.
Decode(r, t) ==
    /\ req[r].phase \in {"reserved", "running"}
    /\ Len(req[r].q) < MaxLen
    /\ free # {}
    /\ LET s == CHOOSE x \in free : \A y \in free : x <= y IN
       /\ priv' = [priv EXCEPT ![r] = Append(@, s)]
       /\ free' = free \ {s}
    /\ req' = [req EXCEPT ![r].q = Append(@, t), ![r].phase = "reserved"]
    /\ UNCHANGED <<tree, lock, evictable>>

\* 0x08C cache_finished (r08): a finished request inserts its tokens (Insert) and ends in the same
\* step: the duplicates and the unaligned tail return to the pool and its lock is dropped.
CacheFinished(r) ==
    /\ req[r].phase \in {"reserved", "running"}
    /\ CanInsert(r)
    /\ LET x == Insert(r) IN
       /\ tree' = x.tree
       /\ lock' = LockPath(x.tree, x.lock, req[r].node, -1)
       /\ evictable' = evictable + x.joined + BecameUnlocked(x.tree, x.lock, req[r].node)
       /\ free' = free \cup x.dup \cup Range(x.tail)
       /\ priv' = [priv EXCEPT ![r] = <<>>]
       /\ req' = [req EXCEPT ![r] = Idle]

\* 0x08B: a lookup (match_prefix) without a lease that ends inside an edge splits it, which changes
\* no cached content, lock or slot (a lookup that ends at a node changes nothing: a stutter).
Match(n, q) ==
    /\ LET s == SubSeq(q, 1, Cached(tree, n, q))
           w == NodeAt(tree, lock, n, s)
       IN /\ CanPlace(tree, n, s)
          /\ w.tree # tree
          /\ tree' = w.tree
          /\ lock' = w.lock
    /\ UNCHANGED <<free, priv, req, evictable>>

\* 0x08C, 0x08G: the request ends (finished, cancelled or rejected by the scheduler): it drops
\* its lock and returns its private slots.
ReleaseRequest(r) ==
    /\ req[r].phase # "idle"
    /\ lock' = LockPath(tree, lock, req[r].node, -1)
    /\ evictable' = evictable + BecameUnlocked(tree, lock, req[r].node)
    /\ free' = free \cup Range(priv[r])
    /\ priv' = [priv EXCEPT ![r] = <<>>]
    /\ req' = [req EXCEPT ![r] = Idle]
    /\ UNCHANGED tree

\* 0x08E: evict an unlocked leaf whole-edge: all its slots return to the pool; its parent may
\* become a leaf in turn.  The victim ranking (LRU, ...) is policy, so any such leaf may go.
EvictNode(v) ==
    /\ Alive(tree, v)
    /\ lock[v] = 0
    /\ IsLeaf(tree, v)
    /\ tree' = [tree EXCEPT ![v] = Unused]
    /\ free' = free \cup Range(tree[v].slots)
    /\ evictable' = evictable - Len(tree[v].slots)
    /\ UNCHANGED <<lock, priv, req>>

Next ==
    \/ \E r \in Requests, n \in Namespaces, q \in Prompts : MatchAndLock(r, n, q)
    \/ \E r \in Requests : Reserve(r) \/ PublishUnfinished(r) \/ CacheFinished(r) \/ ReleaseRequest(r)
    \/ \E r \in Requests, t \in Tokens : Decode(r, t)
    \/ \E n \in Namespaces, q \in Prompts : Match(n, q)
    \/ \E v \in Nodes : EvictNode(v)

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Invariants.                                                             *)

Leased(r) == req[r].phase # "idle" /\ req[r].node # 0

\* 0x08D, 0x08E: a locked path is never evicted: every lease's terminal node is in the tree.
LockedPathNeverEvicted == \A r \in Requests : Leased(r) => Alive(tree, req[r].node)

\* 0x08G, 0x01A: a match returns only cached tokens of the caller's namespace: the locked
\* terminal node is in the request's namespace and its path is the matched prefix of the prompt.
MatchInOwnNamespace ==
    \A r \in Requests : Leased(r) =>
        /\ tree[req[r].node].ns = req[r].ns
        /\ tree[req[r].node].path = SubSeq(req[r].q, 1, req[r].m)

\* 0x08B child selector: two children of one node start with different pages (tokens at page size
\* 1; the tree is compressed: a common prefix of two edges is a node).
ChildSelectorsDistinct ==
    \A u, v \in Nodes :
        (u # v /\ Alive(tree, u) /\ Alive(tree, v) /\ tree[u].ns = tree[v].ns
         /\ ParentLen(tree, u) = ParentLen(tree, v)
         /\ SubSeq(tree[u].path, 1, ParentLen(tree, u)) = SubSeq(tree[v].path, 1, ParentLen(tree, v)))
        => SubSeq(tree[u].path, ParentLen(tree, u) + 1, ParentLen(tree, u) + PageSize)
           # SubSeq(tree[v].path, ParentLen(tree, v) + 1, ParentLen(tree, v) + PageSize)

\* 0x08D: lock(v) is derived: the number of leases whose path root -> terminal contains v.
LockCountsDerived ==
    \A v \in Nodes :
        lock[v] = Cardinality({r \in Requests : Leased(r) /\ v \in PathIn(tree, req[r].node)})

\* 0x08A: a compressed edge owns equal token and slot segments (|X_v| = |S_v| > 0).
EdgeOwnsSlots ==
    \A v \in Nodes : Alive(tree, v) =>
        /\ Len(tree[v].slots) = Len(tree[v].path) - ParentLen(tree, v)
        /\ Len(tree[v].slots) > 0

\* 0x08A, 0x08F: every slot is held exactly once: by one position of one edge, one request's
\* private ledger, or the free set (tree-owned + private + free = pool): the holders cover the pool
\* and there are exactly as many holding positions as slots.
SlotsHeldOnce ==
    LET atEdges == UNION {{<<v, i>> : i \in DOMAIN tree[v].slots} : v \in Nodes}
        atReqs == UNION {{<<r, i>> : i \in DOMAIN priv[r]} : r \in Requests}
    IN /\ SlotsOf(tree, Nodes) \cup (UNION {Range(priv[r]) : r \in Requests}) \cup free = Slots
       /\ Cardinality(atEdges) + Cardinality(atReqs) + Cardinality(free) = Cardinality(Slots)

\* 0x08D: the evictable size equals the tokens (slots) of the unlocked nodes.
EvictableSizeDerived ==
    evictable = Cardinality(SlotsOf(tree, {v \in Nodes : Alive(tree, v) /\ lock[v] = 0}))

THEOREM Spec => []TypeOK
THEOREM Spec => []LockedPathNeverEvicted
THEOREM Spec => []MatchInOwnNamespace
THEOREM Spec => []ChildSelectorsDistinct
THEOREM Spec => []LockCountsDerived
THEOREM Spec => []EdgeOwnsSlots
THEOREM Spec => []SlotsHeldOnce
THEOREM Spec => []EvictableSizeDerived

\* Witness (spec/witnesses/, non-vacuity): negated; a model check must find it violated: two
\* leases share a node that has a child, i.e. a path split under an active request kept both
\* requests' locks on the shared prefix (0x08B, 0x08D).
WitnessNoSharedSplit ==
    ~(\E v \in Nodes : Alive(tree, v) /\ lock[v] >= 2 /\ \E u \in Nodes : u # v /\ Alive(tree, u)
                        /\ tree[u].ns = tree[v].ns /\ IsPrefix(tree[v].path, tree[u].path))

=============================================================================
