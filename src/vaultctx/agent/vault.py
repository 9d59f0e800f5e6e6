"""What the agents' tools may do to the vault and ask of the guard: two narrow interfaces.

Tools never see the Workspace. In the turn's own process `WorkspaceVault` answers over the
warm index; in a delegation's child process the same calls cross the pipe to the parent
(`agent.child.ParentLink`), except reading a note's file, which the child does itself so a
read that hangs (a FIFO, a stalled mount) hangs only a process that can be stopped.

Writes are applied in the parent, after its guard allowed them, and atomically (temporary
file, then rename): a note is either as it was or as written, never half-written.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import VaultctxError
from ..permissions import Capability, confine

if TYPE_CHECKING:
    from ..workspace import Workspace


class Guard(Protocol):
    """The part of `PermissionGuard` a tool uses."""

    def require(self, capability: Capability, resource: str) -> object: ...

    def permits(self, capability: Capability, resource: str) -> bool: ...


class VaultAccess(Protocol):
    """The vault and its index as tools use them. Paths are vault-relative and confined."""

    root: Path

    def select(self, query: str, k: int) -> list[dict[str, str | None]]:
        """Ranked passages: `path` (None for a memory), `heading`, `text`."""
        ...

    def resolve(self, note: str) -> str:
        """The indexed note's path (by path, title or alias); `NoteNotFound` otherwise."""
        ...

    def neighbours(self, path: str, *, incoming: bool) -> list[dict[str, str]]:
        """Notes `path` links to (or, `incoming`, that link to it): `path`, `title`."""
        ...

    def tagged(self, tag: str) -> list[dict[str, str]]:
        """Notes carrying `tag`: `path`, `title`."""
        ...

    def read(self, path: str) -> str: ...

    def create(self, path: str, text: str) -> bool:
        """Write a new note; False (and nothing written) if `path` exists."""
        ...

    def append(self, path: str, text: str) -> None:
        """Add `text` as new last lines of an existing note."""
        ...

    def remember(self, text: str, tier: str, scope: str | None, source: dict[str, Any]) -> str:
        """Store a memory; its id."""
        ...


def read_note_text(root: Path, path: str) -> str:
    return (root / path).read_text(encoding="utf-8", errors="replace")


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
    """`VaultAccess` over an open Workspace: the warm select, the index and memory."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.root = ws.root

    def select(self, query: str, k: int) -> list[dict[str, str | None]]:
        selection = self.ws.select(query, k=k)
        return [
            {"path": c.path, "heading": c.heading_path, "text": c.text}
            for c in selection.candidates
        ]

    def resolve(self, note: str) -> str:
        return self.ws.resolve_note(note)[0]

    def neighbours(self, path: str, *, incoming: bool) -> list[dict[str, str]]:
        graph = self.ws.graph()
        nodes = graph.predecessors(path) if incoming else graph.successors(path)
        return [{"path": n, "title": graph.nodes[n].get("title", "")} for n in sorted(nodes)]

    def tagged(self, tag: str) -> list[dict[str, str]]:
        rows = self.ws.db.connect().execute(
            "SELECT n.path, n.title FROM tags t JOIN notes n ON n.id = t.note_id"
            " WHERE t.tag = ? ORDER BY n.path",
            (tag,),
        )
        return [{"path": p, "title": t} for p, t in rows]

    def read(self, path: str) -> str:
        return read_note_text(self.root, path)

    def create(self, path: str, text: str) -> bool:
        target = confine(self.root, path)
        if target.exists():
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, text)
        self.ws.index(paths=[path])
        return True

    def append(self, path: str, text: str) -> None:
        target = confine(self.root, path)
        if not target.is_file():  # a FIFO or device would hang or corrupt this process
            raise VaultctxError(f"{path} is not a regular file")
        write_atomically(target, appended(read_note_text(self.root, path), text))
        self.ws.index(paths=[path])

    def remember(self, text: str, tier: str, scope: str | None, source: dict[str, Any]) -> str:
        return self.ws.memory.add(text, tier=tier, scope=scope, source=source).id
