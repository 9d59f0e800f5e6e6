"""Live re-index: notes edited, created, deleted and renamed while queries keep running."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pdf_files import make_pdf
from vaultctx import VaultctxError, Workspace
from vaultctx.storage.watch import VaultWatcher

NOTES = {
    "Hives/Varroa.md": "# Varroa\n\nVarroa mites weaken the colony.\n",
    "Hives/Feeding.md": "# Feeding\n\nFeed sugar syrup in autumn.\n",
    "Garden/Tomatoes.md": "# Tomatoes\n\nStake tomatoes early.\n",
}


@pytest.fixture
def workspace(make_vault: Callable[..., Path]) -> Iterator[Workspace]:
    ws = Workspace.open(make_vault(NOTES), {"embed": False})
    ws.index()
    yield ws
    ws.close()


def paths_for(ws: Workspace, query: str) -> list[str]:
    return sorted({c.path for c in ws.select(query, use_vectors=False).candidates if c.path})


def eventually(ws: Workspace, query: str, expected: list[str], timeout: float = 10.0) -> float:
    """Seconds until `query` finds exactly `expected`; fails after `timeout`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if paths_for(ws, query) == expected:
            return time.monotonic() - started
        time.sleep(0.02)
    pytest.fail(f"{query!r} still finds {paths_for(ws, query)}, expected {expected}")


def save(path: Path, text: str) -> None:
    """Write a note the way editors save one: a temporary file renamed over it. `write_text`
    truncates first, and a query that runs between the truncation and the write rightly finds
    the note empty, which the load below would take for a broken candidate."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


class QueryLoad:
    """Queries in background threads for as long as a test edits the vault."""

    def __init__(self, ws: Workspace, threads: int = 3) -> None:
        self.ws = ws
        self.errors: list[BaseException] = []
        self.count = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop) for _ in range(threads)]

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                for candidate in self.ws.select("mites syrup tomatoes quokka", k=20).candidates:
                    assert candidate.text and candidate.path
                self.count += 1
            except (VaultctxError, AssertionError) as exc:
                self.errors.append(exc)

    def __enter__(self) -> QueryLoad:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


def test_edits_creates_deletes_and_renames_become_searchable_while_querying(
    workspace: Workspace,
) -> None:
    root = workspace.root
    with workspace.watch(embed=False), QueryLoad(workspace) as load:
        save(root / "Hives/Quokka.md", "# Quokka\n\nA quokka visited the apiary.\n")
        assert eventually(workspace, "quokka", ["Hives/Quokka.md"]) < 5

        save(root / "Hives/Varroa.md", "# Varroa\n\nOxalic acid treatment in winter.\n")
        eventually(workspace, "oxalic", ["Hives/Varroa.md"])
        eventually(workspace, "weaken", [])

        (root / "Hives/Quokka.md").rename(root / "Garden/Quokka.md")
        eventually(workspace, "quokka", ["Garden/Quokka.md"])

        (root / "Garden/Tomatoes.md").unlink()
        eventually(workspace, "tomatoes", [])
    assert load.errors == []
    assert load.count > 0


def test_folders_moved_or_deleted_are_reindexed(workspace: Workspace) -> None:
    root = workspace.root
    with workspace.watch(embed=False):
        shutil.move(root / "Hives", root / "Apiary")
        eventually(workspace, "syrup", ["Apiary/Feeding.md"])
        shutil.rmtree(root / "Apiary")
        eventually(workspace, "syrup mites", [])


def test_hidden_and_ignored_files_are_left_out(workspace: Workspace) -> None:
    root = workspace.root
    (root / ".vaultctxignore").write_text("Drafts/\n")
    with workspace.watch(embed=False) as watcher:
        (root / ".obsidian").mkdir()
        (root / ".obsidian/Secret.md").write_text("# Secret\n\nplatypus\n")
        (root / "Drafts").mkdir()
        (root / "Drafts/Draft.md").write_text("# Draft\n\nplatypus\n")
        (root / "Visible.md").write_text("# Visible\n\nwombat\n")
        eventually(workspace, "wombat", ["Visible.md"])
        assert paths_for(workspace, "platypus") == []
        assert watcher.last_error is None


def test_changes_made_while_nothing_watched_are_caught_up(workspace: Workspace) -> None:
    (workspace.root / "Offline.md").write_text("# Offline\n\nnumbat\n")
    reports = []
    with workspace.watch(embed=False, on_index=reports.append):
        eventually(workspace, "numbat", ["Offline.md"])
    assert reports and reports[0].added == 1


def test_a_saved_pdf_or_canvas_is_reindexed_and_a_hostile_one_costs_only_itself(
    workspace: Workspace,
) -> None:
    root = workspace.root
    with workspace.watch(embed=False) as watcher:
        (root / "Locked.pdf").write_bytes(make_pdf(["dugong"], encrypt=True))
        (root / "Broken.canvas").write_text("{nope")
        (root / "Survey.pdf").write_bytes(make_pdf(["The quokka census is in May."]))
        eventually(workspace, "quokka census", ["Survey.pdf"])
        (root / "Plan.canvas").write_text(
            json.dumps({"nodes": [{"id": "a", "type": "text", "x": 0, "y": 0, "text": "bilby"}]})
        )
        eventually(workspace, "bilby", ["Plan.canvas"])
        assert watcher.last_error is None and watcher.running


def test_classify_maps_events_to_note_paths(workspace: Workspace) -> None:
    watcher = VaultWatcher(workspace._vault, embed=False)
    root = workspace.root
    changes = watcher.classify(
        [
            str(root / "Hives/Varroa.md"),
            str(root / ".vaultctx/index.db-wal"),
            str(root / "image.png"),
            str(root / "Hives/.hidden.md"),
            str(root / "Papers/paper.PDF"),
            str(root / "Board.canvas"),
        ]
    )
    assert changes.paths == {"Hives/Varroa.md", "Papers/paper.PDF", "Board.canvas"}
    assert not changes.full
    shutil.rmtree(root / "Hives")
    assert watcher.classify([str(root / "Hives")]).paths == {
        "Hives/Feeding.md",
        "Hives/Varroa.md",
    }
    (root / "New").mkdir()
    assert watcher.classify([str(root / "New")]).full


def test_close_stops_the_watcher(workspace: Workspace) -> None:
    watcher = workspace.watch(embed=False)
    assert watcher.running
    workspace.close()
    assert not watcher.running


def test_the_watcher_says_it_is_indexing_while_a_run_is_under_way(workspace: Workspace) -> None:
    during: list[bool] = []
    done = threading.Event()

    def on_index(report: object) -> None:
        during.append(watcher.indexing)
        done.set()

    watcher = workspace.watch(catch_up=False, on_index=on_index)
    assert watcher.indexing is False
    (workspace.root / "Hives" / "Queens.md").write_text("# Queens\n\nMark the queen.\n")
    assert done.wait(10)
    assert during[0] is True
    eventually(workspace, "queen", ["Hives/Queens.md"])
    deadline = time.monotonic() + 10
    while watcher.indexing and time.monotonic() < deadline:  # the run ends after its commit
        time.sleep(0.01)
    assert watcher.indexing is False
