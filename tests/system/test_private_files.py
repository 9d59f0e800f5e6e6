"""Everything vaultctx keeps in a vault's `.vaultctx/` that can hold a secret — the config
(a database password), the server's announcement and token, the index and memory files
(note text) — is its owner's only: 0600 files in a 0700 folder whatever the umask, and a
looser one is made so when vaultctx writes it."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from vaultctx import Workspace
from vaultctx.cli import cli
from vaultctx.server.run import LocalServer

PASSWORD_URL = "postgresql://vaultctx:hunter2@db.example/team"


@pytest.fixture(params=[0o022, 0o000], ids=["umask 022", "umask 000"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    before = os.umask(request.param)
    yield request.param
    os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def vaultctx(*args: str) -> None:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output


def test_the_readme_team_set_up_leaves_the_password_to_its_owner(
    umask: int, make_vault: Callable[..., Path]
) -> None:
    vault = make_vault({"Bees.md": "# Bees\n\nVarroa.\n"})
    vaultctx("config", "database_url", PASSWORD_URL, "-V", str(vault))
    config = vault / ".vaultctx" / "config.toml"
    assert "hunter2" in config.read_text()
    assert (mode(vault / ".vaultctx"), mode(config)) == (0o700, 0o600)


def test_the_index_memory_server_file_and_token_are_created_private(
    umask: int, make_vault: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(tmp_path / "config"))
    vault = make_vault({"Bees.md": "# Bees\n\nVarroa.\n"})
    vaultctx("index", str(vault), "--no-embed")
    vaultctx("memory", "add", "the varroa count is high", "-V", str(vault))
    with Workspace.open(vault, {"embed": False}) as ws, LocalServer(ws, watch=False, warm=False):
        private = vault / ".vaultctx"
        files = [private / "server.json", tmp_path / "config" / "token"]
        files += [p for p in private.iterdir() if p.name.startswith(("index.db", "memory.db"))]
        assert {p.name for p in files} >= {"index.db", "memory.db", "server.json", "token"}
        assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
        assert mode(private) == mode(tmp_path / "config") == 0o700


def test_looser_files_and_folder_are_made_private_when_vaultctx_writes_them(
    make_vault: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(tmp_path / "config"))
    vault = make_vault({"Bees.md": "# Bees\n\nVarroa.\n"})
    vaultctx("index", str(vault), "--no-embed")
    private = vault / ".vaultctx"
    (tmp_path / "config").mkdir(mode=0o755)
    (tmp_path / "config" / "token").write_text("an-older-token\n")
    for path in (private, tmp_path / "config", *private.iterdir(), tmp_path / "config" / "token"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    (private / "config.toml").write_text("budget_tokens = 900\n")
    (private / "config.toml").chmod(0o644)

    vaultctx("config", "database_url", PASSWORD_URL, "-V", str(vault))
    assert (mode(private), mode(private / "config.toml")) == (0o700, 0o600)
    vaultctx("config", "--unset", "database_url", "-V", str(vault))
    with Workspace.open(vault, {"embed": False}) as ws, LocalServer(ws, watch=False, warm=False):
        assert ws.select("varroa", use_vectors=False).candidates
        # (a lock file says only which process holds it)
        written = [p for p in private.iterdir() if p.is_file() and p.suffix != ".lock"]
        written.append(tmp_path / "config" / "token")
        assert {p.name: mode(p) for p in written} == {p.name: 0o600 for p in written}
        assert mode(tmp_path / "config") == 0o700
        assert (tmp_path / "config" / "token").read_text() == "an-older-token\n"  # kept
