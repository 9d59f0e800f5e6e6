"""The index on PostgreSQL answers every read as the SQLite index does: publish copies what
changed in one transaction, bm25 ranks as FTS5 ranks, restore brings it all back, vectors
as they are. On a real PostgreSQL (tests/pg_server.py) and real SQLite index files."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import EXAMPLE_VAULT, copy_vault
from vaultctx.errors import IndexLocked, IndexUnavailable
from vaultctx.search.query import QueryTokenizer, build_query
from vaultctx.storage import Vault
from vaultctx.storage.index_reads import SqliteReads
from vaultctx.storage.migrations import CHANGES_LOGGED
from vaultctx.storage.postgres.postings import (
    DEAD_KEYS,
    PLACE_BITS,
    POSITION_STRIDE,
    read_postings,
    stored_term,
)
from vaultctx.storage.postgres.reads import PostgresReads
from vaultctx.storage.postgres.schema import SCHEMA_VERSION, connect
from vaultctx.storage.postgres.sync import IndexerSeat, catch_up, publish, restore

WEIGHTS = (3.0, 1.5, 1.0)


@pytest.fixture(scope="module")
def published(
    tmp_path_factory: pytest.TempPathFactory, postgres_server
) -> Iterator[tuple[Vault, SqliteReads, PostgresReads]]:
    """The example vault indexed in SQLite and published to a database of its own."""
    root = copy_vault(EXAMPLE_VAULT, tmp_path_factory.mktemp("pg") / "vault")
    vault = Vault.open(root)
    vault.index()
    url = postgres_server.create_database("published_example")
    with connect(url) as pg:
        publish(vault.db, pg, vault.config.language)
    reads = PostgresReads(url)
    yield vault, SqliteReads(vault.db), reads
    reads.close()
    vault.close()
    postgres_server.drop_database("published_example")


def vault_words(vault: Vault) -> list[str]:
    rows = vault.db.connect().execute("SELECT title || ' ' || text FROM blocks ORDER BY id")
    return sorted({w for (text,) in rows for w in re.findall(r"[^\W_]{2,}", text)})


def both(published, method: str, *args, **kwargs):
    _, lite, pg = published
    return getattr(lite, method)(*args, **kwargs), getattr(pg, method)(*args, **kwargs)


def test_every_whole_index_read_is_the_same(published):
    _, lite, _ = published
    model = lite.meta("embedding_model")
    for method, args in [
        ("block_count", ()),
        ("note_ids", ()),
        ("language_counts", ()),
        ("language_counts", ({1, 2, 3},)),
        ("vector_count", (model,)),
        ("count_edited_since", (0, 10**6)),
        ("count_edited_since", (0, 3)),
        ("edited_since", (0, 20)),
        ("recent_accesses", (10,)),
    ]:
        here, there = both(published, method, *args)
        assert here == there, method
    for method in ("all_note_paths", "resolved_links"):
        here, there = both(published, method)
        assert sorted(here) == sorted(there), method
    some = lite.note_ids()[::2]
    here, there = both(published, "resolved_links", some)
    assert here and sorted(here) == sorted(there)  # the links of some notes only
    for key in ("embedding_model", "analysis"):
        assert both(published, "meta", key)[0] == both(published, "meta", key)[1]


def test_reads_by_id_are_the_same(published):
    vault, lite, _ = published
    notes = lite.note_ids()
    blocks = [b for (b,) in vault.db.connect().execute("SELECT id FROM blocks ORDER BY id")]
    some_blocks = [*blocks[::7], 10**9]
    for method, args in [
        ("block_notes", (set(some_blocks),)),
        ("block_rows", (some_blocks,)),
        ("note_paths", (notes[::3],)),
        ("note_block_counts", (notes,)),
        ("first_blocks", (notes,)),
        ("note_title_language", (notes[5],)),
        ("note_title_language", (10**9,)),
        ("note_sections", (notes[5],)),
        ("neighbours", (blocks[3],)),
        ("notes_matching", (None, None, ["bees"])),
        ("notes_matching", (0, 2**62, [])),
    ]:
        here, there = both(published, method, *args)
        if isinstance(here, list):
            here, there = sorted(here), sorted(there)
        assert here == there, (method, args)
    passages = both(published, "passage_links", blocks)
    assert sorted(passages[0]) == sorted(passages[1])


def test_notes_are_found_by_name_counted_and_linked_the_same(published):
    vault, lite, pg = published
    paths = [p for _, p in sorted(lite.all_note_paths())]
    titles = [t for (t,) in vault.db.connect().execute("SELECT title FROM notes")]
    aliases = [a for (a,) in vault.db.connect().execute("SELECT alias FROM aliases")]
    names = [("path", p) for p in paths] + [("path", p.upper()) for p in paths[:5]]
    names += [("file", "/" + p.rsplit("/", 1)[-1]) for p in paths]
    names += [("title", t) for t in titles] + [("title", t.lower()) for t in titles[:5]]
    names += [("alias", a) for a in aliases] + [("alias", a.upper()) for a in aliases]
    names += [("path", "nowhere.md"), ("title", "No such title"), ("alias", "nobody")]
    for by, name in names:
        for any_case in (False, True):
            assert lite.find_note(by, name, any_case) == pg.find_note(by, name, any_case)
    assert lite.has_notes() and pg.has_notes()
    model = lite.meta("embedding_model")
    for language in (None, "de"):
        here, there = lite.index_counts(model, language), pg.index_counts(model, language)
        assert here == there and list(here["languages"]) == list(there["languages"])
    assert sorted(lite.note_tags()) == sorted(pg.note_tags()) != []
    (notes_here, links_here), (notes_there, links_there) = lite.link_rows(), pg.link_rows()
    assert sorted(notes_here) == sorted(notes_there)
    assert sorted(links_here) == sorted(links_there)
    folders = {p.rsplit("/", 1)[0] + "/" for p in paths if "/" in p}
    for folder in [*folders, "Nowhere/"]:
        assert lite.notes_under(folder) == pg.notes_under(folder)
    tags = [t for (t,) in vault.db.connect().execute("SELECT DISTINCT tag FROM tags")]
    for tag in [*tags, "no-such-tag"]:
        assert lite.tagged(tag) == pg.tagged(tag)


def test_vectors_travel_as_they_are(published):
    _, lite, pg = published
    model = lite.meta("embedding_model")
    here = {b: (n, h, v) for chunk in lite.vector_rows(model, 50) for b, n, h, v in chunk}
    there = {b: (n, h, v) for chunk in pg.vector_rows(model, 50) for b, n, h, v in chunk}
    assert here and here == there
    keys = sorted(k for chunk in pg.vector_keys(model, 50) for k in chunk)
    assert keys == sorted((b, n, h) for b, (n, h, _) in here.items())
    some = sorted({h for n, h, _ in here.values()})[:5]
    assert sorted(pg.vectors_of(model, some)) == sorted(lite.vectors_of(model, some))


def ranked(reads, text: str, **filters) -> tuple[object, list[tuple[int, float]]]:
    built = build_query(text, QueryTokenizer(reads), reads.block_count())
    return built, reads.bm25_blocks(built, WEIGHTS, 40, **filters)


def assert_same_ranking(published, text: str, **filters) -> None:
    _, lite, pg = published
    built_here, here = ranked(lite, text, **filters)
    built_there, there = ranked(pg, text, **filters)
    assert built_here == built_there
    assert [b for b, _ in here] == [b for b, _ in there], text
    for (_, a), (_, b) in zip(here, there, strict=True):
        assert b == pytest.approx(a, rel=1e-9)


@pytest.mark.parametrize(
    "text",
    [
        "varroa mites treatment",
        "when should I treat the hives",
        '"queen cell" swarm',
        '"honey harvest"',
        "hiv* inspection",
        "inspect*",
        "the and of",
        "zzzz nothing here",
        "Königin café naïve",
    ],
)
def test_bm25_ranks_as_fts5_ranks(published, text):
    assert_same_ranking(published, text)


def test_bm25_keeps_only_allowed_and_unhidden_notes(published):
    _, lite, pg = published
    notes = lite.note_ids()
    assert_same_ranking(published, "hive bees honey", allowed=set(notes[::2]))
    assert_same_ranking(published, "hive bees honey", hidden=set(notes[1::3]))
    assert_same_ranking(published, '"the hive" bees', allowed=set(notes[::2]), hidden={notes[0]})
    _, found = ranked(pg, "hive bees honey", allowed=set())
    assert found == []


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_bm25_ranks_as_fts5_for_any_query_of_vault_words(published, data):
    words = vault_words(published[0])
    picked = data.draw(st.lists(st.sampled_from(words), min_size=1, max_size=6))
    shape = data.draw(st.sampled_from(["terms", "phrase", "prefix"]))
    if shape == "phrase" and len(picked) > 1:
        text = f'"{picked[0]} {picked[1]}" ' + " ".join(picked[2:])
    elif shape == "prefix":
        text = " ".join(picked[1:]) + f" {picked[0][:3]}*"
    else:
        text = " ".join(picked)
    assert_same_ranking(published, text)


def test_a_phrase_found_in_the_vault_ranks_the_same(published):
    vault = published[0]
    texts = [t for (t,) in vault.db.connect().execute("SELECT text FROM blocks ORDER BY id")]
    rng = random.Random(3)
    for text in rng.sample(texts, 20):
        words = re.findall(r"[^\W_]{3,}", text)
        if len(words) >= 3:
            start = rng.randrange(len(words) - 2)
            assert_same_ranking(published, f'"{" ".join(words[start : start + 3])}"')


def table_rows(pg, table: str, columns: str) -> list[tuple]:
    return sorted(tuple(r) for r in pg.execute(f"SELECT {columns} FROM {table}").fetchall())


def lite_rows(vault: Vault, table: str, columns: str) -> list[tuple]:
    return sorted(vault.db.connect().execute(f"SELECT {columns} FROM {table}").fetchall())


COMPARED = {
    "notes": "id, path, title, mtime_ns, content_hash, frontmatter, language",
    "blocks": "id, note_id, ordinal, heading_path, text, embed_hash",
    "links": "id, source_id, target, kind, target_id",
    "tags": "note_id, tag",
    "aliases": "note_id, alias",
}


def fts5_postings(vault: Vault) -> dict[tuple[str, int], tuple[int, int, tuple, list]]:
    """{(term as the database keys it, block): (note, block's tokens, count per column,
    positions)}, read from the SQLite index's FTS5 table itself."""
    conn = vault.db.connect()
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.vx_test_v"
        " USING fts5vocab(main, blocks_fts, instance)"
    )
    columns = {"title": 0, "heading_path": 1, "text": 2}
    found: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
    ntok: dict[int, int] = {}
    for term, block, column, offset in conn.execute(
        "SELECT term, doc, col, offset FROM temp.vx_test_v"
    ):
        counts, positions = found.setdefault((term, block), ([0, 0, 0], []))
        counts[columns[column]] += 1
        positions.append(columns[column] * POSITION_STRIDE + offset)
        ntok[block] = ntok.get(block, 0) + 1
    note_of = dict(conn.execute("SELECT id, note_id FROM blocks"))
    return {
        (stored_term(term), block): (note_of[block], ntok[block], tuple(counts), sorted(positions))
        for (term, block), (counts, positions) in found.items()
    }


