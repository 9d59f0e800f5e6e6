"""PDFs as notes: each page's text is a block (chunked when long), under the PDF's outline
heading and the page (`Methods > page 3`), its line numbers the page's number.

Text is extracted by PDFium (`pypdfium2`) in a child process (`PdfReader`) that limits its
own memory and is stopped past each PDF's deadline: a PDF is untrusted input to a native
parser, and an encrypted, malformed or bomb of a file must cost that file alone — never
the index run, the parse worker, the watcher or the next PDF. What it read before a
deadline is kept. One reader reads a run of PDFs, one at a time. This module imports only
the standard library until the child needs PDFium.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO

from ..childproc import child_command, python_can_start, receive, send
from .blocks import Block, chunk_paragraphs

PDF_MEMORY_BYTES = 1 << 30
"""The address space a PDF's extraction may use: a decompression bomb stops there."""
PDF_SECONDS = 60.0
"""How long one PDF's extraction may take; the pages read by then are kept."""
MAX_PDF_CHARS = 20_000_000  # text kept from one PDF (a 5,000-page book is ~15M)
_OUTLINE_ENTRIES = 10_000
_OUTLINE_DEPTH = 3
_HEADING_CHARS = 120


@dataclass(frozen=True)
class PdfText:
    """What extraction gave: each page's text (in order), the outline as (level, title,
    page index), and what went wrong (a warning each)."""

    pages: list[str]
    outline: list[tuple[int, str, int]]
    problems: list[str]
    page_count: int = 0


def pdf_support() -> str | None:
    """None when PDFs can be read here, or the one line that says why not."""
    if importlib.util.find_spec("pypdfium2") is None:
        return "PDF text is not read: the pypdfium2 package is not installed"
    if not python_can_start():
        return "PDF text is not read: this app cannot start the Python that reads it"
    return None


PDF_READER_GROWTH = PDF_MEMORY_BYTES // 16
"""How much more address space a reader may hold after a PDF than before its first one;
past it the reader is replaced, so every PDF has nearly the room a new reader has."""


def extract_pdf(abspath: str, *, seconds: float = PDF_SECONDS) -> PdfText:
    """The text of the PDF at `abspath`, read by a reader of its own. Never raises."""
    with PdfReader(seconds=seconds) as reader:
        return reader.read(abspath)


