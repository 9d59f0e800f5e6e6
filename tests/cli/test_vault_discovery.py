"""How every command finds its vault: -V/--vault, else $VAULTCTX_VAULT, else the nearest
folder up from here that holds `.vaultctx/` or `.obsidian/`, else the current folder; and
commands that only read never leave an index behind."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from vaultctx.cli import cli
from vaultctx.config import CONFIG_DIRNAME


def run(*args: str) -> click.testing.Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


@pytest.fixture
def indexed(example_vault: Path) -> Path:
    assert run("index", str(example_vault), "--no-embed").exit_code == 0
    return example_vault


def test_a_command_run_in_a_subfolder_answers_from_the_vault_s_index_and_creates_nothing_there(
    indexed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    subfolder = indexed / "Hives"
    before = files_under(subfolder)
    monkeypatch.chdir(subfolder)
    found = run("search", "queen", "--no-vectors", "--json")
    assert found.exit_code == 0, found.output
    assert "Hives/Queen Records.md" in [c["path"] for c in json.loads(found.stdout)["candidates"]]
    status = json.loads(run("status", "--json").stdout)
    assert (status["vault"], status["notes"]) == (str(indexed), 54)
    opened = run("open", "Queen Records", "--json")
    assert json.loads(opened.stdout)["path"] == "Hives/Queen Records.md"
    assert files_under(subfolder) == before


def test_index_in_a_subfolder_of_an_obsidian_vault_indexes_the_whole_vault(
    example_vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (example_vault / ".obsidian").is_dir() and not (example_vault / ".vaultctx").exists()
    monkeypatch.chdir(example_vault / "Journal")
    report = json.loads(run("index", "--no-embed", "--json").stdout)
    assert report["status"]["vault"] == str(example_vault) and report["added"] == 54
    assert not (example_vault / "Journal" / ".vaultctx").exists()


def test_vaultctx_vault_names_the_vault_wherever_the_command_runs(
    indexed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("VAULTCTX_VAULT", str(indexed))
    assert json.loads(run("status", "--json").stdout)["vault"] == str(indexed)
    found = json.loads(run("select", "varroa", "--no-vectors", "--json").stdout)
    assert found["candidates"]
    assert files_under(elsewhere) == []


def test_v_comes_before_vaultctx_vault_which_comes_before_the_folder_above(
    indexed: Path, tmp_path: Path, make_vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = make_vault({"Only.md": "# Only\n\nThe one note of another vault.\n"}, "other")
    assert run("index", str(other), "--no-embed").exit_code == 0
    monkeypatch.chdir(indexed / "Hives")
    monkeypatch.setenv("VAULTCTX_VAULT", str(other))
    assert json.loads(run("status", "--json").stdout)["vault"] == str(other)
    given = run("status", "-V", str(indexed), "--json")
    assert json.loads(given.stdout)["vault"] == str(indexed)


def test_every_command_that_works_on_a_vault_takes_v_and_vault() -> None:
    ctx = click.Context(cli)

    def commands(group: click.Group, prefix: str) -> list[tuple[str, click.Command]]:
        found = []
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None
            if isinstance(command, click.Group):
                found += commands(command, f"{prefix}{name} ")
            else:
                found.append((f"{prefix}{name}", command))
        return found

    every = commands(cli, "")
    on_a_vault = [(name, c) for name, c in every if any("vault" in p.name for p in c.params)]
    assert len(on_a_vault) > 20
    without = [
        name
        for name, command in on_a_vault
        if not any({"-V", "--vault"} <= set(p.opts) for p in command.params)
    ]
    assert without == []


def test_status_takes_the_vault_as_an_option_or_as_its_argument(indexed: Path) -> None:
    by_option = run("status", "-V", str(indexed), "--json")
    by_argument = run("status", str(indexed), "--json")
    assert by_option.exit_code == by_argument.exit_code == 0, by_option.output
    assert json.loads(by_option.stdout)["vault"] == json.loads(by_argument.stdout)["vault"]


def test_two_different_vaults_given_at_once_are_a_usage_error(indexed: Path, tmp_path: Path):
    result = run("status", str(indexed), "-V", str(tmp_path))
    assert result.exit_code == 2 and "two vaults given" in result.output


READERS = [
    ("status",),
    ("select", "queen"),
    ("search", "queen"),
    ("open", "Home"),
    ("related", "Home", "--no-vectors"),
    ("touch", "Home"),
    ("context", "queen", "--no-vectors"),
    ("memory", "search", "queen"),
    ("memory", "list"),
    ("audit",),
    ("sessions", "list"),
    ("skills", "list"),
    ("config",),
]


@pytest.mark.parametrize("args", READERS, ids=[" ".join(a[:2]) for a in READERS])
def test_a_command_that_only_reads_leaves_a_vault_never_indexed_as_it_was(
    example_vault: Path, args: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = files_under(example_vault)
    result = run(*args, "-V", str(example_vault))
    monkeypatch.chdir(example_vault / "Hives")
    from_a_subfolder = run(*args)
    for done in (result, from_a_subfolder):
        assert done.exit_code == 0 or "has not been indexed yet: run `vaultctx index`" in (
            done.stderr
        ), done.output
    assert files_under(example_vault) == before


def test_the_vault_markers_name_the_config_folder() -> None:
    from vaultctx.cli.common import VAULT_MARKERS

    assert VAULT_MARKERS[0] == CONFIG_DIRNAME
