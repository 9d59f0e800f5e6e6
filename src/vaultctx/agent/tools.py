"""Every tool the agents can call, as the model sees it and the guard checks it: name,
description, pydantic arguments (the JSON schema the model sees), the capability it needs
and which argument holds a vault path. What each tool does is in `agent.tool_handlers`.

`admit` is the turn's check of a call before any handler runs it: arguments validated, the
path confined to the vault (and resolved to an indexed note where it must exist), then
`PermissionGuard.require`. Every failure is a structured error for the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from ..permissions import Capability, PermissionGuard, vault_relative
from .protocols import Admission, IndexedVault
from .tool_handlers import tool_error


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
    """One tool. `path_arg` names the argument holding a vault path: `admit` confines it
    and the guard sees the confined path; `must_exist` resolves it to an indexed note."""

    name: str
    description: str
    args: type[BaseModel]
    capability: Capability
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


READ_TOOLS: tuple[Tool, ...] = (
    Tool("select", "Search the vault; returns matching passages with their note paths.",
         SelectArgs, Capability.VAULT_READ),
    Tool("read_note", "Read a note's full text as Markdown (a PDF's page by page, a canvas's"
         " cards and links).", NoteArgs, Capability.VAULT_READ,
         path_arg="path", must_exist=True),
    Tool("follow_links", "List the notes a note links to.", NoteArgs, Capability.VAULT_READ,
         path_arg="path", must_exist=True),
    Tool("backlinks", "List the notes that link to a note.", NoteArgs, Capability.VAULT_READ,
         path_arg="path", must_exist=True),
    Tool("list_by_tag", "List the notes carrying a tag.", TagArgs, Capability.VAULT_READ),
)  # fmt: skip

WRITE_TOOLS: tuple[Tool, ...] = (
    Tool("create_note", "Create a new note.", CreateNoteArgs, Capability.VAULT_WRITE,
         path_arg="path"),
    Tool("append_to_note", "Append text to the end of an existing note.", AppendArgs,
         Capability.VAULT_WRITE, path_arg="path", must_exist=True),
    Tool("add_tag", "Add a #tag to an existing note.", AddTagArgs, Capability.VAULT_WRITE,
         path_arg="path", must_exist=True),
    Tool("write_memory", "Remember a fact or preference for later conversations.",
         MemoryArgs, Capability.MEMORY_WRITE),
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


MEMORY_TIERS = ("conversation", "channel", "workspace", "account")


def memory_resource(tier: str) -> str:
    """What the guard sees for a memory write: policies can allow tiers separately."""
    return f"memory:{tier}"


def require_memory_write(guard: PermissionGuard, tier: str) -> None:
    """Allow writing memory in `tier` or raise `PermissionDenied`: `memory.write` on the
    tier, and for the account tier, whose memories every vault's turns see, also
    `memory.account`."""
    resource = memory_resource(tier)
    guard.require(Capability.MEMORY_WRITE, resource)
    if tier == "account":
        guard.require(Capability.MEMORY_ACCOUNT, resource)


def writable_tiers(guard: PermissionGuard) -> frozenset[str]:
    """The tiers memory may write on its own after a turn: those `require_memory_write`
    allows without asking anyone (nobody is asked after the answer)."""
    return frozenset(
        tier
        for tier in MEMORY_TIERS
        if guard.permits(Capability.MEMORY_WRITE, memory_resource(tier))
        and (tier != "account" or guard.permits(Capability.MEMORY_ACCOUNT, memory_resource(tier)))
    )


def require_write(guard: PermissionGuard, path: str) -> None:
    """Allow writing the note at vault-relative `path` or raise `PermissionDenied`. Writing
    also needs reading there: a note the policy hides is not written into, whoever approves,
    and creating one where the reader cannot read answers the same refusal whether a hidden
    note is there or not."""
    guard.require(Capability.VAULT_WRITE, path)
    guard.require(Capability.VAULT_READ, path)


def _resource(vault: IndexedVault, tool: Tool, args: BaseModel) -> str:
    """The guard's resource: the confined vault path, or what else the tool touches."""
    if tool.path_arg is None:
        if tool.capability is Capability.MEMORY_WRITE:
            return memory_resource(getattr(args, "tier", "workspace"))
        return "*"
    raw = str(getattr(args, tool.path_arg))
    if tool.name == "create_note" and not raw.lower().endswith(".md"):
        raw += ".md"
    rel = vault_relative(vault.root, raw)
    if tool.must_exist:
        rel = vault_relative(vault.root, vault.resolve(rel))
    return rel


def admit(
    name: str, arguments: dict[str, Any], vault: IndexedVault, guard: PermissionGuard
) -> Admission | dict[str, Any]:
    """The call's `Admission`, or the structured error that stops it before it runs."""
    tool = VAULT_TOOLS_BY_NAME.get(name)
    if tool is None:
        return {"error": "unknown_tool", "message": f"no tool named {name!r}"}
    try:
        args = tool.args.model_validate(arguments)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "arguments"
        return {"error": "invalid_arguments", "message": f"{where}: {first['msg']}"}
    try:
        resource = _resource(vault, tool, args)
        if tool.capability is Capability.MEMORY_WRITE:
            require_memory_write(guard, getattr(args, "tier", "workspace"))
        elif tool.capability is Capability.VAULT_WRITE:
            require_write(guard, resource)
        else:
            guard.require(tool.capability, resource)
    except Exception as exc:  # a refusal, or a lookup that failed: the model's error
        return tool_error(exc)
    return Admission(args.model_dump(), resource)


def schemas(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    return [tool.schema() for tool in tools]


VAULT_TOOL_SCHEMAS: tuple[dict[str, Any], ...] = tuple(schemas(VAULT_TOOLS))
"""What every agent is offered (the Orchestrator adds its own)."""
