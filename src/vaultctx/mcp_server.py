"""`vaultctx mcp`: the vault as context tools for AI desktop clients (MCP, stdio).

Built on the official MCP Python SDK (`MCPServer`). No tool here changes a note: the search
tools only read the vault and its index and say so with `readOnlyHint`; `touch` records in
the index which note the user has open. Tools that change notes belong to the agent, behind
its PermissionGuard, and are not exposed here.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from ._version import __version__
from .errors import VaultctxError
from .workspace import Filters, Workspace

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# context may ask the configured LLM to choose what to keep: read-only, but not closed-world.
READ_ONLY_WITH_LLM = ToolAnnotations(read_only_hint=True, destructive_hint=False)
# touch writes one row to the index (never to the vault); touching again only refreshes it.
RECORDS_CONTEXT = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
MAX_NOTE_CHARS = 200_000
TierName = Literal["conversation", "channel", "workspace", "account"]
F = TypeVar("F", bound=Callable[..., Any])


def tool_errors(fn: F) -> F:
    """A tool whose expected failures reach the client as the CLI states them — the error's
    type and message, as an `is_error` result — and never as a traceback on stderr."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            json.dumps([args, kwargs], ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:  # JSON may spell a lone surrogate ("\ud800")
            raise ToolError("InvalidQuery: the text is not valid Unicode") from None
        try:
            return fn(*args, **kwargs)
        except VaultctxError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from None

    return wrapper  # type: ignore[return-value]


def create_mcp_server(workspace: Workspace, *, use_vectors: bool = True) -> MCPServer:
    """An MCP server over `workspace`. `use_vectors=False` keeps select lexical and graph
    only, so the embedding model is never loaded (low-end machines, tests)."""
    ws = workspace
    server = MCPServer(
        "vaultctx",
        version=__version__,
        instructions=(
            f"Context from the Markdown vault at {ws.root}. Call `select` with a question to"
            " find the most relevant passages (with their note paths), then `read_note` to"
            " read a whole note."
        ),
    )

    @server.tool(title="Select context from the vault", annotations=READ_ONLY)
    @tool_errors
    def select(
        query: str,
        k: int = 10,
        path: str | None = None,
        tags: list[str] | None = None,
    ) -> dict[str, Any]:
        """Rank the vault's passages for `query` (full-text, embeddings and the link graph,
        fused). `path` keeps one folder or glob ('Journal/2025-*'); `tags` keeps notes
        carrying all of these tags. Returns candidates with path, heading, text and score."""
        selection = ws.select(
            query,
            k=max(1, min(k, 100)),
            filters=Filters(path=path, tags=tuple(tags or ())),
            use_vectors=use_vectors,
        )
        return selection.contract()

    @server.tool(title="Notes related to a note", annotations=READ_ONLY)
    @tool_errors
    def related(note: str, k: int = 10) -> dict[str, Any]:
        """The notes that matter for one note (vault path, file name, title or alias): its
        words, its meaning and its links as the query, the note itself left out; one
        passage per note, with path, heading, text, score and which retrievers found it."""
        selection = ws.related(note, k=max(1, min(k, 100)), use_vectors=use_vectors)
        return selection.contract()

    @server.tool(title="Read a note", annotations=READ_ONLY)
    @tool_errors
    def read_note(note: str) -> dict[str, Any]:
        """The full Markdown of one note, named by its vault path, file name, title or alias."""
        return ws.read_note(note, max_chars=MAX_NOTE_CHARS).to_dict()

    @server.tool(title="Context for a task, within a token budget", annotations=READ_ONLY_WITH_LLM)
    @tool_errors
    def context(query: str, budget: Annotated[int, Field(ge=1)] | None = None) -> dict[str, Any]:
        """The passages worth giving a model for `query`, trimmed to `budget` tokens (default:
        the vault's config), with a hash that identifies this exact context."""
        session = ws.context(query, budget_tokens=budget, use_vectors=use_vectors)
        return session.contract()

    @server.tool(title="Say which note is open", annotations=RECORDS_CONTEXT)
    @tool_errors
    def touch(note: str) -> dict[str, Any]:
        """Record that the user opened or is working on `note` (vault path, file name, title
        or alias), e.g. the note open in the editor. Later selects favour the notes it links
        to when a question could mean several; the most recent touch counts most."""
        return {"path": ws.touch(note), "touched": True}

    @server.tool(title="Search memories", annotations=READ_ONLY)
    @tool_errors
    def memory_search(
        query: str, k: int = 10, tier: TierName | None = None, scope: str | None = None
    ) -> dict[str, Any]:
        """Facts, events and preferences remembered about this vault and its user, ranked
        for `query` — or only those of one `tier` (conversation, channel, workspace,
        account) and `scope` (its session, channel, vault or user id)."""
        memories = ws.memory.search(query, k=max(1, min(k, 100)), tier=tier, scope=scope)
        return {"query": query, "memories": [m.to_dict() for m in memories]}

    return server
