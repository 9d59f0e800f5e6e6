"""The Markdown parser: what a note's text turns into, syntax by syntax.

`parse_note(text, title)` is pure, so these tests need no files.
"""

from __future__ import annotations

import re
import time

import pytest

from vaultctx.storage.blocks import estimate_tokens
from vaultctx.storage.links import Link
from vaultctx.storage.parser import MAX_NAME_CHARS, parse_note


def parse(text: str, title: str = "Note", **kw):
    return parse_note(text, title, **kw)


def targets(text: str) -> list[str]:
    return [link.target for link in parse(text).links]


def targets_of(note) -> list[str]:
    return [link.target for link in note.links]


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text))


# --- frontmatter ---------------------------------------------------------------------------


def test_frontmatter_title_overrides_the_file_name():
    note = parse("---\ntitle: Spring Inspection\n---\nBody.\n", title="2025-03-15")
    assert note.title == "Spring Inspection"
    assert note.frontmatter == {"title": "Spring Inspection"}


def test_without_frontmatter_the_title_is_the_file_name():
    assert parse("Just text.\n", title="Inbox item").title == "Inbox item"


def test_frontmatter_is_not_part_of_any_block():
    note = parse("---\nstatus: secret-value\n---\nBody text.\n")
    assert [b.text for b in note.blocks] == ["Body text."]
    assert note.blocks[0].start_line == 4


def test_frontmatter_tags_as_a_list():
    note = parse("---\ntags: [Pests, pests/varroa]\n---\nx\n")
    assert note.tags == ("pests", "pests/varroa")


def test_frontmatter_tags_as_a_block_list():
    note = parse("---\ntags:\n  - moc\n  - beekeeping\n---\nx\n")
    assert note.tags == ("moc", "beekeeping")


def test_frontmatter_tags_as_a_comma_or_space_separated_string():
    assert parse("---\ntags: inbox, wax\n---\n").tags == ("inbox", "wax")
    assert parse("---\ntags: inbox wax idea\n---\n").tags == ("inbox", "wax", "idea")


def test_frontmatter_tag_singular_key_is_accepted():
    assert parse("---\ntag: journal\n---\n").tags == ("journal",)


def test_a_tag_written_with_hash_in_frontmatter_and_inline_is_listed_once():
    note = parse('---\ntags: ["#bee", wax]\n---\nAbout #bee and #Wax.\n')
    assert note.tags == ("bee", "wax")


def test_frontmatter_aliases_as_a_list_keep_spaces_and_case():
    note = parse("---\naliases: [varroa, Varroa destructor]\n---\n")
    assert note.aliases == ("varroa", "Varroa destructor")


def test_frontmatter_aliases_as_a_comma_separated_string():
    note = parse("---\naliases: Clover, Hive 1\n---\n")
    assert note.aliases == ("Clover", "Hive 1")


def test_frontmatter_alias_singular_key_is_accepted():
    assert parse("---\nalias: OA\n---\n").aliases == ("OA",)


def test_frontmatter_dates_become_iso_strings():
    note = parse("---\ncreated: 2024-10-05\n---\n")
    assert note.frontmatter == {"created": "2024-10-05"}


def test_malformed_yaml_is_a_warning_and_its_fence_is_not_body_text():
    text = (
        "---\ntags: [forage, autumn\ncreated: 2024-10-05\n---\n"
        "# Ivy\n\nHedera helix flowers late.\n"
    )
    note = parse(text)
    assert note.frontmatter == {}
    assert note.frontmatter_error is not None
    assert len(note.warnings) == 1
    assert note.warnings[0].startswith("frontmatter: invalid YAML")
    everything = " ".join(b.text for b in note.blocks)
    assert {"Hedera", "helix", "flowers"} <= words(everything)
    assert not {"forage", "autumn", "created"} & words(everything)
    assert note.title == "Ivy"
    assert note.blocks[0].start_line == 7  # "Hedera helix flowers late."


def test_unclosed_frontmatter_is_a_warning_and_kept_as_text():
    note = parse("---\ntitle: Draft\nno closing line here\n")
    assert note.warnings == ("frontmatter: opening '---' is never closed",)
    assert note.title == "Note"
    assert "no closing line here" in note.blocks[0].text


def test_frontmatter_that_is_not_a_mapping_is_a_warning():
    note = parse("---\n- a\n- b\n---\nbody\n")
    assert note.warnings == ("frontmatter: expected a mapping, got list",)
    assert "body" in note.blocks[-1].text


