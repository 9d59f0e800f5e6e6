"""The Obsidian plugin shipped inside the package, and installing it into a vault.

`plugin/` holds the built plugin (`main.js`, `manifest.json`, `styles.css`), made from
`plugins/obsidian/` by `npm run build`; a test of the plugin's own suite builds it again and
fails when the two differ. Installing copies those files into
`<vault>/.obsidian/plugins/vaultctx/`, each replaced atomically (Obsidian may be reading them),
and never through a symlink that leads out of the vault.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import PathOutsideVault, VaultctxError, VaultNotFound

PLUGIN_ID = "vaultctx"
PLUGIN_FILES = ("main.js", "manifest.json", "styles.css")


@dataclass(frozen=True)
class PluginInstall:
    """What `install_plugin` did."""

    vault: str
    plugin_dir: str
    version: str
    previous_version: str | None  # the version it replaced, if any
    files: tuple[str, ...]
    enabled: bool  # already listed in .obsidian/community-plugins.json

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "files": list(self.files)}


def packaged_plugin() -> Path:
    """The folder of the built plugin inside the installed package."""
    return Path(__file__).resolve().parent / "plugin"


def plugin_version(folder: Path) -> str | None:
    """The `version` of `folder/manifest.json`, or None when it has none."""
    try:
        version = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return str(version)


def install_plugin(vault: str | Path) -> PluginInstall:
    """Copy the packaged plugin into VAULT's `.obsidian/plugins/vaultctx/`.

    Raises `VaultNotFound` when VAULT is no folder, or has no `.obsidian` folder (Obsidian
    makes it the first time it opens a vault), `PathOutsideVault` (writing nothing) when a
    folder or file on the way is a symlink out of the vault, and `VaultctxError` when the
    packaged plugin is missing or the files cannot be written.
    """
    root = Path(vault).expanduser().resolve()
    if not root.is_dir():
        raise VaultNotFound(f"no vault at {root}")
    config = root / ".obsidian"
    if not config.is_dir():
        raise VaultNotFound(
            f"{root} has no .obsidian folder: open it as a vault in Obsidian once, then install"
        )
    source = packaged_plugin()
    missing = [name for name in PLUGIN_FILES if not (source / name).is_file()]
    if missing:
        raise VaultctxError(
            f"the packaged Obsidian plugin lacks {', '.join(missing)} in {source}:"
            " reinstall vaultctx"
        )
    target = config / "plugins" / PLUGIN_ID
    _refuse_links_out(root, [config, target.parent, target, *(target / n for n in PLUGIN_FILES)])
    previous = plugin_version(target)
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name in PLUGIN_FILES:
            _replace(target / name, (source / name).read_bytes())
    except OSError as exc:
        raise VaultctxError(f"cannot write {target}: {exc.strerror or exc}") from exc
    return PluginInstall(
        vault=str(root),
        plugin_dir=str(target),
        version=plugin_version(source) or "unknown",
        previous_version=previous,
        files=PLUGIN_FILES,
        enabled=PLUGIN_ID in _enabled_plugins(config),
    )


def _refuse_links_out(root: Path, paths: list[Path]) -> None:
    """Refuse when any of `paths` (outermost first) leads out of `root`: a symlinked
    `.obsidian`, `plugins`, plugin folder or file would have the install overwrite files
    elsewhere."""
    for path in paths:
        resolved = path.resolve()
        if not resolved.is_relative_to(root):
            raise PathOutsideVault(
                str(path.relative_to(root)),
                f"a symlink out of the vault, to {resolved}: nothing was installed",
            )


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _enabled_plugins(config: Path) -> list[str]:
    try:
        enabled = json.loads((config / "community-plugins.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [str(name) for name in enabled] if isinstance(enabled, list) else []
