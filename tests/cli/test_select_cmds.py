"""`vaultctx select` and `vaultctx open`, as a user runs them."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from select_helpers import NOTES
from server_helpers import call, config_dir_fixture, workspace_fixture  # noqa: F401
from vaultctx.cli import cli
from vaultctx.server.run import LocalServer


@pytest.fixture
def vault(make_vault):
    return make_vault(NOTES)


def test_cli_select_json_contract(vault):
    runner = CliRunner()
    assert runner.invoke(cli, ["index", str(vault), "--no-embed"]).exit_code == 0
    result = runner.invoke(cli, ["select", "queen hives", "-V", str(vault), "--json", "-k", "3"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data) == {
        "query", "confidence", "no_good_match", "verdict", "candidates", "diagnostics"
    }  # fmt: skip
    candidate = data["candidates"][0]
    assert {"id", "kind", "path", "heading", "text", "score", "sources", "confidence"} <= set(
        candidate
    )
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


def test_cli_focus_shows_the_open_note_and_clear_forgets_it(vault):
    runner = CliRunner()
    runner.invoke(cli, ["index", str(vault), "--no-embed"])
    runner.invoke(cli, ["touch", "Draft", "-V", str(vault)])
    shown = json.loads(runner.invoke(cli, ["focus", "-V", str(vault), "--json"]).output)
    opened = [n for n in shown["notes"] if n["how"] == "opened"]
    assert [n["path"] for n in opened] == ["Work/Draft.md"]
    assert opened[0]["weight"] >= 1.0  # opened just now (and written just now: edited, too)
    assert shown["half_life_hours"] == 24.0
    human = runner.invoke(cli, ["select", "newsletter", "-V", str(vault), "--no-vectors"])
    assert "focus: Work/Draft.md (" in human.output
    cleared = runner.invoke(cli, ["focus", "--clear", "-V", str(vault), "--json"])
    assert cleared.exit_code == 0, cleared.output
    assert json.loads(cleared.output)["cleared"] == 1
    assert json.loads(cleared.output)["notes"] == []  # every note was written at once
    again = runner.invoke(cli, ["select", "newsletter", "-V", str(vault), "--no-vectors", "--json"])
    assert "focus" not in json.loads(again.output)["diagnostics"]


def test_cli_touch_clear_is_focus_clear_and_takes_no_note(vault):
    runner = CliRunner()
    runner.invoke(cli, ["index", str(vault), "--no-embed"])
    runner.invoke(cli, ["touch", "Draft", "-V", str(vault)])
    result = runner.invoke(cli, ["touch", "--clear", "-V", str(vault)])
    assert result.exit_code == 0, result.output
    assert "forgot 1 opened note" in result.output
    both = runner.invoke(cli, ["touch", "Draft", "--clear", "-V", str(vault)])
    neither = runner.invoke(cli, ["touch", "-V", str(vault)])
    for wrong in (both, neither):
        assert wrong.exit_code != 0
        assert "--clear without one" in wrong.output and "Traceback" not in wrong.output


DATE_BOUNDS = [
    (("--since", "0001-01-01"), True),
    (("--until", "9999-12-31T23:59:59"), True),
    (("--since", "9999-12-31"), False),
    (("--until", "0001-01-01"), False),
]


def _select_paths(vault, *bounds: str) -> set[str]:
    result = CliRunner().invoke(
        cli, ["select", "varroa mites", "--no-vectors", "-V", str(vault), "--json", *bounds]
    )
    assert result.exit_code == 0, result.output
    return {c["path"] for c in json.loads(result.output)["candidates"]}


@pytest.mark.parametrize(("bounds", "finds"), DATE_BOUNDS)
def test_cli_select_takes_any_date_from_year_1_to_9999(workspace, bounds, finds) -> None:
    """Year 1 and year 9999 are dates: before every note, or after every note."""
    assert bool(_select_paths(workspace.root, *bounds)) is finds
    with LocalServer(workspace, watch=False, warm=False) as server:  # the same over HTTP
        served = _select_paths(workspace.root, *bounds)
        status, _, body = call(
            server,
            "POST",
            "/select",
            {"query": "varroa mites", "no_vectors": True, bounds[0][2:]: bounds[1]},
        )
    assert bool(served) is finds
    assert status == 200 and {c["path"] for c in body["candidates"]} == served


def test_an_impossible_date_is_a_one_line_error_and_a_422(workspace) -> None:
    result = CliRunner().invoke(
        cli, ["select", "varroa", "-V", str(workspace.root), "--since", "2025-02-30"]
    )
    assert result.exit_code == 2 and "Traceback" not in result.output
    with LocalServer(workspace, watch=False, warm=False) as server:
        for since in ("2025-02-30", "10000-01-01", "yesterday"):
            status, _, body = call(server, "POST", "/select", {"query": "varroa", "since": since})
            assert status == 422 and body["error"], (since, body)
