"""Incremental indexing: scan, parse what changed, write each note atomically, resolve links,
embed only text never embedded before.

Crash safety comes from the order of work: a note's rows are written in one transaction with
its mtime, so a killed run leaves every note either old or new, and the next run redoes
exactly what is missing (changed files by mtime/size, vectors by content hash, links by a
dirty flag written in the same transaction as the notes).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from .db import IndexDatabase
from .embeddings import Embedder
from .graph import LINK_CHANGES_KEY, logged_link_changes
from .language import ANALYSIS, note_language
from .links import CANVAS_LINK, INDEXED_ATTACHMENTS, is_indexed_attachment
from .migrations import CHANGES_LOGGED, UNPUBLISHED_TABLES
from .reader import NoteRead, NoteRows, ReadJob, auto_workers, embed_input, read_all
from .scanner import VaultFile, scan_paths, scan_vault
from .vector_models import (
    ANSWERING_KEY,
    NAMES_KEY,
    PENDING_KEY,
    VectorModels,
    recorded_names,
    with_name,
)

Progress = Callable[[str, int, int], None]
"""progress(phase, done, total) with phase in 'scan', 'parse', 'embed', 'reembed' (the
vectors of a model the index switches to)."""

_WRITE_BATCH = 200
_BULK_FILES = 1000  # from this many files to read, checkpoint once after text and links
_EMBED_BATCH = 256
# Meta key and value of an index whose full-text table is left empty (`Indexer`'s `fulltext`).
FULLTEXT_KEY, FULLTEXT_OFF = "fulltext", "off"
# A note's language for the full-text index: the vault's `language` setting, or its own.
_LANGUAGE = "COALESCE(:language, NULLIF(n.language, ''))"
# The full-text row of each block, analysed in its note's language (also what sync.py publishes).
FTS_VALUES = (
    f"b.id, vx_analyse(b.title, {_LANGUAGE}), vx_analyse(b.heading_path, {_LANGUAGE}),"
    f" vx_analyse(b.text, {_LANGUAGE}) FROM blocks b JOIN notes n ON n.id = b.note_id"
)


@dataclass
class IndexReport:
    """What one `index()` run did. `skipped` and `warnings` name each file and why."""

    files: int = 0
    added: int = 0
    updated: int = 0
    renamed: int = 0
    unchanged: int = 0
    deleted: int = 0
    blocks_written: int = 0
    links_resolved: int = 0
    embedded: int = 0
    # While the index switches models (`vector_models`): how many of the vectors embedded
    # are the configured model's, the blocks it still lacks after this run, and the model
    # switched to, if it did.
    reembedded: int = 0
    reembed_left: int = 0
    switched_to: str | None = None
    embed_error: str | None = None
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    elapsed_ms: float = 0.0
    # With a `database_url`: what the run published there (`postgres.sync.PublishReport`).
    published: dict[str, Any] | None = None

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.renamed or self.deleted)

    def to_dict(self) -> dict:
        data = dict(self.__dict__)
        data["skipped"] = [{"path": p, "reason": r} for p, r in self.skipped]
        data["warnings"] = [{"path": p, "message": m} for p, m in self.warnings]
        return data


@dataclass
class _Pending:
    file: VaultFile
    content_hash: str
    rows: NoteRows
    problems: tuple[str, ...]
    note_id: int | None  # existing row to replace (edit or rename)
    renamed: bool = False


class Indexer:
    def __init__(
        self,
        root: Path,
        db: IndexDatabase,
        *,
        chunk_tokens: int,
        embedder: Embedder | None,
        progress: Progress | None = None,
        workers: int | None = None,
        language: str | None = None,
        fulltext: bool = True,
        attachment_max_bytes: int | None = None,
        answering_embedder: Callable[[str], Embedder | None] | None = None,
        reembed_seconds: float | None = None,
    ) -> None:
        """`language` is the vault's `language` setting: every note is read as written in
        it; None reads each note's own. `fulltext=False` leaves the full-text table empty:
        an index published to a database (`database_url`) is read there, from postings of
        its own, so FTS5's would be work for nothing (`build_fulltext` makes it again).
        A PDF or canvas over `attachment_max_bytes` is skipped unread.

        `answering_embedder(model id)` opens the encoder of the model whose vectors answer
        when `embedder` is another: its vectors are kept whole while the configured model's
        are made, `reembed_seconds` of them per run at most (None: all of them; 0: none, as
        a run beside `Vault.switch_in_background` leaves them to it)."""
        self.root = root
        self.language = language
        self.fulltext = fulltext
        self.attachment_max_bytes = attachment_max_bytes
        self.db = db
        self.chunk_tokens = chunk_tokens
        self.embedder = embedder
        self.answering_embedder = answering_embedder
        self.reembed_seconds = reembed_seconds
        self.workers = auto_workers() if workers is None else workers
        self.progress = progress or (lambda phase, done, total: None)

    # --- the run -------------------------------------------------------------------------

    def run(self, paths: Iterable[str] | None = None) -> IndexReport:
        """Index the vault; with `paths`, only those files (as the watcher reports them)."""
        started = time.perf_counter()
        report = IndexReport()
        self._renamed_from: set[str] = set()
        self._written_ids: set[int] = set()
        # (note id, target, kind) → the note's link target before this run rewrote it.
        self._resolved_before: dict[tuple[int, str, str], int | None] = {}
        relink_all = bool(self.db.get_meta("links_dirty"))  # a run was killed before relinking
        only = set(paths) if paths is not None else None
        # Named paths (the watcher's) are looked at alone, under the same rules as the walk:
        # one saved note costs the same in a vault of ten notes or of a million.
        scan = scan_vault(self.root) if only is None else scan_paths(self.root, sorted(only))
        report.skipped.extend(scan.problems)
        files = scan.files
        self.progress("scan", len(files), len(files))
        analysed_again = self._analyse_index()

        conn = self.db.connect()
        known = self._known(conn, only)
        on_disk = {f.path for f in scan.files}
        gone = [p for p in known if p not in on_disk]
        if only is None:
            report.files = len(scan.files)
        else:  # the notes the vault holds after this run: those indexed, give or take these
            (indexed,) = conn.execute("SELECT COUNT(*) FROM notes").fetchone()
            report.files = indexed + len(on_disk - known.keys()) - len(gone)
        gone_by_hash: dict[str, list[str]] = {}
        for path in gone:
            gone_by_hash.setdefault(known[path][3], []).append(path)

        jobs: list[ReadJob] = []
        for vf in files:
            previous = known.get(vf.path)
            if previous and previous[1] == vf.mtime_ns and previous[2] == vf.size:
                report.unchanged += 1
            else:
                limit = self.attachment_max_bytes if is_indexed_attachment(vf.path) else None
                jobs.append(
                    ReadJob(vf.path, str(vf.abspath), previous[3] if previous else None, limit)
                )
        by_path = {vf.path: vf for vf in files}
        pending: list[_Pending] = []
        touched: list[tuple[int, int, int]] = []  # (id, mtime_ns, size): same bytes, new mtime
        names_changed = False
        reads = read_all(jobs, self.chunk_tokens, self.workers)
        bulk = len(jobs) >= _BULK_FILES
        with self.db.one_checkpoint() if bulk else contextlib.nullcontext():
            with contextlib.closing(reads):
                for done, read in enumerate(reads, start=1):
                    vf = by_path[read.path]
                    previous = known.get(vf.path)
                    if read.skipped:
                        report.skipped.append((vf.path, read.skipped))
                    elif read.unchanged:
                        assert previous is not None
                        report.unchanged += 1
                        touched.append((previous[0], vf.mtime_ns, vf.size))
                    else:
                        pending.append(
                            self._pending(vf, read, previous, gone_by_hash, known, report)
                        )
                    if len(pending) >= _WRITE_BATCH:
                        names_changed |= self._write(pending, touched, [], report)
                        pending, touched = [], []
                    if done % 50 == 0 or done == len(jobs):
                        self.progress("parse", done, len(jobs))
            deleted = [p for p in gone if p not in self._renamed_from]
            if pending or touched or deleted:
                names_changed |= self._write(pending, touched, deleted, report)
            relink_all |= names_changed
            report.deleted = len(deleted)

            if relink_all:
                report.links_resolved = self._resolve_links(None)
            elif self._written_ids:
                report.links_resolved = self._resolve_links(
                    self._written_ids, self._resolved_before
                )

        # The text index is complete and usable now, before the (long) embedding starts: a
        # run killed while embedding leaves an index that answers with the vectors it has.
        self._mark_indexed(
            changed=report.changed or analysed_again,
            links_of=None if relink_all else self._written_ids,
        )
        if self.embedder is not None:
            self._embed(report)
            # The pending model's vectors change no answer until the switch.
            if report.embedded > report.reembedded or report.switched_to:
                self._mark_indexed(changed=True, links_of=())
        report.elapsed_ms = (time.perf_counter() - started) * 1000
        return report

    @staticmethod
    def _known(
        conn: sqlite3.Connection, only: set[str] | None
    ) -> dict[str, tuple[int, int, int, str]]:
        """{path: (id, mtime_ns, size, content hash)} of the indexed notes (of `only`)."""
        sql = "SELECT path, id, mtime_ns, size, content_hash FROM notes"
        if only is None:
            return {row[0]: row[1:] for row in conn.execute(sql)}
        wanted = sorted(only)
        known = {}
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            rows = conn.execute(f"{sql} WHERE path IN ({','.join('?' * len(chunk))})", chunk)
            known.update({row[0]: row[1:] for row in rows})
        return known

    def _mark_indexed(self, *, changed: bool, links_of: Collection[int] | None) -> None:
        """Record when the index was last brought up to date, and a new generation (the
        key of every in-memory cache) when its content changed, with the notes whose links
        it rewrote (`links_of`; None: any note's, as when the set of notes changed)."""
        with self.db.transaction() as wconn:
            if changed:
                generation = str(int(self.db.get_meta("generation", "0") or 0) + 1)
                IndexDatabase.set_meta(wconn, "generation", generation)
                log = logged_link_changes(self.db.get_meta(LINK_CHANGES_KEY), generation, links_of)
                IndexDatabase.set_meta(wconn, LINK_CHANGES_KEY, log)
            IndexDatabase.set_meta(wconn, "last_indexed", f"{time.time():.3f}")

    def _analyse_index(self) -> bool:
        """Bring the index to this analysis (`language.ANALYSIS`) and language setting when
        it was built with others: every note's language is read from its indexed text (no
        file is read), then the full-text table is made again, in one transaction; and
        make or empty that table as `fulltext` asks. True when what the index answers changed."""
        analysis = f"{ANALYSIS}; language {self.language or 'per note'}"
        previous = self.db.get_meta("analysis")  # this run holds the writer lock
        built = self.db.get_meta(FULLTEXT_KEY) != FULLTEXT_OFF
        if previous == analysis and built == self.fulltext:
            return False
        with self.db.transaction() as conn:
            unread = []
            if previous != analysis:
                if previous is not None:  # read by an older detector
                    conn.execute("UPDATE notes SET language = NULL")
                unread = conn.execute(
                    "SELECT id, title, (SELECT group_concat(text, char(10)) FROM"
                    " (SELECT text FROM blocks WHERE note_id = notes.id ORDER BY ordinal))"
                    " FROM notes WHERE language IS NULL"
                ).fetchall()
                conn.executemany(
                    "UPDATE notes SET language = ? WHERE id = ?",
                    [(note_language(title, [text or ""]), i) for i, title, text in unread],
                )
                IndexDatabase.set_meta(conn, "analysis", analysis)
            if self.fulltext:
                build_fulltext(conn, self.language)
            else:
                conn.execute("INSERT INTO blocks_fts(blocks_fts) VALUES ('delete-all')")
                IndexDatabase.set_meta(conn, FULLTEXT_KEY, FULLTEXT_OFF)
        rebuilt = previous != analysis or (self.fulltext and not built)
        return rebuilt and (bool(unread) or self._has_blocks())

    def _has_blocks(self) -> bool:
        return self.db.connect().execute("SELECT 1 FROM blocks LIMIT 1").fetchone() is not None

    # --- reading -------------------------------------------------------------------------

    def _pending(
        self,
        vf: VaultFile,
        read: NoteRead,
        previous: tuple[int, int, int, str] | None,
        gone_by_hash: dict[str, list[str]],
        known: dict[str, tuple[int, int, int, str]],
        report: IndexReport,
    ) -> _Pending:
        """A parsed note ready to write; a new path with a deleted note's bytes is a rename."""
        assert read.rows is not None and read.digest is not None
        for problem in read.problems:
            report.warnings.append((vf.path, problem))
        note_id = previous[0] if previous else None
        renamed = False
        if note_id is None and gone_by_hash.get(read.digest):
            old_path = gone_by_hash[read.digest].pop(0)
            note_id = known[old_path][0]
            self._renamed_from.add(old_path)
            renamed = True
        return _Pending(vf, read.digest, read.rows, read.problems, note_id, renamed)

    # --- writing -------------------------------------------------------------------------

    def _write(
        self,
        pending: list[_Pending],
        touched: list[tuple[int, int, int]],
        deleted: list[str],
        report: IndexReport,
    ) -> bool:
        """Write a batch in one transaction; True when the set of link targets changed."""
        now = time.time()
        names_changed = bool(deleted)
        with self.db.transaction() as conn:
            for path in deleted:
                row = conn.execute("SELECT id FROM notes WHERE path = ?", (path,)).fetchone()
                if row:
                    self._delete_blocks(conn, row[0])
                    conn.execute("DELETE FROM notes WHERE id = ?", (row[0],))
            conn.executemany(
                "UPDATE notes SET mtime_ns = ?, size = ? WHERE id = ?",
                [(m, s, i) for i, m, s in touched],
            )
            # Block ids are given here, above every id in use, so the batch's blocks can be
            # added to the full-text index in one statement at the end.
            (last_block_id,) = conn.execute("SELECT COALESCE(MAX(id), 0) FROM blocks").fetchone()
            rows = _BatchRows(first_block_id=last_block_id + 1)
            for item in pending:
                if item.note_id is None or item.renamed:
                    names_changed = True
                else:
                    old_aliases = {
                        a
                        for (a,) in conn.execute(
                            "SELECT alias FROM aliases WHERE note_id = ?", (item.note_id,)
                        )
                    }
                    names_changed |= old_aliases != set(item.rows.aliases)
                note_id = self._write_note(conn, item, now)
                rows.add(note_id, item.rows)
                self._written_ids.add(note_id)
                report.blocks_written += len(item.rows.blocks)
                if item.renamed:
                    report.renamed += 1
                elif item.note_id is None:
                    report.added += 1
                else:
                    report.updated += 1
            rows.insert(conn)
            if self.fulltext:
                conn.execute(
                    "INSERT INTO blocks_fts(rowid, title, heading_path, text)"
                    f" SELECT {FTS_VALUES} WHERE b.id > :first",
                    {"language": self.language, "first": last_block_id},
                )
            if pending or deleted:
                IndexDatabase.set_meta(conn, "links_dirty", "1")
        return names_changed

    def _write_note(self, conn: sqlite3.Connection, item: _Pending, now: float) -> int:
        """Insert or update the note's own row and clear what it had; return its id."""
        values = (
            item.file.path,
            item.rows.title,
            item.file.mtime_ns,
            item.file.size,
            item.content_hash,
            item.rows.frontmatter,
            json.dumps(item.problems, ensure_ascii=False),
            now,
            item.rows.language,
        )
        if item.note_id is None:
            note_id = conn.execute(
                "INSERT INTO notes(path, title, mtime_ns, size, content_hash, frontmatter,"
                " problems, indexed_at, language) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                values,
            ).lastrowid
            assert note_id is not None
            return note_id
        # Its blocks leave the full-text index as they were analysed: in its old language.
        self._delete_blocks(conn, item.note_id)
        conn.execute(
            "UPDATE notes SET path = ?, title = ?, mtime_ns = ?, size = ?, content_hash = ?,"
            " frontmatter = ?, problems = ?, indexed_at = ?, language = ? WHERE id = ?",
            (*values, item.note_id),
        )
        if not item.renamed:  # its path is the same: a link it keeps leads where it did
            self._resolved_before.update(
                ((item.note_id, target, kind), target_id)
                for target, kind, target_id in conn.execute(
                    "SELECT target, kind, target_id FROM links WHERE source_id = ?",
                    (item.note_id,),
                )
            )
        for table in ("links", "tags", "aliases"):
            column = "source_id" if table == "links" else "note_id"
            conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (item.note_id,))
        return item.note_id

    def _delete_blocks(self, conn: sqlite3.Connection, note_id: int) -> None:
        """Remove a note's blocks and their full-text entries (blocks_fts has no triggers):
        the entries are removed by the same analysed values they were added with."""
        if self.fulltext:
            conn.execute(
                "INSERT INTO blocks_fts(blocks_fts, rowid, title, heading_path, text)"
                f" SELECT 'delete', {FTS_VALUES} WHERE b.note_id = :note",
                {"language": self.language, "note": note_id},
            )
        conn.execute("DELETE FROM blocks WHERE note_id = ?", (note_id,))

    # --- links ---------------------------------------------------------------------------

    def _resolve_links(
        self,
        source_ids: set[int] | None,
        resolved_before: dict[tuple[int, str, str], int | None] | None = None,
    ) -> int:
        """Resolve link targets the way Obsidian does; `None` means every link.

        `resolved_before` holds where the notes' links led before they were rewritten; with
        the set of note names unchanged (or every link is resolved again), a link a note
        keeps leads where it did, so a saved note whose links stayed the same needs no
        resolver (which reads every note's name: seconds at 100k notes)."""
        conn = self.db.connect()
        if source_ids is None:
            rows = conn.execute(
                "SELECT l.id, l.target, l.kind, n.path, l.target_id, n.id"
                " FROM links l JOIN notes n ON n.id = l.source_id"
            ).fetchall()
        else:
            ids = sorted(source_ids)
            rows = []
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                rows.extend(
                    conn.execute(
                        "SELECT l.id, l.target, l.kind, n.path, l.target_id, n.id"
                        " FROM links l JOIN notes n ON n.id = l.source_id"
                        f" WHERE l.source_id IN ({','.join('?' * len(chunk))})",
                        chunk,
                    ).fetchall()
                )
        before = resolved_before if source_ids is not None and resolved_before else {}
        resolver: LinkResolver | None = None
        updates = []
        for link_id, target, kind, source_path, current, source_id in rows:
            key = (source_id, target, kind)
            if key in before:
                resolved = before[key]
            else:
                resolver = resolver or LinkResolver.from_db(conn)
                resolved = resolver.resolve(target, kind, source_path, source_id)
            if resolved != current:
                updates.append((resolved, link_id))
        with self.db.transaction() as wconn:
            wconn.executemany("UPDATE links SET target_id = ? WHERE id = ?", updates)
            IndexDatabase.set_meta(wconn, "links_dirty", "")
        return len(rows)

    # --- embeddings ----------------------------------------------------------------------

    def _embed(self, report: IndexReport) -> None:
        """Vectors for every block: of the configured model, or, while the index answers
        with another (`vector_models`), first that one's for blocks new since, then the
        configured model's, and the switch once it covers every block."""
        assert self.embedder is not None
        model = self.embedder.model_id
        answering = VectorModels.of(self.db.get_meta).answering
        old = None
        if answering is not None and answering != model and self._has_vectors(answering):
            old = self.answering_embedder(answering) if self.answering_embedder else None
        if old is None:  # no vectors to keep answering with: fill in and answer as they come
            try:
                self._fill(self.embedder, "embed", report, answering=True)
            except Exception as exc:  # EmbeddingUnavailable or a model crash: text stays
                report.embed_error = str(exc)
                return
            self._switch(model)
            return
        if self.db.get_meta(PENDING_KEY) != model:
            with self.db.transaction() as wconn:
                IndexDatabase.set_meta(wconn, PENDING_KEY, model)
        # The answering set stays whole: an edited note is found by its new text. A model
        # that cannot run any more leaves its vectors serving what they cover.
        with contextlib.suppress(Exception):
            self._fill(old, "embed", report)
        if self.reembed_seconds != 0:
            try:
                self._fill(self.embedder, "reembed", report, seconds=self.reembed_seconds)
            except Exception as exc:
                report.embed_error = str(exc)
                return
        report.reembed_left = self._missing_count(model)
        if report.reembed_left == 0:
            self._switch(model)
            report.switched_to = model

    def _has_vectors(self, model: str) -> bool:
        row = (
            self.db.connect()
            .execute("SELECT 1 FROM embeddings WHERE model = ? LIMIT 1", (model,))
            .fetchone()
        )
        return row is not None

    _MISSING = (
        " FROM blocks b WHERE NOT EXISTS (SELECT 1 FROM embeddings e"
        "   WHERE e.model = ? AND e.hash = b.embed_hash)"
    )

    def _missing_count(self, model: str) -> int:
        conn = self.db.connect()
        sql = f"SELECT COUNT(DISTINCT b.embed_hash){self._MISSING}"
        (count,) = conn.execute(sql, (model,)).fetchone()
        return int(count)

    def _fill(
        self,
        embedder: Embedder,
        phase: str,
        report: IndexReport,
        *,
        answering: bool = False,
        seconds: float | None = None,
    ) -> None:
        """Embed, with `embedder`, the blocks its model has no vector for, a batch per
        transaction (a killed run keeps every batch it finished), counted in `report` (as
        `reembedded` too in the 'reembed' phase); stop after the batch that passes
        `seconds`. With `answering`, the meta names this model as the one whose vectors
        answer, with each batch."""
        model = embedder.model_id
        missing = (
            self.db.connect()
            .execute(
                f"SELECT b.embed_hash, b.title, b.heading_path, b.text{self._MISSING}"
                " GROUP BY b.embed_hash",
                (model,),
            )
            .fetchall()
        )
        if not missing:
            return
        deadline = None if seconds is None else time.monotonic() + seconds
        # Sorting by length keeps each batch's padding small: faster than random order.
        items = sorted(
            ((h, embed_input(t, hp, x)) for h, t, hp, x in missing), key=lambda i: len(i[1])
        )
        self.progress(phase, 0, len(items))
        made = 0
        for start in range(0, len(items), _EMBED_BATCH):
            batch = items[start : start + _EMBED_BATCH]
            vectors = embedder.encode([text for _, text in batch])
            with self.db.transaction() as wconn:
                wconn.executemany(
                    "INSERT OR REPLACE INTO embeddings(model, hash, vector) VALUES (?, ?, ?)",
                    [(model, h, v.tobytes()) for (h, _), v in zip(batch, vectors, strict=True)],
                )
                if made == 0:
                    names = with_name(self.db.get_meta(NAMES_KEY), embedder)
                    IndexDatabase.set_meta(wconn, NAMES_KEY, names)
                if answering:
                    # With its vectors, so `status` and select see the model of what
                    # is stored even if the run is killed before the last batch.
                    IndexDatabase.set_meta(wconn, ANSWERING_KEY, model)
            made += len(batch)
            report.embedded += len(batch)
            if phase == "reembed":
                report.reembedded += len(batch)
            self.progress(phase, made, len(items))
            if deadline is not None and time.monotonic() >= deadline:
                break

    def _switch(self, model: str) -> None:
        """`model`'s vectors answer from now on, in one transaction: the other models'
        vectors, and those of text no block holds any more, go."""
        with self.db.transaction() as wconn:
            wconn.execute(
                "DELETE FROM embeddings WHERE model != ? OR hash NOT IN"
                " (SELECT embed_hash FROM blocks)",
                (model,),
            )
            IndexDatabase.set_meta(wconn, ANSWERING_KEY, model)
            # Emptied rather than deleted: a database it is published to follows (sync.py).
            if self.db.get_meta(PENDING_KEY):
                IndexDatabase.set_meta(wconn, PENDING_KEY, "")
            names = recorded_names(self.db.get_meta(NAMES_KEY))
            if set(names) - {model}:
                kept = {model: names[model]} if model in names else {}
                IndexDatabase.set_meta(wconn, NAMES_KEY, json.dumps(kept))


