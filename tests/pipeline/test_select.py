"""Select: lexical, vector and graph retrieval fused, filtered, explained, and never crashing.

Most tests run on an index built without the model (lexical + graph); vectors come from a
stand-in embedder that writes deterministic vectors, so the vector path runs for real on
numpy without loading torch. One slow test uses the real model.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from select_helpers import NOTES, HashEmbedder
from vaultctx import EmbeddingUnavailable, InvalidQuery, Workspace


class BrokenEmbedder(HashEmbedder):
    """Indexes fine, then the model 'fails to load' when a query needs it."""

    broken = False

    def encode(self, texts, *, batch_size=None):
        if self.broken:
            raise EmbeddingUnavailable("model weights missing")
        return super().encode(texts, batch_size=batch_size)


class SlowEmbedder(HashEmbedder):
    """Encodes a query slowly, and says when it has finished."""

    def __init__(self) -> None:
        super().__init__()
        self.slow = False
        self.finished = threading.Event()

    def encode(self, texts, *, batch_size=None):
        if self.slow:
            time.sleep(0.3)
        out = super().encode(texts, batch_size=batch_size)
        if self.slow:
            self.finished.set()
        return out


@pytest.fixture
def vault(make_vault):
    return make_vault(NOTES)


@pytest.fixture
def ws(vault):
    workspace = Workspace.open(vault, embedder=HashEmbedder())
    workspace.index()
    yield workspace
    workspace.close()


def paths(selection) -> list[str]:
    return [c.path for c in selection.candidates]


def test_select_fuses_lexical_vector_and_graph_with_provenance(ws):
    selection = ws.select("smoker pine needles", k=5)
    assert selection.candidates[0].path == "Equipment/Smoker.md"
    top = selection.candidates[0]
    assert {"lexical", "vector"} <= set(top.sources)
    assert all(s.rank >= 1 for s in top.sources.values())
    d = selection.diagnostics
    assert d["retrieval_path"] == "hybrid"
    for name in ("lexical", "vector", "graph"):
        assert f"{name}_ms" in d and f"{name}_hits" in d
    assert d["store_size"] == ws.status().blocks
    assert d["select_ms"] > 0


def test_a_note_linked_from_the_open_note_surfaces_even_sharing_no_words(ws):
    ws.touch("Work/Draft.md")  # what the user is working on
    selection = ws.select("newsletter drafting", k=10)
    quokka = [c for c in selection.candidates if c.path == "Reference/Quokka Facts.md"]
    assert quokka, paths(selection)
    # Linked from it, by the open note's weight: how well it matches the question itself.
    assert quokka[0].sources["graph"].score > 0.5
    assert "newsletter" not in quokka[0].text.lower()


def test_without_context_the_graph_lifts_nothing(ws):
    selection = ws.select("newsletter drafting", k=10)
    assert all("graph" not in c.sources for c in selection.candidates)
    assert selection.diagnostics["graph_hits"] == 0


def test_select_still_answers_when_the_model_fails(vault):
    embedder = BrokenEmbedder()
    with Workspace.open(vault, embedder=embedder) as ws:
        ws.index()
        embedder.broken = True
        selection = ws.select("queen hives", k=5)
    assert selection.diagnostics["retrieval_path"] == "lexical_graph_after_embed_error"
    assert "model weights missing" in selection.diagnostics["errors"]["vector"]
    assert selection.candidates[0].path == "Journal/2025-05-01.md"


def test_lexical_only_select_never_touches_the_model(vault):
    embedder = BrokenEmbedder()
    with Workspace.open(vault, embedder=embedder) as ws:
        ws.index(embed=False)
        selection = ws.select("queen", use_vectors=False)
    assert selection.diagnostics["retrieval_path"] == "lexical_graph"
    assert selection.diagnostics["vector_hits"] == 0
    assert not embedder.loaded


def test_an_index_without_vectors_says_so(vault):
    with Workspace.open(vault, embedder=BrokenEmbedder()) as ws:
        ws.index(embed=False)
        selection = ws.select("queen")
    assert selection.diagnostics["retrieval_path"] == "lexical_graph_no_vectors"


def test_select_before_indexing_is_a_clear_error(vault):
    from vaultctx import NotIndexed

    with Workspace.open(vault) as ws, pytest.raises(NotIndexed, match="vaultctx index"):
        ws.select("anything")


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_an_empty_query_is_a_clear_error(ws, query):
    with pytest.raises(InvalidQuery, match="empty"):
        ws.select(query)


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '"unbalanced quote',
        "smok*",
        "*",
        "-",
        "NEAR(hives queen)",
        "a:b",
        "title:smoker",
        "hives AND",
        "OR OR",
        "(((",
        "^",
        "🐝 ruche Bienenstöcke",
        "ß",
        "'; DROP TABLE notes; --",
    ],
)
def test_fts_syntax_in_queries_never_raises(ws, query):
    selection = ws.select(query)
    assert selection.diagnostics["retrieval_path"] == "hybrid"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(min_size=1, max_size=80))
def test_any_text_query_returns_or_says_it_is_empty(ws, text):
    try:
        selection = ws.select(text, k=3)
    except InvalidQuery:
        assert not text.split()
    else:
        assert len(selection.candidates) <= 3


def test_prefix_and_phrase_queries(ws):
    explained = ws.select('smok* "keep the smoke"', explain=True).explain["lexical"]
    assert explained["prefixes"] == ["smok"]
    assert explained["phrases"] == ["keep the smoke"]
    assert ws.select('"keep the smoke"', retrievers=["lexical"]).candidates[0].path == (
        "Equipment/Smoker.md"
    )


def test_stop_words_are_dropped_and_explained(ws):
    lexical = ws.select("what are the hives", explain=True).explain["lexical"]
    assert lexical["dropped"]["what"] == "stop-word"
    assert lexical["terms"] == ["hive"]  # stemmed by the index's own tokenizer


def test_explain_shows_the_context_with_weights_and_ranks(ws):
    ws.touch("Projects/Garden.md")
    ws.touch("Work/Draft.md")
    # Words only: with vectors, each context note also weighs by how well it matches.
    words = ws.select("apiary plan", explain=True, use_vectors=False).explain
    context = words["graph"]["context"]
    assert [c["path"] for c in context] == ["Work/Draft.md", "Projects/Garden.md"]
    assert context[0]["weight"] > context[1]["weight"] > 0  # the most recent weighs most
    explain = ws.select("apiary plan", explain=True).explain
    assert explain["graph"]["lift"] == ws.config.weight_graph
    assert explain["weights"]["vector"] == ws.config.weight_vector
    assert explain["vector"]["length_correction"] > 0 and explain["vector"]["spread"] > 0
    assert explain["ranks"]


def test_filter_by_folder_and_glob(ws):
    assert set(paths(ws.select("hives", filters={"path": "Journal"}))) == {"Journal/2025-05-01.md"}
    globbed = ws.select("apiary garden", filters={"path": "Projects/*.md"})
    assert set(paths(globbed)) <= {"Projects/Apiary.md", "Projects/Garden.md"}
    assert globbed.candidates


def test_filter_by_tag_includes_nested_tags(ws):
    tagged = ws.select("hives queen apiary", filters={"tags": ["bees"]}, k=10)
    assert set(paths(tagged)) == {"Projects/Apiary.md", "Journal/2025-05-01.md"}


def test_filter_by_frontmatter_field(ws):
    active = ws.select("apiary garden", filters={"frontmatter": {"status": "active"}}, k=10)
    assert set(paths(active)) == {"Projects/Apiary.md"}


def test_filter_by_modification_date(ws, vault):
    old = time.time() - 30 * 86400
    os.utime(vault / "Equipment/Smoker.md", (old, old))
    ws.index()
    cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(days=7)
    recent = ws.select("smoker apiary", filters={"modified_after": cutoff}, k=10)
    assert "Equipment/Smoker.md" not in paths(recent)
    older = ws.select("smoker apiary", filters={"modified_before": cutoff}, k=10)
    assert set(paths(older)) == {"Equipment/Smoker.md"}


def test_a_filter_that_matches_nothing_returns_nothing(ws):
    assert ws.select("hives", filters={"tags": ["nope"]}).candidates == []
    assert ws.select("hives", filters={"kinds": ["memory"]}).candidates == []


def test_results_are_deterministic(ws):
    first = ws.select("hives frames smoke", k=10).contract()
    second = ws.select("hives frames smoke", k=10).contract()
    first.pop("diagnostics")
    second.pop("diagnostics")
    assert first == second


def test_at_most_three_blocks_per_note_by_default(make_vault):
    sections = "\n\n".join(f"## Part {i}\nvarroa mites count {i}" for i in range(8))
    vault = make_vault({"Long.md": f"# Long\n{sections}", "Other.md": "varroa elsewhere"})
    with Workspace.open(vault) as ws:
        ws.index(embed=False)
        capped = ws.select("varroa mites", k=10, use_vectors=False)
        uncapped = ws.select("varroa mites", k=10, use_vectors=False, max_per_note=0)
    assert paths(capped).count("Long.md") == 3
    assert paths(uncapped).count("Long.md") > 3


def test_a_note_edited_after_select_is_found_by_its_new_words(ws, vault):
    assert not ws.select("zeppelin", retrievers=["lexical"]).candidates
    (vault / "Reference/Unrelated.md").write_text("A zeppelin drifted over.\n", encoding="utf-8")
    ws.index()
    assert paths(ws.select("zeppelin", retrievers=["lexical"]))[:1] == ["Reference/Unrelated.md"]


def test_touch_an_unknown_note_is_a_clear_error(ws):
    from vaultctx import NoteNotFound

    with pytest.raises(NoteNotFound):
        ws.touch("Does not exist")


@pytest.mark.slow
def test_real_model_ranks_by_meaning(example_vault: Path, embedder):
    with Workspace.open(example_vault, embedder=embedder) as ws:
        ws.index()
        selection = ws.select("how do I stop the colony from leaving", k=5)
    assert selection.diagnostics["retrieval_path"] == "hybrid"
    assert selection.diagnostics["vector_feedback"] > 0
    assert "Reference/Swarming.md" in [n.path for n in selection.notes()]


QUERY_TOPICS = [
    "due dates", "start dates", "recurrence", "priority", "tags", "folders", "file names",
    "headings", "descriptions", "status symbols", "done dates", "created dates", "sorting",
    "grouping", "hiding fields", "short mode", "backlinks", "urgency", "dependencies",
    "placeholders", "presets", "global filter", "styling", "limits",
]  # fmt: skip


@pytest.mark.slow
def test_a_long_reference_note_does_not_win_on_its_many_chances_to_match(
    make_vault, embedder, monkeypatch
):
    """A reference with a section on everything has many tries at a block close to any
    question; the short note about the question must still come first."""
    import vaultctx.pipeline.note_ranking as notes

    reference = "# Query reference\nEvery instruction a query understands.\n\n" + "\n\n".join(
        f"## {t.title()}\nInstructions about {t} in a query: filter, sort or show tasks by {t}."
        for t in QUERY_TOPICS
    )
    limiting = (
        "# Limiting\nShow only the first results of a query: `limit 10` keeps ten tasks, and"
        " `limit groups 3` keeps three tasks in each group.\n"
    )
    root = make_vault({"Query reference.md": reference, "Limiting.md": limiting})
    question = "how many tasks to show at most in a query"
    with Workspace.open(root, embedder=embedder) as ws:
        ws.index()

        def gap() -> float:
            selection = ws._selector.select(question, k=5, retrievers={"vector"})
            scores = {n.path: n.score for n in selection.notes()}
            return scores["Limiting.md"] - scores["Query reference.md"]

        corrected = gap()
        monkeypatch.setattr(notes, "LENGTH_CORRECTION", 0.0)
        uncorrected = gap()
    assert corrected > 0.05  # the short note first, clearly
    assert corrected > uncorrected + 0.05  # and the length correction is why


SETTINGS_SECTIONS = ["Spellcheck", "Line numbers", "Readable line length", "Vim key bindings"]


@pytest.mark.parametrize("linked", [True, False])
def test_a_settings_line_that_links_to_a_feature_yields_to_the_feature_note(make_vault, linked):
    """A long settings page names every feature in a line; when the line that matches links
    to the feature's own note and that note matches nearly as well, the note comes first."""
    see = " See [[Folding]]." if linked else ""
    settings_page = (
        "# Settings\n"
        + "\n".join(
            f"## {name}\nTurn {name.lower()} on or off in the editor." for name in SETTINGS_SECTIONS
        )
        + f"\n## Fold heading\nFold the content under a heading with the fold icon.{see}\n"
    )
    folding = "# Folding\nFold a heading to hide the content under it.\n"
    root = make_vault({"Settings.md": settings_page, "Folding.md": folding})
    month_ago = time.time() - 30 * 86400  # no recent edits: no context to lift either note
    for path in root.glob("*.md"):
        os.utime(path, (month_ago, month_ago))
    with Workspace.open(root) as ws:
        ws.index(embed=False)
        selection = ws.select("fold the content under a heading", use_vectors=False, explain=True)
    notes = [n.path for n in selection.notes()]
    if linked:
        assert notes[:2] == ["Folding.md", "Settings.md"]
        assert selection.explain["pointers"] == [{"from": "Settings.md", "to": "Folding.md"}]
    else:
        assert notes[:2] == ["Settings.md", "Folding.md"]  # the pointer, not the words, decides
        assert selection.explain["pointers"] == []


