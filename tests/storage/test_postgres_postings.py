"""The posting lists a publish writes to PostgreSQL count every term as FTS5 itself does:
the analyser cuts text into pieces and lets FTS5 tokenize each new piece, so any text,
in any script, gives FTS5's terms, counts and positions."""

from __future__ import annotations

import sqlite3

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vaultctx.storage.lexical import FTS_TOKENIZER
from vaultctx.storage.postgres.postings import (
    PLACE_BITS,
    POSITION_STRIDE,
    Analyser,
    dead_key,
    read_postings,
)

WORDS = ["Varroa", "mites", "running", "naïve", "Æsir", "東京都", "x86_64", "v1.2", "l'été"]
cells = st.one_of(
    st.none(),
    st.lists(st.one_of(st.sampled_from(WORDS), st.text(max_size=12)), max_size=12).map(
        lambda parts: " ".join(parts)
    ),
    st.text(max_size=40),
)
rows_strategy = st.lists(st.tuples(cells, cells, cells), min_size=1, max_size=6)


def fts5_counts(rows):
    """{(term, row index): (counts per column, positions)} from an FTS5 table."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(a, b, c, tokenize='{FTS_TOKENIZER}')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
    conn.executemany("INSERT INTO t(rowid, a, b, c) VALUES (?, ?, ?, ?)",
                     [(i, *cells) for i, cells in enumerate(rows)])  # fmt: skip
    found: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
    for term, doc, column, offset in conn.execute("SELECT term, doc, col, offset FROM v"):
        counts, positions = found.setdefault((term, doc), ([0, 0, 0], []))
        k = "abc".index(column)
        counts[k] += 1
        positions.append(k * POSITION_STRIDE + offset)
    return {key: (tuple(c), sorted(p)) for key, (c, p) in found.items()}


def analysed_counts(analyser: Analyser, rows):
    segment = analyser.analyse([(i, *cells) for i, cells in enumerate(rows)],
                               {i: 100 + i for i in range(len(rows))})  # fmt: skip
    data = segment.copy_data(7)
    rows_back = []  # parse the COPY stream back: it is what the database reads
    at = 19
    while data[at : at + 2] != b"\xff\xff":
        fields = []
        at += 2
        for _ in range(4):
            size = int.from_bytes(data[at : at + 4], "big", signed=True)
            fields.append(data[at + 4 : at + 4 + size])
            at += 4 + size
        rows_back.append((fields[0].decode(), int.from_bytes(fields[1], "big"), *fields[2:]))
    assert len(rows_back) == len(segment.terms)
    found = {}
    for term, postings in read_postings(rows_back).items():
        for i, block in enumerate(postings.block.tolist()):
            assert postings.note[i] == 100 + block
            assert postings.ntok[i] == segment.ntok[block]
            mine = postings.places[(postings.places >> PLACE_BITS) == block]
            found[term, block] = (
                tuple(postings.tf[i].tolist()),
                sorted((mine & ((1 << PLACE_BITS) - 1)).tolist()),
            )
    return found, segment


@settings(max_examples=200, deadline=None)
@given(batches=st.lists(rows_strategy, min_size=1, max_size=3))
def test_any_text_is_counted_as_fts5_counts_it(batches):
    """One analyser over several batches (its pieces remembered between them)."""
    analyser = Analyser(sqlite3.connect(":memory:"))
    for rows in batches:
        found, segment = analysed_counts(analyser, rows)
        assert found == fts5_counts(rows)
        tokens = {i: 0 for i in range(len(rows))}
        for (_, block), (counts, _) in found.items():
            tokens[block] += sum(counts)
        assert segment.ntok == tokens
        assert sum(segment.holding().values()) == segment.count == len(found)


def test_every_ascii_character_splits_or_joins_as_fts5_s_tokenizer_does():
    rows = [(f"ab{chr(c)}cd", None, f"x{chr(c)}{chr(c)}y z") for c in range(128)]
    found, _ = analysed_counts(Analyser(sqlite3.connect(":memory:")), rows)
    assert found == fts5_counts(rows)


def test_the_blocks_of_some_notes_are_counted_apart():
    analyser = Analyser(sqlite3.connect(":memory:"))
    segment = analyser.analyse(
        [(1, "Bees", None, "bees and mites"), (2, None, None, "mites"), (3, "bees", "", ""),
         (4, "Mites", None, None)],
        {1: 10, 2: 20, 3: 30, 4: 30},
    )  # fmt: skip
    assert segment.holding() == {"bee": 2, "mite": 3, "and": 1}
    assert segment.holding([20, 30]) == {"bee": 1, "mite": 2}
    assert segment.holding([]) == {}
    empty = analyser.analyse([(5, "", None, "— !?")], {5: 50})
    assert empty.count == 0 and empty.holding() == {} and empty.holding([50]) == {}
    assert empty.ntok == {5: 0} and empty.copy_data(1).endswith(b"\xff\xff")


def test_dead_notes_postings_are_left_out_as_they_are_read():
    analyser = Analyser(sqlite3.connect(":memory:"))
    rows = []
    for segment, blocks in ((1, [(1, 10), (2, 20)]), (2, [(3, 10)])):
        analysed = analyser.analyse([(b, None, None, "bees") for b, _ in blocks], dict(blocks))
        records = analysed.records.tobytes()
        rows.append(("bee", segment, records, analysed.positions.tobytes()))
    live = read_postings(rows, tombstones((1, 10)))["bee"]
    assert live.block.tolist() == [2, 3] and live.note.tolist() == [20, 10]
    assert (live.places >> PLACE_BITS).tolist() == [2, 3]
    assert read_postings(rows)["bee"].block.tolist() == [1, 2, 3]
    assert read_postings(rows, tombstones((2, 20), (3, 10)))["bee"].block.tolist() == [1, 2, 3]
    gone = read_postings(rows, tombstones((1, 10), (1, 20), (2, 10)))["bee"]
    assert np.array_equal(gone.block, [])


def tombstones(*dead: tuple[int, int]) -> bytes:
    """Tombstones as the database reads them (`DEAD_KEYS`)."""
    return np.array(sorted(dead_key(s, n) for s, n in dead), dtype=">i8").tobytes()
