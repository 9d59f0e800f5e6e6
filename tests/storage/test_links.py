"""Every link of the real vaults, checked against an independent reading of Obsidian's rules.

`reference_links` below shares no code with vaultctx's parser: it walks each note's raw text
character by character (frontmatter and code fences skipped, a code span or a wiki link,
whichever opens first, taken whole), reads `[[name#heading|alias]]`, `![[embeds]]` and
Markdown links to `.md` files, and resolves names as Obsidian does (a path; else the file
name, case-insensitively: the source's own folder first, then the shortest path). The index
must hold exactly those links, note by note, except for the differences listed in
`INTENDED`. Vaults are found by their layout (a folder of Markdown files), not by name.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import REAL_VAULTS, query
from vaultctx import Workspace
from vaultctx.storage.indexer import path_stem

# Obsidian's "Accepted file formats" (help page of the same name): links to these are links to
# files, not notes. Markdown is the one note format.
OBSIDIAN_FILE_FORMATS = set(
    "avif bmp gif jpeg jpg png svg webp flac m4a mp3 ogg wav webm 3gp mkv mov mp4 ogv pdf"
    " canvas base".split()
)
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
MARKDOWN_LINK = re.compile(r"\[([^\[\]\n]*)\]\(\s*(<[^>\n]+>|[^\s()]+)(?:\s+\"[^\"]*\")?\s*\)")

Link = tuple[str, str, str | None, str | None]  # kind, target (path or "?name"), heading, ^ref


def vaults() -> list[Path]:
    if not REAL_VAULTS.is_dir():
        return []
    return sorted(p for p in REAL_VAULTS.iterdir() if p.is_dir() and any(p.rglob("*.md")))


# --- the reference reading -------------------------------------------------------------------


def body_lines(text: str) -> list[str]:
    """The note's lines with its frontmatter and fenced code (in a callout or quote too)
    replaced by empty lines."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[0].rstrip() == "---":
        for end in range(1, len(lines)):
            if lines[end].rstrip() in ("---", "..."):
                lines[: end + 1] = [""] * (end + 1)
                break
    fence, depth = None, 0
    for i, line in enumerate(lines):
        markers = re.match(r"(?:[ \t]*>)*[ \t]?", line).group(0)
        quoted, content = markers.count(">"), line[len(markers) :]
        if fence is not None and quoted < depth:
            fence = None  # the quote ends, and the code block in it
        if fence is None:
            opening = FENCE.match(content)
            if opening and not (opening.group(1)[0] == "`" and "`" in content[opening.end() :]):
                fence, depth = opening.group(1), quoted
                lines[i] = ""
        else:
            closing = content.strip()
            if (
                closing[:1] == fence[0]
                and set(closing) == {fence[0]}
                and len(closing) >= len(fence)
            ):
                fence = None
            lines[i] = ""
    return lines


def raw_links(text: str) -> list[tuple[str, str, bool]]:
    """(form, inner text, embed) of each link, left to right; form is wiki or markdown."""
    found = []
    for paragraph in "\n".join(body_lines(text)).split("\n\n"):
        i = 0
        while i < len(paragraph):
            if paragraph.startswith("[[", i):
                end = paragraph.find("]]", i + 2)
                inner = paragraph[i + 2 : end] if end > 0 else ""
                if end > 0 and inner.strip() and not set(inner) & set("[]\n"):
                    found.append(("wiki", inner, paragraph[i - 1 : i] == "!"))
                    i = end + 2
                    continue
            elif paragraph[i] == "`":
                run = len(paragraph[i:]) - len(paragraph[i:].lstrip("`"))
                close = re.compile(rf"(?<!`){'`' * run}(?!`)").search(paragraph, i + run)
                i = close.end() if close else i + run
                continue
            elif paragraph[i] == "[":
                m = MARKDOWN_LINK.match(paragraph, i)
                if m:
                    found.append(("markdown", m.group(2).strip("<>"), paragraph[i - 1 : i] == "!"))
                    i = m.end()
                    continue
            i += 1
    return found


