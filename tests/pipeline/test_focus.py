"""Focus you can see and that fades: an answer names the notes in focus and what they moved,
each open note's weight halves every `focus_half_life_hours`, clearing the focus gives back
the unfocused ranking, and a context note that has nothing to do with the question lifts
nothing: one no closer to it than the vault's median note.

Lexical-only selects on small built vaults (the lift applies to whatever retrievers ran),
and one slow test with the real model on the example vault.
"""

from __future__ import annotations

import sqlite3
import time

import numpy as np
import pytest

from select_helpers import TWINS, written_long_ago
from vaultctx import Workspace
from vaultctx.pipeline.note_ranking import lift
from vaultctx.pipeline.retrievers import Run, on_topic
from vaultctx.search.fusion import Fused, Provenance
from vaultctx.search.hybrid import from_median


def paths(ws: Workspace, query: str) -> list[str]:
    return [n.path for n in ws.select(query, k=5, use_vectors=False).notes()]


def opened_at(ws: Workspace, note: str, at: float) -> None:
    """Record `note` as opened at `at` (seconds since the epoch)."""
    conn = sqlite3.connect(ws._vault.db.path)
    with conn:
        (note_id,) = conn.execute("SELECT id FROM notes WHERE path = ?", (note,)).fetchone()
        conn.execute("INSERT INTO accesses(note_id, at, kind) VALUES (?, ?, 'open')", (note_id, at))
    conn.close()


@pytest.fixture
def twins(make_vault, tmp_path):
    with Workspace.open(written_long_ago(make_vault(TWINS)), {"embed": False}) as ws:
        ws.index(embed=False)
        yield ws


def test_an_answer_names_the_open_note_and_the_note_it_lifted(twins):
    unfocused = paths(twins, "security and privacy")
    second = unfocused[1]  # the twin the match alone ranks second
    product = second.split("/")[0]
    twins.touch(f"{product}/Introduction.md")
    selection = twins.select("security and privacy", k=5, use_vectors=False)
    focus = selection.diagnostics["focus"]
    assert focus["notes"] == [{"path": f"{product}/Introduction.md", "weight": 1.0}]
    assert [(n["path"], n["from"], n["to"]) for n in focus["lifted"]] == [(second, 2, 1)]
    assert selection.candidates[0].path == second


def test_an_answer_with_nothing_in_focus_says_nothing_of_it(twins):
    assert "focus" not in twins.select("security and privacy", use_vectors=False).diagnostics


def test_an_open_note_counts_half_as_much_after_each_half_life(make_vault):
    vault = written_long_ago(make_vault(TWINS))
    with Workspace.open(vault, {"embed": False, "focus_half_life_hours": 2.0}) as ws:
        ws.index(embed=False)
        now = time.time()
        opened_at(ws, "Sync/Introduction.md", now - 2 * 3600)
        assert ws.focus().notes[0].weight == pytest.approx(0.5, rel=1e-3)
        opened_at(ws, "Sync/Introduction.md", now - 6 * 3600)  # opened before, too
        assert ws.focus().notes[0].weight == pytest.approx(0.5, rel=1e-3)  # the latest counts
        ws.clear_focus()
        opened_at(ws, "Sync/Introduction.md", now - 6 * 3600)
        focus = ws.focus()
    assert focus.notes[0].weight == pytest.approx(0.125, rel=1e-3)
    assert focus.half_life_hours == 2.0


def test_a_note_opened_many_half_lives_ago_barely_counts(make_vault):
    vault = written_long_ago(make_vault(TWINS))
    with Workspace.open(vault, {"embed": False, "focus_half_life_hours": 1.0}) as ws:
        ws.index(embed=False)
        opened_at(ws, "Sync/Introduction.md", time.time() - 60)
        fresh = ws.select("security and privacy", k=5, use_vectors=False).diagnostics["focus"]
        ws.clear_focus()
        opened_at(ws, "Sync/Introduction.md", time.time() - 40 * 3600)
        stale = ws.select("security and privacy", k=5, use_vectors=False).diagnostics["focus"]
    assert fresh["notes"][0]["weight"] == pytest.approx(0.99, abs=0.01)
    assert stale["notes"][0]["weight"] < 1e-9
    assert all(n["lift"] < 1e-9 for n in stale["lifted"])


