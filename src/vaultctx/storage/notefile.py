"""Reading one note's file for a client or a model: the one way every door does it.

Imports only the standard library: an agent's child process reads notes with it.
"""

from __future__ import annotations

import os
import stat
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
    """A note's Markdown as read from disk; `truncated` when it went past the limit."""

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
    if max_chars is not None and len(content) > max_chars:
        return NoteText(path, content[:max_chars], truncated=True)
    return NoteText(path, content)


def is_pdf(path: str) -> bool:
    return path.lower().endswith(".pdf")


def pdf_note_text(
    path: str, sections: list[tuple[str, str]], max_chars: int | None = None
) -> NoteText:
    """A PDF's indexed text as Markdown: a heading per page block (`## Intro > page 3`)."""
    content = "\n\n".join(
        f"## {heading}\n\n{text}" if heading else text for heading, text in sections
    )
    if max_chars is not None and len(content) > max_chars:
        return NoteText(path, content[:max_chars], truncated=True)
    return NoteText(path, content)