class _BatchRows:
    """A batch's block, link, tag and alias rows, inserted with one statement per table."""

    def __init__(self, first_block_id: int) -> None:
        self.next_block_id = first_block_id
        self.blocks: list[tuple] = []
        self.links: list[tuple] = []
        self.tags: list[tuple[int, str]] = []
        self.aliases: list[tuple[int, str]] = []

    def add(self, note_id: int, rows: NoteRows) -> None:
        for block_id, block in enumerate(rows.blocks, start=self.next_block_id):
            self.blocks.append((block_id, note_id, *block))
        self.next_block_id += len(rows.blocks)
        self.links.extend((note_id, *link) for link in rows.links)
        self.tags.extend((note_id, tag) for tag in rows.tags)
        self.aliases.extend((note_id, alias) for alias in rows.aliases)

    def insert(self, conn: sqlite3.Connection) -> None:
        conn.executemany(
            "INSERT INTO blocks(id, note_id, ordinal, title, heading_path, heading, level, text,"
            " start_line, end_line, tokens, block_refs, embed_hash)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            self.blocks,
        )
        conn.executemany(
            "INSERT INTO links(source_id, block_ordinal, target, kind, heading, block_ref, alias,"
            " line) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            self.links,
        )
        conn.executemany("INSERT OR IGNORE INTO tags(note_id, tag) VALUES (?, ?)", self.tags)
        conn.executemany(
            "INSERT OR IGNORE INTO aliases(note_id, alias) VALUES (?, ?)", self.aliases
        )


