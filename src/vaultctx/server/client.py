"""Find a running server for a vault and ask it, with the standard library only.

The CLI calls `request_server()` before it imports the select pipeline: against a warm
server a query then costs an interpreter start, two loopback round trips and the server's
select. The first asks the announced port to prove, unauthenticated, that it holds this
install's token and serves this vault (`auth.proofs`); only then do the token and the query
go out. Any sign that no usable server is up (no discovery file, no trusted token file,
refused connection, no proof, another vault) returns None and the CLI answers in-process
instead, silently.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import socket
from pathlib import Path
from typing import Any, NamedTuple

from .. import errors
from .auth import proofs, read_token

# The folder that holds config.toml (config.CONFIG_DIRNAME), spelled out so this module
# imports nothing heavy; tests check the two agree.
SERVER_FILE = Path(".vaultctx") / "server.json"
HEALTH_TIMEOUT_S = 0.3
REQUEST_TIMEOUT_S = 30.0


class ServerInfo(NamedTuple):
    """What `<vault>/.vaultctx/server.json` says about a running server (never the token).

    `token_path` tells a person where the token is; no client reads the file it names (a
    synced or planted server.json could name any file): they read `auth.token_path()`."""

    port: int
    pid: int
    vault: str
    token_path: str

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


def route(operation: str) -> str:
    """The HTTP route of an operation of `vaultctx.operations` that takes a JSON body: its
    name with `_` as `/` (`memory_search`: `/memory/search`). The server serves each there
    and the CLI asks there, both from the operation's name."""
    return "/" + operation.replace("_", "/")


def server_file(vault: Path) -> Path:
    return vault / SERVER_FILE


def write_server_file(vault: Path, info: ServerInfo) -> Path:
    """Announce the server, owner-only like everything in `.vaultctx/` (the server writes
    this, so the config module's import is no cost to the CLI)."""
    from ..config import write_private

    return write_private(server_file(vault), json.dumps(info.to_dict()) + "\n")


def remove_server_file(vault: Path, pid: int) -> None:
    """Remove the discovery file if it still names this process (a newer server may own it)."""
    info = read_server_file(vault)
    if info is not None and info.pid == pid:
        with contextlib.suppress(OSError):
            server_file(vault).unlink()


def read_server_file(vault: Path) -> ServerInfo | None:
    try:
        data = json.loads(server_file(vault).read_text(encoding="utf-8"))
        return ServerInfo(
            port=int(data["port"]),
            pid=int(data["pid"]),
            vault=str(data["vault"]),
            token_path=str(data.get("token_path", "")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


class _NoServer(Exception):
    """No usable server: the caller falls back to answering in-process."""


def request_server(vault: str | Path, method: str, path: str, body: Any = None) -> Any | None:
    """The server's JSON answer for `vault`, or None when no server for it is up.

    A documented error the server reports (e.g. `InvalidQuery`) is raised as that
    `VaultctxError`, so the CLI behaves the same with or without a server.
    """
    root = Path(vault).expanduser().resolve()
    info = read_server_file(root)
    if info is None:
        return None
    token = read_token()
    if token is None:
        return None
    try:
        with socket.create_connection(("127.0.0.1", info.port), HEALTH_TIMEOUT_S) as sock:
            if not _proves_ours(sock, token, info.port, str(root)):
                return None
            sock.settimeout(REQUEST_TIMEOUT_S)
            return _exchange(sock, method, path, body, f"Authorization: Bearer {token}\r\n")
    except (_NoServer, OSError, ValueError):
        return None


def _proves_ours(sock: socket.socket, token: str, port: int, vault: str) -> bool:
    """Whether what listens on `sock` proves it holds `token` and serves `vault`; it learns
    only a fresh random challenge, and any answer but the proof means no server."""
    challenge = os.urandom(16).hex()
    health = _exchange(sock, "GET", f"/health?challenge={challenge}", None, "", strict=True)
    proof = health.get("proof") if isinstance(health, dict) else None
    said = proof.get("vault") if isinstance(proof, dict) else None
    expected = proofs(token, challenge, port, vault)["vault"]
    return isinstance(said, str) and hmac.compare_digest(said, expected)


def _exchange(
    sock: socket.socket, method: str, path: str, body: Any, headers: str, *, strict: bool = False
) -> Any:
    """One HTTP/1.1 request on a kept-alive connection, sent in a single write. With
    `strict`, any answer but a 200 means no server (not even a documented error).

    http.client would cost ~25 ms of imports (email, ssl) per CLI start; the server is ours
    and always answers with a Content-Length, so a few lines of socket code suffice.
    """
    payload = b"" if body is None else json.dumps(body).encode("utf-8")
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}"
    if body is not None:
        head += "Content-Type: application/json\r\n"
    head += f"Content-Length: {len(payload)}\r\n\r\n"
    sock.sendall(head.encode("latin-1") + payload)
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        buffer += _recv(sock)
    header_block, _, data = buffer.partition(b"\r\n\r\n")
    status_line, *header_lines = header_block.decode("latin-1").split("\r\n")
    status = int(status_line.split(" ", 2)[1])
    fields = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    if "content-length" not in fields:
        raise _NoServer("response without Content-Length")
    length = int(fields["content-length"])
    while len(data) < length:
        data += _recv(sock)
    if status == 200:
        return json.loads(data[:length])
    if 400 <= status < 500 and status != 401 and not strict:
        _raise_documented(data[:length])
    raise _NoServer(f"server answered {status}")


def _recv(sock: socket.socket) -> bytes:
    chunk = sock.recv(65536)
    if not chunk:
        raise _NoServer("server closed the connection")
    return chunk


def _raise_documented(data: bytes) -> None:
    """Re-raise the server's report of a `VaultctxError` as the same exception."""
    try:
        report = json.loads(data)
        kind = getattr(errors, str(report["error"]), None)
        message = str(report["message"])
    except (ValueError, KeyError, TypeError):
        return
    if isinstance(kind, type) and issubclass(kind, errors.VaultctxError):
        raise kind(message)
