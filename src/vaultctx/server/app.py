"""The JSON HTTP API over one open `Workspace`, as a Starlette app.

Every route but `/health` needs the bearer token. Bodies are JSON objects of at most
`max_body` bytes, validated by the models below (the same options as the CLI); errors come
back as `{"error": <type>, "message": <text>}` with a 4xx status. Work runs in Starlette's
thread pool, so many selects proceed at once while the watcher writes (SQLite WAL gives each
thread a consistent snapshot).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .._version import __version__
from ..errors import (
    ConfigError,
    EmbeddingUnavailable,
    IndexLocked,
    InvalidQuery,
    NoteNotFound,
    NotIndexed,
    VaultctxError,
)
from ..workspace import Filters, MemoryKind, Tier
from .auth import authorized

if TYPE_CHECKING:
    from ..workspace import VaultWatcher, Workspace

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024
MAX_JSON_DEPTH = 32  # the deepest body a route takes is 3 levels
READ_TIMEOUT_S = 10.0  # for a client to send its request's headers, and then its body
OPEN_PATHS = frozenset({"/health"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost"})
M = TypeVar("M", bound=BaseModel)

_STATUS: dict[type[VaultctxError], int] = {
    InvalidQuery: 422,
    ConfigError: 422,
    NoteNotFound: 404,
    NotIndexed: 409,
    IndexLocked: 409,
    EmbeddingUnavailable: 503,
}


class RequestError(Exception):
    """A request the server refuses: bad JSON, too large, invalid fields."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message


# --- request bodies ----------------------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FilterBody(_Body):
    """The CLI's filter options: --path, --tag, --field KEY=VALUE, --since, --until, --kind."""

    path: str | None = None
    tags: list[str] = Field(default_factory=list)
    fields: dict[str, str] = Field(default_factory=dict)
    since: _dt.datetime | None = None
    until: _dt.datetime | None = None
    kinds: list[Literal["block", "note", "memory"]] = Field(default_factory=list)

    def filters(self) -> Filters:
        """Naive dates mean local time, as on the command line."""
        return Filters(
            path=self.path,
            tags=tuple(self.tags),
            frontmatter=self.fields,
            modified_after=self.since.astimezone() if self.since else None,
            modified_before=self.until.astimezone() if self.until else None,
            kinds=tuple(self.kinds),
        )


class SelectBody(FilterBody):
    query: str
    k: int = Field(10, ge=1, le=1000)
    no_vectors: bool = False
    explain: bool = False


class RelatedBody(_Body):
    note: str
    k: int = Field(10, ge=1, le=1000)
    no_vectors: bool = False
    explain: bool = False
    touch: bool = False


class ContextBody(FilterBody):
    query: str
    budget: int | None = Field(None, ge=1)
    model: str | None = None
    k: int = Field(30, ge=1, le=1000)
    no_vectors: bool = False


class MemorySearchBody(_Body):
    query: str
    k: int = Field(10, ge=1, le=200)
    tier: Tier | None = None
    scope: str | None = None


class MemoryAddBody(_Body):
    text: str
    tier: Tier = Tier.WORKSPACE
    scope: str | None = None
    kind: MemoryKind | None = None  # semantic; episodic for a turn
    importance: float | None = Field(None, ge=0, le=1)
    speaker: str | None = None  # with speaker or session, text is a conversation turn
    session: str | None = None
    turn: str | None = None
    created_at: str | float | None = None


class TouchBody(_Body):
    note: str
    kind: Literal["touch", "open"] = "touch"


class AskBody(_Body):
    question: str = Field(min_length=1)
    session_id: str | None = None
    model: str | None = None


class IndexBody(_Body):
    paths: list[str] | None = None
    embed: bool | None = None


async def read_body(request: Request, model: type[M], limit: int, timeout: float) -> M:
    """The request's JSON body as `model`: 413 past `limit` bytes, 408 when it takes longer
    than `timeout` seconds to arrive, 400 if it is not strict JSON (no NaN), nests deeper
    than MAX_JSON_DEPTH or holds text that is not Unicode (a lone surrogate), 422 if the
    fields are wrong. The size is checked while reading, so a huge body is never held."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise RequestError(413, "PayloadTooLarge", f"request body exceeds {limit} bytes")
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise RequestError(
                        413, "PayloadTooLarge", f"request body exceeds {limit} bytes"
                    )
                chunks.append(chunk)
    except TimeoutError:
        raise RequestError(
            408, "RequestTimeout", f"request body not sent within {timeout:g} s"
        ) from None
    data = parse_json(b"".join(chunks) or b"{}")
    if not isinstance(data, dict):
        raise RequestError(400, "BadJSON", "request body must be a JSON object")
    return validated(model, data)


def parse_json(raw: bytes) -> Any:
    """Strict JSON of bounded depth whose strings are all valid Unicode, or a 400."""
    try:
        data = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise RequestError(400, "BadJSON", "request body nests too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(400, "BadJSON", f"request body is not valid JSON: {exc}") from exc
    if _depth(data) > MAX_JSON_DEPTH:
        raise RequestError(400, "BadJSON", f"request body nests deeper than {MAX_JSON_DEPTH}")
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise RequestError(
            400, "BadUnicode", "request body holds text that is not Unicode (a lone surrogate)"
        ) from None
    return data


def validated(model: type[M], data: Any) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _invalid(exc) from exc


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _depth(data: Any) -> int:
    """How deep lists and objects nest in parsed JSON, without recursion."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, level)
            if level <= MAX_JSON_DEPTH:
                stack.extend(
                    (v, level + 1) for v in (value.values() if isinstance(value, dict) else value)
                )
    return deepest


