"""Vault discovery: which files are notes, honouring ignore rules and the vault's boundary."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pathspec

IGNORE_FILENAME = ".vaultctxignore"
# Obsidian hides every dot-folder (.obsidian, .trash, .git) and vaultctx keeps its index in one.
ALWAYS_IGNORED = frozenset({".obsidian", ".trash", ".git", ".vaultctx"})


@dataclass(frozen=True)
class VaultFile:
    path: str  # POSIX, relative to the vault root
    abspath: Path
    mtime_ns: int
    size: int


@dataclass(frozen=True)
class ScanResult:
    files: list[VaultFile]
    problems: list[tuple[str, str]]  # (relative path, reason)


def load_ignore_spec(root: Path) -> pathspec.PathSpec | None:
    ignore_file = root / IGNORE_FILENAME
    if not ignore_file.is_file():
        return None
    try:
        lines = ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


def is_note_path(name: str) -> bool:
    return name.lower().endswith(".md") and not name.startswith(".")


def scan_vault(root: Path) -> ScanResult:
    """Walk the vault for Markdown notes.

    Hidden entries and the ignore file's patterns are skipped; symlinks are followed only
    when their target stays inside the vault, and each real directory is visited once:
    symlinked folders wait until every real folder was walked, so a folder's notes keep
    their real paths instead of appearing a second time under the link.
    """
    root = root.resolve()
    spec = load_ignore_spec(root)
    files: list[VaultFile] = []
    problems: list[tuple[str, str]] = []
    seen_dirs: set[str] = {str(root)}
    stack: list[tuple[Path, str]] = [(root, "")]
    linked: list[tuple[str, Path, str]] = []  # (real path, link path, relative link path)
    while stack or linked:
        if not stack:
            target, link_path, rel_link = linked.pop(0)
            if target not in seen_dirs:
                seen_dirs.add(target)
                stack.append((link_path, rel_link))
            continue
        directory, rel_dir = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            problems.append((rel_dir or ".", f"cannot list directory: {exc.strerror}"))
            continue
        for entry in entries:
            name = entry.name
            if name.startswith(".") or name in ALWAYS_IGNORED:
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            try:
                is_dir = entry.is_dir()
                is_file = entry.is_file()
            except OSError:
                continue
            if spec is not None and spec.match_file(rel + ("/" if is_dir else "")):
                continue
            if entry.is_symlink():
                target = _inside(root, entry.path)
                if target is None:
                    continue
                if is_dir:
                    linked.append((target, Path(entry.path), rel))
                    continue
            if is_dir:
                seen_dirs.add(os.path.realpath(entry.path))
                stack.append((Path(entry.path), rel))
            elif is_file and is_note_path(name):
                try:
                    st = entry.stat()
                except OSError as exc:
                    problems.append((rel, f"cannot stat: {exc.strerror}"))
                    continue
                files.append(VaultFile(rel, Path(entry.path), st.st_mtime_ns, st.st_size))
    files.sort(key=lambda f: f.path)
    return ScanResult(files, problems)


def _inside(root: Path, path: str) -> str | None:
    """The real path of a symlink if it stays inside the vault, else None."""
    try:
        real = os.path.realpath(path)
    except OSError:
        return None
    root_s = str(root)
    if real == root_s or real.startswith(root_s + os.sep):
        return real
    return None
