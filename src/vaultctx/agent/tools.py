"""Every tool the agents can call, defined once: name, description, pydantic arguments (the
JSON schema the model sees), the capability it needs, and its handler.

`execute` is the only way a tool runs: it validates arguments, confines paths to the vault,
calls `PermissionGuard.require` and turns every failure into a structured error for the
model, so a bad call never ends the turn.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from ..errors import NoteNotFound, PathOutsideVault, PermissionDenied, VaultctxError
from ..llm import ToolCall
from ..permissions import Capability, PermissionGuard, vault_relative
from .registers import ToolCallRecord

if TYPE_CHECKING:
    from ..workspace import Workspace

SNIPPET_CHARS = 300
MAX_NOTE_CHARS = 8000
TAG = re.compile(r"^[\w/-]+$")


@dataclass
class ToolContext:
    """What a handler may use: the vault, the guard, and the session it acts in.

    `delegate` answers `investigate` (the Orchestrator's Researcher). `cancelled` is set
    when the run timed out: later calls return an error instead of acting."""

    ws: Workspace
    guard: PermissionGuard
    session_id: str
    agent: str = "orchestrator"
    delegate: Callable[[str], dict[str, Any]] | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)


Handler = Callable[[ToolContext, Any, str], dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    """One tool. `path_arg` names the argument holding a vault path: `execute` confines it
    and the guard sees the confined path; `must_exist` resolves it to an indexed note."""

    name: str
    description: str
    args: type[BaseModel]
    capability: Capability
    handler: Handler
    path_arg: str | None = None
    must_exist: bool = False

    def schema(self) -> dict[str, Any]:
        """The OpenAI-format function schema."""
        parameters = self.args.model_json_schema()
        parameters.pop("title", None)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }


# --- arguments ------------------------------------------------------------------------------


class SelectArgs(BaseModel):
    query: str = Field(description="what to search for in the vault")
    k: int = Field(5, ge=1, le=20, description="how many passages")


class NoteArgs(BaseModel):
    path: str = Field(description="vault-relative note path, e.g. Projects/Garden.md")


class TagArgs(BaseModel):
    tag: str = Field(description="tag without '#', e.g. project")


class CreateNoteArgs(BaseModel):
    path: str = Field(description="vault-relative path of the new note (.md added if missing)")
    content: str = Field(description="the note's Markdown text")


class AppendArgs(BaseModel):
    path: str = Field(description="vault-relative path of an existing note")
    text: str = Field(description="Markdown to append at the end of the note")


class AddTagArgs(BaseModel):
    path: str = Field(description="vault-relative path of an existing note")
    tag: str = Field(description="tag without '#'")


class MemoryArgs(BaseModel):
    text: str = Field(description="the fact or preference to remember, one sentence")
    tier: Literal["conversation", "workspace", "account"] = Field(
        "workspace", description="account: about the user, for every vault"
    )


class InvestigateArgs(BaseModel):
    question: str = Field(description="one focused question for the researcher")


# --- handlers -------------------------------------------------------------------------------


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SNIPPET_CHARS else flat[:SNIPPET_CHARS] + "…"


def _readable(ctx: ToolContext, path: str | None) -> bool:
    """Results a read policy hides never reach the model, whatever tool found them."""
    return path is None or ctx.guard.permits(Capability.VAULT_READ, path)


def _select(ctx: ToolContext, args: SelectArgs, _: str) -> dict[str, Any]:
    selection = ctx.ws.select(args.query, k=args.k)
    return {
        "results": [
            {"path": c.path, "heading": c.heading_path, "text": _snippet(c.text)}
            for c in selection.candidates
            if _readable(ctx, c.path)
        ]
    }


def _read_note(ctx: ToolContext, _: NoteArgs, path: str) -> dict[str, Any]:
    text = (ctx.ws.root / path).read_text(encoding="utf-8", errors="replace")
    truncated = len(text) > MAX_NOTE_CHARS
    return {"path": path, "content": text[:MAX_NOTE_CHARS], "truncated": truncated}


def _neighbours(ctx: ToolContext, path: str, *, incoming: bool) -> dict[str, Any]:
    graph = ctx.ws.graph()
    nodes = graph.predecessors(path) if incoming else graph.successors(path)
    return {
        "path": path,
        "notes": [
            {"path": n, "title": graph.nodes[n].get("title", "")}
            for n in sorted(nodes)
            if _readable(ctx, n)
        ],
    }


def _follow_links(ctx: ToolContext, _: NoteArgs, path: str) -> dict[str, Any]:
    return _neighbours(ctx, path, incoming=False)


def _backlinks(ctx: ToolContext, _: NoteArgs, path: str) -> dict[str, Any]:
    return _neighbours(ctx, path, incoming=True)


def _list_by_tag(ctx: ToolContext, args: TagArgs, _: str) -> dict[str, Any]:
    tag = args.tag.strip().lstrip("#").lower()
    rows = ctx.ws.db.connect().execute(
        "SELECT n.path, n.title FROM tags t JOIN notes n ON n.id = t.note_id"
        " WHERE t.tag = ? ORDER BY n.path",
        (tag,),
    )
    return {"tag": tag, "notes": [{"path": p, "title": t} for p, t in rows if _readable(ctx, p)]}


def _reindexed(ctx: ToolContext, path: str, output: dict[str, Any]) -> dict[str, Any]:
    ctx.ws.index(paths=[path])
    return output


def _create_note(ctx: ToolContext, args: CreateNoteArgs, path: str) -> dict[str, Any]:
    target = ctx.ws.root / path
    if target.exists():
        return {"error": "exists", "path": path, "message": "use append_to_note"}
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("x", encoding="utf-8") as handle:
        handle.write(args.content if args.content.endswith("\n") else args.content + "\n")
    return _reindexed(ctx, path, {"created": path})


def _append_text(ctx: ToolContext, path: str, text: str) -> None:
    target = ctx.ws.root / path
    existing = target.read_text(encoding="utf-8", errors="replace")
    separator = "" if not existing or existing.endswith("\n") else "\n"
    with target.open("a", encoding="utf-8") as handle:
        handle.write(f"{separator}{text.rstrip()}\n")


def _append_to_note(ctx: ToolContext, args: AppendArgs, path: str) -> dict[str, Any]:
    _append_text(ctx, path, "\n" + args.text)
    return _reindexed(ctx, path, {"appended": path, "chars": len(args.text)})


def _add_tag(ctx: ToolContext, args: AddTagArgs, path: str) -> dict[str, Any]:
    tag = args.tag.strip().lstrip("#")
    if not TAG.match(tag):
        return {"error": "invalid_arguments", "message": f"not a tag: {args.tag!r}"}
    _append_text(ctx, path, f"#{tag}")
    return _reindexed(ctx, path, {"tagged": path, "tag": tag})


def _write_memory(ctx: ToolContext, args: MemoryArgs, _: str) -> dict[str, Any]:
    scope = ctx.session_id if args.tier == "conversation" else None
    memory = ctx.ws.memory.add(
        args.text,
        tier=args.tier,
        scope=scope,
        source={"session_id": ctx.session_id, "origin": "agent"},
    )
    return {"remembered": memory.id, "tier": args.tier}


def _investigate(ctx: ToolContext, args: InvestigateArgs, _: str) -> dict[str, Any]:
    if ctx.delegate is None:
        return {"error": "unknown_tool", "message": "investigate is the orchestrator's tool"}
    return ctx.delegate(args.question)


READ_TOOLS: tuple[Tool, ...] = (
    Tool("select", "Search the vault; returns matching passages with their note paths.",
         SelectArgs, Capability.VAULT_READ, _select),
    Tool("read_note", "Read a note's full Markdown text.", NoteArgs, Capability.VAULT_READ,
         _read_note, path_arg="path", must_exist=True),
    Tool("follow_links", "List the notes a note links to.", NoteArgs, Capability.VAULT_READ,
         _follow_links, path_arg="path", must_exist=True),
    Tool("backlinks", "List the notes that link to a note.", NoteArgs, Capability.VAULT_READ,
         _backlinks, path_arg="path", must_exist=True),
    Tool("list_by_tag", "List the notes carrying a tag.", TagArgs, Capability.VAULT_READ,
         _list_by_tag),
)  # fmt: skip

WRITE_TOOLS: tuple[Tool, ...] = (
    Tool("create_note", "Create a new note.", CreateNoteArgs, Capability.VAULT_WRITE,
         _create_note, path_arg="path"),
    Tool("append_to_note", "Append text to the end of an existing note.", AppendArgs,
         Capability.VAULT_WRITE, _append_to_note, path_arg="path", must_exist=True),
    Tool("add_tag", "Add a #tag to an existing note.", AddTagArgs, Capability.VAULT_WRITE,
         _add_tag, path_arg="path", must_exist=True),
    Tool("write_memory", "Remember a fact or preference for later conversations.",
         MemoryArgs, Capability.MEMORY_WRITE, _write_memory),
)  # fmt: skip

INVESTIGATE = Tool(
    "investigate",
    "Delegate an investigation to the researcher, who reads notes and follows links; "
    "returns findings with the notes they come from.",
    InvestigateArgs,
    Capability.VAULT_READ,
    _investigate,
)

VAULT_TOOLS: tuple[Tool, ...] = READ_TOOLS + WRITE_TOOLS
ORCHESTRATOR_TOOLS: tuple[Tool, ...] = (*VAULT_TOOLS, INVESTIGATE)


def _resource(ctx: ToolContext, tool: Tool, args: BaseModel) -> str:
    """The guard's resource: the confined vault path, or what else the tool touches."""
    if tool.path_arg is None:
        if tool.capability is Capability.MEMORY_WRITE:
            return f"memory:{getattr(args, 'tier', 'workspace')}"
        return "*"
    raw = str(getattr(args, tool.path_arg))
    if tool.name == "create_note" and not raw.lower().endswith(".md"):
        raw += ".md"
    rel = vault_relative(ctx.ws.root, raw)
    if tool.must_exist:
        rel = vault_relative(ctx.ws.root, ctx.ws.resolve_note(rel)[0])
    return rel


def execute(call: ToolCall, tools: Mapping[str, Tool], ctx: ToolContext) -> ToolCallRecord:
    """Run one tool call under the guard; the output is the result or a structured error."""
    return ToolCallRecord(call.id, call.name, call.arguments, _run(call, tools, ctx), ctx.agent)


def _run(call: ToolCall, tools: Mapping[str, Tool], ctx: ToolContext) -> dict[str, Any]:
    tool = tools.get(call.name)
    if tool is None:
        return {"error": "unknown_tool", "message": f"no tool named {call.name!r}"}
    if ctx.cancelled.is_set():
        return {"error": "cancelled", "message": "the run timed out before this call"}
    try:
        args = tool.args.model_validate(call.arguments)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "arguments"
        return {"error": "invalid_arguments", "message": f"{where}: {first['msg']}"}
    try:
        resource = _resource(ctx, tool, args)
        ctx.guard.require(tool.capability, resource)
        if ctx.cancelled.is_set():  # the person may have answered after the deadline
            return {"error": "cancelled", "message": "the run timed out before this call"}
        return tool.handler(ctx, args, resource)
    except (PermissionDenied, PathOutsideVault) as exc:
        return exc.to_dict()
    except NoteNotFound as exc:
        return {"error": "note_not_found", "message": str(exc)}
    except VaultctxError as exc:
        return {"error": "tool_failed", "message": str(exc)}
    except Exception as exc:  # a tool bug is the model's error result, not the turn's end
        return {"error": "tool_failed", "message": f"{type(exc).__name__}: {exc}"}


def schemas(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    return [tool.schema() for tool in tools]
