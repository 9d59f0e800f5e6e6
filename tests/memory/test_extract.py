"""The LLM extractor: called for each turn, its memories stored with provenance and
importance, and any failure of the model falls back to the deterministic extractor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_server import LLMServer, Reply, llm_server_fixture  # noqa: F401
from vaultctx import Workspace
from vaultctx.llm import LLMSettings
from vaultctx.memory import LLMExtractor, MemoryKind, MemoryService, Tier

AT = "2023-05-08T13:56:00"
FACTS = {
    "memories": [
        {"text": "Ana moved to Porto in 2022.", "importance": 0.9, "personal": True},
        {"text": "Answer in short bullet points.", "importance": 0.7, "kind": "preference"},
    ]
}


def facade(tmp_path: Path, server: LLMServer) -> MemoryService:
    settings = LLMSettings(model="openai/test-extract", api_base=server.api_base, timeout=5.0)
    return MemoryService(
        tmp_path / "memory.db", vault_scope="v", user="ana", extractor=LLMExtractor(settings)
    )


def persist(mem: MemoryService) -> list:
    mem.persist_turn(
        "I moved to Porto last year. Please keep answers short.",
        session_id="s1", channel="c", turn_id="D1:3", at=AT, user_name="Ana", tier="channel",
    )  # fmt: skip
    assert mem.flush(60)
    return mem.list(tier="channel", scope="c")


def test_the_model_extracts_facts_stored_with_provenance_and_importance(tmp_path, llm_server):
    llm_server.script(Reply(content=json.dumps(FACTS)))
    with facade(tmp_path, llm_server) as mem:
        memories = persist(mem)
        assert mem.stats["extract_errors"] == 0
    request = llm_server.requests[0]
    assert "I moved to Porto last year." in request.text and "8 May 2023" in request.text
    assert "<untrusted_turn" in request.text
    fact = next(m for m in memories if m.kind is MemoryKind.SEMANTIC)
    assert fact.text == "Ana moved to Porto in 2022."
    assert fact.importance == 0.9
    assert fact.source.turns == ("D1:3",) and fact.source.origin == "llm"
    assert fact.source.speaker == "Ana" and fact.source.session_id == "s1"
    rule = next(m for m in memories if m.kind is MemoryKind.PROCEDURAL)
    assert rule.text == "Answer in short bullet points." and rule.importance == 0.7
    raw = [m for m in memories if m.kind is MemoryKind.EPISODIC and m.key is None]
    assert raw and raw[0].text.startswith("Ana: I moved to Porto")  # the turn itself is kept


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=500),
        Reply(content="Sure! Ana moved to Porto."),  # not JSON
        Reply(content='{"memories": [{"text": "x", "importance": 7}]}'),  # out of range
    ],
    ids=["server-error", "not-json", "invalid"],
)
def test_a_failing_or_invalid_model_falls_back_to_the_deterministic_extractor(
    tmp_path, llm_server, reply
):
    llm_server.script(reply)
    with facade(tmp_path, llm_server) as mem:
        memories = persist(mem)
        assert mem.stats["extract_errors"] == 1
        assert mem.stats["errors"] == 0  # the turn is still written
    assert llm_server.requests
    assert memories and all(m.source.origin == "deterministic" for m in memories)
    assert any("Porto" in m.text and m.source.turns == ("D1:3",) for m in memories)


def test_a_workspace_with_a_model_configured_extracts_with_it(tmp_path, llm_server):
    vault = tmp_path / "vault"
    vault.mkdir()
    config = {"embed": False, "llm_model": "openai/test-extract", "llm_api_base": "http://x"}
    with Workspace.open(vault, config) as ws:
        assert isinstance(ws.memory.extractor, LLMExtractor)
        assert ws.memory.extractor.settings.model == "openai/test-extract"
    with Workspace.open(vault, {"embed": False}) as ws:
        assert ws.memory.extractor.name == "deterministic"
        assert ws.memory.search("anything", tier=Tier.WORKSPACE) == []


def test_a_turn_added_through_the_public_api_is_extracted_by_the_model_too(tmp_path, llm_server):
    llm_server.script(Reply(content=json.dumps(FACTS)))
    with facade(tmp_path, llm_server) as mem:
        own = mem.add("Ana: I moved to Porto last year.", tier="channel", scope="c",
                      created_at=AT, speaker="Ana", session="s1", turn="D1:3")  # fmt: skip
        found = mem.search("When did Ana move to Porto?", tier="channel", scope="c")
    assert own.text == "Ana: I moved to Porto last year." and own.source.origin == "llm"
    assert "Ana moved to Porto in 2022." in [m.text for m in found[:3]]
    assert "I moved to Porto last year." in llm_server.requests[0].text
