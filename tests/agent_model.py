"""A scripted model per agent, for agent-turn tests against the scripted LLM server.

Requests are told apart by their system prompt: the Orchestrator's, the Researcher's or the
Skill Composer's; each agent reads its own queue of replies (then answers "<agent> done").
A queued item may also be a function of the request, for a test that acts while the model
"thinks" (kill a child process, say). Refine-gate requests (no tools) get an invalid answer,
so the deterministic gate decides.

    model.orchestrator.append(call("investigate", question="mites?"))   # the `model` fixture
    with open_agent_workspace(vault, llm_server) as ws: ...

Use it from a test module with `from agent_model import agent_model_fixture  # noqa: F401`
(beside `llm_server_fixture`) and a test parameter named `model`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from pathlib import Path

import pytest

from llm_server import LLMServer, Reply, Request, ToolCallReply
from vaultctx import Workspace
from vaultctx.prompts import ORCHESTRATOR_SYSTEM, RESEARCHER_SYSTEM, SKILL_SYSTEM

AGENTS = {
    ORCHESTRATOR_SYSTEM: "orchestrator",
    RESEARCHER_SYSTEM: "researcher",
    SKILL_SYSTEM: "skill",
}

Scripted = Reply | Callable[[Request], Reply]


class AgentModel:
    def __init__(self) -> None:
        self.orchestrator: deque[Scripted] = deque()
        self.researcher: deque[Scripted] = deque()
        self.skill: deque[Scripted] = deque()
        self.seen: dict[str, list[Request]] = {agent: [] for agent in AGENTS.values()}

    def __call__(self, request: Request) -> Reply:
        if "tools" not in request.body:
            return Reply(content="not json")
        agent = AGENTS[request.messages[0]["content"]]
        self.seen[agent].append(request)
        queue: deque[Scripted] = getattr(self, agent)
        if not queue:
            return Reply(content=f"{agent} done")
        scripted = queue.popleft()
        return scripted if isinstance(scripted, Reply) else scripted(request)


def call(name: str, **arguments: object) -> Reply:
    """A reply that makes one tool call."""
    return Reply(tool_calls=(ToolCallReply(name, arguments),))


@pytest.fixture(name="model")
def agent_model_fixture(llm_server: LLMServer) -> AgentModel:
    """The scripted per-agent model, answering on the test's `llm_server`."""
    scripted = AgentModel()
    llm_server.script(scripted)
    return scripted


def open_agent_workspace(root: Path, server: LLMServer, **config: object) -> Workspace:
    """The vault indexed without embeddings, its agent's model on `server`."""
    ws = Workspace.open(
        root,
        {"llm_model": "openai/test-agent", "llm_api_base": server.api_base, "embed": False}
        | config,
    )
    ws.index(embed=False)
    return ws
