"""`kvexact check` and TLC: one jar resolution, --engine auto, --engine both when an engine fails,
TLC's simulation and distributed modes. Tests that run real TLC take the ``tlc_jar`` fixture."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

import kvexact.spec.tlc as tlc
from kvexact.cli import check as check_cmd
from kvexact.spec.checker.result import ModelCheckResult, Outcome, Violation
from kvexact.spec.tlc import TlcUnavailable, choose_engine, find_jar

COUNTER = ("---- MODULE Counter ----\nEXTENDS Naturals\nVARIABLES x, y\n"
           "Init == x = 0 /\\ y = 0\n"
           "Next == \\/ x < 6 /\\ x' = x + 1 /\\ UNCHANGED y\n"
           "        \\/ y < 5 /\\ y' = y + 1 /\\ UNCHANGED x\n"
           "        \\/ x = 6 /\\ y = 5 /\\ x' = 0 /\\ y' = 0\n"
           "Safe == x + y <= 11\nUnsafe == x + y # 9\n====\n")


def model(tmp_path: Path, invariant: str = "Safe", text: str = COUNTER) -> Path:
    spec = tmp_path / "Counter.tla"
    spec.write_text(text)
    (tmp_path / "Counter.cfg").write_text(f"INIT Init\nNEXT Next\nINVARIANT {invariant}\n")
    return spec


def run(args, env=None):
    return CliRunner().invoke(check_cmd.check, args, standalone_mode=False, env=env)


# ------------------------------------------------------------------------------- jar resolution

@pytest.fixture
def no_ci_copy(monkeypatch, tmp_path):
    monkeypatch.delenv("TLA2TOOLS_JAR", raising=False)
    monkeypatch.setattr(tlc, "beside_clone_candidates", lambda: [tmp_path / "none" / "tla2tools.jar"])


def test_jar_order_is_option_then_variable_then_the_copy_beside_the_clone(monkeypatch, tmp_path, no_ci_copy):
    option, variable, beside = (tmp_path / f"{n}.jar" for n in ("option", "variable", "beside"))
    for jar in (option, variable, beside):
        jar.write_bytes(b"PK")
    monkeypatch.setattr(tlc, "beside_clone_candidates", lambda: [beside])
    assert find_jar(None) == tlc.JarChoice(str(beside), "the copy beside the clone")
    monkeypatch.setenv("TLA2TOOLS_JAR", str(variable))
    assert find_jar(None) == tlc.JarChoice(str(variable), "TLA2TOOLS_JAR")
    assert find_jar(option) == tlc.JarChoice(str(option), "--tlc-jar")


def test_a_named_jar_that_is_missing_is_an_error_not_a_fallback(monkeypatch, tmp_path, no_ci_copy):
    beside = tmp_path / "beside.jar"
    beside.write_bytes(b"PK")
    monkeypatch.setattr(tlc, "beside_clone_candidates", lambda: [beside])
    monkeypatch.setenv("TLA2TOOLS_JAR", str(tmp_path / "gone.jar"))
    with pytest.raises(TlcUnavailable, match="gone.jar.*TLA2TOOLS_JAR"):
        find_jar(None)


def test_the_ci_copy_is_looked_for_beside_the_clone_and_beside_the_working_directory(monkeypatch, tmp_path):
    clone = tmp_path / "clone"
    clone.mkdir()
    monkeypatch.chdir(clone)
    candidates = tlc.beside_clone_candidates()
    assert tmp_path / "shared" / "tlc" / "tla2tools.jar" in candidates
    from kvexact.spec import spec_dir
    assert spec_dir().resolve().parent.parent / "shared" / "tlc" / "tla2tools.jar" in candidates


def test_no_jar_anywhere_names_every_place(no_ci_copy):
    with pytest.raises(TlcUnavailable, match="--tlc-jar.*TLA2TOOLS_JAR"):
        find_jar(None)


def test_missing_java_is_a_named_error(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TlcUnavailable, match="Java not found"):
        tlc.java_executable()


def test_auto_without_a_jar_runs_the_embedded_engine_and_says_why(tmp_path, monkeypatch, no_ci_copy):
    monkeypatch.delenv("KVEXACT_ENGINE", raising=False)
    engine, why, jar = choose_engine("auto")
    assert (engine, jar) == ("embedded", None) and "no TLC jar" in why
    out = tmp_path / "r.json"
    res = run([str(model(tmp_path)), "--json", str(out)])
    assert res.return_value == 0, res.output
    assert "Engine: embedded (auto: no TLC jar" in res.output
    doc = json.loads(out.read_text())
    assert doc["engine"] == "embedded" and doc["engine_reason"].startswith("auto: no TLC jar")


def test_auto_without_java_runs_the_embedded_engine(tmp_path, monkeypatch):
    jar = tmp_path / "tla2tools.jar"
    jar.write_bytes(b"PK")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    engine, why, _ = choose_engine("auto", str(jar))
    assert engine == "embedded" and "Java not found" in why


def test_tlc_engine_without_a_jar_could_not_run_exit_3(tmp_path, no_ci_copy):
    res = run([str(model(tmp_path)), "--engine", "tlc"])
    assert res.return_value == 3 and "TLA2TOOLS_JAR" in res.output


def test_auto_with_an_embedded_only_option_runs_the_embedded_engine(tmp_path, monkeypatch, tlc_jar):
    monkeypatch.delenv("KVEXACT_ENGINE", raising=False)
    res = run([str(model(tmp_path)), "--max-depth", "3"])
    assert "Engine: embedded (auto: --max-depth is the embedded engine's only)" in res.output


def test_auto_with_java_and_the_jar_runs_tlc_and_the_report_says_so(tmp_path, monkeypatch, tlc_jar):
    """42 distinct states: x in 0..6 and y in 0..5, every pair reachable (counted by hand)."""
    monkeypatch.delenv("KVEXACT_ENGINE", raising=False)
    out = tmp_path / "r.json"
    res = run([str(model(tmp_path)), "--json", str(out), "--workers", "2"])
    assert res.return_value == 0, res.output
    assert "Engine: tlc (auto: Java and the TLC jar" in res.output
    doc = json.loads(out.read_text())
    assert doc["engine"] == "tlc" and doc["engine_reason"].startswith("auto: Java and the TLC jar")
    assert doc["distinct_states"] == 42


def test_workers_pass_through_to_tlc(monkeypatch, tmp_path):
    seen = {}

    def fake_run_tlc(spec, cfg, jar, **kw):
        seen.update(kw)
        return ModelCheckResult(engine="tlc", outcome=Outcome.SUCCESS)

    jar = tmp_path / "t.jar"
    jar.write_bytes(b"PK")
    monkeypatch.setattr(tlc, "run_tlc", fake_run_tlc)
    assert run([str(model(tmp_path)), "--engine", "tlc", "--tlc-jar", str(jar), "--workers", "auto"]
               ).return_value == 0
    assert seen["workers"] == "auto"
    assert run([str(model(tmp_path)), "--engine", "tlc", "--tlc-jar", str(jar), "--workers", "3"]
               ).return_value == 0
    assert seen["workers"] == 3
    bad = run([str(model(tmp_path)), "--workers", "many"])
    assert "not a worker count" in str(bad.exception)


# --------------------------------------------------------------------------- --engine both, one fails

def test_both_shows_each_engines_own_error_when_tlc_cannot_parse():
    """Stand-in results: the embedded engine explored 27,505 states, TLC stopped at a parse error; the
    lines name TLC's parse error with exit 150 and never compare counts."""
    embedded = ModelCheckResult(engine="embedded", outcome=Outcome.SUCCESS, generated_states=27505,
                                distinct_states=6572)
    parse = ModelCheckResult(engine="tlc", outcome=Outcome.PARSE,
                             violation=Violation("parse", "parse", "Could not parse module Mixed"))
    rc, lines = check_cmd.judge_both(embedded, parse)
    assert rc == 150
    text = "\n".join(lines)
    assert "tlc: parse error (exit 150): Could not parse module Mixed" in text
    assert "embedded: success (exit 0), 6572 distinct states" in text
    assert "27505 vs" not in text
    rc2, lines2 = check_cmd.judge_both(attrs.evolve(parse, engine="embedded"), parse)
    assert rc2 == 150 and "both report a parse error" in "\n".join(lines2)
    assert check_cmd.judge_both(embedded, attrs.evolve(embedded, engine="tlc")) == (None, [])


