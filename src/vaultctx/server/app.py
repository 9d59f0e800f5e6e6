"""The JSON HTTP API over one open `Workspace`, as a Starlette app.

Every route but `/health` needs the bearer token. Bodies are JSON objects of at most
`max_body` bytes: the request models of the operations every door shares (`operations.py`,
one route each) and the owner's own (`bodies.py`); errors come
back as `{"error": <type>, "message": <text>}` with a 4xx status. Work runs in Starlette's
thread pool, so many selects proceed at once while the watcher writes (SQLite WAL gives each
thread a consistent snapshot).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._version import __version__
from ..errors import (
    IndexCorrupt,
    IndexUnavailable,
    PermissionDenied,
    VaultctxError,
)
from ..operations import OPERATIONS
from ..operations import Request as Operation
from .auth import CHALLENGE_MAX_CHARS, authorized, proofs
from .bodies import (
    MAX_BODY_BYTES,
    READ_TIMEOUT_S,
    AskBody,
    IndexBody,
    M,
    RequestError,
    invalid,
    model_choices,
    query_params,
    read_body,
    validated,
)
from .client import route

if TYPE_CHECKING:
    from ..workspace import People, VaultWatcher, Workspace

log = logging.getLogger(__name__)
# Who answered, in the team's request log: this host and process.
_SERVER = f"{socket.gethostname()}:{os.getpid()}"

OPEN_PATHS = frozenset({"/health"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost"})

# What `/status` tells a team member: counts of what they may see and how the server works,
# never a path, the database's address or an error text that may hold either.
MEMBER_STATUS = frozenset(
    {"notes", "blocks", "links", "dangling_links", "tags", "aliases", "vectors", "model",
     "pending_model", "pending_vectors", "last_indexed", "notes_with_problems", "languages"}
)  # fmt: skip
MEMBER_SERVER_STATUS = frozenset({"pid", "watching", "indexing", "watch_runs"})
# Requests with no valid token a server writes to the team's log in one window: past that,
# one row says more were suppressed, so a flood of them cannot fill the log.
ANONYMOUS_LOG_ROWS = 60
ANONYMOUS_LOG_WINDOW_S = 60.0
ANONYMOUS_SUPPRESSED = "… more anonymous requests suppressed"


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
    """Pure ASGI: every HTTP request outside `OPEN_PATHS` needs `Authorization: Bearer`:
    the server's own token (its owner), or, with a team (`database_url`), a person's, who
    is then answered as `Workspace.for_person` sees the vault. With a team, every request
    is logged with who made it."""

    def __init__(self, app: ASGIApp, token: str, team: People) -> None:
        self.app = app
        self.token = token
        self.team = team
        self.anonymous = _AnonymousQuota()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        started, arrived = time.perf_counter(), time.time()
        header = dict(scope["headers"]).get(b"authorization")
        owner = authorized(header, self.token)
        who: str | None = None
        unavailable: VaultctxError | None = None
        if not owner and header is not None:
            token = header.decode("latin-1").removeprefix("Bearer ")
            try:
                person = await run_in_threadpool(self.team.authenticate, token)
            except (IndexUnavailable, IndexCorrupt) as exc:  # the database is down or newer
                person, unavailable = None, exc
            if person is not None:
                scope.setdefault("state", {})["person"] = person
                who = person.name
        status = [401]

        async def sent(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            if unavailable is not None:
                error = _error(503, type(unavailable).__name__, str(unavailable))
                await error(scope, receive, sent)
            elif not owner and who is None:
                response = _error(401, "Unauthorized", "missing or wrong bearer token")
                response.headers["WWW-Authenticate"] = "Bearer"
                await response(scope, receive, sent)
            else:
                await self.app(scope, receive, sent)
        finally:
            who = who or (self.team.OWNER if owner else self.team.UNKNOWN)
            path: str | None = scope["path"]
            if who == self.team.UNKNOWN:
                path = self.anonymous.admit(scope["path"])
            if path is not None:
                await self._log(self.team, who, scope, path, status[0], started, arrived)

    @staticmethod
    async def _log(
        team: People, who: str, scope: Scope, path: str, status: int, started: float, arrived: float
    ) -> None:
        ms = (time.perf_counter() - started) * 1000
        try:
            await run_in_threadpool(
                team.log, who, scope["method"], path, status, ms, _SERVER, arrived
            )
        except Exception:  # a log that cannot be written must not fail the answer
            log.exception("request log: cannot write %s %r", scope["method"], path)


class _AnonymousQuota:
    """Which requests with no valid token a server logs: `ANONYMOUS_LOG_ROWS` in each
    window of `ANONYMOUS_LOG_WINDOW_S`, then one `ANONYMOUS_SUPPRESSED` row, then none
    until the next window. Used from the event loop only, so it needs no lock."""

    def __init__(self) -> None:
        self.window_started = -math.inf
        self.seen = 0

    def admit(self, path: str) -> str | None:
        """The path to log for one more anonymous request, the summary row's, or None."""
        now = time.monotonic()
        if now - self.window_started >= ANONYMOUS_LOG_WINDOW_S:
            self.window_started, self.seen = now, 0
        self.seen += 1
        if self.seen <= ANONYMOUS_LOG_ROWS:
            return path
        if self.seen == ANONYMOUS_LOG_ROWS + 1:
            bounds = f"over {ANONYMOUS_LOG_ROWS} in {ANONYMOUS_LOG_WINDOW_S:g} s"
            return f"{ANONYMOUS_SUPPRESSED} ({bounds})"
        return None


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


