"""Skills as the Orchestrator's tools: offered each turn (the few select ranks best when
there are many), called by tool name without the user naming them, run in a delegation with
only the capabilities they declare — against the scripted model server through litellm."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from agent_model import AgentModel, agent_model_fixture, call, open_agent_workspace  # noqa: F401
from conftest import agent_children, hash_tree, write_files
from llm_server import LLMServer, Reply, ToolCallReply, llm_server_fixture  # noqa: F401
from vaultctx.agent import load_session
from vaultctx.agent.skill_tools import MAX_OFFERED_SKILLS, tool_names
from vaultctx.agent.skills import parse_skill
from vaultctx.cli import cli
from vaultctx.prompts import SKILL_SYSTEM


def skill_note(name: str, description: str, body: str, capabilities: str = "[vault.read]") -> str:
    return (
        f"---\nname: {name}\ndescription: {description}\n"
        "inputs:\n  hive: {type: str, required: true, description: the hive's name}\n"
        f"capabilities: {capabilities}\n---\n{body}\n"
    )


NOTES = {
    "Hives.md": "# Hives\n\nThe beehives stand at the orchard. See [[Varroa]].\n",
    "Varroa.md": "# Varroa\n\nTreat varroa mites with oxalic acid in winter.\n",
    "Inbox/Todo.md": "# Todo\n\n- buy frames\n",
}
MITE_CHECK = skill_note(
    "Mite Check", "Check the varroa mite treatment of a hive.", "Check {{ hive }}. See [[Varroa]]."
)
FILE_TODO = (
    "---\nname: File Todo\ndescription: Add a todo to the inbox.\n"
    "inputs:\n  item: {type: str, required: true}\n"
    "capabilities: [vault.read, vault.write]\nmodel: openai/skill-model\n---\n"
    'Add "{{ item }}" to [[Inbox/Todo]].\n'
)
MANY_SKILLS = {
    "Skills/Mite Check.md": MITE_CHECK,
    "Skills/Honey Harvest.md": skill_note(
        "Honey Harvest", "Plan the honey harvest.", "When to harvest honey from {{ hive }}."
    ),
    "Skills/Queen Record.md": skill_note("Queen Record", "The queen.", "Queen of {{ hive }}."),
    "Skills/Swarm Alert.md": skill_note("Swarm Alert", "Swarm signs.", "Swarms of {{ hive }}."),
    "Skills/Feeding Plan.md": skill_note("Feeding Plan", "Sugar syrup.", "Feed {{ hive }}."),
    "Skills/Garden.md": skill_note("Garden", "Tomatoes.", "Tomatoes near {{ hive }}."),
    "Skills/Recipes.md": skill_note("Recipes", "Cooking.", "Cook for {{ hive }}."),
    "Skills/Broken.md": "---\nname: Broken\ncapabilities: [root]\n---\nvarroa honey\n",
}


def offered_tools(request: object) -> list[str]:
    names = [tool["function"]["name"] for tool in request.body["tools"]]  # type: ignore[attr-defined]
    return [name for name in names if name.startswith("skill_")]


def test_the_model_calls_a_skill_unnamed_by_the_user_and_its_capabilities_hold(
    tmp_path: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    vault = write_files(tmp_path / "vault", {**NOTES, "Skills/Mite Check.md": MITE_CHECK})
    model.orchestrator.extend(
        [call("skill_mite_check", hive="Clover"), Reply(content="Clover: oxalic acid.")]
    )
    model.skill.extend(
        [
            Reply(
                tool_calls=(
                    ToolCallReply("append_to_note", {"path": "Hives.md", "text": "pwned"}),
                    ToolCallReply("read_note", {"path": "Hives"}),
                )
            ),
            Reply(content="Treat Clover with oxalic acid [[Varroa.md]]."),
        ]
    )
    before = hash_tree(vault)
    with open_agent_workspace(vault, llm_server) as ws:
        result = ws.ask("How should I treat Clover?", asker=lambda c, r: True)
        rows = load_session(ws._agent_port(), result.session_id)
    assert hash_tree(vault) == before and agent_children() == []
    first = model.seen["orchestrator"][0]
    assert offered_tools(first) == ["skill_mite_check"]
    schema = first.body["tools"][-1]["function"]
    assert schema["parameters"]["required"] == ["hive"]
    assert schema["parameters"]["properties"]["hive"]["description"] == "the hive's name"
    assert (
        "- skills offered (1 of 1, every skill in the vault): Mite Check (tool skill_mite_check)"
        in (first.messages[1]["content"])
    )
    skill_request = model.seen["skill"][0].messages
    assert skill_request[0]["content"] == SKILL_SYSTEM
    assert '<note path="Varroa.md">' in skill_request[1]["content"]
    assert skill_request[2] == {"role": "user", "content": "Check Clover. See [[Varroa]].\n"}
    denied, read, ran = (a["output"] for a in result.tool_activity)
    assert (
        denied["error"] == "permission_denied" and denied["reason"] == "not available to this agent"
    )
    assert read["path"] == "Hives.md"
    assert ran == {
        "skill": "Mite Check",
        "path": "Skills/Mite Check.md",
        "answer": "Treat Clover with oxalic acid [[Varroa.md]].",
        "notes_read": ["Hives.md"],
    }
    assert [a["agent"] for a in result.tool_activity] == ["skill", "skill", "orchestrator"]
    assert result.skills_ran[0]["tool"] == "skill_mite_check"
    assert result.skills_ran[0]["reason"] == result.skills_offered[0]["reason"]
    user = next(r for r in rows if r["type"] == "message" and r["role"] == "user")
    assert user["metadata"]["skills_offered"] == list(result.skills_offered)
    assert any(
        r.get("metadata", {}).get("agent") == "skill" for r in rows if r["type"] == "message"
    )


def test_a_skill_declaring_writes_may_write_with_its_own_model(
    tmp_path: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    vault = write_files(tmp_path / "vault", {**NOTES, "Skills/File Todo.md": FILE_TODO})
    model.orchestrator.extend([call("skill_file_todo", item="smoker fuel"), Reply(content="Ok.")])
    model.skill.extend(
        [
            call("append_to_note", path="Inbox/Todo.md", text="- smoker fuel"),
            Reply(content="Added."),
        ]
    )
    with open_agent_workspace(vault, llm_server) as ws:
        result = ws.ask("I need smoker fuel", asker=lambda c, r: True)
    assert (vault / "Inbox" / "Todo.md").read_text() == "# Todo\n\n- buy frames\n\n- smoker fuel\n"
    assert result.tool_activity[0]["output"] == {"appended": "Inbox/Todo.md", "chars": 13}
    assert [r.model for r in model.seen["skill"]] == ["skill-model", "skill-model"]
    assert model.seen["orchestrator"][0].model == "test-agent"


def test_a_model_the_caller_chose_runs_the_skills_too(
    tmp_path: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    vault = write_files(tmp_path / "vault", {**NOTES, "Skills/File Todo.md": FILE_TODO})
    model.orchestrator.extend([call("skill_file_todo", item="wax"), Reply(content="Ok.")])
    with open_agent_workspace(vault, llm_server) as ws:
        ws.ask("I need wax", model="openai/chosen")
    assert [r.model for r in model.seen["skill"]] == ["chosen"]
    assert model.seen["orchestrator"][0].model == "chosen"


@pytest.mark.parametrize(
    ("arguments", "error"),
    [({"hive": "Clover"}, "unknown_skill"), ({}, "invalid_arguments")],
    ids=["not in the vault", "bad inputs"],
)
def test_a_skill_call_the_vault_cannot_run_is_a_structured_error(
    tmp_path: Path, llm_server: LLMServer, model: AgentModel, arguments: dict, error: str
) -> None:
    vault = write_files(tmp_path / "vault", {**NOTES, "Skills/Mite Check.md": MITE_CHECK})
    tool = "skill_nope" if error == "unknown_skill" else "skill_mite_check"
    model.orchestrator.extend(
        [Reply(tool_calls=(ToolCallReply(tool, arguments),)), Reply(content="Sorry.")]
    )
    with open_agent_workspace(vault, llm_server) as ws:
        result = ws.ask("Check the hives")
    output = result.tool_activity[0]["output"]
    assert output["error"] == error and result.answer == "Sorry."
    assert model.seen["skill"] == []
    if error == "unknown_skill":
        assert "skill_nope" in output["message"] and "skill_mite_check" in output["message"]
        assert result.skills_ran == ()
    else:
        assert "inputs.hive" in output["message"]


def test_many_skills_offer_the_few_select_ranks_for_the_question(
    tmp_path: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    vault = write_files(tmp_path / "vault", {**NOTES, **MANY_SKILLS})
    model.orchestrator.extend([call("skill_recipes", hive="Clover"), Reply(content="Ok.")])
    with open_agent_workspace(vault, llm_server) as ws:
        result = ws.ask("When do I treat the varroa mites and harvest honey?")
    offered = offered_tools(model.seen["orchestrator"][0])
    assert 0 < len(offered) <= MAX_OFFERED_SKILLS
    assert set(offered[:2]) == {"skill_mite_check", "skill_honey_harvest"}
    assert "skill_recipes" not in offered
    assert [s["tool"] for s in result.skills_offered] == offered
    assert result.skills_offered[0]["reason"] == "select ranks it #1 of 7 skills for this question"
    metadata = model.seen["orchestrator"][0].messages[1]["content"]
    assert (
        f"- skills offered ({len(offered)} of 7, the most relevant to this question): " in metadata
    )
    assert result.skills_ran[0]["reason"] == "not offered this turn; called by its tool name"
    assert result.tool_activity[-1]["output"]["answer"] == "skill done"


def test_running_a_skill_by_name_offers_no_other_skill(
    tmp_path: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    vault = write_files(tmp_path / "vault", {**NOTES, **MANY_SKILLS})
    model.orchestrator.append(Reply(content="Done."))
    with open_agent_workspace(vault, llm_server) as ws:
        result = ws.run_skill("Mite Check", {"hive": "Clover"})
    assert offered_tools(model.seen["orchestrator"][0]) == [] and result.skills_offered == ()
    assert "skills offered" not in model.seen["orchestrator"][0].messages[1]["content"]


def test_ask_json_shows_which_skill_ran_and_why_it_was_offered(
    tmp_path: Path, llm_server: LLMServer, model: AgentModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = write_files(tmp_path / "vault", {**NOTES, "Skills/Mite Check.md": MITE_CHECK})
    assert CliRunner().invoke(cli, ["index", str(vault), "--no-embed"]).exit_code == 0
    monkeypatch.setenv("VAULTCTX_LLM_API_BASE", llm_server.api_base)
    model.orchestrator.extend([call("skill_mite_check", hive="Clover"), Reply(content="Fine.")])
    args = ["ask", "How is Clover?", "-V", str(vault), "--model", "openai/test-agent", "--json"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    answer = json.loads(result.stdout)
    assert answer["skills_ran"] == [
        {
            "name": "Mite Check",
            "path": "Skills/Mite Check.md",
            "tool": "skill_mite_check",
            "reason": "every skill is offered when there are at most 5",
            "call_id": answer["tool_activity"][-1]["call_id"],
            "ok": True,
        }
    ]
    offered = {key: answer["skills_ran"][0][key] for key in ("name", "path", "tool", "reason")}
    assert answer["skills_offered"] == [offered]


BASE_SKILL = parse_skill("Skills/Mite Check.md", MITE_CHECK)


@given(st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=12))
def test_every_skill_gets_a_distinct_valid_tool_name(names: list[str]) -> None:
    skills = [replace(BASE_SKILL, name=name, path=f"Skills/{i}.md") for i, name in enumerate(names)]
    named = tool_names(skills)
    assert list(named.values()) == skills  # one name each, in order
    assert all(re.fullmatch(r"skill_[a-z0-9_]{1,58}", tool) for tool in named)
