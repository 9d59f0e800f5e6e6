"""Private by construction: every door of a `Workspace` — each public method and attribute,
each HTTP route, each MCP tool, found by introspection, not listed by hand — answers a reader
as if the notes the policy hides were not in the vault.

A door is asked by a hidden note's title, alias and path, and with queries only that note
matches; nothing it answers, raises, logs or sends a model may hold the note's marker, path,
title, alias, tag or word, and where a hidden note fails, it fails exactly as a missing note
(same class, same message but for the name asked). A door the table below has no case for
fails the test: a new door must say how it keeps hidden notes hidden.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pathspec
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from test_privacy import (
    DENY_PRIVATE,
    MCP_ENV,
    PUBLIC,
    SECRET,
    leaks,
    make_private_vault,
    model_config,
)

from agent_model import AgentModel, agent_model_fixture, call  # noqa: F401
from conftest import query as index_rows
from conftest import write_files
from llm_server import LLMServer, Reply, ToolCallReply, llm_server_fixture  # noqa: F401
from server_helpers import call as http_call
from server_helpers import stream_ask
from vaultctx import Workspace
from vaultctx.cli import cli
from vaultctx.permissions import Destination
from vaultctx.pipeline import RetrievalRequest
from vaultctx.pipeline.models import Candidate
from vaultctx.search.fusion import Hit
from vaultctx.server.app import create_app
from vaultctx.server.run import LocalServer
from vaultctx.workspace import Person

# --- the vault: test_privacy's, its denied note given a title, an alias, a tag and a word ----

HIDDEN = "Private/secret.md"
TITLE = "Strongroom Ledger"
ALIAS = "Quincebox"
TAG = "vaultkeep"
WORD = "quincewort"
DENIED_NOTE = (
    f"---\naliases: [{ALIAS}]\ntags: [{TAG}]\n---\n# {TITLE}\n\n"
    f"The orchard honey safe code is {SECRET}-denied; the {WORD} lies here.\n"
)
PUBLIC_TAG = "hivekeep"
APIARY = (
    f"---\ntags: [{PUBLIC_TAG}]\n---\n# Apiary\n\nHives stand by the orchard; honey supers go"
    " on in May.\n"
)
SKILL = "Strongroom Check"
SKILLS_FOLDER = "Private/Skills"  # every skill of this vault is hidden
SKILL_NOTE = (
    f"---\nname: {SKILL}\ndescription: Check the strongroom.\ncapabilities: [vault.read]\n---\n"
    f"Report {SECRET}-skill. Check [[Apiary]].\n"
)
# What no door may show: the notes' text (SECRET, via `leaks`) and what names the denied one.
NAMING = (
    HIDDEN,
    TITLE,
    ALIAS,
    TAG,
    WORD,
    "ignored/s.md",
    ".obsidian/secret.md",
    "secret.pdf",
    "board.canvas",
    "ignored/s.pdf",
    ".obsidian/secret.canvas",
)
# (a hidden note's name, a name of the same shape that names nothing)
NAME_PAIRS = (
    (TITLE, "Copperleaf Ledger"),
    (ALIAS, "Plumcrate"),
    (HIDDEN, "Private/absent.md"),
    ("Private/secret", "Private/absent"),
    ("alias.md", "nothere.md"),
    ("Private/secret.pdf", "Private/absent.pdf"),
    ("board.canvas", "absent.canvas"),
)
AGENT_PAIRS = NAME_PAIRS[:3]  # each pair is two agent turns
SKILL_PAIRS = ((SKILL, "Copperleaf Check"),)
QUERIES = (WORD, TITLE, ALIAS, TAG)  # each matches the denied note alone


def make_door_vault(root: Path) -> Path:
    make_private_vault(root)
    notes = {HIDDEN: DENIED_NOTE, "Apiary.md": APIARY, f"{SKILLS_FOLDER}/{SKILL}.md": SKILL_NOTE}
    # A turn remembers nothing, so one door's call never hears what an earlier one asked.
    policy = f'[defaults]\n"memory.write" = "deny"\n\n{DENY_PRIVATE}'
    return write_files(root, {**notes, ".vaultctx/permissions.toml": policy})


def open_door_workspace(root: Path, llm_server: LLMServer) -> Workspace:
    """The door vault indexed, its model on the scripted server, with a memory drawn from
    the denied note beside a public one."""
    ws = Workspace.open(
        root, {"embed": False, "skills_folder": SKILLS_FOLDER, **model_config(llm_server)}
    )
    ws.index()
    ws.memory.add(f"The safe code is {SECRET}; the {WORD}.", source={"paths": [HIDDEN]})
    ws.memory.add(f"The harvest marker is {PUBLIC}.", source={"paths": ["Orchard.md"]})
    ws.memory.flush()
    return ws


def exposed(found: object, *asked: str) -> list[str]:
    """What of the hidden notes `found` shows, the caller's own words (`asked`) left out."""
    text = found if isinstance(found, str) else json.dumps(found, default=str, ensure_ascii=False)
    for words in sorted(asked, key=len, reverse=True):
        text = text.replace(words, "")
    return [SECRET] * leaks(text) + [name for name in NAMING if name in text]


