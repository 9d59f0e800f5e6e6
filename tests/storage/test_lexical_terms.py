"""Query analysis without SQL: the cached vocabulary gives exactly FTS5's own terms."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vaultctx.storage.lexical import FtsTerms, StemCache

# Words FTS5's porter stems in ways other porter implementations do not (logi, bli, a
# doubled consonant before -ing), digits, mixed case, and ASCII punctuation between them.
TRICKY = [
    "technology", "terminologies", "possibly", "flexibly", "betrekking", "hopping",
    "Queens", "MARKED", "1990s", "v2", "x", "ab", "generalizations", "a" * 70,
]  # fmt: skip
ascii_text = st.lists(
    st.one_of(st.sampled_from(TRICKY), st.text(alphabet=st.characters(max_codepoint=127))),
    max_size=12,
).map(" ".join)
any_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@pytest.fixture(scope="module")
def conn():
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.execute("CREATE VIRTUAL TABLE blocks_fts USING fts5(title, heading_path, text)")
    yield conn
    conn.close()


def fresh_terms(conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch) -> FtsTerms:
    """FtsTerms over an empty cache of its own, so each example starts cold."""
    monkeypatch.setattr("vaultctx.storage.lexical.STEMS", StemCache())
    return FtsTerms(conn)


@settings(max_examples=300, deadline=None)
@given(first=st.one_of(ascii_text, any_text), second=st.one_of(ascii_text, any_text))
def test_stems_are_fts5s_terms_cold_and_from_the_cache(conn, first, second):
    with pytest.MonkeyPatch.context() as mp:
        terms = fresh_terms(conn, mp)
        for text in (first, second, first + " " + second, second):  # cold, then cached
            assert terms.stems(text) == terms.analyse(text)


def test_a_query_of_known_words_asks_no_sql(conn, monkeypatch):
    terms = fresh_terms(conn, monkeypatch)
    assert terms.stems("Technologies were possibly hopping") == [
        "technolog", "were", "possibl", "hop",
    ]  # fmt: skip
    asked: list[str] = []
    monkeypatch.setattr(terms, "analyse", lambda text: asked.append(text) or [])
    assert terms.stems("hopping technologies, possibly") == ["hop", "technolog", "possibl"]
    assert asked == []


def test_only_the_words_not_known_yet_go_to_fts5_in_one_call(conn, monkeypatch):
    terms = fresh_terms(conn, monkeypatch)
    terms.stems("queens marked")
    asked: list[str] = []
    analyse = terms.analyse
    monkeypatch.setattr(terms, "analyse", lambda text: asked.append(text) or analyse(text))
    assert terms.stems("Queens swarming marked hives") == ["queen", "swarm", "mark", "hive"]
    assert asked == ["swarming hives"]


def test_text_outside_ascii_is_tokenized_by_fts5(conn, monkeypatch):
    terms = fresh_terms(conn, monkeypatch)
    asked: list[str] = []
    analyse = terms.analyse
    monkeypatch.setattr(terms, "analyse", lambda text: asked.append(text) or analyse(text))
    assert terms.stems("Café Bienenstöcke") == ["cafe", "bienenstock"]
    assert asked == ["Café Bienenstöcke"]


def test_a_full_cache_starts_again_instead_of_growing(conn, monkeypatch):
    monkeypatch.setattr("vaultctx.storage.lexical.STEMS", cache := StemCache(size=3))
    terms = FtsTerms(conn)
    assert terms.stems("one two three") == ["on", "two", "three"]
    assert terms.stems("four five") == ["four", "five"]
    assert len(cache._stems) == 2
