"""A team on one database: a token per person, made and revoked by a command; the notes a
person's globs hide and another person's account-tier memories never reach their answers or
the model requests made for them; every request is logged with who made it."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from conftest import write_files
from llm_server import LLMServer, Reply, llm_server_fixture  # noqa: F401
from server_helpers import call
from vaultctx import Workspace
from vaultctx.cli import cli
from vaultctx.errors import ConfigError
from vaultctx.server.app import ANONYMOUS_LOG_ROWS, ANONYMOUS_SUPPRESSED
from vaultctx.server.run import LocalServer
from vaultctx.storage.postgres.team import LOGGED_CHARS, Person, Team

BUDGET = "ZEBRABUDGET"  # in a note hidden from bob, readable by alice
ALICE = "ZEBRAALICE"  # in alice's account-tier memory
PUBLIC = "ZEBRAPUBLIC"
VAULT = {
    "Orchard.md": f"# Orchard\n\nThe orchard budget {PUBLIC} covers the hives. See [[Budget]].\n",
    "Finance/Budget.md": f"# Budget\n\nThe orchard budget for hives is {BUDGET} this year.\n",
    "Apiary.md": "# Apiary\n\nHives by the orchard.\n",
}
QUERIES = ("orchard budget", "budget hives", BUDGET.lower())


@pytest.fixture
def team_vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_url: str) -> Path:
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("VAULTCTX_ACCOUNT_DIR", str(tmp_path / "owner-account"))
    root = write_files(tmp_path / "vault", VAULT)
    with Workspace.open(root, {"embed": False, "database_url": postgres_url}) as indexer:
        indexer.index()
    return root


def open_server_side(root: Path, url: str, **settings: object) -> Workspace:
    index_dir = str(root.parent / "server-host")
    return Workspace.open(root, {"embed": False, "database_url": url, "index_dir": index_dir,
                                 **settings})  # fmt: skip


def test_tokens_are_made_shown_once_and_revoked(team_vault: Path, postgres_url: str):
    with open_server_side(team_vault, postgres_url) as ws:
        team = ws.team
        assert isinstance(team, Team)
        token = team.add("alice", ["Finance/**"])
        assert team.authenticate(token).name == "alice"
        assert team.authenticate(token).deny == ("Finance/**",)
        assert team.authenticate("not-a-token") is None
        with pytest.raises(ConfigError, match="already on the team"):
            team.add("alice")
        for bad in ("owner", "unknown", "", "a b", "x" * 65, "../etc"):
            with pytest.raises(ConfigError):
                team.add(bad)
        assert team.revoke("alice") and not team.revoke("alice")
        assert team.authenticate(token) is None
        again = team.add("alice")
        assert again != token and team.authenticate(again).name == "alice"
        with ws._vault.reads.connect().cursor() as cur:  # the database holds no token itself
            stored = json.dumps(cur.execute("SELECT * FROM people").fetchall(), default=str)
        assert again not in stored and token not in stored


def test_each_person_sees_what_they_may_and_nobody_sees_another_s_account_memories(
    team_vault: Path, postgres_url: str, llm_server: LLMServer
):
    llm_server.script(Reply(content='{"keep": [{"id": "c1", "reason": "first"}]}'))
    model = {"llm_model": "openai/test-gate", "llm_api_base": llm_server.api_base}
    with open_server_side(team_vault, postgres_url, **model) as ws:
        alice = ws.team.add("alice")
        bob = ws.team.add("bob", ["Finance/**"])
        with LocalServer(ws, watch=False, warm=False) as server:
            status, _, added = call(
                server, "POST", "/memory/add",
                {"text": f"My bank PIN hint is {ALICE}", "tier": "account"}, token=alice,
            )  # fmt: skip
            assert status == 200, added
            seen: dict[str, list] = {"alice": [], "bob": []}
            sent_for: dict[str, list] = {}
            for who, token in (("alice", alice), ("bob", bob)):
                before = len(llm_server.requests)
                for query in QUERIES:
                    seen[who].append(call(server, "POST", "/select", {"query": query}, token=token))
                    seen[who].append(
                        call(server, "POST", "/context", {"query": query}, token=token)
                    )
                seen[who].append(call(server, "POST", "/related", {"note": "Orchard"}, token=token))
                for body in (
                    {"query": "bank PIN"},
                    {"query": "bank PIN", "tier": "account"},
                    {"query": "bank PIN", "tier": "account", "scope": "alice"},
                ):
                    seen[who].append(call(server, "POST", "/memory/search", body, token=token))
                sent_for[who] = [json.dumps(r.body) for r in llm_server.requests[before:]]
            bob_touch = call(server, "POST", "/touch", {"note": "Finance/Budget"}, token=bob)
            bob_missing = call(server, "POST", "/touch", {"note": "Finance/Nothing"}, token=bob)
            bob_conversation = call(
                server, "POST", "/memory/search", {"query": "x", "tier": "conversation"}, token=bob
            )
            bob_index = call(server, "POST", "/index", {}, token=bob)
            ws.team.revoke("bob")
            revoked = call(server, "POST", "/select", {"query": "orchard"}, token=bob)
            nobody = call(server, "POST", "/select", {"query": "orchard"}, token="wrong")
    assert all(status == 200 for status, _, _ in seen["alice"] + seen["bob"])
    answers = {who: json.dumps([body for _, _, body in got]) for who, got in seen.items()}
    assert BUDGET in answers["alice"] and ALICE in answers["alice"]
    assert PUBLIC in answers["bob"]
    assert BUDGET not in answers["bob"] and ALICE not in answers["bob"]
    assert bob_touch[0] == 404 and bob_index[0] == 403
    # a hidden note answers a member in the words of a missing one, naming no server path
    hidden_said, missing_said = bob_touch[2]["message"], bob_missing[2]["message"]
    assert hidden_said == missing_said.replace("Finance/Nothing", "Finance/Budget")
    assert str(team_vault) not in hidden_said and "/" + team_vault.name not in hidden_said
    assert bob_conversation[0] == 200 and bob_conversation[2]["memories"] == []  # his own: none
    assert revoked[0] == 401 and nobody[0] == 401
    assert sent_for["alice"] and sent_for["bob"]  # the gate was asked for both of them
    assert any(BUDGET in body for body in sent_for["alice"])
    assert not any(BUDGET in body or ALICE in body for body in sent_for["bob"])


def test_every_request_is_logged_with_who_made_it(team_vault: Path, postgres_url: str):
    with open_server_side(team_vault, postgres_url) as ws:
        carol = ws.team.add("carol")
        with LocalServer(ws, watch=False, warm=False) as server:
            call(server, "POST", "/select", {"query": "orchard"}, token=carol)
            call(server, "POST", "/select", {"query": "orchard"})
            call(server, "GET", "/status", token="nope")
            call(server, "GET", "/health", token=None)
        log = ws.team.requests()
    assert [(r["person"], r["method"], r["path"], r["status"]) for r in reversed(log)] == [
        ("carol", "POST", "/select", 200),
        ("owner", "POST", "/select", 200),
        ("unknown", "GET", "/status", 401),
    ]
    assert all(r["ms"] >= 0 and r["server"] for r in log)


def test_the_log_is_in_the_order_requests_arrived_not_answered(team_vault, postgres_url):
    """A request is written once answered: a slow one is written after a quick one that
    came later, and still reads as the earlier."""
    with open_server_side(team_vault, postgres_url) as ws:
        ws.team.log("carol", "POST", "/select", 200, 0.8, "b", at=1_700_000_010.25)
        ws.team.log("owner", "POST", "/research", 200, 9000.0, "a", at=1_700_000_001.5)
        log = ws.team.requests()
    arrived = [datetime.fromisoformat(r["at"]).timestamp() for r in log]
    assert [(r["person"], r["path"]) for r in log] == [("carol", "/select"), ("owner", "/research")]
    assert arrived == [1_700_000_010, 1_700_000_001]  # to the second


def test_the_team_commands(team_vault: Path, postgres_url: str):
    runner = CliRunner()
    env = {"VAULTCTX_DATABASE_URL": postgres_url}
    added = runner.invoke(
        cli, ["team", "add", "dana", "--deny", "Finance/**", "-V", str(team_vault), "--json"],
        env=env,
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    token = json.loads(added.output)["token"]
    listed = runner.invoke(cli, ["team", "list", "-V", str(team_vault), "--json"], env=env)
    assert json.loads(listed.output)[0]["name"] == "dana"
    assert json.loads(listed.output)[0]["deny"] == ["Finance/**"]
    assert token not in listed.output
    revoked = runner.invoke(cli, ["team", "revoke", "dana", "-V", str(team_vault)], env=env)
    assert revoked.exit_code == 0 and "Revoked" in revoked.output
    again = runner.invoke(cli, ["team", "revoke", "dana", "-V", str(team_vault)], env=env)
    assert again.exit_code != 0 and "no token" in again.output
    settings = {"embed": False, "database_url": postgres_url}  # the CLI's index folder
    with Workspace.open(team_vault, settings) as ws:  # dana's memories, kept so far
        ws.for_person(Person("dana")).memory.add("Dana's bike lock is 4321", tier="account")
    copy = team_vault / ".vaultctx" / "people" / "dana"
    assert copy.is_dir()
    forgot = runner.invoke(
        cli, ["team", "revoke", "dana", "--forget", "-V", str(team_vault), "--json"], env=env
    )
    assert forgot.exit_code == 0, forgot.output
    assert json.loads(forgot.output) == {"name": "dana", "revoked": True, "forgotten": True}
    assert not copy.exists()
    lonely = runner.invoke(cli, ["team", "list", "-V", str(team_vault)])
    assert lonely.exit_code != 0 and "database_url" in lonely.output


def test_a_team_server_whose_database_is_gone_answers_503_in_json(
    team_vault: Path, postgres_url: str, postgres_server
):
    name = urlsplit(postgres_url).path.lstrip("/")
    answers = answers_once(team_vault, postgres_url, lambda: postgres_server.drop_database(name))
    for status, _, body in answers:
        assert status == 503, body
        assert body["error"] == "IndexUnavailable" and "database" in body["message"]


def test_a_database_a_newer_vaultctx_upgraded_is_503_upgrade_vaultctx(
    team_vault: Path, postgres_url: str
):
    import psycopg

    def upgrade() -> None:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("UPDATE vx_schema SET version = version + 1")
            admin.execute(  # the server's connections drop, as in a restart for the upgrade
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid != pg_backend_pid()"
            )

    for status, _, body in answers_once(team_vault, postgres_url, upgrade):
        assert status == 503, body
        assert body["error"] == "IndexCorrupt" and "upgrade vaultctx" in body["message"]


def answers_once(root: Path, url: str, happens: Callable[[], None]) -> list[tuple]:
    """A team member's select and the owner's, once `happens` happened to the database."""
    with open_server_side(root, url) as ws:
        erin = ws.team.add("erin")
        with LocalServer(ws, watch=False, warm=False) as server:
            assert call(server, "POST", "/select", {"query": "orchard"}, token=erin)[0] == 200
            happens()
            return [
                call(server, "POST", "/select", {"query": "orchard"}, token=erin),
                call(server, "POST", "/select", {"query": "orchard hives"}),
            ]


def test_a_team_server_keeps_one_copy_of_the_index_for_all_its_people(
    team_vault: Path, postgres_url: str
):
    import psycopg

    def connections() -> int:
        with psycopg.connect(postgres_url) as conn:
            return conn.execute(
                "SELECT count(*) - 1 FROM pg_stat_activity WHERE datname = current_database()"
            ).fetchone()[0]

    with open_server_side(team_vault, postgres_url) as ws:
        tokens = [ws.team.add(f"person{n}", ["Finance/**"] if n % 2 else []) for n in range(8)]
        with LocalServer(ws, watch=False, warm=False) as server:
            assert call(server, "POST", "/select", {"query": "orchard"})[0] == 200
            call(server, "POST", "/select", {"query": "orchard"}, token=tokens[0])
            alone = connections()
            answers = [
                call(server, "POST", "/select", {"query": "orchard budget"}, token=token)
                for token in tokens
            ]
            together = connections()
        people = [ws.for_person(ws.team.authenticate(token)) for token in tokens]
        assert all(p._vault.reads is ws._vault.reads for p in people)
        assert all(p._selector.vectors is ws._selector.vectors for p in people)
        assert all(p._selector.graph is ws._selector.graph for p in people)
        assert all(p.memory.repo is ws.memory.repo for p in people)  # the vault's memory too
        assert len({id(p.memory.places.account(create=True)) for p in people}) == len(people)
    assert all(status == 200 for status, _, _ in answers)
    hidden = [BUDGET in json.dumps(body) for _, _, body in answers]
    assert hidden == [True, False] * 4  # one copy, each person's own policy still
    assert together <= alone + 1  # eight people, not eight sets of connections


def test_two_servers_of_one_vault_folder_serve_side_by_side_on_a_team_database(
    team_vault: Path, postgres_url: str
):
    """One host, one vault folder, one index folder: on a team's database a second server
    serves beside the first (one Python process uses about one core); the first alone is
    announced. The vault's own SQLite index still refuses a second server."""
    from vaultctx import ServerRunning
    from vaultctx.server.client import read_server_file

    with (
        open_server_side(team_vault, postgres_url) as a,
        open_server_side(team_vault, postgres_url) as b,
    ):
        with (
            LocalServer(a, watch=True, warm=False) as one,
            LocalServer(b, watch=True, warm=False) as two,
        ):
            assert (one.announced, two.announced) == (True, False)
            assert read_server_file(team_vault).port == one.port
            answers = [call(s, "POST", "/select", {"query": "orchard budget"}) for s in (one, two)]
            assert answers[0][0] == answers[1][0] == 200
            assert answers[0][2]["candidates"] == answers[1][2]["candidates"]
            (team_vault / "Quokka.md").write_text("# Quokka\n\nA quokka visits the orchard.\n")
            found = [top_when(s, "quokka", "Quokka.md") for s in (one, two)]  # either indexed
        assert found == ["Quokka.md", "Quokka.md"]
        assert read_server_file(team_vault) is None  # the first took its announcement away
    with (
        Workspace.open(
            team_vault, {"embed": False, "index_dir": str(team_vault.parent / "own")}
        ) as alone,
        LocalServer(alone, watch=False, warm=False),
        pytest.raises(ServerRunning),
    ):
        LocalServer(alone, watch=False, warm=False)


