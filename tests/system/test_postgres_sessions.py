"""Agent sessions on a team's database: a session one server started, another resumes with
its history; a vault's session files move in with its index, and back out as files.

Each host is a copy of the vault in a folder of its own with its own index folder, over one
PostgreSQL database; the model is the scripted one on 127.0.0.1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_model import AgentModel, agent_model_fixture  # noqa: F401
from conftest import open_host, two_hosts
from llm_server import LLMServer, Reply, llm_server_fixture  # noqa: F401
from vaultctx import Workspace
from vaultctx.agent import sessions_dir
from vaultctx.errors import SessionNotFound

VAULT = {
    "Hives.md": "# Hives\n\nThe beehives stand at the orchard, next to the pond.\n",
    "Varroa.md": "# Varroa\n\nTreat varroa mites with oxalic acid in winter.\n",
}


@pytest.fixture
def hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("VAULTCTX_ACCOUNT_DIR", str(tmp_path / "owner-account"))
    return two_hosts(tmp_path, VAULT)


def agent_host(root: Path, server: LLMServer, url: str | None) -> Workspace:
    """A host whose agent's model is the scripted one."""
    return open_host(root, url, llm_model="openai/test-agent", llm_api_base=server.api_base)


def test_a_session_one_server_started_another_resumes(
    hosts: tuple[Path, Path], postgres_url: str, llm_server: LLMServer, model: AgentModel
):
    first, second = hosts
    model.orchestrator.extend([Reply(content="By the pond."), Reply(content="Oxalic acid.")])
    with agent_host(first, llm_server, postgres_url) as a:
        a.index()
        started = a.ask("Where do the beehives stand?")
    with agent_host(second, llm_server, postgres_url) as b:
        resumed = b.ask("And what treats their mites?", session_id=started.session_id)
        listed = b.sessions()
        rows = b.session(started.session_id)
        with pytest.raises(SessionNotFound):
            b.session("20260101-000000-abcdef")
        assert not sessions_dir(b._agent_port()).exists()  # no file: the database holds it
    assert resumed.session_id == started.session_id
    second_turn = model.seen["orchestrator"][1].messages
    said = json.dumps(second_turn)
    assert "Where do the beehives stand?" in said and "By the pond." in said  # the history
    assert [s.id for s in listed] == [started.session_id]
    assert listed[0].turns == 2 and listed[0].first_question == "Where do the beehives stand?"
    questions = [r["content"] for r in rows if r["type"] == "message" and r["role"] == "user"]
    assert questions == ["Where do the beehives stand?", "And what treats their mites?"]
    assert rows[0]["type"] == "session" and rows[0]["id"] == started.session_id


def test_session_files_move_in_with_the_index_and_back(
    hosts: tuple[Path, Path], postgres_url: str, llm_server: LLMServer, model: AgentModel
):
    first, second = hosts
    model.orchestrator.append(Reply(content="By the pond."))
    with agent_host(first, llm_server, None) as alone:  # sessions before any database
        alone.index()
        before = alone.ask("Where do the beehives stand?")
        rows_before = alone.session(before.session_id)
    with agent_host(first, llm_server, postgres_url) as a:
        report = a.index()
    assert report.published["sessions"] == 1
    with agent_host(second, llm_server, postgres_url) as b:
        assert [s.id for s in b.sessions()] == [before.session_id]
        assert b.session(before.session_id) == rows_before  # rows as they were, times too
        b.restore_from_database()
    with agent_host(second, llm_server, None) as back:  # and back: files, no database
        assert [s.id for s in back.sessions()] == [before.session_id]
        assert back.session(before.session_id) == rows_before
