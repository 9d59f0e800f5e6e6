"""PDFs as notes: each page's text is a block (chunked when long), under the PDF's outline
heading and the page (`Methods > page 3`), its line numbers the page's number.

Text is extracted by PDFium (`pypdfium2`) in a child process of its own, one per PDF, that
limits its own memory and is stopped past a deadline: a PDF is untrusted input to a
native parser, and an encrypted, malformed or bomb of a file must cost that file alone —
never the index run, the parse worker or the watcher. What it read before a deadline is
kept. This module imports only the standard library until the child needs PDFium.
"""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass

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


def extract_pdf(abspath: str, *, seconds: float = PDF_SECONDS) -> PdfText:
    """The text of the PDF at `abspath`, read in a bounded child process. Never raises."""
    unsupported = pdf_support()
    if unsupported:
        return PdfText([], [], [unsupported])
    try:
        process = subprocess.Popen(
            child_command("vaultctx.storage.pdf", "serve", PDF_MEMORY_BYTES),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError as exc:
        return PdfText([], [], [f"PDF text is not read: cannot start its reader ({exc})"])
    pages: list[str] = []
    outline: list[tuple[int, str, int]] = []
    problems: list[str] = []
    state = {"count": 0, "done": False}

    def collect() -> None:
        assert process.stdout is not None
        chars = 0
        while True:
            try:
                message = receive(process.stdout)
            except Exception:  # the reader died (out of memory, a crash) or was stopped
                return
            kind = message[0]
            if kind == "outline":
                outline.extend(message[1])
                state["count"] = message[2]
            elif kind == "page":
                chars += len(message[1])
                if chars > MAX_PDF_CHARS:
                    problems.append(f"text past {MAX_PDF_CHARS:,} characters is not indexed")
                    return
                pages.append(message[1])
            elif kind == "error":
                problems.append(message[1])
                return
            elif kind == "done":
                state["done"] = True
                return

    collector = threading.Thread(target=collect, name="vaultctx-pdf", daemon=True)
    collector.start()
    try:
        assert process.stdin is not None
        send(process.stdin, abspath)
        process.stdin.close()
    except OSError:
        pass  # it died at once: the collector sees nothing, and that is reported below
    collector.join(seconds)
    timed_out = collector.is_alive()
    if process.poll() is None:
        process.kill()
    process.wait()
    collector.join()
    with contextlib.suppress(OSError):
        assert process.stdout is not None
        process.stdout.close()
    count = state["count"]
    if timed_out:
        of = f" of its {count}" if count else ""
        problems.append(
            f"reading it took over {seconds:g} s: only {len(pages)}{of} pages are indexed"
        )
    elif not state["done"] and not problems:
        problems.append(
            "its reader stopped (out of memory, or a crash)"
            + (f" after {len(pages)} of {count} pages" if count else "")
        )
    if count and pages and not any(page.strip() for page in pages):
        problems.append(f"no text on any of its {count} pages (a scan without a text layer?)")
    return PdfText(pages, outline, problems, count)


def serve(memory_bytes: int) -> None:
    """The child: a PDF's path in, ("outline", entries, pages), ("page", text)... and
    ("done",) or ("error", why) out."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    except (ImportError, ValueError, OSError):  # Windows, or a platform without the limit
        pass
    sink = sys.stdout.buffer
    path = receive(sys.stdin.buffer)
    try:
        import pypdfium2 as pdfium

        document = pdfium.PdfDocument(path)
    except MemoryError:
        send(sink, ("error", "it needs more memory than a PDF may use to read"))
        return
    except Exception as exc:
        send(sink, ("error", _open_error(exc)))
        return
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
            send(sink, ("error", f"page {index + 1} needs more memory than a PDF may use"))
            return
        except Exception:  # one page PDFium cannot read: the others still count
            text = ""
        send(sink, ("page", text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")))
    send(sink, ("done",))


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
