"""The command line as people meet it: `search`, suggestions for a misspelt command or note
(never a note the reader may not see), every answer said in words, and output that fits
where it goes — a pipe, or a terminal of 80 columns."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from vaultctx import Workspace
from vaultctx.cli import cli


def run(*args: str, **env: str) -> click.testing.Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env=env or None)


@pytest.fixture
def indexed(example_vault: Path) -> Path:
    assert run("index", str(example_vault), "--no-embed").exit_code == 0
    return example_vault


def candidates(result: click.testing.Result) -> list[tuple[str, str, str]]:
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)["candidates"]
    return [(c["path"], c["heading_path"], c["text"]) for c in found]


# --- search ---------------------------------------------------------------------------------


def test_search_is_select_by_another_name(indexed: Path) -> None:
    args = ["varroa mites", "-V", str(indexed), "--no-vectors", "--json", "-k", "5"]
    assert candidates(run("search", *args)) == candidates(run("select", *args))
    ctx = click.Context(cli)
    search, select = cli.get_command(ctx, "search"), cli.get_command(ctx, "select")
    assert search is not None and select is not None
    assert search.callback is select.callback and search.params == select.params


def test_a_misspelt_command_names_the_closest_one() -> None:
    result = run("serch", "queen")
    assert result.exit_code == 2
    assert "No such command 'serch'. Did you mean 'search'?" in result.output


# --- notes by name ------------------------------------------------------------------------


def test_a_misspelt_note_names_the_notes_closest_to_it(indexed: Path) -> None:
    for command in ("open", "touch", "related"):
        result = run(command, "Queen Recrds", "-V", str(indexed))
        assert result.exit_code != 0
        assert result.stderr.strip() == (
            f"Error: no note named 'Queen Recrds' in {indexed.name}; did you mean 'Queen Records'?"
        )


DENY_PRIVATE = '[[rules]]\ncapability = "vault.read"\npaths = ["Private/**"]\neffect = "deny"\n'


def test_a_note_the_reader_may_not_read_is_never_suggested(make_vault) -> None:
    vault = make_vault(
        {
            ".vaultctx/permissions.toml": DENY_PRIVATE,
            "Private/Strongroom Ledger.md": "# Strongroom Ledger\n\nThe safe code.\n",
            "Orchard Ledger.md": "# Orchard Ledger\n\nApples picked in September.\n",
        }
    )
    assert run("index", str(vault), "--no-embed").exit_code == 0
    for command in ("open", "touch", "related"):
        hidden = run(command, "Strongroom Ledgr", "-V", str(vault))
        assert hidden.exit_code != 0 and "Strongroom" not in hidden.stderr.replace(
            "'Strongroom Ledgr'", ""
        ), hidden.stderr
        public = run(command, "Orchard Ledgr", "-V", str(vault))
        assert "did you mean 'Orchard Ledger'?" in public.stderr


def test_open_before_indexing_says_the_vault_is_not_indexed(make_vault) -> None:
    vault = make_vault({"index.md": "# Index\n\nWhere everything starts.\n"})
    before = run("open", "index", "-V", str(vault))
    assert before.exit_code != 0
    assert "has not been indexed yet: run `vaultctx index`" in before.stderr
    Workspace.open(vault).close()  # an empty index, as a vault never indexed may hold
    empty = run("open", "index", "-V", str(vault))
    assert "has not been indexed yet: run `vaultctx index`" in empty.stderr
    assert "no note named" not in before.stderr + empty.stderr


# --- answers said in words ------------------------------------------------------------------


def test_indexing_a_folder_without_notes_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run("index", str(empty), "--no-embed")
    assert result.exit_code == 0
    assert result.stdout.startswith(f"No notes found in {empty}:")
    assert "Indexed 0 notes" not in result.stdout


def test_a_search_that_finds_nothing_says_so_instead_of_an_empty_table(indexed: Path) -> None:
    result = run("search", "zzyzx qwertyuiop", "-V", str(indexed), "--no-vectors")
    assert result.exit_code == 0
    assert result.stdout.startswith("No results for 'zzyzx qwertyuiop'.")
    assert "┏" not in result.stdout and "snippet" not in result.stdout


def test_a_search_its_filters_empty_names_each_filter_no_note_matches_and_its_closest(
    indexed: Path,
) -> None:
    args = ["varroa", "-V", str(indexed), "--no-vectors", "--tag", "bees", "--path", "Jornal"]
    shown = run("search", *args)
    assert shown.exit_code == 0
    assert shown.stdout.splitlines()[:3] == [
        "No results for 'varroa'. The filters left no note to search:",
        "  no note has the tag 'bees'; did you mean 'queens'?",
        "  no note is at or under 'Jornal'; did you mean 'Journal'?",
    ]
    report = json.loads(run("search", *args, "--json").stdout)["diagnostics"]["filters"]
    assert report == {
        "notes_left": 0,
        "unmatched": [
            {"filter": "tag", "value": "bees", "closest": ["queens"]},
            {"filter": "path", "value": "Jornal", "closest": ["Journal"]},
        ],
    }
    field = run("search", "varroa", "-V", str(indexed), "--field", "status=actve")
    assert "no note has the field 'status=actve'; did you mean 'status=active'" in field.stdout
    apart = run("search", "varroa", "-V", str(indexed), "--tag", "pests", "--path", "Forage")
    assert "no note matches all of them at once." in apart.stdout
    none_args = ["zzyzx", "-V", str(indexed), "--no-vectors", "--tag", "pests"]
    left = json.loads(run("search", *none_args, "--json").stdout)["diagnostics"]["filters"]
    assert left["notes_left"] > 1 and left["unmatched"] == []
    said = f"The filters left {left['notes_left']} notes, none of which matches."
    assert said in run("search", *none_args).stdout


def test_a_filter_never_suggests_a_tag_or_folder_the_reader_may_not_see(make_vault) -> None:
    vault = make_vault(
        {
            ".vaultctx/permissions.toml": DENY_PRIVATE,
            "Private/Strongroom.md": "# Strongroom\n\nThe safe code. #strongbox\n",
            "Orchard.md": "# Orchard\n\nApples picked in September. #strongbow\n",
        }
    )
    assert run("index", str(vault), "--no-embed").exit_code == 0
    shown = run("search", "apples", "-V", str(vault), "--tag", "strongbo", "--path", "Privat")
    assert "did you mean 'strongbow'?" in shown.stdout
    assert "strongbox" not in shown.stdout and "'Private'" not in shown.stdout, shown.stdout


def test_related_is_titled_by_the_note_it_is_related_to(indexed: Path) -> None:
    result = run("related", "Queen Records", "-V", str(indexed), "--no-vectors", "-k", "3")
    assert result.exit_code == 0, result.output
    title = result.stdout.splitlines()[0].rstrip()
    assert title.split(" · ")[0] == "related to Hives/Queen Records.md"
    assert "select:" not in result.stdout


def test_related_says_its_note_seeds_the_graph_for_that_answer_alone(indexed: Path) -> None:
    args = ["Varroa Mites", "-V", str(indexed), "--no-vectors", "-k", "5"]
    shown = run("related", *args)
    assert shown.exit_code == 0, shown.output
    [said] = [line for line in shown.stdout.splitlines() if "Varroa Mites.md, the note" in line]
    assert said.startswith(
        "graph seeded by Pests and Diseases/Varroa Mites.md, the note asked about"
        " (this answer only) · lifted "
    )
    assert "focus --clear" not in shown.stdout
    stored = json.loads(run("focus", "-V", str(indexed), "--json").stdout)
    assert stored["notes"] == []
    focus = json.loads(run("related", *args, "--json").stdout)["diagnostics"]["focus"]
    assert focus["notes"] == [
        {"path": "Pests and Diseases/Varroa Mites.md", "weight": 1.0, "asked": True}
    ]
    touched = run("related", *args, "--touch")
    assert "graph seeded by Pests and Diseases/Varroa Mites.md" in touched.stdout
    stored = json.loads(run("focus", "-V", str(indexed), "--json").stdout)
    assert [note["path"] for note in stored["notes"]] == ["Pests and Diseases/Varroa Mites.md"]
    after = run("search", "mite treatment", "-V", str(indexed), "--no-vectors")
    assert "focus: Pests and Diseases/Varroa Mites.md (1)" in after.stdout
    assert "`vaultctx focus --clear` forgets it" in after.stdout


def test_index_and_status_report_one_index_size(indexed: Path) -> None:
    report = json.loads(run("index", str(indexed), "--no-embed", "--json").stdout)
    status = json.loads(run("status", str(indexed), "--json").stdout)
    assert report["status"]["index_bytes"] == status["index_bytes"] > 0
    said_by_index = run("index", str(indexed), "--no-embed").stdout.rsplit("·", 1)[1].strip()
    said_by_status = re.search(r"index size\s+(.+?)\s*$", run("status", str(indexed)).stdout, re.M)
    assert said_by_status is not None and said_by_index == said_by_status[1]


# --- output that fits -------------------------------------------------------------------------

TABLE_NOTE = """# Swarm log

