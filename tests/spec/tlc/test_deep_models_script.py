"""scripts/deep_models.py records TLC's figures, and a stopped run as stopped (never as a result)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "deep_models.py"


def load():
    spec = importlib.util.spec_from_file_location("deep_models", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_finished_run_is_recorded_with_tlcs_counts(tlc_output):
    row = load().record_from_log("M", tlc_output["success"], 0)
    assert (row["result"], row["exhaustive"]) == ("success", True)
    assert (row["distinct_states"], row["generated_states"], row["depth"]) == (45_678, 1_234_567, 12)


def test_a_stopped_run_is_recorded_as_stopped_with_its_last_progress(tlc_output):
    progress_only = tlc_output["success"].split("@!@!@STARTMSG 2199")[0]
    row = load().record_from_log("M", progress_only, 143, 60.0)
    assert (row["result"], row["exhaustive"], row["wall_s"]) == ("stopped", False, 60.0)
    assert (row["distinct_states"], row["generated_states"], row["depth_reached"]) == (45_678, 1_234_567, 12)


def test_cpu_time_and_peak_memory_come_from_the_time_file():
    module = load()
    text = "Command exited with non-zero status 124\n57.33 5.07 288.78 2508932\n"
    assert module.cpu_from_time_file(text) == {"cpu_s": 62.4, "peak_rss_mib": 2450}
    assert module.cpu_from_time_file("Command terminated by signal 9\n") == {}
    assert module.cpu_from_time_file("") == {}


def test_from_logs_adds_the_cpu_time_to_the_row(tlc_output, tmp_path):
    (tmp_path / "M.log").write_text(tlc_output["success"])
    (tmp_path / "M.rc").write_text("0 12.5\n")
    (tmp_path / "M.time").write_text("10.0 0.5 12.5 1048576\n")
    out = tmp_path / "out.json"
    load().main(["--only", "M", "--from-logs", str(tmp_path), "--out", str(out)])
    row = json.loads(out.read_text())["models"][0]
    assert (row["distinct_states"], row["cpu_s"], row["peak_rss_mib"]) == (45_678, 10.5, 1024)


def test_every_deep_model_names_a_shipped_spec_module():
    """A page-size model (``RadixIndex.page2.deep.cfg``) checks ``RadixIndex.tla``, not a module of its own."""
    from kvexact.spec import spec_dir

    script = load()
    names = script.deep_models()
    assert {"RadixIndex.page2", "RadixIndex.page3"} <= set(names)
    assert all((spec_dir() / f"{script.module_of(n)}.tla").is_file() for n in names)
