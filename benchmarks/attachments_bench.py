"""PDFs in a vault: which extraction library, how fast a vault of PDFs indexes, what a bomb
costs, and whether a question answered only in a PDF is found as well as in a note.

Real PDFs nobody here wrote: R's manuals from Debian (`apt-get download r-doc-pdf`, then
`dpkg-deb -x r-doc-pdf_*.deb x`; they are in x/usr/share/R/doc/manual/).

    python benchmarks/attachments_bench.py compare x/usr/share/R/doc/manual/R-*.pdf
    python benchmarks/attachments_bench.py index x/usr/share/R/doc/manual/R-*.pdf
    python benchmarks/attachments_bench.py bomb
    python benchmarks/attachments_bench.py questions x/usr/share/R/doc/manual

`compare` times pypdf, pypdfium2 and pdfminer.six (those installed) in interleaved rounds
on the same files, best of the rounds, and measures text quality without a reference
text: a word's recall against the words both other libraries agree on, and the run-together
"words" of over 20 letters an extractor glues from separate ones.
"""

from __future__ import annotations

import argparse
import collections
import functools
import importlib.util
import re
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from pdf_files import make_pdf
from vaultctx import Workspace
from vaultctx.storage import reader as reader_module
from vaultctx.storage.pdf import PDF_MEMORY_BYTES, PdfReader, extract_pdf, pdf_blocks

# --- compare: three extractors on the same files --------------------------------------------


def _pypdf(path: str) -> list[str]:
    import pypdf

    return [page.extract_text() or "" for page in pypdf.PdfReader(path).pages]


def _pypdfium2(path: str) -> list[str]:
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(path)
    pages = []
    for index in range(len(document)):
        page = document[index]
        textpage = page.get_textpage()
        pages.append(textpage.get_text_bounded())
        textpage.close()
        page.close()
    document.close()
    return pages


def _pdfminer(path: str) -> list[str]:
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTTextContainer

    return [
        "".join(element.get_text() for element in page if isinstance(element, LTTextContainer))
        for page in extract_pages(path)
    ]


EXTRACTORS: dict[str, tuple[str, Callable[[str], list[str]]]] = {
    "pypdf": ("pypdf", _pypdf),
    "pypdfium2": ("pypdfium2", _pypdfium2),
    "pdfminer.six": ("pdfminer", _pdfminer),
}
_WORD = re.compile(r"[A-Za-z]{2,}")


def compare(files: Sequence[Path], rounds: int = 2) -> None:
    import logging

    logging.disable(logging.WARNING)  # pypdf warns on every font it cannot fully read
    names = [n for n, (module, _) in EXTRACTORS.items() if importlib.util.find_spec(module)]
    best: dict[tuple[str, str], float] = {}
    texts: dict[tuple[str, str], list[str]] = {}
    for number in range(rounds):
        for file in files:
            order = names if number % 2 == 0 else names[::-1]
            for name in order:
                started = time.perf_counter()
                pages = EXTRACTORS[name][1](str(file))
                elapsed = time.perf_counter() - started
                key = (name, file.name)
                best[key] = min(best.get(key, elapsed), elapsed)
                texts[key] = pages
    print(f"{'file':30} {'pages':>5} " + " ".join(f"{n + ' s':>15}" for n in names))
    for file in files:
        pages = len(texts[(names[0], file.name)])
        row = " ".join(f"{best[(n, file.name)]:15.2f}" for n in names)
        print(f"{file.name:30} {pages:5d} {row}")
    if len(names) < 3:
        return
    print(f"\n{'library':14} {'words':>8} {'agreed recall':>14} {'glued words':>12}")
    for name in names:
        words = agreed = recalled = glued = 0
        for file in files:
            bags = {
                n: collections.Counter(
                    w.lower() for w in _WORD.findall("\n".join(texts[(n, file.name)]))
                )
                for n in names
            }
            first, second = (bags[n] for n in names if n != name)
            consensus = first & second
            agreed += sum(consensus.values())
            recalled += sum((consensus & bags[name]).values())
            words += sum(bags[name].values())
            text = "\n".join(texts[(name, file.name)])
            glued += sum(1 for w in text.split() if len(w) > 20 and w.isalpha())
        print(f"{name:14} {words:8d} {recalled / agreed:14.3f} {glued:12d}")