def database_postings(pg) -> dict[tuple[str, int], tuple[int, int, tuple, list]]:
    """The same, from the database's live posting lists."""
    rows = pg.execute(
        "SELECT term, segment, postings, positions FROM posting_lists", binary=True
    ).fetchall()
    (dead,) = pg.execute(DEAD_KEYS, binary=True).fetchone()
    found = {}
    for term, postings in read_postings(rows, dead).items():
        places = postings.places
        for i, block in enumerate(postings.block.tolist()):
            mine = places[(places >> PLACE_BITS) == block] & ((1 << PLACE_BITS) - 1)
            found[term, block] = (
                int(postings.note[i]),
                int(postings.ntok[i]),
                tuple(postings.tf[i].tolist()),
                sorted(mine.tolist()),
            )
    return found


def assert_database_matches(vault: Vault, pg) -> None:
    """Every table as SQLite has it; every live posting as FTS5 has it; each term's block
    count kept right."""
    for table, columns in COMPARED.items():
        assert table_rows(pg, table, columns) == lite_rows(vault, table, columns), table
    postings = database_postings(pg)
    assert postings == fts5_postings(vault)
    holding: dict[str, int] = {}
    for term, _ in postings:
        holding[term] = holding.get(term, 0) + 1
    assert dict(pg.execute("SELECT term, df FROM term_df").fetchall()) == holding
    ntok = {block: count for (_, block), (_, count, _, _) in postings.items()}
    assert {b: n for b, n in pg.execute("SELECT id, ntok FROM blocks") if n} == ntok
    totals = pg.execute(
        "SELECT value FROM meta WHERE key IN ('lexical_rows', 'lexical_tokens') ORDER BY key"
    ).fetchall()
    rows, tokens = pg.execute("SELECT count(*), coalesce(sum(ntok), 0) FROM blocks").fetchone()
    assert [value for (value,) in totals] == [str(rows), str(tokens)]  # bm25's totals