def test_a_tag_or_alias_longer_than_any_name_is_a_warning_not_a_name():
    blob = "x7" * 300
    note = parse(f"---\naliases: [Hive log, {blob}]\ntags: [apiary]\n---\nSee #t{blob} #bees\n")
    assert note.aliases == ("Hive log",)
    assert note.tags == ("apiary", "bees")
    assert sorted(w.split(" characters")[0] for w in note.warnings) == [
        "a tag or alias of 600",  # the alias
        "a tag or alias of 601",  # the tag, "t" and the blob
    ]
    at_most = parse(f"---\naliases: [{'a' * MAX_NAME_CHARS}]\n---\nbody\n")
    assert at_most.aliases == ("a" * MAX_NAME_CHARS,) and at_most.warnings == ()


def test_a_thematic_break_later_in_the_note_is_not_frontmatter():
    note = parse("Intro\n\n---\nfoo: bar\n---\n")
    assert note.frontmatter == {}
    assert note.warnings == ()
    assert "foo: bar" in note.blocks[0].text


def test_self_referencing_yaml_anchor_is_a_warning_not_a_crash():
    note = parse("---\nloop: &x [*x]\n---\nStill indexed.\n")
    assert note.frontmatter == {}
    assert len(note.warnings) == 1
    assert note.warnings[0].startswith("frontmatter:")
    assert "Still indexed." in " ".join(b.text for b in note.blocks)


@pytest.mark.parametrize("depth", [600, 50_000])
def test_absurdly_nested_yaml_is_a_warning_not_a_crash(depth):
    # Deep nesting used to raise RecursionError, and at 50,000 levels libyaml overflowed the
    # C stack and killed the process.
    note = parse("---\na: " + "[" * depth + "]" * depth + "\n---\nbody\n")
    assert note.frontmatter == {}
    assert note.warnings and note.warnings[0].startswith("frontmatter:")


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("2023-02-30", "'2023-02-30' is not a valid date"),
        ("2023-13-01", "'2023-13-01' is not a valid date"),
        ("2001-12-14t21:59:43.10-25:00", "is not a valid date"),
        ("!!timestamp someday", "'someday' is not a valid date"),
        ("9" * 5000, "a 5000-character number"),
        ("0x" + "f" * 40, "is too large a number"),
        ("-9223372036854775809", "is too large a number"),
    ],
)
def test_a_value_python_cannot_hold_is_kept_as_written_with_a_warning(value, why):
    note = parse(f"---\ntitle: Feb\ntags: [bees]\nwhen: {value}\n---\nhello hive\n")
    assert note.frontmatter["when"] == value.removeprefix("!!timestamp ")
    assert (note.title, note.tags) == ("Feb", ("bees",))  # the rest of the frontmatter stays
    (warning,) = note.warnings
    assert warning.startswith("frontmatter: line 4: ") and why in warning
    assert warning.endswith("; kept as text")
    assert note.frontmatter_error is None
    assert note.blocks[0].text == "hello hive"


def test_numbers_that_fit_in_64_bits_and_valid_dates_stay_typed():
    note = parse("---\na: 9223372036854775807\nb: -12\nc: 2024-02-29\nd: 1.5\n---\n")
    assert note.frontmatter == {"a": 2**63 - 1, "b": -12, "c": "2024-02-29", "d": 1.5}
    assert note.warnings == ()


def test_infinite_and_nan_numbers_stay_as_written_since_json_has_none():
    note = parse("---\na: .inf\nb: -.Inf\nc: .nan\n---\n")
    assert note.frontmatter == {"a": ".inf", "b": "-.Inf", "c": ".nan"}


def test_aliases_that_expand_modestly_are_read():
    note = parse("---\nbase: &b {kind: hive, colour: red}\nclover: *b\nivy: [*b, *b]\n---\n")
    hive = {"kind": "hive", "colour": "red"}
    assert note.frontmatter == {"base": hive, "clover": hive, "ivy": [hive, hive]}


def test_escaped_utf16_halves_are_joined_and_a_lone_one_is_replaced():
    # libyaml refuses such escapes; the pure-Python loader (taken for text with many
    # nesting characters) accepts them, and SQLite cannot store a lone surrogate.
    padding = "pad: '" + ":" * 2100 + "'\n"
    note = parse(f'---\nok: "\\ud83d\\ude00"\nlone: "a\\ud800b"\n{padding}---\n')
    assert (note.frontmatter["ok"], note.frontmatter["lone"]) == ("\U0001f600", "a\ufffdb")


