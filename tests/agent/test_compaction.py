"""Compaction of long sessions: triggered at the context budget, cited tool results kept,
every original row still on disk, and a resumed session rebuilds what the model saw."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import write_files
from llm_server import LLMServer, Reply, Request, ToolCallReply, llm_server_fixture  # noqa: F401
from vaultctx import Workspace
from vaultctx.agent import history_from_rows, load_session
from vaultctx.agent.compaction import compact
from vaultctx.llm import LLMSettings, count_tokens
from vaultctx.prompts import COMPACTION_SYSTEM

MODEL = "openai/test-agent"
LONG = " ".join(f"word{i}" for i in range(400))
VAULT = {
    "Hives.md": "# Hives\n\nThe beehives stand at the orchard.\n",
    "Varroa.md": "# Varroa\n\nTreat varroa mites with oxalic acid in winter.\n",
}
SUMMARY_MARK = "Summary of the earlier turns of this session"


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return write_files(tmp_path / "vault", VAULT)


class Script:
    """Agent requests get `agent` replies in order; the compaction summarizer gets
    `summarizer`; anything else (the refine gate) an invalid answer."""

    def __init__(self, server: LLMServer) -> None:
        self.agent: list[Reply] = []
        self.summarizer = Reply(content='{"summary": "They talked about the hives."}')
        self.seen: list[Request] = []
        self.summarized: list[Request] = []
        server.script(self)

    def __call__(self, request: Request) -> Reply:
        if request.messages[0]["content"] == COMPACTION_SYSTEM:
            self.summarized.append(request)
            return self.summarizer
        if "tools" not in request.body:
            return Reply(content="not json")
        self.seen.append(request)
        return self.agent.pop(0) if self.agent else Reply(content="ok")


def open_ws(root: Path, server: LLMServer, **config: object) -> Workspace:
    ws = Workspace.open(
        root,
        {
            "llm_api_base": server.api_base,
            "embed": False,
            "budget_tokens": 100,
            "compaction_keep_turns": 1,
        }
        | config,
    )
    ws.index(embed=False)
    return ws


def chat_history(request: Request) -> list[dict]:
    """The history part of an agent request: the summary and the earlier turns."""
    return [
        {"role": m["role"], "content": m["content"]}
        for m in request.messages[2:-2]
        if m["role"] in ("user", "assistant") or m["content"].startswith(SUMMARY_MARK)
    ]


def two_long_turns(vault: Path, server: LLMServer, script: Script, **config: object) -> str:
    """Turn 1 reads Hives.md and Varroa.md; turn 2's long answer cites only Hives.md."""
    script.agent.extend(
        [
            Reply(
                tool_calls=(
                    ToolCallReply("read_note", {"path": "Hives.md"}, id="call_hives"),
                    ToolCallReply("read_note", {"path": "Varroa.md"}, id="call_varroa"),
                )
            ),
            Reply(content=f"The hives are at the orchard. {LONG}"),
            Reply(content=f"As [[Hives]] says, near the pond. {LONG}"),
        ]
    )
    with open_ws(vault, server, **config) as ws:
        first = ws.ask("Where are my hives and what about mites?", model=MODEL)
        ws.ask("Is that near water?", session_id=first.session_id, model=MODEL)
        assert not [
            r for r in load_session(ws._agent_port(), first.session_id) if r["type"] == "compaction"
        ]
    return first.session_id


def test_compaction_triggers_at_the_budget_keeps_cited_results_and_every_row(
    vault: Path, llm_server: LLMServer
) -> None:
    script = Script(llm_server)
    session = two_long_turns(vault, llm_server, script)
    window = count_tokens(script.seen[-1].messages, model=MODEL) + 50  # turn 2 fits
    with open_ws(vault, llm_server, context_window_tokens=window) as ws:
        before = load_session(ws._agent_port(), session)
        script.agent.append(Reply(content="Yes."))
        ws.ask("Should I move them?", session_id=session, model=MODEL)
        after = load_session(ws._agent_port(), session)
    assert after[: len(before)] == before  # every original row is still on disk
    (compaction,) = [r for r in after if r["type"] == "compaction"]
    assert compaction["mode"] == "deterministic" and compaction["through_turn"] == 1
    turn_one = [
        i
        for i, r in enumerate(before)
        if r["type"] == "message"
        and r.get("turn") == 1
        and (r.get("metadata") or {}).get("kind") == "chat"
    ]
    assert compaction["replaces"] == turn_one
    assert compaction["tokens_before"] > window
    assert compaction["tokens_after"] < compaction["tokens_before"]
    summary = compaction["summary"]
    assert "The user's first goal: Where are my hives and what about mites?" in summary
    assert "call_hives" in summary and "The beehives stand at the orchard." in summary
    assert "call_varroa" not in summary  # read, but never cited by a later turn
    sent = script.seen[-1]
    assert count_tokens(sent.messages, model=MODEL) == compaction["tokens_after"]
    history = chat_history(sent)
    assert history[0]["role"] == "system" and history[0]["content"].startswith(SUMMARY_MARK)
    assert [m["content"] for m in history[1:]] == [
        "Is that near water?",
        f"As [[Hives]] says, near the pond. {LONG}",
    ]
    assert history_from_rows(after)[:3] == history


