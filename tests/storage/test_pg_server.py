"""The throwaway PostgreSQL of tests/pg_server.py: it starts, pgvector works in it, each
test's database is its own, and the TCP mode listens on 127.0.0.1.

psycopg and pgvector are imported in the tests, after the `postgres_server` fixture has
checked that they are installed (and skipped, with VAULTCTX_TEST_POSTGRES=optional, if not).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import numpy as np
import pytest

from pg_server import EmbeddedPostgres


def test_vector_column_orders_by_cosine_distance(postgres_url: str) -> None:
    import psycopg
    from pgvector.psycopg import register_vector

    with psycopg.connect(postgres_url) as conn:
        register_vector(conn)
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, embedding vector(3))")
        rows = [(1, [1.0, 0.0, 0.0]), (2, [0.0, 1.0, 0.0]), (3, [0.7, 0.7, 0.0])]
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO items VALUES (%s, %s)", [(i, np.array(v)) for i, v in rows]
            )
        got = conn.execute(
            "SELECT id, embedding <=> %s AS distance FROM items ORDER BY distance",
            (np.array([1.0, 0.1, 0.0]),),
        ).fetchall()
        assert [row[0] for row in got] == [1, 3, 2]
        assert got[0][1] == pytest.approx(1 - 1 / np.sqrt(1.01))
        stored = conn.execute("SELECT embedding FROM items WHERE id = 3").fetchone()[0]
        np.testing.assert_allclose(stored.to_numpy(), [0.7, 0.7, 0.0], rtol=1e-6)


def test_server_settings_are_the_fast_ones(postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SHOW fsync").fetchone() == ("off",)
        assert conn.execute("SHOW max_connections").fetchone() == ("100",)
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)


def test_cpu_seconds_count_the_work_of_a_backend_that_has_ended(
    postgres_server: EmbeddedPostgres, postgres_url: str
) -> None:
    """What index_bench charges to PostgreSQL: a connection's backend ends with it, and its
    CPU time must still count (the postmaster reaped it)."""
    import psycopg

    def backend_cpu(pid: int) -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    before = postgres_server.cpu_seconds()
    with psycopg.connect(postgres_url) as conn:
        (pid,) = conn.execute("SELECT pg_backend_pid()").fetchone()
        conn.execute("SELECT count(DISTINCT md5(i::text)) FROM generate_series(1, 600000) i")
        spent_by_backend = backend_cpu(pid)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # the backend ends once its client has gone
    assert not Path(f"/proc/{pid}").exists()
    assert spent_by_backend >= 0.1  # hashing and sorting 600,000 strings
    assert postgres_server.cpu_seconds() - before >= spent_by_backend - 0.02


def test_databases_are_isolated(postgres_server: EmbeddedPostgres) -> None:
    import psycopg

    first = postgres_server.create_database("isolation_a")
    second = postgres_server.create_database("isolation_b")
    try:
        with psycopg.connect(first) as conn:
            conn.execute("CREATE TABLE notes (path text)")
            conn.execute("INSERT INTO notes VALUES ('a.md')")
        with psycopg.connect(second) as conn:
            assert conn.execute("SELECT to_regclass('notes')").fetchone() == (None,)
            conn.execute("CREATE TABLE notes (path text)")  # the same name, another table
            assert conn.execute("SELECT count(*) FROM notes").fetchone() == (0,)
        with psycopg.connect(first) as conn:
            assert conn.execute("SELECT path FROM notes").fetchall() == [("a.md",)]
    finally:
        postgres_server.drop_database("isolation_a")
        postgres_server.drop_database("isolation_b")
    with psycopg.connect(postgres_server.url) as conn:
        names = {r[0] for r in conn.execute("SELECT datname FROM pg_database").fetchall()}
    assert not names & {"isolation_a", "isolation_b"}


def test_tcp_mode_accepts_connections_on_localhost(postgres_server: EmbeddedPostgres) -> None:
    """A second server of its own, on TCP, beside the session's (which is socket-only)."""
    import psycopg

    with EmbeddedPostgres(tcp=True) as server:
        assert server.url == f"postgresql://postgres@127.0.0.1:{server.port}/postgres"
        socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
        url = server.create_database("over_tcp")
        with psycopg.connect(url) as conn:
            assert conn.info.host == "127.0.0.1"
            assert conn.execute("SELECT inet_server_addr()::text").fetchone() == ("127.0.0.1/32",)
            assert conn.execute("SELECT '[1,2,3]'::vector <=> '[2,4,6]'").fetchone()[0] < 1e-6
        base = server.base
    assert server.base is None
    assert base is not None and not base.exists()  # stop removed its folder
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