def reference_links(path: str, text: str, resolve) -> list[Link]:
    links = []
    for form, inner, embed in raw_links(text):
        kind = "embed" if embed else ("wiki" if form == "wiki" else "markdown")
        if form == "wiki":
            target, _, _alias = inner.replace("\\|", "|").partition("|")
            name, _, fragment = target.partition("#")
            name = name.strip().removesuffix(".md")
        else:
            if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", inner):
                continue  # a URL
            name, _, fragment = unquote(inner).partition("#")
            if not name.lower().endswith(".md"):
                continue
        ref = fragment.strip()[1:] if fragment.strip().startswith("^") else None
        heading = None if ref is not None else (fragment.split("#")[-1].strip() or None)
        if not name and not heading and not ref:
            continue
        resolved = resolve(path, name, form)
        if resolved is None and PurePosixPath(name).suffix[1:].lower() in OBSIDIAN_FILE_FORMATS:
            continue  # a picture, a PDF, a canvas: a file, not a note
        links.append((kind, resolved or f"?{name}", heading, ref or None))
    return links


def obsidian_resolver(paths: list[str]):
    by_name: dict[str, list[str]] = {}
    lowered = {p.lower(): p for p in paths}
    for p in paths:
        by_name.setdefault(PurePosixPath(p).stem.lower(), []).append(p)

    def find(path: str) -> str | None:
        parts: list[str] = []
        for part in path.split("/"):
            if part == "..":
                if not parts:
                    return None
                parts.pop()
            elif part not in ("", "."):
                parts.append(part)
        return lowered.get("/".join(parts).lower())

    def resolve(source: str, name: str, form: str) -> str | None:
        if not name:
            return source
        folder = str(PurePosixPath(source).parent)
        plain = name if name.lower().endswith(".md") else f"{name}.md"
        if form == "markdown":  # relative to the note, else from the vault's root
            return find(f"{folder}/{plain}") or find(plain)
        if "/" in name:  # a path from the root, or the end of one
            ends = sorted((p for p in paths if p.lower().endswith("/" + plain.lower())), key=len)
            return find(plain) or (ends[0] if ends else None)
        candidates = by_name.get(name.lower(), [])
        same_folder = [c for c in candidates if str(PurePosixPath(c).parent) == folder]
        return (same_folder or sorted(candidates, key=len) or [None])[0]

    return resolve


# --- what the index holds --------------------------------------------------------------------


def indexed_links(db: Path) -> tuple[dict[str, Counter[Link]], int]:
    """Each note's links as the index holds them, and how many of them were resolved by an
    alias: those are read as unresolved (`?name`), as Obsidian leaves them."""
    out: dict[str, Counter[Link]] = {}
    by_alias = 0
    rows = query(
        db,
        "SELECT s.path, l.kind, t.path, l.target, l.heading, l.block_ref FROM links l"
        " JOIN notes s ON s.id = l.source_id LEFT JOIN notes t ON t.id = l.target_id",
    )
    for source, kind, target_path, target, heading, ref in rows:
        name = PurePosixPath(target).name.lower().removesuffix(".md")
        if target_path and name and PurePosixPath(target_path).stem.lower() != name:
            by_alias += 1  # INTENDED: vaultctx resolves a name no file has by an alias
            target_path = None
        out.setdefault(source, Counter())[(kind, target_path or f"?{target}", heading, ref)] += 1
    return out, by_alias


@pytest.mark.parametrize("vault", vaults(), ids=lambda p: p.name)
def test_every_link_of_a_real_vault_is_the_one_obsidian_reads(vault, tmp_path):
    with Workspace.open(vault, {"index_dir": str(tmp_path / "ix"), "embed": False}) as ws:
        ws.index()
    notes = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md"))
    resolve = obsidian_resolver(notes)
    index, by_alias = indexed_links(tmp_path / "ix" / "index.db")
    differences = []
    for path in notes:
        text = (vault / path).read_text(encoding="utf-8", errors="replace")
        expected = Counter(reference_links(path, text, resolve))
        got = index.get(path, Counter())
        missing, extra = expected - got, got - expected
        if missing or extra:
            differences.append((path, sorted(missing, key=str), sorted(extra, key=str)))
    assert differences == [], "\n".join(
        f"{p}\n  missing {m}\n  extra {e}" for p, m, e in differences
    )
    total = sum(sum(c.values()) for c in index.values())
    assert total > 2 * len(notes), "the vault is linked"
    assert by_alias < total / 50


@given(
    st.lists(
        st.text(alphabet=st.sampled_from("ab.Ç .-_"), min_size=1, max_size=6).filter(
            lambda part: part not in (".", "..")
        ),
        min_size=1,
        max_size=3,
    ).map("/".join)
)
def test_a_note_name_matches_by_its_stem_as_pathlib_reads_it(path):
    """The resolver reads every note's file stem without pathlib (seconds at 100k notes)."""
    assert path_stem(path) == PurePosixPath(path).stem
