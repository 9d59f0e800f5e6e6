"""Properties of the parser that must hold for any text a vault can contain."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultctx.storage.blocks import estimate_tokens
from vaultctx.storage.parser import parse_note

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text made of Markdown's meaningful pieces, so the parser's branches are actually reached.
FRAGMENTS = st.sampled_from(
    [
        "\n",
        "\n\n",
        " ",
        "# ",
        "## ",
        "---\n",
        "```\n",
        "~~~\n",
        "`",
        "[[",
        "]]",
        "[[Note]]",
        "[[Note#Head|alias]]",
        "![[Embed]]",
        "[[#local]]",
        "[x](Other.md)",
        "#tag",
        "#1",
        "^block-id",
        "|",
        "\\|",
        "tags: [a, b]\n",
        "title: T\n",
        "https://example.com/#frag",
        "word",
        "Another sentence. ",
        "é",
        "\t",
        "\r\n",
        "\x00",
    ]
)
MARKDOWNISH = st.lists(st.one_of(FRAGMENTS, st.text(max_size=8)), max_size=60).map("".join)
ANY_TEXT = st.one_of(st.text(), MARKDOWNISH)
WORD = st.from_regex(r"[a-z]{1,12}", fullmatch=True)
# Words heavy in punctuation: each is many tokens by the estimate (URLs, code, dotted names).
PROSE_WORD = st.one_of(
    WORD,
    st.sampled_from(["https://bees.example/a/b?c=1", "x=f(y)[0];", "a.b.c.d.e", "—", "…"]),
)


def word_set(text: str) -> set[str]:
    return set(re.findall(r"\w+", text))


@SETTINGS
@given(text=ANY_TEXT, limit=st.integers(32, 300))
def test_any_text_parses_without_raising(text, limit):
    note = parse_note(text, "Title", chunk_tokens=limit)
    assert note.blocks, "every note has at least one block"
    assert [b.ordinal for b in note.blocks] == list(range(len(note.blocks)))


@SETTINGS
@given(text=ANY_TEXT)
def test_parsing_is_deterministic(text):
    assert parse_note(text, "Title") == parse_note(text, "Title")


@SETTINGS
@given(
    before=st.lists(WORD, max_size=5).map(" ".join),
    inside=st.lists(WORD, min_size=1, max_size=5),
    fence=st.sampled_from(["```", "~~~", "````", "```python", "~~~ text"]),
    after=st.lists(WORD, max_size=5).map(" ".join),
    inline=st.booleans(),
)
def test_links_and_tags_never_come_from_code(before, inside, fence, after, inline):
    code_links = " ".join(f"[[{w}]] #{w} ![[{w}]] [{w}]({w}.md)" for w in inside)
    if inline:
        text = f"{before} `{code_links}` {after}\n"
    else:
        closing = re.match(r"[`~]+", fence).group()
        text = f"{before}\n{fence}\n{code_links}\n{closing}\n{after}\n"
    note = parse_note(text, "Title")
    assert note.links == ()
    assert note.tags == ()
    # the code is kept as searchable text all the same
    assert word_set(code_links) <= word_set(" ".join(b.text for b in note.blocks))


@SETTINGS
@given(
    level=st.integers(1, 6),
    before=st.lists(WORD, max_size=2),
    code=st.lists(WORD, min_size=1, max_size=3),
    after=st.lists(WORD, max_size=2),
    ticks=st.sampled_from(["`", "``"]),
)
def test_a_headings_code_spans_are_part_of_its_text(level, before, code, after, ticks):
    span = ticks + " ".join(code) + ticks
    heading = " ".join([*before, span, *after])
    note = parse_note(f"{'#' * level} {heading}\nbody\n", "Title")
    assert note.blocks[0].heading == " ".join([*before, *code, *after])


@SETTINGS
@given(
    sections=st.lists(
        st.tuples(
            st.integers(0, 4),  # heading level, 0 = no heading
            st.lists(WORD, min_size=1, max_size=3),  # heading words
            st.lists(st.lists(PROSE_WORD, min_size=0, max_size=80), max_size=6),  # paragraphs
        ),
        max_size=6,
    ),
    limit=st.integers(32, 120),
)
def test_blocks_cover_the_text_within_the_token_limit(sections, limit):
    parts = []
    for level, heading, paragraphs in sections:
        if level:
            parts.append("#" * level + " " + " ".join(heading))
        parts.extend(" ".join(p) + "." for p in paragraphs)
    text = "\n\n".join(parts)
    note = parse_note(text, "Title", chunk_tokens=limit)
    covered = " ".join(b.text + " " + " ".join(b.heading_path) for b in note.blocks)
    assert word_set(text) <= word_set(covered)
    for block in note.blocks:
        assert estimate_tokens(block.text) <= limit
    lines = text.split("\n")
    for block in note.blocks:
        span = "\n".join(lines[block.start_line - 1 : block.end_line])
        assert word_set(block.text) <= word_set(span), "a block's lines hold its text"


@SETTINGS
@given(text=MARKDOWNISH)
def test_every_link_line_number_points_at_its_link(text):
    note = parse_note(text, "Title")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "").split("\n")
    for link in note.links:
        assert 1 <= link.line <= len(lines)
        line = lines[link.line - 1]
        assert "[[" in line or "](" in line
        assert 0 <= link.block < len(note.blocks)


@SETTINGS
@given(text=st.one_of(st.text(st.characters(max_codepoint=127)), MARKDOWNISH, st.text()))
def test_the_token_estimate_is_words_plus_other_marks_for_any_text(text):
    # ASCII text takes a byte-translation shortcut; it must count exactly what the rule says.
    assert estimate_tokens(text) == len(re.findall(r"\w+|[^\w\s]", text))


# Frontmatter lines, read or not: valid YAML, broken YAML, and YAML that is not a mapping.
# Their words are upper case, so no body word (lower case) can be one of them.
FRONTMATTER_LINE = st.sampled_from(
    [
        "TAGS: [FORAGE, AUTUMN]\n",
        "TAGS: [FORAGE, AUTUMN\n",
        "CREATED: 2024-10-05\n",
        "TITLE: 'UNCLOSED\n",
        "- LISTED\n",
        "KEY: : VALUE\n",
        "\tTABBED: INDENT\n",
        "ALIASES: {BROKEN\n",
        "PLAIN WORDS\n",
    ]
)


@SETTINGS
@given(
    front=st.lists(FRONTMATTER_LINE, max_size=6).map("".join),
    closing=st.sampled_from(["---", "..."]),
    body=st.lists(st.lists(WORD, min_size=1, max_size=8).map(" ".join), max_size=4),
)
def test_a_fenced_frontmatter_is_never_body_text_even_when_its_yaml_is_broken(front, closing, body):
    body_text = "\n\n".join(body)
    note = parse_note(f"---\n{front}{closing}\n{body_text}\n", "title")
    indexed = word_set(" ".join(b.text + " " + " ".join(b.heading_path) for b in note.blocks))
    assert not word_set(front) & indexed
    assert word_set(body_text) <= indexed
    if note.frontmatter_error:
        assert note.warnings == (f"frontmatter: {note.frontmatter_error}",)
    lines = ["---", *front.splitlines(), closing, *body_text.split("\n")]
    for block in note.blocks:
        span = "\n".join(lines[block.start_line - 1 : block.end_line])
        assert word_set(block.text) <= word_set(span), "a block's lines hold its text"
