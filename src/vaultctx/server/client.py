"""Find a running server for a vault and ask it, with the standard library only.

The CLI calls `request_server()` before it imports the select pipeline: against a warm
server a query then costs an interpreter start, two loopback round trips and the server's
select. Any sign that no usable server is up (no discovery file, refused connection, another
vault, a stale token) returns None and the CLI answers in-process instead, silently.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from pathlib import Path
from typing import Any, NamedTuple

from .. import errors

# The folder that holds config.toml (config.CONFIG_DIRNAME), spelled out so this module
# imports nothing heavy; tests check the two agree.
SERVER_FILE = Path(".vaultctx") / "server.json"
HEALTH_TIMEOUT_S = 0.3
REQUEST_TIMEOUT_S = 30.0


class ServerInfo(NamedTuple):
    """What `<vault>/.vaultctx/server.json` says about a running server (never the token)."""

    port: int
    pid: int
    vault: str
    token_path: str

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


def server_file(vault: Path) -> Path:
    return vault / SERVER_FILE


def write_server_file(vault: Path, info: ServerInfo) -> Path:
    path = server_file(vault)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(info.to_dict()) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


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
            token_path=str(data["token_path"]),
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
    try:
        token = Path(info.token_path).read_text(encoding="utf-8").strip()
        auth = f"Authorization: Bearer {token}\r\n"
        with socket.create_connection(("127.0.0.1", info.port), HEALTH_TIMEOUT_S) as sock:
            health = _exchange(sock, "GET", "/health", None, auth)  # names the vault to us only
            if health.get("vault") != str(root) or health.get("pid") != info.pid:
                return None
            sock.settimeout(REQUEST_TIMEOUT_S)
            return _exchange(sock, method, path, body, auth)
    except (_NoServer, OSError, ValueError):
        return None


def _exchange(sock: socket.socket, method: str, path: str, body: Any, headers: str) -> Any:
    """One HTTP/1.1 request on a kept-alive connection, sent in a single write.

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
    if 400 <= status < 500 and status != 401:
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
