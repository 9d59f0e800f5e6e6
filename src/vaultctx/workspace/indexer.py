"""Incremental indexing: scan, parse what changed, write each note atomically, resolve links,
embed only text never embedded before.

Crash safety comes from the order of work: a note's rows are written in one transaction with
its mtime, so a killed run leaves every note either old or new, and the next run redoes
exactly what is missing (changed files by mtime/size, vectors by content hash, links by a
dirty flag written in the same transaction as the notes).
"""

from __future__ import annotations

import hashlib
import json
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .db import IndexDatabase
from .embeddings import Embedder, embed_hash
from .parser import ParsedNote, parse_note
from .scanner import VaultFile, scan_vault

Progress = Callable[[str, int, int], None]
"""progress(phase, done, total) with phase in 'scan', 'parse', 'embed'."""

_WRITE_BATCH = 200
_EMBED_BATCH = 256
_BINARY_SNIFF = 8192


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
    embed_error: str | None = None
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    elapsed_ms: float = 0.0

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
    parsed: ParsedNote
    problems: list[str]
    note_id: int | None  # existing row to replace (edit or rename)
    renamed: bool = False


def embed_input(title: str, heading_path: str, text: str) -> str:
    """The text the model embeds for a block: where it sits, then what it says.

    The note's title is included, the folder is not, so moving a note reuses its vectors.
    """
    parts = [title]
    if heading_path and heading_path.lower() != title.lower():
        parts.append(heading_path)
    if text:
        parts.append(text)
    return "\n".join(parts)


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class Indexer:
    def __init__(
        self,
        root: Path,
        db: IndexDatabase,
        *,
        chunk_tokens: int,
        embedder: Embedder | None,
        progress: Progress | None = None,
    ) -> None:
        self.root = root
        self.db = db
        self.chunk_tokens = chunk_tokens
        self.embedder = embedder
        self.progress = progress or (lambda phase, done, total: None)

    # --- the run -------------------------------------------------------------------------

    def run(self, paths: Iterable[str] | None = None) -> IndexReport:
        """Index the vault; with `paths`, only those files (as the watcher reports them)."""
        started = time.perf_counter()
        report = IndexReport()
        self._renamed_from: set[str] = set()
        self._written_ids: set[int] = set()
        relink_all = bool(self.db.get_meta("links_dirty"))  # a run was killed before relinking
        scan = scan_vault(self.root)
        report.skipped.extend(scan.problems)
        files = scan.files
        only = set(paths) if paths is not None else None
        if only is not None:
            files = [f for f in files if f.path in only]
        report.files = len(scan.files)
        self.progress("scan", len(files), len(files))

        conn = self.db.connect()
        known = {
            row[0]: (row[1], row[2], row[3], row[4])
            for row in conn.execute("SELECT path, id, mtime_ns, size, content_hash FROM notes")
        }
        on_disk = {f.path for f in scan.files}
        gone = [p for p in known if p not in on_disk and (only is None or p in only)]
        gone_by_hash: dict[str, list[str]] = {}
        for path in gone:
            gone_by_hash.setdefault(known[path][3], []).append(path)

        pending: list[_Pending] = []
        touched: list[tuple[int, int, int]] = []  # (id, mtime_ns, size): same bytes, new mtime
        writer = _BatchWriter(self._write, report)
        try:
            for done, vf in enumerate(files, start=1):
                previous = known.get(vf.path)
                if previous and previous[1] == vf.mtime_ns and previous[2] == vf.size:
                    report.unchanged += 1
                else:
                    item = self._read(vf, previous, gone_by_hash, known, report)
                    if item == "unchanged":
                        report.unchanged += 1
                        assert previous is not None
                        touched.append((previous[0], vf.mtime_ns, vf.size))
                    elif isinstance(item, _Pending):
                        pending.append(item)
                if len(pending) >= _WRITE_BATCH:
                    writer.submit(pending, touched, [])
                    pending, touched = [], []
                if done % 50 == 0 or done == len(files):
                    self.progress("parse", done, len(files))

            deleted = [p for p in gone if p not in self._renamed_from]
            if pending or touched or deleted:
                writer.submit(pending, touched, deleted)
            relink_all |= writer.finish()
        finally:
            writer.stop()
        report.deleted = len(deleted)

        if relink_all:
            report.links_resolved = self._resolve_links(None)
        elif self._written_ids:
            report.links_resolved = self._resolve_links(self._written_ids)

        if self.embedder is not None:
            self._embed(report)
        with self.db.transaction() as wconn:
            if report.changed or report.embedded:
                generation = int(self.db.get_meta("generation", "0") or 0) + 1
                IndexDatabase.set_meta(wconn, "generation", str(generation))
            IndexDatabase.set_meta(wconn, "last_indexed", f"{time.time():.3f}")
        report.elapsed_ms = (time.perf_counter() - started) * 1000
        return report

    # --- reading -------------------------------------------------------------------------

    def _read(
        self,
        vf: VaultFile,
        previous: tuple[int, int, int, str] | None,
        gone_by_hash: dict[str, list[str]],
        known: dict[str, tuple[int, int, int, str]],
        report: IndexReport,
    ) -> _Pending | str | None:
        try:
            data = vf.abspath.read_bytes()
        except OSError as exc:
            report.skipped.append((vf.path, f"unreadable: {exc.strerror or exc}"))
            return None
        if b"\x00" in data[:_BINARY_SNIFF]:
            report.skipped.append((vf.path, "binary file, not Markdown"))
            return None
        digest = content_hash(data)
        if previous and previous[3] == digest:
            return "unchanged"
        problems: list[str] = []
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = data.decode("utf-8", errors="replace")
            problems.append(f"invalid UTF-8 at byte {exc.start}; decoded with replacement")
        text = text.removeprefix("\ufeff")
        parsed = parse_note(text, PurePosixPath(vf.path).stem, chunk_tokens=self.chunk_tokens)
        problems.extend(parsed.warnings)
        for problem in problems:
            report.warnings.append((vf.path, problem))
        note_id = previous[0] if previous else None
        renamed = False
        if note_id is None and gone_by_hash.get(digest):
            old_path = gone_by_hash[digest].pop(0)
            note_id = known[old_path][0]
            self._renamed_from.add(old_path)
            renamed = True
        return _Pending(vf, digest, parsed, problems, note_id, renamed)

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
                    conn.execute("DELETE FROM blocks WHERE note_id = ?", (row[0],))
                    conn.execute("DELETE FROM notes WHERE id = ?", (row[0],))
            conn.executemany(
                "UPDATE notes SET mtime_ns = ?, size = ? WHERE id = ?",
                [(m, s, i) for i, m, s in touched],
            )
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
                    names_changed |= old_aliases != set(item.parsed.aliases)
                note_id = self._write_note(conn, item, now)
                self._written_ids.add(note_id)
                report.blocks_written += len(item.parsed.blocks)
                if item.renamed:
                    report.renamed += 1
                elif item.note_id is None:
                    report.added += 1
                else:
                    report.updated += 1
            if pending or deleted:
                IndexDatabase.set_meta(conn, "links_dirty", "1")
        return names_changed

    def _write_note(self, conn: sqlite3.Connection, item: _Pending, now: float) -> int:
        parsed, vf = item.parsed, item.file
        values = (
            vf.path,
            parsed.title,
            vf.mtime_ns,
            vf.size,
            item.content_hash,
            json.dumps(parsed.frontmatter, ensure_ascii=False, sort_keys=True),
            json.dumps(item.problems, ensure_ascii=False),
            now,
        )
        if item.note_id is None:
            note_id = conn.execute(
                "INSERT INTO notes(path, title, mtime_ns, size, content_hash, frontmatter,"
                " problems, indexed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                values,
            ).lastrowid
            assert note_id is not None
        else:
            note_id = item.note_id
            conn.execute(
                "UPDATE notes SET path = ?, title = ?, mtime_ns = ?, size = ?, content_hash = ?,"
                " frontmatter = ?, problems = ?, indexed_at = ? WHERE id = ?",
                (*values, note_id),
            )
            for table in ("blocks", "links", "tags", "aliases"):
                column = "source_id" if table == "links" else "note_id"
                conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (note_id,))
        block_rows = []
        for block in parsed.blocks:
            heading_path = " > ".join(block.heading_path)
            block_rows.append(
                (
                    note_id,
                    block.ordinal,
                    parsed.title,
                    heading_path,
                    block.heading,
                    block.level,
                    block.text,
                    block.start_line,
                    block.end_line,
                    block.tokens,
                    " ".join(block.block_refs),
                    embed_hash(embed_input(parsed.title, heading_path, block.text)),
                )
            )
        conn.executemany(
            "INSERT INTO blocks(note_id, ordinal, title, heading_path, heading, level, text,"
            " start_line, end_line, tokens, block_refs, embed_hash)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            block_rows,
        )
        conn.executemany(
            "INSERT INTO links(source_id, block_ordinal, target, kind, heading, block_ref, alias,"
            " line) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (note_id, lk.block, lk.target, lk.kind, lk.heading, lk.block_ref, lk.alias, lk.line)
                for lk in parsed.links
            ],
        )
        conn.executemany(
            "INSERT OR IGNORE INTO tags(note_id, tag) VALUES (?, ?)",
            [(note_id, tag) for tag in parsed.tags],
        )
        conn.executemany(
            "INSERT OR IGNORE INTO aliases(note_id, alias) VALUES (?, ?)",
            [(note_id, alias) for alias in parsed.aliases],
        )
        return note_id

    # --- links ---------------------------------------------------------------------------

    def _resolve_links(self, source_ids: set[int] | None) -> int:
        """Resolve link targets the way Obsidian does; `None` means every link."""
        conn = self.db.connect()
        resolver = LinkResolver.from_db(conn)
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
        updates = []
        for link_id, target, kind, source_path, current, source_id in rows:
            resolved = resolver.resolve(target, kind, source_path, source_id)
            if resolved != current:
                updates.append((resolved, link_id))
        with self.db.transaction() as wconn:
            wconn.executemany("UPDATE links SET target_id = ? WHERE id = ?", updates)
            IndexDatabase.set_meta(wconn, "links_dirty", "")
        return len(rows)

    # --- embeddings ----------------------------------------------------------------------

    def _embed(self, report: IndexReport) -> None:
        assert self.embedder is not None
        model = self.embedder.model_id
        conn = self.db.connect()
        missing = conn.execute(
            "SELECT b.embed_hash, b.title, b.heading_path, b.text FROM blocks b"
            " WHERE NOT EXISTS (SELECT 1 FROM embeddings e"
            "   WHERE e.model = ? AND e.hash = b.embed_hash)"
            " GROUP BY b.embed_hash",
            (model,),
        ).fetchall()
        if missing:
            # Sorting by length keeps each batch's padding small: faster than random order.
            items = sorted(
                ((h, embed_input(t, hp, x)) for h, t, hp, x in missing), key=lambda i: len(i[1])
            )
            self.progress("embed", 0, len(items))
            try:
                for start in range(0, len(items), _EMBED_BATCH):
                    batch = items[start : start + _EMBED_BATCH]
                    vectors = self.embedder.encode([text for _, text in batch])
                    with self.db.transaction() as wconn:
                        wconn.executemany(
                            "INSERT OR REPLACE INTO embeddings(model, hash, vector)"
                            " VALUES (?, ?, ?)",
                            [
                                (model, h, v.tobytes())
                                for (h, _), v in zip(batch, vectors, strict=True)
                            ],
                        )
                    report.embedded += len(batch)
                    self.progress("embed", report.embedded, len(items))
            except Exception as exc:  # EmbeddingUnavailable or a model crash: text stays indexed
                report.embed_error = str(exc)
        if report.embed_error is None:
            with self.db.transaction() as wconn:
                wconn.execute(
                    "DELETE FROM embeddings WHERE model != ? OR hash NOT IN"
                    " (SELECT embed_hash FROM blocks)",
                    (model,),
                )
                IndexDatabase.set_meta(wconn, "embedding_model", model)