def logged_changes(vault: Vault) -> dict[str, list]:
    """What the SQLite index logged as changed since its last publish."""
    conn = vault.db.connect()
    return {
        "notes": [i for (i,) in conn.execute("SELECT id FROM unpublished_notes ORDER BY id")],
        "links": [i for (i,) in conn.execute("SELECT id FROM unpublished_links ORDER BY id")],
        "vectors": conn.execute("SELECT model, hash FROM unpublished_vectors").fetchall(),
        "logging": vault.db.get_meta(CHANGES_LOGGED) is not None,
    }


NOTHING_LOGGED = {"notes": [], "links": [], "vectors": [], "logging": True}


def test_publish_copies_only_what_changed_and_moves_the_generation(example_vault, postgres_url):
    vault = Vault.open(example_vault)
    vault.index()
    with connect(postgres_url) as pg:
        first = publish(vault.db, pg, None)
        assert first.full and first.notes_written == len(vault.db.connect().execute(
            "SELECT id FROM notes").fetchall())  # fmt: skip
        assert first.vectors > 0
        assert_database_matches(vault, pg)
        generation = PostgresReads(postgres_url).meta("generation")

        again = publish(vault.db, pg, None)
        assert not again.full and not again.changed
        assert PostgresReads(postgres_url).meta("generation") == generation

        notes = sorted(example_vault.rglob("*.md"))
        notes[0].write_text("# Rewritten\n\nAn entirely new text about quokkas.\n")
        notes[1].unlink()
        notes[2].rename(notes[2].with_name("Renamed note.md"))
        (example_vault / "Brand new.md").write_text("Quokkas link to [[Renamed note]].\n")
        vault.index()
        changed = publish(vault.db, pg, None)
        assert not changed.full
        assert changed.notes_deleted >= 1 and 1 <= changed.notes_written <= 6
        assert_database_matches(vault, pg)
        assert int(PostgresReads(postgres_url).meta("generation")) == int(generation) + 1
        _, found = ranked(PostgresReads(postgres_url), "quokkas")
        assert {b for b, _ in found} == {b for b, _ in ranked(SqliteReads(vault.db), "quokkas")[1]}
        assert len(found) == 2
    vault.close()


