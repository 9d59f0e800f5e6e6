"""Memories on a team's database: what one server remembers, every server finds; what one
forgets, none finds again; a person's account-tier memories follow them from server to server
and reach nobody else; and an existing memory file moves in (vectors as they are) and back.

Each "host" here is a copy of the vault in a folder of its own, with an index folder of its
own: two machines, as far as vaultctx can tell, over one PostgreSQL database.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import open_host, two_hosts
from server_helpers import call
from vaultctx.cli import cli
from vaultctx.memory.merging import MemoryDraft
from vaultctx.memory.models import MemoryKind, MemorySource, Tier
from vaultctx.memory.store import MemoryRepository
from vaultctx.server.run import LocalServer
from vaultctx.storage.postgres.memory_book import MemoryBook
from vaultctx.storage.postgres.reads import PostgresReads

SHARED = "ZEBRASHARED"
FORGOTTEN = "ZEBRAFORGOTTEN"
ALICE = "ZEBRAALICE"
VAULT = {
    "Orchard.md": "# Orchard\n\nThe orchard has twelve hives. See [[Apiary]].\n",
    "Apiary.md": "# Apiary\n\nHives by the orchard, inspected weekly.\n",
}


@pytest.fixture
def hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The second at another path: the workspace scope must not differ."""
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("VAULTCTX_ACCOUNT_DIR", str(tmp_path / "owner-account"))
    return two_hosts(tmp_path, VAULT)


def book_copy(reads: PostgresReads, path: Path) -> MemoryRepository:
    """A server's copy (the file `path`) of the database's vault book."""
    return MemoryRepository(path, book=MemoryBook(reads, "vault", "/vault"))


def texts(memories: list) -> set[str]:
    return {m.text for m in memories}


def test_what_one_server_remembers_every_server_finds_and_forgets(
    hosts: tuple[Path, Path], postgres_url: str
):
    first, second = hosts
    with open_host(first, postgres_url) as a, open_host(second, postgres_url) as b:
        a.index()
        fact = a.memory.add(f"The orchard gate code is {SHARED}", tier="workspace")
        a.memory.add("Hive four swarmed in May", tier="channel", scope="garden")
        gone = b.memory.add(f"The old gate code was {FORGOTTEN}", tier="workspace")

        found = b.memory.search("orchard gate code")
        assert fact.id in [m.id for m in found]
        assert fact.scope == b.memory.vault_scope == a.memory.vault_scope == str(first)
        assert texts(b.memory.list(tier="channel", scope="garden")) == {"Hive four swarmed in May"}
        assert b.memory.get(fact.id) is not None
        assert a.memory.get(gone.id) is not None  # and the other way round

        assert a.memory.forget(gone.id) == 1
        assert b.memory.get(gone.id) is None
        assert FORGOTTEN not in json.dumps([m.text for m in b.memory.search("gate code")])
        assert b.memory.search(FORGOTTEN.lower()) == []
        b_file = b.memory.repo.path
    # erased from the other host's file (FTS5 merged, WAL truncated) and from the database
    assert FORGOTTEN.encode() not in b_file.read_bytes()
    assert SHARED.encode() in b_file.read_bytes()
    reads = PostgresReads(postgres_url)
    stored = json.dumps(reads.query("SELECT row::text, id FROM memory_rows"))
    reads.close()
    assert SHARED in stored and FORGOTTEN not in stored


def test_a_shared_memory_is_a_select_candidate_on_another_server(
    hosts: tuple[Path, Path], postgres_url: str
):
    first, second = hosts
    with open_host(first, postgres_url) as a, open_host(second, postgres_url) as b:
        a.index()
        with (
            LocalServer(a, watch=False, warm=False) as one,
            LocalServer(b, watch=False, warm=False) as two,
        ):
            status, _, added = call(
                one, "POST", "/memory/add",
                {"text": f"Beekeeping rule: smoke the hives before {SHARED}"},
            )  # fmt: skip
            assert status == 200, added
            status, _, found = call(two, "POST", "/memory/search", {"query": "smoke the hives"})
            assert status == 200 and added["id"] in [m["id"] for m in found["memories"]]
            status, _, selected = call(two, "POST", "/select", {"query": "smoke the hives"})
        assert status == 200
        assert added["id"] in json.dumps(selected)


