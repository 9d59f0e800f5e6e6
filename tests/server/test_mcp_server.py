"""`vaultctx mcp` driven by the MCP SDK's own client over stdio, as a desktop client would."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mcp.client import Client

from server_helpers import run_session
from vaultctx import Workspace

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
    assert set(tools) == {"select", "related", "read_note", "context", "memory_search", "touch"}
    for name, tool in tools.items():
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (name != "touch")
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
