---------------------------- MODULE ExactHistory ----------------------------
(***************************************************************************)
(* The abstract ownership protocol that both allocator specs implement     *)
(* (seed 0x04-0x05, 0x07C): every request has a token history, and what a  *)
(* request sees through its published block tables is exactly that         *)
(* history.  Publication is atomic: the visible rows change only together  *)
(* with the history, by one whole operation (append one token, truncate to *)
(* a prefix, release, fork a copy, adopt a cached prefix).  KVAllocation   *)
(* and CowPublication refine it (RefinesExactHistory, a PROPERTY of their  *)
(* CI models): their block tables, valid rows and data map onto view.      *)
(***************************************************************************)
EXTENDS Naturals, Sequences

CONSTANTS
    Requests, \* request ids
    Tokens,   \* token values
    MaxTokens \* longest history

VARIABLES
    history, \* [Requests -> Seq(Tokens)]: each request's committed token history
    view     \* [Requests -> Seq(Tokens \cup {0})]: the rows its published tables show (0: a row not valid)

vars == <<history, view>>

Histories == UNION {[1..k -> Tokens] : k \in 0..MaxTokens}

TypeOK ==
    /\ \A r \in Requests : history[r] \in Histories
    /\ \A r \in Requests : Len(view[r]) <= MaxTokens

Init ==
    /\ history = [r \in Requests |-> <<>>]
    /\ view = [r \in Requests |-> <<>>]

\* Every step publishes its new history atomically: the view is the new history.
Publish(h) == history' = h /\ view' = h

\* 0x04E, 0x05B: append one token (in place, at a boundary, or by copy-on-write).
AppendToken(r, t) ==
    /\ Len(history[r]) < MaxTokens
    /\ Publish([history EXCEPT ![r] = Append(@, t)])

\* 0x05E truncate: keep a proper prefix.
Truncate(r, k) ==
    /\ k < Len(history[r])
    /\ Publish([history EXCEPT ![r] = SubSeq(@, 1, k)])

\* 0x05E release: the request's lifetime ends.
Release(r) ==
    /\ history[r] # <<>>
    /\ Publish([history EXCEPT ![r] = <<>>])

\* 0x05B fork: an empty request shares another's whole history.
Fork(r, c) ==
    /\ history[c] = <<>>
    /\ history[r] # <<>>
    /\ Publish([history EXCEPT ![c] = history[r]])

\* 0x07C prefix hit: an empty request adopts a cached prefix (its exactness is what view checks).
Adopt(r, h) ==
    /\ history[r] = <<>>
    /\ h # <<>>
    /\ Publish([history EXCEPT ![r] = h])

Next ==
    \/ \E r \in Requests, t \in Tokens : AppendToken(r, t)
    \/ \E r \in Requests, k \in 0..MaxTokens : Truncate(r, k)
    \/ \E r \in Requests : Release(r)
    \/ \E r, c \in Requests : Fork(r, c)
    \/ \E r \in Requests, h \in Histories : Adopt(r, h)

Spec == Init /\ [][Next]_vars

\* 0x04E, 0x05C: a request's visible rows are exactly its history.
VisibleIsHistory == \A r \in Requests : view[r] = history[r]

THEOREM Spec => []TypeOK
THEOREM Spec => []VisibleIsHistory

=============================================================================
