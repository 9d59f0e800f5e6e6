"""`vaultctx index` and `vaultctx status`, as a user runs them."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from conftest import hash_tree
from vaultctx.cli import cli
from vaultctx.cli.index_cmds import index_progress, phases
from vaultctx.storage.db import WriterLock
from vaultctx.storage.index_reads import PROBLEM_NOTES_SHOWN

VAULTCTX = Path(sys.executable).parent / "vaultctx"
DENY_PRIVATE = '[[rules]]\ncapability = "vault.read"\npaths = ["Private/**"]\neffect = "deny"\n'

REPORT_KEYS = {
    "files",
    "added",
    "updated",
    "deleted",
    "renamed",
    "unchanged",
    "skipped",
    "warnings",
    "blocks_written",
    "links_resolved",
    "embedded",
    "embed_error",
    "elapsed_ms",
    "status",
}
STATUS_KEYS = {"notes", "blocks", "links", "dangling_links", "tags", "vectors", "model"}


def run(*args: str, **kwargs):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, **kwargs)


def assert_one_line_error(result, *, exit_code: int, contains: str) -> None:
    assert result.exit_code == exit_code
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert contains in lines[0]
    assert "Traceback" not in result.stderr


def test_index_json_reports_what_was_done_and_the_status(example_vault):
    result = run("index", str(example_vault), "--no-embed", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) >= REPORT_KEYS
    assert set(data["status"]) >= STATUS_KEYS
    assert data["added"] == data["status"]["notes"] == data["files"] > 0
    assert (data["updated"], data["deleted"], data["renamed"], data["unchanged"]) == (0, 0, 0, 0)
    assert data["skipped"] == []
    assert data["warnings"] == [
        {"path": "Forage/Ivy.md", "message": data["warnings"][0]["message"]}
    ]
    assert data["embedded"] == 0 and data["status"]["vectors"] == 0
    assert data["status"]["dangling_links"] == 4


def test_a_second_index_run_reports_everything_unchanged(example_vault):
    run("index", str(example_vault), "--no-embed", "--json")
    data = json.loads(run("index", str(example_vault), "--no-embed", "--json").stdout)
    assert data["unchanged"] == data["files"]
    assert data["added"] == data["updated"] == data["blocks_written"] == 0


def test_index_prints_a_summary_and_warnings_for_people(example_vault):
    result = run("index", str(example_vault), "--no-embed")
    assert result.exit_code == 0
    notes = json.loads(run("status", str(example_vault), "--json").stdout)["notes"]
    assert f"Indexed {notes} notes" in result.stdout
    assert "0 embedded" in result.stdout
    assert "Warning: Forage/Ivy.md: frontmatter: invalid YAML" in result.stderr


def test_index_reports_skipped_files_and_still_succeeds(make_vault):
    root = make_vault({"Good.md": "fine", "blob.md": b"\x00\x01\x02"})
    result = run("index", str(root), "--no-embed", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["skipped"] == [{"path": "blob.md", "reason": "binary file, not Markdown"}]
    result = run("index", str(root), "--no-embed")
    assert "Warning: skipped blob.md: binary file, not Markdown" in result.stderr


def test_vault_defaults_to_the_current_folder(example_vault, monkeypatch):
    monkeypatch.chdir(example_vault)
    result = run("index", "--no-embed", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["status"]["vault"] == str(example_vault.resolve())


def test_status_json_has_the_documented_keys(example_vault):
    indexed = json.loads(run("index", str(example_vault), "--no-embed", "--json").stdout)
    result = run("status", str(example_vault), "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert set(data) >= STATUS_KEYS
    assert data == indexed["status"] | {"index_bytes": data["index_bytes"]}
    assert data["notes"] == indexed["added"]
    assert data["links"] > 200 and data["dangling_links"] == 4
    assert data["tags"] > 20 and data["blocks"] > data["notes"]
    assert data["vectors"] == 0 and data["model"] is None
    assert data["last_indexed"] is not None


def test_status_for_people_is_a_table(example_vault):
    run("index", str(example_vault), "--no-embed")
    result = run("status", str(example_vault))
    assert result.exit_code == 0
    assert "dangling links" in result.stdout
    assert "notes with problems" in result.stdout


def test_status_names_each_note_with_problems_and_its_first_problem(example_vault):
    run("index", str(example_vault), "--no-embed")
    said = run("status", str(example_vault)).stdout.splitlines()
    counted = next(i for i, line in enumerate(said) if line.startswith("notes with problems"))
    assert said[counted].split() == ["notes", "with", "problems", "1"]
    assert said[counted + 1].strip() == (
        "Forage/Ivy.md: frontmatter: invalid YAML at line 3: did not find expected ',' or ']'"
    )
    data = json.loads(run("status", str(example_vault), "--json").stdout)
    assert [note["path"] for note in data["problem_notes"]] == ["Forage/Ivy.md"]


def test_status_names_the_first_notes_with_problems_the_reader_may_see(make_vault):
    broken = "---\ntags: [a\n---\nBody.\n"
    vault = make_vault(
        {
            ".vaultctx/permissions.toml": DENY_PRIVATE,
            "Private/Secret Broken.md": broken,
            **{f"Broken {n:02}.md": broken for n in range(PROBLEM_NOTES_SHOWN + 2)},
        }
    )
    run("index", str(vault), "--no-embed")
    data = json.loads(run("status", str(vault), "--json").stdout)
    assert data["notes_with_problems"] == PROBLEM_NOTES_SHOWN + 2
    named = [note["path"] for note in data["problem_notes"]]
    assert named == [f"Broken {n:02}.md" for n in range(PROBLEM_NOTES_SHOWN)]
    said = run("status", str(vault)).stdout
    assert "… and 2 more notes" in said and "Secret" not in said


def test_status_of_a_never_indexed_vault_shows_zeros(example_vault):
    data = json.loads(run("status", str(example_vault), "--json").stdout)
    assert (data["notes"], data["blocks"], data["last_indexed"]) == (0, 0, None)


def test_a_missing_vault_is_one_error_line(tmp_path):
    result = run("index", str(tmp_path / "nope"), "--no-embed")
    assert_one_line_error(result, exit_code=2, contains="vault not found")


def test_error_lines_show_paths_literally(tmp_path):
    missing = tmp_path / "[bold]draft[/bold] vault"
    result = run("index", str(missing), "--no-embed")
    assert_one_line_error(result, exit_code=2, contains=str(missing))


def test_status_of_a_missing_vault_is_one_error_line(tmp_path):
    result = run("status", str(tmp_path / "nope"), "--json")
    assert_one_line_error(result, exit_code=2, contains="vault not found")


def test_a_locked_index_is_one_error_line(example_vault):
    with WriterLock(example_vault / ".vaultctx" / "index.lock"):
        result = run("index", str(example_vault), "--no-embed")
    assert_one_line_error(result, exit_code=3, contains="another vaultctx process")


def test_a_corrupt_index_is_one_error_line(example_vault):
    (example_vault / ".vaultctx").mkdir()
    (example_vault / ".vaultctx" / "index.db").write_bytes(os.urandom(8192))
    result = run("status", str(example_vault))
    assert_one_line_error(result, exit_code=4, contains="index.db")


def test_a_broken_config_is_one_error_line(example_vault):
    (example_vault / ".vaultctx").mkdir()
    (example_vault / ".vaultctx" / "config.toml").write_text("chunk_tokens = = 3\n")
    result = run("index", str(example_vault), "--no-embed")
    assert_one_line_error(result, exit_code=6, contains="config.toml")


def test_the_cli_never_modifies_the_vault(example_vault):
    before = hash_tree(example_vault)
    run("index", str(example_vault), "--no-embed")
    run("status", str(example_vault))
    assert hash_tree(example_vault) == before


# --- the installed command -------------------------------------------------------------------


@pytest.fixture
def console_script() -> Path:
    if not VAULTCTX.exists():
        pytest.skip(f"console script not installed next to {sys.executable}")
    return VAULTCTX


def test_the_installed_command_indexes_and_reports_status(console_script, example_vault):
    done = subprocess.run(
        [console_script, "index", str(example_vault), "--no-embed", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    added = json.loads(done.stdout)["added"]
    assert added > 0
    done = subprocess.run(
        [console_script, "status", str(example_vault), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0
    assert json.loads(done.stdout)["notes"] == added


def test_the_installed_command_fails_with_one_line_and_no_traceback(console_script, tmp_path):
    done = subprocess.run(
        [console_script, "index", str(tmp_path / "missing vault")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"Error: vault not found: {tmp_path / 'missing vault'}"
    ]


@pytest.mark.slow
def test_index_with_embeddings_reports_vectors_and_model(make_vault, embedder, monkeypatch):
    # The CLI builds its own Embedder; hand it the session's loaded model instead.
    monkeypatch.setattr("vaultctx.storage.vault.Embedder", lambda name, **_: embedder)
    root = make_vault({"Clover.md": "# Clover\n\nStrong colony.\n", "Ivy.md": "Late nectar.\n"})
    data = json.loads(run("index", str(root), "--json").stdout)
    assert data["embedded"] == data["status"]["vectors"] == data["status"]["blocks"] == 2
    assert data["embed_error"] is None
    status = json.loads(run("status", str(root), "--json").stdout)
    assert (status["vectors"], status["model"]) == (2, embedder.model_id)
    again = json.loads(run("index", str(root), "--json").stdout)
    assert again["embedded"] == 0


def test_the_index_bar_shows_each_phase_rate_and_time_left():
    """Embedding takes most of a first index: the bar says how fast and how long still."""
    clock = [0.0]
    out = Console(file=io.StringIO(), force_terminal=True, width=140, color_system=None)
    bar = index_progress(out, get_time=lambda: clock[0])
    progress = phases(bar)
    progress("scan", 10, 10)  # not a phase the bar shows
    progress("embed", 0, 1000)
    for done in range(100, 600, 100):
        clock[0] += 1.0
        progress("embed", done, 1000)
    out.print(bar.get_renderable())
    line = out.file.getvalue()
    assert "Embedding blocks" in line and "500/1000" in line
    assert "100.0 blocks/s" in line
    assert "left 0:00:05" in line
    assert "Reading notes" not in line and len(bar.tasks) == 1


def test_the_index_bar_shows_a_switch_of_models_on_a_line_of_its_own():
    clock = [0.0]
    out = Console(file=io.StringIO(), force_terminal=True, width=140, color_system=None)
    bar = index_progress(out, get_time=lambda: clock[0])
    progress = phases(bar)
    progress("embed", 0, 3)
    progress("embed", 3, 3)
    progress("reembed", 0, 800)
    for done in range(200, 600, 200):
        clock[0] += 1.0
        progress("reembed", done, 800)
    out.print(bar.get_renderable())
    lines = out.file.getvalue().splitlines()
    switch = next(line for line in lines if "Embedding for the new model" in line)
    assert "400/800" in switch and "200.0 blocks/s" in switch and "left 0:00:02" in switch
    assert len(bar.tasks) == 2
