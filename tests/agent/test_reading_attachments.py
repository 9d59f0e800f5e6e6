"""The agents read a PDF or a canvas as text, never as its bytes: a PDF's pages as the index
holds them, a canvas's cards and edges as Markdown — in a child process and in a thread
alike, in a tool call and in a skill's context; and they write only into Markdown notes."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

import pytest

from agent_model import AgentModel, agent_model_fixture, call, open_agent_workspace  # noqa: F401
from conftest import hash_tree, write_files
from llm_server import LLMServer, Reply, ToolCallReply, llm_server_fixture  # noqa: F401
from pdf_files import make_pdf

PAPER = make_pdf(
    ["Foraging Range\nA field study", "Results\nThe waggle run lasts longer for far flowers."],
    outline=[("Introduction", 0), ("Results", 1)],
)
BOARD = {
    "nodes": [
        {"id": "t", "type": "text", "x": 0, "y": 0, "width": 200, "height": 80,
         "text": "Move the hives to the heather"},
        {"id": "h", "type": "file", "x": 300, "y": 0, "width": 200, "height": 80,
         "file": "Hives.md"},
    ],
    "edges": [{"id": "e", "fromNode": "t", "toNode": "h", "label": "which hives"}],
}  # fmt: skip
PAPER_TEXT = (
    "## Introduction > page 1\n\nForaging Range\nA field study\n\n"
    "## Results > page 2\n\nResults\nThe waggle run lasts longer for far flowers.\n"
)
BOARD_TEXT = (
    "Move the hives to the heather\n\n---\n\n[[Hives.md]]\n\n"
    '## Connections\n\n- "Move the hives to the heather" → [[Hives.md]]: which hives\n'
)
SKILL = (
    "---\nname: Paper Check\ndescription: Check the paper.\ncapabilities: [vault.read]\n---\n"
    "Check [[Papers/paper.pdf]] against [[Board.canvas]].\n"
)
VAULT = {
    "Hives.md": "# Hives\n\nThe hives stand by the orchard.\n",
    "Papers/paper.pdf": PAPER,
    "Board.canvas": json.dumps(BOARD),
    "Skills/Paper Check.md": SKILL,
    "Skills/manual.pdf": PAPER,  # a PDF in the skills folder is no skill
}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return write_files(tmp_path / "vault", VAULT)


@pytest.mark.parametrize("processes", [True, False], ids=["child-process", "thread"])
def test_read_note_gives_a_pdf_s_pages_and_a_canvas_s_cards_never_their_bytes(
    vault: Path, llm_server: LLMServer, model: AgentModel, processes: bool
) -> None:
    model.orchestrator.extend(
        [
            Reply(
                tool_calls=(
                    ToolCallReply("read_note", {"path": "paper.pdf"}, id="pdf"),
                    ToolCallReply("read_note", {"path": "Board.canvas"}, id="canvas"),
                )
            ),
            Reply(content="Done."),
        ]
    )
    with open_agent_workspace(vault, llm_server, agent_processes=processes) as ws:
        result = ws.ask("What do the paper and the board say?")
    pdf, canvas = (a["output"] for a in result.tool_activity)
    assert pdf == {"path": "Papers/paper.pdf", "content": PAPER_TEXT, "truncated": False}
    assert canvas == {"path": "Board.canvas", "content": BOARD_TEXT, "truncated": False}
    sent = json.dumps(model.seen["orchestrator"][1].messages)
    assert "waggle run" in sent and "%PDF" not in sent and '\\"nodes\\"' not in sent


def test_a_skill_s_context_holds_a_linked_pdf_s_pages_and_canvas_s_cards(
    vault: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    model.orchestrator.append(Reply(content="The paper agrees."))
    with open_agent_workspace(vault, llm_server) as ws:
        assert [s.name for s in ws.skill_catalog().skills] == ["Paper Check"]
        assert ws.skill_catalog().errors == ()
        ws.run_skill("Paper Check", {})
    context = model.seen["orchestrator"][0].messages[-2]["content"]
    assert '<note path="Papers/paper.pdf">' in context and escape(PAPER_TEXT.strip()) in context
    assert '<note path="Board.canvas">' in context and escape(BOARD_TEXT.strip()) in context
    assert "%PDF" not in context


def test_appending_to_a_pdf_or_a_canvas_writes_nothing(
    vault: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    (vault / ".vaultctx").mkdir(exist_ok=True)
    (vault / ".vaultctx" / "permissions.toml").write_text('[defaults]\n"vault.write" = "allow"\n')
    model.orchestrator.extend(
        [
            Reply(
                tool_calls=(
                    ToolCallReply("append_to_note", {"path": "paper.pdf", "text": "x"}),
                    ToolCallReply("add_tag", {"path": "Board.canvas", "tag": "plan"}),
                    ToolCallReply("append_to_note", {"path": "Hives.md", "text": "Fed."}),
                )
            ),
            Reply(content="Done."),
        ]
    )
    with open_agent_workspace(vault, llm_server) as ws:
        before = hash_tree(vault)
        result = ws.ask("Note it everywhere.")
    pdf, canvas, note = (a["output"] for a in result.tool_activity)
    assert pdf == {
        "error": "tool_failed",
        "message": "Papers/paper.pdf is not a Markdown note: nothing is written to it",
    }
    assert (
        canvas["error"] == "tool_failed" and "Board.canvas is not a Markdown" in canvas["message"]
    )
    assert note == {"appended": "Hives.md", "chars": 4}
    after = hash_tree(vault)
    assert {p for p in after if after[p] != before.get(p)} == {"Hives.md"}
