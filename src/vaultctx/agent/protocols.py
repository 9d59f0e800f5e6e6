"""The agent's ports: what its tools may do to the vault and ask of the guard, and what a turn
needs of the workspace it runs in. Narrow interfaces, so the agent layer never imports the
objects that provide them.

The agents never see the Workspace. In the turn's own process an `IndexedVault`
(`WorkspaceVault`, built by the request handler) answers over the warm index; in a
delegation's child process the same calls cross the pipe to the parent
(`agent.child.ParentLink`), except reading a note's file, which the child does itself so a
read that hangs (a FIFO, a stalled mount) hangs only a process that can be stopped (a
PDF's text, which is in the index, it asks the parent for).
`TurnWorkspace` is what the facade (`vaultctx.Workspace`) provides to a turn.

This module imports nothing heavy: a child process imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..config import Config
    from ..memory import MemoryService
    from ..permissions import VaultPolicy
    from ..permissions.capability import Capability
    from ..permissions.destination import Destination
    from ..permissions.view import IndexView
    from ..pipeline import Selection
    from ..pipeline.context import SessionContext
    from ..pipeline.models import Filters
    from ..storage.db import IndexDatabase
    from ..storage.graph import LinkGraph
    from ..storage.indexer import IndexReport
    from ..storage.sessions import SessionStore


@dataclass(frozen=True)
class Admission:
    """A tool call the guard let through: its validated arguments, and the resource (the
    confined vault path, or what else the tool touches) it was allowed on."""

    arguments: dict[str, Any]
    resource: str


class Guard(Protocol):
    """What a tool asks of the turn's permission guard."""

    def admit(self, tool: str, arguments: dict[str, Any]) -> Admission | dict[str, Any]:
        """The call's `Admission`, or its structured error (unknown tool, invalid
        arguments, a path outside the vault, a note not found, permission denied)."""
        ...

    def permits(self, capability: Capability, resource: str) -> bool:
        """Whether reading `resource` is allowed without asking: hidden results stay out."""
        ...


class VaultAccess(Protocol):
    """The vault and its index as tool handlers use them. Paths are vault-relative and
    already confined; writes are checked by the guard again where they are applied."""

    root: Path

    def select(self, query: str, k: int) -> list[dict[str, str | None]]:
        """Ranked passages: `path` (None for a memory), `heading`, `text`."""
        ...

    def neighbours(self, path: str, *, incoming: bool) -> list[dict[str, str]]:
        """Notes `path` links to (or, `incoming`, that link to it): `path`, `title`."""
        ...

    def tagged(self, tag: str) -> list[dict[str, str]]:
        """Notes carrying `tag`: `path`, `title`."""
        ...

    def read(self, path: str) -> str:
        """The file's readable text (`storage.notefile.read_vault_file`): a note's Markdown,
        a canvas's cards, a PDF's indexed pages."""
        ...

    def create(self, path: str, text: str) -> bool:
        """Write a new note; False (and nothing written) if `path` exists."""
        ...

    def append(self, path: str, text: str) -> None:
        """Add `text` as new last lines of an existing note."""
        ...

    def remember(self, text: str, tier: str, scope: str | None, source: dict[str, Any]) -> str:
        """Store a memory; its id."""
        ...


class IndexedVault(VaultAccess, Protocol):
    """`VaultAccess` in the turn's process, where the index is: it also finds notes by
    name, to admit a call's path and to gather a skill's linked notes."""

    def resolve(self, note: str) -> str:
        """The indexed note's path (by path, title or alias); `NoteNotFound` otherwise."""
        ...

    def indexed_sections(self, path: str) -> list[tuple[str, str]]:
        """(heading path, text) of each block the index holds of the file at `path` (what
        a PDF reads as); `NoteNotFound` for a file the turn's model may not see."""
        ...


class TurnWorkspace(Protocol):
    """An open vault with select, refine and memory: the index the agents read, search and
    (through permitted writes) change."""

    root: Path
    config: Config
    db: IndexDatabase
    policy: VaultPolicy
    sessions: SessionStore  # where the turn's session is kept

    def view(self, destination: Destination | None = None) -> IndexView:
        """The index as what goes to `destination` may see it (default: where the
        workspace's answers go)."""
        ...

    @property
    def memory(self) -> MemoryService: ...

    def select(
        self,
        query: str,
        *,
        k: int = 10,
        filters: Filters | dict[str, Any] | None = None,
        max_per_note: int = 3,
        destination: Destination | None = None,
    ) -> Selection:
        """Select, as what goes to `destination` may see it (default: where the workspace's
        answers go)."""
        ...

    def context(self, query: str, *, model: str | None = None) -> SessionContext: ...

    def resolve_note(self, note: str, destination: Destination | None = None) -> tuple[str, int]:
        """(path, id) of the note `note` names in `destination`'s view; `NoteNotFound`
        otherwise, for a hidden note as for a missing one."""
        ...

    def graph(self, destination: Destination | None = None) -> LinkGraph:
        """The link graph of `destination`'s view."""
        ...

    def index(self, *, paths: list[str] | None = None) -> IndexReport: ...

    def require_index(self) -> None: ...