def test_after_a_publish_the_next_compares_only_what_changed_since(example_vault, postgres_url):
    """Each publish leaves the SQLite index logging what changes (notes written, touched or
    deleted, links retargeted, vectors added); the next publish compares those alone, not
    the whole index, and ends where comparing everything would."""
    (example_vault / "Fan.md").write_text("# Fan\n\nWaiting for [[Ghost]] to be written.\n")
    vault = Vault.open(example_vault)
    vault.index()
    conn = vault.db.connect()
    with connect(postgres_url) as pg:
        assert publish(vault.db, pg, None).full
        assert logged_changes(vault) == NOTHING_LOGGED
        ids = dict(conn.execute("SELECT path, id FROM notes"))
        (fan_link,) = conn.execute(
            "SELECT id FROM links WHERE source_id = ? AND target_id IS NULL", (ids["Fan.md"],)
        ).fetchone()
        edited, deleted, touched, behind = sorted(
            p.relative_to(example_vault).as_posix() for p in example_vault.rglob("*.md")
        )[:4]
        (example_vault / edited).write_text("# Edited\n\nA new text about wombats.\n")
        (example_vault / deleted).unlink()
        mtime = (example_vault / touched).stat().st_mtime_ns + 10**9
        os.utime(example_vault / touched, ns=(mtime, mtime))  # the same bytes, a new mtime
        (example_vault / "Ghost.md").write_text("# Ghost\n\nHere at last, with wombats.\n")
        # Changed in the database behind the index's back: no log names it.
        pg.execute("UPDATE notes SET title = 'Drifted' WHERE id = %s", (ids[behind],))
        vault.index()

        ghost = conn.execute("SELECT id FROM notes WHERE path = 'Ghost.md'").fetchone()[0]
        logged = logged_changes(vault)
        assert logged["notes"] == sorted({ids[edited], ids[deleted], ids[touched], ghost})
        assert fan_link in logged["links"]
        new_hashes = {
            h for (h,) in conn.execute(
                "SELECT embed_hash FROM blocks WHERE note_id IN (?, ?)", (ids[edited], ghost)
            )
        }  # fmt: skip
        assert new_hashes and new_hashes <= {h for _, h in logged["vectors"]}

        report = publish(vault.db, pg, None)
        assert not report.full
        assert (report.notes_written, report.notes_deleted) == (3, 1)  # edited, touched, Ghost
        assert report.links_retargeted >= 1 and report.vectors >= len(new_hashes)
        assert logged_changes(vault) == NOTHING_LOGGED
        (target,) = pg.execute("SELECT target_id FROM links WHERE id = %s", (fan_link,)).fetchone()
        assert target == ghost
        # Only what the log named was compared: the note changed behind its back stays so.
        (title,) = pg.execute("SELECT title FROM notes WHERE id = %s", (ids[behind],)).fetchone()
        assert title == "Drifted"
        pg.execute(
            "UPDATE notes SET title = %s WHERE id = %s",
            (conn.execute("SELECT title FROM notes WHERE id = ?", (ids[behind],)).fetchone()[0],
             ids[behind]),
        )  # fmt: skip
        assert_database_matches(vault, pg)
    vault.close()


def test_an_index_read_without_its_database_logs_nothing_and_is_compared_whole(
    example_vault, postgres_url
):
    """Opened without `database_url`, the index stops logging (nothing would read the log);
    published again later, it is compared whole, and what changed meanwhile gets there."""
    team = Vault.open(example_vault, {"database_url": postgres_url})
    team.index(embed=False)
    assert logged_changes(team) == NOTHING_LOGGED
    team.close()
    alone = Vault.open(example_vault)
    assert logged_changes(alone) == {**NOTHING_LOGGED, "logging": False}
    (example_vault / "Offline.md").write_text("# Offline\n\nWritten with no database.\n")
    next(example_vault.rglob("Varroa*.md")).unlink()
    alone.index(embed=False)
    assert logged_changes(alone) == {**NOTHING_LOGGED, "logging": False}
    alone.close()
    team = Vault.open(example_vault, {"database_url": postgres_url})
    report = team.index(embed=False)
    assert report.published is not None and not report.published["full"]
    assert (report.published["notes_written"], report.published["notes_deleted"]) == (1, 1)
    assert logged_changes(team) == NOTHING_LOGGED
    team.close()
    alone = Vault.open(example_vault)  # its full text made again, to compare the postings
    with connect(postgres_url) as pg:
        assert_database_matches(alone, pg)
    alone.close()


