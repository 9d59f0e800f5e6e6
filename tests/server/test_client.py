"""The CLI finding a running server for its vault and asking it (and falling back to
answering in-process when the server is gone), with the same answers either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from server_helpers import config_dir_fixture, server_fixture, workspace_fixture  # noqa: F401
from vaultctx import Workspace
from vaultctx.cli import cli
from vaultctx.server.client import SERVER_FILE, request_server
from vaultctx.server.run import LocalServer


def _cli_select(vault: Path, *args: str) -> dict:
    result = CliRunner().invoke(
        cli, ["select", "varroa mites", "--no-vectors", "-V", str(vault), "--json", *args]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_cli_select_uses_a_running_server_and_falls_back_without_one(
    workspace: Workspace,
) -> None:
    with LocalServer(workspace, watch=False, warm=False):
        served = _cli_select(workspace.root)
        assert served["diagnostics"]["server_pid"] == os.getpid()
    local = _cli_select(workspace.root)
    assert "server_pid" not in local["diagnostics"]
    assert [c["id"] for c in local["candidates"]] == [c["id"] for c in served["candidates"]]


def test_cli_context_uses_a_running_server_with_the_same_result(workspace: Workspace) -> None:
    def cli_context() -> dict:
        result = CliRunner().invoke(
            cli, ["context", "varroa", "-V", str(workspace.root), "--json", "--no-vectors"]
        )
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    with LocalServer(workspace, watch=False, warm=False):
        served = cli_context()
    assert served["diagnostics"]["server_pid"] == os.getpid()
    local = cli_context()
    assert "server_pid" not in local["diagnostics"]
    assert served["context_hash"] == local["context_hash"]
    assert served["items"] and served["gate"] == "deterministic"


def test_cli_falls_back_on_a_stale_server_file(workspace: Workspace) -> None:
    with LocalServer(workspace, watch=False, warm=False):
        stale = (workspace.root / SERVER_FILE).read_text()
    (workspace.root / SERVER_FILE).write_text(stale)  # the server was killed -9
    assert request_server(workspace.root, "POST", "/select", {"query": "varroa"}) is None
    assert _cli_select(workspace.root)["candidates"]


def test_cli_reports_server_side_errors_like_local_ones(server: LocalServer) -> None:
    result = CliRunner().invoke(cli, ["select", "  ", "-V", str(server.workspace.root)])
    assert result.exit_code == 8  # InvalidQuery
    assert "empty" in result.output


def test_cli_against_the_server_imports_nothing_heavy(server: LocalServer) -> None:
    """The warm path's promise: no pydantic, numpy, rich or torch in the CLI process."""
    probe = (
        "import sys, json\n"
        "sys.argv = ['vaultctx', 'select', 'varroa mites', '--json', '-V', sys.argv[1]]\n"
        "from vaultctx.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = {'pydantic', 'numpy', 'rich', 'torch', 'starlette'}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(server.workspace.root)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    answer, loaded = done.stdout.strip().splitlines()
    assert json.loads(answer)["diagnostics"]["server_pid"] == os.getpid()
    assert json.loads(loaded) == []