def test_a_person_s_account_memories_follow_them_and_reach_nobody_else(
    hosts: tuple[Path, Path], postgres_url: str
):
    first, second = hosts
    with open_host(first, postgres_url) as a, open_host(second, postgres_url) as b:
        a.index()
        alice, bob = a.team.add("alice"), a.team.add("bob")
        with (
            LocalServer(a, watch=False, warm=False) as one,
            LocalServer(b, watch=False, warm=False) as two,
        ):
            status, _, added = call(
                one, "POST", "/memory/add",
                {"text": f"My locker code is {ALICE}", "tier": "account"}, token=alice,
            )  # fmt: skip
            assert status == 200, added
            for_alice = [
                call(two, "POST", "/memory/search", body, token=alice)
                for body in ({"query": "locker code"}, {"query": "locker", "tier": "account"})
            ]
            for_bob = [
                call(server, "POST", path, body, token=bob)
                for server in (one, two)
                for path, body in (
                    ("/memory/search", {"query": "locker code"}),
                    ("/memory/search", {"query": "locker", "tier": "account", "scope": "alice"}),
                    ("/select", {"query": "locker code"}),
                    ("/context", {"query": "locker code"}),
                )
            ]
            owner = call(two, "POST", "/memory/search", {"query": "locker code"})
    assert all(status == 200 for status, _, _ in for_alice + for_bob + [owner])
    assert all(ALICE in json.dumps(body) for _, _, body in for_alice)
    assert ALICE not in json.dumps([body for _, _, body in for_bob])
    assert ALICE not in json.dumps(owner[2])  # the owner's account is not alice's either


def test_each_person_s_conversations_are_their_own_on_every_server(
    hosts: tuple[Path, Path], postgres_url: str
):
    first, second = hosts
    said = {"owner": "ZEBRAOWNERCHAT", "alice": "ZEBRAALICECHAT", "bob": "ZEBRABOBCHAT"}
    with open_host(first, postgres_url) as a, open_host(second, postgres_url) as b:
        a.index()
        tokens = {"owner": "", "alice": a.team.add("alice"), "bob": a.team.add("bob")}
        with (
            LocalServer(a, watch=False, warm=False) as one,
            LocalServer(b, watch=False, warm=False) as two,
        ):
            for n, (who, token) in enumerate(tokens.items()):  # one session id, three people
                body = {"text": f"the smoker ran out, {said[who]}", "speaker": f"Speaker{n}",
                        "session": "s1", "turn": f"t{n}", "tier": "conversation",
                        "scope": "s1"}  # fmt: skip
                assert call(one, "POST", "/memory/add", body, token=token)[0] == 200
            found = {
                who: [
                    call(two, "POST", "/memory/search", body, token=token)
                    for body in (
                        {"query": "smoker ran out", "tier": "conversation", "scope": "s1"},
                        {"query": "smoker ran out", "tier": "conversation"},
                    )
                ]
                for who, token in tokens.items()
            }
    for who, answers in found.items():
        assert all(status == 200 for status, _, _ in answers)
        seen = json.dumps([body for _, _, body in answers])
        assert said[who] in seen
        assert not any(marker in seen for other, marker in said.items() if other != who)


def test_a_conversation_s_scratchpad_is_the_same_on_every_server(tmp_path: Path, postgres_url):
    from vaultctx.memory.scratchpad import ScratchpadRepository

    reads = PostgresReads(postgres_url)
    alone = MemoryRepository(tmp_path / "a.db")  # notes from before the database
    ScratchpadRepository(alone).write("s1", "plan", "inspect hive 3")
    alone.close()
    here, there = book_copy(reads, tmp_path / "a.db"), book_copy(reads, tmp_path / "b.db")
    pads = [ScratchpadRepository(repo) for repo in (here, there)]
    pads[0].write("s1", "draft", "buy frames")  # the first write moves the old notes in
    assert pads[1].read("s1", "plan") == "inspect hive 3"
    pads[1].write("s1", "plan", "inspect hive 4")  # the other server edits a note
    assert (
        pads[0].items("s1")
        == pads[1].items("s1")
        == {
            "draft": "buy frames",
            "plan": "inspect hive 4",
        }
    )
    assert pads[1].delete("s1", "draft") == 1
    assert pads[0].read("s1", "draft") is None and pads[0].read("s1", "plan") == "inspect hive 4"
    pads[0].delete("s1")
    assert pads[1].items("s1") == {}
    here.close()
    there.close()
    reads.close()


