"""What each vault tool does, and `execute`, the only way a tool call runs.

A call is first admitted by the turn's process (`Guard.admit`: arguments validated against
the tool's schema, its path confined to the vault, `PermissionGuard.require` passed), then
its handler runs here — in a delegation's child process, or its fallback thread. Every
failure becomes a structured error for the model, so a bad call never ends the turn.

This module imports no pydantic and no index: a child process starts fast with it.
Handlers reach the vault only through `VaultAccess`; their arguments are the admitted dict.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import NoteNotFound, PathOutsideVault, PermissionDenied, VaultctxError
from ..llm.client import ToolCall
from ..permissions.capability import Capability
from .protocols import Admission, Guard, VaultAccess
from .transcript import ToolCallRecord

SNIPPET_CHARS = 300
MAX_NOTE_CHARS = 8000
TAG = re.compile(r"^[\w/-]+$")
NOTE_TOOLS = ("read_note", "follow_links", "backlinks")


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


Handler = Callable[[ToolContext, dict[str, Any], str], dict[str, Any]]


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SNIPPET_CHARS else flat[:SNIPPET_CHARS] + "…"


def _readable(ctx: ToolContext, path: str | None) -> bool:
    """Results a read policy hides never reach the model, whatever tool found them."""
    return path is None or ctx.guard.permits(Capability.VAULT_READ, path)


def _select(ctx: ToolContext, args: dict[str, Any], _: str) -> dict[str, Any]:
    return {
        "results": [
            {"path": hit["path"], "heading": hit["heading"], "text": _snippet(hit["text"] or "")}
            for hit in ctx.vault.select(args["query"], args["k"])
            if _readable(ctx, hit["path"])
        ]
    }


def _read_note(ctx: ToolContext, _: dict[str, Any], path: str) -> dict[str, Any]:
    text = ctx.vault.read(path)
    truncated = len(text) > MAX_NOTE_CHARS
    return {"path": path, "content": text[:MAX_NOTE_CHARS], "truncated": truncated}


def _neighbours(ctx: ToolContext, path: str, *, incoming: bool) -> dict[str, Any]:
    notes = ctx.vault.neighbours(path, incoming=incoming)
    return {"path": path, "notes": [n for n in notes if _readable(ctx, n["path"])]}


def _follow_links(ctx: ToolContext, _: dict[str, Any], path: str) -> dict[str, Any]:
    return _neighbours(ctx, path, incoming=False)


def _backlinks(ctx: ToolContext, _: dict[str, Any], path: str) -> dict[str, Any]:
    return _neighbours(ctx, path, incoming=True)


def _list_by_tag(ctx: ToolContext, args: dict[str, Any], _: str) -> dict[str, Any]:
    tag = args["tag"].strip().lstrip("#").lower()
    notes = ctx.vault.tagged(tag)
    return {"tag": tag, "notes": [n for n in notes if _readable(ctx, n["path"])]}


def _create_note(ctx: ToolContext, args: dict[str, Any], path: str) -> dict[str, Any]:
    content = args["content"]
    if not ctx.vault.create(path, content if content.endswith("\n") else content + "\n"):
        return {"error": "exists", "path": path, "message": "use append_to_note"}
    return {"created": path}


def _append_to_note(ctx: ToolContext, args: dict[str, Any], path: str) -> dict[str, Any]:
    ctx.vault.append(path, "\n" + args["text"])
    return {"appended": path, "chars": len(args["text"])}


def _add_tag(ctx: ToolContext, args: dict[str, Any], path: str) -> dict[str, Any]:
    tag = args["tag"].strip().lstrip("#")
    if not TAG.match(tag):
        return {"error": "invalid_arguments", "message": f"not a tag: {args['tag']!r}"}
    ctx.vault.append(path, f"#{tag}")
    return {"tagged": path, "tag": tag}


def _write_memory(ctx: ToolContext, args: dict[str, Any], _: str) -> dict[str, Any]:
    tier = args["tier"]
    scope = ctx.session_id if tier == "conversation" else None
    source = {"session_id": ctx.session_id, "origin": "agent"}
    return {"remembered": ctx.vault.remember(args["text"], tier, scope, source), "tier": tier}


HANDLERS: dict[str, Handler] = {
    "select": _select,
    "read_note": _read_note,
    "follow_links": _follow_links,
    "backlinks": _backlinks,
    "list_by_tag": _list_by_tag,
    "create_note": _create_note,
    "append_to_note": _append_to_note,
    "add_tag": _add_tag,
    "write_memory": _write_memory,
}
"""Every vault tool's handler, by the tool's name (its schema is in `agent.tools`)."""


def tool_error(exc: Exception) -> dict[str, Any]:
    """An exception of admitting or running a tool, as the model's structured error."""
    if isinstance(exc, PermissionDenied | PathOutsideVault):
        return exc.to_dict()
    if isinstance(exc, NoteNotFound):
        return {"error": "note_not_found", "message": str(exc)}
    if isinstance(exc, VaultctxError):
        return {"error": "tool_failed", "message": str(exc)}
    return {"error": "tool_failed", "message": f"{type(exc).__name__}: {exc}"}


CANCELLED = {"error": "cancelled", "message": "the run timed out before this call"}


def execute(call: ToolCall, ctx: ToolContext) -> ToolCallRecord:
    """Run one tool call under the guard; the output is the result or a structured error."""
    return ToolCallRecord(call.id, call.name, call.arguments, _run(call, ctx), ctx.agent)


def _run(call: ToolCall, ctx: ToolContext) -> dict[str, Any]:
    if ctx.cancelled.is_set():
        return dict(CANCELLED)
    admitted = ctx.guard.admit(call.name, call.arguments)
    if not isinstance(admitted, Admission):
        return admitted
    if ctx.cancelled.is_set():  # the person may have answered after the deadline
        return dict(CANCELLED)
    try:
        return HANDLERS[call.name](ctx, admitted.arguments, admitted.resource)
    except Exception as exc:  # a tool bug is the model's error result, not the turn's end
        return tool_error(exc)


def notes_read(records: Sequence[ToolCallRecord]) -> list[str]:
    """The notes the successful note tools of a run looked at, sorted."""
    return sorted({r.output["path"] for r in records if r.name in NOTE_TOOLS and r.ok})
