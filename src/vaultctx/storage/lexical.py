"""SQLite FTS5 for lexical search: the tokenizer, a built query, its terms and bm25 runner.

The index's full-text table (`blocks_fts`) and memory's (`memories_fts`) both use
FTS_TOKENIZER, so the same query building (`search.query.build_query`) serves both; what it
asks of the index — a text's terms, their document frequencies — and running the built query
live here, next to the SQL.
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"

# unicode61's token characters in the ASCII range: letters and digits; every other ASCII
# character separates tokens, and only ASCII letters change case. Text outside ASCII (its
# categories, folding and diacritics) is left to FTS5 itself.
_ASCII_TOKEN = re.compile(r"[A-Za-z0-9]+")
STEM_CACHE_SIZE = 100_000
# Rows past the asked-for number that a reader who cannot see some rows has scored again:
# rescoring moves a row only as far as those rows' share of the statistics moves it.
RESCORED_MARGIN = 50


@dataclass(frozen=True)
class LexicalQuery:
    """The FTS5 query built from a user's text, and why each word was kept or dropped."""

    match: str | None
    terms: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    dropped: dict[str, str] = field(default_factory=dict)
    languages: tuple[str, ...] = ("en",)
    # Each FTS5 phrase of `match` alone (a term, a `prefix*`, a quoted phrase): bm25 sums
    # one share per phrase, which `rescore_without` recomputes.
    clauses: tuple[str, ...] = ()

    def explain(self) -> dict:
        return {
            "fts_query": self.match,
            "languages": list(self.languages),
            "terms": list(self.terms),
            "phrases": list(self.phrases),
            "prefixes": list(self.prefixes),
            "dropped": dict(self.dropped),
        }


# FTS5's bm25 (fts5_aux.c): k1, b, and the IDF of a phrase in more than half the rows.
K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6


def idf_of(rows: float, holding: int) -> float:
    """FTS5's IDF of a phrase that `holding` of `rows` rows hold."""
    return max(math.log((rows - holding + 0.5) / (holding + 0.5)), IDF_FLOOR)


def quote(text: str) -> str:
    """`text` as one FTS5 string: never read as query syntax."""
    return '"' + text.replace('"', '""') + '"'


class StemCache:
    """The porter stem of each ASCII word FTS5 has stemmed in this process (the tokenizer
    is SQLite's, the same for every connection): a query whose words are all known is
    analysed without SQL. Bounded: emptied when full, so a long-lived server stays small."""

    def __init__(self, size: int = STEM_CACHE_SIZE) -> None:
        self.size = size
        self._stems: dict[str, str] = {}
        self._lock = threading.Lock()

    def stems(self, text: str, analyse: Callable[[str], list[str]]) -> list[str] | None:
        """The index terms of ASCII `text`, asking `analyse` (FTS5) once for the words not
        known yet; None for text outside ASCII, which only FTS5 tokenizes."""
        if not text.isascii():
            return None
        words = [w.lower() for w in _ASCII_TOKEN.findall(text)]
        known = self._stems
        stems = {w: known.get(w) for w in words}  # a snapshot: another thread may clear it
        missing = [w for w, stem in stems.items() if stem is None]
        if missing:
            found = analyse(" ".join(missing))
            if len(found) != len(missing):  # not one term per word: FTS5 decides
                return None
            stems.update(zip(missing, found, strict=True))
            with self._lock:
                if len(known) + len(missing) > self.size:
                    known.clear()
                known.update(zip(missing, found, strict=True))
        return [stems[w] for w in words]  # type: ignore[misc]  # every word was stemmed above


STEMS = StemCache()