def _workspace(request: Request) -> Workspace:
    """The workspace as the caller sees it: the owner's, or one person's of the team."""
    person = getattr(request.state, "person", None)
    workspace = _state(request).workspace
    return workspace if person is None else workspace.for_person(person)


def _owner_only(request: Request, what: str) -> None:
    if getattr(request.state, "person", None) is not None:
        raise HTTPException(403, f"{what} is for the server's owner, not a team member")


async def _read(request: Request, model: type[M]) -> M:
    """The body as `model`; a team member's naming a model is refused, whatever the route:
    what is sent to a model, and with whose credentials, is the owner's choice."""
    state = _state(request)
    body = await read_body(request, model, state.max_body, state.read_timeout)
    if getattr(request.state, "person", None) is not None and (chosen := model_choices(body)):
        reason = "a team member cannot choose the model: the server's owner does"
        raise PermissionDenied(", ".join(chosen), request.url.path, reason)
    return body


async def health(request: Request) -> JSONResponse:
    """Open to anyone on this machine, so it says only that a vaultctx server answers;
    with the token, also which vault and process. Asked `?challenge=`, it adds the proof
    (`auth.proofs`) a client checks before it sends the token: bound to the port the
    request came in on, as the socket says, not the Host header."""
    state = _state(request)
    if not authorized(request.headers.get("authorization", "").encode(), state.token):
        challenge = request.query_params.get("challenge")
        if challenge is None:
            return JSONResponse({"ok": True})
        if not 0 < len(challenge) <= CHALLENGE_MAX_CHARS:
            return _error(422, "InvalidQuery", f"challenge: 1 to {CHALLENGE_MAX_CHARS} characters")
        port = (request.scope.get("server") or ("", 0))[1]
        proof = proofs(state.token, challenge, port, str(state.workspace.root))
        return JSONResponse({"ok": True, "proof": proof})
    return JSONResponse(
        {"ok": True, "vault": str(state.workspace.root), "pid": state.pid, "version": __version__}
    )


