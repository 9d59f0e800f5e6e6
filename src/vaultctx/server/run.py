"""Run the API with uvicorn on 127.0.0.1, beside the vault watcher, and announce it.

`LocalServer` owns the lifecycle a desktop app or `vaultctx serve` needs: bind a loopback
port, start warming the model and caches in the background, start the watcher, write
`<vault>/.vaultctx/server.json` so the CLI finds the server (it is ready then; a request
that comes before the model has loaded waits only for the rest), and undo it all on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import AsyncIterator

import uvicorn
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from ..errors import ServerRunning
from ..storage.db import ProcessLock
from ..workspace import VaultWatcher, Workspace
from .app import create_app
from .auth import load_or_create_token, token_path
from .bodies import MAX_BODY_BYTES, READ_TIMEOUT_S
from .client import SERVER_FILE, ServerInfo, read_server_file, remove_server_file, write_server_file

HOST = "127.0.0.1"
_START_TIMEOUT_S = 30.0
_BACKLOG = 2048  # uvicorn's default
SERVER_LOCK = SERVER_FILE.with_name("server.lock")


class LocalServer:
    """The warm server of one workspace. `run()` blocks (the CLI); `start()` runs it in a
    background thread and returns once it accepts connections (apps and tests)."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        port: int = 0,
        watch: bool = True,
        warm: bool = True,
        allow_origin: str | None = None,
        max_body: int = MAX_BODY_BYTES,
        read_timeout: float = READ_TIMEOUT_S,
    ) -> None:
        """Raises `ServerRunning` (naming its port) when a server for this vault runs
        already — unless the vault's index is a team's database, which any number of servers
        answer from: this one then serves beside the first, which alone is announced in
        `server.json` — and `OSError` when the port is taken."""
        self.workspace = workspace
        self.watch = watch
        self.warm = warm
        self.read_timeout = read_timeout
        self._lock = ProcessLock(workspace.root / SERVER_LOCK)
        holder = self._lock.try_acquire()
        self.announced = holder is None
        if holder is not None and not workspace.shared:
            info = read_server_file(workspace.root)
            where = f" on {HOST}:{info.port}" if info is not None else ""
            raise ServerRunning(
                f"a vaultctx server for {workspace.root} is already running{where}"
                f" (pid {holder}): use it, or stop it first"
            )
        try:
            self.token = load_or_create_token()
            self._socket = _bind_loopback(port)
        except BaseException:
            self._lock.release()
            raise
        self.port: int = self._socket.getsockname()[1]
        self.watcher: VaultWatcher | None = None
        self._allow_origin = allow_origin
        self._max_body = max_body
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def run(self) -> None:
        """Serve until interrupted (Ctrl-C / SIGTERM), then stop the watcher and clean up."""
        try:
            if self.warm:
                self.workspace.warm_up(use_vectors=self.workspace.config.embed)
            self.workspace.forget_departed()  # people let go since: their memories' copies
            if self.watch:
                self.watcher = self.workspace.watch()
            else:  # a change of model still completes, in the background
                self.workspace.switch_in_background()
            app = create_app(
                self.workspace,
                token=self.token,
                watcher=self.watcher,
                allow_origin=self._allow_origin,
                max_body=self._max_body,
                read_timeout=self.read_timeout,
            )
            app.router.lifespan_context = self._lifespan
            config = uvicorn.Config(
                app,
                log_level="warning",
                access_log=False,
                timeout_graceful_shutdown=2,
                http=_with_header_timeout(self.read_timeout),
            )
            self._server = uvicorn.Server(config)
            self._server.run(sockets=[self._socket])
        finally:
            self._clean_up()
            self._socket.close()
            self._lock.release()

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: object) -> AsyncIterator[None]:
        """Announce the server while it runs. Cleaning up here, not only in `run()`, matters:
        on SIGTERM uvicorn re-raises the signal after shutdown, before `finally` can run."""
        root = self.workspace.root
        if self.announced:
            info = ServerInfo(self.port, os.getpid(), str(root), str(token_path()))
            write_server_file(root, info)
        try:
            yield
        finally:
            self._clean_up()

    def _clean_up(self) -> None:
        if self.announced:
            remove_server_file(self.workspace.root, os.getpid())
        if self.watcher is not None:
            self.watcher.stop()

    def start(self) -> LocalServer:
        self._thread = threading.Thread(target=self.run, name="vaultctx-serve", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while self._server is None or not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the vaultctx server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(_START_TIMEOUT_S)
            self._thread = None

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _with_header_timeout(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol, closing a connection whose request headers do not arrive
    whole within `seconds` (uvicorn times out idle keep-alive connections, but waits for a
    half-sent request forever; request bodies have their own limit, `read_body`), and
    answering a request it cannot parse in JSON."""

    class HeaderTimeout(AutoHTTPProtocol):  # type: ignore[misc, valid-type]  # uvicorn picks the class at import: mypy sees a variable
        _header_timer: asyncio.TimerHandle | None = None

        def data_received(self, data: bytes) -> None:
            waiting = self.cycle is None or self.cycle.response_complete
            if waiting and self._header_timer is None:
                self._header_timer = self.loop.call_later(seconds, self._expire, self.cycle)
            super().data_received(data)

        def _expire(self, cycle: object) -> None:
            self._header_timer = None
            if self.cycle is cycle:  # no request began since the timer started
                self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            """A request HTTP itself cannot parse, answered in JSON like every other error."""
            body = json.dumps({"error": "BadRequest", "message": msg}).encode()
            self.transport.write(
                b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
            )
            self.transport.close()

    return HeaderTimeout


def _bind_loopback(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit this: without it, Nagle and delayed ACKs add ~40 ms to every
    # second request on a keep-alive connection.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((HOST, port))
    except OSError:
        sock.close()
        raise
    # Listen now: uvicorn only listens after the lifespan startup that writes server.json,
    # and a client that read the file in between was refused; now it waits in the backlog.
    sock.listen(_BACKLOG)
    sock.set_inheritable(True)
    return sock
