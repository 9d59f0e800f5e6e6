"""What else lives in a vault: PDFs and canvases are indexed as notes — a PDF's pages and a
canvas's cards are blocks select finds, their links join the graph, and a hostile file is
a warning that costs that file alone."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.client import Client

from conftest import query, write_files
from pdf_files import make_pdf
from server_helpers import run_session
from vaultctx import Workspace
from vaultctx.cli import cli
from vaultctx.storage.canvas import canvas_markdown, parse_canvas
from vaultctx.storage.indexer import LinkResolver
from vaultctx.storage.pdf import PDF_MEMORY_BYTES, PdfReader, extract_pdf

PAPER = make_pdf(
    [
        "Foraging Range of Honey Bees\nA field study",
        "Methods\nColonies were moved to the heath in June.",
        "Results\nThe waggle run lasts longer for flowers farther from the hive.",
    ],
    outline=[("Introduction", 0), ("Results", 2)],
)
BOARD = {
    "nodes": [
        {"id": "g", "type": "group", "x": 0, "y": 0, "width": 900, "height": 900,
         "label": "Summer plan"},
        {"id": "t", "type": "text", "x": 20, "y": 20, "width": 300, "height": 100,
         "text": "Move the hives to the heather moor\n\nin August, before [[Forage]] fails"},
        {"id": "hives", "type": "file", "x": 400, "y": 20, "width": 200, "height": 100,
         "file": "Hives.md"},
        {"id": "paper", "type": "file", "x": 400, "y": 300, "width": 200, "height": 100,
         "file": "Papers/paper.pdf", "subpath": "#page=3"},
        {"id": "web", "type": "link", "x": 1000, "y": 0, "width": 200, "height": 100,
         "url": "https://example.org/heather"},
    ],
    "edges": [{"id": "e", "fromNode": "hives", "toNode": "paper", "label": "evidence"}],
}  # fmt: skip
VAULT = {
    "Hives.md": "# Hives\n\nThe hives stand by the orchard.\n",
    "Forage.md": "# Forage\n\nClover first, then lime.\n",
    "Reading.md": "# Reading\n\n![[paper.pdf#page=3]] and the plan on [[Board.canvas]];"
    " also [the paper](Papers/paper.pdf).\n",
    "Board.canvas": json.dumps(BOARD),
    "Papers/paper.pdf": PAPER,
}


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    with Workspace.open(write_files(tmp_path / "vault", VAULT), {"embed": False}) as workspace:
        workspace.index()
        yield workspace


def blocks_of(ws: Workspace, path: str) -> list[tuple[str, str, int]]:
    return query(
        ws._vault.db.path,
        "SELECT b.heading_path, b.text, b.start_line FROM blocks b JOIN notes n"
        " ON n.id = b.note_id WHERE n.path = ? ORDER BY b.ordinal",
        path,
    )


def links_of(ws: Workspace, path: str) -> list[tuple[str, str, str | None]]:
    """(target as written, kind, the path it resolved to) of each link `path` holds."""
    return query(
        ws._vault.db.path,
        "SELECT l.target, l.kind, t.path FROM links l JOIN notes s ON s.id = l.source_id"
        " LEFT JOIN notes t ON t.id = l.target_id WHERE s.path = ? ORDER BY l.id",
        path,
    )


# --- canvases ------------------------------------------------------------------------------


def test_a_canvas_text_card_is_a_block_under_its_group_and_first_line(ws: Workspace) -> None:
    blocks = {heading: text for heading, text, _ in blocks_of(ws, "Board.canvas")}
    card = blocks["Summer plan > Move the hives to the heather moor"]
    assert card.endswith("in August, before [[Forage]] fails")
    assert blocks["https://example.org/heather"] == "https://example.org/heather"  # no group
    found = ws.select("heather moor", use_vectors=False).candidates[0]
    assert (found.path, found.title) == ("Board.canvas", "Board.canvas")


def test_a_canvas_s_note_cards_card_links_and_edges_are_links_of_the_graph(
    ws: Workspace,
) -> None:
    assert links_of(ws, "Board.canvas") == [
        ("Forage", "wiki", "Forage.md"),
        ("Hives.md", "canvas", "Hives.md"),
        ("Papers/paper.pdf", "canvas", "Papers/paper.pdf"),
        ("Papers/paper.pdf", "canvas", "Papers/paper.pdf"),  # the edge Hives -> paper
    ]
    related = ws.related("Hives", use_vectors=False)
    assert "Board.canvas" in [c.path for c in related.candidates]  # its backlink


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[1, 2, 3]",
        '{"nodes": "many", "edges": 7}',
        '{"nodes": [{"id": 1}, {"type": "text"}, 5, null, {"id": "a", "type": "text",'
        ' "x": "left", "text": "x"}], "edges": [{"fromNode": "zz", "toNode": "a"}, 4]}',
        '{"nodes": [{"id": "a", "type": "text", "x": 0, "y": 0, "text": ["not", "text"]},'
        ' {"id": "b", "type": "file", "x": 0, "y": 0, "file": {"path": "Hives.md"}}]}',
        "[" * 100_000 + "]" * 100_000,
    ],
    ids=["malformed", "a-list", "wrong-types", "bad-nodes-and-edges", "wrong-fields", "deep"],
)
def test_a_hostile_canvas_is_a_warning_for_that_file_only(tmp_path: Path, text: str) -> None:
    root = write_files(tmp_path / "vault", {**VAULT, "Bad.canvas": text})
    with Workspace.open(root, {"embed": False}) as ws:
        report = ws.index()
        assert {path for path, _ in report.warnings} <= {"Bad.canvas"}
        assert report.skipped == []
        assert ws.select("heather moor", use_vectors=False).candidates[0].path == "Board.canvas"
    parsed = parse_canvas(text, "Bad.canvas")
    assert parsed.warnings or not any(b.text for b in parsed.blocks)


EDGED = {
    "nodes": [
        {"id": "g", "type": "group", "x": 0, "y": 0, "width": 500, "height": 500,
         "label": "Forage"},
        {"id": "f", "type": "file", "x": 20, "y": 20, "width": 100, "height": 100,
         "file": "Forage.md"},
        {"id": "t", "type": "text", "x": 600, "y": 0, "width": 200, "height": 100,
         "text": "Queen marking"},
        {"id": "w", "type": "link", "x": 1000, "y": 0, "width": 200, "height": 100,
         "url": "https://example.org/marking"},
        {"id": "h", "type": "file", "x": 600, "y": 300, "width": 200, "height": 100,
         "file": "Hives.md"},
    ],
    "edges": [
        {"id": "1", "fromNode": "t", "toNode": "h", "label": "which hives"},
        {"id": "2", "fromNode": "h", "toNode": "w"},
        {"id": "3", "fromNode": "g", "toNode": "f", "label": "inside"},
        {"id": "4", "fromNode": "t", "toNode": "g", "label": "to the group"},
        {"id": "5", "fromNode": "t", "toNode": "t"},
        {"id": "6", "fromNode": "h", "toNode": "h"},
    ],
}  # fmt: skip


def test_an_edge_from_a_text_or_web_card_to_a_note_card_is_a_link_in_that_card_s_block(
    tmp_path: Path,
) -> None:
    """The text card is the canvas's own, so the edge says the canvas links to the note
    there; an edge within a group or to one adds nothing, nor does a card's edge to itself."""
    root = write_files(tmp_path / "vault", {**VAULT, "Edged.canvas": json.dumps(EDGED)})
    with Workspace.open(root, {"embed": False}) as ws:
        ws.index()
        rows = query(
            ws._vault.db.path,
            "SELECT l.target, l.kind, l.alias, b.heading_path FROM links l"
            " JOIN notes s ON s.id = l.source_id LEFT JOIN blocks b ON b.note_id = s.id"
            " AND b.ordinal = l.block_ordinal WHERE s.path = ? ORDER BY l.id",
            "Edged.canvas",
        )
        related = [c.path for c in ws.related("Hives", use_vectors=False).candidates]
    assert rows == [
        ("Forage.md", "canvas", None, "https://example.org/marking"),  # the card, in a group
        ("Hives.md", "canvas", None, "https://example.org/marking"),  # the card
        ("Hives.md", "canvas", "which hives", "Queen marking"),  # text card -> note card
        ("Hives.md", "canvas", None, "https://example.org/marking"),  # note card -> web card
    ]
    assert "Edged.canvas" in related


