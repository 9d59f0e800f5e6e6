"""What select and memory share when they search two ways at once (`search.hybrid`), and the
bm25 runner both use (`storage.lexical.run_bm25`), on a real FTS5 table."""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vaultctx.errors import EmbeddingUnavailable
from vaultctx.search.hybrid import (
    HYBRID,
    after_embed_error,
    from_median,
    meanwhile,
    model_failure,
    share_of_best,
)
from vaultctx.search.query import QueryTokenizer, build_query
from vaultctx.storage.lexical import FTS_TOKENIZER, FtsTerms, run_bm25


def test_the_embedding_runs_while_the_caller_searches():
    started, release = threading.Event(), threading.Event()

    def embed(text: str) -> str:
        started.set()
        release.wait(5)
        return text.upper()

    with ThreadPoolExecutor(1) as pool:
        result = meanwhile(pool, embed, "bees")
        assert started.wait(5)  # already running before anyone asks for it
        release.set()
        assert result() == "BEES"


def test_without_a_pool_the_embedding_waits_until_it_is_asked_for():
    calls = []
    result = meanwhile(None, lambda text: calls.append(text) or len(text), "hive")
    assert calls == []
    assert result() == 4 and calls == ["hive"]


def test_a_broken_model_is_one_line_and_the_path_says_so():
    assert model_failure(RuntimeError("CUDA is not here")) == "RuntimeError: CUDA is not here"
    assert model_failure(EmbeddingUnavailable("no model at ./m")) == "no model at ./m"
    assert after_embed_error("token_recall") == "token_recall_after_embed_error"
    assert after_embed_error(HYBRID) != HYBRID


@given(st.floats(-10, 10), st.floats(-10, 10))
def test_a_share_of_the_best_is_never_negative_and_the_best_is_whole(score, best):
    share = share_of_best(score, best)
    assert share >= 0
    if best > 0:
        assert share_of_best(best, best) == 1.0
    else:
        assert share == 0.0


def test_a_cosine_read_from_the_median_note_is_how_far_it_stands_out_of_the_vault():
    """e5's cosines: every passage near 0.8, the answer a little above; read from the
    median note's (0.8) the answer stands out and a note below the median counts nothing."""
    assert from_median(0.9, 0.8) == pytest.approx(0.5)
    assert from_median(0.78, 0.8) == 0.0
    assert from_median(1.0, 0.8) == pytest.approx(1.0)
    scores = np.array([0.9, 0.8, 0.7, -np.inf], dtype=np.float32)
    read = from_median(scores, 0.8)
    assert read.dtype == np.float32
    assert read[:3].tolist() == pytest.approx([0.5, 0.0, 0.0])
    assert read[3] == -np.inf  # a masked note stays out of every list


@given(
    st.lists(st.floats(-1, 1, width=32), min_size=1, max_size=20),
    st.floats(-1, 0.999),
)
def test_reading_from_the_median_keeps_the_order_and_stays_in_zero_one(cosines, median):
    read = [from_median(c, median) for c in cosines]
    assert all(0.0 <= r <= 1.0 + 1e-9 for r in read)
    in_order = [r for _, r in sorted(zip(cosines, read, strict=True))]
    assert in_order == sorted(in_order)  # never reorders two cosines
    assert from_median(median, median) == 0.0
    array = from_median(np.asarray(cosines, dtype=np.float32), median)
    # float32 arithmetic: the median rounds to float32 (~6e-8), stretched by 1 / (1 - median)
    assert array.tolist() == pytest.approx(read, abs=1e-6 + 1e-7 / (1 - median))


@pytest.fixture
def notes_fts():
    conn = sqlite3.connect(":memory:")
    conn.execute(
        f"CREATE VIRTUAL TABLE docs_fts USING fts5(title, text, tokenize='{FTS_TOKENIZER}')"
    )
    conn.execute("CREATE TABLE docs (id INTEGER PRIMARY KEY, folder TEXT)")
    rows = [
        (1, "Queen", "the queen lays eggs in the brood frames", "bees"),
        (2, "Smoker", "light the smoker before opening the hive", "bees"),
        (3, "Queen cells", "queen cells mean the colony will swarm: queen, queen", "bees"),
        (4, "Sourdough", "feed the starter, then light the oven", "kitchen"),
    ]
    for rowid, title, text, folder in rows:
        conn.execute(
            "INSERT INTO docs_fts(rowid, title, text) VALUES (?, ?, ?)", (rowid, title, text)
        )
        conn.execute("INSERT INTO docs VALUES (?, ?)", (rowid, folder))
    yield conn
    conn.close()


def query(conn: sqlite3.Connection, text: str):
    return build_query(text, QueryTokenizer(FtsTerms(conn, "docs_fts")), 4)


def test_bm25_ranks_best_first_with_higher_scores(notes_fts):
    found = run_bm25(notes_fts, "docs_fts", query(notes_fts, "queen"), (1.0, 1.0), 10)
    assert [rowid for rowid, _ in found] == [3, 1]
    assert found[0][1] > found[1][1] > 0


def test_column_weights_decide_between_a_title_and_a_passing_mention(notes_fts):
    built = query(notes_fts, "smoker hive")
    by_title = run_bm25(notes_fts, "docs_fts", built, (10.0, 1.0), 10)
    assert by_title[0][0] == 2


def test_a_join_and_conditions_keep_only_some_rows(notes_fts):
    built = query(notes_fts, "light")
    everywhere = run_bm25(notes_fts, "docs_fts", built, (1.0, 1.0), 10)
    in_kitchen = run_bm25(
        notes_fts,
        "docs_fts",
        built,
        (1.0, 1.0),
        10,
        join="docs d ON d.id = f.rowid",
        where=["d.folder = ?"],
        args=["kitchen"],
    )
    assert sorted(r for r, _ in everywhere) == [2, 4]
    assert [r for r, _ in in_kitchen] == [4]


def test_nothing_to_match_or_no_room_runs_no_query(notes_fts):
    assert run_bm25(notes_fts, "docs_fts", query(notes_fts, "the and of"), (1.0, 1.0), 10) == []
    assert run_bm25(notes_fts, "docs_fts", query(notes_fts, "queen"), (1.0, 1.0), 0) == []