def test_segments_stay_few_and_right_through_many_small_publishes(
    example_vault: Path, postgres_url, monkeypatch: pytest.MonkeyPatch
):
    """Each publish of a few notes writes a segment and leaves tombstones in the old ones:
    a segment a quarter dead is rebuilt, small ones are merged, and every live posting,
    term count and ranking stays FTS5's."""
    from vaultctx.storage.postgres import sync

    monkeypatch.setattr(sync, "SEGMENT_NOTES", 16)
    monkeypatch.setattr(sync, "MAX_SMALL_SEGMENTS", 2)
    vault = Vault.open(example_vault)
    vault.index()
    notes = sorted(example_vault.rglob("*.md"))
    with connect(postgres_url) as pg:
        publish(vault.db, pg, None)
        for round_ in range(12):
            note = notes[(round_ * 5) % len(notes)]
            if round_ % 4 == 3:
                note.unlink()
                notes.remove(note)
            else:
                note.write_text(f"# Round {round_}\n\nQuokkas and varroa, round {round_}.\n")
            (example_vault / f"New {round_}.md").write_text(f"Quokka number {round_}.\n")
            vault.index()
            publish(vault.db, pg, None)
            assert_database_matches(vault, pg)
            sizes = pg.execute(
                "SELECT s.segment, count(*), (SELECT count(*) FROM dead_notes d"
                " WHERE d.segment = s.segment) FROM segment_notes s GROUP BY s.segment"
            ).fetchall()
            assert all(dead * 4 < live + dead for _, live, dead in sizes)
            assert sum(1 for _, live, _ in sizes if live < 8) <= 2 + 1
            (rows,) = pg.execute("SELECT count(*) FROM notes").fetchone()
            assert len(sizes) <= rows // 8 + 2 + 1
        reads = (None, SqliteReads(vault.db), PostgresReads(postgres_url))
        for query in ("quokka", "varroa mites", "round*", '"quokkas and varroa"'):
            assert_same_ranking(reads, query)
        reads[2].close()
    vault.close()


def test_a_token_too_long_for_a_key_is_published_and_found(example_vault, postgres_url):
    """A pasted key of 3,990 characters with no separator is one FTS5 term, past what a
    btree key holds: the database keys it by a hash, and finds it as SQLite does (as a tag
    or an alias it is no name: a warning)."""
    blob = "".join(random.Random(1).choices("abcdefghijklmnopqrstuvwxyz0123456789", k=3990))
    (example_vault / "Blob.md").write_text(
        f"---\naliases: [{blob.upper()}]\n---\n# Blob\n\nA pasted key: {blob} and bees. #{blob}\n"
    )
    vault = Vault.open(example_vault)
    vault.index()
    with connect(postgres_url) as pg:
        publish(vault.db, pg, None)
        assert_database_matches(vault, pg)
        (longest,) = pg.execute("SELECT max(octet_length(term)) FROM term_df").fetchone()
        assert longest <= 1000
    reads = (None, SqliteReads(vault.db), PostgresReads(postgres_url))
    for query in (blob, f"{blob[:20]}*", f'"pasted key {blob}"'):
        _, found = ranked(reads[2], query)
        assert len(found) == 1
        assert_same_ranking(reads, query)
    reads[2].close()
    vault.close()


def test_a_note_at_a_path_too_long_for_a_key_is_published_and_found(example_vault, postgres_url):
    """Twelve folders of 250 letters make a path of 3,000 bytes, past what a btree key holds
    (2,704): the database keeps paths unique by their hash, and finds the note by its path
    as SQLite does."""
    letters = random.Random(2)
    folder = example_vault
    for _ in range(12):
        folder /= "".join(letters.choices("abcdefghijklmnopqrstuvwxyz", k=250))
    folder.mkdir(parents=True)
    (folder / "Deep.md").write_text("# Deep\n\nA note about wombats, far down.\n")
    path = (folder / "Deep.md").relative_to(example_vault).as_posix()
    vault = Vault.open(example_vault)
    vault.index()
    with connect(postgres_url) as pg:
        publish(vault.db, pg, None)
        assert_database_matches(vault, pg)
        pg.execute("SET enable_seqscan = off")  # as on a table too big to read through
        (plan,) = pg.execute("EXPLAIN SELECT id FROM notes WHERE path = %s", (path,)).fetchone()
        assert "notes_path" in plan  # found by its hash
    reads = (None, SqliteReads(vault.db), PostgresReads(postgres_url))
    found = reads[2].find_note("path", path, False)
    assert found is not None and found == reads[1].find_note("path", path, False)
    assert_same_ranking(reads, "wombats")
    reads[2].close()
    vault.close()