async def status(request: Request) -> JSONResponse:
    """The index and the server at work. A team member is answered from their own
    workspace, and only with `MEMBER_STATUS` and `MEMBER_SERVER_STATUS`: nothing that names
    the server's machine (its paths, the database's address, a watcher's error text)."""
    state = _state(request)
    report = (await run_in_threadpool(_workspace(request).status)).to_dict()
    watcher = state.watcher
    server = {
        "pid": state.pid,
        "watching": watcher is not None and watcher.running,
        "indexing": watcher is not None and watcher.indexing,
        "watch_runs": watcher.runs if watcher else 0,
        "watch_error": watcher.last_error if watcher else None,
    }
    if getattr(request.state, "person", None) is not None:
        report = {k: v for k, v in report.items() if k in MEMBER_STATUS}
        server = {k: v for k, v in server.items() if k in MEMBER_SERVER_STATUS}
    return JSONResponse({**report, "server": server})


# How the shared operations are asked over HTTP: a JSON body at the operation's route
# (`client.route`), or, for these, the method and route named here.
BODYLESS = {"focus": ("GET", "/focus"), "clear_focus": ("DELETE", "/focus")}
ALSO_GET = frozenset({"memory_search"})  # its fields as query parameters too


def _operation(request_type: type[Operation]) -> Callable[[Request], Awaitable[JSONResponse]]:
    """The handler of one shared operation: its request read (the JSON body, or a GET's
    parameters), answered as the caller's workspace sees the vault, saying which server
    process answered when the answer has diagnostics."""

    async def handle(request: Request) -> JSONResponse:
        if request.method == "POST":
            body = await _read(request, request_type)
        else:
            body = validated(request_type, query_params(request))
        ws = _workspace(request)
        answer = await run_in_threadpool(body.answer, ws)
        if isinstance(answer.get("diagnostics"), dict):
            answer["diagnostics"]["server_pid"] = _state(request).pid
        return JSONResponse(answer)

    return handle


def _operation_routes() -> list[Route]:
    routes = []
    for name, request_type in OPERATIONS.items():
        method, path = BODYLESS.get(name, ("POST", route(name)))
        methods = ["GET", method] if name in ALSO_GET else [method]
        routes.append(Route(path, _operation(request_type), methods=methods))
    return routes


async def index(request: Request) -> JSONResponse:
    body = await _read(request, IndexBody)
    _owner_only(request, "indexing")
    ws = _state(request).workspace
    report = await run_in_threadpool(lambda: ws.index(embed=body.embed, paths=body.paths))
    return JSONResponse(report.to_dict())


async def ask(request: Request) -> StreamingResponse:
    """One agent turn streamed as server-sent events: `tool_call` and `tool_result` as
    they happen, then `answer` (the TurnResult) or `error`. Nothing on the server can
    answer `ask` permissions, so they are denied, as on a non-interactive CLI."""
    body = await _read(request, AskBody)
    _owner_only(request, "an agent turn")
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
            *_operation_routes(),
            Route("/index", index, methods=["POST"]),
            Route("/ask", ask, methods=["POST"]),
        ],
        middleware=_middleware(token, allow_origin, workspace.team),
        exception_handlers=_exception_handlers(),
    )
    app.state.server = ServerState(workspace, token, watcher, max_body, read_timeout, os.getpid())
    return app


def _middleware(token: str, allow_origin: str | None, team: People) -> list[Middleware]:
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
    middleware.append(Middleware(BearerAuth, token=token, team=team))
    return middleware


def _exception_handlers() -> dict[Any, Callable[[Request, Exception], Awaitable[JSONResponse]]]:
    """Every answer is JSON, errors included: ours, Starlette's own (404, 405) and, logged
    with its traceback, anything unexpected (500)."""

    async def request_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestError)
        return _error(exc.status, exc.error, exc.message)

    async def vaultctx_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, VaultctxError)
        status = exc.http_status
        # a refusal is named as the agent's tools name it to a model
        name = exc.to_dict()["error"] if isinstance(exc, PermissionDenied) else type(exc).__name__
        return _error(status, name, str(exc))

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        response = _error(exc.status_code, HTTPStatus(exc.status_code).phrase.replace(" ", ""),
                          exc.detail)  # fmt: skip
        response.headers.update(exc.headers or {})
        return response

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ValidationError)
        error = invalid(exc)
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
