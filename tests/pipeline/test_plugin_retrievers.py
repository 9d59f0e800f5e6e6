"""Adding a retriever (docs/search.md): one registered through `Workspace.add_retriever` is
asked a `RetrievalRequest`, its hits are fused beside the built-in lists with the weight it
was registered with, and nothing it returns can bring a note the reader may not read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from vaultctx import Workspace
from vaultctx.errors import ConfigError
from vaultctx.pipeline import Filters, RetrievalRequest
from vaultctx.pipeline.note_ranking import PLUGIN_WEIGHT
from vaultctx.search.fusion import Hit

VAULT = {
    "Zephyr.md": "# Notes on wind\n\nA light breeze from the west kept the bees calm.\n",
    "Smoker.md": "# Smoker\n\nPine needles burn cool and slow in the smoker.\n",
    "Private/Anemometer.md": "# Readings\n\nThe garden gauge said force three at noon.\n",
    ".vaultctx/permissions.toml": '[[rules]]\ncapability = "vault.read"\npaths = ["Private/**"]\n'
    'effect = "deny"\n',
}


class TitleRetriever:
    """A retriever in ten lines: the notes whose file name is a word of the query, read
    through the request's view (or from `notes`, pairs read past it)."""

    name = "titles"

    def __init__(self, notes: list[tuple[int, str]] | None = None) -> None:
        self.notes = notes

    def retrieve(self, request: RetrievalRequest) -> list[Hit]:
        notes = self.notes if self.notes is not None else request.view.all_note_paths()
        words = {word.lower() for word in request.query.split()}
        names = ((i, path.rsplit("/", 1)[-1].removesuffix(".md").lower()) for i, path in notes)
        return [Hit(f"note:{i}", 1.0) for i, name in names if name in words]


@pytest.fixture
def ws(make_vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(tmp_path / "config"))
    with Workspace.open(make_vault(VAULT), {"embed": False}) as workspace:
        workspace.index()
        yield workspace


def every_note(ws: Workspace) -> list[tuple[int, str]]:
    """Every note of the index, hidden ones too: what a retriever reading the file sees."""
    with sqlite3.connect(ws.root / ".vaultctx" / "index.db") as conn:
        return conn.execute("SELECT id, path FROM notes").fetchall()


def test_a_registered_retriever_s_hits_are_fused_with_its_weight(ws: Workspace) -> None:
    assert not ws.select("zephyr", use_vectors=False).candidates  # no built-in list finds it
    ws.add_retriever(TitleRetriever(), weight=0.4)
    selection = ws.select("zephyr", use_vectors=False, explain=True)
    assert [c.path for c in selection.candidates] == ["Zephyr.md"]
    assert selection.candidates[0].sources["titles"].rank == 1
    assert selection.diagnostics["retrievers"] == ["lexical", "vector", "graph", "titles"]
    assert selection.diagnostics["titles_hits"] == 1
    assert selection.explain is not None and selection.explain["weights"]["titles"] == 0.4


def test_a_retriever_registered_without_a_weight_gets_the_documented_default(
    ws: Workspace,
) -> None:
    ws.add_retriever(TitleRetriever())
    weights = ws.select("zephyr", use_vectors=False, explain=True).explain["weights"]
    assert weights["titles"] == PLUGIN_WEIGHT == 1.0


def test_a_retriever_cannot_surface_a_note_the_reader_may_not_read(ws: Workspace) -> None:
    raw = TitleRetriever(every_note(ws))
    request = RetrievalRequest("anemometer", 10, Filters(), view=None, generation=None)
    assert raw.retrieve(request), "the retriever does find the denied note"
    ws.add_retriever(raw)
    selection = ws.select("anemometer zephyr", use_vectors=False)
    assert [c.path for c in selection.candidates] == ["Zephyr.md"]
    assert selection.diagnostics["titles_hits"] == 1  # the denied note's hit was dropped


def test_a_retriever_of_other_kinds_is_not_asked_when_filters_name_kinds(ws: Workspace) -> None:
    """A note hit becomes the note's best blocks: a retriever of block candidates."""
    ws.add_retriever(TitleRetriever(), kinds=("block",))
    assert ws.select("zephyr", use_vectors=False, filters={"kinds": ["block"]}).candidates
    skipped = ws.select("zephyr", use_vectors=False, filters={"kinds": ["memory"]})
    assert skipped.diagnostics["titles_hits"] == 0


def test_a_retriever_cannot_take_a_built_in_name(ws: Workspace) -> None:
    class Lexical(TitleRetriever):
        name = "lexical"

    with pytest.raises(ConfigError, match="built in"):
        ws.add_retriever(Lexical())
