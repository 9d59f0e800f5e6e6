"""Vault discovery: which files are notes (Markdown, PDFs, canvases), honouring ignore rules
and the vault's boundary.

What is hidden or ignored here is never a note, and the read policy
(`vaultctx.permissions`) hides the same paths at query time with `excluded`, so a rule
changed after an index run holds at once.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pathspec

from .notefile import file_kind

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
    """Whether a file named `name` is indexed: a note, a PDF or a canvas, never hidden."""
    return bool(file_kind(name)) and not is_hidden(name)


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


# What the scan does with one entry of a folder it walks (`entry_action`).
SKIP, FOLDER, NOTE, BAD_NAME = "skip", "folder", "note", "bad name"


def entry_action(
    spec: pathspec.PathSpec | None,
    rel: str,
    name: str,
    *,
    is_symlink: bool,
    is_dir: bool,
    is_file: bool,
) -> str:
    """The vault's rules for one entry `rel` (named `name`), as its folder's listing or
    `lstat` gives it: every symlink, hidden entry and ignored path is skipped; a name that
    is not UTF-8 is reported (`BAD_NAME`) when it would be a folder or a note; otherwise a
    folder is walked into and a Markdown file is a note. One home for these rules: the full
    scan and the scan of named paths both ask it."""
    if is_symlink or _skipped(spec, rel, name, is_dir):
        return SKIP
    if not is_utf8(name):  # SQLite cannot store the name: say so instead of failing
        return BAD_NAME if is_dir or is_note_path(name) else SKIP
    if is_dir:
        return FOLDER
    return NOTE if is_file and is_note_path(name) else SKIP


_BAD_NAME = "file name is not valid UTF-8; rename it"


def _cannot_list(exc: OSError) -> str:
    return f"cannot list directory: {exc.strerror}"


def scan_vault(root: Path) -> ScanResult:
    """Walk the vault for its notes: Markdown, PDFs and canvases.

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
            problems.append((rel_dir or ".", _cannot_list(exc)))
            continue
        for entry in entries:
            name = entry.name
            rel = f"{rel_dir}/{name}" if rel_dir else name
            try:
                is_symlink = entry.is_symlink()
                is_dir = not is_symlink and entry.is_dir(follow_symlinks=False)
                is_file = not is_symlink and entry.is_file(follow_symlinks=False)
            except OSError:
                continue
            action = entry_action(
                spec, rel, name, is_symlink=is_symlink, is_dir=is_dir, is_file=is_file
            )
            if action == BAD_NAME:
                problems.append((printable(rel), _BAD_NAME))
            elif action == FOLDER:
                stack.append((Path(entry.path), rel))
            elif action == NOTE:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    problems.append((rel, f"cannot stat: {exc.strerror}"))
                    continue
                files.append(VaultFile(rel, Path(entry.path), st.st_mtime_ns, st.st_size))
    files.sort(key=lambda f: f.path)
    return ScanResult(files, problems)


def scan_paths(root: Path, paths: Iterable[str]) -> ScanResult:
    """What `scan_vault` finds at the vault-relative `paths` only, without walking the rest:
    each folder on the way and the file itself pass `entry_action` as the walk would see
    them (by `lstat`, so a symlink anywhere on the way is skipped), and each folder must be
    listable, as the walk lists it. A path it would not reach is simply not in the result."""
    root = root.resolve()
    spec = load_ignore_spec(root)
    files: dict[str, VaultFile] = {}
    problems: dict[tuple[str, str], None] = {}
    for path in paths:
        parts = path.split("/")
        if any(part in ("", ".", "..") for part in parts):
            continue  # never a path the walk gives
        current, rel = root, ""
        for depth, name in enumerate(parts):
            try:
                with os.scandir(current):  # the walk lists every folder it enters
                    pass
            except OSError as exc:
                problems[(rel or ".", _cannot_list(exc))] = None
                break
            rel = f"{rel}/{name}" if rel else name
            current = current / name
            try:
                st = os.lstat(current)
            except (OSError, ValueError):  # gone, never there, or no name a file can have
                break
            action = entry_action(
                spec,
                rel,
                name,
                is_symlink=stat.S_ISLNK(st.st_mode),
                is_dir=stat.S_ISDIR(st.st_mode),
                is_file=stat.S_ISREG(st.st_mode),
            )
            last = depth == len(parts) - 1
            if action == BAD_NAME:
                problems[(printable(rel), _BAD_NAME)] = None
            if action == FOLDER and not last:
                continue
            if action == NOTE and last:
                files[rel] = VaultFile(rel, current, st.st_mtime_ns, st.st_size)
            break
    return ScanResult(sorted(files.values(), key=lambda f: f.path), list(problems))
