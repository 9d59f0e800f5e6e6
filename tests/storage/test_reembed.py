"""A change of embedding model: the old vectors keep answering, with the old model's encoder
for the query, while the new model's are made; the index switches in one step when they
cover every block, and a killed run goes on where it stopped (`storage/vector_models.py`).

Two real models: the bundled int8 all-MiniLM-L6-v2 and the same weights in full precision,
which give other vectors and so have another identity."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import generated_vault, query
from server_helpers import config_dir_fixture  # noqa: F401
from vaultctx import Workspace
from vaultctx.storage import indexer as indexer_module
from vaultctx.storage import vault as vault_module
from vaultctx.storage.embeddings import (
    BUNDLED_MODEL_ID,
    FULL_PRECISION_MODEL,
    FULL_PRECISION_MODEL_ID,
    Embedder,
)
from vaultctx.storage.vector_models import PENDING_KEY

pytestmark = pytest.mark.slow

QUESTION = "keeping the colony from leaving"
ONE_BATCH = 1e-9  # seconds of a model switch per run: the batch that passes them


@pytest.fixture(scope="module")
def full_precision() -> Embedder:
    model = Embedder(FULL_PRECISION_MODEL, backend="onnx")
    model.encode(["warm up"])
    return model


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> int:
    """Batches of 64 blocks: the example vault's 256 blocks take four."""
    monkeypatch.setattr(indexer_module, "_EMBED_BATCH", 64)
    return 64


def models_stored(root: Path) -> dict[str, int]:
    rows = query(
        root / ".vaultctx" / "index.db", "SELECT model, count(*) FROM embeddings GROUP BY 1"
    )
    return dict(rows)


def ranking(ws: Workspace, text: str = QUESTION) -> list[tuple[str, float]]:
    return [(c.id, round(c.score, 6)) for c in ws.select(text, k=8).candidates]


