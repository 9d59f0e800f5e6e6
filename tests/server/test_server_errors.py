"""A careless or hostile client always gets a clear, structured answer: JSON with the right
4xx status over HTTP (never a 500 or plain text, never a connection held forever), a tool
error stating what the CLI would say over MCP (never a traceback), and one server per vault."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client import Client
from mcp.server.mcpserver.exceptions import ToolError

from server_helpers import NOTES, call, run_session
from vaultctx import ServerRunning, Workspace
from vaultctx.mcp_server import create_mcp_server
from vaultctx.server.client import read_server_file
from vaultctx.server.run import LocalServer


@pytest.fixture
def workspace(
    make_vault: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Workspace]:
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(tmp_path / "config"))
    with Workspace.open(make_vault(NOTES), {"embed": False}) as ws:
        ws.index()
        yield ws


@pytest.fixture
def server(workspace: Workspace) -> Iterator[LocalServer]:
    with LocalServer(workspace, watch=False, warm=False, read_timeout=0.5) as running:
        yield running


def raw_exchange(server: LocalServer, data: bytes, wait: float = 5.0) -> bytes:
    """Send raw bytes; everything the server answers until it closes the connection."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=wait) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def http_body(path: str, body: bytes, token: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body


SURROGATE = b'"\\ud800"'  # a lone surrogate, as JSON may spell it
PROBES: list[tuple[str, bytes, int, str]] = [
    ("/select", b'{"query": ' + SURROGATE + b"}", 400, "BadUnicode"),
    ("/context", b'{"query": ' + SURROGATE + b"}", 400, "BadUnicode"),
    ("/memory/add", b'{"text": ' + SURROGATE + b"}", 400, "BadUnicode"),
    ("/touch", b'{"note": ' + SURROGATE + b"}", 400, "BadUnicode"),
    (
        "/select",
        b'{"query": "x", "tags": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}",
        400,
        "BadJSON",
    ),
    ("/select", b"[" * 40 + b"]" * 40, 400, "BadJSON"),
    (
        "/select",
        json.dumps({"query": "varroa", "tags": [f"t{i}" for i in range(1000)]}).encode(),
        422,
        "InvalidQuery",
    ),
    ("/memory/add", b'{"text": "x", "created_at": NaN}', 400, "BadJSON"),
    ("/memory/add", b'{"text": "x", "created_at": 1e300}', 422, "ConfigError"),
    ("/memory/add", b'{"text": "x", "created_at": -1e300}', 422, "ConfigError"),
    ("/select", b'{"query": "varroa", "k": 1e309}', 422, "ValidationError"),
    ("/select", b"not json", 400, "BadJSON"),
    ("/select", b'{"query": "varroa", "unknown": 1}', 422, "ValidationError"),
]


@pytest.mark.parametrize(("path", "body", "status", "error"), PROBES)
def test_hostile_bodies_get_a_json_4xx(
    server: LocalServer, path: str, body: bytes, status: int, error: str
) -> None:
    got, _, answer = call(server, "POST", path, raw=body)
    assert (got, answer["error"]) == (status, error), answer
    assert answer["message"]


def test_unknown_routes_and_methods_are_answered_in_json(server: LocalServer) -> None:
    for method, path, status in [("GET", "/nowhere", 404), ("GET", "/select", 405),
                                 ("DELETE", "/touch", 405)]:  # fmt: skip
        got, headers, answer = call(server, method, path)
        assert got == status
        assert headers["content-type"] == "application/json"
        assert set(answer) == {"error", "message"}
    got, _, answer = call(server, "GET", "/memory/search?query=x&k=zero")
    assert (got, answer["error"]) == (422, "ValidationError")


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /health HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",  # rebinding
        b"NOT HTTP AT ALL\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n",  # a header without its colon
        b"POST /select HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: x\r\n\r\n",
    ],
)
def test_requests_http_itself_refuses_are_answered_in_json(
    server: LocalServer, request_bytes: bytes
) -> None:
    head, _, body = raw_exchange(server, request_bytes).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"content-type: application/json" in head.lower()
    answer = json.loads(body)
    assert answer["error"] in ("BadHost", "BadRequest") and answer["message"]


