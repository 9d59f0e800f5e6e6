"""Delegations in child processes: a stuck or dying child is stopped, the turn still
answers, no child outlives the turn, the vault holds only what the parent committed, and
the session file holds exactly what each agent's model saw."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agent_model import AgentModel, agent_model_fixture, call, open_agent_workspace  # noqa: F401
from conftest import agent_children, hash_tree, write_files
from llm_server import LLMServer, Reply, Request, ToolCallReply, llm_server_fixture  # noqa: F401
from vaultctx.agent import load_session
from vaultctx.agent.tool_handlers import HANDLERS
from vaultctx.agent.tools import VAULT_TOOLS_BY_NAME
from vaultctx.prompts import tool_result_text

VAULT = {
    "Hives.md": "# Hives\n\nThe beehives stand at the orchard. See [[Varroa]].\n",
    "Varroa.md": "# Varroa\n\nTreat varroa mites with oxalic acid in winter.\n",
    "Stuck.md": "# Stuck\n\nSoon a pipe that nobody writes to.\n",
    "Skills/Mite Check.md": "---\nname: Mite Check\ndescription: Check the mite treatment.\n"
    "inputs:\n  hive: {type: str, required: true}\ncapabilities: [vault.read]\n---\n"
    "Check the mites of {{ hive }}. See [[Varroa]].\n",
}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return write_files(tmp_path / "vault", VAULT)


def test_a_worker_stuck_past_its_timeout_is_killed_and_the_turn_answers(
    vault: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    before = hash_tree(vault)
    with open_agent_workspace(vault, llm_server, agent_timeout=1.0) as ws:
        model.orchestrator.extend(
            [call("append_to_note", path="Stuck.md", text="x"), Reply(content="Nothing changed.")]
        )
        stuck: list[int] = []

        def asker(capability: str, resource: str) -> bool:
            """While the person is asked the worker waits for the answer: it is frozen now
            (a stalled mount, a hung read) and never sends its write."""
            stuck.extend(agent_children())
            for pid in stuck:
                os.kill(pid, signal.SIGSTOP)
            return True

        result = ws.ask("Append to the stuck note", asker=asker)
    assert len(stuck) == 1, "the worker ran in one child process"
    assert not Path(f"/proc/{stuck[0]}").exists(), "the stuck child was killed and reaped"
    assert agent_children() == []
    assert result.tool_activity[-1]["output"] == {
        "error": "worker_timeout",
        "message": "the worker did not finish within 1 s",
    }
    assert "worker_timeout" in model.seen["orchestrator"][1].messages[-1]["content"]
    assert result.answer == "Nothing changed."
    assert hash_tree(vault) == before


def test_a_fifo_where_a_note_was_is_refused_at_once(
    vault: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    with open_agent_workspace(vault, llm_server, agent_timeout=5.0) as ws:
        (vault / "Stuck.md").unlink()
        os.mkfifo(vault / "Stuck.md")  # indexed as a note; a blocking read would hang forever
        model.orchestrator.extend(
            [call("read_note", path="Stuck.md"), Reply(content="That note did not open.")]
        )
        result = ws.ask("Read the stuck note")
    assert result.tool_activity[-1]["output"] == {
        "error": "note_not_found",
        "message": "Stuck.md is not a regular file",
    }
    assert agent_children() == []
    assert result.answer == "That note did not open."


def test_a_child_that_dies_mid_call_leaves_the_vault_as_it_was(
    vault: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    model.orchestrator.extend(
        [
            Reply(
                tool_calls=(
                    ToolCallReply("append_to_note", {"path": "Hives.md", "text": "half"}),
                    ToolCallReply("create_note", {"path": "New.md", "content": "never"}),
                )
            ),
            Reply(content="The worker died."),
        ]
    )
    before = hash_tree(vault)

    def kill_the_asking_child(capability: str, resource: str) -> bool:
        """The worker waits for this answer to write: it dies first, then gets a yes."""
        (pid,) = agent_children()
        os.kill(pid, signal.SIGKILL)
        return True

    with open_agent_workspace(vault, llm_server) as ws:
        result = ws.ask("Append and create", asker=kill_the_asking_child)
    assert hash_tree(vault) == before
    assert agent_children() == []
    outputs = [a["output"] for a in result.tool_activity]
    died = {"error": "worker_failed", "message": "the process was killed by SIGKILL"}
    assert outputs == [died, died]
    assert result.answer == "The worker died."


def test_a_researcher_whose_process_dies_is_a_structured_error(
    vault: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    def crash(request: Request) -> Reply:
        for pid in agent_children():  # the researcher waits for this answer
            os.kill(pid, signal.SIGKILL)
        return Reply(content="never delivered")

    model.orchestrator.extend([call("investigate", question="mites?"), Reply(content="Sorry.")])
    model.researcher.append(crash)
    with open_agent_workspace(vault, llm_server) as ws:
        result = ws.ask("Investigate the mites")
    assert result.tool_activity[0]["output"] == {
        "error": "researcher_failed",
        "message": "the process was killed by SIGKILL",
    }
    assert result.answer == "Sorry." and agent_children() == []


BROKEN_CHILDREN = {
    "cannot start": (["/nonexistent/python"], "FileNotFoundError: "),
    "dies at once": ([sys.executable, "-c", "import sys; sys.exit(3)"], "exited with code 3"),
    "talks nonsense": (
        [sys.executable, "-c", "import sys; from vaultctx.childproc import send;"
         " send(sys.stdout.buffer, ('hello',)); sys.stdin.buffer.read()"],
        "broke the protocol",
    ),
    "sends garbage": (
        [sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'\\x05' + bytes(7) +"
         " b'hello'); sys.stdout.flush(); sys.stdin.buffer.read()"],
        "stopped talking",
    ),
}  # fmt: skip


@pytest.mark.parametrize("broken", list(BROKEN_CHILDREN))
def test_a_child_that_cannot_serve_is_a_structured_error_and_the_turn_answers(
    vault: Path, llm_server: LLMServer, model: AgentModel, monkeypatch: pytest.MonkeyPatch,
    broken: str,
) -> None:  # fmt: skip
    command, message = BROKEN_CHILDREN[broken]
    monkeypatch.setattr("vaultctx.agent.delegates.child_command", lambda *args: command)
    model.orchestrator.extend([call("read_note", path="Varroa"), Reply(content="No luck.")])
    with open_agent_workspace(vault, llm_server) as ws:
        result = ws.ask("Read about varroa")
    output = result.tool_activity[0]["output"]
    assert output["error"] == "worker_failed" and message in output["message"]
    assert result.answer == "No luck." and agent_children() == []


def test_one_child_serves_the_turn_and_none_outlives_it(
    vault: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    seen: list[int] = []

    def note_children(kind: str, data: dict) -> None:
        if kind == "tool_call" and data["agent"] != "orchestrator":
            seen.extend(agent_children())

    model.orchestrator.extend(
        [
            call("list_by_tag", tag="none"),
            call("investigate", question="mites?"),
            call("read_note", path="Varroa"),
            Reply(content="Done."),
        ]
    )
    model.researcher.extend([call("read_note", path="Hives"), Reply(content="{}")])
    with open_agent_workspace(vault, llm_server) as ws:
        result = ws.ask("Look around", on_event=note_children)
    assert len(set(seen)) == 1 and os.getpid() not in seen
    assert agent_children() == []
    assert [a["agent"] for a in result.tool_activity] == [
        "worker",
        "researcher",
        "orchestrator",
        "worker",
    ]


def test_processes_and_threads_give_the_same_turn(
    tmp_path: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    script = [
        Reply(
            tool_calls=(
                ToolCallReply("select", {"query": "varroa mites", "k": 3}),
                ToolCallReply("follow_links", {"path": "Hives"}),
                ToolCallReply("read_note", {"path": "../outside.md"}),
                ToolCallReply("write_memory", {"text": "The user keeps bees."}),
                ToolCallReply("skill_mite_check", {"hive": "Clover"}),
            )
        ),
        Reply(content="Done."),
    ]
    turns = []
    for processes in (True, False):
        model.orchestrator.extend(script)
        model.skill.extend([call("backlinks", path="Varroa.md"), Reply(content="Fine.")])
        vault = write_files(tmp_path / f"processes={processes}", VAULT)
        with open_agent_workspace(vault, llm_server, agent_processes=processes) as ws:
            turns.append(ws.ask("Check the hives"))
    by_process, by_thread = ([(a["name"], a["output"]) for a in t.tool_activity] for t in turns)
    for _, output in by_process + by_thread:
        output.pop("remembered", None)  # a new memory id each time
    assert by_process == by_thread
    assert [name for name, _ in by_process] == [
        "select",
        "follow_links",
        "read_note",
        "write_memory",
        "backlinks",
        "skill_mite_check",
    ]


def test_the_session_file_replays_to_the_prompts_every_agent_sent(
    vault: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    model.orchestrator.extend(
        [
            Reply(
                tool_calls=(
                    ToolCallReply("skill_mite_check", {"hive": "Clover"}),
                    ToolCallReply("investigate", {"question": "Where are the hives?"}),
                )
            ),
            Reply(content="Clover is fine [[Varroa.md]]."),
        ]
    )
    model.skill.extend([call("read_note", path="Varroa"), Reply(content="Oxalic acid.")])
    model.researcher.extend([call("select", query="hives"), Reply(content="{}")])
    with open_agent_workspace(vault, llm_server) as ws:
        result = ws.ask("How are the mites of Clover?")
        rows = load_session(ws._agent_port(), result.session_id)
    for agent, requests in model.seen.items():
        logged = [r for r in rows if r["type"] == "message" and r["role"] == "system"]
        prompt = next(r["content"] for r in logged if r["metadata"]["agent"] == agent)
        assert prompt == requests[0].messages[0]["content"]
        results = [r for r in rows if r["type"] == "tool_result" and r["agent"] == agent]
        replayed = [tool_result_text(r["name"], r["output"]) for r in results]
        sent = [m["content"] for m in requests[1].messages if m["role"] == "tool"]
        assert replayed == sent and sent, agent
        traces = [r for r in rows if r["type"] == "completion_trace" and r["agent"] == agent]
        assert len(traces) == len(requests) == 2


def test_a_child_process_imports_no_heavy_library() -> None:
    """Start-up stays cheap: the child leaves pydantic, the index and the models to the parent."""
    probe = (
        "import sys, json\n"
        "import vaultctx.agent.child\n"
        "heavy = {'pydantic', 'numpy', 'torch', 'litellm', 'networkx', 'jinja2', 'sqlite3'}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == []


def test_every_tool_the_model_sees_has_a_handler_and_no_other_has() -> None:
    assert set(HANDLERS) == set(VAULT_TOOLS_BY_NAME)
