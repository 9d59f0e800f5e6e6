"""Vault discovery: which files are notes, honouring ignore rules and the vault's boundary.

What is hidden or ignored here is never a note, and the read policy
(`vaultctx.permissions`) hides the same paths at query time with `excluded`, so a rule
changed after an index run holds at once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pathspec

IGNORE_FILENAME = ".vaultctxignore"


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


def ignore_lines(root: Path) -> tuple[str, ...]:
    """The patterns of the vault's `.vaultctxignore` (gitignore syntax), or none."""
    try:
        text = (root / IGNORE_FILENAME).read_text(encoding="utf-8", errors="replace")
    except OSError:  # missing, a folder, unreadable: nothing ignored by it
        return ()
    return tuple(text.splitlines())


def load_ignore_spec(root: Path) -> pathspec.PathSpec | None:
    lines = ignore_lines(root)
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


def is_hidden(name: str) -> bool:
    """Obsidian hides every dot-entry (.obsidian, .trash, .git); vaultctx keeps its index
    in one (.vaultctx)."""
    return name.startswith(".")


def is_note_path(name: str) -> bool:
    return name.lower().endswith(".md") and not is_hidden(name)


def _skipped(spec: pathspec.PathSpec | None, rel: str, name: str, is_dir: bool) -> bool:
    """Whether the scan skips the entry `rel` (named `name`) of a folder it walks."""
    if is_hidden(name):
        return True
    return spec is not None and spec.match_file(rel + ("/" if is_dir else ""))


def excluded(spec: pathspec.PathSpec | None, path: str) -> bool:
    """Whether the scan would never reach the file at vault-relative `path`: it, or a folder
    on the way to it, is hidden or ignored (a folder's notes cannot be re-included, as in
    git)."""
    parts = path.split("/")
    return any(
        _skipped(spec, "/".join(parts[: i + 1]), part, i < len(parts) - 1)
        for i, part in enumerate(parts)
    )


def is_utf8(name: str) -> bool:
    """False for a name whose bytes are not UTF-8 (os gives them as lone surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(path: str) -> str:
    """`path` with its undecodable bytes written as `\\xe9`, safe to print and store."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def scan_vault(root: Path) -> ScanResult:
    """Walk the vault for Markdown notes.

    Hidden entries and the ignore file's patterns are skipped, and so is every symlink: one
    that leaves the vault is not followed, and one inside it names a file or folder the walk
    reaches by its real path — or skips, when that is hidden or ignored. A note is thus
    indexed once, under its real path, which is what read rules are matched against.
    """
    root = root.resolve()
    spec = load_ignore_spec(root)
    files: list[VaultFile] = []
    problems: list[tuple[str, str]] = []
    stack: list[tuple[Path, str]] = [(root, "")]
    while stack:
        directory, rel_dir = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            problems.append((rel_dir or ".", f"cannot list directory: {exc.strerror}"))
            continue
        for entry in entries:
            name = entry.name
            rel = f"{rel_dir}/{name}" if rel_dir else name
            try:
                if entry.is_symlink():
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = entry.is_file(follow_symlinks=False)
            except OSError:
                continue
            if _skipped(spec, rel, name, is_dir):
                continue
            if not is_utf8(name):  # SQLite cannot store the name: say so instead of failing
                if is_dir or is_note_path(name):
                    problems.append((printable(rel), "file name is not valid UTF-8; rename it"))
                continue
            if is_dir:
                stack.append((Path(entry.path), rel))
            elif is_file and is_note_path(name):
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    problems.append((rel, f"cannot stat: {exc.strerror}"))
                    continue
                files.append(VaultFile(rel, Path(entry.path), st.st_mtime_ns, st.st_size))
    files.sort(key=lambda f: f.path)
    return ScanResult(files, problems)
