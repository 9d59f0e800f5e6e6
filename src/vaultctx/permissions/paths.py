"""Keeping tool paths inside the vault: no absolute paths, no `..`, no symlinks out."""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath

from ..config import CONFIG_DIRNAME
from ..errors import PathOutsideVault


def confine(vault_root: Path, path: str) -> Path:
    """The absolute, resolved location of vault-relative `path`, or `PathOutsideVault`.

    Refused: empty paths, absolute paths (POSIX or Windows), any `..` part, the vault's own
    `.vaultctx` folder, and anything that resolves outside the vault through a symlink."""
    raw = path.strip().replace("\\", "/")
    if not raw:
        raise PathOutsideVault(path, "empty path")
    if PurePosixPath(raw).is_absolute() or PureWindowsPath(path).is_absolute() or raw[1:2] == ":":
        raise PathOutsideVault(path, "absolute paths are not allowed")
    parts = PurePosixPath(raw).parts
    if ".." in parts:
        raise PathOutsideVault(path, "'..' is not allowed")
    if parts[0] == CONFIG_DIRNAME:
        raise PathOutsideVault(path, "the index folder is not part of the vault")
    root = vault_root.resolve()
    resolved = (root / raw).resolve()
    if resolved != root and not resolved.is_relative_to(root):
        raise PathOutsideVault(path, "resolves outside the vault (symlink)")
    return resolved


def vault_relative(vault_root: Path, path: str) -> str:
    """`confine`, as the POSIX path relative to the vault that policies and the index use."""
    return confine(vault_root, path).relative_to(vault_root.resolve()).as_posix()