def test_a_client_that_never_finishes_its_headers_is_cut_off(server: LocalServer) -> None:
    started = time.monotonic()
    answer = raw_exchange(server, b"POST /select HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    assert answer == b""  # closed, not held open
    assert time.monotonic() - started < 4
    assert call(server, "POST", "/select", {"query": "varroa"})[0] == 200  # still serving


def test_a_client_that_never_finishes_its_body_gets_408(server: LocalServer) -> None:
    head = http_body("/select", b'{"query": "varroa mites and more"}', server.token)
    answer = raw_exchange(server, head[:-10])  # the body's end never comes
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line == b"HTTP/1.1 408 Request Timeout"
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["error"] == "RequestTimeout"


def test_a_second_server_for_the_same_vault_refuses_and_names_the_first(
    server: LocalServer, workspace: Workspace
) -> None:
    announced = read_server_file(workspace.root)
    with pytest.raises(ServerRunning, match=f"already running on 127.0.0.1:{server.port}"):
        LocalServer(workspace, watch=False, warm=False)
    assert read_server_file(workspace.root) == announced  # the first's announcement stays
    assert call(server, "GET", "/health")[2]["pid"] == announced.pid


def test_a_server_may_start_again_once_the_first_stopped(workspace: Workspace) -> None:
    with LocalServer(workspace, watch=False, warm=False):
        pass
    with LocalServer(workspace, watch=False, warm=False) as again:
        assert read_server_file(workspace.root).port == again.port


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
FIELDS = st.sampled_from(
    [
        "query",
        "k",
        "note",
        "text",
        "tier",
        "budget",
        "tags",
        "fields",
        "since",
        "kinds",
        "created_at",
        "importance",
        "paths",
        "embed",
        "question",
    ]
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.sampled_from(
        ["/select", "/context", "/touch", "/memory/add", "/memory/search", "/index"]
    ),
    body=st.dictionaries(FIELDS, JSON_VALUES, max_size=5) | JSON_VALUES,
)
def test_every_generated_body_gets_a_json_answer_below_500(
    server: LocalServer, path: str, body: Any
) -> None:
    status, headers, answer = call(server, "POST", path, raw=json.dumps(body).encode())
    assert status < 500, answer
    assert headers["content-type"] == "application/json"
    assert isinstance(answer, dict)


# --- MCP -------------------------------------------------------------------------------------


def test_mcp_errors_say_what_the_cli_says_without_a_traceback(
    workspace: Workspace, capfd: pytest.CaptureFixture[str]
) -> None:
    async def steps(client: Client) -> list:
        return [
            await client.call_tool("read_note", {"note": "No Such Note"}),
            await client.call_tool("read_note", {"note": "../outside.md"}),
            await client.call_tool("touch", {"note": "%"}),
            await client.call_tool("context", {"query": "varroa", "budget": -1}),
            await client.call_tool("memory_search", {"query": "varroa", "tier": "galaxy"}),
            await client.call_tool("select", {"query": "   "}),
            await client.call_tool("select", {"query": "varroa", "tags": ["t"] * 100}),
            await client.call_tool("select", {"query": "varroa mites"}),
        ]

    results = run_session(workspace.root, steps, "--no-vectors")
    texts = [r.content[0].text for r in results[:-1]]
    assert all(r.is_error for r in results[:-1])
    assert not results[-1].is_error
    assert "NoteNotFound: no note named 'No Such Note'" in texts[0]
    assert "NoteNotFound" in texts[1] and "NoteNotFound" in texts[2]
    assert "budget" in texts[3] and "greater than or equal to 1" in texts[3]
    assert "tier" in texts[4]
    assert "InvalidQuery: the query is empty" in texts[5]
    assert "InvalidQuery: at most 64 tag and field filters" in texts[6]
    assert "Traceback" not in capfd.readouterr().err


def test_an_mcp_argument_that_is_not_unicode_is_a_tool_error(workspace: Workspace) -> None:
    """A client's JSON may hold a lone surrogate (`"\\ud800"`); the SDK's own client cannot
    send one, so the server is called in-process with what such JSON parses to."""
    server = create_mcp_server(workspace, use_vectors=False)
    for name, arguments in [("select", {"query": "\ud800"}), ("touch", {"note": "\ud800"})]:
        with pytest.raises(ToolError, match="InvalidQuery: the text is not valid Unicode"):
            anyio.run(server.call_tool, name, arguments)
