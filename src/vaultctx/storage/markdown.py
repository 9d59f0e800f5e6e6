"""Markdown syntax every parser pass shares: fenced and inline code, heading lines, wiki links.

Code is masked with spaces (newlines kept) before links, tags and headings are read, which
keeps every offset and line number of the original text valid.
"""

from __future__ import annotations

import re
from collections.abc import Callable

FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
WIKI_LINK = re.compile(r"\[\[([^\[\]\n]+?)\]\]")
_INLINE_CODE = r"(?<!`)(?P<ticks>`+)(?!`)(?:(?!\n[ \t]*\n).)+?(?<!`)(?P=ticks)(?!`)"
# Whichever opens first wins, as in Obsidian: a code span hides the links inside it, and a
# link may hold backticks (`[[Filters#`wikilink`|wikilink]]`, a heading that is code).
_LINK_OR_CODE = re.compile(rf"(?P<link>{WIKI_LINK.pattern})|{_INLINE_CODE}", re.DOTALL)


def mask_code(text: str) -> str:
    """Replace fenced code blocks and inline code spans by spaces, keeping newlines; a
    wiki link that opens before a code span is kept whole."""
    lines = text.split("\n")
    fence: str | None = None
    for i, line in enumerate(lines):
        if fence is None:
            m = FENCE_OPEN.match(line)
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence = m.group(1)
                lines[i] = " " * len(line)
        else:
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            lines[i] = " " * len(line)
    masked = "\n".join(lines)
    if "`" in masked:
        masked = _LINK_OR_CODE.sub(lambda m: m.group(0) if m["link"] else blank(m.group(0)), masked)
    return masked


def as_read(text: str, link: Callable[[str], str]) -> str:
    """A line as it reads: each wiki link as `link` of its inner text, each inline code span
    as its words (`` `ob publish` `` is `ob publish`, a link inside code stays as written)."""
    if "[[" not in text and "`" not in text:
        return text
    return _LINK_OR_CODE.sub(
        lambda m: link(m.group(2)) if m["link"] else m.group(0).strip("`").strip(), text
    )


def blank(s: str) -> str:
    return "\n".join(" " * len(part) for part in s.split("\n"))
