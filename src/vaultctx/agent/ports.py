"""`TurnWorkspace`: what an agent turn needs of the workspace it runs in.

The facade (`vaultctx.Workspace`) provides it; the agent layer sits below the facade and
names only this protocol, so it never imports the object that composes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import networkx as nx

    from ..config import Config
    from ..memory import AgentMemoryFacade
    from ..permissions import VaultPolicy
    from ..pipeline import Selection
    from ..pipeline.context import SessionContext
    from ..workspace.db import IndexDatabase
    from ..workspace.indexer import IndexReport


class TurnWorkspace(Protocol):
    """An open vault with select, refine and memory: the index the agents read, search and
    (through permitted writes) change."""

    root: Path
    config: Config
    db: IndexDatabase
    policy: VaultPolicy

    @property
    def memory(self) -> AgentMemoryFacade: ...

    def select(self, query: str, *, k: int = 10) -> Selection: ...

    def context(self, query: str, *, model: str | None = None) -> SessionContext: ...

    def resolve_note(self, note: str) -> tuple[str, int]: ...

    def graph(self) -> nx.DiGraph: ...

    def index(self, *, paths: list[str] | None = None) -> IndexReport: ...

    def require_index(self) -> None: ...
