"""`kvexact check`: TLC exit codes, summary text, JSON and ITF output, engine selection."""

from __future__ import annotations

import json

from click.testing import CliRunner
from tla_snippets import NOLOCK, write_spec

from kvexact.cli.check import check

DIEHARD_LIKE = ("VARIABLE x\nInit == x = 0\nNext == x' = (x + 1) % 5\nSafe == x # 3",
                "INIT Init\nNEXT Next\nINVARIANT Safe\n")


def run(args, env=None):
    return CliRunner().invoke(check, args, standalone_mode=False, env=env)


def test_success_exit_0(tmp_path):
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == x' = 1 - x", NOLOCK)
    res = run([str(spec), "--coverage"])
    assert res.return_value == 0, res.output
    assert "Model checking completed. No error has been found." in res.output
    assert "3 states generated, 2 distinct states found, 0 states left on queue." in res.output


def test_violation_json_and_itf(tmp_path):
    """x = 0,1,2,3: the invariant fails in the 4th state; the trace marks changed variables."""
    spec = write_spec(tmp_path, *DIEHARD_LIKE)
    out_json, out_itf = tmp_path / "r.json", tmp_path / "t.itf.json"
    res = run([str(spec), "--json", str(out_json), "--itf", str(out_itf)])
    assert res.return_value == 12
    assert "Error: Invariant Safe is violated." in res.output and "* /\\ x = 3" in res.output
    d = json.loads(out_json.read_text())
    assert d["result"] == "safety" and d["engine"] == "embedded"
    assert (d["generated_states"], d["distinct_states"], d["depth"]) == (4, 4, 4)
    assert d["violation"]["kind"] == "invariant" and d["violation"]["name"] == "Safe"
    assert [s["values"]["x"] for s in d["violation"]["trace"]] == ["0", "1", "2", "3"]
    itf = json.loads(out_itf.read_text())
    assert itf["vars"] == ["x"] and [s["x"] for s in itf["states"]] == [{"#bigint": str(i)} for i in range(4)]


def test_deadlock_exit_11(tmp_path):
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == x < 1 /\\ x' = x + 1", "INIT Init\nNEXT Next\n")
    res = run([str(spec)])
    assert res.return_value == 11 and "Deadlock reached." in res.output


def test_parse_and_config_exits(tmp_path):
    bad = tmp_path / "Bad.tla"
    bad.write_text("---- MODULE Bad ----\nVARIABLE x\nInit == x = = 1\n====\n")
    assert run([str(bad)]).return_value == 150
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == UNCHANGED x", "INIT Init\nNEXT Next\nINVARIANT Q\n")
    assert run([str(spec)]).return_value == 151


def test_max_states_is_not_success(tmp_path):
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == x' = x + 1", NOLOCK)
    res = run([str(spec), "--max-states", "10"])
    assert res.return_value == 3 and "INCOMPLETE" in res.output


def test_simulation_finds_the_violation(tmp_path):
    spec = write_spec(tmp_path, *DIEHARD_LIKE)
    res = run([str(spec), "--simulate", "--depth", "10", "--num", "3", "--seed", "1"])
    assert res.return_value == 12


def test_tlc_engine_without_jar_could_not_run(tmp_path):
    spec = write_spec(tmp_path, *DIEHARD_LIKE)
    res = run([str(spec), "--engine", "tlc", "--tlc-jar", str(tmp_path / "missing.jar")])
    assert res.return_value == 3 and "could not run" in res.output and "missing.jar" in res.output


def test_engine_both_fails_on_a_difference(tmp_path, monkeypatch):
    """A stand-in TLC result with one more distinct state: `both` prints the difference and exits 1."""
    import attrs

    from kvexact.cli import check as check_cmd
    from kvexact.spec.checker import check_model

    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == x' = 1 - x", NOLOCK)
    real = check_model(spec)
    monkeypatch.setattr(check_cmd, "run_tlc_engine", lambda *a, **k: attrs.evolve(real, engine="tlc"))
    assert run([str(spec), "--engine", "both"]).return_value == 0
    monkeypatch.setattr(check_cmd, "run_tlc_engine",
                        lambda *a, **k: attrs.evolve(real, engine="tlc", distinct_states=3))
    res = run([str(spec), "--engine", "both"])
    assert res.return_value == 1 and "distinct states: embedded 2 vs tlc 3" in res.output


def test_liveness_violation_exits_13_with_a_lasso(tmp_path):
    """0 -> 1 -> 2 -> 1 ...: (x = 1) ~> (x = 0) fails; TLC's text closes the lasso with Back to state."""
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == x' = IF x = 2 THEN 1 ELSE x + 1\n"
                      "Spec == Init /\\ [][Next]_x /\\ WF_x(Next)\nP == (x = 1) ~> (x = 0)",
                      "SPECIFICATION Spec\nPROPERTY P\n")
    res = run([str(spec), "--itf", str(tmp_path / "t.itf.json"), "--json", str(tmp_path / "r.json")])
    assert res.return_value == 13, res.output
    assert "Error: Temporal properties were violated." in res.output
    assert "Back to state 2." in res.output and "State 3:" in res.output and "State 4:" not in res.output
    assert json.loads((tmp_path / "t.itf.json").read_text())["loop"] == 1
    assert json.loads((tmp_path / "r.json").read_text())["result"] == "liveness"