def test_resume_after_compaction_reproduces_the_messages_the_model_saw(
    vault: Path, llm_server: LLMServer
) -> None:
    script = Script(llm_server)
    session = two_long_turns(vault, llm_server, script)
    window = count_tokens(script.seen[-1].messages, model=MODEL) + 50
    with open_ws(vault, llm_server, context_window_tokens=window) as ws:
        script.agent.append(Reply(content="Yes."))
        ws.ask("Should I move them?", session_id=session, model=MODEL)
        compacted = chat_history(script.seen[-1])
    with open_ws(vault, llm_server) as ws:  # a new process; the default window fits
        script.agent.append(Reply(content="Fine."))
        ws.ask("When?", session_id=session, model=MODEL)
        rows = load_session(ws._agent_port(), session)
    resumed = chat_history(script.seen[-1])
    assert resumed == [
        *compacted,
        {"role": "user", "content": "Should I move them?"},
        {"role": "assistant", "content": "Yes."},
    ]
    assert len([r for r in rows if r["type"] == "compaction"]) == 1


@pytest.mark.parametrize(
    ("summarizer", "mode"),
    [
        (Reply(content='{"summary": "They talked about the hives."}'), "llm"),
        (Reply(status=500), "deterministic"),
        (Reply(content="no json here"), "deterministic"),
    ],
)
def test_the_cheap_model_summarizes_and_any_failure_falls_back(
    vault: Path, llm_server: LLMServer, summarizer: Reply, mode: str
) -> None:
    script = Script(llm_server)
    script.summarizer = summarizer
    session = two_long_turns(vault, llm_server, script, llm_model=MODEL)
    window = count_tokens(script.seen[-1].messages, model=MODEL) + 50
    with open_ws(vault, llm_server, llm_model=MODEL, context_window_tokens=window) as ws:
        ws.ask("Should I move them?", session_id=session)
        (compaction,) = [
            r for r in load_session(ws._agent_port(), session) if r["type"] == "compaction"
        ]
    assert len(script.summarized) == 1
    assert "word399" in script.summarized[0].messages[1]["content"]
    assert compaction["mode"] == mode and "call_hives" in compaction["summary"]
    assert ("They talked about the hives." in compaction["summary"]) == (mode == "llm")


def rows_of_turns(*turns: tuple[str, str, list[dict]]) -> list[dict]:
    rows: list[dict] = [{"type": "session"}]
    for number, (question, answer, results) in enumerate(turns, start=1):
        chat = {"kind": "chat"}
        rows.append(
            {
                "type": "message",
                "turn": number,
                "role": "user",
                "content": question,
                "metadata": chat,
            }
        )
        rows.extend({"type": "tool_result", "turn": number, **r} for r in results)
        rows.append(
            {
                "type": "message",
                "turn": number,
                "role": "assistant",
                "content": answer,
                "metadata": chat,
            }
        )
    return rows


def test_a_result_is_cited_by_its_call_id_or_a_path_it_returned() -> None:
    found = {"call_id": "c1", "name": "select", "output": {"results": [{"path": "A/B.md"}]}}
    by_id = {"call_id": "c2", "name": "list_by_tag", "output": {"notes": []}}
    unused = {"call_id": "c3", "name": "read_note", "output": {"path": "C.md"}}
    failed = {"call_id": "c4", "name": "read_note", "output": {"error": "note_not_found"}}
    rows = rows_of_turns(
        ("goal", "a1", [found, by_id, unused, failed]),
        ("q2", "a2", []),
        ("q3", "see [[A/B]] and the c2 result", []),
    )
    compaction = compact(rows, question="q4", keep_turns=1, settings=LLMSettings())
    assert compaction is not None and compaction.through_turn == 2
    assert compaction.replaces == (1, 6, 7, 8)
    cited = compaction.summary.split("Tool results cited by later turns:\n")[1]
    assert [line.split(":")[0] for line in cited.splitlines()] == [
        "- turn 1, select (c1)",
        "- turn 1, list_by_tag (c2)",
    ]
    assert json.dumps(found["output"], sort_keys=True) in cited
    assert compact(rows, question="q4", keep_turns=3, settings=LLMSettings()) is None


def test_a_second_compaction_replaces_the_first_and_history_follows_the_latest() -> None:
    rows = rows_of_turns(("goal", "a1", []), ("q2", "a2", []), ("q3", "a3", []))
    first = compact(rows, question="q4", keep_turns=2, settings=LLMSettings())
    assert first is not None
    rows.append(first.row(4))
    rows += rows_of_turns(("q4", "a4", []))[1:]
    rows[-1]["turn"] = rows[-2]["turn"] = 4
    second = compact(rows, question="q5", keep_turns=1, settings=LLMSettings())
    assert second is not None and second.through_turn == 3
    assert set(first.replaces) | {len(rows) - 3} <= set(second.replaces)
    rows.append(second.row(5))
    history = history_from_rows(rows)
    assert [m["content"] for m in history[1:]] == ["q4", "a4"]
    assert "first goal: goal" in history[0]["content"]
    assert "- turn 3: q3" in history[0]["content"]
