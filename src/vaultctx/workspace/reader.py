"""Reading changed notes off disk: bytes, hash, decoding, parsing.

Parsing is pure Python and holds the GIL, so a big index run parses in worker processes
while this one writes to SQLite. A worker is a fresh Python running `serve()`, fed pickled
chunks of files on stdin and answering on stdout, rather than a multiprocessing pool: spawn
would re-run the caller's `__main__` script in each worker, and fork is unsafe in a threaded
app. Small runs (the watcher, an edit) read in this process: starting a worker costs more
than they do. This module imports little, so a worker starts fast.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from .parser import ParsedNote, parse_note

PARALLEL_MIN_FILES = 400
"""Below this many files to read, a worker process would cost more than it saves."""
MAX_AUTO_WORKERS = 3
_LEAD_FILES = 150  # about what this process parses while a worker starts
_CHUNK_FILES = 48  # files per message: amortizes pickling, keeps results flowing
_CHUNKS_AHEAD = 8  # answers held per worker: bounds memory when SQLite is the slow side
_BINARY_SNIFF = 8192
_LENGTH = struct.Struct("<Q")
_MAX_MESSAGE = 1 << 30


@dataclass(frozen=True)
class ReadJob:
    path: str  # POSIX path relative to the vault
    abspath: str
    previous_hash: str | None  # the indexed version's hash: same bytes are not parsed again


@dataclass(frozen=True)
class NoteRows:
    """A parsed note as rows for the index's tables, less the ids the writer gives.

    Built where the note is parsed, so a worker process does this work too: plain tuples
    also cross the pipe faster than parser objects.
    """

    title: str
    frontmatter: str  # JSON
    blocks: list[tuple]  # blocks(ordinal, title, heading_path, heading, level, text,
    #                      start_line, end_line, tokens, block_refs, embed_hash)
    links: list[tuple]  # links(block_ordinal, target, kind, heading, block_ref, alias, line)
    tags: tuple[str, ...]
    aliases: tuple[str, ...]


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


def embed_hash(text: str) -> str:
    """The key of a block's vector: unchanged or moved text is never embedded twice."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def note_rows(parsed: ParsedNote) -> NoteRows:
    title = parsed.title
    blocks = []
    for block in parsed.blocks:
        heading_path = " > ".join(block.heading_path)
        blocks.append(
            (
                block.ordinal,
                title,
                heading_path,
                block.heading,
                block.level,
                block.text,
                block.start_line,
                block.end_line,
                block.tokens,
                " ".join(block.block_refs),
                embed_hash(embed_input(title, heading_path, block.text)),
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
    )


def read_note(job: ReadJob, chunk_tokens: int) -> NoteRead:
    """Read and parse one file; never raises: unreadable and binary files say why."""
    try:
        data = Path(job.abspath).read_bytes()
    except OSError as exc:
        return NoteRead(job.path, skipped=f"unreadable: {exc.strerror or exc}")
    if b"\x00" in data[:_BINARY_SNIFF]:
        return NoteRead(job.path, skipped="binary file, not Markdown")
    digest = content_hash(data)
    if digest == job.previous_hash:
        return NoteRead(job.path, digest)
    problems: list[str] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        problems.append(f"invalid UTF-8 at byte {exc.start}; decoded with replacement")
    text = text.removeprefix("\ufeff")
    parsed = parse_note(text, PurePosixPath(job.path).stem, chunk_tokens=chunk_tokens)
    problems.extend(parsed.warnings)
    return NoteRead(job.path, digest, note_rows(parsed), tuple(problems))


def read_notes(jobs: Sequence[ReadJob], chunk_tokens: int) -> list[NoteRead]:
    return [read_note(job, chunk_tokens) for job in jobs]


def auto_workers() -> int:
    """One worker per CPU this process may use, minus the one that writes to SQLite."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows
        cpus = os.cpu_count() or 1
    return max(0, min(cpus - 1, MAX_AUTO_WORKERS))


def read_all(jobs: Sequence[ReadJob], chunk_tokens: int, workers: int) -> Iterator[NoteRead]:
    """Read `jobs` in order, in `workers` processes when there are enough files to pay off.

    A worker that cannot start or dies is not an error: the files it did not deliver are
    read here instead.
    """
    if workers < 1 or len(jobs) < PARALLEL_MIN_FILES or not _python_can_start():
        for job in jobs:
            yield read_note(job, chunk_tokens)
        return
    # The first files are read here while the workers start up; the rest go to the workers,
    # chunk i to worker i % n, and every worker answers in order.
    lead, rest = jobs[:_LEAD_FILES], jobs[_LEAD_FILES:]
    chunks = [rest[i : i + _CHUNK_FILES] for i in range(0, len(rest), _CHUNK_FILES)]
    workers = min(workers, len(chunks))
    pool: list[_Worker] = []
    delivered = 0
    try:
        pool = [_Worker(chunks[i::workers], chunk_tokens) for i in range(workers)]
        for job in lead:
            yield read_note(job, chunk_tokens)
        while delivered < len(chunks):
            results = pool[delivered % workers].next_result()
            if results is None:
                break
            yield from results
            delivered += 1
    finally:
        for worker in pool:
            worker.close(finished=delivered == len(chunks))
    for chunk in chunks[delivered:]:
        yield from read_notes(chunk, chunk_tokens)


def _python_can_start() -> bool:
    """Whether sys.executable is a Python: in a bundled or embedding app it is the app."""
    name = os.path.basename(sys.executable or "").lower()
    return not getattr(sys, "frozen", False) and name.startswith(("python", "pypy"))


# The worker imports modules from exactly where this process does (a source checkout, a
# venv), and serves from `vaultctx.workspace.reader`, so its answers unpickle here.
_WORKER_CODE = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]);"
    " from vaultctx.workspace.reader import serve; serve(int(sys.argv[2]))"
)


def worker_command(chunk_tokens: int) -> list[str]:
    path = json.dumps([str(entry) for entry in sys.path])  # a Path sneaks in now and then
    return [sys.executable, "-c", _WORKER_CODE, path, str(chunk_tokens)]


class _Worker:
    """One worker process, and the two threads that talk to it."""

    def __init__(self, chunks: list[Sequence[ReadJob]], chunk_tokens: int) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        try:
            self.process = subprocess.Popen(
                worker_command(chunk_tokens),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            return
        # One thread writes the jobs, another drains the answers: the worker never waits on
        # a full pipe while this process is busy writing to SQLite.
        self._results: queue.Queue[list[NoteRead] | None] = queue.Queue(maxsize=_CHUNKS_AHEAD)
        self._threads = [
            threading.Thread(target=target, name=f"vaultctx-reader-{name}", daemon=True)
            for target, name in ((lambda: self._feed(chunks), "feed"), (self._collect, "collect"))
        ]
        for thread in self._threads:
            thread.start()

    def _feed(self, chunks: list[Sequence[ReadJob]]) -> None:
        assert self.process is not None and self.process.stdin is not None
        try:
            for chunk in chunks:
                _send(self.process.stdin, list(chunk))
            self.process.stdin.close()
        except (OSError, ValueError):  # the worker died or was closed: the reader sees EOF
            pass

    def _collect(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while True:
            try:
                results = _receive(self.process.stdout)
            except Exception:  # gone mid-message, or bytes that do not unpickle
                results = None
            if not isinstance(results, list):  # gone, or talking nonsense
                self._results.put(None)
                return
            self._results.put(results)

    def next_result(self) -> list[NoteRead] | None:
        """The next chunk's results; None when the worker is gone."""
        return None if self.process is None else self._results.get()

    def close(self, *, finished: bool) -> None:
        """Let a worker that has answered everything exit; stop any other at once."""
        if self.process is None:
            return
        try:
            self.process.wait(timeout=2 if finished else 0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        # The process is gone, so both threads end at once: the feeder on a broken pipe, the
        # collector on end of file, once the answers it still holds are taken off its hands.
        while any(thread.is_alive() for thread in self._threads):
            with contextlib.suppress(queue.Empty):
                while True:
                    self._results.get_nowait()
            for thread in self._threads:
                thread.join(timeout=0.05)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _send(stream: BinaryIO, value: object) -> None:
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(payload)) + payload)
    stream.flush()


def _receive(stream: BinaryIO) -> object:
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        raise EOFError("worker closed its output")
    (size,) = _LENGTH.unpack(header)
    if size > _MAX_MESSAGE:
        raise ValueError(f"a {size}-byte message is not from a reader worker")
    payload = stream.read(size)
    if len(payload) < size:
        raise EOFError("worker output cut short")
    return pickle.loads(payload)


def serve(chunk_tokens: int) -> None:
    """A worker's loop: a chunk of jobs in, their results out, until stdin closes."""
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            jobs = _receive(source)
        except EOFError:
            return
        _send(sink, read_notes(jobs, chunk_tokens))  # type: ignore[arg-type]
