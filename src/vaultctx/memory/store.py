"""`MemoryRepository`: memories in their own SQLite file (WAL), FTS5 over them, and vectors.

Memories live beside the index but never in it: re-indexing a vault must not forget what
the user said. Vectors are float32 blobs keyed by memory, searched through a `VectorMirror`.
On a team's database, the file is this server's copy of a book every server shares
(`sharing.BookSharing`).
"""

from __future__ import annotations

import builtins
import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..search.query import MAX_TERMS, POSTINGS_BUDGET, QueryTokenizer, build_query
from ..storage.books import OWN_FILE, MemoryBook
from ..storage.db import IndexDatabase
from ..storage.lexical import AbsentRows, FtsTerms, absent_rows, bm25_seen, table_stats
from .merging import DraftMerging
from .migrations import migrate_memory
from .mirror import Scope, VectorMirror
from .models import Memory, MemoryKind, Tier
from .rows import COLUMNS, memory_from_row, scope_filter
from .sharing import BookSharing

# bm25 weights of (text, summary, themes).
FTS_WEIGHTS = (1.0, 0.5, 0.5)
_VIEWS_KEPT = 16  # readers' views (their hidden memories) whose statistics are kept


class ScoreRow(NamedTuple):
    """A memory's columns that ranking reads."""

    tier: Tier
    importance: float
    last_used: float  # formed or last accessed, whichever is later: what recency counts
    created_at: float
    speaker: str | None


@dataclass(frozen=True)
class MemoryView:
    """The memories a reader may recall (`where` on `memories`, aliased `m`, with `args`),
    whatever scopes a search asks for: their number, and the rows of `memories_fts` outside
    them (None: there are none)."""

    where: tuple[str, ...]
    args: tuple[object, ...]
    rows: int
    absent: AbsentRows | None

    @property
    def rows_sql(self) -> str:
        return "SELECT m.rowid FROM memories m WHERE " + " AND ".join(self.where)


class ViewTerms:
    """The index terms of text, and how many of a view's memories hold each (a
    `search.query.TermSource`): how a query is read counts only what the reader may recall.

    Counting within the view reads every occurrence of each term (milliseconds a query), so
    the book's own counts answer when the budget cannot bind (at most MAX_TERMS terms, within
    POSTINGS_BUDGET postings): every term held is then kept either way, and one only absent
    memories hold matches no row of the view — no recalled memory's score can differ."""

    def __init__(self, terms: FtsTerms, view: MemoryView) -> None:
        self._terms = terms
        self._view = view

    def stems(self, text: str) -> builtins.list[str]:
        return self._terms.stems(text)

    def doc_freqs(self, terms: Sequence[str]) -> dict[str, int]:
        whole = self._terms.doc_freqs(terms)
        if len(whole) <= MAX_TERMS and sum(whole.values()) <= POSTINGS_BUDGET:
            return whole
        return self._terms.doc_freqs_among(terms, self._view.rows_sql, self._view.args)