def shown(value: object) -> object:
    """A door's answer as JSON can hold it."""
    if hasattr(value, "contract"):
        return value.contract()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [shown(v) for v in value]
    return value


@dataclass
class Outcome:
    """What one call of a door gave: its answer, or the error it raised."""

    value: object = None
    error: BaseException | None = None

    @property
    def failure(self) -> str | None:
        return None if self.error is None else f"{type(self.error).__name__}: {self.error}"


def attempt(fn: Callable[[], object]) -> Outcome:
    try:
        return Outcome(value=shown(fn()))
    except Exception as exc:  # the door's own error is what the test compares
        return Outcome(error=exc)


# --- the table: how each door is asked ----------------------------------------------------


@dataclass
class Kit:
    """What a door's case needs: the workspace, and for HTTP its server; the scripted model."""

    ws: Workspace
    llm: LLMServer
    model: AgentModel
    server: LocalServer | None = None


@dataclass(frozen=True)
class Named:
    """Takes a note's name: each hidden name is answered exactly as its missing twin."""

    call: Callable[[Kit, str], object]
    pairs: tuple[tuple[str, str], ...] = NAME_PAIRS


@dataclass(frozen=True)
class Queried:
    """Takes a query: one only the hidden note matches shows nothing of it."""

    call: Callable[[Kit, str], object]


@dataclass(frozen=True)
class Whole:
    """Takes nothing, shows something of the whole vault: nothing of a hidden note."""

    call: Callable[[Kit], object]


@dataclass(frozen=True)
class NoNote:
    """Takes no input that names a note and shows no note; why, in `reason`."""

    reason: str


@dataclass(frozen=True)
class MustNotExist:
    """Raw storage: a Workspace must not offer it to anyone."""

    reason: str


Case = Named | Queried | Whole | NoNote | MustNotExist


def agent_turn(kit: Kit, name: str) -> dict[str, Any]:
    """One turn asking about `name`, whose model reads the note by that name."""
    kit.model.orchestrator.extend([call("read_note", path=name), Reply(content="Done.")])
    return kit.ws.ask(f"What does the note {name} say?").to_dict()


def graph_listing(ws: Workspace) -> dict[str, object]:
    graph = ws.graph()
    return {"notes": dict(graph.titles), "links": list(graph.links())}


WORKSPACE_DOORS: dict[str, Case] = {
    "add_retriever": Queried(lambda kit, q: plugged_select(kit.ws, q)),
    "answering": Named(lambda kit, name: kit.ws.answering("remote_model").read_note(name)),
    "answers_to": NoNote("where this workspace's answers go: a destination's name"),
    "ask": Named(agent_turn, AGENT_PAIRS),
    "clear_focus": Whole(lambda kit: kit.ws.clear_focus()),
    "close": NoNote("lifecycle: closes the index, stops watchers and flushes memory"),
    "config": NoNote("the vault's settings, read from its config files and overrides"),
    "context": Queried(lambda kit, q: kit.ws.context(q, use_vectors=False)),
    "db": MustNotExist("the index database: every row of every note, whatever the policy"),
    "embedder": NoNote("the embedding model: encodes the text it is handed"),
    "find_note": Named(lambda kit, name: kit.ws.find_note(name)),
    "focus": Whole(lambda kit: kit.ws.focus()),
    "for_person": Named(lambda kit, name: kit.ws.for_person(Person("reader")).read_note(name)),
    "forget_departed": NoNote("a team's upkeep: erases departed people's memory copies"),
    "gate_request": Queried(lambda kit, q: kit.ws.gate_request(q, use_vectors=False)),
    "generation": NoNote("an opaque key that changes when the index does"),
    "graph": Whole(lambda kit: graph_listing(kit.ws)),
    "index": NoNote("the owner's act of bringing the index up to date with the folder"),
    "memory": Queried(lambda kit, q: kit.ws.memory.search(q)),
    "open": NoNote("lifecycle: opens a vault folder"),
    "person": NoNote("the team member this workspace answers for"),
    "policy": NoNote("the reader's read rules themselves"),
    "read_note": Named(lambda kit, name: kit.ws.read_note(name)),
    "reads": MustNotExist("the index's reads: every note and link, whatever the policy"),
    "refiner": NoNote("the gate's cache: refines a Selection it is handed, already filtered"),
    "related": Named(lambda kit, name: kit.ws.related(name, use_vectors=False)),
    "require_index": NoNote("says only whether anything is indexed"),
    "resolve_note": Named(lambda kit, name: kit.ws._vault.resolve_note(name)),
    "restore_from_database": NoNote("the owner's act of copying a team database's index here"),
    "root": NoNote("the vault folder"),
    "run_skill": Named(lambda kit, name: kit.ws.run_skill(name), SKILL_PAIRS),
    "select": Queried(lambda kit, q: kit.ws.select(q, k=20, use_vectors=False, explain=True)),
    "selector": Queried(lambda kit, q: kit.ws._selector.select(q, k=20, use_vectors=False)),
    "session": Named(
        lambda kit, name: kit.ws.session(agent_turn(kit, name)["session_id"]), AGENT_PAIRS
    ),
    "shared": NoNote("whether other hosts' servers answer from the same index"),
    "sessions": Whole(lambda kit: kit.ws.sessions()),
    "skill": Named(lambda kit, name: repr(kit.ws.skill(name)), SKILL_PAIRS),
    "skill_catalog": Whole(lambda kit: repr(kit.ws.skill_catalog())),
    "skills": Whole(lambda kit: repr(kit.ws.skills())),
    "status": Whole(lambda kit: kit.ws.status()),
    "team": NoNote("a team database's people; nobody on SQLite"),
    "touch": Named(lambda kit, name: kit.ws.touch(name)),
    "warm_up": NoNote("loads the model and caches in a thread; answers that thread"),
    "switch_in_background": NoNote(
        "starts making a changed model's vectors in the background; answers the thread"
    ),
    "watch": NoNote("starts live re-indexing; answers the watcher"),
}


