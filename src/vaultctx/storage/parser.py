"""Obsidian-compatible Markdown parsing: one note's text to its title, frontmatter, tags,
aliases, blocks and links (`frontmatter.py`, `blocks.py`, `links.py` do each part).

Pure functions over text, no I/O, so they can be property-tested.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .blocks import Block, split_blocks
from .frontmatter import frontmatter_list, frontmatter_str, split_frontmatter
from .links import Link, extract_links, inline_tags
from .markdown import mask_code

# Longer tags and aliases are not kept, with a warning: no name is that long, but a pasted
# blob can look like one (and a database key holds at most a third of a page).
MAX_NAME_CHARS = 256


@dataclass(frozen=True)
class ParsedNote:
    title: str
    frontmatter: dict[str, Any]
    frontmatter_error: str | None
    tags: tuple[str, ...]
    aliases: tuple[str, ...]
    blocks: tuple[Block, ...]
    links: tuple[Link, ...]
    warnings: tuple[str, ...] = field(default=())


def parse_note(text: str, title: str, *, chunk_tokens: int = 200) -> ParsedNote:
    """Parse one note. Never raises on any input text; problems become warnings.

    `title` (the file name) is the note's title unless the frontmatter names one or the
    note opens with an `# H1`: vaults keep titles in all three places, and where a note
    keeps it must not change how it is found."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    front = split_frontmatter(text)
    frontmatter, fm_error, body = front.data, front.error, front.body
    masked = mask_code(body)
    blocks = split_blocks(body, masked, front.body_line, chunk_tokens)
    title = frontmatter_str(frontmatter.get("title")) or _leading_h1(blocks) or title
    links = extract_links(masked, body, front.body_line, [b.start_line for b in blocks])
    tags = unique(
        [
            t.lstrip("#")
            for t in (*frontmatter_list(frontmatter, "tags", "tag"), *inline_tags(masked))
        ],
        lower=True,
    )
    aliases = unique(frontmatter_list(frontmatter, "aliases", "alias"))
    warnings = (f"frontmatter: {fm_error}",) if fm_error else front.warnings
    too_long = [name for name in (*tags, *aliases) if len(name) > MAX_NAME_CHARS]
    if too_long:
        warnings = (
            *warnings,
            *(f"a tag or alias of {len(name)} characters is not kept (at most"
              f" {MAX_NAME_CHARS}): {name[:40]}…" for name in too_long),
        )  # fmt: skip
    return ParsedNote(
        title=title,
        frontmatter=frontmatter,
        frontmatter_error=fm_error,
        tags=tuple(t for t in tags if t and len(t) <= MAX_NAME_CHARS),
        aliases=tuple(a for a in aliases if len(a) <= MAX_NAME_CHARS),
        blocks=tuple(blocks),
        links=tuple(links),
        warnings=warnings,
    )


def _leading_h1(blocks: list[Block]) -> str | None:
    """The text of an `# H1` that opens the note, before any other content."""
    first = blocks[0]
    if first.level == 1 and len(first.heading_path) == 1 and first.heading_path[0]:
        return first.heading_path[0]
    return None


def unique(items: list[str], *, lower: bool = False) -> list[str]:
    """`items` without repeats, ignoring case (lowered with `lower`), first kept."""
    seen: set[str] = set()
    out = []
    for item in items:
        value = item.lower() if lower else item
        key = value.lower()
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out