def test_both_with_a_spec_tlc_rejects_exits_150_with_tlcs_error(tmp_path, tlc_jar):
    """`x % 2 + 1` mixes operators whose precedence ranges overlap: SANY rejects it (TLC exit 150)."""
    spec = model(tmp_path, text=COUNTER.replace("Safe == x + y <= 11", "Safe == x % 2 + 1 <= 2"))
    res = run([str(spec), "--engine", "both"])
    assert res.return_value == 150, res.output
    assert "tlc: parse error (exit 150)" in res.output
    assert "states generated: embedded" not in res.output


# ----------------------------------------------------------------------------- simulate, distributed

def test_tlc_simulation_finds_the_violation(tmp_path, tlc_jar):
    res = run([str(model(tmp_path, "Unsafe")), "--engine", "tlc", "--simulate", "--num", "20", "--depth", "40",
               "--seed", "3"])
    assert res.return_value == 12, res.output
    assert "Invariant Unsafe is violated" in res.output


def test_tlc_simulation_of_a_safe_model_generates_states_and_succeeds(tmp_path, tlc_jar):
    out = tmp_path / "r.json"
    res = run([str(model(tmp_path)), "--engine", "tlc", "--simulate", "--num", "5", "--depth", "20",
               "--json", str(out)])
    assert res.return_value == 0, res.output
    assert json.loads(out.read_text())["generated_states"] > 20  # five walks of up to 20 states


