"""Helpers for the server tests: a small vault served over HTTP on 127.0.0.1 (fixtures
`config_dir`, `workspace` and `server`), one HTTP request, the `/ask` event stream read to its
end, and an MCP session over stdio driven by the MCP SDK's own client.

Use the fixtures from a test module with
`from server_helpers import config_dir_fixture, server_fixture, workspace_fixture  # noqa: F401`.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from vaultctx import Workspace
from vaultctx.server.run import LocalServer

NOTES = {
    "Hives/Varroa.md": "# Varroa\n\nVarroa mites weaken the colony; count them in August.\n",
    "Hives/Feeding.md": "# Feeding\n\nFeed sugar syrup in autumn. See [[Varroa]].\n",
    "Garden/Tomatoes.md": "---\ntags: [garden]\n---\n# Tomatoes\n\nStake tomatoes early.\n",
}


@pytest.fixture(name="config_dir")
def config_dir_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config"
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(path))
    return path


@pytest.fixture(name="workspace")
def workspace_fixture(make_vault: Callable[..., Path], config_dir: Path) -> Iterator[Workspace]:
    ws = Workspace.open(make_vault(NOTES), {"embed": False})
    ws.index()
    yield ws
    ws.close()


@pytest.fixture(name="server")
def server_fixture(workspace: Workspace) -> Iterator[LocalServer]:
    with LocalServer(workspace, watch=False, warm=False) as running:
        yield running


def call(
    server: LocalServer,
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str | None = "",
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], Any]:
    """One request; `token=""` means the server's own token, None means no header."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token or server.token}"
    payload = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    if payload is not None:
        sent.setdefault("Content-Type", "application/json")
    try:
        conn.request(method, path, body=payload, headers=sent)
        response = conn.getresponse()
        data = response.read()
        is_json = response.getheader("content-type", "").startswith("application/json")
        return response.status, dict(response.getheaders()), json.loads(data) if is_json else data
    finally:
        conn.close()


def stream_ask(server: LocalServer, body: dict) -> list[tuple[str, dict]]:
    """POST /ask and read the event stream to its end: [(event, data)]."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request(
        "POST",
        "/ask",
        body=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"},
    )
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("content-type").startswith("text/event-stream")
    events = []
    for chunk in response.read().decode().split("\n\n"):
        if chunk.strip():
            kind, data = chunk.split("\n", 1)
            events.append((kind.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    conn.close()
    return events


PASSED_ENV = ("PATH", "HOME", "PYTHONPATH", "VAULTCTX_CACHE_DIR")


def run_session(vault: Path, steps: Callable, *flags: str) -> object:
    return run_stdio(sys.executable, ["-m", "vaultctx", "mcp", str(vault), *flags], steps)


def run_stdio(command: str, args: list[str], steps: Callable) -> object:
    """Start an MCP server as a client would (`command`, `args`) and run `steps` on it."""
    params = StdioServerParameters(
        command=command,
        args=args,
        env={k: v for k, v in os.environ.items() if k in PASSED_ENV},
    )

    async def main() -> object:
        async with Client(params, read_timeout_seconds=60) as client:
            return await steps(client)

    return anyio.run(main)
