"""Obsidian canvases (JSON Canvas 1.0) as notes: text cards are blocks, note cards and the
edges that touch them are links; and a canvas as Markdown, for whoever reads its text.

A card's Markdown is read by the note parser's own parts (`blocks.py`, `links.py`), so a
heading, a long card or a `[[link]]` on a canvas reads as it would in a note. Pure
functions, no I/O; malformed input is a warning, never an exception.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from .blocks import Block, split_blocks
from .links import CANVAS_LINK, Link, extract_links, inline_tags
from .markdown import HEADING, mask_code
from .parser import ParsedNote, unique
from .scanner import is_note_path

_LABEL_CHARS = 120  # a card's first line names its block; a pasted paragraph is cut here


@dataclass(frozen=True)
class _Node:
    id: str
    type: str
    x: float
    y: float
    width: float
    height: float
    raw: dict[str, Any]


def parse_canvas(text: str, title: str, *, chunk_tokens: int = 200) -> ParsedNote:
    """The blocks and links of one canvas file's text. Cards are read top to bottom, left
    to right; a card inside a group has the group's label first in its heading path."""
    warnings: list[str] = []
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return _empty(title, (f"not a JSON Canvas: {_first_line(str(exc))}",))
    if not isinstance(data, dict):
        return _empty(title, ("not a JSON Canvas: the file is not a JSON object",))
    nodes, bad = _nodes(data.get("nodes"))
    if bad:
        warnings.append(f"{bad} canvas node(s) without an id, a type or a position are left out")
    groups = [n for n in nodes if n.type == "group"]
    by_id = {n.id: n for n in nodes}
    blocks: list[Block] = []
    links: list[Link] = []
    tags: list[str] = []
    file_block: dict[str, int] = {}  # note card id -> the ordinal of the block it sits by
    card_block: dict[str, int] = {}  # text or web card id -> the ordinal of its first block
    for node in _reading_order(nodes):
        group = _group_label(node, groups)
        if node.type == "text" and isinstance(node.raw.get("text"), str):
            card = _card_markdown(node.raw["text"])
            masked = mask_code(card)
            first = len(blocks)
            card_block[node.id] = first
            for block in split_blocks(card, masked, 1, chunk_tokens):
                path = block.heading_path or ((_first_line(card),) if card.strip() else ())
                blocks.append(replace(block, ordinal=len(blocks), heading_path=(*group, *path)[:8]))
            starts = [b.start_line for b in blocks[first:]]
            links.extend(
                replace(link, block=first + max(link.block, 0))
                for link in extract_links(masked, card, 1, starts)
            )
            tags.extend(inline_tags(masked))
        elif node.type == "file" and isinstance(node.raw.get("file"), str):
            target = card_link(node.raw["file"], node.raw.get("subpath"))
            if target is not None:
                file_block[node.id] = max(len(blocks) - 1, 0)
                links.append(replace(target, block=file_block[node.id]))
        elif node.type == "link" and isinstance(node.raw.get("url"), str):
            url = node.raw["url"].strip()[:2048]
            if url:
                card_block[node.id] = len(blocks)
                blocks.append(Block(len(blocks), (*group, url[:_LABEL_CHARS]), 0, url, 1, 1, 1))
    links.extend(_edges(data.get("edges"), by_id, file_block, card_block, warnings))
    if not blocks:
        blocks.append(Block(0, (), 0, "", 1, 1, 0))
    return ParsedNote(
        title=title,
        frontmatter={},
        frontmatter_error=None,
        tags=tuple(unique(tags, lower=True)),
        aliases=(),
        blocks=tuple(blocks),
        links=tuple(links),
        warnings=tuple(warnings),
    )


