"""`kvexact bench reference` at small sizes: exit 0, and the work per operation does not depend on the pool."""

from __future__ import annotations

import json

from click.testing import CliRunner

from kvexact.cli.bench import bench_reference
from kvexact.reference.bench import OPERATIONS, measure


def test_cells_per_operation_do_not_grow():
    small, large = measure(256, 40, repeat=1), measure(4096, 40, repeat=1)
    for op in OPERATIONS:
        assert small[f"cells/{op}"] == large[f"cells/{op}"], op
    assert small["cells/allocate"] > 0 and small["cells/prefix_lookup"] == 0  # lookup is read-only


def test_command_json_and_exit_code():
    result = CliRunner().invoke(bench_reference, ["--sizes", "256,1024", "--ops", "40", "--repeat", "1",
                                                  "--max-slowdown", "50", "--json"], standalone_mode=False)
    assert result.exception is None, result.output
    assert result.return_value == 0
    data = json.loads(result.output)
    assert set(data["ops_per_second"]) == {"256", "1024"}


def test_usage_errors():
    result = CliRunner().invoke(bench_reference, ["--sizes", "abc"])
    assert result.exit_code == 2
    result = CliRunner().invoke(bench_reference, ["--sizes", "64", "--ops", "100"])
    assert result.exit_code == 2
