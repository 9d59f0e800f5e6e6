"""Select says how sure it is: a calibrated `confidence` on each candidate and on the answer,
and `no_good_match` when nothing in the vault answers well — at every door, computed from
what the reader may see only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from mcp.client import Client

from conftest import write_files
from server_helpers import call, run_session
from vaultctx import Workspace
from vaultctx.cli import cli
from vaultctx.pipeline.confidence import Evidence, _best
from vaultctx.server.run import LocalServer

REAL = "how do I treat varroa mites"
NONSENSE = "florp zandibar quexil"
# Nonsense but for one common word of the vault: candidates to show, none that answers.
OFF_TOPIC = "zandibar quexil gluon lattice hive"


@pytest.fixture
def lexical_ws(example_vault: Path, tmp_path: Path, monkeypatch) -> Iterator[Workspace]:
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(tmp_path / "config"))
    with Workspace.open(example_vault, {"embed": False}) as ws:
        ws.index()
        yield ws


# --- the model ------------------------------------------------------------------------------

EVIDENCE = st.builds(
    Evidence,
    cosine=st.floats(-1, 1),
    coverage=st.floats(0, 1),
    agreement=st.sampled_from([0.0, 1.0]),
    from_median=st.booleans(),
)


@given(st.lists(EVIDENCE, min_size=1, max_size=10))
def test_no_candidate_is_surer_than_the_answer(found: list[Evidence]) -> None:
    found = [Evidence(e.cosine, e.coverage, e.agreement, found[0].from_median) for e in found]
    answer = _best(found, hybrid=True, from_median=found[0].from_median).confidence()
    assert 0.0 <= answer <= 1.0
    assert all(e.confidence() <= answer + 1e-12 for e in found)


@given(EVIDENCE, st.sampled_from(["cosine", "coverage", "agreement"]), st.floats(0, 1))
def test_more_evidence_never_lowers_the_confidence(base: Evidence, name: str, more: float) -> None:
    raised = Evidence(**{**base.__dict__, name: getattr(base, name) + more})
    assert raised.confidence() >= base.confidence()


# --- every door -----------------------------------------------------------------------------


def test_the_python_api_gives_each_candidate_and_the_answer_a_confidence(lexical_ws) -> None:
    real = lexical_ws.select(REAL, k=5, use_vectors=False)
    assert not real.no_good_match
    assert 0.0 < real.confidence <= 1.0
    assert real.candidates[0].path == "Pests and Diseases/Varroa Mites.md"
    assert all(0.0 <= c.confidence <= real.confidence for c in real.candidates)
    assert real.contract()["verdict"].startswith("match")
    nonsense = lexical_ws.select(OFF_TOPIC, k=5, use_vectors=False)
    assert nonsense.no_good_match
    assert nonsense.confidence < real.confidence
    assert nonsense.contract()["verdict"].startswith("no good match; closest: ")


def test_the_cli_says_no_good_match_and_its_json_carries_the_fields(lexical_ws) -> None:
    runner = CliRunner()
    vault = str(lexical_ws.root)
    shown = runner.invoke(cli, ["select", OFF_TOPIC, "-V", vault, "--no-vectors"])
    assert shown.exit_code == 0, shown.output
    assert "no good match; closest:" in shown.output
    answered = runner.invoke(cli, ["select", REAL, "-V", vault, "--no-vectors"])
    assert "no good match" not in answered.output
    data = json.loads(
        runner.invoke(cli, ["select", OFF_TOPIC, "-V", vault, "--json", "--no-vectors"]).output
    )
    assert data["no_good_match"] is True
    assert 0.0 <= data["confidence"] < 1.0
    assert all("confidence" in c for c in data["candidates"])


def test_http_select_carries_the_confidence_and_no_good_match(lexical_ws) -> None:
    with LocalServer(lexical_ws, watch=False, warm=False) as server:
        _, _, nonsense = call(server, "POST", "/select", {"query": OFF_TOPIC, "no_vectors": True})
        _, _, real = call(server, "POST", "/select", {"query": REAL, "no_vectors": True})
    assert (nonsense["no_good_match"], real["no_good_match"]) == (True, False)
    assert nonsense["verdict"].startswith("no good match; closest:")
    assert real["confidence"] > nonsense["confidence"]
    assert [c["confidence"] for c in real["candidates"]] == [
        c.confidence for c in lexical_ws.select(REAL, use_vectors=False).candidates
    ]


def test_the_mcp_select_tool_carries_the_confidence_and_no_good_match(lexical_ws) -> None:
    async def steps(client: Client) -> dict:
        return {
            "nonsense": (await client.call_tool("select", {"query": OFF_TOPIC})).structured_content,
            "real": (await client.call_tool("select", {"query": REAL})).structured_content,
        }

    result = run_session(lexical_ws.root, steps, "--no-vectors")
    assert result["nonsense"]["no_good_match"] is True
    assert result["nonsense"]["verdict"].startswith("no good match; closest:")
    assert result["real"]["no_good_match"] is False
    assert result["real"]["candidates"][0]["confidence"] > 0


# --- the real model -------------------------------------------------------------------------


@pytest.mark.slow
def test_with_the_model_nonsense_is_no_good_match_and_a_real_question_is_not(
    example_vault: Path, embedder
) -> None:
    with Workspace.open(example_vault, embedder=embedder) as ws:
        ws.index()
        real = ws.select(REAL)
        unrelated = ws.select("protein folding in yeast cells")
        nonsense = ws.select(NONSENSE)
    assert real.diagnostics["retrieval_path"] == "hybrid"
    assert not real.no_good_match
    assert nonsense.no_good_match and unrelated.no_good_match
    assert real.confidence > max(nonsense.confidence, unrelated.confidence)
    assert set(real.diagnostics["evidence"]) == {"cosine", "coverage", "agreement"}


# --- privacy --------------------------------------------------------------------------------

PRIVATE_VAULT = {
    ".vaultctx/permissions.toml": (
        '[[rules]]\ncapability = "vault.read"\npaths = ["Private/**"]\neffect = "deny"\n'
    ),
    "Apiary.md": "# Apiary\n\nHives stand by the orchard; honey supers go on in May.\n",
    "Orchard.md": "# Orchard\n\nApple trees bloom in April; the bees visit them.\n",
    "Private/Ledger.md": "# Strongroom Ledger\n\nThe quincewort vault combination is kept here.\n",
}
HIDDEN_ONLY = "quincewort strongroom ledger combination"


@pytest.mark.slow
@pytest.mark.parametrize("use_vectors", [False, True], ids=["lexical", "hybrid"])
def test_a_query_only_a_hidden_note_matches_is_no_good_match(
    tmp_path: Path, embedder, use_vectors: bool
) -> None:
    vault = write_files(tmp_path / "vault", PRIVATE_VAULT)
    with Workspace.open(vault, embedder=embedder) as ws:
        ws.index()
        hidden = ws.select(HIDDEN_ONLY, use_vectors=use_vectors)
    assert all(not (c.path or "").startswith("Private/") for c in hidden.candidates)
    assert hidden.no_good_match
    (vault / ".vaultctx" / "permissions.toml").unlink()  # the same note, visible
    with Workspace.open(vault, embedder=embedder) as ws:
        shown = ws.select(HIDDEN_ONLY, use_vectors=use_vectors)
    assert shown.candidates[0].path == "Private/Ledger.md"
    assert not shown.no_good_match  # so the test can fail: the note itself is a match
    assert hidden.confidence < shown.confidence