| Date | Hive | What |
|------|:----:|------|
| 2025-05-03 | [[Hive 1 - Clover\\|Clover]] | **queen cells** on three frames |
| 2025-05-17 | [[Hive 2 - Bramble]] | the _prime swarm_ left, see [notes](https://example.org) |
"""


def table_cells(output: str, column: int) -> list[str]:
    """The text of one column of a result table, line by line."""
    return [line.split("│")[column].strip() for line in output.splitlines() if line.count("│") > 4]


def test_a_snippet_reads_as_text_and_the_json_keeps_the_markdown(make_vault) -> None:
    vault = make_vault({"Swarm Log.md": TABLE_NOTE})
    assert run("index", str(vault), "--no-embed").exit_code == 0
    shown = run("search", "swarm frames", "-V", str(vault), "--no-vectors")
    assert shown.exit_code == 0, shown.output
    [snippet] = table_cells(shown.stdout, 4)
    assert snippet.endswith(
        "· What; 2025-05-03 · Clover · queen cells on three frames;"
        " 2025-05-17 · Hive 2 - Bramble · the prime swarm left, see notes"
    )
    assert not [mark for mark in ("|", "*", "_", "[", "](", "--") if mark in snippet]
    as_json = run("search", "swarm frames", "-V", str(vault), "--no-vectors", "--json")
    [(_, _, text)] = candidates(as_json)
    assert "| [[Hive 1 - Clover\\|Clover]] | **queen cells** on three frames |" in text


def test_piped_output_is_not_cut_into_lines_of_80_columns(indexed: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run(
        [sys.executable, "-m", "vaultctx", "index", str(indexed), "--no-embed"],
        capture_output=True, text=True, timeout=120, env=env, check=True,
    )  # fmt: skip
    summary = [line for line in done.stdout.splitlines() if line.startswith("Indexed")]
    assert len(summary) == 1 and summary[0].endswith("embedded."), done.stdout
    found = subprocess.run(
        [sys.executable, "-m", "vaultctx", "search", "varroa mites treatment", "-V",
         str(indexed), "--no-vectors", "-k", "5"],
        capture_output=True, text=True, timeout=120, env=env, check=True,
    )  # fmt: skip
    rows = [line for line in found.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 5, found.stdout  # one line per result: nothing wrapped
    assert max(map(len, found.stdout.splitlines())) > 80


def test_piped_output_ends_each_line_at_its_last_character(indexed: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    for command in (["search", "varroa", "-k", "3", "--no-vectors"], ["status"], ["focus"]):
        done = subprocess.run(
            [sys.executable, "-m", "vaultctx", *command, "-V", str(indexed)],
            capture_output=True, text=True, timeout=120, env=env, check=True,
        )  # fmt: skip
        lines = done.stdout.splitlines()
        assert lines and [line for line in lines if line != line.rstrip()] == [], command


def test_at_80_columns_the_result_table_breaks_paths_only_between_words(indexed: Path) -> None:
    args = ["varroa mites treatment", "-V", str(indexed), "--no-vectors", "-k", "6"]
    paths = [path for path, _, _ in candidates(run("search", *args, "--json"))]
    assert any(len(path) > 30 for path in paths)
    shown = run("search", *args, COLUMNS="80")
    assert shown.exit_code == 0
    lines = shown.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    note_lines = table_cells(shown.stdout, 2)
    for path in paths:
        for piece in re.split(r"(?<=/)| ", path):
            assert any(piece in line for line in note_lines), (piece, note_lines)
