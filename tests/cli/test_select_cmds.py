"""`vaultctx select` and `vaultctx open`, as a user runs them."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from select_helpers import NOTES
from vaultctx.cli import cli


@pytest.fixture
def vault(make_vault):
    return make_vault(NOTES)


def test_cli_select_json_contract(vault):
    runner = CliRunner()
    assert runner.invoke(cli, ["index", str(vault), "--no-embed"]).exit_code == 0
    result = runner.invoke(cli, ["select", "queen hives", "-V", str(vault), "--json", "-k", "3"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data) == {"query", "candidates", "diagnostics"}
    candidate = data["candidates"][0]
    assert {"id", "kind", "path", "heading", "text", "score", "sources"} <= set(candidate)
    assert candidate["kind"] == "block"
    assert {"rank", "score"} == set(next(iter(candidate["sources"].values())))
    for key in ("select_ms", "lexical_ms", "lexical_hits", "store_size", "retrieval_path"):
        assert key in data["diagnostics"]


def test_cli_select_table_explain_and_filters(vault):
    runner = CliRunner()
    runner.invoke(cli, ["index", str(vault), "--no-embed"])
    result = runner.invoke(
        cli, ["select", "hives", "-V", str(vault), "--explain", "--tag", "bees", "--no-vectors"]
    )
    assert result.exit_code == 0, result.output
    assert "FTS query" in result.output and "Journal/2025" in result.output


def test_cli_select_empty_query_is_one_line_error(vault):
    runner = CliRunner()
    runner.invoke(cli, ["index", str(vault), "--no-embed"])
    result = runner.invoke(cli, ["select", "  ", "-V", str(vault)])
    assert result.exit_code != 0
    assert "empty" in result.output and "Traceback" not in result.output


def test_cli_open_records_an_access_that_seeds_the_graph(vault):
    runner = CliRunner()
    runner.invoke(cli, ["index", str(vault), "--no-embed"])
    opened = runner.invoke(cli, ["open", "Draft", "-V", str(vault), "--json"])
    assert json.loads(opened.output)["path"] == "Work/Draft.md"
    result = runner.invoke(
        cli, ["select", "newsletter", "-V", str(vault), "--json", "--no-vectors", "--explain"]
    )
    context = json.loads(result.output)["explain"]["graph"]["context"]
    assert [c["path"] for c in context] == ["Work/Draft.md"]