def canvas_markdown(text: str) -> str:
    """A canvas as a person reads it, for a client or a model that asks for its text: the
    cards in reading order, those in a group under its label (`## Summer plan`), a text
    card as its Markdown, a file card as its `[[link]]`, a web card as its URL; then the
    edges, one a line (`- "Plan" → [[Hives.md]]: evidence`). Not JSON Canvas: no text."""
    try:
        data = json.loads(text.removeprefix("\ufeff"))
    except (ValueError, RecursionError):
        return ""
    if not isinstance(data, dict):
        return ""
    nodes, _ = _nodes(data.get("nodes"))
    groups = [n for n in nodes if n.type == "group"]
    sections: dict[tuple[str, ...], list[str]] = {(): []}
    for node in _reading_order(nodes):
        card = _card_text(node)
        if card:
            sections.setdefault(_group_label(node, groups), []).append(card)
    parts: list[str] = []
    for label, cards in sections.items():
        if cards:
            parts.extend([f"## {label[0]}"] if label else [])
            parts.append("\n\n---\n\n".join(cards))
    by_id = {n.id: n for n in nodes}
    edges = _edges_read(data.get("edges"), by_id)
    if edges:
        parts.append("## Connections\n\n" + "\n".join(edges))
    return "\n\n".join(parts) + "\n" if parts else ""


def _card_text(node: _Node) -> str:
    """One card as it reads on the canvas; '' for a group or an empty card."""
    if node.type == "text" and isinstance(node.raw.get("text"), str):
        return _card_markdown(node.raw["text"]).strip()
    if node.type == "file" and isinstance(node.raw.get("file"), str):
        return _file_name(node)
    if node.type == "link" and isinstance(node.raw.get("url"), str):
        return node.raw["url"].strip()[:2048]
    return ""


def _file_name(node: _Node) -> str:
    """A file card as a wiki-link to the file (and its `subpath`)."""
    path = node.raw["file"].strip().lstrip("/")
    subpath = node.raw.get("subpath")
    fragment = subpath.strip() if isinstance(subpath, str) and subpath.strip() else ""
    if fragment and not fragment.startswith("#"):
        fragment = f"#{fragment}"
    return f"[[{path}{fragment}]]" if path else ""


def _card_name(node: _Node) -> str:
    """How an edge's line names a card: a file by its link, a group by its label, a text
    card by its first line in quotes, a web card by its URL."""
    if node.type == "file" and isinstance(node.raw.get("file"), str):
        return _file_name(node) or "a file card"
    if node.type == "group":
        label = node.raw.get("label")
        return f'the group "{_first_line(label)}"' if isinstance(label, str) else "a group"
    if node.type == "link" and isinstance(node.raw.get("url"), str):
        return node.raw["url"].strip()[:_LABEL_CHARS]
    if node.type == "text" and isinstance(node.raw.get("text"), str):
        return f'"{_first_line(_card_markdown(node.raw["text"]))}"'
    return "a card"


_ARROWS = {(False, True): "→", (True, False): "←", (True, True): "↔", (False, False): "—"}


def _edges_read(raw: object, by_id: dict[str, _Node]) -> list[str]:
    """Each edge between two cards on the canvas, as a line: its ends, drawn as its arrows
    are (JSON Canvas: `fromEnd` defaults to none, `toEnd` to an arrow), and its label."""
    lines = []
    for edge in raw if isinstance(raw, list) else []:
        if not isinstance(edge, dict):
            continue
        ends = (edge.get("fromNode"), edge.get("toNode"))
        source, target = (by_id.get(end) if isinstance(end, str) else None for end in ends)
        if source is None or target is None:
            continue
        arrow = _ARROWS[edge.get("fromEnd") == "arrow", edge.get("toEnd", "arrow") != "none"]
        label = edge.get("label")
        said = f": {_first_line(label)}" if isinstance(label, str) and label.strip() else ""
        lines.append(f"- {_card_name(source)} {arrow} {_card_name(target)}{said}")
    return lines


def card_link(path: str, subpath: object = None) -> Link | None:
    """The link of a note card (`file`, from the vault's root, `subpath` like `#Heading`);
    None for a card of an attachment vaultctx does not index (an image)."""
    path = path.strip().lstrip("/")
    if not path or not is_note_path(path.rpartition("/")[2]):
        return None
    fragment = subpath.strip().lstrip("#") if isinstance(subpath, str) else ""
    heading = block_ref = None
    if fragment.startswith("^"):
        block_ref = fragment[1:] or None
    elif fragment:
        heading = fragment.split("#")[-1].strip() or None
    return Link(target=path, kind=CANVAS_LINK, heading=heading, block_ref=block_ref)