class MemoryRepository(DraftMerging, BookSharing):
    """One memory database: `memory.db` beside the index, or the account's own file — kept
    by its `book`: the file alone, or as this server's copy of a book of a team's database."""

    def __init__(
        self,
        path: Path,
        *,
        model_id: str | None = None,
        book: MemoryBook = OWN_FILE,
        local_scope: str | None = None,
        merges_stale_copy: bool = True,
    ) -> None:
        """`local_scope`: this host's workspace scope, which the book's replaces;
        `merges_stale_copy`: see `BookSharing`."""
        self.path = path
        self.model_id = model_id  # vectors of other models are ignored
        self.book = book
        self.local_scope = local_scope
        self.merges_stale_copy = merges_stale_copy
        self.db = IndexDatabase(path, migrate=migrate_memory)
        self.mirror = VectorMirror()
        self._secure = threading.local()
        self._views: dict[tuple, tuple[int, MemoryView]] = {}
        self._views_lock = threading.Lock()
        book.opened(self)

    # --- connections ---------------------------------------------------------------------

    def connect(self) -> sqlite3.Connection:
        conn = self.db.connect()
        if not getattr(self._secure, "on", False):
            # Forgotten memories are overwritten on disk, not just unlinked: privacy.
            conn.execute("PRAGMA secure_delete=ON")
            self._secure.on = True
        return conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self.book.transaction(self) as conn:
            yield conn

    def generation(self) -> int:
        return int(
            self.connect().execute("SELECT value FROM meta WHERE key='generation'").fetchone()[0]
        )

    @staticmethod
    def _bump(conn: sqlite3.Connection) -> int:
        row = conn.execute(
            "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'"
            " RETURNING value"
        ).fetchone()
        return int(row[0])

    def sync_mirror(self) -> VectorMirror:
        """Reload the mirror if another process (or a lost race) moved the generation."""
        self.refresh()
        generation = self.generation()
        mirror = self.mirror
        if mirror.generation == generation:
            return mirror
        with mirror.lock:
            if mirror.generation == generation:
                return mirror
            rows = (
                self.connect()
                .execute(
                    "SELECT m.rowid, m.tier, m.scope, m.kind, v.vector,"
                    " json_extract(m.source, '$.speaker') FROM memories m"
                    " LEFT JOIN memory_vectors v ON v.memory_rowid = m.rowid AND v.model = ?"
                    " WHERE m.deleted_at IS NULL ORDER BY m.rowid",
                    (self.model_id or "",),
                )
                .fetchall()
            )
            mirror.reset(generation)
            for rowid, tier, scope, kind, blob, speaker in rows:
                vector = None if blob is None else np.frombuffer(blob, dtype=np.float32)
                mirror.put(rowid, (Tier(tier), scope), MemoryKind(kind), vector, speaker)
        return mirror

    def _after_commit(
        self,
        generation: int,
        changes: list[tuple[int, Scope, MemoryKind, np.ndarray | None, str | None] | int],
    ) -> None:
        """Apply this process's committed write to the mirror, or mark it stale."""
        mirror = self.mirror
        with mirror.lock:
            if mirror.generation is None:
                return
            if mirror.generation != generation - 1:
                mirror.generation = -1  # someone else wrote in between: reload on next read
                return
            for change in changes:
                if isinstance(change, int):
                    mirror.drop(change)
                else:
                    mirror.put(*change)
            mirror.generation = generation

    # --- writing -------------------------------------------------------------------------

    def touch(self, ids: Sequence[str], at: float) -> None:
        """Accessing memories refreshes them: recency counts from the last access."""
        if not ids:
            return
        with self.transaction() as conn:
            conn.executemany(
                "UPDATE memories SET last_accessed = max(last_accessed, ?),"
                " access_count = access_count + 1 WHERE id = ?",
                [(at, i) for i in ids],
            )

    def derived_with(self, ids: Sequence[str]) -> list[str]:
        """`ids` and every memory derived from the same turns of the same session (its
        facts, the exchanges and the arc that hold those turns): what a turn leaves goes with
        it, or its words would stay findable."""
        if not ids:
            return []
        self.refresh()
        marks = ",".join("?" * len(ids))
        rows = self.connect().execute(
            "WITH turns(session_id, turn) AS ("
            " SELECT json_extract(m.source, '$.session_id'), t.value"
            f" FROM memories m, json_each(m.source, '$.turns') t WHERE m.id IN ({marks}))"
            " SELECT m.id FROM memories m, json_each(m.source, '$.turns') t, turns"
            " WHERE json_extract(m.source, '$.session_id') = turns.session_id"
            " AND t.value = turns.turn",
            list(ids),
        )
        return list(dict.fromkeys([*ids, *(r[0] for r in rows)]))

    def delete(self, ids: Sequence[str], *, soft: bool = False) -> int:
        """Forget memories. Hard (default): the row, its text in FTS and its vector are
        erased and the WAL truncated, for the user's privacy. Soft: hidden, restorable."""
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        with self.transaction() as conn:
            rowids = [
                r[0]
                for r in conn.execute(
                    f"SELECT rowid FROM memories WHERE id IN ({marks})", list(ids)
                )
            ]
            if soft:
                conn.execute(
                    f"UPDATE memories SET deleted_at = ? WHERE id IN ({marks})"
                    " AND deleted_at IS NULL",
                    [time.time(), *ids],
                )
            else:
                conn.execute(f"DELETE FROM memories WHERE id IN ({marks})", list(ids))
            generation = self._bump(conn)
        self._after_commit(generation, list(rowids))
        if not soft and rowids:
            self._erase_leftovers()
        return len(rowids)

    def _erase_leftovers(self) -> None:
        """After a hard delete: FTS5 keeps a deleted row's terms in old segments until they
        merge, so merge now, then copy the WAL into the (securely overwritten) file and
        truncate it."""
        self.connect()
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
        self.connect().execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # --- reading -------------------------------------------------------------------------

    def get(self, memory_id: str) -> Memory | None:
        self.refresh()
        row = (
            self.connect()
            .execute(f"SELECT {COLUMNS} FROM memories WHERE id = ?", (memory_id,))
            .fetchone()
        )
        return memory_from_row(row) if row else None

    def score_rows(self, rowids: Sequence[int]) -> dict[int, ScoreRow]:
        """What scoring needs of live memories, without building them."""
        if not rowids:
            return {}
        rows = self.connect().execute(
            "SELECT rowid, tier, importance, max(created_at, last_accessed), created_at,"
            " json_extract(source, '$.speaker') FROM memories"
            f" WHERE rowid IN ({','.join('?' * len(rowids))}) AND deleted_at IS NULL",
            list(rowids),
        )
        return {r[0]: ScoreRow(Tier(r[1]), r[2], r[3], r[4], r[5]) for r in rows}

    def latest_turns(
        self, scope: Scope, session_id: str, at: float, other_than: str | None, *, limit: int
    ) -> list[Memory]:
        """The raw-turn memories (episodic, unkeyed) of a session said last at or before `at`
        (of turns at the same time, the one written last first), other than turn
        `other_than`; newest first."""
        rows = self.connect().execute(
            f"SELECT {COLUMNS} FROM memories WHERE tier = ? AND scope = ?"
            " AND kind = 'episodic' AND created_at <= ? AND mkey IS NULL"
            " AND deleted_at IS NULL AND json_extract(source, '$.session_id') = ?"
            " AND coalesce(json_extract(source, '$.turns[0]'), '') != ?"
            " ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (scope[0].value, scope[1], at, session_id, other_than or "", limit),
        )
        return [memory_from_row(row) for row in rows]

    def by_rowids(self, rowids: Sequence[int]) -> dict[int, Memory]:
        if not rowids:
            return {}
        rows = self.connect().execute(
            f"SELECT {COLUMNS} FROM memories WHERE rowid IN ({','.join('?' * len(rowids))})"
            " AND deleted_at IS NULL",
            list(rowids),
        )
        return {row[0]: memory_from_row(row) for row in rows}

    def list(
        self,
        scopes: Sequence[Scope] | None = None,
        *,
        tier: Tier | None = None,
        kinds: Sequence[MemoryKind] = (),
        key_prefix: str | None = None,
        limit: int | None = None,
        order: str = "updated_at DESC, rowid DESC",
        include_deleted: bool = False,
    ) -> list[Memory]:
        """Memories newest first, optionally within scopes, a tier, kinds or a key prefix."""
        self.refresh()
        where, args = scope_filter(scopes, kinds)
        if tier is not None:
            where.append("tier = ?")
            args.append(tier.value)
        if key_prefix is not None:
            where.append("substr(mkey, 1, ?) = ?")
            args += [len(key_prefix), key_prefix]
        if not include_deleted:
            where.append("deleted_at IS NULL")
        sql = f"SELECT {COLUMNS} FROM memories"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {order}"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [memory_from_row(row) for row in self.connect().execute(sql, args)]

    def token_recall(
        self,
        text: str,
        scopes: Sequence[Scope],
        kinds: Sequence[MemoryKind],
        limit: int,
        *,
        window: tuple[float, float] | None = None,
        hidden: Collection[int] = (),
    ) -> builtins.list[tuple[int, float]]:
        """FTS5 bm25 over text, summary and themes, with the select stage's query building
        (stop-words dropped, every term quoted): (memory rowid, score), best first.
        `window` keeps memories formed in [start, end); `hidden` (rowids) are memories the
        reader may not see. The statistics, of the query's reading and of bm25, are those of
        the memories the reader may recall (`view`): live and not hidden, of any scope or
        kind — as if the others had never been written; the scopes and kinds filter."""
        if not scopes:
            return []
        conn = self.connect()
        view = self.view(hidden)
        terms = getattr(self._secure, "terms", None)
        if terms is None:
            terms = self._secure.terms = FtsTerms(conn, "memories_fts")
        tokenizer = QueryTokenizer(terms if view.absent is None else ViewTerms(terms, view))
        built = build_query(text, tokenizer, max(1, view.rows))
        where, args = scope_filter(scopes, kinds, prefix="m.")
        where, args = [*where, *view.where], [*args, *view.args]
        if window is not None:
            where.append("m.created_at >= ? AND m.created_at < ?")
            args += list(window)
        absent = view.absent
        return bm25_seen(
            conn,
            "memories_fts",
            built,
            FTS_WEIGHTS,
            limit,
            None if absent is None else lambda: absent,
            join="memories m ON m.rowid = f.rowid",
            where=where,
            args=args,
        )

    def view(self, hidden: Collection[int] = ()) -> MemoryView:
        """The memories a reader may recall: live, and none of `hidden` (rowids, drawn from
        notes hidden from them). Scopes and kinds are what one search asks for, as filters
        are for notes: they narrow the answer, not the statistics, so a conversation's recall
        costs no rescoring for the book's other conversations. Kept per generation and view:
        the turns of a conversation ask with the same one until a memory is written."""
        where: list[str] = ["m.deleted_at IS NULL"]
        args: list[object] = []
        if hidden:
            where.append(f"m.rowid NOT IN ({','.join('?' * len(hidden))})")
            args += sorted(hidden)
        key = (tuple(where), tuple(args))
        generation = self.generation()
        with self._views_lock:
            kept = self._views.get(key)
        if kept is not None and kept[0] == generation:
            return kept[1]
        view = self._counted(self.connect(), where, args)
        with self._views_lock:
            if len(self._views) >= _VIEWS_KEPT:
                self._views.clear()
            self._views[key] = (generation, view)
        return view

    @staticmethod
    def _counted(
        conn: sqlite3.Connection, where: Sequence[str], args: Sequence[object]
    ) -> MemoryView:
        """The view `where` selects, its rows counted, and the rows outside it named by the
        fewer of those it holds and those it does not."""
        condition = " AND ".join(where)
        (rows,) = conn.execute(
            f"SELECT count(*) FROM memories m WHERE {condition}", args
        ).fetchone()
        whole = table_stats(conn, "memories_fts").rows
        absent = None
        if rows != whole:
            seen_named = rows <= whole - rows
            test = condition if seen_named else f"NOT ({condition})"
            absent = absent_rows(
                conn,
                "memories_fts",
                f"SELECT m.rowid FROM memories m WHERE {test}",
                args,
                seen_named=seen_named,
            )
        return MemoryView(tuple(where), tuple(args), int(rows), absent)

    def note_sources(self) -> builtins.list[tuple[int, str, builtins.list[str]]]:
        """(rowid, id, note paths) of every live memory that came from notes: what a read
        policy hides along with the notes."""
        self.refresh()  # a team's book: what other servers wrote, before it is judged
        rows = self.connect().execute(
            "SELECT rowid, id, json_extract(source, '$.paths') FROM memories"
            " WHERE deleted_at IS NULL AND json_array_length(source, '$.paths') > 0"
        )
        return [(rowid, memory_id, json.loads(paths)) for rowid, memory_id, paths in rows]

    def count(self) -> int:
        self.refresh()
        return int(
            self.connect()
            .execute("SELECT count(*) FROM memories WHERE deleted_at IS NULL")
            .fetchone()[0]
        )

    def close(self) -> None:
        self.db.close()
        self._secure = threading.local()
