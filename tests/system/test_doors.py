"""The operations every door shares (`vaultctx.operations`), walked against the doors: each
request field is an option of its CLI command, a field its HTTP route takes and a property
of its MCP tool's schema; each door refuses the same out-of-bounds values in the same words;
and the Python API, the CLI (in process and through the warm server), HTTP and MCP give the
same answer to the same request on the example vault."""

from __future__ import annotations

import enum
import json
import os
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import click
import pytest
from click.testing import CliRunner
from mcp.client import Client
from mcp.server import MCPServer
from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from server_helpers import call, run_session
from vaultctx import Workspace
from vaultctx.cli import cli
from vaultctx.cli.common import OperationCommand
from vaultctx.mcp_server import _add_tools
from vaultctx.operations import MODEL_CHOICES, OPERATIONS, Request
from vaultctx.server.app import BODYLESS, create_app
from vaultctx.server.client import route
from vaultctx.server.run import LocalServer

# The value of each field an operation cannot go without, to ask it at all.
REQUIRED = {
    "query": "varroa mites",
    "note": "Varroa Mites",
    "text": "The smoker lives in the shed.",
}
# Operations a door leaves out, and why.
MCP_LEAVES_OUT = {"memory_add": "a client's model would write the user's memory unasked"}
OLD = 1_700_000_000  # every note's mtime: nothing was "edited lately", so answers hold still


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from conftest import EXAMPLE_VAULT, copy_vault

    tmp = tmp_path_factory.mktemp("doors")
    saved = os.environ.get("VAULTCTX_CONFIG_DIR")
    os.environ["VAULTCTX_CONFIG_DIR"] = str(tmp / "config")
    root = copy_vault(EXAMPLE_VAULT, tmp / "vault")
    for note in root.rglob("*.md"):
        os.utime(note, (OLD, OLD))
    (root / ".vaultctx").mkdir(exist_ok=True)
    (root / ".vaultctx" / "config.toml").write_text("embed = false\n")
    with Workspace.open(root) as ws:
        ws.index()
        ws.memory.add("Oxalic acid is trickled in December, when the colony is broodless.")
        ws.memory.flush()
    yield root
    if saved is None:
        os.environ.pop("VAULTCTX_CONFIG_DIR", None)
    else:
        os.environ["VAULTCTX_CONFIG_DIR"] = saved


