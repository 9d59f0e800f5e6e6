"""The LLM gate and destinations: what a rule keeps from the gate's model never reaches its
request nor the context, and every request is in the audit log without any note text."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import json
from pathlib import Path

from click.testing import CliRunner

from llm_server import LLMServer, Reply, llm_server_fixture  # noqa: F401
from vaultctx import Workspace
from vaultctx.cli import cli
from vaultctx.storage.audit import AuditLog

SECRET = "zebrafinch-7731"  # only in the health note: never in a model request or the log
GARDEN = "quokka-4410"
NOTES = {
    "Health/blood.md": f"# Blood\n\nThe varroa mites count came back {SECRET} at the clinic.\n",
    "Garden/hives.md": f"# Hives\n\nTreat the hives for varroa mites in August {GARDEN}.\n",
}
# The scripted server is on 127.0.0.1: a local model. The rule keeps Health from it.
POLICY = (
    '[[rules]]\ncapability = "vault.read"\npaths = ["Health/**"]\n'
    'destinations = ["local_model"]\neffect = "deny"\n'
)
QUERY = "varroa mites"


def open_vault(root: Path, server: LLMServer, *, policy: str | None = POLICY) -> Workspace:
    for name, text in NOTES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    if policy is not None:
        (root / ".vaultctx").mkdir(parents=True, exist_ok=True)
        (root / ".vaultctx" / "permissions.toml").write_text(policy, encoding="utf-8")
    ws = Workspace.open(
        root,
        {"llm_model": "openai/test-gate", "llm_api_base": server.api_base, "llm_timeout": 5.0},
    )
    ws.index(embed=False)
    return ws


def audit_bytes(ws: Workspace) -> bytes:
    return b"".join(p.read_bytes() for p in ws._vault.db.path.parent.glob("audit.db*"))


def test_a_note_kept_from_the_model_is_not_in_its_request_nor_in_the_context(
    tmp_path: Path, llm_server: LLMServer
) -> None:
    llm_server.script(Reply(content='{"keep": [{"id": "c1", "reason": "about mites"}]}'))
    with open_vault(tmp_path / "v", llm_server) as ws:
        context = ws.context(QUERY, use_vectors=False)
        assert [r.text.count(SECRET) for r in llm_server.requests] == [0]
        assert GARDEN in llm_server.requests[0].text
        assert {i.path for i in context.items} == {"Garden/hives.md"}
        assert context.gate == "llm"
        assert context.diagnostics["destination"] == "local_model"
        assert context.diagnostics["withheld_from_model"] == 1
        # a client still finds the note in search
        assert "Health/blood.md" in {c.path for c in ws.select(QUERY, use_vectors=False).candidates}


def test_the_deterministic_fallback_withholds_the_same_notes(
    tmp_path: Path, llm_server: LLMServer
) -> None:
    llm_server.script(Reply(status=500))
    with open_vault(tmp_path / "v", llm_server) as ws:
        context = ws.context(QUERY, use_vectors=False)
    assert context.gate == "deterministic"
    assert {i.path for i in context.items} == {"Garden/hives.md"}


def test_without_the_rule_both_notes_reach_the_model(tmp_path: Path, llm_server: LLMServer) -> None:
    llm_server.script(Reply(content='{"keep": []}'))
    with open_vault(tmp_path / "v", llm_server, policy=None) as ws:
        ws.context(QUERY, use_vectors=False)
    assert SECRET in llm_server.requests[0].text and GARDEN in llm_server.requests[0].text


def test_the_dry_run_shows_the_request_without_the_withheld_note(
    tmp_path: Path, llm_server: LLMServer
) -> None:
    with open_vault(tmp_path / "v", llm_server) as ws:
        request = ws.gate_request(QUERY, use_vectors=False)
    assert llm_server.requests == []
    assert request["destination"] == "local_model" and request["withheld"] == 1
    sent = json.dumps(request["messages"])
    assert GARDEN in sent and SECRET not in sent


def test_each_gate_request_is_one_audit_row_with_its_notes_and_no_text(
    tmp_path: Path, llm_server: LLMServer
) -> None:
    llm_server.script(Reply(content='{"keep": [{"id": "c1"}]}'))
    with open_vault(tmp_path / "v", llm_server) as ws:
        ws.context(QUERY, use_vectors=False)
        ws.context(QUERY, use_vectors=False)  # the gate's cache answers: nothing is sent
        entries = AuditLog.of(ws._vault.db.path.parent).recent()
        block_ids = {
            c.block_id
            for c in ws.select(QUERY, use_vectors=False).candidates
            if c.path == "Garden/hives.md"
        }
        raw = audit_bytes(ws)
    assert len(llm_server.requests) == len(entries) == 1
    (entry,) = entries
    assert (entry.purpose, entry.destination, entry.outcome) == ("gate", "local_model", "ok")
    assert entry.model == "openai/test-gate" and entry.api_base == llm_server.api_base
    assert [n.path for n in entry.notes] == ["Garden/hives.md"]
    assert set(entry.notes[0].blocks) == block_ids and entry.notes[0].rule == "policy default"
    assert entry.tokens_in > 0 and entry.tokens_out > 0
    assert SECRET.encode() not in raw and GARDEN.encode() not in raw
    assert b"varroa" not in raw, "neither the query nor any prompt text is kept"


def test_a_failed_request_is_recorded_too(tmp_path: Path, llm_server: LLMServer) -> None:
    llm_server.script(Reply(status=500))
    with open_vault(tmp_path / "v", llm_server) as ws:
        ws.context(QUERY, use_vectors=False)
        (entry,) = AuditLog.of(ws._vault.db.path.parent).recent()
    assert entry.outcome == "error" and entry.attempts == 1
    assert [n.path for n in entry.notes] == ["Garden/hives.md"]


def test_a_request_whose_record_cannot_be_written_is_not_sent(
    tmp_path: Path, llm_server: LLMServer
) -> None:
    llm_server.script(Reply(content='{"keep": []}'))
    with open_vault(tmp_path / "v", llm_server) as ws:
        (ws._vault.db.path.parent / "audit.db").mkdir()  # where the log would be: not a file
        context = ws.context(QUERY, use_vectors=False)
    assert llm_server.requests == []
    assert context.gate == "deterministic" and "audit log" in (context.gate_reason or "")


def test_vaultctx_audit_lists_the_requests_as_json(tmp_path: Path, llm_server: LLMServer) -> None:
    llm_server.script(Reply(content='{"keep": []}'))
    root = tmp_path / "v"
    with open_vault(root, llm_server) as ws:
        ws.context(QUERY, use_vectors=False)
    result = CliRunner().invoke(cli, ["audit", "-V", str(root), "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["purpose"] == "gate" and row["destination"] == "local_model"
    assert row["notes"][0]["path"] == "Garden/hives.md" and row["notes"][0]["blocks"]
    assert {"time", "model", "api_base", "tokens_in", "tokens_out", "outcome"} <= set(row)
    table = CliRunner().invoke(cli, ["audit", "-V", str(root), "-n", "5"])
    assert table.exit_code == 0 and "Garden/hives.md" in table.stdout
    missing = CliRunner().invoke(cli, ["audit", "-V", str(tmp_path / "nowhere")])
    assert missing.exit_code != 0 and "vault not found" in missing.output