# --- blocks ----------------------------------------------------------------------------------


def test_headings_split_the_note_into_blocks_with_their_heading_path():
    note = parse(
        "Intro line.\n"
        "# Varroa\n"
        "About mites.\n"
        "## Treatment\n"
        "Oxalic acid.\n"
        "### Dose\n"
        "5 ml per seam.\n"
        "## Monitoring\n"
        "Sugar roll.\n"
        "# Other\n"
        "Wax moth.\n"
    )
    assert [(b.heading_path, b.level, b.text) for b in note.blocks] == [
        ((), 0, "Intro line."),
        (("Varroa",), 1, "About mites."),
        (("Varroa", "Treatment"), 2, "Oxalic acid."),
        (("Varroa", "Treatment", "Dose"), 3, "5 ml per seam."),
        (("Varroa", "Monitoring"), 2, "Sugar roll."),
        (("Other",), 1, "Wax moth."),
    ]
    assert [b.ordinal for b in note.blocks] == list(range(6))
    assert note.blocks[3].heading == "Dose"


def test_block_line_numbers_point_at_the_text_in_the_file():
    text = "---\ntags: [a]\n---\n# Title\n\nFirst paragraph.\n\n## Part\nLine one.\nLine two.\n"
    note = parse(text)
    lines = text.split("\n")
    assert [(b.start_line, b.end_line) for b in note.blocks] == [(6, 6), (9, 10)]
    assert lines[note.blocks[0].start_line - 1] == "First paragraph."
    part = note.blocks[1]
    assert lines[part.start_line - 1] == "Line one."
    assert lines[part.end_line - 1] == "Line two."


def test_heading_text_is_cleaned_of_closing_hashes_links_and_block_ids():
    note = parse("## Treatment ##\nx\n## See [[Oxalic Acid|OA]] ^sec\ny\n")
    assert [b.heading for b in note.blocks] == ["Treatment", "See OA"]


def test_a_heading_that_is_code_keeps_its_words():
    note = parse("# Commands\n### `ob publish`\nx\n### Run `ob sync` now\ny\n### Use `a`\nz\n")
    assert [b.heading_path for b in note.blocks[1:]] == [
        ("Commands", "ob publish"),
        ("Commands", "Run ob sync now"),
        ("Commands", "Use a"),
    ]


def test_a_link_inside_a_headings_code_stays_as_written():
    note = parse("## See [[Oxalic Acid|OA]] and `[[x]]`\ny\n")
    assert note.blocks[0].heading == "See OA and [[x]]"


def test_a_hash_line_inside_a_code_fence_is_not_a_heading():
    note = parse("# Real\n```bash\n# a shell comment\necho hi\n```\n")
    assert [b.heading_path for b in note.blocks] == [("Real",)]
    assert "# a shell comment" in note.blocks[0].text


def test_seven_hashes_or_no_space_is_not_a_heading():
    note = parse("####### not a heading\n#tag not a heading either\n")
    assert len(note.blocks) == 1
    assert note.blocks[0].heading_path == ()


def test_an_empty_heading_section_is_still_a_block():
    note = parse("# Empty\n# Full\ntext\n")
    assert [(b.heading, b.text) for b in note.blocks] == [("Empty", ""), ("Full", "text")]


def test_block_ids_are_recorded_on_their_block():
    note = parse("# A\nFirst point. ^first-point\n\nSecond. ^p2\n# B\nNo id here ^ not-an-id\n")
    assert note.blocks[0].block_refs == ("first-point", "p2")
    assert note.blocks[1].block_refs == ()


def test_empty_text_gives_one_empty_block():
    note = parse("")
    assert len(note.blocks) == 1
    assert note.blocks[0].text == ""
    assert note.links == () and note.tags == ()


def test_frontmatter_only_note_gives_one_empty_block():
    note = parse("---\ntags: [inbox, wax]\n---\n")
    assert [b.text for b in note.blocks] == [""]
    assert note.tags == ("inbox", "wax")


# --- chunking --------------------------------------------------------------------------------


def test_short_paragraphs_share_one_block():
    note = parse("# H\nOne.\n\nTwo.\n\nThree.\n")
    assert [b.text for b in note.blocks] == ["One.\n\nTwo.\n\nThree."]


