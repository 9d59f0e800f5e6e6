"""Skills: notes in the skills folder, validated, rendered in a sandbox and run as agent
turns with only the capabilities they declare, against the scripted model server."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import hash_tree, write_files
from llm_server import LLMServer, Reply, Request, ToolCallReply, llm_server_fixture  # noqa: F401
from vaultctx import Workspace
from vaultctx.agent import SkillRun, find_skill, load_session
from vaultctx.agent.skills import discover, parse_skill
from vaultctx.agent.workspace_vault import WorkspaceVault
from vaultctx.errors import SkillError
from vaultctx.permissions import Capability, PermissionGuard
from vaultctx.prompts import ORCHESTRATOR_SYSTEM

SUMMARY_SKILL = """---
name: Hive Summary
description: Summarize one hive.
tags: [skill]
inputs:
  hive: {type: str, required: true, description: the hive}
  days: {type: int, default: 14}
capabilities: [vault.read]
---
Summarize {{ hive }} over {{ days }} days. See [[Varroa]] and [[Missing note]].
"""
WRITER_SKILL = """---
name: File Todo
description: Add a todo to the inbox.
inputs:
  item: {type: str, required: true}
capabilities: [vault.read, vault.write]
model: openai/skill-model
---
Add "{{ item }}" to [[Inbox/Todo]].
"""
VAULT = {
    "Hives.md": "# Hives\n\nThe beehives stand at the orchard. See [[Varroa]].\n",
    "Varroa.md": "# Varroa\n\nTreat varroa mites with oxalic acid in winter.\n",
    "Inbox/Todo.md": "# Todo\n\n- buy frames\n",
    "Skills/Hive Summary.md": SUMMARY_SKILL,
    "Skills/File Todo.md": WRITER_SKILL,
    "Skills/Broken.md": "---\nname: Broken\ncapabilities: [vault.read, shell.exec]\n---\nHi\n",
    "Skills/Undeclared.md": "---\nname: Undeclared\n---\nHello {{ who }}\n",
}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return write_files(tmp_path / "vault", VAULT)


def open_ws(root: Path, server: LLMServer | None = None, **config: object) -> Workspace:
    base: dict[str, object] = {"embed": False}
    if server is not None:
        base |= {"llm_model": "openai/test-agent", "llm_api_base": server.api_base}
    ws = Workspace.open(root, base | config)
    ws.index(embed=False)
    return ws


def agent_script(server: LLMServer, *replies: Reply) -> list[Request]:
    """Agent requests (with tools) get `replies` in order, then "done"; the refine gate gets
    an invalid answer so the deterministic gate decides. Returns the agent requests seen."""
    queue, seen = list(replies), []

    def respond(request: Request) -> Reply:
        if "tools" not in request.body:
            return Reply(content="not json")
        seen.append(request)
        return queue.pop(0) if queue else Reply(content="done")

    server.script(respond)
    return seen


def test_skills_are_discovered_from_the_skills_folder_and_broken_ones_name_note_and_field(
    vault: Path,
) -> None:
    with open_ws(vault) as ws:
        catalog = discover(ws._agent_port())
        names = [s.name for s in ws.skills()]
        facade = ws.skill_catalog()  # the facade's door to the same discovery
    assert facade.skills == catalog.skills
    assert [str(e) for e in facade.errors] == [str(e) for e in catalog.errors]
    assert names == ["File Todo", "Hive Summary"]
    errors = {e.path: e for e in catalog.errors}
    assert set(errors) == {"Skills/Broken.md", "Skills/Undeclared.md"}
    assert errors["Skills/Broken.md"].field == "capabilities.1"
    assert "Skills/Broken.md" in str(errors["Skills/Broken.md"])
    assert errors["Skills/Undeclared.md"].field == "body"
    assert "who" in str(errors["Skills/Undeclared.md"])


def test_the_skills_folder_is_configurable(vault: Path) -> None:
    write_files(vault, {"Prompts/Hello.md": "---\nname: Hello\n---\nHello.\n"})
    with open_ws(vault, skills_folder="Prompts") as ws:
        assert [s.name for s in ws.skills()] == ["Hello"]


def test_a_broken_skill_asked_for_by_name_raises_its_own_error(vault: Path) -> None:
    with open_ws(vault) as ws:
        with pytest.raises(SkillError, match=r"Skills/Broken.md: capabilities.1"):
            find_skill(ws._agent_port(), "broken")
        with pytest.raises(SkillError, match="no such skill"):
            find_skill(ws._agent_port(), "Nothing")
        assert find_skill(ws._agent_port(), "hive summary").path == "Skills/Hive Summary.md"
        assert ws.skill("hive summary") == find_skill(ws._agent_port(), "hive summary")


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("---\nname: [unclosed\n---\nx\n", "frontmatter"),
        ("no frontmatter at all\n", "frontmatter"),
        ("---\ninputs:\n  n: {type: complex}\n---\nx\n", "inputs.n.type"),
        ("---\ninputs:\n  n: {type: int, color: red}\n---\nx\n", "inputs.n.color"),
        ("---\nname: x\n---\n{% for %}\n", "body"),
        ("---\ncapabilities: root\n---\nx\n", "capabilities"),
    ],
)
def test_bad_skill_notes_are_clear_errors(text: str, field: str) -> None:
    with pytest.raises(SkillError) as caught:
        parse_skill("Skills/Bad.md", text)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"skill Skills/Bad.md: {field}: ")


def test_inputs_are_validated_and_typed() -> None:
    skill = parse_skill("Skills/Hive Summary.md", SUMMARY_SKILL)
    assert skill.validate_inputs({"hive": "Clover", "days": "7"}) == {"hive": "Clover", "days": 7}
    assert skill.validate_inputs({"hive": "Clover"})["days"] == 14
    for inputs, field in [
        ({}, "inputs.hive"),
        ({"hive": "Clover", "days": "many"}, "inputs.days"),
        ({"hive": "Clover", "colour": "red"}, "inputs.colour"),
    ]:
        with pytest.raises(SkillError) as caught:
            skill.validate_inputs(inputs)
        assert caught.value.field == field and caught.value.path == "Skills/Hive Summary.md"


def test_hostile_input_renders_as_text_and_templates_cannot_run_code() -> None:
    skill = parse_skill("Skills/Hive Summary.md", SUMMARY_SKILL)
    hostile = "{{ 7*7 }} {% for x in range(3) %}x{% endfor %} {{ ''.__class__ }}"
    rendered = skill.render({"hive": hostile})
    assert rendered.startswith(f"Summarize {hostile} over 14 days.")
    sneaky = parse_skill(
        "Skills/Sneaky.md", "---\ninputs:\n  a: {}\n---\n{{ a.__class__.__mro__ }}\n"
    )
    with pytest.raises(SkillError, match="unsafe"):
        sneaky.render({"a": "x"})


def test_a_restricted_guard_never_widens() -> None:
    reader = PermissionGuard().restricted({Capability.VAULT_READ})
    narrowed = reader.restricted({Capability.VAULT_READ, Capability.VAULT_WRITE})
    assert narrowed.only == {Capability.VAULT_READ}


def test_a_skill_runs_end_to_end_with_its_context_at_step_six(
    vault: Path, llm_server: LLMServer
) -> None:
    seen = agent_script(llm_server, Reply(content="Clover is fine, see [[Varroa.md]]."))
    with open_ws(vault, llm_server) as ws:
        result = ws.run_skill("Hive Summary", {"hive": "{{ 7*7 }}", "days": "3"})
        rows = load_session(ws._agent_port(), result.session_id)
    messages = seen[0].messages
    assert messages[0]["content"] == ORCHESTRATOR_SYSTEM
    assert messages[-1] == {
        "role": "user",
        "content": "Summarize {{ 7*7 }} over 3 days. See [[Varroa]] and [[Missing note]].\n",
    }
    skill_context = messages[-2]["content"]
    assert skill_context.startswith("You are running the skill 'Hive Summary'")
    assert '<note path="Varroa.md">' in skill_context and "oxalic acid" in skill_context
    assert "<untrusted_vault_data query=" in messages[-3]["content"]
    assert result.answer.startswith("Clover is fine") and result.citations == ("Varroa.md",)
    user = next(r for r in rows if r["type"] == "message" and r["role"] == "user")
    assert user["metadata"]["skill"] == {
        "name": "Hive Summary",
        "path": "Skills/Hive Summary.md",
        "inputs": {"hive": "{{ 7*7 }}", "days": 3},
    }


def test_a_read_only_skill_cannot_write_even_when_the_model_asks_and_writes_are_allowed(
    vault: Path, llm_server: LLMServer
) -> None:
    agent_script(
        llm_server,
        Reply(
            tool_calls=(
                ToolCallReply("append_to_note", {"path": "Inbox/Todo.md", "text": "pwned"}),
                ToolCallReply("read_note", {"path": "Varroa.md"}),
            )
        ),
        Reply(content="I could not write."),
    )
    before = hash_tree(vault)
    with open_ws(vault, llm_server) as ws:
        result = ws.run_skill("Hive Summary", {"hive": "Clover"}, asker=lambda c, r: True)
    assert hash_tree(vault) == before
    denied, read = (a["output"] for a in result.tool_activity)
    assert denied == {
        "error": "permission_denied",
        "capability": "vault.write",
        "resource": "Inbox/Todo.md",
        "reason": "not available to this agent",
    }
    assert read["path"] == "Varroa.md"


def test_a_skill_declaring_writes_may_write_and_its_model_is_used(
    vault: Path, llm_server: LLMServer
) -> None:
    seen = agent_script(
        llm_server,
        Reply(
            tool_calls=(
                ToolCallReply("append_to_note", {"path": "Inbox/Todo.md", "text": "- smoker fuel"}),
            )
        ),
        Reply(content="Added."),
    )
    with open_ws(vault, llm_server) as ws:
        result = ws.run_skill("File Todo", {"item": "smoker fuel"}, asker=lambda c, r: True)
    assert result.tool_activity[0]["output"]["appended"] == "Inbox/Todo.md"
    assert "- smoker fuel" in (vault / "Inbox" / "Todo.md").read_text()
    assert seen[0].model == "skill-model" and result.model == "openai/skill-model"


def test_bad_inputs_fail_before_any_model_call(vault: Path, llm_server: LLMServer) -> None:
    seen = agent_script(llm_server, Reply(content="never"))
    with open_ws(vault, llm_server) as ws, pytest.raises(SkillError, match=r"inputs\.hive"):
        ws.run_skill("Hive Summary", {})
    assert seen == [] and llm_server.requests == []


def test_linked_notes_respect_the_token_budget(vault: Path) -> None:
    write_files(vault, {"Varroa.md": "# Varroa\n\n" + "mites " * 2000})
    skill = parse_skill("Skills/Hive Summary.md", SUMMARY_SKILL)
    with open_ws(vault) as ws:
        text = SkillRun.prepare(skill, {"hive": "Clover"}).context(
            WorkspaceVault(ws._agent_port()), PermissionGuard(), budget_tokens=100
        )
    assert "…(truncated)" in text and len(text) < 1200
