"""`vaultctx context` and `vaultctx config`, as a user runs them."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_server import LLMServer, Reply, llm_server_fixture  # noqa: F401
from vaultctx.cli import cli

NOTES = {
    "Varroa.md": "# Varroa\n\nTreat the hives for varroa mites in late summer with oxalic acid.\n",
    "Honey.md": "# Honey\n\nExtract honey in August, before the varroa mites treatment.\n",
}
CONTRACT_KEYS = {"items", "token_count", "budget", "context_hash", "gate", "diagnostics"}


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    for name, text in NOTES.items():
        (root / name).write_text(text, encoding="utf-8")
    assert run("index", str(root), "--no-embed").exit_code == 0
    return root


def test_context_json_follows_the_contract(vault: Path) -> None:
    result = run("context", "varroa mites", "-V", str(vault), "--budget", "40", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) >= CONTRACT_KEYS
    assert data["gate"] == "deterministic" and data["gate_reason"] == "no_model"
    assert 0 < data["token_count"] <= data["budget"] == 40
    item = data["items"][0]
    assert {"id", "kind", "path", "heading", "text", "score", "reason", "sources"} <= set(item)
    assert {"select_ms", "refine_ms", "model", "tokens_in", "tokens_out"} <= set(
        data["diagnostics"]
    )


def test_context_prints_a_panel_per_item(vault: Path) -> None:
    result = run("context", "varroa mites", "-V", str(vault), "--no-vectors")
    assert result.exit_code == 0
    assert "Varroa.md" in result.stdout and "Honey.md" in result.stdout
    assert "gate deterministic (no_model)" in result.stdout


def test_context_uses_the_configured_model(vault: Path, llm_server: LLMServer) -> None:
    llm_server.script(Reply(content='{"keep": [{"id": "c2", "reason": "harvest timing"}]}'))
    assert run("config", "-V", str(vault), "llm_api_base", llm_server.api_base).exit_code == 0
    result = run(
        "context", "varroa mites", "-V", str(vault), "--model", "openai/test-gate", "--json"
    )
    data = json.loads(result.stdout)
    assert data["gate"] == "llm"
    assert [i["reason"] for i in data["items"]] == ["harvest timing"]
    assert len(llm_server.requests) == 1


def test_context_filters_and_bad_options(vault: Path) -> None:
    result = run("context", "varroa", "-V", str(vault), "--path", "Honey.md", "--json")
    assert [i["path"] for i in json.loads(result.stdout)["items"]] == ["Honey.md"]
    assert run("context", "varroa", "-V", str(vault), "--budget", "0").exit_code == 2


def test_context_on_an_unindexed_vault_is_one_line_and_exit_5(tmp_path: Path) -> None:
    result = run("context", "anything", "-V", str(tmp_path))
    assert result.exit_code == 5
    assert "vaultctx index" in result.output


def test_config_shows_sets_and_unsets(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run("config", "-V", str(vault), "budget_tokens", "750").exit_code == 0
    shown = json.loads(run("config", "-V", str(vault), "--json").stdout)
    assert shown["settings"]["budget_tokens"] == 750
    assert shown["sources"]["budget_tokens"] == "file"
    assert shown["sources"]["llm_model"] == "default"
    assert run("config", "-V", str(vault), "budget_tokens").stdout.strip() == "750"
    monkeypatch.setenv("VAULTCTX_LLM_MODEL", "openai/gpt-4o-mini")
    one = json.loads(run("config", "-V", str(vault), "llm_model", "--json").stdout)
    assert one == {"key": "llm_model", "value": "openai/gpt-4o-mini", "source": "env"}
    assert run("config", "-V", str(vault), "--unset", "budget_tokens").exit_code == 0
    assert run("config", "-V", str(vault), "budget_tokens").stdout.strip() == "2000"


def test_config_rejects_unknown_keys_and_bad_values(vault: Path) -> None:
    unknown = run("config", "-V", str(vault), "llm_modle", "x")
    assert unknown.exit_code == 6 and "unknown config key" in unknown.output
    bad = run("config", "-V", str(vault), "budget_tokens", "many")
    assert bad.exit_code == 6
    assert run("config", "-V", str(vault / "missing")).exit_code == 2