class PdfReader:
    """Reads PDFs one after another in one bounded child process (`serve`), so a run of
    PDFs pays for starting Python and PDFium once. Each PDF has its own deadline; one that
    stops the reader — past the deadline, at the memory ceiling, crashing PDFium — costs
    that PDF alone, and the next starts a new reader. A reader that has grown by
    `PDF_READER_GROWTH` since it started, or read `files_per_reader` PDFs, is replaced.
    Started on first use; `close` (or the end of a `with`) stops it. One thread at a time."""

    def __init__(self, *, seconds: float = PDF_SECONDS, files_per_reader: int | None = None):
        self.seconds = seconds
        self.files_per_reader = files_per_reader
        self.started = 0  # reader processes started, for whoever measures them
        self._process: subprocess.Popen[bytes] | None = None
        self._files = 0  # PDFs the current reader has read

    def __enter__(self) -> PdfReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self, abspath: str) -> PdfText:
        """The text of the PDF at `abspath`. Never raises."""
        unsupported = pdf_support()
        if unsupported:
            return PdfText([], [], [unsupported])
        reused = self._process is not None
        reading = self._read(abspath)
        if reused and reading.heard is False:  # it had died idle: no fault of this PDF
            reading = self._read(abspath)
        return reading.text

    def _read(self, abspath: str) -> _Reading:
        try:
            process = self._start()
        except OSError as exc:
            why = f"PDF text is not read: cannot start its reader ({exc})"
            return _Reading(PdfText([], [], [why]), heard=None)
        assert process.stdin is not None and process.stdout is not None
        pages: list[str] = []
        outline: list[tuple[int, str, int]] = []
        problems: list[str] = []
        state = {"count": 0, "done": False, "heard": False, "reusable": False, "grown": 0}
        stdout = process.stdout

        def collect() -> None:
            chars = 0
            while True:
                try:
                    message = receive(stdout)
                except Exception:  # the reader died (out of memory, a crash) or was stopped
                    return
                state["heard"] = True
                kind = message[0]
                if kind == "outline":
                    outline.extend(message[1])
                    state["count"] = message[2]
                elif kind == "page":
                    chars += len(message[1])
                    if chars > MAX_PDF_CHARS:  # the reader goes on sending: it is stopped
                        problems.append(f"text past {MAX_PDF_CHARS:,} characters is not indexed")
                        return
                    pages.append(message[1])
                elif kind == "error":
                    problems.append(message[1])
                    state["reusable"] = message[2]
                    return
                elif kind == "done":
                    state.update(done=True, reusable=True, grown=message[1])
                    return

        collector = threading.Thread(target=collect, name="vaultctx-pdf", daemon=True)
        collector.start()
        with contextlib.suppress(OSError):  # it died: the collector sees that, reported below
            send(process.stdin, abspath)
        collector.join(self.seconds)
        timed_out = collector.is_alive()
        self._files += 1
        retire = (
            timed_out
            or not state["reusable"]
            or state["grown"] > PDF_READER_GROWTH
            or (self.files_per_reader is not None and self._files >= self.files_per_reader)
        )
        if retire:
            self._process = None
            _stop(process)
        collector.join()
        if retire:
            _release(process)
        count = state["count"]
        if timed_out:
            of = f" of its {count}" if count else ""
            problems.append(
                f"reading it took over {self.seconds:g} s: only {len(pages)}{of} pages are indexed"
            )
        elif not state["done"] and not problems:
            problems.append(
                "its reader stopped (out of memory, or a crash)"
                + (f" after {len(pages)} of {count} pages" if count else "")
            )
        if count and pages and not any(page.strip() for page in pages):
            problems.append(f"no text on any of its {count} pages (a scan without a text layer?)")
        heard = bool(state["heard"]) or timed_out
        return _Reading(PdfText(pages, outline, problems, count), heard=heard)

    def _start(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            self._process = subprocess.Popen(
                child_command("vaultctx.storage.pdf", "serve", PDF_MEMORY_BYTES),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            self._files = 0
            self.started += 1
        return self._process

    def close(self) -> None:
        """Stop the reader, if one runs (a later `read` starts another)."""
        process, self._process = self._process, None
        if process is not None:
            _stop(process)
            _release(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
    process.wait()


def _release(process: subprocess.Popen[bytes]) -> None:
    """Close a stopped reader's pipes (once nothing reads from them)."""
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


@dataclass(frozen=True)
class _Reading:
    """One PDF's reading: its text, and whether the reader said anything at all (None: no
    reader could start)."""

    text: PdfText
    heard: bool | None


def serve(memory_bytes: int) -> None:
    """The reader: PDF paths in, until the parent closes the pipe; for each, ("outline",
    entries, pages), ("page", text)..., then ("done", bytes of address space grown since
    the reader started) or ("error", why, whether the reader can go on)."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    except (ImportError, ValueError, OSError):  # Windows, or a platform without the limit
        pass
    with contextlib.suppress(Exception):  # PDFium loaded, so what it holds is the start
        import pypdfium2  # noqa: F401
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    started = _address_space()
    while True:
        try:
            path = receive(source)
        except EOFError:
            return
        if not _serve_one(path, sink, started):
            return


def _serve_one(path: str, sink: IO[bytes], started: int) -> bool:
    """Send one PDF's outline, pages and ("done", growth), or its error; False when the
    reader must stop (out of memory)."""
    try:
        import pypdfium2 as pdfium

        document = pdfium.PdfDocument(path)
    except MemoryError:
        send(sink, ("error", "it needs more memory than a PDF may use to read", False))
        return False
    except Exception as exc:
        send(sink, ("error", _open_error(exc), True))
        return True
    try:
        count = len(document)
        outline = []
        with contextlib.suppress(Exception):  # an outline that cannot be read is no outline
            for number, bookmark in enumerate(document.get_toc(max_depth=_OUTLINE_DEPTH)):
                if number >= _OUTLINE_ENTRIES:
                    break
                destination = bookmark.get_dest()
                index = destination.get_index() if destination is not None else None
                title = " ".join((bookmark.get_title() or "").split())[:_HEADING_CHARS]
                if index is not None and title:
                    outline.append((bookmark.level, title, index))
        send(sink, ("outline", outline, count))
        for index in range(count):
            try:
                page = document[index]
                textpage = page.get_textpage()
                text = textpage.get_text_bounded()
                textpage.close()
                page.close()
            except MemoryError:
                send(
                    sink, ("error", f"page {index + 1} needs more memory than a PDF may use", False)
                )
                return False
            except Exception:  # one page PDFium cannot read: the others still count
                text = ""
            send(sink, ("page", text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")))
    finally:
        with contextlib.suppress(Exception):
            document.close()
    send(sink, ("done", _address_space() - started))
    return True


def _address_space() -> int:
    """This process's address space in bytes (what `RLIMIT_AS` bounds); 0 where unknown."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0


def _open_error(exc: Exception) -> str:
    """Why PDFium would not open a file, in words."""
    message = str(exc)
    if "password" in message.lower():
        return "it is encrypted with a password: its text is not indexed"
    if "format" in message.lower() or "not a pdf" in message.lower():
        return "not a PDF that can be read (damaged, or another format)"
    return f"cannot be read as a PDF ({message})"


def pdf_blocks(text: PdfText, chunk_tokens: int) -> list[Block]:
    """A block per page (more for a long page), its heading path the outline heading the
    page is under and the page itself; its lines the page's number."""
    headings = _page_headings(text.outline, len(text.pages))
    blocks: list[Block] = []
    for index, page in enumerate(text.pages):
        number = index + 1
        lines = [line.strip() for line in page.split("\n")]
        if not any(lines):
            continue
        path = (*headings[index], f"page {number}")
        for chunk, _, _, tokens in chunk_paragraphs(lines, chunk_tokens):
            blocks.append(Block(len(blocks), path, 0, chunk, number, number, tokens))
    if not blocks:
        blocks.append(Block(0, (), 0, "", 1, 1, 0))
    return blocks


def _page_headings(outline: Iterable[tuple[int, str, int]], pages: int) -> list[tuple[str, ...]]:
    """For each page, the path of outline headings it is under: the deepest one opened on
    or before it."""
    entries = sorted(
        ((index, order, level, title) for order, (level, title, index) in enumerate(outline)),
    )
    stack: list[tuple[int, str]] = []
    headings: list[tuple[str, ...]] = []
    cursor = 0
    for page in range(pages):
        while cursor < len(entries) and entries[cursor][0] <= page:
            _, _, level, title = entries[cursor]
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            cursor += 1
        headings.append(tuple(title for _, title in stack))
    return headings