def test_restore_brings_the_index_back_without_embedding_again(example_vault, postgres_url):
    vault = Vault.open(example_vault)
    vault.index()
    with connect(postgres_url) as pg:
        publish(vault.db, pg, None)
    before = {t: lite_rows(vault, t, c) for t, c in COMPARED.items()}
    vectors = lite_rows(vault, "embeddings", "model, hash, vector")
    vault.close()

    elsewhere = copy_vault(example_vault, example_vault.parent / "elsewhere")
    moved = Vault.open(elsewhere)
    with connect(postgres_url) as pg:
        assert restore(pg, moved.db) == len(before["notes"])
    assert logged_changes(moved) == NOTHING_LOGGED  # it holds what the database does
    assert {t: lite_rows(moved, t, c) for t, c in COMPARED.items()} == before
    assert lite_rows(moved, "embeddings", "model, hash, vector") == vectors
    moved.close()
    moved = Vault.open(elsewhere)  # read here: the full-text table, left empty, is made
    assert_same_full_text(moved)
    report = moved.index()
    assert report.embedded == 0 and not report.changed
    moved.close()


def assert_same_full_text(vault: Vault) -> None:
    """The rebuilt full-text index holds what the indexer would have written."""
    from conftest import assert_full_text_matches_blocks

    assert_full_text_matches_blocks(vault.db.path)


def test_another_index_catches_up_before_it_publishes(example_vault, postgres_url):
    first = Vault.open(example_vault)
    first.index()
    with connect(postgres_url) as pg:
        publish(first.db, pg, None)
        elsewhere = copy_vault(example_vault, example_vault.parent / "second-host")
        second = Vault.open(elsewhere)
        assert catch_up(second.db, pg)
        assert not catch_up(second.db, pg)  # it is now the index last published
        (elsewhere / "From the second host.md").write_text("Written on another machine.\n")
        second.index()
        report = publish(second.db, pg, None)
        assert not report.full and report.notes_written == 1
        assert_database_matches(second, pg)
        assert catch_up(first.db, pg)  # the first host's index is behind now
    first.close()
    second.close()


def take_when_free(seat: IndexerSeat) -> None:
    """As a watcher does: try again until the old indexer's backend has exited."""
    deadline = time.monotonic() + 10
    while True:
        try:
            seat.take()
            return
        except IndexLocked:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_one_indexer_at_a_time_and_another_takes_over_when_it_is_gone(postgres_url):
    first, second = IndexerSeat(postgres_url), IndexerSeat(postgres_url)
    held = first.take()
    assert first.take() is held  # kept for as long as it indexes
    with pytest.raises(IndexLocked, match="another vaultctx is indexing"):
        second.take()
    held.close()  # the indexer's process died: its connection, and the seat, are gone
    take_when_free(second)
    with pytest.raises(IndexLocked):
        first.take()
    second.release()
    take_when_free(first)
    first.release()


def test_readers_see_a_publish_whole(example_vault, postgres_url):
    """A reader polling while a publish runs sees the old index or the new, never a mix."""
    vault = Vault.open(example_vault)
    vault.index()
    with connect(postgres_url) as pg:
        publish(vault.db, pg, None)
    reads = PostgresReads(postgres_url)
    old = reads.block_count()
    for i in range(30):
        (example_vault / f"Extra {i}.md").write_text(f"# Extra {i}\n\nOne more block.\n")
    vault.index()
    seen: set[int] = set()
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            seen.add(reads.block_count())

    poller = threading.Thread(target=poll)
    poller.start()
    with connect(postgres_url) as pg:
        publish(vault.db, pg, None)
    done.set()
    poller.join()
    assert seen <= {old, old + 30}
    assert reads.block_count() == old + 30
    reads.close()
    vault.close()


def test_an_unreachable_database_is_a_clear_error(tmp_path: Path):
    with pytest.raises(IndexUnavailable, match="cannot connect"):
        PostgresReads(f"postgresql://nobody@/none?host={tmp_path}&connect_timeout=2")


def test_a_dropped_connection_is_opened_again(published, postgres_server):
    """The database restarted (or a pooler dropped the connection): the next read works."""
    _, lite, pg = published
    admin = connect(postgres_server.url)
    admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = 'published_example' AND pid <> pg_backend_pid()"
    )
    admin.close()
    assert pg.block_count() == lite.block_count()


