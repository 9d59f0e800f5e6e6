"""A messy vault never stops the index or the watcher: each bad file is reported by name and,
where it holds text, indexed as text.

The pathological files are the hostile-vault benchmark's own (`benchmarks/synthvault.py`).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO_ROOT, query
from vaultctx import Workspace
from vaultctx.cli import cli
from vaultctx.storage.parser import parse_note
from vaultctx.storage.scanner import is_utf8, printable

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
from synthvault import BILLION_LAUGHS, HostileFile, hostile_files, write_hostile_files

ORDINARY = {
    "Hives/Clover.md": "---\ntags: [hive]\n---\n# Clover\n\nA strong colony of bees.\n",
    "Hives/Bramble.md": "# Bramble\n\nCalm bees. See [[Clover]].\n",
}


def run_cli(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def write_vault(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def found(root: Path, word: str) -> set[str]:
    return {
        path
        for (path,) in query(
            root / ".vaultctx" / "index.db",
            "SELECT DISTINCT n.path FROM blocks_fts f JOIN blocks b ON b.id = f.rowid"
            " JOIN notes n ON n.id = b.note_id WHERE blocks_fts MATCH ?",
            f'"{word}"',
        )
    }


def relpath(f: HostileFile) -> str:
    return printable(os.fsdecode(f.name))


# --- one of each ---------------------------------------------------------------------------


def test_an_alias_bomb_is_a_warning_in_milliseconds_and_the_note_stays_text():
    assert len(BILLION_LAUGHS) < 400
    started = time.perf_counter()
    note = parse_note(f"---\n{BILLION_LAUGHS}---\nThe laughing note.\n", "Bomb")
    assert time.perf_counter() - started < 0.5  # 9**9 strings if the aliases were expanded
    assert note.frontmatter == {}
    assert note.warnings == (
        "frontmatter: YAML aliases expand to too much data; frontmatter not read",
    )
    assert "laughing" in " ".join(b.text for b in note.blocks)


def test_index_reports_every_hostile_file_by_name_and_indexes_the_text_ones(tmp_path):
    root = write_vault(tmp_path / "vault", ORDINARY)
    hostile = write_hostile_files(root, hostile_files(huge_bytes=200_000))
    started = time.perf_counter()
    result = run_cli("index", str(root), "--no-embed")
    assert time.perf_counter() - started < 30
    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stderr
    warned = {line for line in result.stderr.splitlines() if line.startswith("Warning: ")}
    for f in hostile:
        if f.kind == "huge note":  # nothing wrong with it: it is only big
            continue
        named = [w for w in warned if relpath(f) in w]
        assert len(named) == 1, f"{f.kind}: {sorted(warned)}"
    for f in hostile:
        if f.marker:
            assert found(root, f.marker) == ({relpath(f)} if f.indexed else set()), f.kind
    assert found(root, "colony") == {"Hives/Clover.md"}

    status = run_cli("status", str(root), "--json")
    assert status.exit_code == 0, status.stderr
    data = json.loads(status.stdout)
    indexed = sum(f.indexed for f in hostile)
    assert data["notes"] == len(ORDINARY) + indexed
    assert data["notes_with_problems"] == indexed - 1  # all but the huge note


def test_an_invalid_date_keeps_the_rest_of_the_frontmatter(make_vault):
    root = make_vault(
        {"Feb.md": "---\ntitle: February\ntags: [cold]\ndate: 2023-02-30\n---\nSnow.\n"}
    )
    with Workspace.open(root, {"embed": False}) as ws:
        report = ws.index()
        selection = ws.select("snow", use_vectors=False, filters={"tags": ["cold"]})
    assert report.warnings == [
        ("Feb.md", "frontmatter: line 4: '2023-02-30' is not a valid date; kept as text")
    ]
    assert [(c.path, c.title) for c in selection.candidates] == [("Feb.md", "February")]
    (frontmatter,) = query(root / ".vaultctx" / "index.db", "SELECT frontmatter FROM notes")
    assert json.loads(frontmatter[0])["date"] == "2023-02-30"


def test_names_that_are_not_utf8_are_skipped_with_a_printable_warning(tmp_path):
    root = write_vault(tmp_path / "vault", ORDINARY)
    base = os.fsencode(root)
    with open(os.path.join(base, b"caf\xe9.md"), "wb") as fh:
        fh.write(b"# Cafe\n")
    os.mkdir(os.path.join(base, b"Dossier \xff"))
    with open(os.path.join(base, b"Dossier \xff", b"inside.md"), "wb") as fh:
        fh.write(b"# Inside\n")
    with open(os.path.join(base, b"image \xe9.png"), "wb") as fh:
        fh.write(b"not a note")
    result = run_cli("index", str(root), "--no-embed", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert sorted(data["skipped"], key=lambda s: s["path"]) == [
        {"path": "Dossier \\xff", "reason": "file name is not valid UTF-8; rename it"},
        {"path": "caf\\xe9.md", "reason": "file name is not valid UTF-8; rename it"},
    ]
    assert data["status"]["notes"] == len(ORDINARY)
    assert run_cli("status", str(root)).exit_code == 0


# --- the watcher ---------------------------------------------------------------------------


def eventually(condition, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    pytest.fail("condition not met in time")


def searchable(ws: Workspace, word: str) -> bool:
    """Some note holds `word` in the full-text index (select also lifts recent notes)."""
    return bool(found(ws.root, word))


def test_the_watcher_survives_hostile_files_and_names_and_indexes_later_saves(tmp_path):
    root = write_vault(tmp_path / "vault", ORDINARY)
    bad_folder = os.path.join(os.fsencode(root), b"Dossier \xff")
    with Workspace.open(root, {"embed": False}) as ws:
        ws.index()
        with ws.watch(embed=False) as watcher:
            write_hostile_files(root, hostile_files(huge_bytes=100_000))
            eventually(lambda: searchable(ws, "hostiledeepyaml"))
            # watchfiles cannot name a folder whose name is not UTF-8, now or in any later
            # watch: the watcher looks for changes itself, and says so in `status`
            os.mkdir(bad_folder)
            eventually(lambda: ws.status().watch_error is not None)
            assert "cannot watch the vault" in ws.status().watch_error
            (root / "Later.md").write_text("# Later\n\nA numbat came by.\n")
            eventually(lambda: searchable(ws, "numbat"))
            (root / "Later.md").write_text("# Later\n\nA bilby came by.\n")
            eventually(lambda: searchable(ws, "bilby"))
            assert watcher.running
            os.rename(bad_folder, root / "Dossier")  # the watch works again, and says so
            eventually(lambda: ws.status().watch_error is None, timeout=30)
            (root / "Later.md").write_text("# Later\n\nA quoll came by.\n")
            eventually(lambda: searchable(ws, "quoll"))
            assert watcher.running and watcher.last_error is None


def test_a_failing_run_is_logged_and_in_status_and_the_watcher_goes_on(
    tmp_path, monkeypatch, caplog
):
    from vaultctx.storage import indexer

    root = write_vault(tmp_path / "vault", ORDINARY)
    real_run = indexer.Indexer.run

    def broken_run(self, paths=None):  # stands in for a bug nobody has found yet
        raise RuntimeError("an unforeseen bug")

    with Workspace.open(root, {"embed": False}) as ws:
        ws.index()
        with ws.watch(embed=False) as watcher:
            monkeypatch.setattr(indexer.Indexer, "run", broken_run)
            (root / "Broken.md").write_text("# Broken\n\nA quokka.\n")
            eventually(lambda: ws.status().watch_error is not None)
            assert watcher.running
            status = run_cli("status", str(root))
            assert "watcher error" in status.stdout and "an unforeseen bug" in status.stdout
            assert "re-index failed: RuntimeError: an unforeseen bug" in caplog.text
            monkeypatch.setattr(indexer.Indexer, "run", real_run)
            eventually(lambda: searchable(ws, "quokka"))  # the retry catches up
            (root / "After.md").write_text("# After\n\nA wombat.\n")
            eventually(lambda: searchable(ws, "wombat"))
            eventually(lambda: ws.status().watch_error is None)
            assert watcher.running and watcher.last_error is None


# --- properties ----------------------------------------------------------------------------

DATES = st.builds(
    "{:04d}-{:02d}-{:02d}".format, st.integers(0, 9999), st.integers(0, 99), st.integers(0, 99)
)
NUMBERS = st.one_of(
    st.integers(0, 6000).map(lambda n: "9" * n or "0"),
    st.integers().map(str),
    st.sampled_from([".inf", "-.inf", ".nan", "0x" + "f" * 80, "1:2:3", "1e999", "0o7"]),
)
SCALARS = st.one_of(DATES, NUMBERS, st.text(max_size=20).map(json.dumps), st.just("[*a, *a]"))


@st.composite
def frontmatter_text(draw) -> str:
    """Frontmatter with dates valid and not, huge numbers, anchors and aliases, nesting."""
    lines = [f"a: &a [{draw(SCALARS)}, {draw(SCALARS)}]"]
    for i, value in enumerate(draw(st.lists(SCALARS, max_size=6))):
        depth = draw(st.integers(0, 3000))
        anchor = f"&k{i} " if draw(st.booleans()) else ""
        lines.append(f"k{i}: {anchor}" + "[" * depth + value + "]" * depth)
        if anchor and draw(st.booleans()):
            lines.append(f"r{i}: [{', '.join([f'*k{i}'] * draw(st.integers(1, 12)))}]")
    return "\n".join(lines) + "\n"


NAME_BYTES = st.binary(min_size=1, max_size=24).map(
    lambda b: b.replace(b"/", b"_").replace(b"\x00", b"_")
)


@settings(max_examples=40)
@given(front=frontmatter_text(), names=st.lists(NAME_BYTES, min_size=1, max_size=3))
def test_generated_frontmatter_and_file_names_never_stop_the_index(front, names):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base = os.fsencode(root)
        (root / "Fm.md").write_text(f"---\n{front}---\nThe frontmatterbody note.\n")
        for number, name in enumerate(names):
            with open(os.path.join(base, name + b"%d.md" % number), "wb") as fh:
                fh.write(b"# Named\n\nnamedbody\n")
        with Workspace.open(root, {"embed": False, "index_workers": 0}) as ws:
            report = ws.index()
            status = ws.status()
        assert found(root, "frontmatterbody") == {"Fm.md"}
        for (frontmatter,) in query(
            root / ".vaultctx" / "index.db", "SELECT frontmatter FROM notes"
        ):
            json.loads(frontmatter, parse_constant=pytest.fail)  # strict JSON: no NaN
        shown = [n for n in names if not n.startswith(b".")]  # hidden files are left out
        indexed = [n for n in shown if is_utf8(os.fsdecode(n))]
        assert len(found(root, "namedbody")) == len(indexed) == status.notes - 1
        assert len(report.skipped) == len(shown) - len(indexed)


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    """One watched vault for the whole property test: starting a watch per example is slow."""
    root = write_vault(tmp_path_factory.mktemp("watched"), ORDINARY)
    ws = Workspace.open(root, {"embed": False, "index_workers": 0})
    ws.index()
    watcher = ws.watch(embed=False)
    yield ws, watcher
    ws.close()


_SAVES = iter(range(1_000_000))


@settings(max_examples=12)
@given(front=frontmatter_text(), name=NAME_BYTES)
def test_generated_frontmatter_and_file_names_never_stop_the_watcher(watched, front, name):
    ws, watcher = watched
    number = next(_SAVES)
    base = os.fsencode(ws.root)
    with open(os.path.join(base, name + b"-fm%d.md" % number), "wb") as fh:
        fh.write(f"---\n{front}---\nbody\n".encode())
    word = f"sentinel{number}x"
    (ws.root / f"Sentinel {number}.md").write_text(f"# Sentinel\n\n{word}\n")
    eventually(lambda: searchable(ws, word))
    assert watcher.running