def top_when(server: LocalServer, query: str, path: str, timeout: float = 20.0) -> str | None:
    """The top answer's path once it is `path` (or the last one seen at the deadline)."""
    import time

    deadline = time.monotonic() + timeout
    top = None
    while time.monotonic() < deadline:
        status, _, body = call(server, "POST", "/select", {"query": query, "k": 1})
        top = body["candidates"][0]["path"] if status == 200 and body["candidates"] else None
        if top == path:
            break
        time.sleep(0.2)
    return top


def test_a_team_member_cannot_choose_a_model_and_nothing_is_sent_to_one(
    team_vault: Path, postgres_url: str, llm_server: LLMServer
):
    """No model is configured, only where one would answer: a member naming a model is
    refused at every route that takes one, and the model server never hears of it; the
    owner still chooses one."""
    llm_server.script(Reply(content='{"keep": [{"id": "c1", "reason": "first"}]}'))
    with open_server_side(team_vault, postgres_url, llm_api_base=llm_server.api_base) as ws:
        frank = ws.team.add("frank")
        with LocalServer(ws, watch=False, warm=False) as server:
            refused = [
                call(server, "POST", "/context", {"query": "orchard", "model": model}, token=frank)
                for model in ("openai/gpt-4o", "openai/test-gate", None)
            ]
            refused.append(
                call(server, "POST", "/ask", {"question": "budget?", "model": "x"}, token=frank)
            )
            plain = call(server, "POST", "/context", {"query": "orchard"}, token=frank)
            member_requests = list(llm_server.requests)
            owner = call(server, "POST", "/context", {"query": "orchard", "model": "openai/mine"})
    for status, _, body in refused:
        assert status == 403, body
        assert body["error"] == "permission_denied" and "owner" in body["message"]
    assert plain[0] == 200 and member_requests == []  # no model: the deterministic gate
    assert owner[0] == 200 and [r.model for r in llm_server.requests] == ["mine"]


