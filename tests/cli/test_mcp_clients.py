"""`vaultctx mcp --print-config|--install CLIENT`: what each MCP client needs to start the
server, printed with absolute paths and merged into the client's own file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from server_helpers import run_stdio
from vaultctx import Workspace
from vaultctx.cli import cli
from vaultctx.cli.mcp_clients import CLIENTS

NOTES = {"Hives/Varroa.md": "# Varroa\n\nCount varroa mites in August.\n"}


def absolute_env() -> dict[str, str]:
    """This environment with PYTHONPATH made absolute, for a process run in another folder."""
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return os.environ | {"PYTHONPATH": os.pathsep.join(os.path.abspath(p) for p in paths if p)}


def vaultctx(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "vaultctx", *args],
        capture_output=True, text=True, cwd=cwd, env=absolute_env(), check=True,
    )  # fmt: skip
    return done.stdout


async def tool_names(client) -> list[str]:
    return sorted(t.name for t in (await client.list_tools()).tools)


def the_entry(config: dict, client: str) -> dict:
    servers = config[CLIENTS[client].servers_key]
    assert list(servers) == ["vaultctx"]
    return servers["vaultctx"]


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_each_printed_config_starts_a_server_that_lists_its_tools(
    client: str, make_vault: Callable[..., Path], tmp_path: Path
) -> None:
    vault = make_vault(NOTES)
    with Workspace.open(vault, {"embed": False}) as ws:
        ws.index()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    relative = os.path.relpath(vault, elsewhere)
    printed = vaultctx("mcp", relative, "--no-vectors", "--print-config", client, cwd=elsewhere)
    entry = the_entry(json.loads(printed), client)
    assert Path(entry["command"]).is_absolute() and Path(entry["command"]).is_file()
    assert str(vault.resolve()) in entry["args"]  # the vault by absolute path, not as typed
    assert ("type" in entry) is CLIENTS[client].typed
    listed = run_stdio(entry["command"], entry["args"], tool_names)
    assert listed == [
        "clear_focus", "context", "focus", "memory_search", "read_note", "related", "select",
        "touch",
    ]  # fmt: skip
    help_text = vaultctx("mcp", "--help")
    assert all(f"  {name} " in help_text for name in listed)


def test_a_console_script_on_the_path_is_named_by_its_absolute_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "vaultctx"  # what pip and pipx write for [project.scripts]
    script.write_text(f"#!{sys.executable}\nfrom vaultctx.cli import main\nmain()\n")
    script.chmod(0o755)
    env = absolute_env() | {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["vaultctx", "mcp", str(tmp_path), "--print-config", "cursor"],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    entry = the_entry(json.loads(done.stdout), "cursor")
    assert entry == {"command": str(script), "args": ["mcp", str(tmp_path.resolve())]}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder of its own, and the current folder a project of its own."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


def install(tmp_path: Path, client: str, *flags: str):
    vault = tmp_path / "notes"
    vault.mkdir(exist_ok=True)
    return CliRunner().invoke(cli, ["mcp", str(vault), "--install", client, *flags])


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_install_merges_into_the_file_and_keeps_a_backup(
    client: str, tmp_path: Path, home: Path
) -> None:
    path = CLIENTS[client].config_file()
    key = CLIENTS[client].servers_key
    path.parent.mkdir(parents=True, exist_ok=True)
    before = json.dumps({"theme": "dark", key: {"other": {"command": "/bin/other"}}}, indent=4)
    path.write_text(before)

    result = install(tmp_path, client, "--name", "notes")
    assert result.exit_code == 0, result.output
    after = json.loads(path.read_text())
    assert after["theme"] == "dark"
    assert after[key]["other"] == {"command": "/bin/other"}
    assert after[key]["notes"]["args"][-1] == str((tmp_path / "notes").resolve())
    backups = list(path.parent.glob(f"{path.name}.*.bak"))
    assert len(backups) == 1 and backups[0].read_text() == before
    assert str(path) in result.output and "Restart" in result.output

    again = install(tmp_path, client, "--name", "notes")  # the same entry, once
    assert again.exit_code == 0 and "Replaced" in again.output
    assert list(json.loads(path.read_text())[key]) == ["other", "notes"]


def test_install_creates_a_missing_file(tmp_path: Path, home: Path) -> None:
    result = install(tmp_path, "claude-desktop")
    assert result.exit_code == 0, result.output
    path = home / ".config" / "Claude" / "claude_desktop_config.json"
    if sys.platform == "darwin":
        path = home / "Library/Application Support/Claude/claude_desktop_config.json"
    assert list(json.loads(path.read_text())["mcpServers"]) == ["vaultctx"]
    assert "(the file as it was" not in result.output  # nothing to back up


def test_install_leaves_a_file_it_cannot_read_alone(tmp_path: Path, home: Path) -> None:
    broken = tmp_path / ".mcp.json"
    broken.write_text('{"mcpServers": {"x": ')  # a half-written file
    result = install(tmp_path, "claude-code")
    assert result.exit_code == 6
    assert "is not readable JSON" in result.output and "Traceback" not in result.output
    assert broken.read_text() == '{"mcpServers": {"x": '
    assert not list(tmp_path.glob(".mcp.json.*"))


def test_print_config_refuses_a_folder_that_does_not_exist(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["mcp", str(tmp_path / "nope"), "--print-config", "cursor"])
    assert result.exit_code == 2 and "no vault folder" in result.output


def test_outside_any_vault_print_config_and_install_refuse_in_one_line(
    tmp_path: Path, home: Path
) -> None:
    for mode in ("--print-config", "--install"):
        result = CliRunner().invoke(cli, ["mcp", mode, "claude-desktop"])
        assert result.exit_code == 2, result.output
        assert result.stdout == ""
        [line] = result.stderr.splitlines()
        assert line.startswith(f"Error: no vault here: neither {tmp_path.resolve()} nor")
    assert not CLIENTS["claude-desktop"].config_file().exists()
    assert not (tmp_path / ".vaultctx").exists()


def test_in_a_vaults_subfolder_the_config_serves_the_vault_and_says_where_it_goes(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = tmp_path / "notes"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / "Hives").mkdir()
    monkeypatch.chdir(vault / "Hives")
    result = CliRunner().invoke(cli, ["mcp", "--print-config", "claude-desktop"])
    assert result.exit_code == 0, result.output
    assert the_entry(json.loads(result.stdout), "claude-desktop")["args"][-1] == str(vault)
    where = CLIENTS["claude-desktop"].config_file()
    assert f"Claude Desktop reads this from {where}" in result.stderr


def test_installing_a_second_vault_under_the_same_name_says_it_replaced_the_first(
    tmp_path: Path, home: Path
) -> None:
    first, second = tmp_path / "bees", tmp_path / "garden"
    for vault in (first, second):
        (vault / ".vaultctx").mkdir(parents=True)
    assert CliRunner().invoke(cli, ["mcp", str(first), "--install", "cursor"]).exit_code == 0
    again = CliRunner().invoke(cli, ["mcp", str(first), "--install", "cursor"])
    assert "Warning" not in again.stderr  # the same vault: nothing lost
    result = CliRunner().invoke(cli, ["mcp", str(second), "--install", "cursor"])
    assert result.exit_code == 0, result.output
    assert f"Warning: 'vaultctx' served {first} until now" in result.stderr
    assert f"vaultctx mcp {first} --install cursor --name" in result.stderr
    assert "is not indexed yet: the server indexes it when Cursor first starts it" in (
        result.stderr
    )


def test_a_server_started_on_a_vault_never_indexed_indexes_it_first(make_vault) -> None:
    vault = make_vault(NOTES)

    async def steps(client) -> dict:
        return (await client.call_tool("select", {"query": "varroa mites", "k": 3})).model_dump()

    selected = run_stdio(
        sys.executable, ["-m", "vaultctx", "mcp", str(vault), "--no-vectors"], steps
    )
    assert not selected["is_error"], selected
    found = selected["structured_content"]["candidates"]
    assert [c["path"] for c in found] == ["Hives/Varroa.md"]
    assert (vault / ".vaultctx" / "index.db").is_file()