def test_a_canvas_reads_as_markdown_its_cards_by_group_then_its_edges() -> None:
    assert canvas_markdown(json.dumps(BOARD)) == (
        "https://example.org/heather\n\n"
        "## Summer plan\n\n"
        "Move the hives to the heather moor\n\nin August, before [[Forage]] fails\n\n---\n\n"
        "[[Hives.md]]\n\n---\n\n"
        "[[Papers/paper.pdf#page=3]]\n\n"
        "## Connections\n\n"
        "- [[Hives.md]] → [[Papers/paper.pdf#page=3]]: evidence\n"
    )
    edges = canvas_markdown(json.dumps(EDGED)).split("## Connections\n\n")[1].splitlines()
    assert edges == [
        '- "Queen marking" → [[Hives.md]]: which hives',
        "- [[Hives.md]] → https://example.org/marking",
        '- the group "Forage" → [[Forage.md]]: inside',
        '- "Queen marking" → the group "Forage": to the group',
        '- "Queen marking" → "Queen marking"',
        "- [[Hives.md]] → [[Hives.md]]",
    ]
    both = {"nodes": EDGED["nodes"], "edges": [
        {"id": "a", "fromNode": "t", "toNode": "h", "fromEnd": "arrow"},
        {"id": "b", "fromNode": "t", "toNode": "h", "fromEnd": "arrow", "toEnd": "none"},
        {"id": "c", "fromNode": "t", "toNode": "h", "toEnd": "none"},
    ]}  # fmt: skip
    arrows = [line.split()[-2] for line in canvas_markdown(json.dumps(both)).splitlines()[-3:]]
    assert arrows == ["↔", "←", "—"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)
