"""`vaultctx mcp`: the vault as context tools for AI desktop clients (MCP, stdio).

Built on the official MCP Python SDK (`MCPServer`). No tool here changes a note: the search
tools only read the vault and its index and say so with `readOnlyHint`; `touch` records in
the index which note the user has open, and `clear_focus` forgets it. Tools that change
notes belong to the agent, behind its PermissionGuard, and are not exposed here.

The SDK's stdio transport drops a line it cannot read as one JSON-RPC message (broken JSON,
a batch, a lone surrogate, a huge integer, deep nesting) without an answer, and the client
then waits forever; here each such line is answered with a JSON-RPC error instead.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, BinaryIO, TypeVar, cast

import anyio
from mcp import types as mcp_types
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from . import operations
from ._version import __version__
from .errors import VaultctxError
from .workspace import Workspace

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
F = TypeVar("F", bound=Callable[..., Any])


def tool_errors(fn: F) -> F:
    """A tool whose expected failures reach the client as the CLI states them — the error's
    type and message, as an `is_error` result — and never as a traceback on stderr."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            json.dumps([args, kwargs], ensure_ascii=False, default=str).encode("utf-8")
        except UnicodeEncodeError:  # JSON may spell a lone surrogate ("\ud800")
            raise ToolError("InvalidQuery: the text is not valid Unicode") from None
        try:
            return fn(*args, **kwargs)
        except VaultctxError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from None

    return wrapper  # type: ignore[return-value]  # functools.wraps gives it fn's signature


# --- the stdio wire ----------------------------------------------------------------------

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)  # strings, brackets
_ID_VALUE = re.compile(r'\s*:\s*(-?\d{1,18}(?![\d.eE])|"(?:[^"\\]|\\.)*")', re.DOTALL)
MAX_DEPTH = 200  # nesting the SDK's JSON parser reads; deeper is never parsed here either
MAX_INT_DIGITS = 4300  # Python's own bound on converting digits to an int


class _HugeInt:
    """An integer literal too long to read, found while working out what was wrong."""


def _read_int(digits: str) -> int | _HugeInt:
    return int(digits) if len(digits) <= MAX_INT_DIGITS else _HugeInt()


def _outline(line: str) -> tuple[int, mcp_types.RequestId | None]:
    """How deep `line` nests and the `id` of its top-level object, read without parsing it
    (it may be broken, or too deep to parse)."""
    depth = deepest = 0
    top = ""
    request_id: mcp_types.RequestId | None = None
    for token in _TOKENS.finditer(line):
        text = token.group()
        if text in ("{", "["):
            top = top or text
            depth += 1
            deepest = max(deepest, depth)
        elif text in ("}", "]"):
            depth -= 1
        elif depth == 1 and top == "{" and text == '"id"' and request_id is None:
            value = _ID_VALUE.match(line, token.end())
            if value is not None:
                request_id = _readable_id(value.group(1))
    return deepest, request_id


def _readable_id(literal: str) -> mcp_types.RequestId | None:
    try:
        value = json.loads(literal)
        if isinstance(value, str):
            value.encode("utf-8")  # an id with a lone surrogate cannot be written back
        return value
    except (ValueError, UnicodeEncodeError):
        return None


