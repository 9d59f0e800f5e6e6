"""Private stays private on PostgreSQL too: with the index in a database, a marker in a
denied, ignored or hidden note (or one behind a symlink) never reaches an answer or a model
request, from a server on another host that has no local index at all; what the vault hides
or ignores never even reaches the database. Each test also finds the public marker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_privacy import (
    NAMES,
    PUBLIC,
    QUERIES,
    SECRET,
    assert_recalls_alike,
    leaks,
    make_private_vault,
    model_config,
    remember,
)

from llm_server import LLMServer, Reply, llm_server_fixture  # noqa: F401
from server_helpers import call as http_call
from vaultctx import NoteNotFound, Workspace
from vaultctx.pipeline import retrievers
from vaultctx.server.run import LocalServer
from vaultctx.storage.postgres.schema import connect


@pytest.fixture
def vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(tmp_path / "config"))
    return make_private_vault(tmp_path / "vault")


def published(vault: Path, url: str) -> None:
    with Workspace.open(vault, {"embed": False, "database_url": url}) as indexer:
        indexer.index()


def elsewhere(vault: Path, url: str, **settings: object) -> Workspace:
    """A server's workspace on another host: the database, and no local index."""
    index_dir = str(vault.parent / "elsewhere")
    return Workspace.open(
        vault, {"embed": False, "database_url": url, "index_dir": index_dir, **settings}
    )


def test_what_the_vault_hides_or_ignores_never_reaches_the_database(vault, postgres_url):
    published(vault, postgres_url)
    with connect(postgres_url) as pg:
        paths = [p for (p,) in pg.execute("SELECT path FROM notes ORDER BY path")]
        texts = " ".join(t for (t,) in pg.execute("SELECT text FROM blocks"))
        terms = {t for (t,) in pg.execute("SELECT term FROM term_df")}
    # denied: kept, hidden (a note, a canvas and a PDF)
    denied = ["Private/board.canvas", "Private/secret.md", "Private/secret.pdf"]
    assert paths == ["Apiary.md", "Orchard.md", *denied]
    assert f"{SECRET}-ignored" not in texts and f"{SECRET}-hidden" not in texts
    assert "ignor" not in terms and "hidden" not in terms


def test_the_sketch_never_shows_a_denied_note(vault, postgres_url, embedder, monkeypatch):
    """A server's sketch holds every vector in the database, a denied note's too: the rows
    it ranks best are filtered as the scan's are. Its candidates are cut to two rows here, so
    for the marker's query they are the denied note's own."""
    monkeypatch.setattr(retrievers, "SKETCH_CANDIDATES", 2)
    settings = {"database_url": postgres_url, "ann_min_vectors": 0}
    with Workspace.open(vault, settings, embedder=embedder) as indexer:
        indexer.index()
    index_dir = str(vault.parent / "elsewhere")
    with Workspace.open(vault, {**settings, "index_dir": index_dir}, embedder=embedder) as ws:
        shown = [ws.select(q, k=20) for q in (*QUERIES, SECRET)]
        assert {s.diagnostics["vector_pass"] for s in shown} == {"sketch"}
        assert not leaks([s.contract()["candidates"] for s in shown])  # the query may name it
        assert any(PUBLIC in json.dumps(s.contract()) for s in shown)


def test_select_related_and_names_never_show_a_hidden_note(vault, postgres_url):
    published(vault, postgres_url)
    with elsewhere(vault, postgres_url) as ws:
        shown = [ws.select(q, k=20, use_vectors=False).contract() for q in QUERIES]
        shown.append(ws.related("Orchard", k=10, use_vectors=False).contract())
        assert not leaks(shown)
        assert not leaks(ws.select(SECRET, use_vectors=False).candidates)  # the marker's word
        assert any(PUBLIC in json.dumps(s) for s in shown)
        for name in NAMES:
            with pytest.raises(NoteNotFound):
                ws.read_note(name)
            with pytest.raises(NoteNotFound):
                ws.touch(name)
        assert ws.select("orchard honey", filters={"path": "Private"}).candidates == []


def test_how_a_query_is_read_counts_only_what_the_reader_may_see(vault, postgres_url):
    published(vault, postgres_url)
    with elsewhere(vault, postgres_url) as ws, Workspace.open(vault, {"embed": False}) as here:
        here.index()
        view, local = ws._scope.view(), here._scope.view()
        terms = view.stems(f"orchard honey code {SECRET}")
        assert view.doc_freqs(terms) == local.doc_freqs(terms)
        assert terms[-1] not in view.doc_freqs(terms)
        selection = ws.select(f"{SECRET} orchard", use_vectors=False, explain=True)
        assert selection.explain["lexical"]["dropped"] == {SECRET.lower(): "not in the index"}


def test_http_answers_and_model_requests_hold_no_hidden_text(
    vault: Path, postgres_url, llm_server: LLMServer
) -> None:
    published(vault, postgres_url)
    llm_server.script(Reply(content='{"keep": [{"id": "c1", "reason": "first"}]}'))
    answers = []
    with (
        elsewhere(vault, postgres_url, **model_config(llm_server)) as ws,
        LocalServer(ws, watch=False, warm=False) as server,
    ):
        for query in QUERIES:
            answers.append(http_call(server, "POST", "/select", {"query": query, "k": 20}))
            answers.append(http_call(server, "POST", "/context", {"query": query}))
            answers.append(http_call(server, "POST", "/related", {"note": "Orchard"}))
        for name in NAMES:
            status, _, body = http_call(server, "POST", "/touch", {"note": name})
            assert status == 404, (name, body)
        answers.append(http_call(server, "GET", "/status"))
    assert all(status == 200 for status, _, _ in answers), answers
    assert not leaks([a[2] for a in answers], [r.body for r in llm_server.requests])
    assert any(PUBLIC in json.dumps(a[2]) for a in answers)


def test_a_hidden_memory_s_words_move_no_score_on_another_server(vault, postgres_url, tmp_path):
    """The team's book holds memories the reader may not recall (written on one server);
    another server's copy of it recalls, score for score, what a memory that never held
    them does."""
    published(vault, postgres_url)
    with Workspace.open(vault, {"embed": False, "database_url": postgres_url}) as writer:
        remember(writer, everything=True)
    other = make_private_vault(tmp_path / "other")
    with elsewhere(vault, postgres_url) as ws, Workspace.open(other, {"embed": False}) as oracle:
        oracle.index()
        remember(oracle, everything=False)
        assert_recalls_alike(ws, oracle)