def test_a_model_switch_answers_with_the_old_vectors_at_every_step_then_with_the_new(
    example_vault: Path, embedder, full_precision, small_batches
) -> None:
    with Workspace.open(example_vault, embedder=embedder) as ws:
        ws.index()
        before = ranking(ws)
        related_before = [c.id for c in ws.related("Varroa mites", k=5).candidates]
    steps = []
    with Workspace.open(example_vault, embedder=full_precision) as ws:
        while True:
            report = ws.index(reembed_seconds=ONE_BATCH)  # one batch of the new model per run
            status = ws.status()
            selection = ws.select(QUESTION, k=8)
            steps.append((report.reembedded, status.pending_vectors, report.switched_to))
            if report.switched_to:
                break
            assert (status.model, status.pending_model) == (
                BUNDLED_MODEL_ID,
                FULL_PRECISION_MODEL_ID,
            )
            assert status.vectors == status.blocks, "the old model's set stays whole"
            assert selection.diagnostics["retrieval_path"] == "hybrid"
            assert selection.diagnostics["vector_model"] == BUNDLED_MODEL_ID
            # The old vectors, queried with the old model's encoder: the same answers.
            assert ranking(ws) == before
            assert [c.id for c in ws.related("Varroa mites", k=5).candidates] == related_before
        after = ws.select(QUESTION, k=8)
        status = ws.status()
    blocks = status.blocks
    assert [pending for _, pending, _ in steps[:-1]] == [64 * i for i in range(1, len(steps))]
    assert len(steps) == -(-blocks // 64) and steps[-1][2] == FULL_PRECISION_MODEL_ID
    assert (status.model, status.pending_model) == (FULL_PRECISION_MODEL_ID, None)
    assert status.vectors == blocks and status.pending_vectors == 0
    assert models_stored(example_vault) == {FULL_PRECISION_MODEL_ID: blocks}, "old vectors dropped"
    assert after.diagnostics["vector_model"] == FULL_PRECISION_MODEL_ID
    assert after.diagnostics["vector_hits"] > 0


def test_a_note_saved_during_a_switch_gets_vectors_of_both_models(
    example_vault: Path, embedder, full_precision, small_batches
) -> None:
    with Workspace.open(example_vault, embedder=embedder) as ws:
        ws.index()
    note = example_vault / "Inbox" / "Swarm lure.md"
    with Workspace.open(example_vault, embedder=full_precision) as ws:
        ws.index(reembed_seconds=ONE_BATCH)
        note.write_text("# Swarm lure\n\nLemongrass oil in a bait hive draws scouts.\n")
        report = ws.index(reembed_seconds=ONE_BATCH)
        status = ws.status()
        selection = ws.select("an oil that attracts scouting bees", k=3)
        assert (status.model, status.vectors) == (BUNDLED_MODEL_ID, status.blocks)
        assert report.embedded - report.reembedded == 1, "its vector of the answering model"
        assert selection.diagnostics["vector_model"] == BUNDLED_MODEL_ID
        assert selection.candidates[0].path == "Inbox/Swarm lure.md"
        while not ws.index(reembed_seconds=ONE_BATCH).switched_to:
            pass
        assert ws.select("an oil that attracts scouting bees", k=3).candidates[0].path == (
            "Inbox/Swarm lure.md"
        )


def test_an_index_with_no_model_change_never_records_a_pending_model(
    example_vault: Path, embedder
) -> None:
    with Workspace.open(example_vault, embedder=embedder) as ws:
        first = ws.index()
        (example_vault / "Home.md").write_text("# Home\n\nA new start page.\n")
        second = ws.index()
        status = ws.status()
    assert (first.reembedded, second.reembedded, second.embedded) == (0, 0, 1)
    assert status.pending_model is None
    assert not query(
        example_vault / ".vaultctx" / "index.db", "SELECT 1 FROM meta WHERE key = ?", PENDING_KEY
    )


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vaultctx", *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_a_switch_killed_midway_goes_on_where_it_stopped(
    tmp_path: Path, embedder, full_precision
) -> None:
    vault = generated_vault(tmp_path / "vault", 500)
    db_path = vault / ".vaultctx" / "index.db"
    with Workspace.open(vault, embedder=embedder) as ws:
        ws.index()
        blocks = ws.status().blocks
    run_cli("config", "--vault", str(vault), "embedding_model", FULL_PRECISION_MODEL)

    def new_vectors() -> int:
        return models_stored(vault).get(FULL_PRECISION_MODEL_ID, 0)

    proc = subprocess.Popen([sys.executable, "-m", "vaultctx", "index", str(vault)])
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(sqlite3.Error):
                if new_vectors() > 0:
                    break
            time.sleep(0.02)
        assert proc.poll() is None, "the switch finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    made = new_vectors()
    assert 0 < made < blocks, "the kill should land mid-switch"
    status = json.loads(run_cli("status", str(vault), "--json").stdout)
    assert (status["model"], status["vectors"]) == (BUNDLED_MODEL_ID, blocks)
    assert (status["pending_model"], status["pending_vectors"]) == (FULL_PRECISION_MODEL_ID, made)
    text = run_cli("status", str(vault)).stdout
    assert f"{made} of {blocks} blocks embedded" in text
    with Workspace.open(vault, embedder=full_precision) as ws:
        assert ws.select("apiary log number 7", k=5).diagnostics["vector_model"] == BUNDLED_MODEL_ID
        report = ws.index()
        status_after = ws.status()
    assert report.reembedded == blocks - made, "the next run makes only what is missing"
    assert report.switched_to == FULL_PRECISION_MODEL_ID
    assert (status_after.model, status_after.vectors) == (FULL_PRECISION_MODEL_ID, blocks)
    assert models_stored(vault) == {FULL_PRECISION_MODEL_ID: blocks}
    assert not query(db_path, "SELECT value FROM meta WHERE key = ? AND value != ''", PENDING_KEY)


def test_the_watcher_completes_a_switch_beside_saved_notes_while_select_keeps_answering(
    example_vault: Path, embedder, full_precision, small_batches, monkeypatch
) -> None:
    monkeypatch.setattr(vault_module, "REEMBED_SLICE_S", ONE_BATCH)
    with Workspace.open(example_vault, embedder=embedder) as ws:
        ws.index()
    note = example_vault / "Inbox" / "Swarm lure.md"
    lure = "an oil that attracts scouting bees"
    seen: list[tuple[str | None, int]] = []
    answered: set[str] = set()
    found_during_switch = False
    with Workspace.open(example_vault, embedder=full_precision) as ws:
        watcher = ws.watch(catch_up=False)  # nothing saved: the switch starts by itself
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status = ws.status()
            seen.append((status.pending_model, status.pending_vectors))
            selection = ws.select(QUESTION, k=3)
            assert selection.diagnostics["vector_hits"] > 0, "the vector list answers throughout"
            answered.add(selection.diagnostics["vector_model"])
            if status.pending_model and not note.exists():
                note.write_text("# Swarm lure\n\nLemongrass oil in a bait hive draws scouts.\n")
            if status.pending_model and note.exists():
                top = ws.select(lure, k=1)
                found_during_switch |= top.candidates[0].path == "Inbox/Swarm lure.md" and (
                    top.diagnostics["vector_model"] == BUNDLED_MODEL_ID
                )
            if status.model == FULL_PRECISION_MODEL_ID:
                break
            time.sleep(0.05)
        last = ws.select(lure, k=1)
        watcher.stop()
    assert status.model == FULL_PRECISION_MODEL_ID, "the switch finished with no command"
    assert answered == {BUNDLED_MODEL_ID, FULL_PRECISION_MODEL_ID}
    progress = [done for pending, done in seen if pending == FULL_PRECISION_MODEL_ID]
    assert progress and progress == sorted(progress)
    assert found_during_switch, "the saved note was found by the old vectors meanwhile"
    assert last.candidates[0].path == "Inbox/Swarm lure.md"
    assert last.diagnostics["vector_model"] == FULL_PRECISION_MODEL_ID