def _unreadable_part(value: Any) -> str | None:
    """What in a parsed message the SDK could not read, if it is one of the known cases."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _HugeInt):
            return f"an integer has more than {MAX_INT_DIGITS} digits"
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "a string is not valid Unicode (a lone surrogate)"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _error(code: int, message: str, request_id: mcp_types.RequestId | None) -> SessionMessage:
    error = mcp_types.ErrorData(code=code, message=message)
    return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def screen_line(raw: bytes) -> tuple[str | None, SessionMessage | None]:
    """One line from the client: (the line, for the SDK to read) when it is one JSON-RPC
    message the SDK reads, else (None, the JSON-RPC error that answers it) — or (None, None)
    for a blank line or a notification, which get no answer."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, _error(mcp_types.PARSE_ERROR, "Parse error: the line is not UTF-8", None)
    if not line.strip():
        return None, None
    try:
        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return line, None
    except ValidationError as exc:
        failure = exc.errors()[0]
    deepest, request_id = _outline(line)
    if deepest > MAX_DEPTH:
        reason = f"nested deeper than {MAX_DEPTH} levels"
        return None, _error(mcp_types.INVALID_PARAMS, f"Invalid params: {reason}", request_id)
    try:
        message = json.loads(line, parse_int=_read_int)
    except (ValueError, RecursionError):
        return None, _error(mcp_types.PARSE_ERROR, "Parse error: the line is not JSON", request_id)
    if isinstance(message, list):
        reason = "Invalid request: batches are not supported, send one message a line"
        return None, _error(mcp_types.INVALID_REQUEST, reason, None)
    if not isinstance(message, dict):
        reason = "Invalid request: a message is a JSON object"
        return None, _error(mcp_types.INVALID_REQUEST, reason, None)
    if failure["type"] != "json_invalid":  # JSON, but not a JSON-RPC message
        reason = f"Invalid request: {failure['msg']} at {'.'.join(map(str, failure['loc']))}"
        return None, _error(mcp_types.INVALID_REQUEST, reason, request_id)
    if "id" not in message and isinstance(message.get("method"), str):
        return None, None  # a notification: JSON-RPC answers none, even a bad one
    reason = _unreadable_part(message) or failure["msg"]
    return None, _error(mcp_types.INVALID_PARAMS, f"Invalid params: {reason}", request_id)


class _ScreenedLines:
    """The client's lines as the SDK's stdio transport reads them, each screened first: a
    line it would drop unanswered is answered here, and the next line is read."""

    def __init__(self, wire: BinaryIO) -> None:
        self._wire = anyio.wrap_file(wire)
        self._replies: Any = None
        self._ready = anyio.Event()

    def answer_to(self, replies: Any) -> None:
        self._replies = replies
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        await self._ready.wait()
        async for raw in self._wire:
            line, answer = screen_line(raw)
            if answer is not None:
                await self._replies.send(answer)
            elif line is not None:
                yield line


@contextmanager
def _claimed_stdin() -> Iterator[BinaryIO]:
    """The wire, read through a private copy of fd 0 while fd 0 reads the null device (as
    the SDK's own transport does), so nothing else in the process can take a client's bytes."""
    try:
        wire = os.dup(0)
        null = os.open(os.devnull, os.O_RDONLY)
    except OSError:
        yield sys.stdin.buffer
        return
    os.dup2(null, 0)
    os.close(null)
    try:
        # closefd=False: a reading thread may still block on it when serving ends.
        yield os.fdopen(wire, "rb", closefd=False)
    finally:
        os.dup2(wire, 0)


class _VaultMCPServer(MCPServer):
    async def run_stdio_async(self) -> None:
        """The SDK's stdio serving, reading the client's lines through `_ScreenedLines`."""
        with _claimed_stdin() as wire:
            lines = _ScreenedLines(wire)
            # The SDK reads `stdin` line by line and types it as anyio's file: ours screens lines.
            screened: Any = lines
            async with stdio_server(stdin=screened) as (read_stream, write_stream):
                lines.answer_to(write_stream)
                lowlevel = self._lowlevel_server
                await lowlevel.run(
                    read_stream, write_stream, lowlevel.create_initialization_options()
                )


def create_mcp_server(workspace: Workspace, *, use_vectors: bool = True) -> MCPServer:
    """An MCP server over `workspace`. `use_vectors=False` keeps select lexical and graph
    only, so the embedding model is never loaded (low-end machines, tests)."""
    server = _VaultMCPServer(
        "vaultctx",
        version=__version__,
        instructions=(
            f"Context from the Markdown vault at {workspace.root}. Call `select` with a question"
            " to find the most relevant passages (with their note paths), then `read_note` to"
            " read a whole note."
        ),
    )
    _add_tools(server, workspace, use_vectors=use_vectors)
    return server


def tool_catalog() -> list[tuple[str, str]]:
    """Each tool's name and title, as the server lists them: `vaultctx mcp --help` shows
    these, so the help names every tool the server has."""
    server = MCPServer("vaultctx")
    _add_tools(server, cast("Workspace", None), use_vectors=False)  # listed, never called
    return [(t.name, t.title or "") for t in anyio.run(server.list_tools)]