def test_close_waits_for_a_search_an_interrupted_select_left_running(vault, monkeypatch):
    """Ctrl-C (or any error) in the calling thread leaves the vector search running in its
    worker; closing the workspace under it would close SQLite under a running statement."""
    import vaultctx.pipeline.retrievers as retrievers

    embedder = SlowEmbedder()
    ws = Workspace.open(vault, embedder=embedder)
    ws.index()
    embedder.slow = True

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(retrievers, "context_seeds", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ws.select("smoker pine needles")
    assert not embedder.finished.is_set()  # the search is still running
    ws.close()
    assert embedder.finished.is_set()


def test_the_vault_s_languages_are_read_once_per_index_generation(ws, monkeypatch):
    """How queries are read depends on the vault's languages: a count over every note (36 ms
    at 100k notes on PostgreSQL), read again only when the index moves on."""
    counted = []
    language_counts = ws._vault.reads.language_counts
    monkeypatch.setattr(
        ws._vault.reads, "language_counts", lambda *a: counted.append(1) or language_counts(*a)
    )
    for query in ("varroa", "honey harvest", "queen"):
        ws.select(query, k=3)
    assert len(counted) == 1
    (ws.root / "New.md").write_text("# New\n\nA new note about hives.\n")
    ws.index()
    ws.select("hives", k=3)
    assert len(counted) == 2


def test_a_retriever_attached_while_a_select_runs_waits_for_the_next_select(ws):
    """Memory attaches itself to a selector that may already be answering (a server's first
    concurrent requests): a select ranks the retrievers it ran, never one added meanwhile."""
    from vaultctx.pipeline.retrievers import RetrievalRequest
    from vaultctx.search.fusion import Hit

    class Late:
        name = "late"

        def retrieve(self, request: RetrievalRequest) -> list[Hit]:
            return []

    class Attaching:
        name = "attaching"

        def retrieve(self, request: RetrievalRequest) -> list[Hit]:
            ws.add_retriever(Late())  # while this select is between its runs and its ranking
            return []

    ws.add_retriever(Attaching())
    first = ws.select("smoker pine needles", k=5, use_vectors=False)
    assert first.candidates and "late_ms" not in first.diagnostics
    assert "late_ms" in ws.select("smoker pine needles", k=5, use_vectors=False).diagnostics