def test_long_sections_are_chunked_at_paragraph_boundaries():
    paragraphs = [f"Paragraph {i} " + " ".join(f"w{i}x{j}" for j in range(20)) for i in range(30)]
    note = parse("# Long\n" + "\n\n".join(paragraphs), chunk_tokens=64)
    assert len(note.blocks) > 5
    for block in note.blocks:
        assert estimate_tokens(block.text) <= 64
        assert block.heading_path == ("Long",)
        # whole paragraphs: every chunk starts and ends at a paragraph boundary
        for part in block.text.split("\n\n"):
            assert part in paragraphs
    assert [p for b in note.blocks for p in b.text.split("\n\n")] == paragraphs


def test_a_paragraph_over_the_limit_is_split_by_sentences_and_nothing_is_lost():
    sentence = "The colony builds {n} frames of comb in a good week."
    para = " ".join(sentence.format(n=i) for i in range(100))
    note = parse(para, chunk_tokens=40)
    assert len(note.blocks) > 10
    assert all(estimate_tokens(b.text) <= 40 for b in note.blocks)
    assert " ".join(b.text for b in note.blocks) == para


@pytest.mark.parametrize(
    "para",
    [
        " ".join(f"https://example.com/hives/{i}/frames?x={i}" for i in range(300)),
        "```\n" + "\n".join(f"x = foo({i}) + bar[{i}]" for i in range(200)) + "\n```",
        "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z" * 20,
        " ".join(["word"] * 5000),
    ],
    ids=["urls", "code", "one-punctuated-word", "no-sentences"],
)
def test_no_chunk_is_over_the_token_limit_whatever_the_text(para):
    note = parse("# H\n" + para, chunk_tokens=64)
    assert max(estimate_tokens(b.text) for b in note.blocks) <= 64
    assert words(" ".join(b.text for b in note.blocks)) == words(para)


def test_a_single_token_longer_than_the_limit_is_kept_whole():
    token = "a" * 5000  # one token by the estimate: cannot be split, must not be lost
    note = parse(f"before {token} after", chunk_tokens=32)
    assert any(token in b.text.split() for b in note.blocks)
    assert " ".join(b.text for b in note.blocks) == f"before {token} after"


def test_chunk_line_ranges_point_at_their_paragraphs():
    paragraphs = [" ".join(f"p{i}w{j}" for j in range(30)) for i in range(6)]
    text = "# H\n" + "\n\n".join(paragraphs) + "\n"
    lines = text.split("\n")
    for block in parse(text, chunk_tokens=64).blocks:
        span = "\n".join(lines[block.start_line - 1 : block.end_line])
        assert words(block.text) <= words(span)


# --- wiki-links ------------------------------------------------------------------------------


def test_wiki_link_forms():
    note = parse(
        "[[Varroa Mites]] [[Oxalic Acid|OA]] [[Swarming#Prevention]] [[Bee Biology#^drones]]"
        " ![[Mite Counting Methods#Thresholds]] [[#Local heading]] [[#^local-block]]"
    )
    assert [(lk.target, lk.kind, lk.heading, lk.block_ref, lk.alias) for lk in note.links] == [
        ("Varroa Mites", "wiki", None, None, None),
        ("Oxalic Acid", "wiki", None, None, "OA"),
        ("Swarming", "wiki", "Prevention", None, None),
        ("Bee Biology", "wiki", None, "drones", None),
        ("Mite Counting Methods", "embed", "Thresholds", None, None),
        ("", "wiki", "Local heading", None, None),
        ("", "wiki", None, "local-block", None),
    ]


def test_wiki_link_with_heading_and_alias():
    (link,) = parse("[[Swarming#Artificial swarm|the split]]").links
    assert link == Link("Swarming", "wiki", "Artificial swarm", None, "the split", 1, 0)


def test_wiki_link_to_a_nested_heading_keeps_the_last_heading():
    (link,) = parse("[[Swarming#Control#Artificial swarm]]").links
    assert link.heading == "Artificial swarm"


def test_wiki_link_with_md_extension_or_folder():
    assert targets("[[Hive Tool.md]] [[Reference/Archive/Smoker]]") == [
        "Hive Tool",
        "Reference/Archive/Smoker",
    ]