def _add_tools(server: MCPServer, ws: Workspace, *, use_vectors: bool) -> None:
    def offer(
        request_type: type[operations.Request], title: str, annotations: ToolAnnotations
    ) -> Callable[[Callable[..., None]], None]:
        """The shared operation `request_type` as a tool: its input schema is the request's
        fields (but `MODEL_CHOICES`: the model is the owner's choice, not the client's),
        its description the decorated function's docstring."""

        def register(described: Callable[..., None]) -> None:
            def tool(**arguments: Any) -> dict[str, Any]:
                request = request_type.model_validate(arguments)
                if not use_vectors and "no_vectors" in request_type.model_fields:
                    request = request.model_copy(update={"no_vectors": True})
                return request.answer(ws)

            tool.__name__ = request_type.name
            tool.__doc__ = described.__doc__
            tool.__signature__ = tool_signature(request_type)  # type: ignore[attr-defined]  # read by inspect.signature, as the SDK builds the schema
            server.add_tool(tool_errors(tool), title=title, annotations=annotations)

        return register

    @offer(operations.SelectRequest, "Select context from the vault", READ_ONLY)
    def select() -> None:
        """Rank the vault's passages for `query` (full-text, embeddings and the link graph,
        fused). `path` keeps one folder or glob ('Journal/2025-*'); `tags` keeps notes
        carrying all of these tags. Returns candidates with path, heading, text, score and
        confidence; `no_good_match` true (and `verdict` "no good match; closest: ...") means
        the vault holds nothing that answers the query well: the candidates are only the
        closest, not an answer."""

    @offer(operations.RelatedRequest, "Notes related to a note", READ_ONLY)
    def related() -> None:
        """The notes that matter for one note (vault path, file name, title or alias): its
        words, its meaning and its links as the query, the note itself left out; one
        passage per note, with path, heading, text, score and which retrievers found it."""

    @server.tool(title="Read a note", annotations=READ_ONLY)
    @tool_errors
    def read_note(note: str) -> dict[str, Any]:
        """The full text of one note, named by its vault path, file name, title or alias: a
        note's Markdown; a PDF's text page by page, a canvas's cards, as Markdown."""
        return ws.read_note(note, max_chars=MAX_NOTE_CHARS).to_dict()

    @offer(operations.ContextRequest, "Context for a task, within a token budget",
           READ_ONLY_WITH_LLM)  # fmt: skip
    def context() -> None:
        """The passages worth giving a model for `query`, trimmed to `budget` tokens (default:
        the vault's config), with a hash that identifies this exact context."""

    @offer(operations.TouchRequest, "Say which note is open", RECORDS_CONTEXT)
    def touch() -> None:
        """Record that the user opened or is working on `note` (vault path, file name, title
        or alias), e.g. the note open in the editor. Later selects favour the notes it links
        to when a question could mean several; the most recent touch counts most."""

    @offer(operations.FocusRequest, "Show what select leans towards", READ_ONLY)
    def focus() -> None:
        """The notes later selects lean towards — opened or touched (`touch`), and edited
        lately — each with its weight now: 1 for the note opened just now, halving every
        `half_life_hours`. Answers name these notes in their diagnostics (`focus`)."""

    @offer(operations.ClearFocusRequest, "Forget which notes are open", RECORDS_CONTEXT)
    def clear_focus() -> None:
        """Forget every note opened or touched, e.g. when the user moves to another task:
        later selects rank by what the question matches alone. Returns the focus left
        (notes edited lately) and how many notes were forgotten (`cleared`)."""

    @offer(operations.MemorySearchRequest, "Search memories", READ_ONLY)
    def memory_search() -> None:
        """Facts, events and preferences remembered about this vault and its user, ranked
        for `query` — or only those of one `tier` (conversation, channel, workspace,
        account) and `scope` (its session, channel, vault or user id)."""


_ANNOTATED: Any = Annotated  # indexed at run time with a model's field, not a type expression


def tool_signature(request_type: type[operations.Request]) -> inspect.Signature:
    """A tool function's signature whose parameters are the request's fields, each with its
    type, bounds, default and description: the SDK makes the tool's input schema from it."""
    parameters = []
    for name, field in request_type.model_fields.items():
        if name in operations.MODEL_CHOICES:
            continue
        described = Field(description=field.description)
        annotation = _ANNOTATED[(field.annotation, *field.metadata, described)]
        default = (
            inspect.Parameter.empty
            if field.is_required()
            else field.get_default(call_default_factory=True)
        )
        parameters.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                              annotation=annotation)
        )  # fmt: skip
    return inspect.Signature(parameters, return_annotation=dict[str, Any])
