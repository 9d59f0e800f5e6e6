"""The operations every door offers, declared once: what each takes (its arguments, filters
and bounds) and the JSON it answers.

Each request model is a door's input as it is: the HTTP route's JSON body (`/select`), the
MCP tool's input schema (`select`, generated from the fields) and the CLI command's options
(`vaultctx select`, each option named as its field). A door reads a request, calls
`answer(workspace)` and sends the dict on; only how it says an error is its own (a usage
line at the CLI, a 422 over HTTP, an `is_error` result over MCP), with the same bound and
the same words from the model's validation.

Every `k` is held to 1..`MAX_K` at every door: past that, a select's candidates stop
helping a reader or a model and only cost time. The Python API (`Workspace.select(k=...)`)
takes any `k`.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from .pipeline.models import CandidateKind
from .workspace import Filters, MemoryKind, Tier

if TYPE_CHECKING:
    from .workspace import Memory, Workspace

MAX_K = 100
# The fields that choose a model: what is sent to a model, and with whose credentials, is the
# owner's choice — a team member's HTTP request naming one is refused, an MCP client's model
# is not offered one.
MODEL_CHOICES = frozenset({"model"})


class Request(BaseModel):
    """One door operation's arguments. `name` is the operation: the MCP tool's name, and
    its HTTP route with `_` as `/` (`memory_search`: `POST /memory/search`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ClassVar[str]

    def run(self, ws: Workspace) -> Any:
        """The operation's result, as the Python API gives it."""
        raise NotImplementedError

    def respond(self, result: Any) -> dict[str, Any]:
        """The JSON answer every door gives for `result`."""
        return result.contract()

    def answer(self, ws: Workspace) -> dict[str, Any]:
        return self.respond(self.run(ws))


def count(default: int, what: str) -> Any:
    """A `k`: at least 1, at most `MAX_K`."""
    return Field(default, ge=1, le=MAX_K, description=f"how many {what} (1 to {MAX_K})")


class FilterFields(BaseModel):
    """What a select may return: the CLI's --path, --tag, --field, --since, --until, --kind."""

    path: str | None = Field(None, description="folder ('Journal') or glob ('Journal/2025-*')")
    tags: list[str] = Field(
        default_factory=list, description="only notes carrying every one of these tags"
    )
    fields: dict[str, str] = Field(
        default_factory=dict, description="frontmatter field equals value (lists: contains)"
    )
    since: _dt.datetime | None = Field(
        None, description="modified on or after (ISO date or datetime; naive: local time)"
    )
    until: _dt.datetime | None = Field(
        None, description="modified before (ISO date or datetime; naive: local time)"
    )
    kinds: list[CandidateKind] = Field(default_factory=list, description="candidate kinds to keep")

    def filters(self) -> Filters:
        """Naive dates mean local time (`Filters` reads them)."""
        return Filters(
            path=self.path,
            tags=tuple(self.tags),
            frontmatter=self.fields,
            modified_after=self.since,
            modified_before=self.until,
            kinds=tuple(self.kinds),
        )


NO_VECTORS = "lexical and graph only: never loads the embedding model"
EXPLAIN = "add the FTS query, graph seeds and ranks"


class SelectRequest(Request, FilterFields):
    name = "select"

    query: str = Field(description="what to find")
    k: int = count(10, "candidates")
    no_vectors: bool = Field(False, description=NO_VECTORS)
    explain: bool = Field(False, description=EXPLAIN)

    def run(self, ws: Workspace) -> Any:
        return ws.select(
            self.query,
            k=self.k,
            filters=self.filters(),
            use_vectors=not self.no_vectors,
            explain=self.explain,
        )


class RelatedRequest(Request):
    name = "related"

    note: str = Field(description="the note: vault path, file name, title or alias")
    k: int = count(10, "notes")
    no_vectors: bool = Field(False, description=NO_VECTORS)
    explain: bool = Field(False, description=EXPLAIN)
    touch: bool = Field(False, description="record the note as open first, as an editor does")

    def run(self, ws: Workspace) -> Any:
        return ws.related(
            self.note,
            k=self.k,
            use_vectors=not self.no_vectors,
            explain=self.explain,
            touch=self.touch,
        )


class ContextRequest(Request, FilterFields):
    name = "context"

    query: str = Field(description="the task or question")
    budget: int | None = Field(
        None, ge=1, description="token budget (default: config budget_tokens)"
    )
    model: str | None = Field(None, description="litellm model for the gate (default: llm_model)")
    k: int = count(30, "candidates select proposes")
    no_vectors: bool = Field(False, description=NO_VECTORS)

    def arguments(self) -> dict[str, Any]:
        """What `Workspace.context` and `Workspace.gate_request` take besides the budget."""
        return {
            "model": self.model,
            "k": self.k,
            "filters": self.filters(),
            "use_vectors": not self.no_vectors,
        }

    def run(self, ws: Workspace) -> Any:
        return ws.context(self.query, budget_tokens=self.budget, **self.arguments())


class MemorySearchRequest(Request):
    name = "memory_search"

    query: str = Field(description="what to recall")
    k: int = count(10, "memories")
    tier: Tier | None = Field(None, description="only this tier")
    scope: str | None = Field(None, description="session, channel, vault or user id of the tier")
    session: str | None = Field(None, description="also see this conversation's memories")
    channel: str | None = Field(None, description="also see this channel's memories")

    def run(self, ws: Workspace) -> list[Memory]:
        return ws.memory.search(
            self.query, k=self.k, tier=self.tier, scope=self.scope,
            session_id=self.session, channel=self.channel,
        )  # fmt: skip

    def respond(self, result: list[Memory]) -> dict[str, Any]:
        return {"query": self.query, "memories": [m.to_dict() for m in result]}


class MemoryAddRequest(Request):
    name = "memory_add"

    text: str = Field(description="what to remember")
    tier: Tier = Field(Tier.WORKSPACE, description="the tier it is kept in")
    scope: str | None = Field(None, description="session or channel id (needed for those tiers)")
    kind: MemoryKind | None = Field(None, description="default: semantic (episodic for a turn)")
    importance: float | None = Field(None, ge=0, le=1, description="default: a heuristic")
    speaker: str | None = Field(None, description="text is a turn this person said")
    session: str | None = Field(None, description="the conversation session of the turn")
    turn: str | None = Field(None, description="the turn's id in its session")
    created_at: str | float | None = Field(
        None, description="when it was said or learnt (ISO 8601 or epoch seconds; default now)"
    )

    def run(self, ws: Workspace) -> Memory:
        return ws.memory.add(
            self.text, tier=self.tier, scope=self.scope, kind=self.kind,
            importance=self.importance, speaker=self.speaker, session=self.session,
            turn=self.turn, created_at=self.created_at,
        )  # fmt: skip

    def respond(self, result: Memory) -> dict[str, Any]:
        return result.to_dict()


class TouchRequest(Request):
    name = "touch"

    note: str = Field(description="the note: vault path, file name, title or alias")
    kind: Literal["touch", "open"] = Field(
        "touch", description="open: shown in an editor; touch: worked on"
    )

    def run(self, ws: Workspace) -> str:
        return ws.touch(self.note, kind=self.kind)

    def respond(self, result: str) -> dict[str, Any]:
        return {"path": result, "touched": True}


class FocusRequest(Request):
    name = "focus"

    def run(self, ws: Workspace) -> Any:
        return ws.focus()


class ClearFocusRequest(Request):
    name = "clear_focus"

    def run(self, ws: Workspace) -> Any:
        return ws.clear_focus()


OPERATIONS: dict[str, type[Request]] = {
    r.name: r
    for r in (
        SelectRequest, RelatedRequest, ContextRequest, MemorySearchRequest, MemoryAddRequest,
        TouchRequest, FocusRequest, ClearFocusRequest,
    )
}  # fmt: skip