def ask_over_http(kit: Kit, name: str) -> object:
    assert kit.server is not None
    kit.model.orchestrator.extend([call("read_note", path=name), Reply(content="Done.")])
    return stream_ask(kit.server, {"question": f"What does the note {name} say?"})


def http(method: str, path: str, body: Callable[[str], object] | None = None) -> Callable:
    """A call of one route, its answer as (status, body)."""

    def run(kit: Kit, asked: str = "") -> object:
        assert kit.server is not None
        target = path.format(quote(asked))
        status, _, answer = http_call(kit.server, method, target, body and body(asked))
        if status >= 400:
            raise HTTPFailure(status, answer)
        return [status, answer]

    return run


class HTTPFailure(Exception):
    """A 4xx/5xx answer, compared like an error."""

    def __init__(self, status: int, body: object) -> None:
        super().__init__(f"{status} {json.dumps(body, sort_keys=True)}")


HTTP_DOORS: dict[str, Case] = {
    "/health": Whole(
        lambda kit: [
            http("GET", "/health")(kit),
            http_call(kit.server, "GET", "/health", token=None)[2],
        ]
    ),
    "/status": Whole(http("GET", "/status")),
    "/select": Queried(http("POST", "/select", lambda q: {"query": q, "k": 20, "explain": True})),
    "/related": Named(http("POST", "/related", lambda n: {"note": n, "no_vectors": True})),
    "/context": Queried(http("POST", "/context", lambda q: {"query": q, "no_vectors": True})),
    "/memory/search": Queried(
        lambda kit, q: [
            http("GET", "/memory/search?query={}")(kit, q),
            http("POST", "/memory/search", lambda q: {"query": q})(kit, q),
        ]
    ),
    "/memory/add": NoNote("stores the caller's own text as a memory and echoes it back"),
    "/touch": Named(http("POST", "/touch", lambda n: {"note": n})),
    "/focus": Whole(lambda kit: [http("GET", "/focus")(kit), http("DELETE", "/focus")(kit)]),
    "/index": NoNote("the owner's act of bringing the index up to date (403 for a member)"),
    "/ask": Named(ask_over_http, AGENT_PAIRS),
}

# MCP tools: (how the case takes its input, the tool's arguments for it)
MCP_DOORS: dict[str, tuple[str, Callable[[str], dict[str, Any]]]] = {
    "select": ("query", lambda q: {"query": q, "k": 20}),
    "context": ("query", lambda q: {"query": q}),
    "memory_search": ("query", lambda q: {"query": q}),
    "related": ("note", lambda n: {"note": n}),
    "read_note": ("note", lambda n: {"note": n}),
    "touch": ("note", lambda n: {"note": n}),
    "focus": ("query", lambda q: {}),
    "clear_focus": ("query", lambda q: {}),
}


# --- running a door's case ----------------------------------------------------------------


