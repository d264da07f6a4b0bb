"""``kvexact formulas`` lists the registry and follows the exit-code contract."""

import json

from click.testing import CliRunner

from kvexact.cli import cli
from kvexact.reference.formulas_all import load_all


def test_lists_every_formula():
    result = CliRunner().invoke(cli, ["formulas"], standalone_mode=False)
    assert result.exception is None and result.return_value == 0
    assert f"{len(load_all())} formulas" in result.output
    assert "addr.byte_address" in result.output and "0x03E" in result.output


def test_json_and_section_filter():
    result = CliRunner().invoke(cli, ["formulas", "--json", "--section", "0x0BJ"], standalone_mode=False)
    rows = json.loads(result.output)
    assert {r["id"] for r in rows} == {"vmm.page_group_tokens", "vmm.page_groups", "vmm.page_group_waste_bytes",
                                       "vmm.tensor_row_bytes"}
    assert all(r["units"] and r["convention"] and r["stated_in"] for r in rows)


def test_counts_against_the_seed_and_catalog():
    out = CliRunner().invoke(cli, ["formulas"], standalone_mode=False).output
    assert "109 from 101 of the seed's 111 display equations, 10 from its prose" in out and "states 78" in out
    cat = CliRunner().invoke(cli, ["formulas", "--catalog", "--section", "0x05A"], standalone_mode=False).output
    assert "-> cow.amplification" in cat and "0x04" not in cat


def test_unknown_section_is_a_usage_error():
    import click
    import pytest

    with pytest.raises(click.UsageError):
        CliRunner().invoke(cli, ["formulas", "--section", "0xZZ"], standalone_mode=False, catch_exceptions=False)