CARD = st.fixed_dictionaries(
    {"id": st.sampled_from(["a", "b", "c", 7]), "type": st.sampled_from(
        ["text", "file", "link", "group", "other", 3]
    )},
    optional={
        "x": st.integers(-50, 50) | JSON, "y": st.integers(-50, 50), "width": st.integers(0, 99),
        "height": st.integers(0, 99), "text": st.text(max_size=30) | JSON,
        "file": st.sampled_from(["Hives.md", "a.pdf", "b.canvas", "c.png", "/", ""]) | JSON,
        "subpath": st.sampled_from(["#H", "#^b", "page=3", ""]) | JSON,
        "url": st.text(max_size=10) | JSON, "label": st.text(max_size=10) | JSON,
    },
)  # fmt: skip
EDGE = st.fixed_dictionaries(
    {"fromNode": st.sampled_from(["a", "b", "c", "zz"]) | JSON,
     "toNode": st.sampled_from(["a", "b", "c"]) | JSON},
    optional={"label": st.text(max_size=10) | JSON, "fromEnd": JSON, "toEnd": JSON},
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(nodes=st.lists(CARD, max_size=6) | JSON, edges=st.lists(EDGE | JSON, max_size=6) | JSON)
def test_any_canvas_parses_and_reads_without_raising_and_links_only_its_file_cards(
    nodes: object, edges: object
) -> None:
    text = json.dumps({"nodes": nodes, "edges": edges})
    parsed = parse_canvas(text, "x.canvas")
    markdown = canvas_markdown(text)
    assert isinstance(markdown, str) and "\x00" not in markdown
    files = {
        n["file"].strip().lstrip("/")
        for n in (nodes if isinstance(nodes, list) else [])
        if isinstance(n, dict) and n.get("type") == "file" and isinstance(n.get("file"), str)
    }
    cards = {link.target for link in parsed.links if link.kind == "canvas"}
    assert cards <= files
    assert all(0 <= link.block < len(parsed.blocks) for link in parsed.links)


# --- PDFs ----------------------------------------------------------------------------------


def test_each_pdf_page_is_a_block_under_its_outline_heading_and_its_page(ws: Workspace) -> None:
    assert [(h, line) for h, _, line in blocks_of(ws, "Papers/paper.pdf")] == [
        ("Introduction > page 1", 1),
        ("Introduction > page 2", 2),
        ("Results > page 3", 3),
    ]
    found = ws.select("waggle run farther flowers", use_vectors=False).candidates[0]
    assert (found.path, found.title, found.heading_path) == (
        "Papers/paper.pdf",
        "paper.pdf",
        "Results > page 3",
    )
    assert (found.start_line, found.end_line) == (3, 3)
    text = ws.read_note("Papers/paper.pdf").content
    assert "## Results > page 3\n\nResults\nThe waggle run" in text


def test_a_pdf_is_read_again_only_when_its_bytes_change(ws: Workspace) -> None:
    pdf = ws.root / "Papers" / "paper.pdf"
    assert ws.index().unchanged == len(VAULT)
    os.utime(pdf, ns=(time.time_ns(), time.time_ns() + 5_000_000_000))
    again = ws.index()
    assert (again.unchanged, again.updated) == (len(VAULT), 0)
    pdf.write_bytes(make_pdf(["The hive was weighed every week."]))
    changed = ws.index()
    assert changed.updated == 1
    assert (
        ws.select("weighed every week", use_vectors=False).candidates[0].path
        == pdf.relative_to(ws.root).as_posix()
    )


HOSTILE = {
    "encrypted.pdf": (make_pdf(["locked words"], encrypt=True), "encrypted"),
    "damaged.pdf": (b"%PDF-1.7\n" + os.urandom(4096), "not a PDF that can be read"),
    "scan.pdf": (make_pdf(["", "", ""]), "no text on any of its 3 pages"),
    "notes.pdf": (b"# not a pdf at all\n", "not a PDF that can be read"),
}


def test_hostile_pdfs_are_warnings_that_cost_only_their_file(tmp_path: Path) -> None:
    files = {name: data for name, (data, _) in HOSTILE.items()}
    root = write_files(tmp_path / "vault", {**VAULT, **files})
    with Workspace.open(root, {"embed": False}) as ws:
        report = ws.index()
        warnings = dict(report.warnings)
        for name, (_, why) in HOSTILE.items():
            assert why in warnings[name], name
        assert ws.select("waggle run", use_vectors=False).candidates[0].path == "Papers/paper.pdf"
        assert ws.status().to_dict()["notes_with_problems"] == len(HOSTILE)
        assert ws.index().unchanged == len(VAULT) + len(HOSTILE)  # not read again


def test_a_pdf_over_the_size_limit_is_skipped_unread(tmp_path: Path) -> None:
    root = write_files(tmp_path / "vault", VAULT)
    with Workspace.open(root, {"embed": False, "attachment_max_mb": 0.001}) as ws:
        report = ws.index()
    assert dict(report.skipped)["Papers/paper.pdf"] == "larger than 0.001 MB (attachment_max_mb)"
    assert report.added == len(VAULT) - 1


def test_a_pdf_of_five_thousand_pages_is_indexed_page_by_page(tmp_path: Path) -> None:
    pages = [f"Page {n} of the ledger: frame count {n * 7}." for n in range(1, 5001)]
    root = write_files(tmp_path / "vault", {"ledger.pdf": make_pdf(pages)})
    with Workspace.open(root, {"embed": False}) as ws:
        ws.index()
        (count,) = query(ws._vault.db.path, "SELECT COUNT(*) FROM blocks")[0]
        found = ws.select("frame count 34993", use_vectors=False).candidates[0]
    assert count == 5000
    assert found.heading_path == "page 4999"


def test_a_pdf_read_past_its_deadline_keeps_the_pages_read_by_then(tmp_path: Path) -> None:
    pdf = tmp_path / "long.pdf"
    # 100,000 pages take several seconds to read even on an idle machine: past the deadline.
    pdf.write_bytes(make_pdf([f"Entry {n}: a frame of brood." for n in range(100_000)]))
    text = extract_pdf(str(pdf), seconds=1.0)
    assert len(text.pages) < 100_000
    of = f" of its {text.page_count}" if text.page_count else ""  # known once it opened
    assert text.problems == [
        f"reading it took over 1 s: only {len(text.pages)}{of} pages are indexed"
    ]


@pytest.mark.slow
def test_a_decompression_bomb_stops_at_the_memory_ceiling(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.pdf"
    bomb.write_bytes(make_pdf(["boom"], bomb_bytes=2 * PDF_MEMORY_BYTES))
    assert bomb.stat().st_size < 4_000_000
    started = time.perf_counter()
    text = extract_pdf(str(bomb))
    assert time.perf_counter() - started < 30
    assert text.pages == []
    assert "its reader stopped (out of memory, or a crash)" in text.problems[0]


def test_one_reader_reads_a_run_of_pdfs_and_a_damaged_one_keeps_it(tmp_path: Path) -> None:
    files = {"a.pdf": PAPER, "damaged.pdf": HOSTILE["damaged.pdf"][0], "b.pdf": PAPER}
    root = write_files(tmp_path, files)
    with PdfReader() as reader:
        texts = {name: reader.read(str(root / name)) for name in files}
        started = reader.started
    assert started == 1
    assert texts["a.pdf"] == texts["b.pdf"] == extract_pdf(str(root / "a.pdf"))
    assert texts["a.pdf"].pages[2].startswith("Results") and texts["a.pdf"].problems == []
    assert "not a PDF that can be read" in texts["damaged.pdf"].problems[0]


def test_a_reader_that_died_between_pdfs_is_replaced_at_no_pdf_s_cost(tmp_path: Path) -> None:
    root = write_files(tmp_path, {"a.pdf": PAPER})
    with PdfReader() as reader:
        first = reader.read(str(root / "a.pdf"))
        assert reader._process is not None
        reader._process.kill()
        reader._process.wait()
        again = reader.read(str(root / "a.pdf"))
        started = reader.started
    assert again == first and again.problems == []
    assert started == 2


@pytest.mark.slow
def test_a_pdf_that_stops_its_reader_costs_only_itself(tmp_path: Path) -> None:
    bomb = make_pdf(["boom"], bomb_bytes=2 * PDF_MEMORY_BYTES)
    root = write_files(tmp_path, {"a.pdf": PAPER, "bomb.pdf": bomb, "b.pdf": PAPER})
    with PdfReader() as reader:
        texts = [reader.read(str(root / name)) for name in ("a.pdf", "bomb.pdf", "b.pdf")]
        started = reader.started
    assert texts[0] == texts[2] and texts[0].problems == [] and len(texts[0].pages) == 3
    assert texts[1].pages == [] and "its reader stopped" in texts[1].problems[0]
    assert started == 2


# --- reading them --------------------------------------------------------------------------

PAPER_TEXT = (
    "## Introduction > page 1\n\nForaging Range of Honey Bees\nA field study\n\n"
    "## Introduction > page 2\n\nMethods\nColonies were moved to the heath in June.\n\n"
    "## Results > page 3\n\nResults\nThe waggle run lasts longer for flowers farther from the"
    " hive.\n"
)


def test_every_door_reads_a_pdf_page_by_page_and_a_canvas_as_markdown(tmp_path: Path) -> None:
    """`read_note`, `vaultctx open` and the MCP tool give the one readable text of a file:
    never a PDF's bytes or a canvas's JSON."""
    root = write_files(tmp_path / "vault", VAULT)
    with Workspace.open(root, {"embed": False}) as ws:
        ws.index()
        python = {name: ws.read_note(name).content for name in ("paper.pdf", "Board.canvas")}
    assert python == {
        "paper.pdf": PAPER_TEXT,
        "Board.canvas": canvas_markdown(VAULT["Board.canvas"]),
    }
    runner = CliRunner()
    for name, text in python.items():
        done = runner.invoke(cli, ["open", name, "-V", str(root), "--json"])
        assert done.exit_code == 0, done.output
        assert json.loads(done.output)["content"] == text

    async def steps(client: Client) -> dict[str, object]:
        found = {}
        for name in python:
            result = await client.call_tool("read_note", {"note": name})
            found[name] = json.loads(result.content[0].text)["content"]
        return found

    assert run_session(root, steps, "--no-vectors") == python


def test_a_long_pdf_page_reads_under_its_heading_once(tmp_path: Path) -> None:
    page = "\n\n".join(f"Frame {n} holds capped brood and pollen in rings." for n in range(40))
    root = write_files(tmp_path / "vault", {"long.pdf": make_pdf([page.replace("\n\n", "\n")])})
    with Workspace.open(root, {"embed": False, "chunk_tokens": 32}) as ws:
        ws.index()
        blocks = blocks_of(ws, "long.pdf")
        text = ws.read_note("long.pdf").content
    assert len(blocks) > 1 and {heading for heading, _, _ in blocks} == {"page 1"}
    assert text.count("## page 1") == 1
    assert text == "## page 1\n\n" + "\n\n".join(body for _, body, _ in blocks) + "\n"


# --- links into them -----------------------------------------------------------------------


def test_links_to_pdfs_and_canvases_resolve_and_count_in_the_graph(ws: Workspace) -> None:
    assert links_of(ws, "Reading.md") == [
        ("paper.pdf", "embed", "Papers/paper.pdf"),
        ("Board.canvas", "wiki", "Board.canvas"),
        ("Papers/paper.pdf", "markdown", "Papers/paper.pdf"),
    ]
    related = ws.related("Papers/paper.pdf", use_vectors=False)
    assert "Reading.md" in [c.path for c in related.candidates]


def test_a_pdf_or_canvas_is_named_with_its_extension_as_obsidian_names_it() -> None:
    notes = [(1, "paper.md"), (2, "Papers/paper.pdf"), (3, "Old/paper.pdf"), (4, "Board.canvas")]
    resolver = LinkResolver(notes, [(1, "paper.pdf")])
    resolve = resolver.resolve
    assert resolve("paper", "wiki", "x.md", 9) == 1  # a bare name is a note's
    assert resolve("paper.pdf", "wiki", "x.md", 9) == 3  # the shortest path of that name
    assert resolve("paper.pdf", "wiki", "Papers/x.md", 9) == 2  # its own folder's first
    assert resolve("Papers/paper.pdf", "wiki", "x.md", 9) == 2
    assert resolve("PAPERS/Paper.PDF", "wiki", "x.md", 9) == 2
    assert resolve("board.canvas", "embed", "x.md", 9) == 4
    assert resolve("Board", "wiki", "x.md", 9) is None  # a canvas is never its stem
    assert resolve("Papers/paper.pdf", "canvas", "Deep/Board.canvas", 9) == 2
    assert resolve("missing.pdf", "wiki", "x.md", 9) is None  # not the alias of a note