@pytest.fixture
def config_dir(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VAULTCTX_CONFIG_DIR", str(vault.parent / "config"))


# --- each door, asked one operation -------------------------------------------------------


def cli_commands() -> dict[str, tuple[list[str], click.Command]]:
    """Each operation's CLI command line (its words, and a switch that asks it) and command,
    found by walking the CLI."""
    found: dict[str, tuple[list[str], click.Command]] = {}

    def walk(group: click.Group, words: list[str]) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if isinstance(command, click.Group):
                walk(command, [*words, name])
            elif isinstance(command, OperationCommand):
                found.setdefault(command.operation, ([*words, name], command))
                for flag, operation in command.switches.items():
                    option = next(p for p in command.params if p.name == flag)
                    found.setdefault(operation, ([*words, name, option.opts[-1]], command))

    walk(cli, [])
    return found


def cli_args(command: click.Command, arguments: dict[str, Any]) -> list[str]:
    """The options and arguments that ask `arguments` (a request's JSON fields) of `command`."""
    words: list[str] = []
    for param in command.params:
        if param.name not in arguments:
            continue
        value = arguments[param.name]
        if isinstance(param, click.Argument):
            words.insert(0, str(value))
        elif isinstance(param, click.Option) and param.is_flag:
            words += [param.opts[-1]] if value else []
        elif isinstance(value, dict):
            for key, item in value.items():
                words += [param.opts[-1], f"{key}={item}"]
        else:
            for item in value if isinstance(value, list) else [value]:
                words += [param.opts[-1], str(item)]
    return words


def ask_cli(operation: str, arguments: dict[str, Any], vault: Path) -> click.testing.Result:
    words, command = cli_commands()[operation]
    return CliRunner().invoke(
        cli, [*words, *cli_args(command, arguments), "-V", str(vault), "--json"]
    )


def ask_http(server: LocalServer, operation: str, arguments: dict[str, Any]) -> tuple[int, Any]:
    method, path = BODYLESS.get(operation, ("POST", route(operation)))
    status, _, body = call(server, method, path, arguments if method == "POST" else None)
    return status, body


def mcp_tools() -> dict[str, dict[str, Any]]:
    """Each tool's input schema, as the MCP server lists it."""
    server = MCPServer("vaultctx")
    _add_tools(server, None, use_vectors=False)  # type: ignore[arg-type]  # listed, never called
    return {tool.name: tool.input_schema for tool in anyio.run(server.list_tools)}


def mcp_calls(vault: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each (tool, arguments) called in one MCP session over stdio, in order."""

    async def steps(client: Client) -> list[Any]:
        return [await client.call_tool(tool, arguments) for tool, arguments in calls]

    return run_session(vault, steps)  # type: ignore[return-value]  # what steps returns


def json_fields(request_type: type[Request]) -> dict[str, Any]:
    return {n: REQUIRED[n] for n, f in request_type.model_fields.items() if f.is_required()}


def out_of_bounds(request_type: type[Request]) -> list[tuple[str, Any, str]]:
    """(field, value, the request's own complaint) for a value just past each bound."""
    cases = []
    for name, field in request_type.model_fields.items():
        for bound in field.metadata:
            for limit, step in (("ge", -1), ("le", 1)):
                if hasattr(bound, limit):
                    value = getattr(bound, limit) + step
                    with pytest.raises(ValidationError) as refused:
                        request_type.model_validate({**json_fields(request_type), name: value})
                    cases.append((name, value, refused.value.errors()[0]["msg"]))
    return cases


# --- every field at every door ------------------------------------------------------------


def test_every_operation_is_a_cli_command_an_http_route_and_an_mcp_tool(
    vault: Path, config_dir: None
) -> None:
    commands, tools = cli_commands(), mcp_tools()
    with Workspace.open(vault) as ws:
        routes = {(m, r.path) for r in create_app(ws, token="t").routes for m in r.methods or ()}
    for name in OPERATIONS:
        assert name in commands, f"{name}: no CLI command answers it"
        assert BODYLESS.get(name, ("POST", route(name))) in routes, f"{name}: no HTTP route"
        assert name in tools or name in MCP_LEAVES_OUT, f"{name}: no MCP tool"


def choices(annotation: Any) -> list[str] | None:
    """The values a field of `annotation` takes one of (a Literal or an Enum, also inside
    a list, a tuple or an Optional), as text; None for a field of any value."""
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return sorted(str(member.value) for member in annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return sorted(str(value) for value in typing.get_args(annotation))
    for inner in typing.get_args(annotation):
        found = choices(inner)
        if found is not None:
            return found
    return None


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_an_option_offers_exactly_the_values_its_request_field_takes(operation: str) -> None:
    """The CLI spells its choices out (it imports no pydantic to answer from the warm
    server): they must stay the request's own, e.g. `--kind` the pipeline's candidate kinds."""
    _, command = cli_commands()[operation]
    options = {param.name: param for param in command.params}
    for name, field in OPERATIONS[operation].model_fields.items():
        values = choices(field.annotation)
        if values is None:
            continue
        option_type = options[name].type
        assert isinstance(option_type, click.Choice), f"{command.name} --{name}: no choice"
        assert sorted(map(str, option_type.choices)) == values, f"{command.name} --{name}"


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_every_request_field_is_an_option_a_body_field_and_a_tool_property(
    operation: str, vault: Path, config_dir: None
) -> None:
    request_type = OPERATIONS[operation]
    _, command = cli_commands()[operation]
    options = {param.name for param in command.params}
    tool = mcp_tools().get(operation)
    with Workspace.open(vault) as ws, LocalServer(ws, watch=False, warm=False) as server:
        for name, field in request_type.model_fields.items():
            assert name in options, f"vaultctx {command.name}: no option for {name}"
            if tool is not None and name not in MODEL_CHOICES:
                assert name in tool["properties"], f"MCP {operation}: no property {name}"
            if operation in BODYLESS:
                continue
            value = (
                REQUIRED[name]
                if field.is_required()
                else to_jsonable_python(field.get_default(call_default_factory=True))
            )
            status, body = ask_http(server, operation, {**json_fields(request_type), name: value})
            assert status == 200, f"{route(operation)} with {name}: {status} {body}"
        if operation not in BODYLESS:  # a route that took anything would pass the loop above
            status, body = ask_http(server, operation, {**json_fields(request_type), "colour": 1})
            assert (status, body["error"]) == (422, "ValidationError")


def test_every_door_refuses_a_value_past_a_bound_in_the_same_words(
    vault: Path, config_dir: None
) -> None:
    cases = [
        (operation, field, value, complaint)
        for operation, request_type in OPERATIONS.items()
        for field, value, complaint in out_of_bounds(request_type)
    ]
    assert {(op, field) for op, field, *_ in cases} >= {
        ("select", "k"), ("related", "k"), ("context", "k"), ("memory_search", "k"),
        ("context", "budget"), ("memory_add", "importance"),
    }  # fmt: skip
    tools = mcp_tools()
    asked = [
        (op, {**json_fields(OPERATIONS[op]), field: value})
        for op, field, value, _ in cases
        if op in tools and field in tools[op]["properties"]
    ]
    over_mcp = iter(mcp_calls(vault, [(op, arguments) for op, arguments in asked]))
    problems = []
    for operation, field, value, complaint in cases:
        arguments = {**json_fields(OPERATIONS[operation]), field: value}
        _, command = cli_commands()[operation]
        option = next(p for p in command.params if p.name == field).opts[-1]
        with Workspace.open(vault) as ws:
            for where in ("in process", "through the server"):
                if where == "in process":
                    done = ask_cli(operation, arguments, vault)
                else:
                    with LocalServer(ws, watch=False, warm=False) as server:
                        done = ask_cli(operation, arguments, vault)
                        status, body = ask_http(server, operation, arguments)
                    if (status, body.get("error"), body.get("message")) != (
                        422, "ValidationError", f"{field}: {complaint}",
                    ):  # fmt: skip
                        problems.append(f"HTTP {operation} {field}={value}: {status} {body}")
                if done.exit_code != 2 or complaint not in done.output or option not in done.output:
                    problems.append(
                        f"CLI {where} {operation} {option} {value}: {done.exit_code} {done.output}"
                    )
        if (operation, arguments) in asked:
            result = next(over_mcp)
            text = " ".join(getattr(c, "text", "") for c in result.content)
            if not (result.is_error and complaint in text and field in text):
                problems.append(f"MCP {operation} {field}={value}: {text}")
    assert not problems, "\n".join(problems)


# --- the same answer at every door ---------------------------------------------------------

# In order: the reads first, then the touch that changes what later selects lean towards.
ASKED: list[tuple[str, dict[str, Any]]] = [
    ("select", {"query": "varroa mites treatment", "k": 5, "tags": ["treatment"]}),
    ("select", {"query": "inspection", "k": 4, "path": "Journal", "since": "2023-01-01"}),
    ("select", {"query": "queen", "kinds": ["block"], "explain": True}),
    ("related", {"note": "Varroa Mites", "k": 4}),
    ("context", {"query": "when to treat for varroa", "budget": 400, "k": 8}),
    ("memory_search", {"query": "oxalic acid", "k": 3}),
    ("focus", {}),
    ("touch", {"note": "Smoker", "kind": "open"}),
]


def steady(answer: Any) -> Any:
    """An answer without what differs between two askings: timings, the server's pid, and
    past the third decimal a memory's recency, which fades as the seconds pass."""
    if isinstance(answer, dict):
        return {
            k: steady(v)
            for k, v in answer.items()
            if not k.endswith("_ms") and k not in ("server_pid", "took_ms")
        }
    if isinstance(answer, list):
        return [steady(v) for v in answer]
    return round(answer, 3) if isinstance(answer, float) else answer


def test_the_python_api_the_cli_http_and_mcp_give_the_same_answer(
    vault: Path, config_dir: None
) -> None:
    """Each request is asked of every door in turn, so a touch changes none of the others."""
    with Workspace.open(vault) as ws:
        ws.clear_focus()  # what the tests before this one opened
    tools = mcp_tools()
    over_mcp = {
        i: answer
        for i, answer in zip(
            [i for i, (op, _) in enumerate(ASKED) if op in tools],
            mcp_calls(vault, [(op, a) for op, a in ASKED if op in tools]),
            strict=True,
        )
    }
    # MCP answered first, in its own process: its touch is undone before the others ask.
    with Workspace.open(vault) as ws:
        ws.clear_focus()
    problems = []
    for i, (operation, arguments) in enumerate(ASKED):
        request = OPERATIONS[operation].model_validate(arguments)
        with Workspace.open(vault) as ws:
            python = steady(request.answer(ws))
            answers = {"MCP": over_mcp[i].structured_content}
            in_process = ask_cli(operation, arguments, vault)
            assert in_process.exit_code == 0, in_process.output
            answers["CLI"] = json.loads(in_process.output)
            with LocalServer(ws, watch=False, warm=False) as server:
                status, answers["HTTP"] = ask_http(server, operation, arguments)
                assert status == 200, answers["HTTP"]
                served = ask_cli(operation, arguments, vault)
                assert served.exit_code == 0, served.output
                answers["CLI through the server"] = json.loads(served.output)
        assert python.get("candidates", python.get("items", python.get("memories", [1])))
        for door, answer in answers.items():
            if steady(answer) != python:
                problems.append(
                    f"{operation} {arguments}: {door} answered {steady(answer)}, the Python API"
                    f" {python}"
                )
    assert not problems, "\n".join(problems)
