"""`POST /ask`: an agent turn streamed as server-sent events over real HTTP, the model being
the scripted OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import agent_children
from llm_server import LLMServer, Reply, ToolCallReply, llm_server_fixture  # noqa: F401
from server_helpers import stream_ask
from vaultctx import Workspace
from vaultctx.server.run import LocalServer

NOTES = {"Varroa.md": "# Varroa\n\nTreat varroa mites with oxalic acid in winter.\n"}


@pytest.fixture
def served(
    make_vault: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., LocalServer]]:
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(tmp_path / "config"))
    opened: list[tuple[Workspace, LocalServer]] = []

    def start(**config: object) -> LocalServer:
        ws = Workspace.open(make_vault(NOTES), {"embed": False, **config})
        ws.index()
        server = LocalServer(ws, watch=False, warm=False).start()
        opened.append((ws, server))
        return server

    yield start
    for ws, server in opened:
        server.stop()
        ws.close()


def test_ask_streams_tool_activity_then_the_answer(served, llm_server: LLMServer) -> None:
    replies = iter(
        [
            Reply(tool_calls=(ToolCallReply("read_note", {"path": "Varroa.md"}),)),
            Reply(content="Use oxalic acid in winter [[Varroa.md]]."),
        ]
    )
    # refine-gate requests carry no tools: answer them with nonsense, the gate falls back
    llm_server.script(lambda r: next(replies) if "tools" in r.body else Reply(content="?"))
    server = served(llm_model="openai/test-agent", llm_api_base=llm_server.api_base)
    events = stream_ask(server, {"question": "How do I treat varroa?"})
    kinds = [kind for kind, _ in events]
    assert kinds == ["tool_call", "tool_result", "answer"]
    assert events[0][1]["name"] == "read_note" and events[0][1]["agent"] == "worker"
    assert agent_children() == [], "the worker's process ended with the turn"
    answer = events[-1][1]
    assert "oxalic acid" in answer["answer"]
    assert answer["citations"] == ["Varroa.md"]
    assert answer["session_id"]


def test_ask_without_a_model_ends_with_an_error_event(served) -> None:
    server = served()
    events = stream_ask(server, {"question": "anything"})
    assert events == [("error", events[0][1])]
    assert events[0][1]["error"] == "LLMNotConfigured"