def build_fulltext(conn: sqlite3.Connection, language: str | None) -> None:
    """Make the full-text table again from every block (`language`: the vault's setting),
    in the caller's transaction."""
    conn.execute("INSERT INTO blocks_fts(blocks_fts) VALUES ('delete-all')")
    conn.execute(
        f"INSERT INTO blocks_fts(rowid, title, heading_path, text) SELECT {FTS_VALUES}",
        {"language": language},
    )
    conn.execute("DELETE FROM meta WHERE key = ?", (FULLTEXT_KEY,))
    log_unpublished(conn, on=False)  # read here, not through a database


def log_unpublished(conn: sqlite3.Connection, *, on: bool) -> None:
    """Empty the log of the changes not published yet (`m009_unpublished_changes`) and log
    from now on (`on`: the index holds what its database does, as after a publish) or not
    (the index is read without a database: the next publish compares it whole)."""
    for table in UNPUBLISHED_TABLES:
        conn.execute(f"DELETE FROM {table}")
    if on:
        IndexDatabase.set_meta(conn, CHANGES_LOGGED, "1")
    else:
        conn.execute("DELETE FROM meta WHERE key = ?", (CHANGES_LOGGED,))


class LinkResolver:
    """Obsidian's rules: a path names one note; a bare name matches file names
    case-insensitively (same folder first, then the shortest path), then aliases. A PDF or a
    canvas is named with its extension (`paper.pdf`), a note with or without `.md`; a
    canvas's card names its file by its path from the vault's root."""

    def __init__(self, notes: list[tuple[int, str]], aliases: list[tuple[int, str]]) -> None:
        self.by_path: dict[str, int] = {}
        self.by_path_lower: dict[str, int] = {}
        self.by_stem: dict[str, list[tuple[int, str]]] = {}
        for note_id, path in notes:
            self.by_path[path] = note_id
            self.by_path_lower.setdefault(path.lower(), note_id)
            self.by_stem.setdefault(link_name(path).lower(), []).append((note_id, path))
        for candidates in self.by_stem.values():
            if len(candidates) > 1:
                candidates.sort(key=lambda c: (c[1].count("/"), len(c[1]), c[1]))
        self.by_alias: dict[str, int] = {}
        for note_id, alias in sorted(aliases):
            self.by_alias.setdefault(alias.lower(), note_id)

    @classmethod
    def from_db(cls, conn: sqlite3.Connection) -> LinkResolver:
        return cls(
            conn.execute("SELECT id, path FROM notes").fetchall(),
            conn.execute("SELECT note_id, alias FROM aliases").fetchall(),
        )

    def resolve(self, target: str, kind: str, source_path: str, source_id: int) -> int | None:
        if not target:
            return source_id
        if kind == CANVAS_LINK:  # a canvas names a file by its path from the vault's root
            path = target.lstrip("/")
            return self.by_path.get(path) or self.by_path_lower.get(path.lower())
        # A PDF or canvas is linked by its full name; only a note's `.md` may be left out.
        extension = "" if is_indexed_attachment(target) else ".md"
        source_dir = _parent(source_path)
        by_path = target.lower().endswith((".md", *INDEXED_ATTACHMENTS))
        if kind == "markdown" or (kind == "embed" and by_path):
            joined = _normalize(f"{source_dir}/{target}" if source_dir != "." else target)
            for candidate in (joined, _normalize(target.lstrip("/"))):
                if candidate is None:
                    continue
                found = self.by_path.get(candidate) or self.by_path_lower.get(candidate.lower())
                if found:
                    return found
            if extension:
                target = PurePosixPath(target).stem if "/" in target else target[:-3]
            else:
                target = PurePosixPath(target).name
        name = target[:-3] if target.lower().endswith(".md") else target
        lower = name.lower()
        if "/" in lower:
            exact = self.by_path_lower.get(lower.lstrip("/") + extension)
            if exact:
                return exact
            stem = lower.rsplit("/", 1)[1]
            suffix = "/" + lower.lstrip("/") + extension
            for note_id, path in self.by_stem.get(stem, ()):
                if path.lower().endswith(suffix):
                    return note_id
            return None
        candidates = self.by_stem.get(lower)
        if candidates:
            if len(candidates) > 1:
                for note_id, path in candidates:
                    if _parent(path) == source_dir:
                        return note_id
            return candidates[0][0]
        return None if not extension else self.by_alias.get(lower)


def link_name(path: str) -> str:
    """The name a link gives the file at `path`: a note's stem, a PDF's or canvas's whole
    file name (`[[paper]]` is never `paper.pdf`)."""
    if is_indexed_attachment(path):
        return path.rpartition("/")[2]
    return path_stem(path)


def path_stem(path: str) -> str:
    """PurePosixPath(path).stem for the index's clean relative paths, minus its cost (a
    resolver is built from every note's path, and pathlib takes seconds at 100k notes)."""
    name = path.rpartition("/")[2]
    dot = name.rfind(".")
    return name[:dot] if 0 < dot < len(name) - 1 else name


def _parent(path: str) -> str:
    """PurePosixPath(path).parent for the index's clean relative paths, minus its cost."""
    return path.rpartition("/")[0] or "."


def _normalize(path: str) -> str | None:
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts) if parts else None