def test_a_failed_publish_leaves_the_database_as_it_was(
    example_vault, postgres_url, monkeypatch: pytest.MonkeyPatch
):
    from vaultctx.storage.postgres import sync

    vault = Vault.open(example_vault)
    vault.index()
    with connect(postgres_url) as pg:
        publish(vault.db, pg, None)
        before = {t: table_rows(pg, t, c) for t, c in COMPARED.items()}
        generation = PostgresReads(postgres_url).meta("generation")
        (example_vault / "Late.md").write_text("# Late\n\nWritten while the indexer died.\n")
        next(example_vault.rglob("Varroa*.md")).unlink()
        vault.index()

        def killed(*args, **kwargs):
            raise KeyboardInterrupt("the indexer was killed")

        monkeypatch.setattr(sync, "_copy_vectors", killed)
        with pytest.raises(KeyboardInterrupt):
            publish(vault.db, pg, None)
        assert {t: table_rows(pg, t, c) for t, c in COMPARED.items()} == before
        assert PostgresReads(postgres_url).meta("generation") == generation
        monkeypatch.undo()
        report = publish(vault.db, pg, None)
        assert report.notes_written == 1 and report.notes_deleted == 1 and not report.full
        assert_database_matches(vault, pg)
    vault.close()


def test_a_link_to_a_note_copied_later_in_the_same_publish(
    example_vault, postgres_url, monkeypatch: pytest.MonkeyPatch
):
    """Notes are copied a batch at a time; a link may point forward into a later batch."""
    from vaultctx.storage.postgres import sync

    monkeypatch.setattr(sync, "SEGMENT_NOTES", 1)
    vault = Vault.open(example_vault)
    vault.index()
    with connect(postgres_url) as pg:
        report = publish(vault.db, pg, None)
        assert report.full and report.notes_written > 50
        assert_database_matches(vault, pg)
        (targets,) = pg.execute("SELECT count(*) FROM links WHERE target_id IS NOT NULL").fetchone()
        assert targets > 100
    vault.close()


def test_status_names_the_database_without_its_password():
    from vaultctx.storage.backend import _without_password

    assert (
        _without_password("postgresql://bob:s3cr%40t@db.example:5432/team?sslmode=require")
        == "postgresql://bob:***@db.example:5432/team?sslmode=require"
    )
    assert _without_password("postgresql://postgres@/x?host=/tmp") == (
        "postgresql://postgres@/x?host=/tmp"
    )


def test_touches_made_through_the_database_outlive_a_full_publish(example_vault, postgres_url):
    """A new language setting analyses every note again (a full publish); what the team
    touched meanwhile, straight in the database, stays."""
    vault = Vault.open(example_vault)
    vault.index()
    with connect(postgres_url) as pg:
        publish(vault.db, pg, None)
        reads = PostgresReads(postgres_url)
        notes = reads.note_ids()
        for at, note in enumerate(notes[:3], start=1):
            reads.record_access(note, float(at), "touch")
        with vault.db.transaction() as conn:  # as a changed language setting leaves it
            conn.execute("UPDATE meta SET value = value || ' (again)' WHERE key = 'analysis'")
        assert publish(vault.db, pg, None).full
        assert reads.recent_accesses(10) == [(notes[2], 3.0), (notes[1], 2.0), (notes[0], 1.0)]
        assert_database_matches(vault, pg)
        reads.close()
    vault.close()


def test_the_hnsw_index_of_an_earlier_version_is_dropped_as_the_database_is_opened(
    example_vault: Path, postgres_url
):
    """vaultctx up to schema 7 built an HNSW index on a model's vectors past
    `ann_min_vectors`; select no longer asks it, so schema 8 drops it (every write kept it
    up to date) and nothing else on the table."""
    vault = Vault.open(example_vault)
    vault.index()
    model = vault.db.get_meta("embedding_model")
    old = "embeddings_ann_" + hashlib.sha1(model.encode()).hexdigest()[:12]
    with connect(postgres_url) as pg:
        publish(vault.db, pg, None)
        back_to_schema_8(vault, pg)
        pg.execute(
            f"CREATE INDEX {old} ON embeddings USING hnsw ((vector::vector(384))"
            f" vector_cosine_ops) WHERE model = '{model}';"
            " CREATE INDEX embeddings_annotated ON embeddings (hash);"
            " UPDATE vx_schema SET version = 7"
        )
    with connect(postgres_url) as pg:  # opening it migrates
        indexes = {
            name
            for (name,) in pg.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'embeddings'"
            ).fetchall()
        }
        assert old not in indexes and "embeddings_annotated" in indexes
        assert pg.execute("SELECT version FROM vx_schema").fetchone() == (SCHEMA_VERSION,)
    vault.close()


def back_to_schema_8(vault: Vault, pg) -> None:
    """The database as schema 8 held the same index: a row per term and block."""
    pg.execute(
        "DROP TABLE posting_lists, segment_notes, dead_notes; DROP SEQUENCE segment_ids;"
        " CREATE TABLE postings (term text NOT NULL, block_id bigint NOT NULL,"
        " tf_title integer NOT NULL, tf_heading integer NOT NULL, tf_text integer NOT NULL,"
        " positions integer[] NOT NULL, ntok integer NOT NULL, note_id bigint NOT NULL,"
        " PRIMARY KEY (term, block_id) INCLUDE (tf_title, tf_heading, tf_text, ntok, note_id));"
        " CREATE INDEX postings_block ON postings (block_id);"
        " UPDATE vx_schema SET version = 8"
    )
    with pg.cursor() as cur, cur.copy("COPY postings FROM STDIN") as copy:
        for (term, block), (note, ntok, tf, positions) in fts5_postings(vault).items():
            copy.write_row((term, block, *tf, positions, ntok, note))