def test_memories_move_in_with_their_vectors_and_back(hosts: tuple[Path, Path], postgres_url: str):
    first, second = hosts
    runner = CliRunner()
    with open_host(first, None) as alone:  # a vault with memory, before any database
        alone.index()
        before = alone.memory.add("Queen marked blue in 2025", tier="workspace")
        alone.memory.add("The honey shed key hangs by the door", tier="channel", scope="shed")
    for key, value in (("index_dir", str(first.parent / "index")), ("database_url", postgres_url)):
        assert runner.invoke(cli, ["config", key, value, "--vault", str(first)]).exit_code == 0
    moved = runner.invoke(cli, ["index", str(first), "--no-embed", "--json"])
    assert moved.exit_code == 0, moved.output
    assert json.loads(moved.output)["published"]["memories"] == 2

    with open_host(second, None) as other:  # another host had memories of its own
        own = other.memory.add("Frames are stored in the barn loft", tier="workspace")
    with open_host(second, postgres_url) as b:  # it joins, and takes the database's index
        restored = b.restore_from_database()
        assert restored == 2
        b.index()
        assert {before.id, own.id} <= {m.id for m in b.memory.list()}
    with open_host(first, postgres_url) as a:  # its workspace memories are the team's now
        joined = a.memory.get(own.id)
        assert joined is not None and joined.scope == a.memory.vault_scope == str(first)
        assert own.id in [m.id for m in a.memory.search("barn loft frames")]
    with open_host(second, None) as back:  # and back: the file holds it all, no database
        assert texts(back.memory.list()) == {
            "Queen marked blue in 2025",
            "The honey shed key hangs by the door",
            "Frames are stored in the barn loft",
        }
        found = back.memory.search("barn loft frames queen marked")  # this host's scope again
        assert {before.id, own.id} <= {m.id for m in found}


def test_any_text_a_memory_holds_travels_as_it_is(tmp_path: Path, postgres_url: str):
    reads = PostgresReads(postgres_url)
    here = book_copy(reads, tmp_path / "a.db")
    there = book_copy(reads, tmp_path / "b.db")
    text = "a NUL \x00, an escaped one \\u0000, an emoji 🐝 and a tab\t"
    saved = here.save([(draft(text), None)])[0].memory
    assert there.get(saved.id).text == text
    here.close()
    there.close()
    reads.close()


def test_vectors_travel_as_they_are(tmp_path: Path, postgres_url: str):
    reads = PostgresReads(postgres_url)
    try:
        here = MemoryRepository(tmp_path / "a.db", model_id="m")
        vector = np.random.default_rng(7).normal(size=384).astype(np.float32)
        vector /= np.linalg.norm(vector)
        saved = here.save([(draft("Hives face south-east"), vector)])[0].memory
        here.book = MemoryBook(reads, "vault", "/vault")  # the file meets the database
        here.local_scope = "/vault"
        here.refresh()
        there = MemoryRepository(
            tmp_path / "b.db", model_id="m", book=MemoryBook(reads, "vault", "/x")
        )
        near = there.sync_mirror().nearest(
            vector, [(Tier.WORKSPACE, "/vault")], list(MemoryKind), 1
        )
        assert [rowid for rowid, _ in near] and there.by_rowids([near[0][0]])[
            near[0][0]
        ].id == saved.id
        assert near[0][1] == pytest.approx(1.0, abs=1e-6)
        blob = there.connect().execute("SELECT vector FROM memory_vectors").fetchone()[0]
        assert blob == vector.tobytes()
        turned = -vector  # the same memory again (its key), a new vector: an update of both
        here.save([(draft("Hives face north-west", key="hive-face"), turned)])
        here.save([(draft("Hives face south-west", key="hive-face"), vector)])
        here.save([(draft("Hives face north-west", key="hive-face"), turned)])
        (moved,) = [m for m in there.list() if m.key == "hive-face"]
        assert moved.text == "Hives face north-west"
        blobs = dict(
            there.connect().execute(
                "SELECT m.id, v.vector FROM memories m JOIN memory_vectors v"
                " ON v.memory_rowid = m.rowid"
            )
        )
        assert blobs[moved.id] == turned.tobytes()
        here.close()
        there.close()
    finally:
        reads.close()