class FtsTerms:
    """Tokenizes text exactly as the index does, through a temporary in-memory FTS5 table
    with the same tokenizer, read back with fts5vocab; and counts the rows of `fts_table`
    holding a term. Per connection; costs ~50 µs. ASCII words FTS5 has stemmed before come
    from `STEMS` without SQL. Doc freqs are uncached: `search.query.QueryTokenizer` keeps
    the counts.

    `fts_table` names the FTS5 table whose document frequencies guide the query (the
    memory store passes `memories_fts`); it must use the same tokenizer."""

    def __init__(self, conn: sqlite3.Connection, fts_table: str = "blocks_fts") -> None:
        self.conn = conn
        self._vocab = "vx_vocab" if fts_table == "blocks_fts" else f"vx_vocab_{fts_table}"
        self._instances = f"{self._vocab}_i"
        tables = {
            "vx_qtok": f"fts5(x, tokenize='{FTS_TOKENIZER}')",
            "vx_qtok_v": "fts5vocab(temp, vx_qtok, instance)",
            self._vocab: f"fts5vocab(main, {fts_table}, row)",
            self._instances: f"fts5vocab(main, {fts_table}, instance)",
        }
        # Even with IF NOT EXISTS, re-running CREATE VIRTUAL TABLE costs milliseconds; the
        # temp schema says in microseconds whether this connection has them already.
        existing = {name for (name,) in conn.execute("SELECT name FROM temp.sqlite_master")}
        for name, module in tables.items():
            if name not in existing:
                conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{name} USING {module}")

    def stems(self, text: str) -> list[str]:
        """Index terms of `text` in order (one per token)."""
        found = STEMS.stems(text, self.analyse)
        return found if found is not None else self.analyse(text)

    def analyse(self, text: str) -> list[str]:
        """Index terms of `text` in order, as FTS5 itself makes them."""
        self.conn.execute("DELETE FROM temp.vx_qtok")
        self.conn.execute("INSERT INTO temp.vx_qtok(x) VALUES (?)", (text,))
        rows = self.conn.execute("SELECT term, offset FROM temp.vx_qtok_v ORDER BY offset")
        return [term for term, _ in rows]

    def doc_freqs(self, terms: Sequence[str]) -> dict[str, int]:
        """Rows containing each term; a term no row holds is left out. fts5vocab counts by
        reading the term's whole doclist (milliseconds for a common term in 100k blocks)."""
        if not terms:
            return {}
        marks = ",".join("?" * len(terms))
        rows = self.conn.execute(
            f"SELECT term, doc FROM temp.{self._vocab} WHERE term IN ({marks})", list(terms)
        )
        return dict(rows.fetchall())

    def doc_freqs_among(
        self, terms: Sequence[str], rows_sql: str, args: Sequence[object] = ()
    ) -> dict[str, int]:
        """Rows containing each term among the rows `rows_sql` (a SELECT of rowids, with
        `args` for its parameters) selects: what a set of hidden notes adds to `doc_freqs`,
        or what a reader's rows hold. A term none of them holds is left out."""
        if not terms:
            return {}
        marks = ",".join("?" * len(terms))
        rows = self.conn.execute(
            f"SELECT term, count(DISTINCT doc) FROM temp.{self._instances}"
            f" WHERE term IN ({marks}) AND doc IN ({rows_sql}) GROUP BY term",
            [*terms, *args],
        )
        return dict(rows.fetchall())


def run_bm25(
    conn: sqlite3.Connection,
    table: str,
    query: LexicalQuery,
    weights: Sequence[float],
    limit: int,
    *,
    join: str | None = None,
    where: Sequence[str] = (),
    args: Sequence[object] = (),
) -> list[tuple[int, float]]:
    """Run a built query over the FTS5 `table`: (rowid, bm25 score, higher is better), best
    first, ties to the lower rowid. `weights` weigh the table's columns. `join` (a table and
    its ON clause, joined to the FTS5 table aliased `f`) and `where` (conditions on it, with
    `args` for their parameters) keep only some rows."""
    if query.match is None or limit <= 0:
        return []
    marks = ", ".join("?" * len(weights))
    if join is None and not where:
        sql = (
            f"SELECT rowid, bm25({table}, {marks}) AS s FROM {table}"
            f" WHERE {table} MATCH ? ORDER BY s, rowid LIMIT ?"
        )
    else:
        sql = (
            f"SELECT f.rowid, bm25({table}, {marks}) AS s FROM {table} f JOIN {join}"
            f" WHERE {' AND '.join([f'{table} MATCH ?', *where])} ORDER BY s, f.rowid LIMIT ?"
        )
    rows = conn.execute(sql, (*weights, query.match, *args, limit)).fetchall()
    return [(rowid, -score) for rowid, score in rows]


def _varints(blob: bytes) -> list[int]:
    """The SQLite varints of an FTS5 record (big-endian, 7 bits a byte, a ninth byte of 8)."""
    values, value, length = [], 0, 0
    for byte in blob:
        length += 1
        if length == 9:
            values.append((value << 8) | byte)
            value, length = 0, 0
        elif byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            values.append((value << 7) | byte)
            value, length = 0, 0
    return values


@dataclass(frozen=True)
class RowStats:
    """Rows of an FTS5 table and their tokens, all columns together: bm25's N and avgdl."""

    rows: int
    tokens: int


@dataclass(frozen=True)
class AbsentRows:
    """Rows a reader cannot see and their tokens, all columns together: named by their
    rowids (`ids`, `tokens` theirs) or, where the reader sees fewer rows than it cannot,
    by the rows it sees (`seen_named`: `ids` and `tokens` are those)."""

    ids: frozenset[int]
    tokens: int
    seen_named: bool = False

    def seen(self, whole: RowStats) -> RowStats:
        """The rows the reader sees of a table whose rows are `whole`, and their tokens."""
        if self.seen_named:
            return RowStats(len(self.ids), self.tokens)
        return RowStats(whole.rows - len(self.ids), whole.tokens - self.tokens)

    def seen_among(self, rowids: Sequence[int]) -> int:
        """How many of `rowids` the reader sees."""
        named = sum(1 for rowid in rowids if rowid in self.ids)
        return named if self.seen_named else len(rowids) - named


def table_stats(conn: sqlite3.Connection, table: str) -> RowStats:
    """The whole table's, from FTS5's own averages record (`_data` row 1)."""
    found = conn.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()
    counts = _varints(found[0]) if found else []
    return RowStats(counts[0], sum(counts[1:])) if counts else RowStats(0, 0)


