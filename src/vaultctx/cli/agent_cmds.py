"""`vaultctx ask`, `vaultctx chat` and `vaultctx sessions`: agent turns and their logs."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.markup import escape

from ..errors import VaultctxError
from . import cli, output
from .common import json_option, open_workspace, vault_option
from .output import emit_json


def make_asker(yes: bool) -> Any:
    """`--yes` allows every `ask`; a terminal asks the person; otherwise `ask` is a denial."""
    if yes:
        return lambda capability, resource: True
    if not sys.stdin.isatty():
        return None
    return lambda capability, resource: click.confirm(
        f"Allow {capability} on {resource}?", default=False, err=True
    )


def show_activity(kind: str, data: dict[str, Any]) -> None:
    """One live line per tool call on stderr."""
    console = output.err_console
    if kind == "tool_call":
        arguments = escape(json.dumps(data["arguments"], ensure_ascii=False))
        console.print(f"[dim]{data['agent']} →[/] [cyan]{data['name']}[/] [dim]{arguments}[/]")
        return
    result = data["output"]
    if "error" in result:
        detail = escape(str(result.get("reason") or result.get("message") or ""))
        console.print(
            f"[dim]{data['agent']} ←[/] [red]{data['name']}: {result['error']}[/] {detail}"
        )
    else:
        console.print(f"[dim]{data['agent']} ← {data['name']}: ok[/]")


def render_turn(result: Any) -> None:
    console = output.console
    console.print(escape(result.answer), soft_wrap=True)
    if result.citations:
        console.print("\n[bold]Sources:[/] " + ", ".join(escape(p) for p in result.citations))
    tokens = sum(t.total_tokens for t in result.traces)
    console.print(
        f"[dim]session {result.session_id} · {len(result.traces)} model call(s) · "
        f"{tokens} tokens[/]"
    )


@cli.command()
@click.argument("question")
@vault_option
@click.option("--model", help="litellm model, provider/model or provider:model.")
@click.option("--session", "session_id", help="Continue this session.")
@click.option("--yes", is_flag=True, help="Allow every permission the policy would ask for.")
@json_option
def ask(
    question: str, vault: str, model: str | None, session_id: str | None, yes: bool, as_json: bool
) -> None:
    """Answer QUESTION from the vault in one agent turn, citing notes."""
    report_turn(
        vault,
        as_json,
        lambda ws: ws.ask(
            question,
            session_id=session_id,
            model=model,
            asker=make_asker(yes),
            on_event=None if as_json else show_activity,
        ),
    )


def report_turn(vault: str, as_json: bool, turn: Callable[[Any], Any]) -> None:
    """Run one turn on the vault's workspace and print it; with --json an error, too, is one
    JSON object on stdout (and the exit code says which)."""
    try:
        with open_workspace(vault) as ws:
            result = turn(ws)
    except VaultctxError as exc:
        if not as_json:
            raise
        emit_json({"error": {"type": type(exc).__name__, "message": str(exc)}})
        sys.exit(exc.exit_code)
    if as_json:
        emit_json(result.to_dict())
    else:
        render_turn(result)


@cli.command()
@vault_option
@click.option("--model", help="litellm model, provider/model or provider:model.")
@click.option("--session", "session_id", help="Resume this session.")
@click.option("--yes", is_flag=True, help="Allow every permission the policy would ask for.")
def chat(vault: str, model: str | None, session_id: str | None, yes: bool) -> None:
    """Talk with the vault, one turn per line, until end of input or /exit."""
    interactive = sys.stdin.isatty()
    asker = make_asker(yes)
    with open_workspace(vault) as ws:
        while True:
            if interactive:
                output.err_console.print("[bold]you>[/] ", end="")
            line = sys.stdin.readline()
            if not line or line.strip() == "/exit":
                break
            if not line.strip():
                continue
            result = ws.ask(
                line.strip(), session_id=session_id, model=model, asker=asker,
                on_event=show_activity,
            )  # fmt: skip
            session_id = result.session_id
            render_turn(result)


@cli.group()
def sessions() -> None:
    """List and show agent sessions (JSONL files under .vaultctx/sessions/, or the team's
    database with database_url)."""


@sessions.command("list")
@vault_option
@json_option
def sessions_list(vault: str, as_json: bool) -> None:
    """Every session of the vault, most recent first."""
    with open_workspace(vault) as ws:
        found = ws.sessions()
    if as_json:
        emit_json({"sessions": [s.to_dict() for s in found]})
        return
    for s in found:
        output.console.print(
            f"[bold]{s.id}[/]  [dim]{s.updated or '?'} · {s.turns} turn(s)[/]  "
            f"{escape(s.first_question[:80])}"
        )


@sessions.command("show")
@click.argument("session_id")
@vault_option
@json_option
def sessions_show(session_id: str, vault: str, as_json: bool) -> None:
    """Every row of session SESSION_ID: messages, tool calls and results, traces."""
    with open_workspace(vault) as ws:
        rows = ws.session(session_id)
    if as_json:
        emit_json({"id": session_id, "rows": rows})
        return
    console = output.console
    for row in rows:
        kind = row.get("type")
        if kind == "message":
            debug = " [dim](system prompt)[/]" if (row.get("metadata") or {}).get("debug") else ""
            console.print(f"[bold]{row.get('role')}[/]{debug}: {escape(str(row.get('content')))}")
        elif kind == "tool_call":
            console.print(
                f"[cyan]{row['agent']} → {row['name']}[/] {escape(json.dumps(row['arguments']))}"
            )
        elif kind == "tool_result":
            console.print(
                f"[cyan]{row['agent']} ← {row['name']}[/] {escape(json.dumps(row['output']))[:300]}"
            )
        elif kind == "completion_trace":
            console.print(
                f"[dim]trace {row['agent']} #{row['invocation']}: {row['outcome']}, "
                f"{row['total_tokens']} tokens, {row['latency_ms']} ms — "
                f"{escape(row['summary'])}[/]"
            )
