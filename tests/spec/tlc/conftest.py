"""Recorded TLC ``-tool`` output, written from the message catalogue in docs/checker.md ("What TLC prints"),
shared by the TLC tests as the ``tlc_output`` fixture."""

import pytest

DIEHARD_VIOLATION = """\
@!@!@STARTMSG 2262:0 @!@!@
TLC2 Version 2.19 of 08 August 2024 (rev: 5a47802)
@!@!@ENDMSG 2262 @!@!@
@!@!@STARTMSG 2185:0 @!@!@
Starting... (2026-11-29 12:00:00)
@!@!@ENDMSG 2185 @!@!@
@!@!@STARTMSG 2190:0 @!@!@
Finished computing initial states: 1 distinct state generated at 2026-11-29 12:00:01.
@!@!@ENDMSG 2190 @!@!@
@!@!@STARTMSG 2110:1 @!@!@
Invariant NotSolved is violated.
@!@!@ENDMSG 2110 @!@!@
@!@!@STARTMSG 2121:1 @!@!@
The behavior up to this point is:
@!@!@ENDMSG 2121 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
1: <Initial predicate>
/\\ big = 0
/\\ small = 0

@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
2: <FillBigJug line 25, col 5 to line 26, col 22 of module DieHard>
/\\ big = 5
/\\ small = 0

@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
3: <BigToSmall line 44, col 5 to line 45, col 41 of module DieHard>
/\\ big = 2
/\\ small = 3

@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2199:0 @!@!@
97 states generated, 16 distinct states found, 2 states left on queue.
@!@!@ENDMSG 2199 @!@!@
@!@!@STARTMSG 2194:0 @!@!@
The depth of the complete state graph search is 7.
@!@!@ENDMSG 2194 @!@!@
@!@!@STARTMSG 2186:0 @!@!@
Finished in 01s at (2026-11-29 12:00:01)
@!@!@ENDMSG 2186 @!@!@
"""

SUCCESS = """\
@!@!@STARTMSG 2185:0 @!@!@
Starting... (2026-11-29 12:00:00)
@!@!@ENDMSG 2185 @!@!@
@!@!@STARTMSG 2191:0 @!@!@
Finished computing initial states: 4 states generated, with 2 of them distinct at 2026-11-29 12:00:01.
@!@!@ENDMSG 2191 @!@!@
@!@!@STARTMSG 2193:0 @!@!@
Model checking completed. No error has been found.
  Estimates of the probability that TLC did not check all reachable states
  because two distinct states had the same fingerprint:
  calculated (optimistic):  val = 1.1E-15
@!@!@ENDMSG 2193 @!@!@
@!@!@STARTMSG 2200:0 @!@!@
Progress(12) at 2026-11-29 12:00:02: 1,234,567 states generated (1,234,567 s/min), 45,678 distinct states found (0 ds/min), 0 states left on queue.
@!@!@ENDMSG 2200 @!@!@
@!@!@STARTMSG 2199:0 @!@!@
1234567 states generated, 45678 distinct states found, 0 states left on queue.
@!@!@ENDMSG 2199 @!@!@
@!@!@STARTMSG 2194:0 @!@!@
The depth of the complete state graph search is 12.
@!@!@ENDMSG 2194 @!@!@
@!@!@STARTMSG 2186:0 @!@!@
Finished in 03s at (2026-11-29 12:00:03)
@!@!@ENDMSG 2186 @!@!@
"""

DEADLOCK = """\
@!@!@STARTMSG 2114:1 @!@!@
Deadlock reached.
@!@!@ENDMSG 2114 @!@!@
@!@!@STARTMSG 2121:1 @!@!@
The behavior up to this point is:
@!@!@ENDMSG 2121 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
1: <Initial predicate>
/\\ q = <<>>
/\\ owner = (r1 :> [phase |-> "idle", n |-> -3] @@ r2 :> [phase |-> "done", n |-> 0])
/\\ held = {<<1, "a">>, <<2, "b\\"c">>}

@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2199:0 @!@!@
5 states generated, 3 distinct states found, 0 states left on queue.
@!@!@ENDMSG 2199 @!@!@
"""

# A liveness counterexample (-tool): the cycle x = 1, 2 returns to state 2; "N: Back to state." (EC 2122).
LASSO = """\
@!@!@STARTMSG 2116:1 @!@!@
Temporal properties were violated.
@!@!@ENDMSG 2116 @!@!@
@!@!@STARTMSG 2264:1 @!@!@
The following behavior constitutes a counter-example:
@!@!@ENDMSG 2264 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
1: <Initial predicate>
x = 0

@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
2: <Loop12 line 4, col 11 to line 4, col 43 of module M>
x = 1

@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
3: <Loop12 line 4, col 11 to line 4, col 43 of module M>
x = 2

@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2122:4 @!@!@
2: Back to state.
@!@!@ENDMSG 2122 @!@!@
@!@!@STARTMSG 2199:0 @!@!@
6 states generated, 3 distinct states found, 0 states left on queue.
@!@!@ENDMSG 2199 @!@!@
"""

# The same shape ending in stuttering: "N: Stuttering" (EC 2218).
STUTTER = LASSO.replace("@!@!@STARTMSG 2122:4 @!@!@\n2: Back to state.\n@!@!@ENDMSG 2122 @!@!@",
                        "@!@!@STARTMSG 2218:4 @!@!@\n4: Stuttering\n@!@!@ENDMSG 2218 @!@!@")

@pytest.fixture(scope="session")
def tlc_output() -> dict[str, str]:
    """TLC's recorded ``-tool`` output by case: an invariant violation, a success, a deadlock, a lasso
    (liveness counterexample with "Back to state") and a lasso ending in stuttering."""
    return {"violation": DIEHARD_VIOLATION, "success": SUCCESS, "deadlock": DEADLOCK, "lasso": LASSO,
            "stutter": STUTTER}