def test_a_team_member_cannot_replace_the_model_the_owner_configured(
    team_vault: Path, postgres_url: str, llm_server: LLMServer
):
    llm_server.script(Reply(content='{"keep": [{"id": "c1", "reason": "first"}]}'))
    model = {"llm_model": "openai/test-gate", "llm_api_base": llm_server.api_base}
    with open_server_side(team_vault, postgres_url, **model) as ws:
        gina = ws.team.add("gina")
        with LocalServer(ws, watch=False, warm=False) as server:
            body = {"query": "orchard", "model": "openai/gpt-4o"}
            replaced = call(server, "POST", "/context", body, token=gina)
            asked = len(llm_server.requests)
            configured = call(server, "POST", "/context", {"query": "orchard"}, token=gina)
    assert replaced[0] == 403 and replaced[2]["error"] == "permission_denied"
    assert asked == 0
    assert configured[0] == 200
    assert [r.model for r in llm_server.requests] == ["test-gate"]  # the owner's choice


HOSTILE_PATHS = {  # sent without a token, as the path of a request
    "/%1b[2J%1b[Hcleared": "/\\x1b[2J\\x1b[Hcleared",
    "/x%0a2099-01-01%20owner%20GET%20/fake": "/x\\n2099-01-01 owner GET /fake",
    "/%e2%80%aeevil": "/\\u202eevil",
    "/nul%00byte": "/nul\\x00byte",
    "/[bold%20red]markup[/]": "/[bold red]markup[/]",
}