def test_clearing_the_focus_gives_back_the_unfocused_ranking(twins):
    unfocused = paths(twins, "security and privacy")
    twins.touch(f"{unfocused[1].split('/')[0]}/Introduction.md")
    twins.touch("Notes/Unrelated.md")
    assert paths(twins, "security and privacy") != unfocused
    left = twins.clear_focus()
    assert (left.cleared, left.notes) == (2, [])
    assert twins.focus().notes == []
    assert paths(twins, "security and privacy") == unfocused
    assert "focus" not in twins.select("security and privacy", use_vectors=False).diagnostics


def test_the_focus_lists_the_open_notes_heaviest_first(twins):
    twins.touch("Sync/Introduction.md")
    twins.touch("Publish/Introduction.md")
    notes = twins.focus().notes
    assert [n.path for n in notes] == ["Publish/Introduction.md", "Sync/Introduction.md"]
    assert notes[0].weight == pytest.approx(1.0, abs=1e-3)
    assert notes[1].weight == pytest.approx(0.25, abs=1e-3)  # ORDER_DECAY
    assert {n.how for n in notes} == {"opened"}


def test_a_linked_note_lifted_far_enough_passes_even_a_match_first_on_both_lists():
    """The lift itself has no cap: what keeps an exact answer first is that an open note
    about something else lifts nothing (`on_topic`), not a rule about the best note."""
    clear = Fused("note:1", 1.0, {"lexical": Provenance(1, 9.0), "vector": Provenance(1, 0.8)})
    linked = Fused("note:2", 0.7, {"lexical": Provenance(2, 6.0), "vector": Provenance(2, 0.7)})
    ranked = lift([clear, linked], {"note:2": 1.0}, 0.75)
    assert [(r.key, r.matched) for r in ranked] == [("note:2", 2), ("note:1", 1)]
    assert ranked[0].score == pytest.approx(0.7 * 1.75)
    assert [r.key for r in lift([clear, linked], {"note:2": 0.2}, 0.75)] == ["note:1", "note:2"]


def test_a_context_note_lifts_by_how_far_it_stands_above_the_vaults_median_note():
    """Each context note's weight times the square of its best cosine's share of the way
    from the median note's (0.5) to the best note's (0.9); the note asked about (`related`)
    keeps its weight, a note the vector scan has no score for lifts nothing, and without
    the vector scan every note keeps its weight."""
    vector = Run(maxima=(np.array([1, 2, 3, 4, 5]), np.array([0.9, 0.5, 0.5, 0.7, 0.3])))
    weighed = on_topic({1: 1.0, 2: 1.0, 4: 0.5, 5: 0.25, 9: 1.0}, vector, open_note=5)
    assert weighed == pytest.approx({1: 1.0, 2: 0.0, 4: 0.5 * 0.25, 5: 0.25, 9: 0.0})
    assert on_topic({2: 1.0}, Run(), open_note=None) == {2: 1.0}


def test_note_cosines_read_from_the_median_note_gate_the_context_from_that_median():
    """Read from the vault's median note (0.8: e5, every cosine high), the gate's median is
    that one, not the median of the notes feedback scored again (all near the question)."""
    raw = np.array([0.9, 0.85, 0.85, 0.87, 0.8], dtype=np.float32)
    vector = Run(maxima=(np.array([1, 2, 3, 4, 5]), from_median(raw, 0.8)), median=0.8)
    weighed = on_topic({1: 1.0, 2: 1.0, 4: 1.0, 5: 1.0}, vector, open_note=None)
    assert weighed == pytest.approx({1: 1.0, 2: 0.5**2, 4: 0.7**2, 5: 0.0}, abs=1e-6)


@pytest.mark.slow
def test_a_strong_exact_match_stays_first_with_an_unrelated_note_open(example_vault, embedder):
    """Real model, example vault: each question's answer is first with nothing open, and
    stays first after opening a note that neither is nor links to it."""
    questions = {"asian hornet": None, "wax moth": None, "chalkbrood": None}
    with Workspace.open(example_vault, embedder=embedder) as ws:
        ws.index()
        graph = ws.graph()
        for question in questions:
            questions[question] = ws.select(question, k=5).candidates[0].path
        for question, first in questions.items():
            near = {first, *graph.successors(first), *graph.predecessors(first)}
            unrelated = sorted(n for n in graph if n not in near)
            for note in unrelated[:: max(1, len(unrelated) // 4)]:
                ws.touch(note)
                selection = ws.select(question, k=5)
                assert selection.candidates[0].path == first, (question, note)
                assert selection.diagnostics["focus"]["notes"][0]["path"] == note
                ws.clear_focus()
