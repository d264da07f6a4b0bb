"""Progress, Ctrl-C, the checker-corpus gate check and `kvexact bench checker`, on a one-model corpus."""

from __future__ import annotations

import json

import click
from click.testing import CliRunner
from tla_snippets import NOLOCK, write_spec

from kvexact.gate.framework import GateContext, Verdict
from kvexact.spec.checker import check_model, engine
from kvexact.spec.checker.result import Outcome


def test_progress_and_ctrl_c_stop_cleanly_with_statistics(tmp_path, monkeypatch):
    """x counts up forever; the progress callback sees the counts, then Ctrl-C stops the run."""
    monkeypatch.setattr(engine, "PROGRESS_EVERY_S", 0.0)
    spec = write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == x' = x + 1", NOLOCK)
    seen = []

    def progress(info):
        seen.append(info)
        if len(seen) == 3:
            raise KeyboardInterrupt

    r = check_model(spec, progress=progress)
    assert {"generated", "distinct", "queue", "states_per_s"} <= set(seen[0])
    assert r.outcome is Outcome.SUCCESS and not r.complete
    assert any("Ctrl-C" in m for m in r.messages) and r.distinct_states >= 3


def fake_corpus(tmp_path, distinct):
    """One model (x toggles 0/1: 3 generated, 2 distinct) with the counts TLC is said to report."""
    folder = tmp_path / "corpus" / "Toggle"
    folder.mkdir(parents=True)
    write_spec(folder, "VARIABLE x\nInit == x = 0\nNext == x' = 1 - x", "INIT Init\nNEXT Next\n", name="Toggle")
    manifest = {"models": [{"id": "Toggle", "spec": "Toggle.tla", "cfg": "Toggle.cfg", "result": "success",
                            "distinctStates": distinct, "totalStates": 3, "stateDepth": 2}]}
    (tmp_path / "corpus" / "corpus.json").write_text(json.dumps(manifest))
    return tmp_path / "corpus"


def test_gate_check_passes_and_fails(tmp_path, monkeypatch):
    from kvexact.gate.corpus_check import CHECKS
    check = CHECKS[0]
    assert check.name == "checker-corpus" and check.level == "deep"
    monkeypatch.setenv("KVEXACT_TLA_CORPUS", str(fake_corpus(tmp_path / "a", 2)))
    res = check.run(GateContext())
    assert res.verdict is Verdict.PASSED and res.figures["matching"] == 1
    monkeypatch.setenv("KVEXACT_TLA_CORPUS", str(fake_corpus(tmp_path / "b", 5)))
    res = check.run(GateContext())
    assert res.verdict is Verdict.FAILED and "distinct 2 vs TLC 5" in res.detail


def test_bench_checker_reports_rates(tmp_path, monkeypatch):
    from kvexact.cli.bench import bench_checker
    monkeypatch.setenv("KVEXACT_TLA_CORPUS", str(fake_corpus(tmp_path, 2)))
    out = tmp_path / "bench.json"
    table = tmp_path / "table.md"
    res = CliRunner().invoke(bench_checker, ["--json", str(out), "--table", str(table)], standalone_mode=False)
    assert res.return_value == 0, res.output
    assert "| Toggle |  | match |" in res.output and "Totals: 1 models; 1 match TLC" in res.output
    assert table.read_text().startswith("| model | PROPERTY | verdict vs TLC |")
    d = json.loads(out.read_text())
    assert d["models"][0]["distinct"] == 2 and d["models"][0]["generated_per_cpu_s"] > 0
    assert d["totals"]["match"] == 1


def _one_model_corpus(tmp_path, body: str, cfg: str, **expected):
    from kvexact.spec.checker.corpus import load_manifest
    folder = tmp_path / "c" / "M"
    folder.mkdir(parents=True)
    write_spec(folder, body, cfg, name="M")
    m = {"id": "M", "spec": "M.tla", "cfg": "M.cfg", "stateDepth": None, **expected}
    (tmp_path / "c" / "corpus.json").write_text(json.dumps({"models": [m]}))
    return tmp_path / "c", load_manifest(tmp_path / "c")[0]


