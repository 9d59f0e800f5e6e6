"""`vaultctx mcp` driven by the MCP SDK's own client over stdio, as a desktop client would."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.client import Client

from server_helpers import PASSED_ENV, run_session
from vaultctx import Workspace
from vaultctx.mcp_server import screen_line

NOTES = {
    "Hives/Varroa.md": "---\naliases: [mites]\n---\n# Varroa\n\nCount varroa mites in August.\n",
    "Hives/Feeding.md": "# Feeding\n\nFeed sugar syrup in autumn. See [[Varroa]].\n",
}


def test_mcp_tools_select_and_read_notes_read_only(make_vault: Callable[..., Path]) -> None:
    vault = make_vault(NOTES)
    with Workspace.open(vault, {"embed": False}) as ws:
        ws.index()
        ws.memory.add("They support LGBTQ+ folks.", tier="channel", scope="c", speaker="Gina")

    async def steps(client: Client) -> dict:
        tools = (await client.list_tools()).tools
        in_channel = await client.call_tool(
            "memory_search", {"query": "LGBTQ", "tier": "channel", "scope": "c"}
        )
        selected = await client.call_tool("select", {"query": "varroa mites", "k": 3})
        by_alias = await client.call_tool("read_note", {"note": "mites"})
        missing = await client.call_tool("read_note", {"note": "No Such Note"})
        context = await client.call_tool("context", {"query": "varroa mites", "budget": 100})
        memories = await client.call_tool("memory_search", {"query": "varroa"})
        return {
            "context": context,
            "memories": memories,
            "tools": {t.name: t for t in tools},
            "select": selected,
            "read": by_alias,
            "missing": missing,
            "in_channel": in_channel,
        }

    result = run_session(vault, steps, "--no-vectors")
    tools = result["tools"]
    assert set(tools) == {
        "select", "related", "read_note", "context", "memory_search", "touch", "focus",
        "clear_focus",
    }  # fmt: skip
    for name, tool in tools.items():
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (name not in ("touch", "clear_focus"))
        assert tool.annotations.destructive_hint is False
    assert "query" in tools["select"].input_schema["properties"]

    selected = result["select"]
    assert not selected.is_error
    candidates = selected.structured_content["candidates"]
    assert candidates[0]["path"] == "Hives/Varroa.md"

    read = result["read"]
    assert not read.is_error
    assert read.structured_content["path"] == "Hives/Varroa.md"
    assert "Count varroa mites" in read.structured_content["content"]
    assert result["missing"].is_error
    context = result["context"]
    assert not context.is_error
    assert context.structured_content["token_count"] <= 100
    assert context.structured_content["items"][0]["path"] == "Hives/Varroa.md"
    assert not result["memories"].is_error
    assert result["memories"].structured_content["memories"] == []  # not in the vault's tiers
    found = result["in_channel"].structured_content["memories"]
    assert found[0]["text"] == "Gina: They support LGBTQ+ folks."
    assert {(m["tier"], m["scope"]) for m in found} == {("channel", "c")}


TWINS = {
    "Sync/Introduction.md": "# Sync\nKeeps devices in step. See [[Sync/Security]].\n",
    "Sync/Security.md": "# Security\nEncryption keeps what you store private.\n",
    "Publish/Introduction.md": "# Publish\nPuts notes online. See [[Publish/Security]].\n",
    "Publish/Security.md": "# Security\nEncryption keeps what you store private.\n",
}


def test_mcp_touch_is_the_open_note_select_then_favours(make_vault: Callable[..., Path]) -> None:
    vault = make_vault(TWINS)
    with Workspace.open(vault, {"embed": False}) as ws:
        ws.index()

    async def steps(client: Client) -> dict:
        touched = await client.call_tool("touch", {"note": "Publish/Introduction"})
        selected = await client.call_tool("select", {"query": "security encryption", "k": 4})
        unknown = await client.call_tool("touch", {"note": "Nowhere"})
        return {"touched": touched, "select": selected, "unknown": unknown}

    result = run_session(vault, steps)
    assert result["touched"].structured_content == {
        "path": "Publish/Introduction.md",
        "touched": True,
    }
    assert result["unknown"].is_error
    over_mcp = [c["id"] for c in result["select"].structured_content["candidates"]]
    with Workspace.open(vault, {"embed": False}) as ws:  # the same index, through the API
        in_process = [c.id for c in ws.select("security encryption", k=4).candidates]
        assert ws.select("security encryption", k=1).candidates[0].path == "Publish/Security.md"
    assert over_mcp == in_process


def test_mcp_focus_shows_the_touched_note_and_clear_focus_forgets_it(
    make_vault: Callable[..., Path],
) -> None:
    vault = make_vault(TWINS)
    with Workspace.open(vault, {"embed": False}) as ws:
        ws.index()

    async def steps(client: Client) -> dict:
        await client.call_tool("touch", {"note": "Publish/Introduction"})
        shown = await client.call_tool("focus", {})
        selected = await client.call_tool("select", {"query": "security encryption", "k": 4})
        cleared = await client.call_tool("clear_focus", {})
        after = await client.call_tool("focus", {})
        return {"shown": shown, "select": selected, "cleared": cleared, "after": after}

    result = run_session(vault, steps)
    opened = [n for n in result["shown"].structured_content["notes"] if n["how"] == "opened"]
    assert [n["path"] for n in opened] == ["Publish/Introduction.md"]
    focus = result["select"].structured_content["diagnostics"]["focus"]
    assert focus["notes"][0]["path"] == "Publish/Introduction.md"
    assert result["cleared"].structured_content["cleared"] == 1
    after = result["after"].structured_content["notes"]
    assert [n for n in after if n["how"] == "opened"] == []


@pytest.mark.slow
def test_mcp_with_vectors_answers_its_first_select_with_the_model(
    make_vault: Callable[..., Path], embedder: object
) -> None:
    vault = make_vault(NOTES)
    with Workspace.open(vault, embedder=embedder) as ws:
        ws.index()

    async def steps(client: Client) -> object:
        return await client.call_tool("select", {"query": "mites in the colony", "k": 3})

    selected = run_session(vault, steps)
    assert not selected.is_error
    assert selected.structured_content["diagnostics"]["retrieval_path"] == "hybrid"


class RawClient:
    """`vaultctx mcp` spoken to line by line, as a client that sends whatever it likes; every
    read waits at most `timeout` seconds, so a line left unanswered fails the test."""

    def __init__(self, vault: Path, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vaultctx", "mcp", str(vault), "--no-vectors"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={k: v for k, v in os.environ.items() if k in PASSED_ENV},
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, line: str | bytes) -> None:
        assert self.process.stdin is not None
        raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")
        self.process.stdin.write(raw + b"\n")
        self.process.stdin.flush()

    def answer(self, line: str | bytes) -> dict:
        self.send(line)
        try:
            return json.loads(self.lines.get(timeout=self.timeout))
        except queue.Empty:
            raise AssertionError(f"no answer within {self.timeout}s to {line[:80]!r}") from None

    def request(self, request_id: int, method: str, params: dict) -> dict:
        return self.answer(
            json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        )

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=self.timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def raw_client(make_vault: Callable[..., Path]) -> Iterator[RawClient]:
    vault = make_vault(NOTES)
    with Workspace.open(vault, {"embed": False}) as ws:
        ws.index()
    client = RawClient(vault)
    try:
        initialized = client.request(
            0,
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        )
        assert "result" in initialized, initialized
        client.send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        yield client
    finally:
        client.close()


def _call(request_id: int, arguments: str) -> str:
    """A tools/call of select whose arguments are given as raw JSON text."""
    return (
        f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call",'
        f' "params": {{"name": "select", "arguments": {arguments}}}}}'
    )


MALFORMED = [  # (line, the error code, the id the answer carries)
    (_call(1, '{"query": "\\ud800 mites"}'), -32602, 1),
    (_call(2, '{"query": "mites", "k": ' + "9" * 5000 + "}"), -32602, 2),
    (_call(3, '{"query": ' + "[" * 10_000 + "]" * 10_000 + "}"), -32602, 3),
    ('{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {', -32700, 4),
    ("{not json at all", -32700, None),
    (b'{"jsonrpc": "2.0", "id": 5, "method": "ping", "x": "\xff"}', -32700, None),
    ('[{"jsonrpc": "2.0", "id": 6, "method": "ping"}]', -32600, None),
    ("42", -32600, None),
    ('{"jsonrpc": "2.0", "id": 7, "params": {}}', -32600, 7),
]


def test_mcp_answers_every_malformed_line_with_a_json_rpc_error_and_keeps_serving(
    raw_client: RawClient,
) -> None:
    for number, (line, code, request_id) in enumerate(MALFORMED):
        answer = raw_client.answer(line)
        assert answer["error"]["code"] == code, (line[:80], answer)
        assert answer["id"] == request_id, (line[:80], answer)
        assert "result" not in answer
        pong = raw_client.request(100 + number, "ping", {})
        assert pong == {"jsonrpc": "2.0", "id": 100 + number, "result": {}}
    # A notification gets no answer, even a malformed one: the next answer is the ping's.
    raw_client.send('{"jsonrpc": "2.0", "method": "notifications/x", "params": {"a": "\\udc00"}}')
    assert raw_client.request(200, "ping", {})["id"] == 200
    selected = raw_client.answer(_call(201, '{"query": "varroa mites", "k": 3}'))
    assert selected["id"] == 201 and not selected["result"].get("isError")
    assert selected["result"]["structuredContent"]["candidates"][0]["path"] == "Hives/Varroa.md"


@given(
    st.binary(max_size=300)
    | st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass"))
)
def test_any_line_is_read_or_answered_never_an_exception(raw: bytes) -> None:
    line, answer = screen_line(raw)
    assert line is None or answer is None
    if answer is not None:
        assert answer.message.error.code in (-32700, -32600, -32602)
        answer.message.model_dump_json(by_alias=True, exclude_unset=True)
