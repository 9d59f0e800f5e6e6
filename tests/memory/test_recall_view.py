"""Token recall counts what the reader may recall: a book's forgotten memories and those
drawn from notes hidden from the reader move no score and no rank — the answer is, score for
score, that of a book that never held them. The scopes and kinds a search asks for are its
filters, as a path or a tag is for notes: the book's other conversations still count, as they
do for a reader who asks for them. On a memory file of its own, and on a server's copy of a
team's book in PostgreSQL."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vaultctx.memory import store as store_module
from vaultctx.memory.merging import MemoryDraft
from vaultctx.memory.models import MemoryKind, MemorySource, Tier
from vaultctx.memory.store import MemoryRepository
from vaultctx.search import query as query_module
from vaultctx.search.query import QueryTokenizer, build_query
from vaultctx.storage.lexical import FtsTerms
from vaultctx.storage.postgres.memory_book import MemoryBook
from vaultctx.storage.postgres.reads import PostgresReads

WORDS = (
    "hive queen honey swarm mite frame smoke brood comb wax nectar pollen orchard super"
    " varroa drone cell winter feeding inspection apiary colony larva royal jelly"
).split()
HOME = (Tier.WORKSPACE, "/vault")
GARDEN = (Tier.CHANNEL, "garden")
T0 = 1_700_000_000.0
QUERIES = ("queen honey hive", "smoke the frames", '"queen cell" swarm', "varr* winter", "wax")

# What one book holds, in the order written: (label, scope, kind, text). Labels say what a
# reader searching HOME gets: "seen"; "garden", of another scope (filtered out, counted);
# or why the reader may not recall it at all (drawn from a hidden note, forgotten).
Entry = tuple[str, tuple[Tier, str], MemoryKind, str]
ABSENT = ("hidden", "forgotten")
COUNTED = ("seen", "garden")


def book_entries(absent: tuple[str, ...] = ABSENT) -> list[Entry]:
    """Memories of varied lengths and words: those seen, and those of the `absent` labels.
    The absent ones hold the queries' words too, so counting them would move every score."""
    pick = random.Random(42)
    entries: list[Entry] = []
    for i in range(60):
        words = pick.choices(WORDS, k=pick.randint(3, 30))
        if i % 7 == 0:
            words += ["queen", "cell"]
        label = pick.choice(["seen"] * 6 + ["hidden", "garden", "forgotten"])
        scope = GARDEN if label == "garden" else HOME
        kind = MemoryKind.EPISODIC if i % 3 == 0 else MemoryKind.SEMANTIC
        if label in COUNTED or label in absent:
            entries.append((label, scope, kind, " ".join(words) + f" note{i}"))
    return entries


def draft(number: int, entry: Entry) -> MemoryDraft:
    label, scope, kind, text = entry
    words = text.split()
    return MemoryDraft(
        tier=scope[0],
        scope=scope[1],
        kind=kind,
        text=text,
        summary=" ".join(words[:4]),
        themes=tuple(words[-2:]),
        importance=0.5,
        created_at=T0 + 3600 * number,
        source=MemorySource(paths=("Private/x.md",) if label == "hidden" else ()),
    )


def write(repo: MemoryRepository, entries: list[Entry]) -> dict[str, str]:
    """Save `entries` in order (forgetting the forgotten, softly); {id: label}."""
    saved = repo.save([(draft(n, entry), None) for n, entry in enumerate(entries)], merge=False)
    labels = {r.memory.id: label for r, (label, *_) in zip(saved, entries, strict=True)}
    repo.delete([i for i, label in labels.items() if label == "forgotten"], soft=True)
    return labels


def recalled(repo: MemoryRepository, query: str, **options) -> list[tuple[str, float]]:
    """(text, score) of token recall over HOME, best first."""
    options.setdefault("kinds", list(MemoryKind))
    found = repo.token_recall(query, [HOME], limit=20, **options)
    texts = {rowid: m.text for rowid, m in repo.by_rowids([r for r, _ in found]).items()}
    return [(texts[rowid], score) for rowid, score in found]


def hidden_rows(repo: MemoryRepository, labels: dict[str, str]) -> set[int]:
    ids = [i for i, label in labels.items() if label == "hidden"]
    marks = ",".join("?" * len(ids))
    rows = repo.connect().execute(f"SELECT rowid FROM memories WHERE id IN ({marks})", ids)
    return {rowid for (rowid,) in rows}