def test_the_request_log_keeps_what_anyone_sends_printable_and_short(
    team_vault: Path, postgres_url: str
):
    long = "/" + "a" * 5000
    with open_server_side(team_vault, postgres_url) as ws:
        with LocalServer(ws, watch=False, warm=False) as server:
            for path in [*HOSTILE_PATHS, long]:
                assert call(server, "GET", path, token=None)[0] == 401
        rows = list(reversed(ws.team.requests()))
    kept = [r["path"] for r in rows]
    assert kept[:-1] == list(HOSTILE_PATHS.values())
    assert kept[-1] == "/" + "a" * (LOGGED_CHARS - 2) + "…" and len(kept[-1]) == LOGGED_CHARS
    assert all(r["person"] == "unknown" and r["status"] == 401 for r in rows)
    runner = CliRunner()
    env = {"VAULTCTX_DATABASE_URL": postgres_url, "COLUMNS": "400"}
    table = runner.invoke(cli, ["team", "log", "-V", str(team_vault)], env=env)
    assert table.exit_code == 0, table.output
    assert not any(c in table.output for c in "\x1b\x00\u202e")
    for shown in HOSTILE_PATHS.values():  # visibly, markup and all
        assert f"GET {shown}" in table.output
    lines = table.output.splitlines()
    assert sum(" GET " in line for line in lines) == len(rows)  # one line each: no fake rows
    as_json = runner.invoke(cli, ["team", "log", "-V", str(team_vault), "--json"], env=env)
    assert [r["path"] for r in reversed(json.loads(as_json.output))] == kept


