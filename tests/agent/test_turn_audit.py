"""An agent turn's model requests in the audit log: one row per request, from the turn's
process and from a delegation's child, with the notes its messages hold and no text."""

from __future__ import annotations

from pathlib import Path

from agent_model import AgentModel, agent_model_fixture, call, open_agent_workspace  # noqa: F401
from conftest import write_files
from llm_server import LLMServer, Reply, ToolCallReply, llm_server_fixture  # noqa: F401
from vaultctx.storage.audit import AuditLog

SECRET = "zebrafinch-7731"
GARDEN = "quokka-4410"
VAULT = {
    "Health/blood.md": f"# Blood\n\nThe varroa mites count came back {SECRET} at the clinic.\n",
    "Garden/hives.md": f"# Hives\n\nTreat the hives for varroa mites in August {GARDEN}.\n",
    "Garden/roses.md": "# Roses\n\nPrune the roses in March, far from the hives.\n",
    # the scripted model is on 127.0.0.1, a local model: Health is kept from it
    ".vaultctx/permissions.toml": '[[rules]]\ncapability = "vault.read"\npaths = ["Health/**"]\n'
    'destinations = ["local_model"]\neffect = "deny"\n',
}


def test_every_request_of_a_turn_is_recorded_with_its_notes_and_no_text(
    tmp_path: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    vault = write_files(tmp_path / "vault", VAULT)
    model.orchestrator.extend(
        [call("investigate", question="when to treat for mites?"), Reply(content="In August.")]
    )
    model.researcher.append(call("read_note", path="Garden/roses.md"))
    with open_agent_workspace(vault, llm_server) as ws:
        result = ws.ask("varroa mites")
        index = ws._vault.db.path.parent
    # closing the workspace waits for the turn's memory extraction, a request too
    entries = list(reversed(AuditLog.of(index).recent(100)))
    raw = b"".join(p.read_bytes() for p in index.glob("audit.db*"))
    assert result.answer == "In August."
    assert len(entries) == len(llm_server.requests)
    assert all(SECRET not in r.text for r in llm_server.requests)
    assert [e.purpose for e in entries] == ["gate", "agent", "agent", "agent", "agent", "memory"]
    assert {e.destination for e in entries} == {"local_model"}
    orchestrator, researcher_first, researcher_second = entries[1], entries[2], entries[3]
    context_paths = [n.path for n in orchestrator.notes]
    assert "Garden/hives.md" in context_paths and "Health/blood.md" not in context_paths
    assert all(n.blocks and n.rule == "policy default" for n in orchestrator.notes)
    assert researcher_first.notes == ()  # the Researcher starts from the question only
    assert [n.path for n in researcher_second.notes] == ["Garden/roses.md"]
    assert researcher_second.notes[0].rule == "policy default"
    assert all(e.outcome == "ok" and e.tokens_in > 0 for e in entries[1:])
    assert entries[-1].notes == ()  # extraction reads the turn, not notes
    assert SECRET.encode() not in raw and GARDEN.encode() not in raw and b"Prune" not in raw


def test_a_turn_s_tools_and_memory_show_nothing_its_model_s_destination_may_not_see(
    tmp_path: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    """Health is kept from local models: the turn's select tool, its note lookups and the
    memories it recalls hold nothing of it, though a person's select still finds it."""
    vault = write_files(tmp_path / "vault", VAULT)
    model.orchestrator.extend(
        [
            Reply(
                tool_calls=(
                    ToolCallReply("select", {"query": f"varroa mites clinic {SECRET}"}),
                    ToolCallReply("read_note", {"path": "Blood"}),
                    ToolCallReply("list_by_tag", {"tag": "clinic"}),
                )
            ),
            Reply(content="Done."),
        ]
    )
    with open_agent_workspace(vault, llm_server) as ws:
        ws.memory.add(
            f"The clinic said {SECRET}.", tier="workspace", source={"paths": ["Health/blood.md"]}
        )
        ws.memory.flush()
        person = ws.select(f"clinic {SECRET}", use_vectors=False)
        assert any(c.path == "Health/blood.md" for c in person.candidates)
        result = ws.ask("What did the clinic say about the mites?")
    outputs = [a["output"] for a in result.tool_activity]
    assert outputs[0]["results"] and SECRET not in str(outputs[0])
    assert outputs[1]["error"] == "note_not_found"
    assert all(SECRET not in r.text and "Health/" not in r.text for r in llm_server.requests)