def without_cases(found: Sequence[str], table: dict[str, Any]) -> list[str]:
    return sorted(set(found) - set(table))


def same_failure(door: str, hidden: Outcome, missing: Outcome, name: str, twin: str) -> str | None:
    """Why `hidden` (asked by `name`) is told apart from `missing` (asked by `twin`)."""
    if hidden.failure is None and missing.failure is None:
        return None
    if hidden.failure is None or missing.failure is None:
        return f"{door}({name!r}) answered {hidden.failure or 'a result'}, {twin!r}: " + (
            missing.failure or "a result"
        )
    told = hidden.failure.replace(name, "<name>")
    expected = missing.failure.replace(twin, "<name>")
    if told != expected:
        return f"{door}: a hidden note fails as {told!r}, a missing one as {expected!r}"
    return None


def run_case(door: str, case: Case, kit: Kit, caplog: pytest.LogCaptureFixture) -> list[str]:
    """Every problem of one door: what it showed of a hidden note, and how it failed."""
    problems: list[str] = []

    def observed(fn: Callable[[], object], asked: str) -> Outcome:
        sent = len(kit.llm.requests)
        caplog.clear()
        outcome = attempt(fn)
        bodies = [r.body for r in kit.llm.requests[sent:]]
        for where, seen in (
            ("answer", outcome.value),
            ("error", outcome.failure),
            ("log", caplog.text),
            ("model request", bodies),
        ):
            if found := exposed(seen, asked):
                problems.append(f"{door}({asked!r}): its {where} shows {found}")
        return outcome

    if isinstance(case, MustNotExist):
        problems.append(f"{door} exists: {case.reason}; a Workspace must not expose it")
    elif isinstance(case, Named):
        for name, twin in case.pairs:
            hidden = observed(lambda n=name: case.call(kit, n), name)
            missing = observed(lambda n=twin: case.call(kit, n), twin)
            if problem := same_failure(door, hidden, missing, name, twin):
                problems.append(problem)
    elif isinstance(case, Queried):
        for query in QUERIES:
            outcome = observed(lambda q=query: case.call(kit, q), query)
            if outcome.error is not None:
                problems.append(f"{door}({query!r}) failed: {outcome.failure}")
    elif isinstance(case, Whole):
        observed(lambda: case.call(kit), "")
    return problems


def public_members(ws: Workspace) -> list[str]:
    """Every public name a Workspace offers: its class's (inherited ones too) and its own."""
    names = {name for name, _ in inspect.getmembers(type(ws)) if not name.startswith("_")}
    return sorted(names | {name for name in vars(ws) if not name.startswith("_")})


@pytest.fixture
def door_vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(tmp_path / "config"))
    return make_door_vault(tmp_path / "vault")


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="vaultctx")
    return caplog


# --- the doors, enumerated ----------------------------------------------------------------


def test_every_workspace_member_keeps_hidden_notes_hidden(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    llm_server: LLMServer,
    model: AgentModel,
    logs: pytest.LogCaptureFixture,
) -> None:
    """Each member runs on a workspace of its own, so no door sees another's echoes."""
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(tmp_path / "config"))
    with open_door_workspace(make_door_vault(tmp_path / "probe"), llm_server) as probe:
        members = public_members(probe)
    assert not (new := without_cases(members, WORKSPACE_DOORS)), (
        f"a new door without a case: {new}; add it to WORKSPACE_DOORS"
    )
    problems: list[str] = []
    for door in members:
        case = WORKSPACE_DOORS[door]
        if isinstance(case, NoNote):
            continue
        with open_door_workspace(make_door_vault(tmp_path / door), llm_server) as ws:
            problems += run_case(door, case, Kit(ws, llm_server, model), logs)
    assert not problems, "\n".join(problems)