def test_the_log_prints_rows_any_writer_left_in_the_database_safely(
    team_vault: Path, postgres_url: str
):
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO requests (person, method, path, status, ms, server)"
            " VALUES ('unknown', 'GET', %s, 401, 1, 'elsewhere')",
            ("/\x1b]0;owned\x07\x1b[2J" + "b" * 400,),
        )
    runner = CliRunner()
    env = {"VAULTCTX_DATABASE_URL": postgres_url, "COLUMNS": "400"}
    table = runner.invoke(cli, ["team", "log", "-V", str(team_vault)], env=env)
    as_json = json.loads(runner.invoke(cli, ["team", "log", "-V", str(team_vault), "--json"],
                                       env=env).output)  # fmt: skip
    assert "\x1b" not in table.output and "\x07" not in table.output
    assert "GET /\\x1b]0;owned\\x07\\x1b[2J" in table.output
    assert as_json[0]["path"].startswith("/\\x1b]0;owned\\x07")
    assert len(as_json[0]["path"]) == LOGGED_CHARS


def test_a_flood_of_anonymous_requests_is_logged_up_to_a_bound_then_summed_up(
    team_vault: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
):
    from vaultctx.server import app

    flood = ANONYMOUS_LOG_ROWS + 25
    with open_server_side(team_vault, postgres_url) as ws:
        hana = ws.team.add("hana")
        with LocalServer(ws, watch=False, warm=False) as server:
            for n in range(flood):
                assert (
                    call(server, "GET", f"/status?n={n}", token="wrong" if n % 2 else None)[0]
                    == 401
                )
            assert call(server, "POST", "/select", {"query": "orchard"}, token=hana)[0] == 200
            assert call(server, "GET", "/status")[0] == 200
            monkeypatch.setattr(app, "ANONYMOUS_LOG_WINDOW_S", 0.0)  # the next window begins
            assert call(server, "GET", "/after", token=None)[0] == 401
        log = list(reversed(ws.team.requests(limit=1000)))
    anonymous = [r["path"] for r in log if r["person"] == "unknown"]
    assert len(anonymous) == ANONYMOUS_LOG_ROWS + 2
    assert all(path == "/status" for path in anonymous[:ANONYMOUS_LOG_ROWS])
    assert anonymous[ANONYMOUS_LOG_ROWS].startswith(ANONYMOUS_SUPPRESSED)
    assert anonymous[-1] == "/after"
    assert [r["person"] for r in log if r["person"] != "unknown"] == ["hana", "owner"]


