"""Memories as select's fourth retriever, beside the notes' blocks, and never opened for a
vault that has none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memory_helpers import indexed_vault
from vaultctx.cli import cli


@pytest.fixture
def ws(tmp_path: Path):
    workspace = indexed_vault(tmp_path / "vault")
    yield workspace
    workspace.close()


def test_select_fuses_memories_as_a_fourth_retriever(ws, tmp_path):
    m = ws.memory.add("The hives in the orchard were treated for mites in March.")
    selection = ws.select("hives orchard mites", k=5)
    assert "memory" in ws._selector.retrievers
    memory_hits = [c for c in selection.candidates if c.kind == "memory"]
    assert memory_hits[0].id == f"memory:{m.id}"
    assert memory_hits[0].metadata["tier"] == "workspace"
    assert selection.diagnostics["memory_hits"] >= 1
    ws.memory.flush()
    result = CliRunner().invoke(
        cli, ["select", "hives mites", "-V", str(ws.root), "--no-vectors", "--json"]
    )
    assert result.exit_code == 0, result.output
    kinds = {c["kind"] for c in json.loads(result.stdout)["candidates"]}
    assert kinds == {"block", "memory"}


def test_a_vault_without_memories_does_not_open_memory_for_select(ws, account_dir):
    ws.select("hives", k=3)
    assert ws._memory is None
    assert not (ws._vault.db.path.parent / "memory.db").exists()