@pytest.fixture(params=["sqlite", "postgres"])
def book(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., tuple]]:
    """Makes a book holding `book_entries(absent)`, as the reader's copy: the memory file
    itself, or a second server's copy of a team's book one server wrote; (copy, labels)."""
    opened: list[MemoryRepository] = []
    reads: list[PostgresReads] = []
    if request.param == "postgres":
        reads.append(PostgresReads(request.getfixturevalue("postgres_url")))

    def make(absent: tuple[str, ...] = ABSENT) -> tuple[MemoryRepository, dict[str, str]]:
        if not reads:
            repo = MemoryRepository(tmp_path / "book.db")
            opened.append(repo)
            return repo, write(repo, book_entries(absent))
        writer, reader = (
            MemoryRepository(tmp_path / name, book=MemoryBook(reads[0], "vault", "/vault"))
            for name in ("writer.db", "reader.db")
        )
        opened.extend([writer, reader])
        labels = write(writer, book_entries(absent))
        reader.refresh()
        return reader, labels

    yield make
    for repo in opened:
        repo.close()
    for each in reads:
        each.close()


def oracle(tmp_path: Path, keep: Callable[[Entry], bool]) -> MemoryRepository:
    """A book that only ever held the entries `keep` keeps, written in the same order (each
    with its own time)."""
    repo = MemoryRepository(tmp_path / "oracle.db")
    entries = book_entries()
    drafts = [(draft(n, entry), None) for n, entry in enumerate(entries) if keep(entry)]
    repo.save(drafts, merge=False)
    return repo


@pytest.mark.parametrize("absent", [(label,) for label in ABSENT] + [ABSENT], ids=[*ABSENT, "all"])
def test_a_reader_s_recall_is_a_book_s_without_the_memories_absent_for_them(book, tmp_path, absent):
    """Memories drawn from hidden notes, forgotten: rows, lengths and each word's rarity are
    those of a book that never held them (and did hold the other scope's)."""
    repo, labels = book(absent)
    want_repo = oracle(tmp_path, lambda entry: entry[0] in COUNTED)
    for query in QUERIES:
        got = recalled(repo, query, hidden=hidden_rows(repo, labels))
        want = recalled(want_repo, query)
        assert got, query
        assert [text for text, _ in got] == [text for text, _ in want], query
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9, abs=0)
    want_repo.close()


def test_the_kinds_and_the_window_asked_filter_and_count_as_the_whole_view(book, tmp_path):
    repo, labels = book()
    facts = [MemoryKind.SEMANTIC]
    want_repo = oracle(tmp_path, lambda entry: entry[0] in COUNTED)
    window = (T0 + 3600 * 10, T0 + 3600 * 40)
    for query in QUERIES:
        for options in ({}, {"window": window}):
            got = recalled(repo, query, kinds=facts, hidden=hidden_rows(repo, labels), **options)
            want = recalled(want_repo, query, kinds=facts, **options)
            assert [text for text, _ in got] == [text for text, _ in want]
            assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9, abs=0)
    want_repo.close()


def test_with_nothing_absent_recall_is_the_full_text_index_s_own(tmp_path):
    """A reader who may recall every memory of the book gets FTS5's bm25 itself, unscored
    again — also when the search asks for one scope of several."""
    repo = MemoryRepository(tmp_path / "book.db")
    entries = [e for e in book_entries() if e[0] in COUNTED]
    write(repo, entries)
    view = repo.view()
    assert view.absent is None and view.rows == len(entries)
    conn = repo.connect()
    home = {
        rowid for (rowid,) in conn.execute("SELECT rowid FROM memories WHERE scope = ?", (HOME[1],))
    }
    for query in QUERIES:
        built = build_query(query, QueryTokenizer(FtsTerms(conn, "memories_fts")), len(entries))
        plain = conn.execute(
            "SELECT rowid, bm25(memories_fts, 1.0, 0.5, 0.5) AS s FROM memories_fts"
            " WHERE memories_fts MATCH ? ORDER BY s, rowid",
            (built.match,),
        ).fetchall()
        found = repo.token_recall(query, [HOME], list(MemoryKind), 20)
        assert found == [(rowid, -score) for rowid, score in plain if rowid in home][:20]
    repo.close()


def test_a_query_past_the_postings_budget_is_read_within_the_view(book, tmp_path, monkeypatch):
    """Where the budget drops common words, their commonness is counted among the memories
    the reader may recall, as a book without the others counts it."""
    monkeypatch.setattr(query_module, "POSTINGS_BUDGET", 20)
    monkeypatch.setattr(store_module, "POSTINGS_BUDGET", 20)
    repo, labels = book()
    want_repo = oracle(tmp_path, lambda entry: entry[0] in COUNTED)
    for query in QUERIES:
        got = recalled(repo, query, hidden=hidden_rows(repo, labels))
        want = recalled(want_repo, query)
        assert [text for text, _ in got] == [text for text, _ in want], query
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9, abs=0)
    want_repo.close()
