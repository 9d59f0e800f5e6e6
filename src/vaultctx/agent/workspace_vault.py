"""`WorkspaceVault`: the agents' `IndexedVault` over an open Workspace, in the turn's process.

Writes land here, after the guard allowed them, atomically (a temporary file beside the
note, then a rename): a note is either as it was or as written, never half-written; then
the note is re-indexed.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import VaultctxError
from ..permissions import Destination, confine
from ..storage.notefile import MARKDOWN, file_kind, read_note_file, read_vault_file

if TYPE_CHECKING:
    from .protocols import TurnWorkspace


def appended(existing: str, text: str) -> str:
    """`existing` with `text` as its new last lines (one newline between, one at the end)."""
    separator = "" if not existing or existing.endswith("\n") else "\n"
    return f"{existing}{separator}{text.rstrip()}\n"


def write_atomically(target: Path, text: str) -> None:
    """Replace `target`'s content in one rename; the temporary file sits beside it (same
    filesystem) and keeps the note's permissions."""
    temporary = target.with_name(f".{target.name}.vaultctx-{os.getpid()}.tmp")
    try:
        with temporary.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if target.exists():
            os.chmod(temporary, target.stat().st_mode & 0o7777)
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


class WorkspaceVault:
    """`IndexedVault` over an open Workspace: the warm select, the index as `destination`
    (the turn's model) may see it, and memory."""

    def __init__(self, ws: TurnWorkspace, destination: Destination = Destination.CLIENT) -> None:
        self.ws = ws
        self.root = ws.root
        self.destination = destination

    def select(self, query: str, k: int) -> list[dict[str, str | None]]:
        selection = self.ws.select(query, k=k, destination=self.destination)
        return [
            {"path": c.path, "heading": c.heading_path, "text": c.text}
            for c in selection.candidates
        ]

    def resolve(self, note: str) -> str:
        return self.ws.resolve_note(note, self.destination)[0]

    def neighbours(self, path: str, *, incoming: bool) -> list[dict[str, str]]:
        graph = self.ws.graph(self.destination)
        nodes = graph.predecessors(path) if incoming else graph.successors(path)
        return [{"path": n, "title": graph.titles.get(n, "")} for n in sorted(nodes)]

    def tagged(self, tag: str) -> list[dict[str, str]]:
        return [{"path": p, "title": t} for p, t in self.ws.view(self.destination).tagged(tag)]

    def read(self, path: str) -> str:
        return read_vault_file(self.root, path, lambda: self.indexed_sections(path)).content

    def indexed_sections(self, path: str) -> list[tuple[str, str]]:
        _, note_id = self.ws.resolve_note(path, self.destination)
        return self.ws.view(self.destination).note_sections(note_id)

    def create(self, path: str, text: str) -> bool:
        target = confine(self.root, path)
        if target.exists():
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, text)
        self.ws.index(paths=[path])
        return True

    def append(self, path: str, text: str) -> None:
        if file_kind(path) != MARKDOWN:  # text added to a PDF's bytes or a canvas's JSON
            raise VaultctxError(f"{path} is not a Markdown note: nothing is written to it")
        target = confine(self.root, path)
        if not target.is_file():  # a FIFO or device would hang or corrupt this process
            raise VaultctxError(f"{path} is not a regular file")
        write_atomically(target, appended(read_note_file(self.root, path).content, text))
        self.ws.index(paths=[path])

    def remember(self, text: str, tier: str, scope: str | None, source: dict[str, Any]) -> str:
        return self.ws.memory.add(text, tier=tier, scope=scope, source=source).id