# --- index: a vault of 50 PDFs -----------------------------------------------------------


READERS = {"a reader per PDF": 1, "one reader for the run": None}
"""The PDF forms `index` compares: each PDF read by a new reader process (`files_per_reader`
1), and a run of them by one reader (replaced only when a PDF stops it, or it has grown)."""


def index(files: Sequence[Path], count: int = 50, rounds: int = 2) -> None:
    """Index `count` PDFs (the files, round robin) without embeddings — read by a reader
    process per PDF and by one reader for the run, in interleaved rounds — then the same
    text as Markdown notes (a heading a page), all in the same run: seconds, files a second,
    and the peak memory of the indexing process and of the largest child (a PDF's reader)."""
    markdown = {source: _as_markdown(source) for source in files}
    timings: dict[str, list[float]] = collections.defaultdict(list)
    forms = [*READERS] * rounds + ["markdown"]
    for form in forms:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "vault"
            (root / "Papers").mkdir(parents=True)
            for number in range(count):
                source = files[number % len(files)]
                name = f"{number:02d}-{source.stem}"
                if form in READERS:  # one byte more makes each copy a file of its own
                    data = source.read_bytes() + b"\n%" + str(number).encode() + b"\n"
                    (root / "Papers" / f"{name}.pdf").write_bytes(data)
                else:
                    text = f"{markdown[source]}\n\n{number}\n"
                    (root / "Papers" / f"{name}.md").write_text(text, encoding="utf-8")
            per_reader = READERS.get(form)
            reader_module.PdfReader = functools.partial(PdfReader, files_per_reader=per_reader)
            try:
                with Workspace.open(root, {"embed": False}) as ws:
                    started = time.perf_counter()
                    report = ws.index()
                    elapsed = time.perf_counter() - started
            finally:
                reader_module.PdfReader = PdfReader
            size = sum(f.stat().st_size for f in (root / "Papers").iterdir()) / 1e6
        timings[form].append(elapsed)
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(
            f"{count} {'PDF' if form in READERS else 'Markdown'} files ({size:.0f} MB), {form}:"
            f" {report.blocks_written} blocks, {elapsed:.1f} s, {count / elapsed:.2f} files/s;"
            f" peak RSS so far {own:.0f} MB (this process), {child:.0f} MB (largest child);"
            f" warnings {len(report.warnings)}"
        )
    for form, seconds in timings.items():
        best = min(seconds)
        print(f"best of {len(seconds)}, {form}: {best:.1f} s, {count / best:.2f} files/s")


# --- bomb: a decompression bomb under the ceiling ---------------------------------------


def bomb() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bomb.pdf"
        path.write_bytes(make_pdf(["boom"], bomb_bytes=2 * PDF_MEMORY_BYTES))
        started = time.perf_counter()
        text = extract_pdf(str(path))
        elapsed = time.perf_counter() - started
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"bomb: {path.name} inflating to {2 * PDF_MEMORY_BYTES >> 20} MB: {elapsed:.1f} s,"
        f" largest child {child:.0f} MB (ceiling {PDF_MEMORY_BYTES >> 20} MB of address"
        f" space); {text.problems}"
    )


# --- questions: answered only in a PDF, and the same text as Markdown ---------------------

