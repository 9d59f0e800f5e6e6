"""Related notes: a note, not a question, as the query — the same answer through the Python
API, the CLI, HTTP and MCP."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from mcp.client import Client

from server_helpers import call, run_session
from vaultctx import NoteNotFound, Workspace
from vaultctx.cli import cli
from vaultctx.server.run import LocalServer

NOTES = {
    "Varroa.md": "# Varroa\n\nVarroa mites breed in capped brood. Count the mite drop in August;"
    " treat with oxalic acid in winter. See [[Oxalic Acid]].\n",
    "Oxalic Acid.md": "# Oxalic Acid\n\nTrickle oxalic acid over the bees when the colony is"
    " broodless, in December.\n",
    "Mite Counts.md": "# Mite Counts\n\nAugust mite drop on the varroa board: Clover 12 a day,"
    " Bramble 30.\n",
    "Hive Log.md": "# Hive Log\n\nThe queen of Bramble was seen; brood in all stages.\n",
    "Garden.md": "# Garden\n\nTomatoes need staking; basil by the door.\n",
    "Kitchen.md": "# Kitchen\n\nBread rises overnight; the oven runs hot.\n",
    "Travel.md": "# Travel\n\nTrains to the coast leave at nine; book a seat.\n",
    "Books.md": "# Books\n\nA novel about a lighthouse keeper and his dog.\n",
    "Bikes.md": "# Bikes\n\nThe chain needs oil and the brakes new pads.\n",
    "Private/Diary.md": "# Diary\n\nVarroa mites and the oxalic acid plan, in private.\n",
    ".vaultctx/permissions.toml": '[[rules]]\ncapability = "vault.read"\npaths = ["Private/**"]\n'
    'effect = "deny"\n',
}


@pytest.fixture
def vault(make_vault: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(tmp_path / "config"))
    root = make_vault(NOTES)
    with Workspace.open(root, {"embed": False}) as ws:
        ws.index()
    return root


@pytest.fixture
def ws(vault: Path) -> Iterator[Workspace]:
    with Workspace.open(vault, {"embed": False}) as workspace:
        yield workspace


def paths(contract: dict) -> list[str]:
    return [c["path"] for c in contract["candidates"]]


def test_a_note_finds_the_notes_about_the_same_thing_and_never_itself(ws: Workspace) -> None:
    selection = ws.related("Varroa", k=5, use_vectors=False)
    found = [c.path for c in selection.candidates]
    assert selection.query == "Varroa.md"
    assert "Varroa.md" not in found
    assert set(found[:2]) == {"Oxalic Acid.md", "Mite Counts.md"}
    assert "Garden.md" not in found[:3]
    assert len(found) == len(set(found))  # one passage per note
    assert "varroa" in [t.lower() for t in selection.diagnostics["related_terms"]]


def test_what_the_note_links_to_is_lifted_without_a_touch(ws: Workspace) -> None:
    selection = ws.related("Varroa", k=5, use_vectors=False)
    oxalic = next(c for c in selection.candidates if c.path == "Oxalic Acid.md")
    assert "graph" in oxalic.sources
    assert ws._vault.db.connect().execute("SELECT count(*) FROM accesses").fetchone()[0] == 0


def test_touch_records_the_note_as_open_first(ws: Workspace) -> None:
    ws.related("Varroa", use_vectors=False, touch=True)
    rows = ws._vault.db.connect().execute(
        "SELECT n.path, a.kind FROM accesses a JOIN notes n ON n.id = a.note_id"
    )
    assert rows.fetchall() == [("Varroa.md", "open")]


def test_a_hidden_note_is_neither_asked_about_nor_found(ws: Workspace) -> None:
    with pytest.raises(NoteNotFound):
        ws.related("Private/Diary")
    with pytest.raises(NoteNotFound):
        ws.related("No Such Note")
    assert "Private/Diary.md" not in [c.path for c in ws.related("Varroa").candidates]


def test_every_door_gives_the_same_related_notes(vault: Path) -> None:
    with Workspace.open(vault, {"embed": False}) as ws:
        expected = ws.related("Varroa", k=4, use_vectors=False).contract()
    ids = [c["id"] for c in expected["candidates"]]

    cli_args = ["related", "Varroa", "-V", str(vault), "-k", "4", "--no-vectors", "--json"]
    in_process = json.loads(CliRunner().invoke(cli, cli_args).output)
    assert [c["id"] for c in in_process["candidates"]] == ids

    async def steps(client: Client) -> object:
        return await client.call_tool("related", {"note": "Varroa", "k": 4})

    over_mcp = run_session(vault, steps, "--no-vectors")
    assert [c["id"] for c in over_mcp.structured_content["candidates"]] == ids

    with (
        Workspace.open(vault, {"embed": False}) as ws,
        LocalServer(ws, watch=False, warm=False) as s,
    ):
        status, _, body = call(
            s, "POST", "/related", {"note": "Varroa", "k": 4, "no_vectors": True}
        )
        assert status == 200
        assert [c["id"] for c in body["candidates"]] == ids
        via_server = json.loads(CliRunner().invoke(cli, cli_args).output)
        assert via_server["diagnostics"]["server_pid"] == body["diagnostics"]["server_pid"]
        assert paths(via_server) == paths(expected)
        status, _, error = call(s, "POST", "/related", {"note": "Private/Diary"})
        assert (status, error["error"]) == (404, "NoteNotFound")


@pytest.mark.slow
def test_with_vectors_the_note_is_its_own_query_vector(
    make_vault: Callable[..., Path], embedder: object
) -> None:
    root = make_vault({k: v for k, v in NOTES.items() if not k.startswith(".")})
    with Workspace.open(root, embedder=embedder) as ws:
        ws.index()
        selection = ws.related("Varroa", k=5)
        assert selection.diagnostics["retrieval_path"] == "hybrid"
        assert "vector" in selection.candidates[0].sources
        assert "Varroa.md" not in [c.path for c in selection.candidates]
