-------------------------- MODULE KVAllocationExact --------------------------
(***************************************************************************)
(* KVAllocation refines ExactHistory (seed 0x04-0x05): every request       *)
(* replays one shared token stream, so its history is the positions       *)
(* 1..len; a position is visible when every group's mapped block holds its *)
(* row (valid rows) under a current handle.                                *)
(***************************************************************************)
EXTENDS KVAllocation

\* 0x03C, 0x05F: row i of r as every group's table shows it (0: missing, stale or not yet written).
ShownRow(r, i) ==
    LET j == (i - 1) \div P + 1
        o == (i - 1) % P + 1
    IN IF \A g \in Groups : /\ j <= Len(tables[r][g])
                            /\ tables[r][g][j].gen = gen[g][tables[r][g][j].block]
                            /\ o <= rows[g][tables[r][g][j].block]
       THEN i ELSE 0

\* The shared token stream: position i carries token i.
Tokens == 1..MaxTokens

EH == INSTANCE ExactHistory WITH
          history <- [r \in Requests |-> [i \in 1..len[r] |-> i]],
          view <- [r \in Requests |-> [i \in 1..len[r] |-> ShownRow(r, i)]]

\* 0x04E, 0x05C: the mapped state satisfies the abstract invariant (checked as an INVARIANT).
ExactHistoryVisible == EH!VisibleIsHistory

\* Every KVAllocation behaviour is an ExactHistory behaviour (a PROPERTY: Init, then [][Next]_vars on every step).
RefinesExactHistory == EH!Spec

=============================================================================
