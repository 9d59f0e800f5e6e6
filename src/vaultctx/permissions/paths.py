"""Keeping tool paths inside the vault: no absolute paths, no `..`, no symlinks out, and no
names that only look like paths."""

from __future__ import annotations

import unicodedata
from pathlib import Path, PurePosixPath, PureWindowsPath

from ..config import CONFIG_DIRNAME
from ..errors import PathOutsideVault

# Characters drawn like a slash that NFKC leaves alone: a name holding one reads as a
# folder path in every file list, yet is a single file.
LOOKALIKE_SLASHES = frozenset("\u2044\u2215\u2216\u2571\u2572\u29f5\u29f8\u29f9\ufe68")
_INVISIBLE = frozenset({"Cc", "Cf", "Zl", "Zp"})  # control, format (bidi overrides), breaks


def check_name(path: str) -> None:
    """Refuse a path whose characters would mislead whoever reads it: control characters
    and line breaks, invisible format characters, slashes that are not slashes (also after
    NFKC), a leading `~` (never a home folder here), a trailing slash (a folder, not a
    note) and an empty note name (`Inbox/.md`)."""
    if any(unicodedata.category(c) in _INVISIBLE for c in path):
        raise PathOutsideVault(path, "control or invisible characters in the name")
    folded = unicodedata.normalize("NFKC", path)
    if LOOKALIKE_SLASHES & set(folded) or any(
        folded.count(sep) != path.count(sep) for sep in "/\\"
    ):
        raise PathOutsideVault(path, "a character that looks like a slash")
    if path.startswith("~"):
        raise PathOutsideVault(path, "'~' is not a folder of the vault")
    if path.endswith(("/", "\\")):
        raise PathOutsideVault(path, "names a folder, not a note")
    if PurePosixPath(path.replace("\\", "/")).name.lower() == ".md":
        raise PathOutsideVault(path, "the note has no name")


def confine(vault_root: Path, path: str) -> Path:
    """The absolute, resolved location of vault-relative `path`, or `PathOutsideVault`.

    Refused: empty paths, misleading names (`check_name`), absolute paths (POSIX or
    Windows), any `..` part, the vault's own `.vaultctx` folder, and anything that resolves
    outside the vault through a symlink."""
    raw = path.strip().replace("\\", "/")
    if not raw:
        raise PathOutsideVault(path, "empty path")
    check_name(path.strip())
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
