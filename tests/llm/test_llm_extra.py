"""litellm is the `llm` extra, not the default install: with a model configured and litellm
missing, every door says so in one sentence naming the install command, before any work,
instead of a traceback or a silent fallback to the deterministic gate. Without a model
nothing changes: select and the deterministic context never need litellm.

litellm is installed for the tests (the dev extra holds the llm extra), so here it is made
unimportable the way Python itself marks a module as absent: `sys.modules["litellm"] = None`
(in this process: the CLI, the HTTP server and the MCP server all run in it). The fresh
install in `.ci/run` has no litellm at all and checks the CLI's line there too."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from mcp.server.mcpserver.exceptions import ToolError

from server_helpers import NOTES, call, stream_ask
from vaultctx import LLMNotInstalled, Workspace
from vaultctx.cli import cli
from vaultctx.errors import LLM_NOT_INSTALLED
from vaultctx.llm import count_tokens, warm_up
from vaultctx.mcp_server import create_mcp_server
from vaultctx.server.run import LocalServer

INSTALL = "pip install 'vaultctx[llm]'"
MODEL = "openai/gpt-4o-mini"


@pytest.fixture
def no_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)


@pytest.fixture
def vault(make_vault: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(tmp_path / "config"))
    root = make_vault(NOTES)
    with Workspace.open(root, {"embed": False}) as ws:
        ws.index()
    return root


@pytest.fixture
def workspace(vault: Path) -> Iterator[Workspace]:
    with Workspace.open(vault, {"embed": False, "llm_model": MODEL}) as ws:
        yield ws


def test_the_message_names_the_install_command() -> None:
    assert INSTALL in LLM_NOT_INSTALLED and "\n" not in LLM_NOT_INSTALLED
    assert str(LLMNotInstalled()) == LLM_NOT_INSTALLED


def test_context_with_a_model_and_no_litellm_raises_before_selecting(
    workspace: Workspace, no_litellm: None
) -> None:
    with pytest.raises(LLMNotInstalled, match=r"vaultctx\[llm\]"):
        workspace.context("varroa mites", use_vectors=False)


def test_without_a_model_select_and_context_need_no_litellm(vault: Path, no_litellm: None) -> None:
    with Workspace.open(vault, {"embed": False}) as ws:
        assert ws.select("varroa mites", use_vectors=False).notes()
        context = ws.context("varroa mites", use_vectors=False)
    assert context.items and context.gate == "deterministic"
    assert warm_up() is None  # nothing to load, and no thread left to fail
    assert count_tokens("hello world") == 3  # the ~4 characters a token estimate


def test_cli_context_and_ask_answer_one_line_and_the_exit_code(
    vault: Path, no_litellm: None
) -> None:
    runner = CliRunner()
    for args in (
        ["context", "varroa mites", "-V", str(vault), "--model", MODEL, "--no-vectors"],
        ["ask", "How do I treat varroa?", "-V", str(vault), "--model", MODEL],
    ):
        result = runner.invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == LLMNotInstalled.exit_code, result.output
        assert result.stderr.strip() == f"Error: {LLM_NOT_INSTALLED}", result.stderr
        assert "Traceback" not in result.output


def test_http_context_and_ask_answer_json_503(workspace: Workspace, no_litellm: None) -> None:
    with LocalServer(workspace, watch=False, warm=False) as server:
        status, headers, answer = call(server, "POST", "/context", {"query": "varroa mites"})
        events = stream_ask(server, {"question": "How do I treat varroa?"})
    assert status == 503 and headers["content-type"] == "application/json"
    assert answer == {"error": "LLMNotInstalled", "message": LLM_NOT_INSTALLED}
    assert [kind for kind, _ in events] == ["error"]
    assert events[0][1]["error"] == "LLMNotInstalled" and INSTALL in json.dumps(events[0][1])


def test_mcp_context_is_a_tool_error_naming_the_command(
    workspace: Workspace, no_litellm: None
) -> None:
    server = create_mcp_server(workspace, use_vectors=False)
    with pytest.raises(ToolError) as raised:
        anyio.run(server.call_tool, "context", {"query": "varroa mites"})
    assert str(raised.value).endswith(f"LLMNotInstalled: {LLM_NOT_INSTALLED}")
    assert "Traceback" not in str(raised.value)
