"""The SQLite index of a vault: what it holds, how links resolve, and how it stays current.

Every test works on a real index file in a temporary copy of a vault, and reads it back
with plain SQL, as anyone inspecting `.vaultctx/index.db` would.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from conftest import FakeEmbedder, assert_full_text_matches_blocks, pretend_schema, query
from vaultctx import IndexCorrupt, Workspace
from vaultctx.storage import migrations
from vaultctx.storage import reader as reader_module
from vaultctx.storage.blocks import estimate_tokens
from vaultctx.storage.indexer import LinkResolver


def index(root: Path, **config) -> object:
    with Workspace.open(root, config or None) as ws:
        return ws.index(embed=False)


def db_file(root: Path) -> Path:
    return root / ".vaultctx" / "index.db"


def expected_notes(root: Path) -> set[str]:
    """The notes of the example vault by its own rules: Markdown, not hidden, not Private/."""
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*.md")
        if not any(part.startswith(".") for part in p.relative_to(root).parts)
        and p.relative_to(root).parts[0] != "Private"
    }


def search(root: Path, words: str) -> set[str]:
    """Paths of notes with a block matching an FTS5 query."""
    rows = query(
        db_file(root),
        "SELECT DISTINCT n.path FROM blocks_fts f JOIN blocks b ON b.id = f.rowid"
        " JOIN notes n ON n.id = b.note_id WHERE blocks_fts MATCH ?",
        words,
    )
    return {path for (path,) in rows}


def links_from(root: Path, source: str) -> list[tuple[str, str | None]]:
    """(target as written, resolved note path or None) of every link in one note."""
    return query(
        db_file(root),
        "SELECT l.target, t.path FROM links l JOIN notes s ON s.id = l.source_id"
        " LEFT JOIN notes t ON t.id = l.target_id WHERE s.path = ? ORDER BY l.id",
        source,
    )


def resolved(root: Path, source: str, target: str) -> str | None:
    """Where `[[target]]` in `source` leads; fails if the note has no such link."""
    found = {t: p for t, p in links_from(root, source)}
    assert target in found, f"{source} has no link to {target!r}: {sorted(found)}"
    return found[target]


def note_id(root: Path, path: str) -> int | None:
    rows = query(db_file(root), "SELECT id FROM notes WHERE path = ?", path)
    return rows[0][0] if rows else None


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    # make sure the change is visible even on filesystems with coarse mtimes
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


@pytest.fixture
def indexed(example_vault: Path) -> Path:
    index(example_vault)
    return example_vault


@pytest.fixture
def parse_calls(monkeypatch) -> list[str]:
    """Titles of every note the indexer parses from now on."""
    calls: list[str] = []
    real = reader_module.parse_note

    def counting(text, title, **kw):
        calls.append(title)
        return real(text, title, **kw)

    monkeypatch.setattr(reader_module, "parse_note", counting)
    return calls


# --- the index file --------------------------------------------------------------------------


def test_first_index_adds_every_note_and_reports_problems(example_vault):
    report = index(example_vault)
    notes = expected_notes(example_vault)
    assert (report.files, report.added) == (len(notes), len(notes))
    assert (report.updated, report.renamed, report.deleted, report.unchanged) == (0, 0, 0, 0)
    assert report.skipped == []
    assert [path for path, _ in report.warnings] == ["Forage/Ivy.md"]
    assert {p for (p,) in query(db_file(example_vault), "SELECT path FROM notes")} == notes


def test_the_index_lives_in_the_vaults_dot_vaultctx_folder(example_vault):
    index(example_vault)
    assert db_file(example_vault).is_file()


def test_index_dir_puts_the_index_elsewhere_and_leaves_the_vault_alone(example_vault, tmp_path):
    index(example_vault, index_dir=str(tmp_path / "elsewhere"))
    assert (tmp_path / "elsewhere" / "index.db").is_file()
    assert not (example_vault / ".vaultctx").exists()


def test_the_index_uses_wal_journaling(indexed):
    assert query(db_file(indexed), "PRAGMA journal_mode") == [("wal",)]


def test_the_schema_version_is_recorded(indexed):
    assert query(db_file(indexed), "PRAGMA user_version") == [(migrations.SCHEMA_VERSION,)]
    assert migrations.SCHEMA_VERSION == len(migrations.MIGRATIONS) >= 1


def test_reopening_an_index_applies_no_migration(indexed):
    conn = sqlite3.connect(db_file(indexed))
    try:
        assert migrations.migrate(conn) == 0
    finally:
        conn.close()


def test_an_index_from_a_newer_vaultctx_is_refused(indexed):
    conn = sqlite3.connect(db_file(indexed))
    conn.execute(f"PRAGMA user_version = {migrations.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(IndexCorrupt, match="newer") as excinfo:
        Workspace.open(indexed)
    assert str(db_file(indexed)) in str(excinfo.value)


def test_every_table_is_filled(indexed):
    counts = {
        table: query(db_file(indexed), f"SELECT count(*) FROM {table}")[0][0]
        for table in ("notes", "blocks", "links", "tags", "aliases", "embeddings")
    }
    assert counts["notes"] == len(expected_notes(indexed))
    assert counts["blocks"] >= counts["notes"]
    assert counts["links"] > 200 and counts["tags"] > 50 and counts["aliases"] > 20
    assert counts["embeddings"] == 0, "index(embed=False) computes no vectors"


def test_the_full_text_index_matches_the_blocks(indexed):
    conn = sqlite3.connect(db_file(indexed))
    try:
        conn.execute("INSERT INTO blocks_fts(blocks_fts) VALUES ('integrity-check')")
        fts_rows = conn.execute("SELECT count(*) FROM blocks_fts").fetchone()[0]
        blocks = conn.execute("SELECT count(*) FROM blocks").fetchone()[0]
    finally:
        conn.close()
    assert fts_rows == blocks


def test_the_full_text_index_stays_exact_through_edits_deletes_and_renames(indexed):
    db = db_file(indexed)
    newest = "SELECT n.path FROM blocks b JOIN notes n ON n.id = b.note_id ORDER BY b.id DESC"
    (indexed / query(db, newest)[0][0]).unlink()  # frees the highest block ids
    write(indexed, "Equipment/Feeders.md", "# Feeders\n\nA Zorblax feeder.\n")
    write(indexed, "Inbox/New.md", "# New\n\nFresh words: quillwort.\n")
    (indexed / "Forage/Ivy.md").rename(indexed / "Forage/Hedera helix.md")
    report = index(indexed)
    assert (report.deleted, report.updated, report.added, report.renamed) == (1, 1, 1, 1)
    assert_full_text_matches_blocks(db)
    assert search(indexed, "quillwort") == {"Inbox/New.md"}
    assert search(indexed, "zorblax") == {"Equipment/Feeders.md"}


def test_notes_store_title_frontmatter_tags_and_aliases(indexed):
    db = db_file(indexed)
    path = "Pests and Diseases/Varroa Mites.md"
    title, frontmatter = query(db, "SELECT title, frontmatter FROM notes WHERE path = ?", path)[0]
    assert title == "Varroa Mites"
    assert '"status": "evergreen"' in frontmatter
    nid = note_id(indexed, path)
    assert {t for (t,) in query(db, "SELECT tag FROM tags WHERE note_id = ?", nid)} == {
        "pests",
        "pests/varroa",
    }
    assert {a for (a,) in query(db, "SELECT alias FROM aliases WHERE note_id = ?", nid)} == {
        "varroa",
        "Varroa destructor",
    }


def test_blocks_keep_heading_path_and_lines(indexed):
    rows = query(
        db_file(indexed),
        "SELECT b.heading_path, b.start_line, b.text FROM blocks b JOIN notes n"
        " ON n.id = b.note_id WHERE n.path = ? ORDER BY b.ordinal",
        "Pests and Diseases/Varroa Mites.md",
    )
    by_heading = {heading: (line, text) for heading, line, text in rows}
    line, text = by_heading["Varroa Mites > Why August matters"]
    file_lines = (indexed / "Pests and Diseases/Varroa Mites.md").read_text().split("\n")
    assert file_lines[line - 1] == text.split("\n")[0]
    assert "winter bees" in text


# --- full-text search ------------------------------------------------------------------------


def test_full_text_search_finds_words(indexed):
    assert "Forage/Lime Trees.md" in search(indexed, "linden")


def test_full_text_search_ignores_diacritics(indexed):
    found = search(indexed, "reverie")
    assert "Journal/2025-08-30 Alsace Trip.md" in found
    assert search(indexed, "rêverie") == found


def test_full_text_search_stems_words(indexed):
    assert "Reference/Swarming.md" in search(indexed, "swarms")


def test_full_text_search_covers_titles_and_headings(indexed):
    assert search(indexed, "title:Untitled") == {"Inbox/Untitled.md"}
    assert "Pests and Diseases/Varroa Mites.md" in search(indexed, 'heading_path:"why august"')


# --- special notes of the example vault ------------------------------------------------------


def test_broken_frontmatter_is_a_problem_and_only_the_body_after_its_fence_is_indexed(indexed):
    problems = query(
        db_file(indexed), "SELECT problems FROM notes WHERE path = ?", "Forage/Ivy.md"
    )[0][0]
    assert "invalid YAML" in problems
    assert "Forage/Ivy.md" in search(indexed, "Hedera")
    assert "Forage/Ivy.md" not in search(indexed, "autumn")  # a word of the broken frontmatter
    with Workspace.open(indexed) as ws:
        assert ws.status().notes_with_problems == 1


def test_an_empty_note_has_one_empty_block_and_is_found_by_title(indexed):
    rows = query(
        db_file(indexed),
        "SELECT b.text, b.title FROM blocks b JOIN notes n ON n.id = b.note_id WHERE n.path = ?",
        "Inbox/Untitled.md",
    )
    assert rows == [("", "Untitled")]
    assert "Inbox/Untitled.md" in search(indexed, "untitled")


def test_a_frontmatter_only_note_keeps_its_tags(indexed):
    path = "Inbox/Beeswax Candles.md"
    nid = note_id(indexed, path)
    tags = {t for (t,) in query(db_file(indexed), "SELECT tag FROM tags WHERE note_id = ?", nid)}
    assert tags == {"inbox", "wax", "idea"}
    assert query(db_file(indexed), "SELECT text FROM blocks WHERE note_id = ?", nid) == [("",)]
    assert path in search(indexed, "beeswax")


def test_ignored_and_hidden_files_are_not_indexed(indexed):
    paths = {p for (p,) in query(db_file(indexed), "SELECT path FROM notes")}
    assert not [p for p in paths if p.startswith(("Private/", ".obsidian/"))]
    assert search(indexed, "sort code") == set()


def test_links_and_tags_in_code_are_not_indexed(indexed):
    source = "Reference/How I Use This Vault.md"
    targets = [t for t, _ in links_from(indexed, source)]
    assert "not a link" not in targets and "also not a link" not in targets
    assert targets == ["Clover", "Bramble", "home"]
    nid = note_id(indexed, source)
    tags = {t for (t,) in query(db_file(indexed), "SELECT tag FROM tags WHERE note_id = ?", nid)}
    assert tags == {"meta", "todo"}


# --- link resolution in the example vault ----------------------------------------------------


def test_links_resolve_by_alias(indexed):
    varroa = "Pests and Diseases/Varroa Mites.md"
    assert resolved(indexed, "Pests and Diseases/Mite Counting Methods.md", "varroa") == varroa
    assert resolved(indexed, "Reference/How I Use This Vault.md", "Clover") == (
        "Hives/Hive 1 - Clover.md"
    )


def test_links_resolve_by_file_name_case_insensitively(indexed):
    source = "Inbox/quick capture - drone brood.md"
    assert resolved(indexed, source, "varroa mites") == "Pests and Diseases/Varroa Mites.md"
    assert resolved(indexed, source, "bee biology") == "Reference/Bee Biology.md"
    assert resolved(indexed, "Reference/How I Use This Vault.md", "home") == "Home.md"


def test_same_named_notes_resolve_to_the_shortest_path_unless_qualified(indexed):
    assert resolved(indexed, "Equipment/Hive Tool.md", "Smoker") == "Equipment/Smoker.md"
    assert resolved(indexed, "Equipment/Smoker.md", "Reference/Archive/Smoker") == (
        "Reference/Archive/Smoker.md"
    )
    assert resolved(indexed, "Reference/Archive/Smoker.md", "Equipment/Smoker") == (
        "Equipment/Smoker.md"
    )


def test_markdown_links_resolve_relative_to_the_note(indexed):
    assert resolved(indexed, "Pests and Diseases/Varroa Mites.md", "Mite Counting Methods.md") == (
        "Pests and Diseases/Mite Counting Methods.md"
    )


def test_links_to_missing_notes_are_kept_as_dangling(indexed):
    rows = query(
        db_file(indexed),
        "SELECT s.path FROM links l JOIN notes s ON s.id = l.source_id"
        " WHERE l.target = 'Queen Rearing Calendar' AND l.target_id IS NULL ORDER BY s.path",
    )
    assert rows == [
        ("Hives/Queen Records.md",),
        ("Reference/Reading List.md",),
        ("Reference/Swarming.md",),
    ]
    with Workspace.open(indexed) as ws:
        status = ws.status()
    assert status.dangling_links == 4  # the three above and [[Nuc Box]]
    assert (
        status.links
        == query(db_file(indexed), "SELECT count(*) FROM links WHERE target_id IS NOT NULL")[0][0]
    )


# --- link resolution rules -------------------------------------------------------------------


@pytest.fixture
def rules_vault(make_vault) -> Path:
    root = make_vault(
        {
            "A/Note.md": "a",
            "B/C/Note.md": "c",
            "B/C/Sibling.md": "[[Note]]",
            "B/Other.md": "[[Note]]",
            "Varroa Mites.md": "---\naliases: [varroa, Mites]\n---\n",
            "mites.md": "a file name beats an alias",
            "Folder/My Note.md": "target of markdown links",
            "Folder/Sub/Deep.md": "[up](../My%20Note.md) [abs](Folder/My%20Note.md)",
            "Source.md": (
                "[[note]] [[A/Note]] [[C/Note]] [[B/C/Note]] [[VARROA]] [[Mites]] [[Note.md]]"
                " ![[Varroa Mites#Biology]] [[#Local]] [[Missing Note]] [[Nowhere/Note]]"
                " [md](Folder/My%20Note.md) [bad](../../outside.md)"
            ),
        }
    )
    index(root)
    return root


def test_a_saved_note_keeps_its_links_targets_without_reading_every_name(rules_vault, monkeypatch):
    """Saving a note whose links stayed the same in a vault whose names stayed the same
    resolves nothing again (a resolver reads every note's name); a link it gains is."""
    before = links_from(rules_vault, "Source.md")

    def every_name(conn):
        raise AssertionError("a resolver was built for links that did not change")

    with monkeypatch.context() as patched:
        patched.setattr(LinkResolver, "from_db", classmethod(lambda cls, conn: every_name(conn)))
        write(rules_vault, "Source.md", (rules_vault / "Source.md").read_text() + "\nmore text")
        index(rules_vault)
    assert links_from(rules_vault, "Source.md") == before
    write(rules_vault, "Source.md", (rules_vault / "Source.md").read_text() + " [[Sibling]]")
    index(rules_vault)
    assert links_from(rules_vault, "Source.md") == [*before, ("Sibling", "B/C/Sibling.md")]


def test_resolution_rules(rules_vault):
    assert links_from(rules_vault, "Source.md") == [
        ("note", "A/Note.md"),  # bare name, case-insensitive: shortest path
        ("A/Note", "A/Note.md"),  # path-qualified
        ("C/Note", "B/C/Note.md"),  # partial path: the note whose path ends with it
        ("B/C/Note", "B/C/Note.md"),
        ("VARROA", "Varroa Mites.md"),  # alias, case-insensitive
        ("Mites", "mites.md"),  # a file name wins over another note's alias
        ("Note", "A/Note.md"),  # [[Note.md]]: the extension is optional
        ("Varroa Mites", "Varroa Mites.md"),  # embed of a heading
        ("", "Source.md"),  # [[#Local]] is this note
        ("Missing Note", None),  # dangling, kept as written
        ("Nowhere/Note", None),
        ("Folder/My Note.md", "Folder/My Note.md"),  # markdown link, URL-encoded
        ("../../outside.md", None),
    ]


def test_same_folder_wins_when_names_collide(rules_vault):
    assert links_from(rules_vault, "B/C/Sibling.md") == [("Note", "B/C/Note.md")]
    assert links_from(rules_vault, "B/Other.md") == [("Note", "A/Note.md")]


def test_markdown_links_resolve_relative_or_from_the_vault_root(rules_vault):
    assert links_from(rules_vault, "Folder/Sub/Deep.md") == [
        ("../My Note.md", "Folder/My Note.md"),
        ("Folder/My Note.md", "Folder/My Note.md"),
    ]


# --- the graph -------------------------------------------------------------------------------


def test_the_graph_has_every_note_and_one_edge_per_linked_pair(rules_vault):
    with Workspace.open(rules_vault) as ws:
        graph = ws.graph()
    assert set(graph) == {p for (p,) in query(db_file(rules_vault), "SELECT path FROM notes")}
    assert graph.titles["Varroa Mites.md"] == "Varroa Mites"
    assert set(graph.successors("Source.md")) == {
        "A/Note.md",
        "B/C/Note.md",
        "Varroa Mites.md",
        "mites.md",
        "Folder/My Note.md",
    }
    assert graph.link("Source.md", "Source.md") is None, "self-links are left out"
    assert graph.link("Source.md", "A/Note.md").weight == 3.0  # three links, one edge
    assert graph.link("Source.md", "Varroa Mites.md").kinds == {"wiki", "embed"}
    assert graph.link("Source.md", "Varroa Mites.md").precise is True


def test_the_graph_follows_the_index(example_vault):
    with Workspace.open(example_vault) as ws:
        ws.index(embed=False)
        assert "Queen Rearing Calendar.md" not in ws.graph()
        write(example_vault, "Queen Rearing Calendar.md", "# Plan\n")
        ws.index(embed=False)
        graph = ws.graph()
    assert graph.link("Reference/Swarming.md", "Queen Rearing Calendar.md") is not None


# --- incremental indexing --------------------------------------------------------------------


def test_an_unchanged_vault_is_not_parsed_again(indexed, parse_calls):
    report = index(indexed)
    assert report.unchanged == len(expected_notes(indexed))
    assert (report.added, report.updated, report.renamed, report.deleted) == (0, 0, 0, 0)
    assert report.blocks_written == 0
    assert parse_calls == []
    assert not report.changed


def test_touching_a_file_without_changing_it_parses_nothing(indexed, parse_calls):
    for path in indexed.rglob("*.md"):
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    report = index(indexed)
    assert parse_calls == []
    assert report.unchanged == len(expected_notes(indexed))
    assert not report.changed
    mtime = (indexed / "Home.md").stat().st_mtime_ns
    assert query(db_file(indexed), "SELECT mtime_ns FROM notes WHERE path = 'Home.md'") == [
        (mtime,)
    ]


def test_editing_one_note_updates_only_that_note(indexed, parse_calls):
    db = db_file(indexed)
    before = query(db, "SELECT n.path, b.id FROM blocks b JOIN notes n ON n.id = b.note_id")
    write(
        indexed, "Equipment/Feeders.md", "# Feeders\n\nThe new feeder is a Zorblax rapid feeder.\n"
    )
    report = index(indexed)
    assert (report.updated, report.added, report.deleted) == (1, 0, 0)
    assert report.unchanged == len(expected_notes(indexed)) - 1
    assert parse_calls == ["Feeders"]
    after = query(db, "SELECT n.path, b.id FROM blocks b JOIN notes n ON n.id = b.note_id")
    others = [row for row in before if row[0] != "Equipment/Feeders.md"]
    assert [row for row in after if row[0] != "Equipment/Feeders.md"] == others
    assert search(indexed, "zorblax") == {"Equipment/Feeders.md"}


def test_an_edit_replaces_the_old_text_links_and_tags(indexed):
    path = "Forage/Lime Trees.md"
    nid = note_id(indexed, path)
    write(indexed, path, "---\naliases: [Tilia]\n---\n# Lime\n\nNow about [[Ivy]] only. #trees\n")
    index(indexed)
    assert note_id(indexed, path) == nid, "an edited note keeps its id"
    assert links_from(indexed, path) == [("Ivy", "Forage/Ivy.md")]
    db = db_file(indexed)
    assert query(db, "SELECT tag FROM tags WHERE note_id = ?", nid) == [("trees",)]
    assert query(db, "SELECT alias FROM aliases WHERE note_id = ?", nid) == [("Tilia",)]
    assert path not in search(indexed, "linden")


def test_a_new_note_is_added(indexed):
    write(indexed, "Inbox/New idea.md", "Try a #swarm trap near the plum tree. [[Swarming]]\n")
    report = index(indexed)
    assert (report.added, report.updated, report.unchanged) == (
        1,
        0,
        len(expected_notes(indexed)) - 1,
    )
    assert links_from(indexed, "Inbox/New idea.md") == [("Swarming", "Reference/Swarming.md")]
    assert search(indexed, "plum trap") == {"Inbox/New idea.md"}


def test_deleting_a_note_removes_its_rows_and_leaves_links_to_it_dangling(indexed):
    db = db_file(indexed)
    nid = note_id(indexed, "Forage/Ivy.md")
    (indexed / "Forage/Ivy.md").unlink()
    report = index(indexed)
    assert report.deleted == 1
    assert note_id(indexed, "Forage/Ivy.md") is None
    for table, column in (("blocks", "note_id"), ("links", "source_id"), ("tags", "note_id")):
        assert query(db, f"SELECT count(*) FROM {table} WHERE {column} = ?", nid) == [(0,)]
    assert search(indexed, "Hedera") == set()
    assert resolved(indexed, "Home.md", "Ivy") is None
    assert resolved(indexed, "Forage/Forage Calendar.md", "Ivy") is None


def test_deleting_a_note_with_aliases_removes_them(indexed):
    nid = note_id(indexed, "Pests and Diseases/Varroa Mites.md")
    (indexed / "Pests and Diseases/Varroa Mites.md").unlink()
    index(indexed)
    assert query(db_file(indexed), "SELECT count(*) FROM aliases WHERE note_id = ?", nid) == [(0,)]
    assert resolved(indexed, "Pests and Diseases/Mite Counting Methods.md", "varroa") is None


def test_when_one_of_two_same_named_notes_goes_links_move_to_the_other(indexed):
    (indexed / "Equipment/Smoker.md").unlink()
    index(indexed)
    assert resolved(indexed, "Equipment/Hive Tool.md", "Smoker") == "Reference/Archive/Smoker.md"


def test_moving_a_note_is_a_rename_that_keeps_its_id(indexed, parse_calls):
    nid = note_id(indexed, "Forage/Ivy.md")
    (indexed / "Reference").joinpath("Ivy.md").write_bytes((indexed / "Forage/Ivy.md").read_bytes())
    (indexed / "Forage/Ivy.md").unlink()
    report = index(indexed)
    assert (report.renamed, report.added, report.deleted) == (1, 0, 0)
    assert note_id(indexed, "Reference/Ivy.md") == nid
    assert note_id(indexed, "Forage/Ivy.md") is None
    assert resolved(indexed, "Home.md", "Ivy") == "Reference/Ivy.md"
    assert search(indexed, "Hedera") == {"Reference/Ivy.md"}


def test_renaming_a_note_keeps_its_id_and_leaves_old_name_links_dangling(indexed):
    nid = note_id(indexed, "Forage/Ivy.md")
    (indexed / "Forage/Ivy.md").rename(indexed / "Forage/Hedera helix.md")
    report = index(indexed)
    assert report.renamed == 1 and report.added == 0 and report.deleted == 0
    assert note_id(indexed, "Forage/Hedera helix.md") == nid
    assert resolved(indexed, "Home.md", "Ivy") is None
    title = query(db_file(indexed), "SELECT title FROM notes WHERE id = ?", nid)[0][0]
    assert title == "Ivy"  # its H1 names it, whatever the file is called


def test_a_new_note_makes_a_dangling_link_resolve(indexed):
    write(indexed, "Hives/Queen Rearing Calendar.md", "# When to graft\n")
    report = index(indexed)
    assert report.added == 1
    rows = query(
        db_file(indexed),
        "SELECT t.path FROM links l LEFT JOIN notes t ON t.id = l.target_id"
        " WHERE l.target = 'Queen Rearing Calendar'",
    )
    assert rows == [("Hives/Queen Rearing Calendar.md",)] * 3


def test_a_new_alias_makes_a_dangling_link_resolve_and_removing_it_undoes_that(indexed):
    path = "Equipment/National Hive.md"
    original = (indexed / path).read_text()
    write(indexed, path, "---\naliases: [Nuc Box]\n---\n" + original.split("---\n", 2)[2])
    index(indexed)
    assert resolved(indexed, "Reference/Swarming.md", "Nuc Box") == path
    write(indexed, path, original)
    index(indexed)
    assert resolved(indexed, "Reference/Swarming.md", "Nuc Box") is None


def test_indexing_named_paths_looks_only_at_those_files(indexed, parse_calls):
    write(indexed, "Equipment/Feeders.md", "# Feeders\n\nquuxfeeder\n")
    write(indexed, "Equipment/Extractor.md", "# Extractor\n\nquuxfeeder too\n")
    (indexed / "Forage/Ivy.md").unlink()
    with Workspace.open(indexed) as ws:
        report = ws.index(embed=False, paths=["Equipment/Feeders.md", "Forage/Ivy.md"])
    assert (report.updated, report.deleted) == (1, 1)
    assert parse_calls == ["Feeders"]
    assert search(indexed, "quuxfeeder") == {"Equipment/Feeders.md"}


def test_indexing_named_paths_never_walks_the_vault(indexed, monkeypatch):
    """One saved note costs the same in any vault: its path alone is looked at."""

    def walk(root):
        raise AssertionError("the whole vault was scanned for one named note")

    monkeypatch.setattr("vaultctx.storage.indexer.scan_vault", walk)
    write(indexed, "Equipment/Feeders.md", "# Feeders\n\nquuxfeeder\n")
    with Workspace.open(indexed) as ws:
        report = ws.index(embed=False, paths=["Equipment/Feeders.md"])
    assert report.updated == 1
    assert report.files == len(expected_notes(indexed))
    assert search(indexed, "quuxfeeder") == {"Equipment/Feeders.md"}


def test_a_named_path_the_scan_would_skip_is_not_indexed(indexed, tmp_path):
    """Under an ignored folder, a hidden one, or through a symlink out of the vault: named
    by the watcher or not, never a note."""
    ignore = indexed / ".vaultctxignore"
    ignore.write_text(ignore.read_text() + "\nDrafts/\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "Away.md").write_text("# Away\n\nquuxskipped\n")
    (indexed / "Elsewhere").symlink_to(outside, target_is_directory=True)
    (indexed / "Linked.md").symlink_to(outside / "Away.md")
    for path in ("Drafts/Plan.md", ".hidden/Secret.md"):
        write(indexed, path, "# Skipped\n\nquuxskipped\n")
    named = ["Drafts/Plan.md", ".hidden/Secret.md", "Elsewhere/Away.md", "Linked.md"]
    with Workspace.open(indexed) as ws:
        report = ws.index(embed=False, paths=named)
    assert (report.added, report.updated) == (0, 0)
    assert search(indexed, "quuxskipped") == set()
    assert query(db_file(indexed), "SELECT COUNT(*) FROM notes WHERE path IN (?, ?, ?, ?)",
                 *named) == [(0,)]  # fmt: skip


def test_a_copy_of_an_indexed_vault_indexes_from_scratch(indexed, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(indexed, copy, ignore=shutil.ignore_patterns(".vaultctx"))
    report = index(copy)
    assert report.added == len(expected_notes(indexed))


def test_chunk_tokens_bounds_every_stored_block(make_vault):
    paragraphs = "\n\n".join(" ".join(f"w{i}x{j}" for j in range(50)) for i in range(40))
    root = make_vault({"Long.md": "# Long\n\n" + paragraphs})
    index(root, chunk_tokens=64)
    texts = [t for (t,) in query(db_file(root), "SELECT text FROM blocks")]
    assert len(texts) > 20
    assert max(estimate_tokens(t) for t in texts) <= 64


# --- embeddings ------------------------------------------------------------------------------

TINY_VAULT = {
    "Hives/Clover.md": "# Clover\n\nStrong colony.\n\n## Queen\nMarked red in 2023.\n",
    "Hives/Bramble.md": "# Bramble\n\nCalm bees. See [[Clover]].\n",
    "Forage/Ivy.md": "# Ivy\n\nLate nectar.\n\n## Honey\nSets hard in the comb.\n",
}


def embedded_rows(root: Path) -> list[tuple[str, str, bytes]]:
    return query(db_file(root), "SELECT model, hash, vector FROM embeddings ORDER BY hash")


def distinct_block_hashes(root: Path) -> set[str]:
    return {h for (h,) in query(db_file(root), "SELECT embed_hash FROM blocks")}


def test_vectors_are_keyed_by_model_and_a_new_model_replaces_the_old_ones(make_vault):
    root = make_vault(TINY_VAULT)
    first, second = FakeEmbedder("test/model-a"), FakeEmbedder("test/model-b")
    with Workspace.open(root, embedder=first) as ws:
        assert ws.index().embedded == len(distinct_block_hashes(root))
        assert ws.status().model == "test/model-a"
    with Workspace.open(root, embedder=second) as ws:
        report = ws.index()
        status = ws.status()
    assert report.embedded == len(distinct_block_hashes(root))
    assert {m for m, _, _ in embedded_rows(root)} == {"test/model-b"}
    assert (status.model, status.vectors) == ("test/model-b", status.blocks)


def test_a_broken_model_leaves_the_text_indexed_and_says_why(make_vault):
    root = make_vault(TINY_VAULT)
    with Workspace.open(root, embedder=FakeEmbedder(broken=True)) as ws:
        report = ws.index()
        status = ws.status()
    assert report.embed_error == "model files are missing"
    assert (report.added, report.embedded, status.vectors) == (3, 0, 0)
    assert status.blocks > 0
    with Workspace.open(root, embedder=FakeEmbedder()) as ws:
        report = ws.index()
        assert (report.unchanged, report.embedded) == (3, len(distinct_block_hashes(root)))
        assert ws.status().vectors == ws.status().blocks


def test_the_embed_setting_decides_when_index_is_called_without_embed(make_vault):
    root = make_vault(TINY_VAULT)
    fake = FakeEmbedder()
    with Workspace.open(root, {"embed": False}, embedder=fake) as ws:
        ws.index()
    assert fake.seen == [] and embedded_rows(root) == []


def test_the_embedded_text_is_title_heading_path_and_block_text(make_vault):
    root = make_vault({"Ivy.md": "# Ivy\n\n## Honey\nSets hard.\n"})
    fake = FakeEmbedder()
    with Workspace.open(root, embedder=fake) as ws:
        ws.index()
    # the empty "# Ivy" section embeds as the title alone, which the H1 does not repeat;
    # the folder is never part of it
    assert sorted(fake.seen) == ["Ivy", "Ivy\nHoney\nSets hard."]


def test_a_title_embeds_the_same_from_frontmatter_or_an_opening_h1(make_vault):
    root = make_vault(
        {
            "docs/17.md": "# Thermal lift\n\nWings at speed.\n",
            "docs/18.md": "---\ntitle: Thermal lift\n---\nWings at speed.\n",
        }
    )
    fake = FakeEmbedder()
    with Workspace.open(root, embedder=fake) as ws:
        ws.index()
        titles = dict(ws._vault.db.connect().execute("SELECT path, title FROM notes"))
    assert titles == {"docs/17.md": "Thermal lift", "docs/18.md": "Thermal lift"}
    assert sorted(set(fake.seen)) == ["Thermal lift\nWings at speed."]


THYMOL = (
    "---\naliases: [Apiguard, thymol]\n---\n# Thymol\n\nA treatment against mites.\n\n"
    "## Dosing\nTwo trays, two weeks apart.\n"
)


def test_a_notes_aliases_are_searched_and_embedded_with_its_first_block(make_vault):
    root = make_vault({"Thymol.md": THYMOL, "Oxalic.md": "# Oxalic\n\nA winter treatment.\n"})
    fake = FakeEmbedder()
    with Workspace.open(root, embedder=fake) as ws:
        ws.index()
        found = ws.select("apiguard", k=3, use_vectors=False)
    # an alias is a name the note is looked up by: said once, at the note's start, and
    # never twice (the alias "thymol" repeats the title)
    assert search(root, "apiguard") == {"Thymol.md"}
    assert query(db_file(root), "SELECT ordinal, title FROM blocks ORDER BY note_id, ordinal")[
        -2:
    ] == [(0, "Thymol\nApiguard"), (1, "Thymol")]
    assert "Thymol\nApiguard\nA treatment against mites." in fake.seen
    assert "Thymol\nDosing\nTwo trays, two weeks apart." in fake.seen
    # what the user sees is the note's title
    assert [(c.path, c.title) for c in found.candidates] == [("Thymol.md", "Thymol")]


def test_an_index_from_before_aliases_were_searched_parses_notes_with_aliases_again(make_vault):
    root = make_vault({"Thymol.md": THYMOL, "Oxalic.md": "# Oxalic\n\nA winter treatment.\n"})
    index(root)
    conn = sqlite3.connect(db_file(root))
    with conn:  # the first block as an index of schema 4 held it: the title alone
        conn.execute(
            "INSERT INTO blocks_fts(blocks_fts, rowid, title, heading_path, text)"
            " SELECT 'delete', id, title, heading_path, text FROM blocks WHERE ordinal = 0"
        )
        conn.execute("UPDATE blocks SET title = 'Thymol' WHERE title = 'Thymol\nApiguard'")
        conn.execute(
            "INSERT INTO blocks_fts(rowid, title, heading_path, text)"
            " SELECT id, title, heading_path, text FROM blocks WHERE ordinal = 0"
        )
        pretend_schema(conn, 4)
    conn.close()
    assert search(root, "apiguard") == set()
    report = index(root)
    assert (report.updated, search(root, "apiguard")) == (1, {"Thymol.md"})
    assert_full_text_matches_blocks(db_file(root))


def test_an_index_from_before_canvas_links_were_read_parses_linking_notes_again(make_vault):
    root = make_vault(
        {
            "Canvas.md": "# Canvas\n\nBoards of cards.\n",
            "Boards.md": "# Boards\n\nSee [[Canvas]].\n",
            "Plain.md": "# Plain\n\nNo links.\n",
        }
    )
    index(root)
    conn = sqlite3.connect(db_file(root))
    with conn:  # as schema 6 left it: the link to Canvas dropped
        conn.execute("DELETE FROM links")
        pretend_schema(conn, 6)
    conn.close()
    report = index(root)
    assert (report.updated, report.unchanged) == (1, 2)
    assert resolved(root, "Boards.md", "Canvas") == "Canvas.md"


@pytest.mark.slow
def test_embedding_stores_one_unit_vector_per_distinct_block_text(make_vault, embedder):
    root = make_vault(TINY_VAULT)
    with Workspace.open(root, embedder=embedder) as ws:
        report = ws.index()
        status = ws.status()
    rows = embedded_rows(root)
    assert report.embedded == len(rows) == len(distinct_block_hashes(root))
    assert {h for _, h, _ in rows} == distinct_block_hashes(root)
    assert {m for m, _, _ in rows} == {embedder.model_id}
    for _, _, blob in rows:
        vector = np.frombuffer(blob, dtype=np.float32)
        assert vector.shape == (embedder.dim,)
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-4
    assert (status.vectors, status.model) == (status.blocks, embedder.model_id)


@pytest.mark.slow
def test_unchanged_text_is_never_embedded_twice(make_vault, embedder):
    root = make_vault(TINY_VAULT)
    with Workspace.open(root, embedder=embedder) as ws:
        assert ws.index().embedded > 0
        assert ws.index().embedded == 0
        for path in root.rglob("*.md"):  # touched, same bytes
            st = path.stat()
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        assert ws.index().embedded == 0


@pytest.mark.slow
def test_editing_one_block_re_embeds_only_that_block(make_vault, embedder):
    root = make_vault(TINY_VAULT)
    with Workspace.open(root, embedder=embedder) as ws:
        ws.index()
        write(root, "Hives/Clover.md", TINY_VAULT["Hives/Clover.md"].replace("red", "blue"))
        report = ws.index()
        status = ws.status()
    assert (report.updated, report.embedded) == (1, 1)
    assert len(embedded_rows(root)) == len(distinct_block_hashes(root)), "stale vectors go"
    assert status.vectors == status.blocks


@pytest.mark.slow
def test_a_moved_note_reuses_its_vectors(make_vault, embedder):
    root = make_vault(TINY_VAULT)
    with Workspace.open(root, embedder=embedder) as ws:
        ws.index()
        before = embedded_rows(root)
        (root / "Archive").mkdir()
        (root / "Forage/Ivy.md").rename(root / "Archive/Ivy.md")
        report = ws.index()
        assert ws.status().vectors == ws.status().blocks
    assert (report.renamed, report.embedded) == (1, 0)
    assert embedded_rows(root) == before


@pytest.mark.slow
def test_index_without_embeddings_then_with_them(make_vault, embedder):
    root = make_vault(TINY_VAULT)
    with Workspace.open(root, embedder=embedder) as ws:
        report = ws.index(embed=False)
        status = ws.status()
        assert (report.embedded, status.vectors, status.model) == (0, 0, None)
        assert embedded_rows(root) == []
        report = ws.index()
        status = ws.status()
    assert report.unchanged == 3 and report.embedded == len(distinct_block_hashes(root))
    with_vectors = query(
        db_file(root),
        "SELECT count(*) FROM blocks b JOIN embeddings e ON e.hash = b.embed_hash",
    )[0][0]
    assert status.vectors == with_vectors == status.blocks


def test_a_heading_that_is_code_is_searched_by_its_words(make_vault):
    vault = make_vault({"CLI.md": "# CLI\n\n## Commands\n\n### `ob publish`\n\nSends the site.\n"})
    index(vault)
    assert query(db_file(vault), "SELECT heading_path FROM blocks WHERE level = 3") == [
        ("CLI > Commands > ob publish",)
    ]
    assert search(vault, "heading_path : publish") == {"CLI.md"}


def test_an_index_whose_code_headings_were_lost_parses_its_notes_again(make_vault):
    vault = make_vault({"CLI.md": "# CLI\n\n### `ob publish`\n\nSends the site.\n"})
    index(vault)
    conn = sqlite3.connect(db_file(vault))
    with conn:  # the index as the parser without code in headings wrote it
        conn.execute("UPDATE blocks SET heading = '', heading_path = 'CLI > ' WHERE level = 3")
        pretend_schema(conn, 9)
    conn.close()
    report = index(vault)
    assert report.updated == 1
    assert query(db_file(vault), "SELECT heading FROM blocks WHERE level = 3") == [("ob publish",)]