def test_escaped_pipe_in_a_table_cell_is_the_alias_separator():
    note = parse("| When | What |\n|---|---|\n| August | [[Thymol Treatment\\|thymol]] |\n")
    assert [(lk.target, lk.alias, lk.line) for lk in note.links] == [
        ("Thymol Treatment", "thymol", 3)
    ]


def test_images_and_sounds_are_not_links_but_pdfs_and_canvases_are():
    text = "![[hive.png]] ![[Scan.PDF#page=2]] [[recording.m4a]] ![[board.canvas]] [[Note.v2]]"
    assert targets(text) == ["Scan.PDF", "board.canvas", "Note.v2"]
    pdf = parse("See ![[Scan.PDF#page=2]].").links[0]
    assert (pdf.kind, pdf.heading) == ("embed", "page=2")


def test_markdown_links_to_pdfs_and_canvases_are_links():
    assert targets("[scan](Papers/Scan%20one.pdf#page=4) [b](board.canvas) [i](hive.png)") == [
        "Papers/Scan one.pdf",
        "board.canvas",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[[Canvas]]", ("Canvas", "wiki", None, None)),
        ("[[canvas]]", ("canvas", "wiki", None, None)),
        (
            "[[Canvas#Add cards from web pages]]",
            ("Canvas", "wiki", "Add cards from web pages", None),
        ),
        ("[[PDF]]", ("PDF", "wiki", None, None)),
        ("[[Base|a base]]", ("Base", "wiki", None, "a base")),
        ("[[CSV#Head]]", ("CSV", "wiki", "Head", None)),
        ("[[Zip]]", ("Zip", "wiki", None, None)),
        ("![[PDF]]", ("PDF", "embed", None, None)),
        ("[[Formats/PDF]]", ("Formats/PDF", "wiki", None, None)),
        ("[[v1.2/Canvas]]", ("v1.2/Canvas", "wiki", None, None)),
    ],
)
def test_a_note_named_like_an_attachment_extension_is_a_note(text, expected):
    (link,) = parse(text).links
    assert (link.target, link.kind, link.heading, link.alias) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[[#`move`|move]]", ("", "`move`", "move")),
        ("[[Filters#`wikilink`|wikilink]]", ("Filters", "`wikilink`", "wikilink")),
        ("See [[Query `not done`]] and `code`.", ("Query `not done`", None, None)),
        ("`a` then [[B#`c`]] then `d`", ("B", "`c`", None)),
    ],
)
def test_a_link_holding_backticks_is_read_whole(text, expected):
    (link,) = parse(text).links
    assert (link.target, link.heading, link.alias) == expected


def test_a_code_span_still_hides_the_links_inside_it_whichever_opens_first_wins():
    text = "`[[hidden]]` [[shown]] ``x [[hidden too]]`` `[[` [[also shown]] `]]`"
    assert targets(text) == ["shown", "also shown"]


def test_empty_wiki_links_are_ignored():
    assert targets("[[]] [[ ]] [[#]] [[|alias]]") == []


# --- markdown links --------------------------------------------------------------------------


def test_markdown_links_to_local_md_files_are_links():
    note = parse(
        "See [this note](Mite%20Counting%20Methods.md), [up](../Equipment/Smoker.md#Fuel),"
        ' [angle](<Bee Biology.md>) and ![embedded](Swarming.md "title").'
    )
    assert [(lk.target, lk.kind, lk.heading, lk.alias) for lk in note.links] == [
        ("Mite Counting Methods.md", "markdown", None, "this note"),
        ("../Equipment/Smoker.md", "markdown", "Fuel", "up"),
        ("Bee Biology.md", "markdown", None, "angle"),
        ("Swarming.md", "embed", None, "embedded"),
    ]


def test_markdown_link_destination_may_hold_balanced_parentheses():
    note = parse("Ask [Margaret](People/Margaret%20(mentor).md) or [Tom](<Tom (neighbour).md>).")
    assert targets_of(note) == ["People/Margaret (mentor).md", "Tom (neighbour).md"]


def test_external_urls_and_files_the_index_does_not_hold_are_not_links():
    text = (
        "[NBU](https://www.nationalbeeunit.com/page.md) [mail](mailto:a@b.md)"
        " [photo](hive.jpg) [anchor](#local) <https://example.com/x.md> https://x.org/y.md"
        " [pdf](https://example.com/leaflet.pdf)"
    )
    assert targets(text) == []


# --- tags ------------------------------------------------------------------------------------


