"""Reading one vault file for a client or a model: the one way every door does it, for a
note, a canvas or a PDF (`read_vault_file`).

Imports only the standard library: an agent's child process reads notes with it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import NoteNotFound

MARKDOWN, PDF, CANVAS = ".md", ".pdf", ".canvas"
INDEXED_SUFFIXES = (MARKDOWN, PDF, CANVAS)
"""The files the index holds: notes, and the PDFs and canvases kept beside them."""


def file_kind(name: str) -> str:
    """The suffix of an indexed file's name (`MARKDOWN`, `PDF`, `CANVAS`), or ''."""
    lower = name.lower()
    return next((suffix for suffix in INDEXED_SUFFIXES if lower.endswith(suffix)), "")


@dataclass(frozen=True)
class NoteText:
    """A vault file's readable text (`read_vault_file`); `truncated` when it went past the
    limit."""

    path: str
    content: str
    truncated: bool = False

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "content": self.content, "truncated": self.truncated}


def read_note_file(root: Path, path: str, max_chars: int | None = None) -> NoteText:
    """The text of the vault-relative note `path` (decoded as UTF-8 with replacement
    characters), at most `max_chars` characters of it.

    Only a regular file is read, opened without blocking: a FIFO or a device put where a
    note was never hangs the reader. Vanished or unreadable files are `NoteNotFound`."""
    try:
        fd = os.open(root / path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise NoteNotFound(f"cannot read {path}: {exc.strerror or exc}") from exc
    with open(fd, encoding="utf-8", errors="replace", closefd=True) as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NoteNotFound(f"{path} is not a regular file")
        content = handle.read(-1 if max_chars is None else max_chars + 1)
    return _cut(path, content, max_chars)


IndexedSections = Callable[[], Sequence[tuple[str, str]]]
"""(heading path, text) of each of a file's blocks as the index holds them, in order."""


def read_vault_file(
    root: Path, path: str, indexed: IndexedSections, max_chars: int | None = None
) -> NoteText:
    """The readable text of the indexed vault file `path`, as every door gives it to a
    client or a model: a note's Markdown as on disk now; a canvas's cards and edges as
    Markdown, from disk now (`canvas_markdown`); a PDF's text as the index read it, a
    section a page (`## Results > page 3`), since its bytes are no text. `indexed` is
    asked only for a PDF; at most `max_chars` characters."""
    kind = file_kind(path)
    if kind == PDF:
        return _cut(path, _sections_markdown(indexed()), max_chars)
    if kind == CANVAS:
        from .canvas import canvas_markdown  # the note parser's parts: only for a canvas

        return _cut(path, canvas_markdown(read_note_file(root, path).content), max_chars)
    return read_note_file(root, path, max_chars)


def _sections_markdown(sections: Iterable[tuple[str, str]]) -> str:
    """Blocks as Markdown: a heading for each heading path (once for the blocks of a long
    page), then their text."""
    parts: list[str] = []
    last: str | None = None
    for heading, text in sections:
        if heading and heading != last:
            parts.append(f"## {heading}")
        last = heading
        if text:
            parts.append(text)
    return "\n\n".join(parts) + "\n" if parts else ""


def _cut(path: str, content: str, max_chars: int | None) -> NoteText:
    if max_chars is not None and len(content) > max_chars:
        return NoteText(path, content[:max_chars], truncated=True)
    return NoteText(path, content)