def test_every_http_route_keeps_hidden_notes_hidden(
    door_vault: Path,
    llm_server: LLMServer,
    model: AgentModel,
    logs: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    problems: list[str] = []
    with (
        open_door_workspace(door_vault, llm_server) as ws,
        LocalServer(ws, watch=False, warm=False) as server,
    ):
        routes = [route.path for route in create_app(ws, token="t").routes]
        assert not (new := without_cases(routes, HTTP_DOORS)), (
            f"a new route without a case: {new}; add it to HTTP_DOORS"
        )
        kit = Kit(ws, llm_server, model, server)
        for route in routes:
            problems += run_case(route, HTTP_DOORS[route], kit, logs)
            if found := exposed(capfd.readouterr().err):
                problems.append(f"{route}: the server's stderr shows {found}")
    assert not problems, "\n".join(problems)


def test_every_mcp_tool_keeps_hidden_notes_hidden(
    door_vault: Path, llm_server: LLMServer, tmp_path: Path
) -> None:
    llm_server.script(Reply(content="not json"))  # the gate's answer: the deterministic gate
    with open_door_workspace(door_vault, llm_server):
        pass  # indexed, with its memories
    (door_vault / ".vaultctx" / "config.toml").write_text(
        f'llm_model = "openai/test-gate"\nllm_api_base = "{llm_server.api_base}"\n'
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "vaultctx", "mcp", str(door_vault), "--no-vectors"],
        env={k: v for k, v in os.environ.items() if k in MCP_ENV},
    )
    stderr_path = tmp_path / "mcp-stderr.log"

    async def steps(client: Client) -> tuple[list[str], list[tuple[str, str, Any]]]:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        answers = []
        for tool in tools:
            if tool not in MCP_DOORS:
                continue
            takes, arguments = MCP_DOORS[tool]
            asked = [a for pair in NAME_PAIRS for a in pair] if takes == "note" else QUERIES
            for words in asked:
                sent = len(llm_server.requests)
                result = await client.call_tool(tool, arguments(words))
                bodies = [r.body for r in llm_server.requests[sent:]]
                answers.append((tool, words, (result, bodies)))
        return tools, answers

    async def main() -> tuple[list[str], list[tuple[str, str, Any]]]:
        with stderr_path.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as c:
                return await steps(c)

    tools, answers = anyio.run(main)
    assert not (new := without_cases(tools, MCP_DOORS)), (
        f"a new tool without a case: {new}; add it to MCP_DOORS"
    )
    problems: list[str] = []
    outcomes: dict[tuple[str, str], Outcome] = {}
    for tool, words, (result, bodies) in answers:
        texts = " ".join(getattr(c, "text", "") for c in result.content)
        answer = [result.structured_content, texts]
        outcome = Outcome(error=Exception(texts)) if result.is_error else Outcome(value=answer)
        outcomes[tool, words] = outcome
        for where, seen in (("answer", answer), ("model request", bodies)):
            if found := exposed(seen, words):
                problems.append(f"{tool}({words!r}): its {where} shows {found}")
    for tool, (takes, _) in MCP_DOORS.items():
        if takes == "note" and tool in tools:
            for name, twin in NAME_PAIRS:
                hidden, missing = outcomes[tool, name], outcomes[tool, twin]
                if problem := same_failure(tool, hidden, missing, name, twin):
                    problems.append(problem)
    everything_asked = [*QUERIES, *(name for pair in NAME_PAIRS for name in pair)]
    if found := exposed(stderr_path.read_text(), *everything_asked):  # it logs what was asked
        problems.append(f"the server's stderr shows {found}")
    assert not problems, "\n".join(problems)


# --- the findings, one test each ----------------------------------------------------------


class TagRetriever:
    """A plug-in to the documented contract: the notes carrying a tag the query names, read
    through the view of the index the request offers its reader."""

    name = "tags"

    def __init__(self) -> None:
        self.requests: list[RetrievalRequest] = []

    def retrieve(self, request: RetrievalRequest) -> list[Hit]:
        self.requests.append(request)
        words = [word.lower().lstrip("#") for word in request.query.split()]
        rows = [row for word in words for row in request.view.notes_matching(None, None, [word])]
        return [Hit(f"note:{note_id}", 1.0) for note_id, _path, _frontmatter in rows]


def plugged_select(ws: Workspace, query: str) -> object:
    """A select with a plug-in retriever attached, which reads what its request offers."""
    ws.add_retriever(TagRetriever())
    return ws.select(query, k=20, use_vectors=False).contract()


@pytest.fixture
def ws(door_vault: Path) -> Iterator[Workspace]:
    with Workspace.open(door_vault, {"embed": False}) as workspace:
        workspace.index()
        yield workspace


def test_a_plug_in_retriever_reads_through_the_reader_s_view_and_never_adds_a_hidden_note(
    ws: Workspace,
) -> None:
    plugin = TagRetriever()
    ws.add_retriever(plugin)
    selection = ws.select(f"{TAG} {PUBLIC_TAG}", k=20, use_vectors=False)
    assert plugin.requests, "the plug-in was never asked"
    assert getattr(plugin.requests[0], "view", None) is not None, (
        "the request offers the plug-in no view of the index: it can read only raw storage"
    )
    assert not selection.diagnostics.get("errors"), selection.diagnostics
    paths = {c.path: c for c in selection.candidates}
    assert "tags" in paths["Apiary.md"].sources  # the plug-in's hit, through the view
    assert not exposed(selection.contract(), TAG)


