------------------------- MODULE CowPublicationExact -------------------------
(***************************************************************************)
(* CowPublication refines ExactHistory (seed 0x05): a request's history is *)
(* its logical tokens; a row is visible when every group's table shows the *)
(* same token there (RowAt: current handle, validated and written).        *)
(***************************************************************************)
EXTENDS CowPublication

\* 0x05C step 8: row i of r, when all groups agree on it (0 otherwise).
ShownRow(r, i) ==
    LET j == (i - 1) \div P + 1
        g0 == CHOOSE g \in Groups : \A h \in Groups : g <= h
    IN IF \A g \in Groups : j <= Len(tables[r][g]) /\ RowAt(tables[r], g, i) = RowAt(tables[r], g0, i)
       THEN RowAt(tables[r], g0, i) ELSE 0

EH == INSTANCE ExactHistory WITH
          history <- tokens,
          view <- [r \in Requests |-> [i \in 1..len[r] |-> ShownRow(r, i)]]

\* 0x05C: the mapped state satisfies the abstract invariant (checked as an INVARIANT).
ExactHistoryVisible == EH!VisibleIsHistory

\* Every CowPublication behaviour is an ExactHistory behaviour (a PROPERTY: Init, then [][Next]_vars on every step).
RefinesExactHistory == EH!Spec

=============================================================================
