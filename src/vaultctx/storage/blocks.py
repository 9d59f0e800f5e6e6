"""Blocks: a note's body cut at its headings, long sections packed into chunks of about
`chunk_tokens` tokens paragraph by paragraph; and the tokenizer-free token estimate."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

from .links import link_label
from .markdown import FENCE_OPEN, HEADING, as_read

_BLOCK_REF = re.compile(r"(?:^|\s)\^([A-Za-z0-9\-]+)[ \t]*$", re.MULTILINE)
TOKEN = re.compile(r"\w+|[^\w\s]")  # one token of estimate_tokens: a word or a mark
_ASCII_PUNCT = bytes(c for c in range(128) if not (chr(c).isalnum() or c == 95 or chr(c).isspace()))
_ASCII_SPACE = bytes(c for c in range(128) if chr(c).isspace())  # str's \s, \x1c-\x1f too
_PUNCT_TO_SPACE = bytes.maketrans(
    _ASCII_PUNCT + _ASCII_SPACE, b" " * (len(_ASCII_PUNCT) + len(_ASCII_SPACE))
)
# A run of non-blank lines; possessive, so a line of spaces is not scanned quadratically.
_PARAGRAPH = re.compile(r"^[^\S\n]*+\S.*(?:\n[^\S\n]*+\S.*)*", re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Block:
    """A searchable unit: a heading section, or one chunk of a long section."""

    ordinal: int
    heading_path: tuple[str, ...]
    level: int
    text: str
    start_line: int
    end_line: int
    tokens: int
    block_refs: tuple[str, ...] = ()

    @property
    def heading(self) -> str:
        return self.heading_path[-1] if self.heading_path else ""


def estimate_tokens(text: str) -> int:
    """A cheap, tokenizer-free token count: words and punctuation marks.

    ASCII text (most paragraphs) is counted with byte translations, 3.5x faster than the
    regex and equal to it: runs of word characters, plus one per other non-space character.
    """
    if text.isascii():
        data = text.encode("ascii")
        words = len(data.translate(_PUNCT_TO_SPACE).split())
        return words + len(data) - len(data.translate(None, _ASCII_PUNCT))
    return len(TOKEN.findall(text))


def split_blocks(body: str, masked: str, first_line: int, chunk_tokens: int) -> list[Block]:
    """Split at headings (outside code) and chunk long sections paragraph by paragraph."""
    lines = body.split("\n")
    # (heading path, its tokens, level, heading line index, first content line index)
    starts: list[tuple[tuple[str, ...], int, int, int, int]] = [((), 0, 0, 0, 0)]
    stack: list[tuple[int, str, int]] = []  # (level, heading, its tokens)
    line_no = offset = 0
    for start in _hash_line_starts(masked):  # only lines that may be headings
        line_no += masked.count("\n", offset, start)
        offset = start
        end = masked.find("\n", offset)
        m = HEADING.match(masked[offset : end if end >= 0 else len(masked)])
        line = lines[line_no]
        if not m or not line.lstrip().startswith("#"):
            continue
        heading_level = len(m.group(1))
        # The masked line says it is a heading (its '#' is no code); the line as written
        # says what it reads, code spans included.
        written = HEADING.match(line)
        heading_text = _clean_heading(written.group(2) or "" if written else "")
        while stack and stack[-1][0] >= heading_level:
            stack.pop()
        stack.append((heading_level, heading_text, estimate_tokens(heading_text)))
        path = tuple(h for _, h, _ in stack)
        starts.append((path, sum(t for _, _, t in stack), heading_level, line_no, line_no + 1))

    blocks: list[Block] = []
    ends = [s[3] for s in starts[1:]] + [len(lines)]
    for (heading_path, heading_tokens, heading_level, start_idx, body_offset), end_idx in zip(
        starts, ends, strict=True
    ):
        section_lines = lines[body_offset:end_idx]
        section = "\n".join(section_lines)
        has_heading = bool(heading_path) or heading_level > 0
        if not has_heading and not section.strip():
            continue
        for chunk, line_off, n_lines, tokens in _chunk_section(
            section_lines, section, chunk_tokens
        ):
            start_line = first_line + body_offset + line_off
            blocks.append(
                Block(
                    ordinal=len(blocks),
                    heading_path=heading_path,
                    level=heading_level,
                    text=chunk,
                    start_line=start_line if chunk else first_line + start_idx,
                    end_line=start_line + max(n_lines - 1, 0),
                    tokens=tokens + heading_tokens,
                    block_refs=tuple(_BLOCK_REF.findall(chunk)) if "^" in chunk else (),
                )
            )
    if not blocks:
        blocks.append(Block(0, (), 0, "", first_line, first_line, 0))
    return blocks


def _hash_line_starts(text: str) -> Iterator[int]:
    """Offsets of the lines that start with '#' after at most three spaces.

    Jumping from '#' to '#' with str.find is 13x faster than a `^ {0,3}#` regex, which
    tries every position of the text.
    """
    i = text.find("#")
    while i >= 0:  # i is the first '#' of its line: later ones on the line cannot qualify
        line_start = text.rfind("\n", 0, i) + 1
        if i - line_start <= 3 and not text[line_start:i].strip(" "):
            yield line_start
        i = text.find("\n", i)
        if i < 0:
            return
        i = text.find("#", i)


def _clean_heading(text: str) -> str:
    return as_read(_BLOCK_REF.sub("", text).strip(), link_label)


def chunk_paragraphs(lines: list[str], limit: int) -> list[tuple[str, int, int, int]]:
    """`_chunk_section` of text that has no headings (a PDF's page)."""
    return _chunk_section(lines, "\n".join(lines), limit)


def _chunk_section(lines: list[str], section: str, limit: int) -> list[tuple[str, int, int, int]]:
    """Pack paragraphs into chunks of at most `limit` tokens; `section` is the lines joined.

    Returns (text, first line, line count, tokens) per chunk.

    Fenced code stays in one paragraph; a paragraph over the limit is split by sentences,
    then by words, so a huge note is indexed in pieces instead of truncated.
    """
    paragraphs = _paragraphs(lines, section)
    if not paragraphs:
        return [("", 0, 1, 0)]
    counts = [estimate_tokens(text) for _, _, text in paragraphs]
    total = sum(counts)  # blank lines between paragraphs hold no tokens
    if total <= limit:  # the common case: the section is one chunk
        first, last = paragraphs[0][0], paragraphs[-1][0] + paragraphs[-1][1] - 1
        return [("\n\n".join(text for _, _, text in paragraphs), first, last - first + 1, total)]

    chunks: list[tuple[str, int, int, int]] = []
    buf: list[str] = []
    buf_tokens = 0
    buf_start = buf_end = 0
    for (start, n_lines, para), tokens in zip(paragraphs, counts, strict=True):
        end = start + n_lines - 1
        if tokens > limit:
            if buf:
                chunks.append(("\n\n".join(buf), buf_start, buf_end - buf_start + 1, buf_tokens))
                buf, buf_tokens = [], 0
            for piece in _split_long(para, limit):
                chunks.append((piece, start, end - start + 1, estimate_tokens(piece)))
            continue
        if buf and buf_tokens + tokens > limit:
            chunks.append(("\n\n".join(buf), buf_start, buf_end - buf_start + 1, buf_tokens))
            buf, buf_tokens = [], 0
        if not buf:
            buf_start = start
        buf.append(para)
        buf_tokens += tokens
        buf_end = end
    if buf:
        chunks.append(("\n\n".join(buf), buf_start, buf_end - buf_start + 1, buf_tokens))
    return chunks


def _paragraphs(lines: list[str], section: str) -> list[tuple[int, int, str]]:
    """(first line, line count, text) of each run of non-blank lines; a fenced code block
    is one paragraph, blank lines and all."""
    if "```" not in section and "~~~" not in section:  # no fence: a regex finds them all
        found = []
        first = offset = 0
        for run in _PARAGRAPH.finditer(section):
            first += section.count("\n", offset, run.start())
            offset = run.start()
            text = run.group()
            found.append((first, text.count("\n") + 1, text.strip()))
        return found
    runs: list[tuple[int, list[str]]] = []
    cur: list[str] = []
    cur_start = 0
    fence: str | None = None
    for i, line in enumerate(lines):
        if fence is None:
            m = FENCE_OPEN.match(line)
            if m:
                fence = m.group(1)
            elif not line.strip():
                if cur:
                    runs.append((cur_start, cur))
                cur = []
                continue
        else:
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
        if not cur:
            cur_start = i
        cur.append(line)
    if cur:
        runs.append((cur_start, cur))
    return [(start, len(run), "\n".join(run).strip()) for start, run in runs]


def _split_long(text: str, limit: int) -> list[str]:
    """Split by sentences, a long sentence by words, a long word at token boundaries."""
    pieces: list[str] = []
    buf: list[str] = []
    buf_tokens = 0
    for sentence in _SENTENCE_END.split(text):
        units = [sentence]
        if estimate_tokens(sentence) > limit:
            units = []
            for word in sentence.split():
                starts = [m.start() for m in TOKEN.finditer(word)]
                if len(starts) <= limit:
                    units.append(word)
                    continue
                cuts = [*starts[::limit], len(word)]  # a token never spans a cut
                units.extend(word[a:b] for a, b in itertools.pairwise(cuts))
        for unit in units:
            n = estimate_tokens(unit)
            if buf and buf_tokens + n > limit:
                pieces.append(" ".join(buf))
                buf, buf_tokens = [], 0
            buf.append(unit)
            buf_tokens += n
    if buf:
        pieces.append(" ".join(buf))
    return [p for p in pieces if p.strip()]
