"""`vaultctx ask`, `chat` and `sessions`, as a user runs them, against the scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import hash_tree, write_files
from llm_server import LLMServer, Reply, ToolCallReply, llm_server_fixture  # noqa: F401
from vaultctx.cli import cli

NOTES = {
    "Hives.md": "# Hives\n\nThe beehives stand at the orchard.\n",
    "Inbox/Todo.md": "# Todo\n\n- buy frames\n",
}


def run(*args: str, stdin: str | None = None):
    return CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)


@pytest.fixture
def vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_server: LLMServer) -> Path:
    monkeypatch.setenv("VAULTCTX_LLM_API_BASE", llm_server.api_base)
    root = write_files(tmp_path / "vault", NOTES)
    assert run("index", str(root), "--no-embed").exit_code == 0
    return root


def agent_replies(llm_server: LLMServer, *replies: Reply) -> None:
    """Agent requests (they carry tools) get `replies` in order; the refine gate gets an
    invalid answer, so the deterministic gate decides."""
    queue = list(replies)

    def respond(request) -> Reply:
        if "tools" not in request.body:
            return Reply(content="not json")
        return queue.pop(0) if len(queue) > 1 else queue[0]

    llm_server.script(respond)


def test_ask_json_answers_with_citations_and_sessions_list_and_show_it(
    vault: Path, llm_server: LLMServer
) -> None:
    agent_replies(llm_server, Reply(content="At the orchard [[Hives.md]]."))
    result = run("ask", "Where are the hives?", "-V", str(vault), "--model",
                 "openai:test-agent", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["citations"] == ["Hives.md"] and answer["model"] == "openai/test-agent"
    listed = json.loads(run("sessions", "list", "-V", str(vault), "--json").stdout)
    assert [s["id"] for s in listed["sessions"]] == [answer["session_id"]]
    assert listed["sessions"][0]["turns"] == 1
    shown = run("sessions", "show", answer["session_id"], "-V", str(vault), "--json")
    types = [row["type"] for row in json.loads(shown.stdout)["rows"]]
    assert types[0] == "session" and "completion_trace" in types
    human = run("sessions", "show", answer["session_id"], "-V", str(vault))
    assert "(system prompt)" in human.stdout and "At the orchard" in human.stdout


def test_ask_shows_tool_activity_and_yes_allows_a_write(vault: Path, llm_server: LLMServer) -> None:
    create = ToolCallReply("create_note", {"path": "Inbox/Frames.md", "content": "# Frames"})
    agent_replies(llm_server, Reply(tool_calls=(create,)), Reply(content="Created."))
    args = ("ask", "Create a note", "-V", str(vault), "--model", "openai/test-agent")
    denied = run(*args)
    assert "permission_denied" in denied.stderr and not (vault / "Inbox/Frames.md").exists()
    agent_replies(llm_server, Reply(tool_calls=(create,)), Reply(content="Created."))
    allowed = run(*args, "--yes")
    assert allowed.exit_code == 0
    assert "create_note" in allowed.stderr and "Created." in allowed.stdout
    assert (vault / "Inbox/Frames.md").read_text() == "# Frames\n"


def test_ask_without_a_model_is_one_error_line(vault: Path, monkeypatch) -> None:
    monkeypatch.delenv("VAULTCTX_LLM_API_BASE")
    before = hash_tree(vault)
    result = run("ask", "anything", "-V", str(vault), "--json")
    assert result.exit_code == 11
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["error"]["type"] == "LLMNotConfigured"
    plain = run("ask", "anything", "-V", str(vault))
    assert plain.exit_code == 11 and "no model configured" in plain.stderr
    assert hash_tree(vault) == before


def test_chat_keeps_one_session_across_lines_and_resumes(
    vault: Path, llm_server: LLMServer
) -> None:
    agent_replies(llm_server, Reply(content="one"), Reply(content="two"), Reply(content="three"))
    args = ("chat", "-V", str(vault), "--model", "openai/test-agent")
    result = run(*args, stdin="first\nsecond\n/exit\nnever\n")
    assert result.exit_code == 0 and "one" in result.stdout and "two" in result.stdout
    listed = json.loads(run("sessions", "list", "-V", str(vault), "--json").stdout)["sessions"]
    assert len(listed) == 1 and listed[0]["turns"] == 2
    resumed = run(*args, "--session", listed[0]["id"], stdin="third\n")
    assert "three" in resumed.stdout
    history = [m for m in llm_server.requests[-1].messages if m["role"] in ("user", "assistant")]
    assert [m["content"] for m in history] == ["first", "one", "second", "two", "third"]


def test_sessions_show_of_an_unknown_id_is_an_error(vault: Path) -> None:
    assert run("sessions", "show", "nope", "-V", str(vault)).exit_code == 17
    assert run("sessions", "show", "../../etc", "-V", str(vault)).exit_code == 17