def test_distributed_tlc_on_localhost_counts_what_plain_tlc_counts(tmp_path, tlc_jar):
    spec = model(tmp_path)
    plain = tlc.run_tlc(spec, None, tlc_jar, timeout_s=300)
    out = tmp_path / "d.json"
    res = run([str(spec), "--engine", "tlc", "--distributed", "2", "--json", str(out)])
    assert res.return_value == 0, res.output
    doc = json.loads(out.read_text())
    assert (plain.distinct_states, doc["distinct_states"]) == (42, 42)


def test_distributed_tlc_reports_a_violation_with_tlcs_exit_code(tmp_path, tlc_jar):
    """The server prints the behaviour, not the invariant's name: exit 12 and a trace ending at x + y = 9
    (with x <= 6 and y <= 5 stepping by one, the shortest such behaviour has 10 states)."""
    out = tmp_path / "d.json"
    res = run([str(model(tmp_path, "Unsafe")), "--engine", "tlc", "--distributed", "1", "--json", str(out)])
    assert res.return_value == 12, res.output
    assert "Invariant violated (TLC's distributed server does not say which one" in res.output
    last = json.loads(out.read_text())["violation"]["trace"][-1]["values"]
    assert int(last["x"]) + int(last["y"]) == 9


def test_distributed_needs_the_tlc_engine(tmp_path):
    res = run([str(model(tmp_path)), "--engine", "embedded", "--distributed", "2"])
    assert "--distributed is TLC's distributed mode" in str(res.exception)


def test_distributed_tlc_reruns_once_after_tlcs_start_up_race_and_reports_other_failures(monkeypatch):
    """The pinned TLC's server can raise a NullPointerException when a worker finishes a tiny model before the
    server holds its states; its child then exits with 153 (it used to hang on the JVM's RMI threads) and the run
    is made once more. Any other server failure is reported, not retried."""
    from kvexact.spec import tlc_distributed as td

    calls: list[int] = []
    race = td.TlcFailed(f"the TLC server failed (exit 153): SERVER_FAILED ... {td.START_RACE}")

    def flaky(*_args):
        calls.append(1)
        if len(calls) == 1:
            raise race
        return "second run"

    monkeypatch.setattr(td, "_run_once", flaky)
    assert td.run_tlc_distributed(Path("M.tla"), Path("M.cfg"), "tla2tools.jar") == "second run"
    assert len(calls) == 2

    def broken(*_args):
        calls.append(1)
        raise td.TlcFailed("the TLC server failed (exit 153): SERVER_FAILED something else")

    calls.clear()
    monkeypatch.setattr(td, "_run_once", broken)
    with pytest.raises(td.TlcFailed, match="something else"):
        td.run_tlc_distributed(Path("M.tla"), Path("M.cfg"), "tla2tools.jar")
    assert len(calls) == 1