def test_a_team_database_answers_with_the_old_vectors_until_the_switch_is_published(
    example_vault: Path, tmp_path: Path, postgres_url, embedder, full_precision, small_batches
) -> None:
    from conftest import copy_vault
    from vaultctx.storage.postgres.schema import connect

    other = copy_vault(example_vault, tmp_path / "host-b" / "notes")
    team = {"database_url": postgres_url}

    def database_models() -> set[str]:
        with connect(postgres_url) as pg:
            return {m for (m,) in pg.execute("SELECT DISTINCT model FROM embeddings")}

    with Workspace.open(example_vault, team, embedder=embedder) as host:
        host.index()
    # A host of the team configured for the new model already: it answers as the database does.
    settings = {**team, "index_dir": str(other.parent / "index")}
    with Workspace.open(other, {**settings, "embedding_model": FULL_PRECISION_MODEL}) as reader:
        before = ranking(reader)
        made = 0
        with Workspace.open(example_vault, team, embedder=full_precision) as host:
            while not (report := host.index(reembed_seconds=ONE_BATCH)).switched_to:
                assert report.published is not None
                made += report.reembedded
                status = reader.status()
                assert (status.model, status.pending_model) == (
                    BUNDLED_MODEL_ID,
                    FULL_PRECISION_MODEL_ID,
                )
                assert status.pending_vectors == made
                assert database_models() == {BUNDLED_MODEL_ID, FULL_PRECISION_MODEL_ID}
                selection = reader.select(QUESTION, k=8)
                assert selection.diagnostics["vector_model"] == BUNDLED_MODEL_ID
                assert ranking(reader) == before
        status = reader.status()
        selection = reader.select(QUESTION, k=8)
    assert (status.model, status.pending_model) == (FULL_PRECISION_MODEL_ID, None)
    assert status.vectors == status.blocks
    assert database_models() == {FULL_PRECISION_MODEL_ID}, "the old vectors left the database"
    assert selection.diagnostics["vector_model"] == FULL_PRECISION_MODEL_ID


def switching_vault(vault: Path, embedder, full_precision) -> int:
    """`vault` indexed with the bundled model, then configured for the full-precision one,
    with the first batch of the new vectors made: a switch under way. Its blocks."""
    with Workspace.open(vault, embedder=embedder) as ws:
        ws.index()
    run_cli("config", "--vault", str(vault), "embedding_model", FULL_PRECISION_MODEL)
    with Workspace.open(vault, embedder=full_precision) as ws:
        assert ws.index(reembed_seconds=ONE_BATCH).reembed_left > 0
        return ws.status().blocks


def test_a_server_that_does_not_watch_completes_the_switch_while_it_answers(
    example_vault: Path, embedder, full_precision, small_batches, monkeypatch, config_dir
) -> None:
    from server_helpers import call
    from vaultctx.server.run import LocalServer

    monkeypatch.setattr(vault_module, "REEMBED_SLICE_S", ONE_BATCH)
    switching_vault(example_vault, embedder, full_precision)
    statuses, answered = [], set()
    with Workspace.open(example_vault) as ws, LocalServer(ws, watch=False, warm=False) as server:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            code, _, status = call(server, "GET", "/status")
            assert code == 200
            statuses.append(status)
            code, _, selection = call(server, "POST", "/select", {"query": QUESTION, "k": 3})
            assert code == 200 and selection["diagnostics"]["vector_hits"] > 0
            answered.add(selection["diagnostics"]["vector_model"])
            if status["model"] == FULL_PRECISION_MODEL_ID:
                break
            time.sleep(0.05)
    assert statuses[0]["pending_model"] == FULL_PRECISION_MODEL_ID
    assert 0 < statuses[0]["pending_vectors"] < statuses[0]["blocks"]
    assert statuses[-1]["model"] == FULL_PRECISION_MODEL_ID, "switched with no watcher"
    assert (statuses[-1]["pending_model"], statuses[-1]["pending_vectors"]) == (None, 0)
    assert answered == {BUNDLED_MODEL_ID, FULL_PRECISION_MODEL_ID}


