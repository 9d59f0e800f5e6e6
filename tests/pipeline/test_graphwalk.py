"""The graph walk around the context: the notes the user has open decide between notes that
match a question equally, the most recent touch most of all, and a hub linked to everything
wins nothing by it.

Lexical-only selects on small built vaults: the graph's lift applies to whatever retrievers
ran, so no model is needed to check how context ranks.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from select_helpers import TWINS, written_long_ago
from vaultctx import Workspace
from vaultctx.pipeline.graphwalk import (
    MAX_EDIT_SEEDS,
    LinkGraph,
    context_seeds,
    load_link_graph,
    updated_link_graph,
)


def top(ws: Workspace, query: str) -> str:
    return ws.select(query, k=5, use_vectors=False).candidates[0].path


@pytest.fixture
def twins(make_vault):
    with Workspace.open(written_long_ago(make_vault(TWINS))) as ws:
        ws.index(embed=False)
        yield ws


def test_the_open_notes_link_beats_an_equally_matching_unlinked_note(twins):
    twins.touch("Sync/Introduction.md")
    assert top(twins, "security and privacy") == "Sync/Security and privacy.md"
    twins.touch("Publish/Introduction.md")
    assert top(twins, "security and privacy") == "Publish/Security and privacy.md"


def test_the_most_recent_touch_decides_when_older_ones_point_elsewhere(twins):
    twins.touch("Publish/Introduction.md")
    twins.touch("Notes/Unrelated.md")
    twins.touch("Sync/Introduction.md")
    selection = twins.select("security and privacy", k=5, use_vectors=False)
    lifts = {c.path: c.sources["graph"].score for c in selection.candidates if "graph" in c.sources}
    assert selection.candidates[0].path == "Sync/Security and privacy.md"
    assert lifts["Sync/Security and privacy.md"] > lifts["Publish/Security and privacy.md"] > 0


def test_an_old_touch_weighs_less_than_a_new_one(twins):
    conn = twins._vault.db.connect()
    ids = dict(conn.execute("SELECT path, id FROM notes"))
    now = time.time()
    with twins._vault.db.transaction() as wconn:
        wconn.execute(
            "INSERT INTO accesses(note_id, at, kind) VALUES (?, ?, 'touch')",
            (ids["Publish/Introduction.md"], now - 3 * 86400),
        )
        wconn.execute(
            "INSERT INTO accesses(note_id, at, kind) VALUES (?, ?, 'touch')",
            (ids["Sync/Introduction.md"], now - 60),
        )
    seeds = context_seeds(twins._vault.reads, note_count=5, half_life_hours=24.0, now=now)
    new, old = seeds[ids["Sync/Introduction.md"]], seeds[ids["Publish/Introduction.md"]]
    assert new == pytest.approx(1.0, abs=1e-3)
    assert old == pytest.approx(0.25 * 0.5**3, rel=1e-3)  # second in order, three days old
    assert top(twins, "security and privacy") == "Sync/Security and privacy.md"


def test_context_does_not_override_a_clearly_better_match(twins):
    twins.touch("Sync/Introduction.md")
    assert top(twins, "borage lavender gardening") == "Notes/Unrelated.md"


def test_a_hub_linked_to_and_from_everything_does_not_win_an_unrelated_query(make_vault):
    topics = ["Varroa", "Swarming", "Feeding", "Wintering", "Queens", "Honey", "Frames"]
    files = {
        # A map of content: linked from every note, naming every topic of the apiary.
        "Map.md": "# Map of the apiary\nEvery topic of the apiary, in one list.\n"
        + "\n".join(f"- [[{t}]]: {t.lower()} in the apiary" for t in topics),
    }
    for t in topics:
        files[f"{t}.md"] = f"# {t}\nHow {t.lower()} works, step by step. Back to [[Map]].\n"
    with Workspace.open(written_long_ago(make_vault(files))) as ws:
        ws.index(embed=False)
        assert top(ws, "how swarming works") == "Swarming.md"
        ws.touch("Varroa.md")  # links to the hub, which links to everything
        selection = ws.select("how swarming works", k=5, use_vectors=False)
    assert selection.candidates[0].path == "Swarming.md"
    lifts = {c.path: c.sources["graph"].score for c in selection.candidates if "graph" in c.sources}
    assert lifts["Map.md"] < 0.5  # damped: the hub is a neighbour of everything


def test_touching_an_unknown_note_changes_nothing(twins):
    from vaultctx import NoteNotFound

    with pytest.raises(NoteNotFound):
        twins.touch("Nowhere.md")
    assert sqlite3.connect(twins._vault.db.path).execute(
        "SELECT count(*) FROM accesses"
    ).fetchone() == (0,)


class EditedNotes:
    """The reads `context_seeds` makes, over notes of which the first `recent` were edited
    a minute ago and the rest a month ago; nothing opened."""

    def __init__(self, notes: int, recent: int, now: float) -> None:
        self.mtimes = [int((now - (60 if i < recent else 30 * 86400)) * 1e9) for i in range(notes)]

    def recent_accesses(self, limit: int) -> list:
        return []

    def count_edited_since(self, mtime_ns: int, at_most: int) -> int:
        return min(sum(m >= mtime_ns for m in self.mtimes), at_most)

    def edited_since(self, mtime_ns: int, limit: int) -> list[tuple[int, int]]:
        edited = [(i, m) for i, m in enumerate(self.mtimes) if m >= mtime_ns]
        return sorted(edited, key=lambda e: (-e[1], e[0]))[:limit]


@given(st.integers(1, 300), st.data())
def test_recent_edits_are_context_unless_many_changed_at_once(notes, data):
    """Edited notes are seeds unless more than MAX_EDIT_SEEDS and a tenth of the vault
    changed at once (a sync, an import): the count of them is bounded, the decision is not."""
    recent = data.draw(st.integers(0, notes))
    now = time.time()
    seeds = context_seeds(EditedNotes(notes, recent, now), notes, half_life_hours=24.0, now=now)
    many_at_once = recent > MAX_EDIT_SEEDS and recent > notes * 0.1
    assert len(seeds) == (0 if many_at_once else min(recent, MAX_EDIT_SEEDS))


# -- the graph kept in memory follows the saves ---------------------------------------------

LINKED = {
    "Alpha.md": "# Alpha\nThe first note. See [[Bravo]].\n",
    "Bravo.md": "# Bravo\nSecond of the set.\n",
    "Charlie.md": "# Charlie\nThird of the set.\n",
    "Delta.md": "# Delta\nFourth, linking [[Alpha]] and ![[Charlie]].\n",
}


def graph_neighbours(ws: Workspace, note: str) -> set[str]:
    """The notes `related` lifts by the link graph alone (they match no word of `note`)."""
    selection = ws.related(note, k=10, use_vectors=False)
    return {c.path for c in selection.candidates if "graph" in c.sources}


def same_graph(kept: LinkGraph, fresh: LinkGraph) -> bool:
    return (
        np.array_equal(kept.note_ids, fresh.note_ids)
        and np.array_equal(kept.starts, fresh.starts)
        and np.array_equal(kept.dst, fresh.dst)
        and np.allclose(kept.strength, fresh.strength)
        and np.array_equal(kept.degree, fresh.degree)
        and kept.typical_degree == fresh.typical_degree
    )


def save(vault: Path, path: str, text: str) -> None:
    """Write the note with a new mtime that is still a month old: a recent edit would be
    context, and these tests are about the note asked about."""
    file = vault / path
    old = file.stat().st_mtime if file.exists() else time.time() - 30 * 86400
    file.write_text(text, encoding="utf-8")
    os.utime(file, (old + 1, old + 1))


def test_a_saved_notes_new_and_removed_links_show_in_related_right_after(make_vault):
    vault = written_long_ago(make_vault(LINKED))
    with Workspace.open(vault) as ws:
        ws.index(embed=False)
        assert graph_neighbours(ws, "Alpha.md") == {"Bravo.md", "Delta.md"}
        save(vault, "Alpha.md", "# Alpha\nThe first note. See [[Charlie]] now.\n")
        ws.index(embed=False, paths=["Alpha.md"])  # as the watcher does
        assert graph_neighbours(ws, "Alpha.md") == {"Charlie.md", "Delta.md"}
        assert graph_neighbours(ws, "Bravo.md") == set()  # its backlink went with the link
        save(vault, "Delta.md", "# Delta\nFourth, linking nothing.\n")
        ws.index(embed=False, paths=["Delta.md"])
        assert graph_neighbours(ws, "Alpha.md") == {"Charlie.md"}
        store = ws._selector.graph
        assert store.loads == 1  # each save brought the graph forward: no whole read again


def test_the_graph_brought_forward_is_the_graph_read_whole(make_vault):
    """Saves that change links, keep them, or add a note (which changes the set of notes and
    so reads the graph whole again): after each, the kept graph is the one a fresh read makes."""
    vault = written_long_ago(make_vault(LINKED))
    with Workspace.open(vault) as ws:
        ws.index(embed=False)
        store = ws._selector.graph
        edits = [
            ("Bravo.md", "# Bravo\nNow [[Alpha]], [[Charlie]] and [[Charlie]] again.\n"),
            ("Charlie.md", "# Charlie\nEmbeds ![[Bravo]], links [[Delta]].\n"),
            ("Bravo.md", "# Bravo\nNow [[Alpha]], [[Charlie]] and [[Charlie]] again!\n"),
            ("Echo.md", "# Echo\nA new note on [[Alpha]].\n"),
            ("Alpha.md", "# Alpha\n[[Echo]] and [[Nowhere]].\n"),
        ]
        loads = []
        for path, text in edits:
            save(vault, path, text)
            ws.index(embed=False, paths=[path])
            view = ws._selector.scope.view()
            kept = store.get(view, view.generation)
            assert same_graph(kept, load_link_graph(view, view.generation)), path
            loads.append(store.loads)
    assert loads == [1, 1, 1, 2, 2]  # only the new note read every link again


class LinkRows:
    """The reads a link graph is made from: notes and their resolved links."""

    def __init__(self, notes: list[int], links: list[tuple[int, int, str]]) -> None:
        self.notes, self.links = notes, links

    def note_ids(self) -> list[int]:
        return sorted(self.notes)

    def resolved_links(self, sources=None) -> list[tuple[int, int, str]]:
        return [r for r in self.links if sources is None or r[0] in set(sources)]


link_rows = st.lists(
    st.tuples(st.integers(0, 12), st.integers(0, 12), st.sampled_from(["wiki", "embed"])),
    max_size=40,
).map(lambda rows: [r for r in rows if r[0] != r[1]])


@given(link_rows, link_rows, st.sets(st.integers(0, 12)))
def test_replacing_some_notes_links_gives_the_graph_made_whole(before, after, sources):
    """The links of `sources` replaced by theirs in `after`: the graph brought forward is
    the graph of the new links read whole, edge for edge."""
    notes = list(range(0, 13, 1))
    old = load_link_graph(LinkRows(notes, before), "1")
    now = [r for r in before if r[0] not in sources] + [r for r in after if r[0] in sources]
    reads = LinkRows(notes, now)
    assert same_graph(updated_link_graph(old, reads, "2", sources), load_link_graph(reads, "2"))