def row_sizes(
    conn: sqlite3.Connection, table: str, rows_sql: str, args: Sequence[object] = ()
) -> dict[int, int]:
    """{rowid: tokens, all columns} of the rows `rows_sql` (a SELECT of rowids, or a list
    of `?` for `args`) names, from FTS5's `_docsize`."""
    found = conn.execute(f"SELECT id, sz FROM {table}_docsize WHERE id IN ({rows_sql})", args)
    # A record whose bytes are all below 0x80 is one-byte varints: its sum, without decoding.
    return {rowid: sum(size) if size.isascii() else sum(_varints(size)) for rowid, size in found}


def absent_rows(
    conn: sqlite3.Connection,
    table: str,
    rows_sql: str,
    args: Sequence[object] = (),
    *,
    seen_named: bool = False,
) -> AbsentRows:
    """The rows `rows_sql` (a SELECT of rowids, with `args`) selects, and their tokens: the
    rows a reader cannot see, or (`seen_named`) those it sees."""
    sizes = row_sizes(conn, table, rows_sql, args)
    return AbsentRows(frozenset(sizes), sum(sizes.values()), seen_named)


def _share_seen(
    share: float,
    idf_whole: float,
    idf_seen: float,
    size: int,
    avgdl_whole: float,
    avgdl_seen: float,
) -> float:
    """One phrase's share of a row's bm25 score under other statistics: the share is
    idf·f(k1+1)/(f + k1(1-b+b·size/avgdl)), solved for the weighted frequency f."""
    part = share / idf_whole
    norm_whole = K1 * (1 - B + B * size / avgdl_whole)
    if part >= K1 + 1:  # a frequency past float precision: only the IDF can change
        return share * idf_seen / idf_whole
    freq = part * norm_whole / (K1 + 1 - part)
    return idf_seen * freq * (K1 + 1) / (freq + K1 * (1 - B + B * size / avgdl_seen))


def rescore_without(
    conn: sqlite3.Connection,
    table: str,
    query: LexicalQuery,
    weights: Sequence[float],
    ranked: Sequence[tuple[int, float]],
    absent: AbsentRows,
) -> list[tuple[int, float]]:
    """`ranked` (rowid, bm25 score) scored again as if the `absent` rows were not in the
    table, best first: N, avgdl and each phrase's IDF as a reader who cannot see them would
    count them. FTS5 gives each phrase's share of a row's score (one pass over the rows
    holding the phrase, which also counts them); from a share and the row's size comes the
    phrase's weighted frequency, scored again with the reader's statistics. Exact, as long as
    no row outside `ranked` would climb into it."""
    if not ranked or not query.clauses:
        return list(ranked)
    whole = table_stats(conn, table)
    seen = absent.seen(whole)
    if seen.rows <= 0:
        return []
    avgdl_whole = whole.tokens / whole.rows
    avgdl_seen = seen.tokens / seen.rows
    ids = [rowid for rowid, _ in ranked]
    sizes = row_sizes(conn, table, ",".join("?" * len(ids)), ids)
    weight_marks = ", ".join("?" * len(weights))
    scores = dict.fromkeys(ids, 0.0)
    for clause in query.clauses:
        # Every row holding the phrase: a `rowid IN` here would make FTS5 count the
        # phrase's rows again for each one.
        shares = conn.execute(
            f"SELECT rowid, -bm25({table}, {weight_marks}) FROM {table} WHERE {table} MATCH ?",
            (*weights, clause),
        ).fetchall()
        if not shares:
            continue
        idf_whole = idf_of(whole.rows, len(shares))
        idf_seen = idf_of(seen.rows, absent.seen_among([rowid for rowid, _ in shares]))
        for rowid, share in shares:
            if rowid in scores:
                scores[rowid] += _share_seen(
                    share, idf_whole, idf_seen, sizes.get(rowid, 0), avgdl_whole, avgdl_seen
                )
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def bm25_seen(
    conn: sqlite3.Connection,
    table: str,
    query: LexicalQuery,
    weights: Sequence[float],
    limit: int,
    absent: Callable[[], AbsentRows] | None,
    *,
    join: str | None = None,
    where: Sequence[str] = (),
    args: Sequence[object] = (),
) -> list[tuple[int, float]]:
    """`run_bm25` as a reader who cannot see some rows of `table` scores it (`absent`, asked
    only when something matched, says which): RESCORED_MARGIN more rows are ranked and
    scored again with the reader's statistics (`rescore_without`). `join` and `where` must
    leave the absent rows out. With `absent` None, `run_bm25` itself."""
    if limit <= 0:
        return []
    pool = limit if absent is None else limit + RESCORED_MARGIN
    ranked = run_bm25(conn, table, query, weights, pool, join=join, where=where, args=args)
    if absent is None or not ranked:
        return ranked
    return rescore_without(conn, table, query, weights, ranked, absent())[:limit]
