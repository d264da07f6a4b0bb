"""TLCExt's Trace (the behaviour so far, a sequence of records), TLC's Json module and Toolbox's names:
a spec using Trace with JsonSerialize parses and evaluates as TLC does (TLC's output file, read from a
TLC run on the same spec, is the oracle: [{"x":0,"y":"a"},...,{"x":3,"y":"b"}])."""

from __future__ import annotations

import json

from kvexact.spec.checker.engine import check_model
from kvexact.spec.checker.result import Outcome

SPEC = """EXTENDS Naturals, Sequences, TLCExt, Json
CONSTANT Out
VARIABLE x, y
Init == x = 0 /\\ y = "a"
Next == x < 3 /\\ x' = x + 1 /\\ y' = IF y = "a" THEN "b" ELSE "a"
Dump == x = 3 => JsonSerialize(Out, Trace)
TraceOk == Len(Trace) = x + 1 /\\ \\A i \\in 1..Len(Trace) : Trace[i].x = i - 1
Short == Len(Trace) < 3"""


def _write(tmp_path, body: str, cfg: str):
    spec = tmp_path / "M.tla"
    spec.write_text(f"---- MODULE M ----\n{body}\n====\n")
    (tmp_path / "M.cfg").write_text(cfg)
    return spec


def _run(tmp_path, invariant: str):
    out = tmp_path / "out.json"
    cfg = f'CONSTANT Out = "{out}"\nINIT Init\nNEXT Next\nINVARIANT {invariant}\nCHECK_DEADLOCK FALSE\n'
    spec = _write(tmp_path, SPEC, cfg)
    return check_model(spec), out


def test_trace_with_json_serialize_writes_the_behaviour_as_tlc(tmp_path):
    res, out = _run(tmp_path, "Dump")
    assert res.outcome is Outcome.SUCCESS and (res.generated_states, res.distinct_states) == (4, 4)
    assert json.loads(out.read_text()) == [{"x": 0, "y": "a"}, {"x": 1, "y": "b"}, {"x": 2, "y": "a"},
                                           {"x": 3, "y": "b"}]


def test_trace_is_the_path_to_the_state_checked(tmp_path):
    assert _run(tmp_path, "TraceOk")[0].outcome is Outcome.SUCCESS
    res = _run(tmp_path, "Short")[0]  # TLC: violated in the third state, 3 generated, 3 distinct
    assert res.outcome is Outcome.SAFETY and res.violation.name == "Short"
    assert (res.generated_states, res.distinct_states) == (3, 3)


def test_toolbox_names_resolve_and_fail_only_when_evaluated(tmp_path):
    body = "EXTENDS Naturals\nINSTANCE Toolbox\nVARIABLE x\nInit == x = 0\nNext == x' = 1 - x\nPos == _TEPosition"
    spec = _write(tmp_path, body, "INIT Init\nNEXT Next\n")
    assert check_model(spec).outcome is Outcome.SUCCESS
    spec = _write(tmp_path, body + "\nInv == Pos > 0", "INIT Init\nNEXT Next\nINVARIANT Inv\n")
    res = check_model(spec)
    assert res.outcome is Outcome.EVALUATION and "_TEPosition" in res.violation.message
