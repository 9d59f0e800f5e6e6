"""`vaultctx memory …` as a user runs it, and a real model's hybrid recall (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memory_helpers import indexed_vault
from vaultctx.cli import cli
from vaultctx.memory import MemoryService


@pytest.fixture
def vault(tmp_path: Path) -> str:
    indexed_vault(tmp_path / "vault").close()
    return str(tmp_path / "vault")


def run(*args: str, input: str | None = None):
    result = CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_memory_add_list_search_forget_round_trip(vault):
    added = json.loads(run("memory", "add", "Rex is a beagle", "-V", vault, "--json").stdout)
    assert added["tier"] == "workspace" and added["kind"] == "semantic"
    run("memory", "add", "answer in bullet points", "--tier", "account", "--kind",
        "procedural", "-V", vault)  # fmt: skip
    listed = json.loads(run("memory", "list", "-V", vault, "--json").stdout)
    assert {m["text"] for m in listed} == {"Rex is a beagle", "answer in bullet points"}
    only = json.loads(run("memory", "list", "--tier", "account", "-V", vault, "--json").stdout)
    assert [m["text"] for m in only] == ["answer in bullet points"]
    found = json.loads(run("memory", "search", "beagle", "-V", vault, "--json").stdout)
    assert found["memories"][0]["id"] == added["id"]
    assert set(found["memories"][0]["scores"]) >= {"relevance", "importance", "recency"}
    gone = json.loads(run("memory", "forget", added["id"], "-V", vault, "--json").stdout)
    assert gone == {"forgotten": 1, "soft": False}
    assert "beagle" not in run("memory", "list", "-V", vault).stdout


def test_memory_export_then_import_into_another_vault(vault, tmp_path):
    run("memory", "add", "the orchard has twelve hives", "-V", vault)
    exported = run("memory", "export", "-V", vault).stdout
    assert len(exported.splitlines()) == 1
    other = tmp_path / "other"
    indexed_vault(other).close()
    result = run("memory", "import", "-V", str(other), "--json", input=exported)
    assert json.loads(result.stdout) == {"imported": 1, "skipped": []}
    assert "twelve hives" in run("memory", "list", "-V", str(other)).stdout


def test_memory_import_for_people_says_how_many(vault):
    line = json.dumps({"tier": "workspace", "text": "the honey is in the pantry"})
    result = run("memory", "import", "-V", vault, input=line + "\n")
    assert result.stdout == "imported 1 memories\n" and result.stderr == ""


BAD_LINES = [
    b"{not json",
    b'{"tier": "workspace", "text": "x", "created_at": 1e300}',
    b'{"tier": "workspace", "text": "x", "created_at": NaN}',
    b'{"tier": "workspace", "text": "x\\ud800"}',
    b'{"tier": "workspace", "text": "caf\xe9"}',
    b'{"tier": "nowhere", "text": "x"}',
    b"[" * 100_000 + b"]" * 100_000,
]


def test_memory_import_reports_each_bad_line_and_imports_the_rest(vault, tmp_path):
    good = [json.dumps({"tier": "workspace", "text": t}).encode() for t in ("wax", "propolis")]
    source = tmp_path / "memories.jsonl"
    source.write_bytes(b"\n".join([good[0], *BAD_LINES, b"", good[1]]) + b"\n")
    result = CliRunner().invoke(cli, ["memory", "import", str(source), "-V", vault])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"imported 2 memories, {len(BAD_LINES)} lines skipped\n"
    warnings = result.stderr.splitlines()
    assert [w.split(":")[0:2] for w in warnings] == [
        ["Warning", f" line {n}"] for n in range(2, 2 + len(BAD_LINES))
    ]
    assert all(w.endswith("; not imported") for w in warnings)
    assert "created_at: 1e+300 is not a time between the years 1 and 9999" in warnings[1]
    assert "line 6: not UTF-8 at byte" in warnings[4]
    assert "Traceback" not in result.output
    # nothing stored breaks a later command
    listed = json.loads(run("memory", "list", "-V", vault, "--json").stdout)
    assert sorted(m["text"] for m in listed) == ["propolis", "wax"]
    assert len(run("memory", "export", "-V", vault).stdout.splitlines()) == 2
    assert run("memory", "search", "wax", "-V", vault, "--json").stdout


def test_memory_import_of_nothing_valid_fails_with_one_error_line(vault):
    result = CliRunner().invoke(
        cli, ["memory", "import", "-V", vault, "--json"], input=b"\n".join(BAD_LINES[:3])
    )
    assert result.exit_code != 0 and result.stdout == ""
    *warnings, error = result.stderr.splitlines()
    assert len(warnings) == 3 and all(w.startswith("Warning: line ") for w in warnings)
    assert error == "Error: no memory imported: every one of 3 lines was invalid"


def test_a_conversation_memory_without_scope_is_one_clear_error(vault):
    result = CliRunner().invoke(cli, ["memory", "add", "x", "--tier", "conversation", "-V", vault])
    assert result.exit_code == 6
    assert result.stderr.startswith("Error: a conversation memory needs a scope")


@pytest.fixture(scope="module")
def model():
    from vaultctx.storage.embeddings import Embedder

    embedder = Embedder()
    embedder.encode(["warm up"])
    return embedder


@pytest.mark.slow
def test_a_real_model_recalls_a_paraphrase_token_recall_misses(tmp_path, model):
    with MemoryService(tmp_path / "m.db", vault_scope="v", user="u", embedder=model) as mem:
        fact = mem.add("Caroline adopted a puppy last spring.")
        mem.add("The orchard hives were treated for varroa mites.")
        assert mem.search("Which dog did she get?", kinds=["semantic"], k=1)[0].id == fact.id
        ctx = mem.retrieve_for_turn("Which dog did she get?", session_id="s")
        assert ctx.diagnostics["retrieval_path"] == "hybrid"
        again = mem.add("Caroline adopted a puppy in the spring.")
        assert again.id == fact.id  # near-duplicate by embedding: merged


def test_memory_add_of_conversation_turns_is_searched_like_a_chat(vault):
    turns = [("Jon", "What made you pick that agency?"), ("Gina", "They support LGBTQ+ folks.")]
    for i, (speaker, text) in enumerate(turns, start=1):
        run("memory", "add", text, "--tier", "channel", "--scope", "c", "--speaker", speaker,
            "--session", "s1", "--turn", f"t{i}", "--at", "2023-05-08", "-V", vault)  # fmt: skip
    query = ["why did Gina pick the agency", "--tier", "channel", "--scope", "c", "--json"]
    found = json.loads(run("memory", "search", *query, "-V", vault).stdout)["memories"]
    exchange = "Jon: What made you pick that agency?\nGina: They support LGBTQ+ folks."
    assert exchange in [m["text"] for m in found[:2]]  # beside the session's arc
    assert all(m["source"]["turns"] == ["t1", "t2"] for m in found[:2])
    assert found[0]["created_at"].startswith("2023-05-08")


def test_a_date_that_is_not_one_is_a_clear_error(vault):
    result = CliRunner().invoke(cli, ["memory", "add", "x", "--at", "last tuesday", "-V", vault])
    assert result.exit_code != 0
    assert "not a date" in result.output
    assert json.loads(run("memory", "list", "-V", vault, "--json").stdout) == []
