"""The warm local server over real HTTP on 127.0.0.1: auth, limits, errors, concurrency, and
the file that announces it. (The CLI finding it: test_client.py.)"""

from __future__ import annotations

import http.client
import json
import os
import socket
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from server_helpers import NOTES, call, config_dir_fixture, server_fixture, workspace_fixture  # noqa: F401
from vaultctx import Workspace
from vaultctx.config import CONFIG_DIRNAME
from vaultctx.server.auth import proofs
from vaultctx.server.client import SERVER_FILE, read_server_file
from vaultctx.server.run import LocalServer


def test_health_needs_no_token_and_names_the_vault_only_to_the_token(server: LocalServer) -> None:
    status, _, body = call(server, "GET", "/health", token=None)
    assert (status, body) == (200, {"ok": True})
    assert call(server, "GET", "/health", token="wrong")[2] == {"ok": True}
    status, _, body = call(server, "GET", "/health")
    assert status == 200
    assert body["vault"] == str(server.workspace.root)
    assert body["pid"] == os.getpid()


def test_health_answers_a_challenge_with_proofs_bound_to_its_token_port_and_vault(
    server: LocalServer,
) -> None:
    status, _, body = call(server, "GET", "/health?challenge=c0ffee", token=None)
    assert status == 200
    root = str(server.workspace.root)
    assert body == {"ok": True, "proof": proofs(server.token, "c0ffee", server.port, root)}
    assert body["proof"] != proofs(server.token, "c0ffee", server.port + 1, root)
    assert body["proof"] != proofs("another-token", "c0ffee", server.port, root)
    status, _, error = call(server, "GET", "/health?challenge=" + "x" * 129, token=None)
    assert (status, error["error"]) == (422, "InvalidQuery")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/status", None),
        ("POST", "/select", {"query": "varroa"}),
        ("POST", "/touch", {"note": "Varroa"}),
        ("GET", "/focus", None),
        ("DELETE", "/focus", None),
        ("POST", "/index", {}),
    ],
)
def test_every_other_route_requires_the_bearer_token(
    server: LocalServer, method: str, path: str, body: Any
) -> None:
    assert call(server, method, path, body, token=None)[0] == 401
    status, headers, error = call(server, method, path, body, token="not-the-token")
    assert status == 401
    assert headers["www-authenticate"] == "Bearer"
    assert error["error"] == "Unauthorized"
    assert call(server, method, path, body)[0] == 200


def test_token_is_created_once_with_owner_only_permissions(
    server: LocalServer, config_dir: Path, make_vault: Callable[..., Path]
) -> None:
    token_file = config_dir / "token"
    assert token_file.read_text().strip() == server.token
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    with (
        Workspace.open(make_vault(NOTES), {"embed": False}) as other,
        LocalServer(other, watch=False, warm=False) as second,  # another vault's server
    ):
        assert second.token == server.token


def test_select_answers_with_the_same_contract_as_the_api(
    server: LocalServer, workspace: Workspace
) -> None:
    status, _, body = call(
        server, "POST", "/select", {"query": "varroa mites", "k": 5, "no_vectors": True}
    )
    assert status == 200
    expected = workspace.select("varroa mites", k=5, use_vectors=False).contract()
    assert [c["id"] for c in body["candidates"]] == [c["id"] for c in expected["candidates"]]
    assert body["candidates"][0]["path"] == "Hives/Varroa.md"
    assert body["diagnostics"]["server_pid"] == os.getpid()


def test_select_takes_the_cli_filters(server: LocalServer) -> None:
    body = {"query": "stake tomatoes varroa", "no_vectors": True, "tags": ["garden"]}
    status, _, answer = call(server, "POST", "/select", body)
    assert status == 200
    assert {c["path"] for c in answer["candidates"]} == {"Garden/Tomatoes.md"}
    body = {"query": "varroa feeding", "no_vectors": True, "path": "Hives", "kinds": ["block"]}
    _, _, answer = call(server, "POST", "/select", body)
    assert answer["candidates"]
    assert all(c["path"].startswith("Hives/") for c in answer["candidates"])