def test_fusion_drops_a_plug_in_hit_outside_the_reader_s_view(
    ws: Workspace, door_vault: Path
) -> None:
    """A plug-in that reads the index file itself, past any view, still adds nothing hidden:
    fusion keeps only hits inside the reader's view."""
    index = door_vault / ".vaultctx" / "index.db"

    class RawTags:
        name = "tags"

        def retrieve(self, request: RetrievalRequest) -> list[Hit]:
            ids = index_rows(
                index,
                "SELECT DISTINCT note_id FROM tags WHERE tag IN (?, ?)",
                TAG,
                PUBLIC_TAG,
            )
            hidden = Candidate(id="tags:hidden", kind="note", path=HIDDEN, title=TITLE, text=SECRET)
            return [
                *(Hit(f"note:{note_id}", 1.0) for (note_id,) in ids),
                Hit("tags:hidden", 1.0, {"candidate": hidden}),
            ]

    ws.add_retriever(RawTags())
    selection = ws.select(f"{TAG} {PUBLIC_TAG}", k=20, use_vectors=False)
    contract = selection.contract()
    assert "Apiary.md" in {c.path for c in selection.candidates}  # the plug-in's hits count
    assert not exposed(contract, TAG), [(c.path, c.sources) for c in selection.candidates]


def test_the_link_graph_never_lists_a_denied_note(ws: Workspace) -> None:
    graph = ws.graph()
    assert "Orchard.md" in graph and graph.link("Orchard.md", "Apiary.md") is not None
    assert HIDDEN not in graph, sorted(graph)
    assert all(HIDDEN not in (e.source, e.target) for e in graph.links()), list(graph.links())
    assert TITLE not in graph.titles.values()


RESOLVING_DOORS = {
    "python": ("find_note", "resolve_note", "read_note", "touch", "related"),
    "cli": ("open", "related", "touch"),
    "http": ("/related", "/touch"),
    "mcp": ("read_note", "related", "touch"),
}


@pytest.mark.parametrize("family", sorted(RESOLVING_DOORS))
def test_a_hidden_note_named_by_title_alias_or_path_fails_exactly_like_a_missing_one(
    door_vault: Path, family: str
) -> None:
    names = [n for pair in NAME_PAIRS for n in pair]
    answers: dict[tuple[str, str], str] = {}
    if family == "python":
        with Workspace.open(door_vault, {"embed": False}) as ws:
            ws.index()
            for how in RESOLVING_DOORS[family]:
                if not hasattr(ws, how):
                    continue  # a door the Workspace no longer has shows nothing
                options = {"use_vectors": False} if how == "related" else {}
                for n in names:
                    outcome = attempt(lambda h=how, n=n, o=options: getattr(ws, h)(n, **o))
                    answers[how, n] = outcome.failure or f"answered {json.dumps(outcome.value)}"
    elif family == "cli":
        with Workspace.open(door_vault, {"embed": False}) as ws:
            ws.index()
        runner = CliRunner()
        for command in RESOLVING_DOORS[family]:
            extra = ["--no-vectors"] if command == "related" else []
            for n in names:
                done = runner.invoke(cli, [command, n, "-V", str(door_vault), *extra])
                answers[command, n] = f"exit {done.exit_code}: {done.output.strip()}"
    elif family == "http":
        with (
            Workspace.open(door_vault, {"embed": False}) as ws,
            LocalServer(ws, watch=False, warm=False) as server,
        ):
            ws.index()
            for route in RESOLVING_DOORS[family]:
                for n in names:
                    status, _, body = http_call(server, "POST", route, {"note": n})
                    answers[route, n] = f"{status} {json.dumps(body, sort_keys=True)}"
    else:
        with Workspace.open(door_vault, {"embed": False}) as ws:
            ws.index()

        async def steps(client: Client) -> dict[tuple[str, str], str]:
            found = {}
            for tool in RESOLVING_DOORS["mcp"]:
                for n in names:
                    result = await client.call_tool(tool, {"note": n})
                    text = " ".join(getattr(c, "text", "") for c in result.content)
                    found[tool, n] = f"error={result.is_error}: {text}"
            return found

        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "vaultctx", "mcp", str(door_vault), "--no-vectors"],
            env={k: v for k, v in os.environ.items() if k in MCP_ENV},
        )

        async def main() -> dict[tuple[str, str], str]:
            async with Client(params, read_timeout_seconds=60) as client:
                return await steps(client)

        answers = anyio.run(main)
    told_apart = [
        (
            door,
            answers[door, name].replace(name, "<name>"),
            answers[door, twin].replace(twin, "<name>"),
        )
        for door in sorted({door for door, _ in answers})
        for name, twin in NAME_PAIRS
    ]
    assert [t for t in told_apart if t[1] != t[2]] == []
    assert all(not exposed(a, n) for (_, n), a in answers.items())


