"""Every tool the agents can call, defined once: name, description, pydantic arguments (the
JSON schema the model sees), the capability it needs, and its handler.

`execute` is the only way a tool runs: it validates arguments, confines paths to the vault,
calls the guard's `require` and turns every failure into a structured error for the model,
so a bad call never ends the turn. Handlers reach the vault only through `VaultAccess`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from ..errors import NoteNotFound, PathOutsideVault, PermissionDenied, VaultctxError
from ..llm import ToolCall
from ..permissions import Capability, vault_relative
from .registers import ToolCallRecord
from .vault import Guard, VaultAccess

SNIPPET_CHARS = 300
MAX_NOTE_CHARS = 8000
TAG = re.compile(r"^[\w/-]+$")


@dataclass
class ToolContext:
    """What a handler may use: the vault, the guard, and the session it acts in.

    `cancelled` is set when a run in a thread timed out (a thread cannot be stopped): later
    calls return an error instead of acting. A child process is stopped instead."""

    vault: VaultAccess
    guard: Guard
    session_id: str
    agent: str = "orchestrator"
    cancelled: threading.Event = field(default_factory=threading.Event)


Handler = Callable[[ToolContext, Any, str], dict[str, Any]]


def function_schema(name: str, description: str, args: type[BaseModel]) -> dict[str, Any]:
    """The OpenAI-format function schema of a tool taking `args`."""
    parameters = args.model_json_schema()
    parameters.pop("title", None)
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


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
        return function_schema(self.name, self.description, self.args)


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
    return {
        "results": [
            {"path": hit["path"], "heading": hit["heading"], "text": _snippet(hit["text"] or "")}
            for hit in ctx.vault.select(args.query, args.k)
            if _readable(ctx, hit["path"])
        ]
    }


def _read_note(ctx: ToolContext, _: NoteArgs, path: str) -> dict[str, Any]:
    text = ctx.vault.read(path)
    truncated = len(text) > MAX_NOTE_CHARS
    return {"path": path, "content": text[:MAX_NOTE_CHARS], "truncated": truncated}


def _neighbours(ctx: ToolContext, path: str, *, incoming: bool) -> dict[str, Any]:
    notes = ctx.vault.neighbours(path, incoming=incoming)
    return {"path": path, "notes": [n for n in notes if _readable(ctx, n["path"])]}


def _follow_links(ctx: ToolContext, _: NoteArgs, path: str) -> dict[str, Any]:
    return _neighbours(ctx, path, incoming=False)


def _backlinks(ctx: ToolContext, _: NoteArgs, path: str) -> dict[str, Any]:
    return _neighbours(ctx, path, incoming=True)


def _list_by_tag(ctx: ToolContext, args: TagArgs, _: str) -> dict[str, Any]:
    tag = args.tag.strip().lstrip("#").lower()
    notes = ctx.vault.tagged(tag)
    return {"tag": tag, "notes": [n for n in notes if _readable(ctx, n["path"])]}


def _create_note(ctx: ToolContext, args: CreateNoteArgs, path: str) -> dict[str, Any]:
    text = args.content if args.content.endswith("\n") else args.content + "\n"
    if not ctx.vault.create(path, text):
        return {"error": "exists", "path": path, "message": "use append_to_note"}
    return {"created": path}


def _append_to_note(ctx: ToolContext, args: AppendArgs, path: str) -> dict[str, Any]:
    ctx.vault.append(path, "\n" + args.text)
    return {"appended": path, "chars": len(args.text)}


def _add_tag(ctx: ToolContext, args: AddTagArgs, path: str) -> dict[str, Any]:
    tag = args.tag.strip().lstrip("#")
    if not TAG.match(tag):
        return {"error": "invalid_arguments", "message": f"not a tag: {args.tag!r}"}
    ctx.vault.append(path, f"#{tag}")
    return {"tagged": path, "tag": tag}


def _write_memory(ctx: ToolContext, args: MemoryArgs, _: str) -> dict[str, Any]:
    scope = ctx.session_id if args.tier == "conversation" else None
    source = {"session_id": ctx.session_id, "origin": "agent"}
    return {
        "remembered": ctx.vault.remember(args.text, args.tier, scope, source),
        "tier": args.tier,
    }


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

VAULT_TOOLS: tuple[Tool, ...] = READ_TOOLS + WRITE_TOOLS
VAULT_TOOLS_BY_NAME: Mapping[str, Tool] = {tool.name: tool for tool in VAULT_TOOLS}

INVESTIGATE = function_schema(
    "investigate",
    "Delegate an investigation to the researcher, who reads notes and follows links; "
    "returns findings with the notes they come from.",
    InvestigateArgs,
)
"""The Orchestrator's own tool: it delegates instead of executing."""


def memory_resource(tier: str) -> str:
    """What the guard sees for a memory write: policies can allow tiers separately."""
    return f"memory:{tier}"


def _resource(ctx: ToolContext, tool: Tool, args: BaseModel) -> str:
    """The guard's resource: the confined vault path, or what else the tool touches."""
    if tool.path_arg is None:
        if tool.capability is Capability.MEMORY_WRITE:
            return memory_resource(getattr(args, "tier", "workspace"))
        return "*"
    raw = str(getattr(args, tool.path_arg))
    if tool.name == "create_note" and not raw.lower().endswith(".md"):
        raw += ".md"
    rel = vault_relative(ctx.vault.root, raw)
    if tool.must_exist:
        rel = vault_relative(ctx.vault.root, ctx.vault.resolve(rel))
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