class _BatchWriter:
    """Writes batches in a thread of its own while the caller parses the next ones.

    SQLite (FTS5 tokenizing included) runs with the GIL released, but binding each row needs
    it back, so the overlap is small: 3–8 % faster than writing inline on 5,000 synthetic
    notes. Batches are written in order, each in one transaction.
    """

    def __init__(self, write: Callable[..., bool], report: IndexReport) -> None:
        self._write = write
        self._report = report
        self._queue: queue.Queue = queue.Queue(maxsize=2)
        self._names_changed = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._loop, name="vaultctx-index-writer", daemon=True
        )
        self._thread.start()

    def _loop(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is None:
                return
            if self._error is not None:
                continue  # drain: the caller will see the error
            try:
                self._names_changed |= self._write(*batch, self._report)
            except BaseException as exc:  # re-raised in the caller's thread by finish()
                self._error = exc

    def submit(self, pending: list, touched: list, deleted: list) -> None:
        if self._error is not None:
            self.finish()
        self._queue.put((pending, touched, deleted))

    def stop(self) -> None:
        """Let the thread end (after the batches already queued); never raises."""
        if self._thread.is_alive():
            self._queue.put(None)

    def finish(self) -> bool:
        """Wait for every batch; re-raise a write error here, in the caller's thread."""
        self.stop()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._names_changed


class LinkResolver:
    """Obsidian's rules: a path names one note; a bare name matches file names
    case-insensitively (same folder first, then the shortest path), then aliases."""

    def __init__(self, notes: list[tuple[int, str]], aliases: list[tuple[int, str]]) -> None:
        self.by_path: dict[str, int] = {}
        self.by_path_lower: dict[str, int] = {}
        self.by_stem: dict[str, list[tuple[int, str]]] = {}
        for note_id, path in notes:
            self.by_path[path] = note_id
            self.by_path_lower.setdefault(path.lower(), note_id)
            stem = PurePosixPath(path).stem.lower()
            self.by_stem.setdefault(stem, []).append((note_id, path))
        for candidates in self.by_stem.values():
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
        source_dir = str(PurePosixPath(source_path).parent)
        if kind == "markdown" or (kind == "embed" and target.lower().endswith(".md")):
            joined = _normalize(f"{source_dir}/{target}" if source_dir != "." else target)
            for candidate in (joined, _normalize(target.lstrip("/"))):
                if candidate is None:
                    continue
                found = self.by_path.get(candidate) or self.by_path_lower.get(candidate.lower())
                if found:
                    return found
            target = PurePosixPath(target).stem if "/" in target else target[:-3]
        name = target[:-3] if target.lower().endswith(".md") else target
        lower = name.lower()
        if "/" in lower:
            exact = self.by_path_lower.get(lower.lstrip("/") + ".md")
            if exact:
                return exact
            stem = lower.rsplit("/", 1)[1]
            suffix = "/" + lower.lstrip("/") + ".md"
            for note_id, path in self.by_stem.get(stem, ()):
                if path.lower().endswith(suffix):
                    return note_id
            return None
        candidates = self.by_stem.get(lower)
        if candidates:
            if len(candidates) > 1:
                for note_id, path in candidates:
                    if str(PurePosixPath(path).parent) == source_dir:
                        return note_id
            return candidates[0][0]
        return self.by_alias.get(lower)


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