def test_corpus_verdicts_by_name(tmp_path, monkeypatch):
    """A model stopped at the CPU limit, one with other counts than TLC's, one whose child dies: each has
    its own verdict, and none is a match."""
    import os
    import signal

    from kvexact.spec.checker import corpus
    from kvexact.spec.checker.corpus import Verdict as CV
    counter = "VARIABLE x\nInit == x = 0\nNext == x' = x + 1"
    root, m = _one_model_corpus(tmp_path / "a", counter, NOLOCK, result="success", distinctStates=None)
    # the real limit: the counter never ends, so only the CPU limit can stop it (whether it came during
    # the load or the search depends on the machine, so only the verdict is asserted here)
    row = corpus.run_model(root, m, lib=[], cpu_limit_s=1)
    assert row.verdict is CV.OVER_CPU_LIMIT and not row.ok and "1 CPU-seconds" in row.why
    # the counts when the limit comes: the child signals itself once 1,000 states are generated, a point
    # fixed by the search, not by the machine's speed (a busy CI worker once spent a whole 1-second
    # budget before the search began)
    real_check = corpus.check_model

    def limit_at_1000_states(*args, **kwargs):
        def progress(p):
            if p["generated"] >= 1000:
                os.kill(os.getpid(), signal.SIGXCPU)
        return real_check(*args, progress=progress, **kwargs)

    monkeypatch.setattr(corpus, "check_model", limit_at_1000_states)
    monkeypatch.setattr(engine, "PROGRESS_EVERY_S", 0.0)
    row = corpus.run_model(root, m, lib=[], cpu_limit_s=600)
    monkeypatch.undo()
    assert row.verdict is CV.OVER_CPU_LIMIT and not row.ok and "600 CPU-seconds" in row.why
    assert 1000 <= row.result.generated_states < 2000 and not row.result.complete  # the counts kept
    toggle = "VARIABLE x\nInit == x = 0\nNext == x' = 1 - x"
    root, m = _one_model_corpus(tmp_path / "c", toggle, NOLOCK, result="success", distinctStates=2, totalStates=4)
    row = corpus.run_model(root, m, lib=[], isolate=False)
    assert row.verdict is CV.MISMATCH and "generated 3 vs TLC 4" in row.why
    monkeypatch.setattr(corpus, "_child", lambda *a: os._exit(7))
    row = corpus.run_model(root, m, lib=[], cpu_limit_s=5)
    assert row.verdict is CV.CRASHED and "code 7" in row.why


def test_bench_checker_results_file_resumes(tmp_path, monkeypatch):
    """A model already in the results file is not run again; its row still makes the table."""
    from kvexact.cli.bench import bench_checker
    from kvexact.spec.checker import corpus
    monkeypatch.setenv("KVEXACT_TLA_CORPUS", str(fake_corpus(tmp_path, 2)))
    results = tmp_path / "rows.jsonl"
    args = ["--results", str(results), "--cpu-limit", "30"]
    res = CliRunner().invoke(bench_checker, args, standalone_mode=False)
    assert res.return_value == 0, res.output
    assert [json.loads(x)["id"] for x in results.read_text().splitlines()] == ["Toggle"]
    calls = []
    monkeypatch.setattr(corpus, "run_model", lambda *a, **k: calls.append(a))
    results.write_text(results.read_text() + '{"id": "torn')  # an interrupted write leaves half a line
    res = CliRunner().invoke(bench_checker, args, standalone_mode=False)
    assert res.return_value == 0 and calls == [], res.output
    assert "| Toggle |  | match | 2 | 3 |" in res.output and "1 models already in" in res.output
    res = CliRunner().invoke(bench_checker, ["--no-run"], standalone_mode=False)
    assert isinstance(res.exception, click.UsageError) and "--results" in res.exception.message
    results.write_text("")
    res = CliRunner().invoke(bench_checker, ["--results", str(results), "--no-run"], standalone_mode=False)
    assert res.return_value == 1 and calls == [] and "Not run yet (1): Toggle." in res.output
