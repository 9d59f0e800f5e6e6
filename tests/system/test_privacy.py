"""Private stays private: a marker in a denied, ignored or hidden note — reached directly or
through a symlink — never appears in a model request or in an answer, whatever the door
(Python API, CLI, HTTP, MCP over stdio, an agent turn), and a changed rule holds at once.

Every test also finds a public marker through the same door, so a door that answered
nothing at all could not pass.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from agent_model import AgentModel, agent_model_fixture, call  # noqa: F401
from conftest import query as index_rows
from conftest import write_files
from llm_server import LLMServer, Reply, ToolCallReply, llm_server_fixture  # noqa: F401
from pdf_files import make_pdf
from server_helpers import call as http_call
from server_helpers import stream_ask
from vaultctx import NoteNotFound, Workspace
from vaultctx.cli import cli
from vaultctx.server.run import LocalServer

SECRET = "ZEBRAQUARTZ"  # in every note no door may show: denied, ignored or hidden
PUBLIC = "ZEBRAPUBLIC"  # in a public note: what proves a door answered at all
DENY_PRIVATE = '[[rules]]\ncapability = "vault.read"\npaths = ["Private/**"]\neffect = "deny"\n'

DENIED_CANVAS = {
    "nodes": [
        {"id": "t", "type": "text", "x": 0, "y": 0, "width": 9, "height": 9,
         "text": f"Orchard honey plan: the safe code {SECRET}-canvas"},
        {"id": "a", "type": "file", "x": 0, "y": 20, "width": 9, "height": 9, "file": "Apiary.md"},
    ]
}  # fmt: skip
VAULT = {
    ".vaultctx/permissions.toml": DENY_PRIVATE,
    ".vaultctxignore": "ignored/\n",
    "Orchard.md": f"# Orchard\n\nThe orchard honey harvest {PUBLIC} is in August."
    " See [[Private/secret]] and [[Apiary]].\n",
    "Apiary.md": "# Apiary\n\nHives stand by the orchard; honey supers go on in May.\n",
    "Private/secret.md": f"# Secret\n\nThe orchard honey safe code is {SECRET}-denied.\n",
    "ignored/s.md": f"# Ignored\n\nOrchard honey notes {SECRET}-ignored.\n",
    ".obsidian/secret.md": f"# Hidden\n\nOrchard honey settings {SECRET}-hidden.\n",
    # A PDF's pages and a canvas's cards are notes too, under the same rules.
    "Private/secret.pdf": make_pdf([f"Orchard honey ledger\nThe safe code is {SECRET}-pdf."]),
    "Private/board.canvas": json.dumps(DENIED_CANVAS),
    "ignored/s.pdf": make_pdf([f"Orchard honey notes {SECRET}-ignored-pdf"]),
    ".obsidian/secret.canvas": json.dumps(
        {"nodes": [{"id": "t", "type": "text", "x": 0, "y": 0, "text": f"{SECRET}-hidden-canvas"}]}
    ),
}
# symlink -> target: each is treated as its target (skipped, denied, or indexed once there)
SYMLINKS = {
    "pub.md": "ignored/s.md",
    "exposed.md": ".obsidian/secret.md",
    "privdir": "Private",
    "alias.md": "Private/secret.md",
    "ignoreddir": "ignored",
    "pub.pdf": "ignored/s.pdf",
    "exposed.canvas": ".obsidian/secret.canvas",
    "alias.pdf": "Private/secret.pdf",
}
QUERIES = ("orchard honey", "safe code", "secret", "honey settings notes")
# Every name that could reach a hidden note, and patterns a LIKE would have matched.
NAMES = (
    "Private/secret",
    "Private/secret.md",
    "secret",
    "Secret",
    "alias",
    "alias.md",
    "exposed",
    "pub",
    "privdir/secret",
    "ignored/s",
    "ignoreddir/s.md",
    ".obsidian/secret.md",
    "%",
    "_",
    "%secret%",
    "Private/secret.pdf",
    "secret.pdf",
    "Private/board.canvas",
    "board.canvas",
    "alias.pdf",
    "pub.pdf",
    "exposed.canvas",
    "ignored/s.pdf",
)


def make_private_vault(root: Path) -> Path:
    write_files(root, VAULT)
    for link, target in SYMLINKS.items():
        (root / link).symlink_to(root / target, target_is_directory=(root / target).is_dir())
    return root


def leaks(*texts: object) -> bool:
    return any(SECRET in (t if isinstance(t, str) else json.dumps(t, default=str)) for t in texts)


@pytest.fixture
def vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(tmp_path / "config"))
    return make_private_vault(tmp_path / "vault")


@pytest.fixture
def ws(vault: Path) -> Iterator[Workspace]:
    with Workspace.open(vault, {"embed": False}) as workspace:
        workspace.index()
        yield workspace


def model_config(llm_server: LLMServer) -> dict[str, object]:
    return {"llm_model": "openai/test-gate", "llm_api_base": llm_server.api_base}


# --- the index and the Python API ---------------------------------------------------------


def test_a_note_behind_a_symlink_is_indexed_once_under_its_real_path(ws: Workspace) -> None:
    rows = ws._vault.db.connect().execute("SELECT path FROM notes ORDER BY path")
    paths = [row[0] for row in rows]
    assert paths == [
        "Apiary.md",
        "Orchard.md",
        "Private/board.canvas",
        "Private/secret.md",
        "Private/secret.pdf",
    ]


def test_a_denied_pdf_and_canvas_are_indexed_yet_never_shown(ws: Workspace) -> None:
    held = [text for (text,) in index_rows(ws._vault.db.path, "SELECT text FROM blocks")]
    assert any(f"{SECRET}-pdf" in text for text in held)
    assert any(f"{SECRET}-canvas" in text for text in held)
    found = [ws.select(q, k=20, use_vectors=False).contract() for q in ("safe code", "ledger")]
    assert not leaks(found, ws.related("Apiary", use_vectors=False).contract())
    for name in ("Private/secret.pdf", "secret.pdf", "board.canvas", "alias.pdf"):
        with pytest.raises(NoteNotFound):
            ws.read_note(name)


def test_select_and_reading_never_show_a_hidden_note(ws: Workspace) -> None:
    shown = [ws.select(q, k=20, use_vectors=False).contract() for q in QUERIES]
    assert not leaks(shown)
    assert not leaks(ws.select(SECRET, use_vectors=False).candidates)  # the marker's own word
    assert any(PUBLIC in json.dumps(s) for s in shown)
    for name in NAMES:
        with pytest.raises(NoteNotFound):
            ws.read_note(name)
        with pytest.raises(NoteNotFound):
            ws.touch(name)
    assert PUBLIC in ws.read_note("Orchard").content
    filtered = ws.select("orchard honey", filters={"path": "Private"}, use_vectors=False)
    assert filtered.candidates == []


def test_how_a_query_is_read_never_tells_a_hidden_note_s_language(vault: Path) -> None:
    (vault / "Private" / "notizen.md").write_text(
        "# Geheime Notizen\n\nDie Bienen im Garten werden jeden Sommer von uns gezählt, und"
        " der Honig wird im Herbst geerntet, wenn die Waben voll sind.\n"
    )
    with Workspace.open(vault, {"embed": False}) as workspace:
        workspace.index()
        languages = dict(index_rows(workspace._vault.db.path, "SELECT path, language FROM notes"))
        selection = workspace.select("honig", explain=True)
    assert languages["Private/notizen.md"] == "de"
    assert selection.explain["lexical"]["languages"] == ["en"]


def test_how_a_query_is_read_never_tells_which_words_hidden_notes_hold(ws: Workspace) -> None:
    """A word only a hidden note holds reads as a word no note holds, and how common a word
    is counts only the blocks the reader may see."""
    hidden_only = ws.select(f"{SECRET.lower()} orchard", use_vectors=False, explain=True)
    nowhere = ws.select("qxvwplumbus orchard", use_vectors=False, explain=True)
    assert hidden_only.explain["lexical"]["dropped"] == {SECRET.lower(): "not in the index"}
    assert nowhere.explain["lexical"]["dropped"] == {"qxvwplumbus": "not in the index"}
    view = ws._scope.view()
    assert view.hidden
    orchard, honey, secret = view.stems(f"orchard honey {SECRET}")
    seen = view.doc_freqs([orchard, honey, secret])
    everyone = ws._vault.reads.doc_freqs([orchard, honey, secret])
    assert secret not in seen and everyone[secret] == 3  # the denied note, PDF and canvas
    assert seen == {orchard: everyone[orchard] - 3, honey: everyone[honey] - 3}


def test_hidden_notes_move_no_score_of_what_the_reader_sees(
    example_vault: Path, tmp_path: Path
) -> None:
    """bm25 counts rows, lengths and each word's rarity over what the reader may see: the
    answer is, score for score, the one a vault without the hidden notes gives."""
    without = tmp_path / "without"
    shutil.copytree(example_vault, without)
    shutil.rmtree(without / "Pests and Diseases")
    rule = DENY_PRIVATE.replace("Private/**", "Pests and Diseases/**")
    write_files(example_vault, {".vaultctx/permissions.toml": rule})
    with (
        Workspace.open(example_vault, {"embed": False}) as ws,
        Workspace.open(without, {"embed": False}) as other,
    ):
        ws.index()
        other.index()
        for text in ("varroa mites in the hives", "honey harvest extractor", '"queen cell"'):
            seen = ws.select(text, use_vectors=False).candidates
            want = other.select(text, use_vectors=False).candidates
            assert seen, text
            assert [(c.path, c.heading_path) for c in seen] == [
                (c.path, c.heading_path) for c in want
            ]
            # Equal up to the seconds between the two answers, which recency counts.
            assert [c.score for c in seen] == pytest.approx([c.score for c in want], rel=1e-6)


def test_the_open_note_never_lifts_what_it_links_to_when_that_is_hidden(ws: Workspace) -> None:
    ws.touch("Orchard")
    selection = ws.select("safe code", k=20, use_vectors=False, explain=True)
    assert not leaks(selection.contract(), selection.explain)
    assert all(c.path != "Private/secret.md" for c in selection.candidates)


def test_a_changed_rule_holds_at_the_next_query_without_indexing(
    ws: Workspace, vault: Path
) -> None:
    policy = vault / ".vaultctx" / "permissions.toml"
    policy.unlink()
    assert SECRET in ws.read_note("Private/secret").content
    assert leaks(ws.select("safe code", use_vectors=False).contract())
    policy.write_text(DENY_PRIVATE)
    assert not leaks(ws.select("safe code", use_vectors=False).contract())
    (vault / ".vaultctxignore").write_text("ignored/\nOrchard.md\n")
    assert all(c.path != "Orchard.md" for c in ws.select("orchard honey").candidates)
    with pytest.raises(NoteNotFound):
        ws.read_note("Orchard")


@pytest.mark.slow
def test_a_note_moved_into_a_denied_folder_keeps_its_vectors_not_its_visibility(
    vault: Path, embedder: object
) -> None:
    """A server's vectors follow a publish by reusing the rows of unchanged content: a note
    moved under a denied path keeps its text (and its id), so its vectors are reused; the
    policy, which reads paths at each query, hides it at once, on the vector side too."""
    moved = "MOVEDMARKER"
    (vault / "Ledger.md").write_text(f"# Ledger\n\nThe orchard honey ledger {moved} is kept.\n")
    with Workspace.open(vault, embedder=embedder) as ws:
        ws.index()
        before = ws.select("orchard honey ledger", k=20)
        assert before.diagnostics["retrieval_path"] == "hybrid"
        assert moved in json.dumps(before.contract())
        matrix = ws._selector.vectors.get(ws._vault.reads, ws._vault.generation, embedder.model_id)
        (vault / "Ledger.md").rename(vault / "Private" / "Ledger.md")
        ws.index()
        after = ws.select("orchard honey ledger", k=20)
        vault = ws._vault
        followed = ws._selector.vectors.get(vault.reads, vault.generation, embedder.model_id)
    assert set(followed.hashes.tolist()) == set(matrix.hashes.tolist())  # the same content
    assert after.diagnostics["retrieval_path"] == "hybrid"
    assert moved not in json.dumps(after.contract()) and not leaks(after.contract())
    assert PUBLIC in json.dumps(after.contract())


def test_a_note_turned_into_a_symlink_after_indexing_is_judged_by_its_target(
    ws: Workspace, vault: Path
) -> None:
    (vault / "Apiary.md").unlink()
    (vault / "Apiary.md").symlink_to(vault / ".obsidian" / "secret.md")
    with pytest.raises(NoteNotFound):
        ws.read_note("Apiary")


def test_memories_drawn_from_a_hidden_note_are_hidden_with_it(ws: Workspace) -> None:
    private = {"paths": ["Private/secret.md"]}
    ws.memory.add(f"The safe code is {SECRET}.", source=private)
    ws.memory.add(f"The harvest marker is {PUBLIC}.", source={"paths": ["Orchard.md"]})
    found = ws.memory.search("safe code harvest marker")
    assert not leaks([m.to_dict() for m in found])
    assert any(PUBLIC in m.text for m in found)
    selection = ws.select("safe code harvest marker", use_vectors=False)
    assert "memory" in {c.kind for c in selection.candidates}
    assert not leaks(selection.contract())


# Memories a reader recalls (the first) and those they may not: drawn from a hidden note, of
# a channel they are not in, forgotten. All hold the queries' words.
RECALLED = [
    "The orchard hive queen was marked blue in May",
    "Honey harvest from the orchard hives came to twelve frames",
    "Smoke the hives before the honey supers come off",
    "The queen cell in hive four was torn down",
    "Winter feeding of the orchard hives starts in October with syrup",
    "Hive two swarmed; the queen settled in the apple tree by the orchard gate",
]
NOT_RECALLED = {
    "hidden": f"The hive queen honey safe code {SECRET} is kept in the orchard shed",
    "channel": "Garden channel: the orchard hive queen and the honey frames, honey and queen",
    "forgotten": "Forgotten: honey, honey, the queen of the orchard hive",
}
RECALL_QUERIES = ("orchard hive queen", "honey frames", '"queen cell"', "smoke hiv*")


def remember(ws: Workspace, *, everything: bool) -> None:
    """`RECALLED` into `ws`'s memory, each at its own time, with another channel's memory
    (a search of this vault's leaves it out, as a filter does, and counts it) and, with
    `everything`, the memories its reader may not recall at all between them."""
    for n, text in enumerate(RECALLED):
        ws.memory.add(text, created_at=1_700_000_000 + 600 * n, source={"paths": ["Orchard.md"]})
        if n == 2:
            ws.memory.add(NOT_RECALLED["channel"], tier="channel", scope="garden")
        if everything and n == 2:
            ws.memory.add(NOT_RECALLED["hidden"], source={"paths": ["Private/secret.md"]})
            ws.memory.forget(ws.memory.add(NOT_RECALLED["forgotten"]).id, soft=True)


def assert_recalls_alike(ws: Workspace, oracle: Workspace) -> None:
    """Memory search ranks and scores on `ws` what it does on `oracle`."""
    for text in RECALL_QUERIES:
        seen, want = (w.memory.search(text, now=1.0) for w in (ws, oracle))
        assert seen, text
        assert not leaks([m.to_dict() for m in seen])
        assert [m.text for m in seen] == [m.text for m in want], text
        assert [m.score for m in seen] == pytest.approx([m.score for m in want], rel=1e-9)


def test_a_hidden_memory_s_words_move_no_score_of_what_the_reader_recalls(
    vault: Path, tmp_path: Path
) -> None:
    """Memory's bm25 counts the memories the reader may recall: memory search, and the
    memories select fuses, are score for score those of a memory that never held the
    others."""
    other = make_private_vault(tmp_path / "other")
    with (
        Workspace.open(vault, {"embed": False}) as ws,
        Workspace.open(other, {"embed": False}) as oracle,
    ):
        ws.index()
        oracle.index()
        remember(ws, everything=True)
        remember(oracle, everything=False)
        assert_recalls_alike(ws, oracle)
        for text in RECALL_QUERIES:
            seen, want = (
                [c for c in w.select(text, use_vectors=False).candidates if c.kind == "memory"]
                for w in (ws, oracle)
            )
            assert seen, text
            assert [c.text for c in seen] == [c.text for c in want]
            assert [c.score for c in seen] == pytest.approx([c.score for c in want], rel=1e-6)
            assert not leaks([c.text for c in seen])


# --- models: the refinement gate and the agent --------------------------------------------


def test_no_model_request_holds_hidden_text(
    vault: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    model.orchestrator.extend(
        [
            Reply(
                tool_calls=(
                    *(
                        ToolCallReply("read_note", {"path": name})
                        for name in ("alias.md", "exposed.md", "pub.md", "privdir/secret.md")
                    ),
                    ToolCallReply("select", {"query": "safe code orchard honey"}),
                    ToolCallReply("backlinks", {"path": "Apiary.md"}),
                    ToolCallReply("follow_links", {"path": "Orchard.md"}),
                )
            ),
            call("investigate", question="what is the safe code?"),
            Reply(content="I cannot see it."),
        ]
    )
    model.researcher.extend([call("read_note", path="Private/secret.md")])
    with Workspace.open(vault, {"embed": False, **model_config(llm_server)}) as ws:
        ws.index()
        context = ws.context("safe code orchard honey")
        result = ws.ask("What is the orchard safe code?")
    assert context.gate == "deterministic" and context.gate_reason == "invalid_output"
    assert not leaks(context.contract(), result.to_dict())
    bodies = [r.body for r in llm_server.requests]
    assert len(bodies) >= 4  # the gate, the orchestrator twice, the researcher
    assert not leaks(bodies)
    assert any(PUBLIC in json.dumps(b) for b in bodies)
    denied = [a["output"] for a in result.tool_activity[:4]]
    assert all(o.get("error") in ("permission_denied", "note_not_found") for o in denied)


# --- the doors: CLI, HTTP, MCP -------------------------------------------------------------


def test_the_cli_shows_no_hidden_note(ws: Workspace, vault: Path) -> None:
    runner = CliRunner()
    outputs = []
    for query in QUERIES:
        for command in ("select", "context"):
            done = runner.invoke(cli, [command, query, "-V", str(vault), "--no-vectors", "--json"])
            assert done.exit_code == 0, done.output
            outputs.append(done.output)
    for name in NAMES:
        done = runner.invoke(cli, ["open", name, "-V", str(vault)])
        assert done.exit_code == NoteNotFound.exit_code
        outputs.append(done.output)
    explained = runner.invoke(cli, ["select", "safe code", "-V", str(vault), "--explain", "--json"])
    assert json.loads(explained.output)["explain"]["hidden_notes"] == 3  # note, PDF, canvas
    assert not leaks(*outputs, explained.output)
    assert any(PUBLIC in o for o in outputs)


def test_a_dry_run_prints_what_the_gate_would_send_and_sends_nothing(
    ws: Workspace, vault: Path, llm_server: LLMServer
) -> None:
    args = ["context", "orchard honey safe code", "-V", str(vault), "--dry-run", "--no-vectors"]
    unconfigured = CliRunner().invoke(cli, args)
    assert json.loads(unconfigured.output) == {"model": None, "api_base": None, "messages": []}
    env = {"VAULTCTX_LLM_MODEL": "openai/test-gate", "VAULTCTX_LLM_API_BASE": llm_server.api_base}
    request = json.loads(CliRunner().invoke(cli, args, env=env).output)
    assert request["model"] == "openai/test-gate"
    assert PUBLIC in request["messages"][1]["content"] and not leaks(request)
    assert llm_server.requests == []


def test_http_answers_and_model_requests_hold_no_hidden_text(
    vault: Path, llm_server: LLMServer
) -> None:
    llm_server.script(Reply(content='{"keep": [{"id": "c1", "reason": "first"}]}'))
    answers = []
    with (
        Workspace.open(vault, {"embed": False, **model_config(llm_server)}) as ws,
        LocalServer(ws, watch=False, warm=False) as server,
    ):
        ws.index()
        for query in QUERIES:
            answers.append(http_call(server, "POST", "/select", {"query": query, "k": 20}))
            answers.append(http_call(server, "POST", "/context", {"query": query}))
        for name in NAMES:
            status, _, body = http_call(server, "POST", "/touch", {"note": name})
            assert status == 404, (name, body)
            answers.append((status, {}, body))
        answers.append(http_call(server, "GET", "/health", token=None))
    assert not leaks([a[2] for a in answers], [r.body for r in llm_server.requests])
    assert any(PUBLIC in json.dumps(a[2]) for a in answers)
    assert str(vault) not in json.dumps(answers[-1][2])  # /health without the token


def test_an_agent_turn_over_http_holds_no_hidden_text(
    vault: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    model.orchestrator.extend(
        [
            Reply(
                tool_calls=(
                    ToolCallReply("read_note", {"path": "alias.md"}),
                    ToolCallReply("select", {"query": "safe code orchard honey"}),
                )
            ),
            Reply(content="Nothing to see."),
        ]
    )
    with (
        Workspace.open(vault, {"embed": False, **model_config(llm_server)}) as ws,
        LocalServer(ws, watch=False, warm=False) as server,
    ):
        ws.index()
        events = stream_ask(server, {"question": "What is the orchard safe code?"})
    assert events[-1][0] == "answer"
    assert not leaks(events, [r.body for r in llm_server.requests])
    assert any(PUBLIC in json.dumps(r.body) for r in llm_server.requests)


MCP_ENV = (
    "PATH",
    "HOME",
    "PYTHONPATH",
    "VAULTCTX_CACHE_DIR",
    "VAULTCTX_ACCOUNT_DIR",
    "HF_HUB_OFFLINE",
    "LITELLM_LOCAL_MODEL_COST_MAP",
)


def mcp_session(vault: Path, steps: Callable, *options: str) -> object:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "vaultctx", "mcp", str(vault), "--no-vectors", *options],
        env={k: v for k, v in os.environ.items() if k in MCP_ENV},
    )

    async def main() -> object:
        async with Client(params, read_timeout_seconds=60) as client:
            return await steps(client)

    return anyio.run(main)


def test_mcp_tools_and_model_requests_hold_no_hidden_text(
    vault: Path, llm_server: LLMServer
) -> None:
    (vault / ".vaultctx" / "config.toml").write_text(
        f'llm_model = "openai/test-gate"\nllm_api_base = "{llm_server.api_base}"\n'
    )
    with Workspace.open(vault, {"embed": False}) as ws:
        ws.index()
        ws.memory.add(f"The safe code is {SECRET}.", source={"paths": ["Private/secret.md"]})

    async def steps(client: Client) -> list:
        results = []
        for query in QUERIES:
            results.append(await client.call_tool("select", {"query": query, "k": 20}))
            results.append(await client.call_tool("context", {"query": query}))
            results.append(await client.call_tool("memory_search", {"query": query}))
        for name in NAMES:
            results.append(await client.call_tool("read_note", {"note": name}))
            results.append(await client.call_tool("touch", {"note": name}))
        results.append(await client.call_tool("read_note", {"note": "Orchard"}))
        return results

    results = mcp_session(vault, steps)
    shown = [
        [r.is_error, r.structured_content, [c.model_dump() for c in r.content]] for r in results
    ]
    assert not leaks(shown, [r.body for r in llm_server.requests])
    assert llm_server.requests  # the context tool asked the gate model
    assert PUBLIC in json.dumps(shown[-1])
    reads = results[len(QUERIES) * 3 : -1]
    assert all(r.is_error for r in reads)


# --- memory: what a turn leaves behind ----------------------------------------------------

TURN = "Always answer in bullet points. The hives moved to the orchard in May."
SKILL = (
    "---\nname: Orchard Check\ndescription: Check the orchard hives.\n"
    "capabilities: [vault.read]\n---\nAlways answer in bullet points. Check [[Apiary]].\n"
)


def test_mcp_answers_a_remote_model_unless_told_otherwise(vault: Path) -> None:
    """A rule that keeps a folder from hosted models holds for a desktop client's model over
    MCP, while search at the CLI (a person reading) still finds the folder's notes."""
    write_files(
        vault,
        {
            "Health/checkup.md": "# Checkup\n\nThe orchard honey allergy ZEBRAHEALTH note.\n",
            ".vaultctx/permissions.toml": DENY_PRIVATE
            + '\n[[rules]]\ncapability = "vault.read"\npaths = ["Health/**"]\n'
            'destinations = ["remote_model"]\neffect = "deny"\n',
        },
    )
    with Workspace.open(vault, {"embed": False}) as workspace:
        workspace.index()
        assert "ZEBRAHEALTH" in json.dumps(workspace.select("allergy").contract())

    async def steps(client: Client) -> list:
        return [
            await client.call_tool("select", {"query": "honey allergy", "k": 20}),
            await client.call_tool("read_note", {"note": "Health/checkup"}),
            await client.call_tool("read_note", {"note": "Nowhere/else"}),
        ]

    remote = [r.model_dump() for r in mcp_session(vault, steps)]
    assert "ZEBRAHEALTH" not in json.dumps(remote) and "Health/" not in json.dumps(remote[0])
    assert remote[1]["is_error"] and remote[2]["is_error"]  # hidden: as missing as a missing one
    hidden, missing = (r["content"][0]["text"] for r in remote[1:])
    assert hidden.replace("Health/checkup", "X") == missing.replace("Nowhere/else", "X")
    shown = [r.model_dump() for r in mcp_session(vault, steps, "--answers-to", "client")]
    assert "ZEBRAHEALTH" in json.dumps(shown[0]) and not shown[1]["is_error"]
    assert not leaks(remote, shown)


@pytest.mark.parametrize(
    ("policy", "tiers"),
    [
        ("", {"conversation", "workspace", "account"}),
        ('[defaults]\n"memory.account" = "deny"\n', {"conversation", "workspace"}),
        ('[defaults]\n"memory.write" = "deny"\n', set()),
        ('[defaults]\n"memory.write" = "ask"\n', set()),  # nobody is asked after a turn
        (
            '[[rules]]\ncapability = "memory.write"\npaths = ["memory:conversation"]\n'
            'effect = "deny"\n',
            {"workspace", "account"},
        ),
    ],
)
def test_a_turn_leaves_memories_only_where_the_policy_allows(
    vault: Path, llm_server: LLMServer, model: AgentModel, account_dir: Path, policy: str,
    tiers: set[str],
) -> None:  # fmt: skip
    (vault / ".vaultctx" / "permissions.toml").write_text(policy)
    with Workspace.open(vault, {"embed": False, **model_config(llm_server)}) as ws:
        ws.index()
        ws.ask(TURN)
        ws.memory.flush()
        assert {m.tier.value for m in ws.memory.list()} == tiers
    assert (account_dir / "account-memory.db").exists() == ("account" in tiers)


def test_the_user_adding_a_memory_is_not_what_the_rule_stops(vault: Path) -> None:
    """`memory.write` governs what vaultctx and its agents remember on their own; the user
    saying `vaultctx memory add` is the user's own act (docs/privacy.md)."""
    (vault / ".vaultctx" / "permissions.toml").write_text('[defaults]\n"memory.write" = "deny"\n')
    with Workspace.open(vault, {"embed": False}) as ws:
        ws.index()
        ws.memory.add("The hives moved to the orchard.")
        assert [m.text for m in ws.memory.list()] == ["The hives moved to the orchard."]


def test_a_skill_leaves_behind_only_what_its_capabilities_allow(
    vault: Path, llm_server: LLMServer, model: AgentModel, account_dir: Path
) -> None:
    write_files(vault, {"Skills/Orchard Check.md": SKILL})
    with Workspace.open(vault, {"embed": False, **model_config(llm_server)}) as ws:
        ws.index()
        result = ws.run_skill("Orchard Check")
        ws.memory.flush()
        assert result.answer == "orchestrator done"
        assert ws.memory.list() == []
        ws.ask(TURN)  # the same words in a turn with every capability: remembered
        ws.memory.flush()
        assert ws.memory.list()


def test_a_skill_the_policy_hides_is_never_offered_or_run(vault: Path) -> None:
    write_files(vault, {"Private/Skills/Orchard Check.md": SKILL})
    with Workspace.open(vault, {"embed": False, "skills_folder": "Private/Skills"}) as ws:
        ws.index()
        assert ws.skills() == []


# --- files on disk -------------------------------------------------------------------------


def test_every_file_holding_vault_text_is_private_to_its_owner(
    vault: Path, llm_server: LLMServer, model: AgentModel, account_dir: Path
) -> None:
    with Workspace.open(vault, {"embed": False, **model_config(llm_server)}) as ws:
        ws.index()
        ws.ask(TURN)
        ws.memory.flush()
    index_dir = vault / ".vaultctx"
    files = [
        index_dir / "index.db",
        index_dir / "memory.db",
        account_dir / "account-memory.db",
        *(index_dir / "sessions").glob("*.jsonl"),
    ]
    assert len(files) == 4
    for path in files:
        assert path.stat().st_mode & 0o777 == 0o600, path
    for folder in (index_dir / "sessions", account_dir):
        assert folder.stat().st_mode & 0o777 == 0o700, folder


def test_an_index_made_before_files_were_private_is_made_private(vault: Path) -> None:
    with Workspace.open(vault, {"embed": False}) as ws:
        ws.index()
    for suffix in ("", "-wal", "-shm"):
        path = vault / ".vaultctx" / f"index.db{suffix}"
        if path.exists():
            path.chmod(0o644)
    with Workspace.open(vault, {"embed": False}) as ws:
        ws.select("orchard", use_vectors=False)
        for suffix in ("", "-wal", "-shm"):
            path = vault / ".vaultctx" / f"index.db{suffix}"
            assert not path.exists() or path.stat().st_mode & 0o777 == 0o600


# --- any vault, any policy ----------------------------------------------------------------

FOLDERS = ("", "A/", "B/", "Private/", ".hidden/", "ign/", "A/ign/")
DENY_RULES = {"Private/**": "Private/", "B/**": "B/", "A/n1.md": "A/n1.md"}
IGNORES = {"ign/": "ign", "/B/n2.md": "B/n2.md"}


def visible(path: str, denied: list[str], ignored: list[str]) -> bool:
    """The oracle, written apart from the code under test: the rules' meaning spelled out."""
    parts = path.split("/")
    if any(p.startswith(".") for p in parts):
        return False
    if "ign" in ignored and "ign" in parts[:-1]:
        return False
    if "B/n2.md" in ignored and path == "B/n2.md":
        return False
    return not any(path.startswith(d) if d.endswith("/") else path == d for d in denied)


@given(
    notes=st.lists(
        st.tuples(st.sampled_from(FOLDERS), st.sampled_from(["n1", "n2", "n3"])),
        min_size=1,
        max_size=8,
        unique=True,
    ),
    links=st.lists(st.tuples(st.integers(0, 7), st.booleans()), max_size=4),
    denied=st.lists(st.sampled_from(sorted(DENY_RULES)), unique=True),
    ignored=st.lists(st.sampled_from(sorted(IGNORES)), unique=True),
)
@settings(max_examples=40)
def test_for_any_vault_and_policy_no_door_shows_a_hidden_note(
    tmp_path_factory: pytest.TempPathFactory,
    notes: list[tuple[str, str]],
    links: list[tuple[int, bool]],
    denied: list[str],
    ignored: list[str],
) -> None:
    root = tmp_path_factory.mktemp("vault")
    paths = [f"{folder}{name}.md" for folder, name in notes]
    markers = {path: f"ZEBRA{i}MARK" for i, path in enumerate(paths)}
    for path, marker in markers.items():
        write_files(root, {path: f"# Orchard\n\nOrchard honey {marker} lives here.\n"})
    names = list(paths)
    for i, (target, to_folder) in enumerate(links):  # symlinks to notes or their folders
        real = paths[target % len(paths)]
        goal = real.rsplit("/", 1)[0] if to_folder and "/" in real else real
        link = f"link{i}" + ("" if goal != real else ".md")
        (root / link).symlink_to(root / goal, target_is_directory=goal != real)
        names.append(link if goal == real else f"{link}/{real.rsplit('/', 1)[1]}")
    policy = "".join(
        f'[[rules]]\ncapability = "vault.read"\npaths = ["{rule}"]\neffect = "deny"\n\n'
        for rule in denied
    )
    write_files(root, {".vaultctx/permissions.toml": policy})
    write_files(root, {".vaultctxignore": "".join(f"{line}\n" for line in ignored)})
    rules = ([DENY_RULES[d] for d in denied], [IGNORES[i] for i in ignored])
    shown = {p for p in paths if visible(p, *rules)}
    with Workspace.open(root, {"embed": False}) as ws:
        ws.index()
        queries = ["orchard honey", *markers.values()]  # the answers, not the query's echo:
        answers = [ws.select(q, k=50, use_vectors=False).contract()["candidates"] for q in queries]
        read = {}
        for name in names:
            try:
                read[name] = ws.read_note(name).content
            except NoteNotFound:
                continue
    text = json.dumps([answers, read])
    assert {p for p, m in markers.items() if m in text} == shown
    assert {p for p in paths if p in read} == shown