def test_the_mcp_server_completes_the_switch_while_its_tools_answer(
    example_vault: Path, embedder, full_precision, small_batches
) -> None:
    import anyio

    from server_helpers import run_session

    blocks = switching_vault(example_vault, embedder, full_precision)

    async def steps(client) -> list[str]:
        answered = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            result = await client.call_tool("select", {"query": QUESTION, "k": 3})
            assert not result.is_error
            answered.append(result.structured_content["diagnostics"]["vector_model"])
            if models_stored(example_vault) == {FULL_PRECISION_MODEL_ID: blocks}:
                break
            await anyio.sleep(0.1)
        answered.append(
            (await client.call_tool("select", {"query": QUESTION, "k": 3})).structured_content[
                "diagnostics"
            ]["vector_model"]
        )
        return answered

    answered = run_session(example_vault, steps)
    assert answered[0] == BUNDLED_MODEL_ID
    assert answered[-1] == FULL_PRECISION_MODEL_ID, "switched with no watcher"
    assert models_stored(example_vault) == {FULL_PRECISION_MODEL_ID: blocks}


def test_memory_is_embedded_and_searched_by_the_model_that_answers_during_a_switch(
    example_vault: Path, embedder, full_precision, small_batches
) -> None:
    with Workspace.open(example_vault, embedder=embedder) as ws:
        ws.index()
    with Workspace.open(example_vault, embedder=full_precision) as ws:
        ws.index(reembed_seconds=ONE_BATCH)
        ws.memory.add("Marta prefers to inspect the apiary at dawn.")
        ws.memory.flush()
        found = ws.memory.search("early morning hive visits", k=3)  # no word in common
        assert [m.text for m in found][:1] == ["Marta prefers to inspect the apiary at dawn."]
        assert ws.memory.embedder is not None
        assert ws.memory.embedder.model_id == BUNDLED_MODEL_ID


def test_vaultctx_index_says_when_it_switched(
    example_vault: Path, embedder, full_precision, small_batches
) -> None:
    blocks = switching_vault(example_vault, embedder, full_precision)
    out = run_cli("index", str(example_vault)).stdout
    assert f"Switched to {FULL_PRECISION_MODEL_ID}: {blocks - 64} blocks embedded for it" in out
    assert json.loads(run_cli("status", str(example_vault), "--json").stdout)["model"] == (
        FULL_PRECISION_MODEL_ID
    )


def test_setting_the_old_model_back_ends_the_switch_and_drops_the_new_vectors(
    example_vault: Path, embedder, full_precision, small_batches
) -> None:
    blocks = switching_vault(example_vault, embedder, full_precision)
    assert models_stored(example_vault)[FULL_PRECISION_MODEL_ID] == 64
    with Workspace.open(example_vault, embedder=embedder) as ws:
        report = ws.index()
        status = ws.status()
    assert (report.embedded, report.reembedded) == (0, 0)
    assert (status.model, status.pending_model, status.vectors) == (BUNDLED_MODEL_ID, None, blocks)
    assert models_stored(example_vault) == {BUNDLED_MODEL_ID: blocks}


def test_vectors_of_a_model_that_cannot_load_are_not_queried_and_are_replaced(
    example_vault: Path, embedder
) -> None:
    from conftest import FakeEmbedder

    with Workspace.open(example_vault, embedder=FakeEmbedder("test/uninstalled")) as ws:
        ws.index()
    with Workspace.open(example_vault, embedder=embedder) as ws:
        before = ws.select(QUESTION, k=3).diagnostics
        report = ws.index()
        status = ws.status()
        after = ws.select(QUESTION, k=3).diagnostics
    assert before["retrieval_path"] == "lexical_graph_no_vectors"
    assert "errors" not in before
    assert report.switched_to is None and report.embedded == status.blocks
    assert (status.model, status.pending_model) == (BUNDLED_MODEL_ID, None)
    assert after["vector_model"] == BUNDLED_MODEL_ID
