"""Indexing real documentation vaults written by other people (see shared/data/vaults/README.md).

The vaults are read in place and the index is written under tmp_path, so the shared data
folder is never modified.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REAL_VAULTS, hash_tree, query
from vaultctx import Workspace

# notes: the number of .md files in the snapshot (README.md of the data folder).
# dangling: every unresolved link target, each checked by hand: the file is not in the
# snapshot (foam-docs links to its repository's CONTRIBUTING.md and to pages that were
# renamed; the Obsidian help page "Internal links" shows how a link to a note called
# "Example" looks). So every other link resolves, and the share stays under 2%.
VAULTS = {
    "foam-docs": {
        "notes": 86,
        "dangling": {
            "../../CONTRIBUTING.md",
            "../../user/publishing/publishing.md",
            "publishing",
            "cli-grep",
        },
    },
    "obsidian-help-en": {"notes": 173, "dangling": {"Example", "Example.md"}},
    "obsidian-tasks-docs": {"notes": 118, "dangling": set()},
}
MAX_DANGLING_SHARE = 0.02


@pytest.fixture(params=sorted(VAULTS))
def real_vault(request) -> tuple[str, Path]:
    path = REAL_VAULTS / request.param
    if not path.is_dir():
        pytest.skip(f"real vault {path} is not available (shared data folder missing)")
    return request.param, path


def test_real_vaults_index_without_problems(real_vault, tmp_path):
    name, vault = real_vault
    expected = VAULTS[name]
    before = hash_tree(vault)
    had_index_folder = (vault / ".vaultctx").exists()
    ix = tmp_path / "ix"

    with Workspace.open(vault, {"index_dir": str(ix)}) as ws:
        report = ws.index(embed=False)
        status = ws.status()
        graph = ws.graph()

    assert report.skipped == []
    assert report.warnings == []
    assert report.added == report.files == status.notes == expected["notes"]
    assert status.vectors == 0

    dangling = {
        target
        for (target,) in query(ix / "index.db", "SELECT target FROM links WHERE target_id IS NULL")
    }
    assert dangling == expected["dangling"]
    total_links = status.links + status.dangling_links
    assert total_links > 2 * status.notes
    assert status.dangling_links / total_links < MAX_DANGLING_SHARE

    assert len(graph) == status.notes
    assert sum(1 for _ in graph.links()) > status.notes
    linked = sum(1 for note in graph if graph.successors(note) or graph.predecessors(note))
    assert linked / status.notes > 0.8, "most notes take part in the link graph"

    assert hash_tree(vault) == before
    assert (vault / ".vaultctx").exists() == had_index_folder


def test_reindexing_a_real_vault_changes_nothing(real_vault, tmp_path):
    _, vault = real_vault
    config = {"index_dir": str(tmp_path / "ix")}
    with Workspace.open(vault, config) as ws:
        first = ws.index(embed=False)
        second = ws.index(embed=False)
    assert second.unchanged == first.added
    assert not second.changed and second.blocks_written == 0