@pytest.mark.parametrize("processes", [True, False], ids=["child-process", "thread"])
def test_an_agent_tool_asked_by_a_denied_note_pdf_or_canvas_answers_as_for_a_missing_one(
    door_vault: Path, llm_server: LLMServer, model: AgentModel, processes: bool
) -> None:
    pairs = (NAME_PAIRS[0], ("Private/secret.pdf", "Private/absent.pdf"), NAME_PAIRS[-1])
    model.orchestrator.extend(
        [
            Reply(
                tool_calls=tuple(
                    ToolCallReply("read_note", {"path": name}, id=f"{i}-{name}")
                    for i, pair in enumerate(pairs)
                    for name in pair
                )
            ),
            Reply(content="Nothing there."),
        ]
    )
    config = {"embed": False, "agent_processes": processes, **model_config(llm_server)}
    with Workspace.open(door_vault, config) as ws:
        ws.index()
        ws.ask("What does the strongroom ledger say?")
    after = model.seen["orchestrator"][1].messages
    results = {m["tool_call_id"]: m["content"] for m in after if m.get("role") == "tool"}
    for i, (name, twin) in enumerate(pairs):
        hidden, missing = results[f"{i}-{name}"], results[f"{i}-{twin}"]
        assert hidden.replace(name, "<name>") == missing.replace(twin, "<name>"), name
        assert "note_not_found" in hidden and not exposed(hidden, name)


def test_a_write_tool_aimed_at_a_hidden_path_answers_as_where_no_note_is(
    door_vault: Path, llm_server: LLMServer, model: AgentModel
) -> None:
    """Writing needs reading there: creating over a hidden note and creating a new note in
    the hidden folder get the same refusal, and neither file is touched."""
    policy = (door_vault / ".vaultctx" / "permissions.toml").read_text()
    allow_writes = policy.replace("[defaults]\n", '[defaults]\n"vault.write" = "allow"\n')
    (door_vault / ".vaultctx" / "permissions.toml").write_text(allow_writes)
    before = (door_vault / HIDDEN).read_text()
    model.orchestrator.extend(
        [
            Reply(
                tool_calls=(
                    ToolCallReply("create_note", {"path": HIDDEN, "content": "x"}, id="there"),
                    ToolCallReply(
                        "create_note", {"path": "Private/nothing.md", "content": "x"}, id="none"
                    ),
                    ToolCallReply("create_note", {"path": "Inbox.md", "content": "x"}, id="ok"),
                )
            ),
            Reply(content="Done."),
        ]
    )
    with Workspace.open(door_vault, {"embed": False, **model_config(llm_server)}) as ws:
        ws.index()
        ws.ask("File a note in the strongroom.")
    after = model.seen["orchestrator"][1].messages
    results = {m["tool_call_id"]: m["content"] for m in after if m.get("role") == "tool"}
    assert "created" in results["ok"] and "permission_denied" in results["there"]
    assert results["there"].replace(HIDDEN, "<path>") == results["none"].replace(
        "Private/nothing.md", "<path>"
    )
    assert (door_vault / HIDDEN).read_text() == before
    assert not (door_vault / "Private" / "nothing.md").exists()


def readable_counts(status: dict[str, Any]) -> dict[str, Any]:
    keys = ("notes", "blocks", "links", "dangling_links", "tags", "aliases", "languages")
    return {key: status[key] for key in keys}


def test_status_counts_only_what_the_reader_may_see(door_vault: Path, tmp_path: Path) -> None:
    """The oracle: the same vault with only the notes this reader may read in it."""
    seen = {"Orchard.md": (door_vault / "Orchard.md").read_text(), "Apiary.md": APIARY}
    oracle = write_files(tmp_path / "readable", seen)
    with Workspace.open(oracle, {"embed": False}) as readable:
        readable.index()
        expected = readable_counts(readable.status().to_dict())
    with (
        Workspace.open(door_vault, {"embed": False}) as ws,
        LocalServer(ws, watch=False, warm=False) as server,
    ):
        ws.index()
        counted = readable_counts(ws.status().to_dict())
        served = readable_counts(http_call(server, "GET", "/status")[2])
    assert counted == expected
    assert served == expected


