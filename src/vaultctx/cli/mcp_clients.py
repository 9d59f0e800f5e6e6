"""`vaultctx mcp --print-config|--install CLIENT`: the exact entry an MCP client needs to start
`vaultctx mcp`, and adding it to that client's own configuration file.

A desktop app starts its servers without the user's shell, so its PATH rarely holds the
virtualenv or `~/.local/bin`: every entry names the executable and the vault by absolute path.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import ConfigError


@dataclass(frozen=True)
class Client:
    """One MCP client: the key its file keeps servers under, and where that file is."""

    name: str
    label: str
    servers_key: str  # "mcpServers", or VS Code's "servers"
    typed: bool  # whether each entry says "type": "stdio"
    where: str  # the file, as the docs say it

    def config_file(self, cwd: Path | None = None) -> Path:
        """The file `--install` writes: a user-wide file, or the current project's."""
        here = cwd or Path.cwd()
        home = Path.home()
        if self.name == "claude-desktop":
            if sys.platform == "darwin":
                return home / "Library/Application Support/Claude/claude_desktop_config.json"
            if sys.platform == "win32":
                appdata = os.environ.get("APPDATA") or str(home / "AppData/Roaming")
                return Path(appdata) / "Claude/claude_desktop_config.json"
            config_home = os.environ.get("XDG_CONFIG_HOME") or str(home / ".config")
            return Path(config_home) / "Claude/claude_desktop_config.json"
        if self.name == "claude-code":
            return here / ".mcp.json"
        if self.name == "cursor":
            return home / ".cursor/mcp.json"
        return here / ".vscode/mcp.json"  # vscode


CLIENTS = {
    c.name: c
    for c in (
        Client(
            "claude-desktop",
            "Claude Desktop",
            "mcpServers",
            False,
            "claude_desktop_config.json in Claude's folder (macOS: ~/Library/Application"
            " Support/Claude/, Windows: %APPDATA%\\Claude\\, Linux: ~/.config/Claude/)",
        ),
        Client("claude-code", "Claude Code", "mcpServers", True, ".mcp.json in the current folder"),
        Client("cursor", "Cursor", "mcpServers", False, "~/.cursor/mcp.json"),
        Client("vscode", "VS Code", "servers", True, ".vscode/mcp.json in the current folder"),
    )
}


def executable() -> list[str]:
    """How to start this very vaultctx: the script that is running (found on PATH when it was
    started by bare name), else this Python with `-m vaultctx`."""
    script = sys.argv[0] if sys.argv else ""
    if Path(script).name in ("vaultctx", "vaultctx.exe"):
        found = script if os.sep in script else shutil.which(script)
        if found and os.path.isfile(found):
            return [os.path.abspath(found)]
    return [os.path.abspath(sys.executable), "-m", "vaultctx"]


def server_entry(client: Client, vault: Path, flags: list[str]) -> dict[str, Any]:
    """The entry that starts `vaultctx mcp` on `vault` (absolute paths only)."""
    command, *prefix = executable()
    entry: dict[str, Any] = {"type": "stdio"} if client.typed else {}
    entry |= {"command": command, "args": [*prefix, "mcp", str(vault), *flags]}
    return entry


def client_config(client: Client, name: str, vault: Path, flags: list[str]) -> dict[str, Any]:
    """The whole file's worth for one server, wrapper included, as `--print-config` prints it."""
    return {client.servers_key: {name: server_entry(client, vault, flags)}}


@dataclass(frozen=True)
class Installed:
    path: Path
    backup: Path | None
    replaced: Any  # the entry of that name the file held before (None: there was none)

    def replaced_another_vault(self, vault: Path) -> str | None:
        """The vault the replaced entry served, when it served another one than `vault`
        (the argument after `mcp`, as `server_entry` writes it)."""
        args = self.replaced.get("args") if isinstance(self.replaced, dict) else None
        if not args or not isinstance(args, list) or "mcp" not in args:
            return None
        served = args[args.index("mcp") + 1] if args.index("mcp") + 1 < len(args) else None
        return served if isinstance(served, str) and served != str(vault) else None


def install(client: Client, name: str, vault: Path, flags: list[str], path: Path) -> Installed:
    """Merge the entry into `path`, keeping every other server and setting; the file as it was
    is copied beside it first. A file that is not a JSON object is left alone, with an error."""
    data: dict[str, Any] = {}
    backup = None
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8") or "{}")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{path} is not readable JSON ({exc}); left as it is") from exc
        if not isinstance(data, dict) or not isinstance(data.get(client.servers_key, {}), dict):
            raise ConfigError(
                f"{path} does not hold a JSON object with {client.servers_key!r}; left as it is"
            )
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        backup = path.with_name(f"{path.name}.{stamp}.bak")
        shutil.copy2(path, backup)
    servers = data.setdefault(client.servers_key, {})
    replaced = servers.get(name)
    servers[name] = server_entry(client, vault, flags)
    _write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return Installed(path, backup, replaced)


def _write(path: Path, text: str) -> None:
    """Replace `path` whole (the client may read it at any moment), keeping its mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        if path.exists():
            shutil.copymode(path, temporary)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