def _nodes(raw: object) -> tuple[list[_Node], int]:
    """The well-formed nodes of `raw`, and how many others there were."""
    if not isinstance(raw, list):
        return [], 0 if raw is None else 1
    nodes, bad = [], 0
    seen: set[str] = set()
    for item in raw:
        try:
            node = _Node(
                str(item["id"]),
                str(item["type"]),
                float(item.get("x", 0)),
                float(item.get("y", 0)),
                float(item.get("width", 0)),
                float(item.get("height", 0)),
                item,
            )
        except (TypeError, KeyError, ValueError, AttributeError, OverflowError):
            bad += 1
            continue
        if node.id in seen:
            bad += 1
            continue
        seen.add(node.id)
        nodes.append(node)
    return nodes, bad


def _reading_order(nodes: list[_Node]) -> list[_Node]:
    """Cards top to bottom, then left to right."""
    return sorted(nodes, key=lambda n: (n.y, n.x))


def _card_markdown(text: str) -> str:
    """A text card's Markdown with its line ends made `\n` and no NUL."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")


def _holds(group: _Node, node: _Node) -> bool:
    """Whether `group`'s box holds `node`'s box: JSON Canvas puts a card in a group by
    where it lies, not by a field."""
    return (
        group is not node
        and group.x <= node.x
        and group.y <= node.y
        and node.x + node.width <= group.x + group.width
        and node.y + node.height <= group.y + group.height
    )


def _group_label(node: _Node, groups: list[_Node]) -> tuple[str, ...]:
    """The label of the smallest labelled group whose box holds `node`'s box, if any."""
    holding = [
        g
        for g in groups
        if isinstance(g.raw.get("label"), str) and g.raw["label"].strip() and _holds(g, node)
    ]
    if not holding:
        return ()
    smallest = min(holding, key=lambda g: g.width * g.height)
    return (_first_line(smallest.raw["label"]),)


def _edges(
    raw: object,
    by_id: dict[str, _Node],
    file_block: dict[str, int],
    card_block: dict[str, int],
    warnings: list[str],
) -> list[Link]:
    """An edge that touches a note card is one more link of the canvas to that note, its
    label as the link's text: the canvas says the two cards it joins belong together. The
    note is the card the edge points at (`toNode`), else the card it comes from; the other
    end — a text or web card, a group, another card — is part of the canvas, and the link
    sits in its block. An edge between a group and a card inside it joins nothing the
    card did not (the card is a link already), and an edge to a group is no link to the
    cards in it."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        warnings.append("canvas edges are not a list; left out")
        return []
    links, bad = [], 0
    for edge in raw:
        if not isinstance(edge, dict) or not all(
            isinstance(edge.get(end), str) and edge[end] in by_id for end in ("fromNode", "toNode")
        ):
            bad += 1
            continue
        source, target = by_id[edge["fromNode"]], by_id[edge["toNode"]]
        note, other = (target, source) if target.id in file_block else (source, target)
        if note.id not in file_block or note is other:
            continue
        if other.type == "group" and _holds(other, note):
            continue
        link = card_link(note.raw["file"], note.raw.get("subpath"))
        if link is None:
            continue
        label = edge.get("label")
        alias = _first_line(label) if isinstance(label, str) and label.strip() else None
        block = card_block.get(other.id, file_block.get(other.id, file_block[note.id]))
        links.append(replace(link, alias=alias, block=block))
    if bad:
        warnings.append(f"{bad} canvas edge(s) without both ends on the canvas are left out")
    return links


def _first_line(text: str) -> str:
    """A card's first non-blank line as it reads (a heading without its marks), cut short."""
    for line in text.split("\n"):
        if line.strip():
            m = HEADING.match(line)
            words = (m.group(2) or "") if m else line
            return words.strip()[:_LABEL_CHARS]
    return ""


def _empty(title: str, warnings: tuple[str, ...]) -> ParsedNote:
    return ParsedNote(
        title, {}, None, (), (), (Block(0, (), 0, "", 1, 1, 0),), (), warnings=warnings
    )
