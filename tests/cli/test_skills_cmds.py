"""`vaultctx skills list|show|run`, as a user runs them, against the scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import write_files
from llm_server import LLMServer, Reply, Request, llm_server_fixture  # noqa: F401
from vaultctx.cli import cli
from vaultctx.cli.skills_cmds import parse_inputs
from vaultctx.errors import SkillError

NOTES = {
    "Varroa.md": "# Varroa\n\nTreat varroa mites with oxalic acid in winter.\n",
    "Skills/Mite Plan.md": "---\nname: Mite Plan\ndescription: Plan mite treatment.\n"
    "inputs:\n  hive: {type: str, required: true}\n  weeks: {type: int, default: 2}\n"
    "  tags: {type: list}\ncapabilities: [vault.read]\n---\n"
    "Plan mite treatment for {{ hive }} in {{ weeks }} weeks ({{ tags }}). [[Varroa]]\n",
    "Skills/Bad.md": "---\nname: Bad\ncapabilities: [teleport]\n---\nx\n",
}


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_server: LLMServer) -> Path:
    monkeypatch.setenv("VAULTCTX_LLM_API_BASE", llm_server.api_base)
    root = write_files(tmp_path / "vault", NOTES)
    assert run("index", str(root), "--no-embed").exit_code == 0
    return root


def test_list_and_show_report_skills_and_broken_notes(vault: Path) -> None:
    listed = json.loads(run("skills", "list", "-V", str(vault), "--json").stdout)
    assert [s["name"] for s in listed["skills"]] == ["Mite Plan"]
    (problem,) = listed["errors"]
    assert problem["path"] == "Skills/Bad.md" and problem["field"] == "capabilities.0"
    shown = json.loads(run("skills", "show", "mite plan", "-V", str(vault), "--json").stdout)
    assert shown["inputs"]["weeks"] == {
        "type": "int",
        "required": False,
        "default": 2,
        "description": "",
    }
    assert shown["capabilities"] == ["vault.read"] and shown["links"] == ["Varroa"]
    text = run("skills", "show", "Mite Plan", "-V", str(vault))
    assert text.exit_code == 0 and "input hive: str, required" in text.stdout


def test_run_renders_inputs_and_answers_as_json(vault: Path, llm_server: LLMServer) -> None:
    seen: list[Request] = []

    def respond(request: Request) -> Reply:
        if "tools" not in request.body:
            return Reply(content="not json")
        seen.append(request)
        return Reply(content="Treat in winter [[Varroa.md]].")

    llm_server.script(respond)
    result = run(
        "skills",
        "run",
        "Mite Plan",
        "-V",
        str(vault),
        "--input",
        "hive=Clover",
        "-i",
        "weeks=3",
        "-i",
        "tags=a",
        "-i",
        "tags=b=c",
        "--model",
        "openai/test-agent",
        "--json",
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["citations"] == ["Varroa.md"]
    assert seen[0].messages[-1]["content"] == (
        "Plan mite treatment for Clover in 3 weeks (['a', 'b=c']). [[Varroa]]\n"
    )


def test_errors_name_the_note_and_field(vault: Path) -> None:
    missing = run("skills", "run", "Mite Plan", "-V", str(vault), "--model", "openai/x", "--json")
    assert missing.exit_code == SkillError.exit_code
    error = json.loads(missing.stdout)["error"]
    assert error == {
        "type": "SkillError",
        "message": "skill Skills/Mite Plan.md: inputs.hive: Field required",
    }
    bad = run("skills", "show", "Bad", "-V", str(vault))
    assert bad.exit_code == SkillError.exit_code
    assert "Skills/Bad.md: capabilities.0" in bad.stderr


def test_parse_inputs_refuses_pairs_without_a_name() -> None:
    assert parse_inputs(("a=1", "a=2", "b=")) == {"a": ["1", "2"], "b": ""}
    with pytest.raises(SkillError, match="expected NAME=VALUE"):
        parse_inputs(("novalue",))