def test_bad_json_is_400(server: LocalServer) -> None:
    status, _, body = call(server, "POST", "/select", raw=b"{not json")
    assert status == 400
    assert body["error"] == "BadJSON"
    assert call(server, "POST", "/select", raw=b"[1, 2]")[0] == 400


@pytest.mark.parametrize(
    ("body", "where"),
    [({"query": "x", "k": 0}, "k"), ({"query": "x", "colour": "red"}, "colour"), ({}, "query")],
)
def test_invalid_fields_are_422_with_a_clear_message(
    server: LocalServer, body: dict, where: str
) -> None:
    status, _, error = call(server, "POST", "/select", body)
    assert status == 422
    assert error["error"] == "ValidationError"
    assert error["message"].startswith(where)


def test_every_body_field_that_chooses_a_model_is_refused_to_a_team_member() -> None:
    """A route that takes a new way to name a model (or where its requests go) must be
    refused to team members as `model` is (see test_postgres_team)."""
    from pydantic import BaseModel

    from vaultctx.server import bodies

    models = [v for v in vars(bodies).values() if isinstance(v, type) and issubclass(v, BaseModel)]
    fields = {name for body in models for name in body.model_fields}
    choosing = {f for f in fields if any(word in f for word in ("model", "llm", "api_base"))}
    assert "model" in choosing and choosing <= bodies.MODEL_CHOICES


def test_library_errors_keep_their_type(server: LocalServer) -> None:
    status, _, error = call(server, "POST", "/select", {"query": "   "})
    assert (status, error["error"]) == (422, "InvalidQuery")
    status, _, error = call(server, "POST", "/touch", {"note": "No Such Note"})
    assert (status, error["error"]) == (404, "NoteNotFound")


def test_oversized_bodies_are_413(workspace: Workspace) -> None:
    with LocalServer(workspace, watch=False, warm=False, max_body=1024) as small:
        big = {"query": "x" * 2000}
        assert call(small, "POST", "/select", big)[0] == 413
        # Without a Content-Length (chunked), the limit holds while reading.
        chunks = iter([json.dumps(big).encode()])
        conn = http.client.HTTPConnection("127.0.0.1", small.port, timeout=10)
        conn.request(
            "POST",
            "/select",
            body=chunks,
            headers={"Authorization": f"Bearer {small.token}"},
            encode_chunked=True,
        )
        assert conn.getresponse().status == 413
        conn.close()


def test_foreign_host_headers_are_refused(server: LocalServer) -> None:
    """A DNS-rebinding page reaches 127.0.0.1 under its own host name."""
    status, _, _ = call(server, "GET", "/health", token=None, headers={"Host": "evil.example"})
    assert status == 400


def test_cors_is_closed_by_default_and_opens_for_one_origin(workspace: Workspace) -> None:
    origin = {"Origin": "app://notes"}
    with LocalServer(workspace, watch=False, warm=False) as server:
        _, headers, _ = call(server, "GET", "/status", headers=origin)
        assert "access-control-allow-origin" not in headers
    with LocalServer(workspace, watch=False, warm=False, allow_origin="app://notes") as open_:
        _, headers, _ = call(open_, "GET", "/status", headers=origin)
        assert headers["access-control-allow-origin"] == "app://notes"
        preflight = {**origin, "Access-Control-Request-Method": "POST"}
        status, headers, _ = call(open_, "OPTIONS", "/select", token=None, headers=preflight)
        assert status == 200
        _, headers, _ = call(open_, "GET", "/status", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in headers


def test_status_touch_and_index(server: LocalServer) -> None:
    status, _, body = call(server, "GET", "/status")
    assert status == 200
    assert body["notes"] == 3
    assert body["server"]["watching"] is False
    assert body["server"]["indexing"] is False
    assert call(server, "POST", "/touch", {"note": "Varroa"})[2] == {
        "path": "Hives/Varroa.md",
        "touched": True,
    }
    (server.workspace.root / "New.md").write_text("# New\n\nQuokka notes.\n")
    _, _, report = call(server, "POST", "/index", {"paths": ["New.md"]})
    assert report["added"] == 1


def test_focus_route_shows_the_open_note_and_delete_forgets_it(server: LocalServer) -> None:
    call(server, "POST", "/touch", {"note": "Varroa"})
    status, _, shown = call(server, "GET", "/focus")
    assert status == 200
    opened = [n for n in shown["notes"] if n["how"] == "opened"]
    assert [n["path"] for n in opened] == ["Hives/Varroa.md"]
    assert opened[0]["weight"] >= 1.0  # opened just now (and written just now: edited, too)
    status, _, left = call(server, "DELETE", "/focus")
    assert (status, left["cleared"]) == (200, 1)
    assert [n for n in left["notes"] if n["how"] == "opened"] == []
    assert [n for n in call(server, "GET", "/focus")[2]["notes"] if n["how"] == "opened"] == []
    assert call(server, "POST", "/focus")[0] == 405


def test_concurrent_clients_all_succeed_and_agree(server: LocalServer) -> None:
    queries = ["varroa mites", "sugar syrup autumn", "stake tomatoes"] * 8

    def one(query: str) -> list[str]:
        status, _, body = call(server, "POST", "/select", {"query": query, "no_vectors": True})
        assert status == 200
        return [c["id"] for c in body["candidates"]]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, queries))
    for query, result in zip(queries, results, strict=True):
        assert result == results[queries.index(query)]
        assert result