def test_a_kinds_filter_on_a_vault_with_a_memory_answers_at_every_door(ws: Workspace) -> None:
    ws.memory.add("The orchard hives moved in May.")
    ws.memory.flush()
    blocks = attempt(lambda: ws.select("orchard", filters={"kinds": ["block"]}, use_vectors=False))
    assert blocks.error is None, blocks.failure
    assert {c["kind"] for c in blocks.value["candidates"]} == {"block"}
    done = CliRunner().invoke(
        cli, ["select", "orchard", "-V", str(ws.root), "--kind", "block", "--no-vectors", "--json"]
    )
    assert done.exit_code == 0, done.output
    with LocalServer(ws, watch=False, warm=False) as server:
        status, _, body = http_call(
            server, "POST", "/select", {"query": "orchard", "kinds": ["note"], "no_vectors": True}
        )
    assert status == 200, body


# --- any vault, any policy, any person ----------------------------------------------------

FOLDERS = ("", "A/", "B/", "A/sub/")
GLOBS = ("A/**", "B/*", "sub/", "n1.md", "**/n2.md", "*.md", "A/n3.md")


DESTINATIONS = ("client", "local_model", "remote_model")
RULE_DESTINATIONS = ((), ("remote_model",), ("local_model", "remote_model"), ("client",))


def may_read(
    path: str,
    rules: Sequence[tuple[str, str, tuple[str, ...]]],
    default: str,
    deny: Sequence[str],
    destination: str = "client",
) -> bool:
    """The oracle, apart from the code under test: a person's deny globs first, then the
    first rule that matches the path (gitignore globs, vault-relative) and names the
    destination (or none), then the default."""
    if deny and pathspec.GitIgnoreSpec.from_lines(deny).match_file(path):
        return False
    for effect, glob, destinations in rules:
        if destinations and destination not in destinations:
            continue
        if pathspec.GitIgnoreSpec.from_lines([glob]).match_file(path):
            return effect == "allow"
    return default == "allow"


@given(
    notes=st.lists(
        st.tuples(st.sampled_from(FOLDERS), st.sampled_from(["n1", "n2", "n3"])),
        min_size=1,
        max_size=6,
        unique=True,
    ),
    links=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=6),
    rules=st.lists(
        st.tuples(
            st.sampled_from(["allow", "deny"]),
            st.sampled_from(GLOBS),
            st.sampled_from(RULE_DESTINATIONS),
        ),
        max_size=3,
    ),
    default=st.sampled_from(["allow", "deny"]),
    deny=st.lists(st.sampled_from(GLOBS), max_size=2, unique=True),
)
@settings(max_examples=25, deadline=None)
def test_for_any_vault_policy_and_person_select_and_the_graph_show_exactly_the_readable_notes(
    tmp_path_factory: pytest.TempPathFactory,
    notes: list[tuple[str, str]],
    links: list[tuple[int, int]],
    rules: list[tuple[str, str, tuple[str, ...]]],
    default: str,
    deny: list[str],
) -> None:
    """Select and `graph()` (a client's view) and the view of each destination a model
    reads through (an agent turn's) hold exactly the notes the oracle lets that reader
    see there."""
    root = tmp_path_factory.mktemp("vault")
    paths = [f"{folder}{name}.md" for folder, name in notes]
    words = {path: f"zebra{i}mark" for i, path in enumerate(paths)}
    targets: dict[str, list[str]] = {path: [] for path in paths}
    for source, target in links:
        targets[paths[source % len(paths)]].append(paths[target % len(paths)][:-3])
    for path in paths:
        linked = " ".join(f"[[{t}]]" for t in targets[path])
        tag = "red" if len(path) % 2 else "blue"
        write_files(root, {path: f"# Orchard\n\nThe {words[path]} lives here. {linked} #{tag}\n"})
    policy = f'[defaults]\n"vault.read" = "{default}"\n\n' + "".join(
        f'[[rules]]\ncapability = "vault.read"\npaths = ["{glob}"]\neffect = "{effect}"\n'
        f"destinations = {json.dumps(list(destinations))}\n\n"
        for effect, glob, destinations in rules
    )
    write_files(root, {".vaultctx/permissions.toml": policy})
    with Workspace.open(root, {"embed": False}) as ws:
        ws.index()
        readers = {"owner": (ws, ()), "person": (ws.for_person(Person("p", tuple(deny))), deny)}
        for reader, (view, globs) in readers.items():
            readable = {p for p in paths if may_read(p, rules, default, globs)}
            shown = set()
            for path, word in words.items():
                found = {c.path for c in view.select(word, k=20, use_vectors=False).candidates}
                assert (path in found) == (path in readable), (reader, word, path)
                shown |= found  # with the notes the just-edited ones link to
            assert shown == readable, reader
            assert set(view.graph()) == readable, reader
            for destination in DESTINATIONS:
                there = {p for p in paths if may_read(p, rules, default, globs, destination)}
                seen = view._view(Destination(destination))
                assert {p for _, p in seen.all_note_paths()} == there, (reader, destination)
                assert set(view._graph(Destination(destination))) == there