def test_a_team_member_s_status_names_nothing_of_the_server_s_machine(
    team_vault: Path, postgres_url: str
):
    from vaultctx.storage.watch import record_watch_error

    with open_server_side(team_vault, postgres_url) as ws:
        ivy = ws.team.add("ivy", ["Finance/**"])
        record_watch_error(ws._vault.db, f"cannot read {team_vault}/Finance/Budget.md")
        with LocalServer(ws, watch=False, warm=False) as server:
            owner = call(server, "GET", "/status")
            member = call(server, "GET", "/status", token=ivy)
    assert owner[0] == member[0] == 200
    machine = [owner[2]["vault"], owner[2]["index_path"], owner[2]["watch_error"]]
    assert str(team_vault) in machine[0] and "Finance" in machine[2]  # the owner's, all of it
    said = json.dumps(member[2])
    assert not any(text in said for text in machine)
    assert str(team_vault.parent) not in said and "host=" not in said and "Finance" not in said
    assert {"vault", "index_path", "watch_error", "index_bytes"}.isdisjoint(member[2])
    assert "watch_error" not in member[2]["server"]
    assert member[2]["server"]["watching"] is False


def test_a_team_member_s_status_counts_only_what_they_may_see(
    team_vault: Path, postgres_url: str, tmp_path: Path
):
    """The counts of a vault holding only the notes the member may read, indexed alone."""
    visible = {path: text for path, text in VAULT.items() if not path.startswith("Finance/")}
    with Workspace.open(write_files(tmp_path / "visible", visible), {"embed": False}) as alone:
        alone.index()
        expected = alone.status()
    with open_server_side(team_vault, postgres_url) as ws:
        jack = ws.team.add("jack", ["Finance/**"])
        with LocalServer(ws, watch=False, warm=False) as server:
            status, _, seen = call(server, "GET", "/status", token=jack)
    assert status == 200 and expected.notes == len(visible)
    assert (seen["notes"], seen["blocks"]) == (expected.notes, expected.blocks)
