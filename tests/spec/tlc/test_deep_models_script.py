"""scripts/deep_models.py records TLC's figures, and a stopped run as stopped (never as a result)."""

from __future__ import annotations

import importlib.util
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


def test_every_deep_model_names_a_shipped_spec_module():
    """A page-size model (``RadixIndex.page2.deep.cfg``) checks ``RadixIndex.tla``, not a module of its own."""
    from kvexact.spec import spec_dir

    script = load()
    names = script.deep_models()
    assert {"RadixIndex.page2", "RadixIndex.page3"} <= set(names)
    assert all((spec_dir() / f"{script.module_of(n)}.tla").is_file() for n in names)
