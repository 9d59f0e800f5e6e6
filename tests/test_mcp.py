"""`vaultctx mcp` driven by the MCP SDK's own client over stdio, as a desktop client would."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from vaultctx import Workspace

NOTES = {
    "Hives/Varroa.md": "---\naliases: [mites]\n---\n# Varroa\n\nCount varroa mites in August.\n",
    "Hives/Feeding.md": "# Feeding\n\nFeed sugar syrup in autumn. See [[Varroa]].\n",
}


PASSED_ENV = ("PATH", "HOME", "PYTHONPATH", "VAULTCTX_CACHE_DIR")


def run_session(vault: Path, steps: Callable, *flags: str) -> object:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "vaultctx", "mcp", str(vault), *flags],
        env={k: v for k, v in os.environ.items() if k in PASSED_ENV},
    )

    async def main() -> object:
        async with Client(params, read_timeout_seconds=60) as client:
            return await steps(client)

    return anyio.run(main)


def test_mcp_tools_select_and_read_notes_read_only(make_vault: Callable[..., Path]) -> None:
    vault = make_vault(NOTES)
    with Workspace.open(vault, {"embed": False}) as ws:
        ws.index()

    async def steps(client: Client) -> dict:
        tools = (await client.list_tools()).tools
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
        }

    result = run_session(vault, steps, "--no-vectors")
    tools = result["tools"]
    assert set(tools) == {"select", "read_note", "context", "memory_search"}
    for tool in tools.values():
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
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
    assert result["memories"].structured_content["memories"] == []


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
    assert selected.structured_content["diagnostics"]["retrieval_path"] == "hybrid_rrf"