# question | manual | the section that answers it: each section's title is its outline
# heading; a hit is a passage of a page that section spans. Worded as a user would ask,
# not as the manual titles it.
_QUESTION_TABLE = """
why is the language called R | R-FAQ | Why is R named R?
turn factor levels into their numeric values | R-FAQ | How do I convert factors to numeric?
equal-looking decimals compare false | R-FAQ | Why doesn't R think these numbers are equal?
negative number to a fractional power is NaN | R-FAQ | Why are powers of negative numbers wrong?
plot with a second y axis on the right | R-FAQ | How do I create a plot with two y-axes?
may a company use R commercially | R-FAQ | Can I use R for commercial purposes?
uninstall an add-on package | R-FAQ | How can add-on packages be removed?
slanted text labels on an axis | R-FAQ | How can I create rotated axis labels?
sort the rows of a data frame by a column | R-FAQ | How can I sort the rows of a data frame?
read a file whose columns have fixed widths | R-data | Fixed-width-format files
reasons to keep data in a database instead of files | R-data | Why use a database?
import data saved by SPSS or Stata | R-data | EpiInfo, Minitab, S-PLUS, SAS, SPSS, Stata, Systat
read xls workbooks from Excel | R-data | 9 Reading Excel spreadsheets
reshape data from wide to long format | R-data | Re-shaping data
read data over a socket connection | R-data | Reading from sockets
"""
QUESTIONS = [
    tuple(part.strip() for part in line.split(" | "))
    for line in _QUESTION_TABLE.strip().splitlines()
]


def _sections(manual: Path) -> dict[str, range]:
    """Each outline title of `manual` and the pages (1-based) from its start to the next
    entry's start."""
    text = extract_pdf(str(manual))
    entries = sorted((index, order, title) for order, (_, title, index) in enumerate(text.outline))
    spans = {}
    for position, (index, _, title) in enumerate(entries):
        following = entries[position + 1][0] if position + 1 < len(entries) else index
        spans[title] = range(index + 1, max(following, index) + 2)
    return spans


def questions(folder: Path, use_vectors: bool) -> None:
    manuals = sorted({manual for _, manual, _ in QUESTIONS})
    spans = {m: _sections(folder / f"{m}.pdf") for m in manuals}
    example = Path(__file__).resolve().parents[1] / "examples" / "vault"
    results = {}
    for form in ("pdf", "markdown"):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "vault"
            shutil.copytree(example, root, ignore=shutil.ignore_patterns(".vaultctx"))
            for manual in manuals:
                source = folder / f"{manual}.pdf"
                if form == "pdf":
                    shutil.copy(source, root / source.name)
                else:  # the text the PDF's blocks hold, as a note with a heading a page
                    text = _as_markdown(source)
                    (root / f"{manual}.md").write_text(text, encoding="utf-8")
            with Workspace.open(root, {"embed": use_vectors}) as ws:
                ws.index()
                hits, reciprocal = 0, 0.0
                for question, manual, section in QUESTIONS:
                    found = ws.select(question, k=10, use_vectors=use_vectors).candidates
                    ranks = [
                        rank
                        for rank, c in enumerate(found, start=1)
                        if c.path in (f"{manual}.pdf", f"{manual}.md")
                        and _page(c.heading_path) in spans[manual][section]
                    ]
                    hits += bool(ranks) and ranks[0] <= 5
                    reciprocal += 1 / ranks[0] if ranks else 0.0
                results[form] = (hits / len(QUESTIONS), reciprocal / len(QUESTIONS))
    print(f"{len(QUESTIONS)} questions, vectors {'on' if use_vectors else 'off'}")
    for form, (success, mrr) in results.items():
        print(f"  {form:9} Success@5 {success:.3f}  MRR@10 {mrr:.3f}")


def _as_markdown(source: Path) -> str:
    """The PDF's blocks as Markdown: `## heading path` and the page's text."""
    blocks = pdf_blocks(extract_pdf(str(source)), 200)
    return "\n\n".join(f"## {' > '.join(b.heading_path)}\n\n{b.text}" for b in blocks)


def _page(heading_path: str) -> int:
    last = heading_path.rpartition(" > ")[2]
    return int(last[5:]) if last.startswith("page ") and last[5:].isdigit() else -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("compare").add_argument("files", nargs="+", type=Path)
    sub.add_parser("index").add_argument("files", nargs="+", type=Path)
    sub.add_parser("bomb")
    asked = sub.add_parser("questions")
    asked.add_argument("folder", type=Path)
    asked.add_argument("--vectors", action="store_true")
    args = parser.parse_args()
    if args.what == "compare":
        compare(args.files)
    elif args.what == "index":
        index(args.files)
    elif args.what == "bomb":
        bomb()
    else:
        questions(args.folder, args.vectors)


if __name__ == "__main__":
    main()