def test_inline_tags_including_nested_ones_are_lower_cased_and_unique():
    note = parse("#todo check #Pests/Varroa and #queen/marked, again #TODO.\n")
    assert note.tags == ("todo", "pests/varroa", "queen/marked")


def test_things_that_look_like_tags_but_are_not():
    text = (
        "# Heading is not a tag\n"
        "Issue #1 and #2024 are numbers. C#sharp and a&#35;b are not tags.\n"
        "https://example.com/page#fragment and [link](#anchor) and [[Note#Heading]].\n"
        "`#inline-code` and\n"
        "```\n#fenced-code\n```\n"
        "~~~\n#tilde-code\n~~~\n"
    )
    assert parse(text).tags == ()


def test_tags_in_heading_text_count_but_the_heading_marks_do_not():
    assert parse("## Spring plan #todo\n").tags == ("todo",)


def test_tag_may_start_with_a_digit_if_not_purely_numeric():
    assert parse("#2025season #1").tags == ("2025season",)


def test_unicode_tags():
    assert parse("#rêverie #Bienen").tags == ("rêverie", "bienen")


# --- code ------------------------------------------------------------------------------------


def test_nothing_is_extracted_from_fenced_or_inline_code():
    text = (
        "```markdown\n[[not a link]] #notatag [x](Hidden.md)\n```\n"
        "~~~\n[[tilde]] #tilde\n~~~\n"
        "````\n```\n[[nested fence]]\n````\n"
        "Inline `[[also not a link]]` and ``code with ` [[tick]]`` here.\n"
        "[[Real Link]] #realtag\n"
    )
    note = parse(text)
    assert [lk.target for lk in note.links] == ["Real Link"]
    assert note.tags == ("realtag",)
    assert "[[not a link]]" in note.blocks[0].text  # the code itself is still searchable


def test_a_code_block_in_a_callout_hides_its_links():
    text = "> [!note] Tables\n> Use [[aliases]]:\n>\n> ```md\n> [[Shown as code]] `x`\n> ```\n"
    assert targets(text) == ["aliases"]


def test_an_unclosed_fence_hides_links_to_the_end_of_the_note():
    assert targets("[[before]]\n```\n[[inside]]\n") == ["before"]


def test_backticks_in_an_info_string_do_not_open_a_fence():
    assert targets("``` not `a fence\n[[visible]]\n") == ["visible"]


# --- positions -------------------------------------------------------------------------------


def test_link_line_numbers_count_frontmatter_and_code():
    text = (
        "---\n"  # 1
        "tags: [x]\n"  # 2
        "---\n"  # 3
        "# Title\n"  # 4
        "[[first]]\n"  # 5
        "```\n"  # 6
        "[[code]]\n"  # 7
        "```\n"  # 8
        "\n"  # 9
        "text [[second]] and [md](third.md)\n"  # 10
        "## Sub\n"  # 11
        "![[fourth]]\n"  # 12
    )
    note = parse(text)
    assert [(lk.target, lk.line, lk.block) for lk in note.links] == [
        ("first", 5, 0),
        ("second", 10, 0),
        ("third.md", 10, 0),
        ("fourth", 12, 1),
    ]


def test_link_line_numbers_when_frontmatter_is_broken():
    note = parse("---\ntags: [a\n---\n\n[[target]]\n")
    assert [(lk.target, lk.line) for lk in note.links] == [("target", 5)]


def test_windows_line_endings_and_nul_bytes_are_tolerated():
    note = parse("---\r\ntitle: T\r\n---\r\n# H\r\n[[a]]\x00 #t\r\n")
    assert note.title == "T"
    assert [(lk.target, lk.line) for lk in note.links] == [("a", 5)]
    assert note.tags == ("t",)


# --- robustness ------------------------------------------------------------------------------


PATHOLOGICAL_UNITS = ["[a](", "[a](<x", "[[a]](", "[a](b(c)", "[a](b c", "``a`", "[[a"]
PATHOLOGICAL_UNITS += ["#a#", "a#", "http://a", " ^a"]


@pytest.mark.parametrize("unit", PATHOLOGICAL_UNITS)
def test_pathological_text_parses_in_linear_time(unit):
    # A 100 KB note made of one repeated fragment; a regex that backtracks over the whole line
    # for each repetition would take minutes.
    text = unit * (100_000 // len(unit))
    started = time.perf_counter()
    parse(text)
    assert time.perf_counter() - started < 3.0