def test_concurrent_writers_of_one_key_leave_one_memory_in_every_copy(
    tmp_path: Path, postgres_url: str
):
    reads = PostgresReads(postgres_url)
    copies = [book_copy(reads, tmp_path / f"{n}.db") for n in range(2)]
    errors: list[Exception] = []

    def write(repo: MemoryRepository, n: int) -> None:
        try:
            for i in range(15):
                repo.save([(draft(f"the smoker fuel is batch {n}-{i}", key="smoker-fuel"), None)])
                repo.save([(draft(f"note {n}-{i} about hive {i}"), None)])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(repo, n)) for n, repo in enumerate(copies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    seen = []
    for repo in copies:
        memories = repo.list()
        seen.append(sorted((m.id, m.text) for m in memories))
        assert len([m for m in memories if m.key == "smoker-fuel"]) == 1
        assert len(memories) == 31
    assert seen[0] == seen[1]
    for repo in copies:
        repo.close()
    reads.close()


def test_a_new_copy_numbers_memories_in_the_order_their_writers_did(
    tmp_path: Path, postgres_url: str
):
    """Ranking ties go to the lower row number: a copy made later must number alike."""
    reads = PostgresReads(postgres_url)
    writers = [book_copy(reads, tmp_path / f"{n}.db") for n in range(2)]
    for i in range(12):
        writers[i % 2].save([(draft(f"note {i}", key=f"k{i % 5}" if i % 3 else None), None)])
    later = book_copy(reads, tmp_path / "later.db")

    def order(repo: MemoryRepository) -> list[str]:
        repo.refresh()
        return [r[0] for r in repo.connect().execute("SELECT id FROM memories ORDER BY rowid")]

    assert order(later) == order(writers[0]) == order(writers[1])
    for repo in (*writers, later):
        repo.close()
    reads.close()


def test_a_write_the_database_refuses_leaves_the_file_as_it_was(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
):
    from vaultctx.storage.postgres import memory_book

    reads = PostgresReads(postgres_url)
    repo = book_copy(reads, tmp_path / "a.db")
    repo.save([(draft("first"), None)])

    def refuse(self, rows, forgotten):  # the database fails mid-write
        raise RuntimeError("connection lost")

    monkeypatch.setattr(memory_book.BookWrite, "save", refuse)
    with pytest.raises(RuntimeError):
        repo.save([(draft("second"), None)])
    monkeypatch.undo()
    assert texts(repo.list()) == {"first"}
    repo.save([(draft("third"), None)])
    other = book_copy(reads, tmp_path / "b.db")
    assert texts(other.list()) == texts(repo.list()) == {"first", "third"}
    repo.close()
    other.close()
    reads.close()


def draft(text: str, *, key: str | None = None) -> MemoryDraft:
    return MemoryDraft(
        tier=Tier.WORKSPACE,
        scope="/vault",
        kind=MemoryKind.SEMANTIC,
        text=text,
        summary=text,
        themes=(),
        importance=0.5,
        created_at=1_700_000_000.0,
        source=MemorySource(),
        key=key,
    )


def test_a_row_from_another_vaultctx_version_is_read_with_what_both_know(
    tmp_path: Path, postgres_url: str
):
    import psycopg
    from psycopg.types.json import Json

    reads = PostgresReads(postgres_url)
    repo = book_copy(reads, tmp_path / "a.db")
    written = repo.save([(draft("Hives face south-east"), None)])[0].memory
    (row,) = reads.query("SELECT row FROM memory_rows WHERE id = %s", (written.id,))[0]
    newer = {**row, "id": "newer", "dedupe": "x", "text": "A newer vaultctx wrote this",
             "colour": "amber"}  # fmt: skip
    older = {k: v for k, v in row.items() if k not in ("summary", "access_count")}
    older |= {"id": "older", "dedupe": "y", "text": "An older vaultctx wrote this"}
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        (version,) = conn.execute(
            "UPDATE memory_books SET version = version + 1 RETURNING version"
        ).fetchone()
        for memory in (newer, older):
            conn.execute(
                "INSERT INTO memory_rows (book, kind, id, version, row, born, born_rowid)"
                " VALUES ('vault', 'memory', %s, %s, %s, %s, 1)",
                (memory["id"], version, Json(memory), version),
            )
    assert repo.get("newer").text == "A newer vaultctx wrote this"
    assert repo.get("older").summary == "" and repo.get("older").access_count == 0
    repo.close()
    reads.close()


def test_a_turn_s_memory_outlives_a_database_restart(tmp_path: Path, monkeypatch):
    """The background writer tries an unreachable database again: a turn remembered while
    the database restarts is written once it is back, not counted as lost."""
    from pg_server import EmbeddedPostgres

    monkeypatch.setenv("VAULTCTX_ACCOUNT_DIR", str(tmp_path / "owner-account"))
    root, second = two_hosts(tmp_path, VAULT)
    with EmbeddedPostgres() as server:
        url = server.create_database("outage")
        with open_host(root, url) as ws:
            ws.index()
            ws.memory.add("The orchard has a gate", tier="workspace")  # the book exists
            server.pause()
            ws.memory.persist_turn(
                f"The spare hive key is under the {SHARED} stone", session_id="s1", tier="channel",
                channel="garden",
            )  # fmt: skip
            time.sleep(1.0)  # the writer met the database down, and waits
            server.resume()
            assert ws.memory.flush(timeout=60)
            stats = ws.memory.stats
            found = ws.memory.search("spare hive key", tier="channel", scope="garden")
        with open_host(second, url) as other:
            again = other.memory.search("spare hive key", tier="channel", scope="garden")
    assert stats["errors"] == 0 and stats["written"] >= 1
    assert any(SHARED in m.text for m in found) and any(SHARED in m.text for m in again)


def test_a_person_revoked_with_forget_leaves_no_memory_behind(
    hosts: tuple[Path, Path], postgres_url: str
):
    first, second = hosts
    with open_host(first, postgres_url) as a, open_host(second, postgres_url) as b:
        a.index()
        alice, carol = a.team.add("alice"), a.team.add("carol")
        add = {"text": f"My locker code is {ALICE}", "tier": "account"}
        with (
            LocalServer(a, watch=False, warm=False) as one,
            LocalServer(b, watch=False, warm=False) as two,
        ):
            assert call(one, "POST", "/memory/add", add, token=alice)[0] == 200
            assert ALICE in json.dumps(call(two, "POST", "/memory/search", LOCKER, token=alice))
            call(two, "POST", "/memory/add", {"text": "Carol was here", "tier": "account"},
                 token=carol)  # fmt: skip
            assert a.team.revoke("alice", forget=True)
            assert a.forget_departed() == ["alice"]  # this host's copy: erased now
            assert a.memory.search("locker code") == []  # the vault's memory stays open
            again = a.team.add("alice")  # back on the team, with nothing remembered
            later = call(two, "POST", "/memory/search", LOCKER, token=again)
        copies = {host: host.parent / "index" / "people" for host in (first, second)}
        assert not (copies[first] / "alice").exists()
        held = b"".join(
            f.read_bytes() for f in (copies[second] / "alice").rglob("*") if f.is_file()
        )
        assert ALICE.encode() not in held  # the other server dropped its stale copy
        assert later[0] == 200 and ALICE not in json.dumps(later[2])
        rows = PostgresReads(postgres_url)
        stored = json.dumps(rows.query("SELECT row::text FROM memory_rows"))
        rows.close()
        assert ALICE not in stored
        a.team.revoke("carol")
        with LocalServer(b, watch=False, warm=False) as restarted:  # erases as it starts
            assert call(restarted, "GET", "/health")[0] == 200
        assert not (copies[second] / "carol").exists()


LOCKER = {"query": "locker code", "tier": "account"}