def _invalid(exc: ValidationError) -> RequestError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    return RequestError(422, "ValidationError", f"{where}: {first['msg']}")


def _query_params(request: Request) -> dict[str, str]:
    """A GET request's parameters, held to the rules of a JSON body's text."""
    params = dict(request.query_params)
    parse_json(json.dumps(params).encode())
    return params


# --- middleware --------------------------------------------------------------------------


class LoopbackHost:
    """Pure ASGI: a request must name this machine in its Host header — a web page that
    rebinds its own name to 127.0.0.1 cannot reach the API. Starlette's TrustedHost does the
    same, answering in plain text."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1").split(":")[0]
            if host not in LOOPBACK_HOSTS:
                await _error(400, "BadHost", "the Host header must name 127.0.0.1")(
                    scope, receive, send
                )
                return
        await self.app(scope, receive, send)


class BearerAuth:
    """Pure ASGI: every HTTP request outside `OPEN_PATHS` needs `Authorization: Bearer`."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            header = dict(scope["headers"]).get(b"authorization")
            if not authorized(header, self.token):
                response = _error(401, "Unauthorized", "missing or wrong bearer token")
                response.headers["WWW-Authenticate"] = "Bearer"
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _error(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse({"error": error, "message": message}, status_code=status)


# --- the handlers ------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerState:
    """What the handlers share, kept on `app.state.server`: the workspace, its watcher and
    the limits a request is held to."""

    workspace: Workspace
    token: str
    watcher: VaultWatcher | None
    max_body: int
    read_timeout: float
    pid: int


def _state(request: Request) -> ServerState:
    return request.app.state.server


async def _read(request: Request, model: type[M]) -> M:
    state = _state(request)
    return await read_body(request, model, state.max_body, state.read_timeout)


def _answered(request: Request, contract: dict[str, Any]) -> JSONResponse:
    """A select or context contract, saying which server process answered."""
    contract["diagnostics"]["server_pid"] = _state(request).pid
    return JSONResponse(contract)


async def health(request: Request) -> JSONResponse:
    """Open to anyone on this machine, so it says only that a vaultctx server answers;
    with the token, also which vault and process."""
    state = _state(request)
    if not authorized(request.headers.get("authorization", "").encode(), state.token):
        return JSONResponse({"ok": True})
    return JSONResponse(
        {"ok": True, "vault": str(state.workspace.root), "pid": state.pid, "version": __version__}
    )


async def status(request: Request) -> JSONResponse:
    state = _state(request)
    report = await run_in_threadpool(state.workspace.status)
    watcher = state.watcher
    server = {
        "pid": state.pid,
        "watching": watcher is not None and watcher.running,
        "indexing": watcher is not None and watcher.indexing,
        "watch_runs": watcher.runs if watcher else 0,
        "watch_error": watcher.last_error if watcher else None,
    }
    return JSONResponse({**report.to_dict(), "server": server})


async def select(request: Request) -> JSONResponse:
    body = await _read(request, SelectBody)
    ws = _state(request).workspace
    selection = await run_in_threadpool(
        lambda: ws.select(
            body.query,
            k=body.k,
            filters=body.filters(),
            use_vectors=not body.no_vectors,
            explain=body.explain,
        )
    )
    return _answered(request, selection.contract())


async def related(request: Request) -> JSONResponse:
    body = await _read(request, RelatedBody)
    ws = _state(request).workspace
    selection = await run_in_threadpool(
        lambda: ws.related(
            body.note,
            k=body.k,
            use_vectors=not body.no_vectors,
            explain=body.explain,
            touch=body.touch,
        )
    )
    return _answered(request, selection.contract())


async def context(request: Request) -> JSONResponse:
    body = await _read(request, ContextBody)
    ws = _state(request).workspace
    session = await run_in_threadpool(
        lambda: ws.context(
            body.query,
            budget_tokens=body.budget,
            model=body.model,
            k=body.k,
            filters=body.filters(),
            use_vectors=not body.no_vectors,
        )
    )
    return _answered(request, session.contract())


async def memory_search(request: Request) -> JSONResponse:
    if request.method == "GET":
        body = validated(MemorySearchBody, _query_params(request))
    else:
        body = await _read(request, MemorySearchBody)
    ws = _state(request).workspace
    memories = await run_in_threadpool(
        lambda: ws.memory.search(body.query, k=body.k, tier=body.tier, scope=body.scope)
    )
    return JSONResponse({"query": body.query, "memories": [m.to_dict() for m in memories]})


async def memory_add(request: Request) -> JSONResponse:
    body = await _read(request, MemoryAddBody)
    ws = _state(request).workspace
    memory = await run_in_threadpool(
        lambda: ws.memory.add(
            body.text,
            tier=body.tier,
            scope=body.scope,
            kind=body.kind,
            importance=body.importance,
            speaker=body.speaker,
            session=body.session,
            turn=body.turn,
            created_at=body.created_at,
        )
    )
    return JSONResponse(memory.to_dict())


async def touch(request: Request) -> JSONResponse:
    body = await _read(request, TouchBody)
    ws = _state(request).workspace
    path = await run_in_threadpool(lambda: ws.touch(body.note, kind=body.kind))
    return JSONResponse({"path": path, "touched": True})


async def index(request: Request) -> JSONResponse:
    body = await _read(request, IndexBody)
    ws = _state(request).workspace
    report = await run_in_threadpool(lambda: ws.index(embed=body.embed, paths=body.paths))
    return JSONResponse(report.to_dict())


async def ask(request: Request) -> StreamingResponse:
    """One agent turn streamed as server-sent events: `tool_call` and `tool_result` as
    they happen, then `answer` (the TurnResult) or `error`. Nothing on the server can
    answer `ask` permissions, so they are denied, as on a non-interactive CLI."""
    body = await _read(request, AskBody)
    return StreamingResponse(
        _turn_events(_state(request).workspace, body),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store"},
    )


async def _turn_events(ws: Workspace, body: AskBody) -> AsyncIterator[bytes]:
    """Run the turn in the thread pool and pass on each of its events as it is emitted."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()

    def emit(kind: str, data: dict[str, Any]) -> None:
        loop.call_soon_threadsafe(events.put_nowait, (kind, data))

    def turn() -> None:
        try:
            result = ws.ask(
                body.question, session_id=body.session_id, model=body.model, on_event=emit
            )
            emit("answer", result.to_dict())
        except Exception as exc:  # the stream must end with an event, not a dropped socket
            emit("error", {"error": type(exc).__name__, "message": str(exc)})
        finally:
            loop.call_soon_threadsafe(events.put_nowait, None)

    worker = asyncio.ensure_future(run_in_threadpool(turn))
    while (event := await events.get()) is not None:
        kind, data = event
        payload = json.dumps(data, ensure_ascii=False, default=str)
        yield f"event: {kind}\ndata: {payload}\n\n".encode()
    await worker


# --- the app -----------------------------------------------------------------------------


def create_app(
    workspace: Workspace,
    *,
    token: str,
    watcher: VaultWatcher | None = None,
    allow_origin: str | None = None,
    max_body: int = MAX_BODY_BYTES,
    read_timeout: float = READ_TIMEOUT_S,
) -> Starlette:
    """The API for `workspace`. CORS stays closed unless `allow_origin` names one origin."""
    app = Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/status", status, methods=["GET"]),
            Route("/select", select, methods=["POST"]),
            Route("/related", related, methods=["POST"]),
            Route("/context", context, methods=["POST"]),
            Route("/memory/search", memory_search, methods=["GET", "POST"]),
            Route("/memory/add", memory_add, methods=["POST"]),
            Route("/touch", touch, methods=["POST"]),
            Route("/index", index, methods=["POST"]),
            Route("/ask", ask, methods=["POST"]),
        ],
        middleware=_middleware(token, allow_origin),
        exception_handlers=_exception_handlers(),
    )
    app.state.server = ServerState(workspace, token, watcher, max_body, read_timeout, os.getpid())
    return app


def _middleware(token: str, allow_origin: str | None) -> list[Middleware]:
    """Outermost first: the Host check, CORS when an origin is allowed, then the token."""
    middleware = [Middleware(LoopbackHost)]
    if allow_origin:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=[allow_origin],
                allow_methods=["GET", "POST"],
                allow_headers=["Authorization", "Content-Type"],
            )
        )
    middleware.append(Middleware(BearerAuth, token=token))
    return middleware


def _exception_handlers() -> dict[Any, Callable[[Request, Exception], Awaitable[JSONResponse]]]:
    """Every answer is JSON, errors included: ours, Starlette's own (404, 405) and, logged
    with its traceback, anything unexpected (500)."""

    async def request_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestError)
        return _error(exc.status, exc.error, exc.message)

    async def vaultctx_error(request: Request, exc: Exception) -> JSONResponse:
        status = next((s for t, s in _STATUS.items() if isinstance(exc, t)), 400)
        return _error(status, type(exc).__name__, str(exc))

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        response = _error(exc.status_code, HTTPStatus(exc.status_code).phrase.replace(" ", ""),
                          exc.detail)  # fmt: skip
        response.headers.update(exc.headers or {})
        return response

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ValidationError)
        error = _invalid(exc)
        return _error(error.status, error.error, error.message)

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return _error(500, "InternalError", f"the server failed: {type(exc).__name__}")

    return {
        RequestError: request_error,
        VaultctxError: vaultctx_error,
        HTTPException: http_error,
        ValidationError: validation_error,
        Exception: unexpected,
    }
