"""Reading changed notes off disk: bytes, hash, decoding, parsing.

Parsing is pure Python and holds the GIL, so a big index run parses in worker processes
while this one writes to SQLite. A worker is a fresh Python running `serve()`, fed pickled
chunks of files on stdin and answering on stdout (see `vaultctx.childproc` for why not
multiprocessing). Small runs (the watcher, an edit) read in this process: starting a worker
costs more than they do. This module imports little, so a worker starts fast.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..childproc import child_command, python_can_start, receive, send
from .canvas import parse_canvas
from .language import note_language
from .notefile import CANVAS, PDF, file_kind
from .parser import ParsedNote, parse_note
from .pdf import PdfReader, pdf_blocks

PARALLEL_MIN_FILES = 400
"""Below this many files to read, a worker process would cost more than it saves."""
MAX_AUTO_WORKERS = 3
_CHUNK_FILES = 48  # files per message: amortizes pickling, keeps results flowing
_CHUNKS_AHEAD = 8  # answers held per worker: bounds memory when SQLite is the slow side
_BINARY_SNIFF = 8192


@dataclass(frozen=True)
class ReadJob:
    path: str  # POSIX path relative to the vault
    abspath: str
    previous_hash: str | None  # the indexed version's hash: same bytes are not parsed again
    max_bytes: int | None = None  # a larger file is skipped (config `attachment_max_mb`)


@dataclass(frozen=True)
class NoteRows:
    """A parsed note as rows for the index's tables, less the ids the writer gives.

    Built where the note is parsed, so a worker process does this work too: plain tuples
    also cross the pipe faster than parser objects.
    """

    title: str
    frontmatter: str  # JSON
    # The first block's title also holds the note's aliases (`searched_names`).
    blocks: list[tuple]  # blocks(ordinal, title, heading_path, heading, level, text,
    #                      start_line, end_line, tokens, block_refs, embed_hash)
    links: list[tuple]  # links(block_ordinal, target, kind, heading, block_ref, alias, line)
    tags: tuple[str, ...]
    aliases: tuple[str, ...]
    language: str  # '' when it cannot be told (`language.note_language`)


@dataclass(frozen=True)
class NoteRead:
    """What reading one file gave: skipped (with why), unchanged, or parsed into rows."""

    path: str
    digest: str | None = None
    rows: NoteRows | None = None
    problems: tuple[str, ...] = ()
    skipped: str | None = None

    @property
    def unchanged(self) -> bool:
        return self.skipped is None and self.rows is None


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def searched_names(title: str, aliases: Sequence[str]) -> str:
    """The title a note's first block is searched and embedded by: the note's title, then,
    on a line of their own, its other names (its aliases). An alias is a name the user
    looks the note up by; said once at the note's start, as the title is, and not on every
    block, which would make each passage of a long note match it."""
    others = [alias for alias in aliases if alias.lower() != title.lower()]
    return f"{title}\n{', '.join(others)}" if others else title


def section_path(title: str, heading_path: str) -> str:
    """A block's heading path less an opening H1 that repeats the note's title (the first
    line of `title`, which may go on with the note's aliases)."""
    first, _, rest = heading_path.partition(" > ")
    return rest if first.lower() == title.partition("\n")[0].lower() else heading_path


def embed_input(title: str, heading_path: str, text: str) -> str:
    """The text the model embeds for a block: where it sits, then what it says.

    The note's title (with its aliases on the first block) is included, the folder is not,
    so moving a note reuses its vectors; a title written as an H1 is said once, as it is
    when the frontmatter holds it.
    """
    parts = [title]
    section = section_path(title, heading_path)
    if section:
        parts.append(section)
    if text:
        parts.append(text)
    return "\n".join(parts)


def embed_hash(text: str) -> str:
    """The key of a block's vector: unchanged or moved text is never embedded twice."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def note_rows(parsed: ParsedNote) -> NoteRows:
    title = parsed.title
    names = searched_names(title, parsed.aliases)
    blocks = []
    for block in parsed.blocks:
        heading_path = " > ".join(block.heading_path)
        searched_title = names if block.ordinal == 0 else title
        blocks.append(
            (
                block.ordinal,
                searched_title,
                heading_path,
                block.heading,
                block.level,
                block.text,
                block.start_line,
                block.end_line,
                block.tokens,
                " ".join(block.block_refs),
                embed_hash(embed_input(searched_title, heading_path, block.text)),
            )
        )
    return NoteRows(
        title=title,
        frontmatter=json.dumps(parsed.frontmatter, ensure_ascii=False, sort_keys=True),
        blocks=blocks,
        links=[
            (lk.block, lk.target, lk.kind, lk.heading, lk.block_ref, lk.alias, lk.line)
            for lk in parsed.links
        ],
        tags=parsed.tags,
        aliases=parsed.aliases,
        language=note_language(title, (block.text for block in parsed.blocks)),
    )


def read_note(job: ReadJob, chunk_tokens: int, pdfs: PdfReader) -> NoteRead:
    """Read and parse one file (a note, a PDF, a canvas; a PDF's text through `pdfs`);
    never raises: unreadable, binary and too large files say why."""
    kind = file_kind(job.path)
    try:
        if job.max_bytes is not None and os.stat(job.abspath).st_size > job.max_bytes:
            limit = job.max_bytes / 1_000_000
            return NoteRead(job.path, skipped=f"larger than {limit:g} MB (attachment_max_mb)")
        data = Path(job.abspath).read_bytes()
    except OSError as exc:
        return NoteRead(job.path, skipped=f"unreadable: {exc.strerror or exc}")
    if kind != PDF and b"\x00" in data[:_BINARY_SNIFF]:
        return NoteRead(job.path, skipped="binary file, not Markdown")
    digest = content_hash(data)
    if digest == job.previous_hash:
        return NoteRead(job.path, digest)
    name = PurePosixPath(job.path).name
    if kind == PDF:
        extracted = pdfs.read(job.abspath)  # from the file: the bytes were for the hash
        blocks = tuple(pdf_blocks(extracted, chunk_tokens))
        parsed = ParsedNote(name, {}, None, (), (), blocks, ())
        return NoteRead(job.path, digest, note_rows(parsed), tuple(extracted.problems))
    problems: list[str] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        problems.append(f"invalid UTF-8 at byte {exc.start}; decoded with replacement")
    text = text.removeprefix("\ufeff")
    try:
        if kind == CANVAS:
            parsed = parse_canvas(text, name, chunk_tokens=chunk_tokens)
        else:
            parsed = parse_note(text, PurePosixPath(job.path).stem, chunk_tokens=chunk_tokens)
        rows = note_rows(parsed)
    except Exception as exc:  # a parser bug must cost one note, never the run
        return NoteRead(job.path, skipped=f"could not be parsed ({type(exc).__name__}: {exc})")
    problems.extend(parsed.warnings)
    return NoteRead(job.path, digest, rows, tuple(problems))


def read_notes(
    jobs: Sequence[ReadJob], chunk_tokens: int, pdfs: PdfReader | None = None
) -> list[NoteRead]:
    """`read_note` of each job; their PDFs through `pdfs`, else a reader of their own."""
    with contextlib.nullcontext(pdfs) if pdfs is not None else PdfReader() as reader:
        return [read_note(job, chunk_tokens, reader) for job in jobs]


def auto_workers() -> int:
    """One worker per CPU this process may use, minus the one that writes to SQLite."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows
        cpus = os.cpu_count() or 1
    return max(0, min(cpus - 1, MAX_AUTO_WORKERS))


def read_all(
    jobs: Sequence[ReadJob], chunk_tokens: int, workers: int
) -> Generator[NoteRead, None, None]:
    """Read `jobs` in order, in `workers` processes when there are enough files to pay off.

    Chunks of files go to whoever asks first: the workers, and this process whenever the
    answer it needs next has not come (a worker starting up, or parsing slower than this
    process writes: an index kept for a database writes no full text). Results come back
    in `jobs` order all the same. A worker that cannot start or dies is not an error: what
    it did not deliver is read here.
    """
    pdfs = PdfReader()  # the PDFs read here, one after another
    if workers < 1 or len(jobs) < PARALLEL_MIN_FILES or not python_can_start():
        with pdfs:
            for job in jobs:
                yield read_note(job, chunk_tokens, pdfs)
        return
    chunks = [jobs[i : i + _CHUNK_FILES] for i in range(0, len(jobs), _CHUNK_FILES)]
    plan = _ChunkPlan(len(chunks))
    pool: list[_Worker] = []
    read_here: dict[int, list[NoteRead]] = {}
    try:
        for number in range(workers):
            pool.append(_Worker(number, chunks, plan, chunk_tokens))
        for index, chunk in enumerate(chunks):
            while True:
                owner = plan.owner(index, default=_HERE)
                worker = pool[owner] if owner != _HERE else None
                results = worker.take(index) if worker else read_here.pop(index, None)
                if results is not None:
                    break
                if worker is None or worker.gone:
                    results = read_notes(chunk, chunk_tokens, pdfs)
                    break
                # Rather than wait for a worker (starting up, or the slower side when the
                # writes are light), read a later chunk here.
                spare = plan.next_free(_HERE) if len(read_here) < _CHUNKS_AHEAD else None
                if spare is not None:
                    read_here[spare] = read_notes(chunks[spare], chunk_tokens, pdfs)
                else:
                    worker.wait_for(index)
            yield from results
    finally:
        pdfs.close()
        for worker in pool:
            worker.close()


_HERE = -1  # the owner of a chunk this process reads itself


class _ChunkPlan:
    """Hands out chunk numbers in order to whoever asks first; remembers who took which."""

    def __init__(self, chunks: int) -> None:
        self._owners: list[int | None] = [None] * chunks
        self._next = 0
        self._lock = threading.Lock()

    def next_free(self, taker: int) -> int | None:
        with self._lock:
            if self._next >= len(self._owners):
                return None
            index, self._next = self._next, self._next + 1
            self._owners[index] = taker
            return index

    def owner(self, index: int, *, default: int) -> int:
        """Who reads chunk `index`; a chunk nobody took yet goes to `default` now."""
        with self._lock:
            owner = self._owners[index]
            if owner is None:  # only the chunk at the cursor can be untaken here
                self._owners[index] = owner = default
                self._next = index + 1
            return owner


def worker_command(chunk_tokens: int) -> list[str]:
    return child_command("vaultctx.storage.reader", "serve", chunk_tokens)


class _Worker:
    """One worker process, the thread that feeds it chunks and the one that collects answers.

    It takes a new chunk from the plan whenever fewer than `_CHUNKS_AHEAD` of its chunks are
    in flight or unread, which keeps it busy and bounds the answers held in memory.
    """

    def __init__(
        self,
        number: int,
        chunks: Sequence[Sequence[ReadJob]],
        plan: _ChunkPlan,
        chunk_tokens: int,
    ) -> None:
        self.number = number
        self.gone = False
        self._answers: dict[int, list[NoteRead]] = {}
        self._in_flight = 0
        self._closed = False
        self._changed = threading.Condition()
        self._threads: list[threading.Thread] = []
        try:
            self.process: subprocess.Popen[bytes] | None = subprocess.Popen(
                worker_command(chunk_tokens),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            self.process = None
            self.gone = True
            return
        self._threads = [
            threading.Thread(target=target, name=f"vaultctx-reader-{name}", daemon=True)
            for target, name in (
                (lambda: self._feed(chunks, plan), "feed"),
                (self._collect, "collect"),
            )
        ]
        for thread in self._threads:
            thread.start()

    def _feed(self, chunks: Sequence[Sequence[ReadJob]], plan: _ChunkPlan) -> None:
        assert self.process is not None and self.process.stdin is not None
        try:
            while True:
                with self._changed:
                    self._changed.wait_for(
                        lambda: self._closed or self.gone or self._in_flight < _CHUNKS_AHEAD
                    )
                    if self._closed or self.gone:
                        return
                    index = plan.next_free(self.number)
                    if index is None:
                        break
                    self._in_flight += 1
                send(self.process.stdin, (index, list(chunks[index])))
            self.process.stdin.close()
        except (OSError, ValueError):  # the worker died or was closed: the collector sees EOF
            pass

    def _collect(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while True:
            try:
                index, results = receive(self.process.stdout)
                if not isinstance(results, list):
                    raise TypeError("not a list of results")
            except Exception:  # end of file, or bytes that are not an answer
                with self._changed:
                    self.gone = True
                    self._changed.notify_all()
                return
            with self._changed:
                self._answers[index] = results
                self._changed.notify_all()

    def take(self, index: int) -> list[NoteRead] | None:
        """Chunk `index`'s answer if it has come, handing its slot to the next chunk."""
        with self._changed:
            results = self._answers.pop(index, None)
            if results is not None:
                self._in_flight -= 1
                self._changed.notify_all()
            return results

    def wait_for(self, index: int) -> None:
        with self._changed:
            self._changed.wait_for(lambda: index in self._answers or self.gone)

    def close(self) -> None:
        """Stop the worker (it has answered everything, or is no longer needed)."""
        with self._changed:
            self._closed = True
            self._answers.clear()
            self._changed.notify_all()
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for thread in self._threads:  # the process is gone: both end at once
            thread.join()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def serve(chunk_tokens: int) -> None:
    """A worker's loop: (chunk number, jobs) in, (chunk number, results) out, until EOF."""
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    with PdfReader() as pdfs:
        while True:
            try:
                index, jobs = receive(source)
            except EOFError:
                return
            send(sink, (index, read_notes(jobs, chunk_tokens, pdfs)))