def test_server_file_announces_the_server_and_goes_away(workspace: Workspace) -> None:
    assert SERVER_FILE.parts[0] == CONFIG_DIRNAME
    with LocalServer(workspace, watch=False, warm=False) as running:
        info = read_server_file(workspace.root)
        assert info is not None
        assert (info.port, info.pid) == (running.port, os.getpid())
        assert running.token not in (workspace.root / SERVER_FILE).read_text()
    assert read_server_file(workspace.root) is None


def test_the_port_accepts_connections_before_the_server_file_exists(
    workspace: Workspace,
) -> None:
    """server.json is written before uvicorn listens; a client that reads it at once must
    wait for an answer, not be refused."""
    server = LocalServer(workspace, watch=False, warm=False)
    early = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    with server:
        early.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert early.recv(64).startswith(b"HTTP/1.1 200")
    early.close()


def test_context_answers_with_the_session_context_contract(server: LocalServer) -> None:
    body = {"query": "varroa mites", "budget": 200, "no_vectors": True, "path": "Hives"}
    status, _, session = call(server, "POST", "/context", body)
    assert status == 200
    assert session["budget"] == 200
    assert session["token_count"] <= 200
    assert session["items"]
    assert session["gate"] == "deterministic"


def test_memory_add_then_search(server: LocalServer) -> None:
    status, _, added = call(
        server, "POST", "/memory/add", {"text": "The hives stand at the orchard gate."}
    )
    assert status == 200
    assert "orchard" in added["text"]
    _, _, found = call(server, "POST", "/memory/search", {"query": "where are the hives"})
    assert [m["text"] for m in found["memories"]][:1] == [added["text"]]
    status, _, by_get = call(server, "GET", "/memory/search?query=orchard&k=3")
    assert status == 200
    assert by_get["memories"][0]["id"] == added["id"]
    assert call(server, "POST", "/memory/add", {"text": "x", "tier": "nowhere"})[0] == 422


def test_memory_turns_over_http_are_ranked_as_the_api_ranks_them(
    server: LocalServer, workspace: Workspace
) -> None:
    for i, (speaker, text) in enumerate(
        [("Jon", "What made you pick that agency?"), ("Gina", "They support LGBTQ+ folks.")]
    ):
        body = {"text": text, "tier": "channel", "scope": "c", "speaker": speaker,
                "session": "s1", "turn": f"t{i}", "created_at": "2023-05-08"}  # fmt: skip
        status, _, added = call(server, "POST", "/memory/add", body)
        assert status == 200 and added["text"] == f"{speaker}: {text}"
    query = {"query": "why did Gina pick the agency", "tier": "channel", "scope": "c"}
    _, _, found = call(server, "POST", "/memory/search", query)
    ids = [m["id"] for m in found["memories"]]
    assert found["memories"][0]["source"]["turns"] == ["t0", "t1"]
    assert ids == [m.id for m in workspace.memory.search(query["query"], tier="channel", scope="c")]