def test_a_database_of_the_last_schema_is_upgraded_with_its_rankings(example_vault, postgres_url):
    """Schema 9 packs the postings a row per term and segment; a database published before
    it has its postings packed as it is opened, and ranks exactly as it did."""
    vault = Vault.open(example_vault)
    vault.index()
    with connect(postgres_url) as pg:
        publish(vault.db, pg, None)
    reads = PostgresReads(postgres_url)
    queries = ["varroa mites treatment", "hiv* inspection", '"queen cell" swarm']
    before = [ranked(reads, q)[1] for q in queries]
    reads.close()
    with connect(postgres_url) as pg:
        back_to_schema_8(vault, pg)
    reads = PostgresReads(postgres_url)  # opening it migrates
    try:
        assert [ranked(reads, q)[1] for q in queries] == before
        assert reads.query("SELECT version FROM vx_schema") == [(SCHEMA_VERSION,)]
        with connect(postgres_url) as pg:
            assert_database_matches(vault, pg)
            publish(vault.db, pg, None)  # and publishes go on from it
            assert_database_matches(vault, pg)
    finally:
        reads.close()
        vault.close()


@pytest.mark.parametrize("stops_in", ["a statement", "a COPY"])
def test_a_database_stopped_mid_publish_is_one_line_and_the_next_run_completes(
    example_vault: Path, monkeypatch: pytest.MonkeyPatch, stops_in: str
):
    """PostgreSQL stops while `vaultctx index` publishes — between statements, or while a
    COPY streams the posting lists (psycopg then also warns on its own logger): one line
    and exit code 20, no traceback; once it is back, the next run publishes everything the
    first did not."""
    from click.testing import CliRunner

    from pg_server import EmbeddedPostgres
    from vaultctx.cli import cli
    from vaultctx.storage.postgres import postings, sync

    runner = CliRunner()
    with EmbeddedPostgres() as server:
        url = server.create_database("stopped")
        configured = runner.invoke(
            cli, ["config", "database_url", url, "--vault", str(example_vault)]
        )
        assert configured.exit_code == 0, configured.output
        owner, name = (
            (sync, "_update_doc_freqs") if stops_in == "a statement" else
            (postings.SegmentRows, "copy_data")
        )  # fmt: skip
        step = getattr(owner, name)

        def stopped_midway(*args):
            server.pause()  # the transaction open (and in a COPY, the COPY under way)
            return step(*args)

        monkeypatch.setattr(owner, name, stopped_midway)
        failed = runner.invoke(cli, ["index", str(example_vault), "--no-embed"])
        monkeypatch.undo()
        assert failed.exit_code == IndexUnavailable.exit_code, failed.output
        assert "Traceback" not in failed.output and not isinstance(failed.exception, Exception)
        lines = failed.output.strip().splitlines()
        assert len(lines) == 1 and "database failed while publishing" in lines[0], lines

        server.resume()
        again = runner.invoke(cli, ["index", str(example_vault), "--no-embed", "--json"])
        assert again.exit_code == 0, again.output
        published = json.loads(again.output)["published"]
        vault = Vault.open(example_vault)  # its full-text table is the database's
        try:
            (notes,) = vault.db.connect().execute("SELECT count(*) FROM notes").fetchone()
            assert published["full"] and published["notes_written"] == notes
            with connect(url) as pg:
                for table, columns in COMPARED.items():
                    assert table_rows(pg, table, columns) == lite_rows(vault, table, columns)
        finally:
            vault.close()


def test_psycopg_s_own_warnings_print_nothing_beside_vaultctx_s_one_line() -> None:
    """A COPY cut off by a lost connection makes psycopg warn on its logger ("error ignored
    terminating <psycopg.Copy …>") as well as raise; the CLI reports the error in one line,
    and with no handler of its own the warning would reach stderr through Python's last
    resort as a second. A logging configuration of the user's still receives it."""
    warn = (
        "import logging, vaultctx.storage.postgres;"
        " logging.getLogger('psycopg').warning('error ignored terminating <psycopg.Copy>')"
    )
    quiet = subprocess.run([sys.executable, "-c", warn], capture_output=True, text=True)
    assert quiet.returncode == 0 and quiet.stderr == ""
    configured = subprocess.run(
        [sys.executable, "-c", f"import logging; logging.basicConfig(); {warn}"],
        capture_output=True,
        text=True,
    )
    assert "error ignored terminating" in configured.stderr
