"""`vaultctx context` (select, then refine to a budget) and `vaultctx config`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from ..config import Config, config_path, config_sources, load_config, save_config_values
from ..errors import ConfigError, VaultNotFound
from . import cli
from .common import (
    OperationCommand,
    answer,
    json_option,
    open_workspace,
    parse_request,
    request_arguments,
    vault_option,
)
from .output import console, emit_json
from .select_cmds import filter_options

if TYPE_CHECKING:
    from ..operations import ContextRequest
    from ..workspace import SessionContext


@cli.command(cls=OperationCommand, operation="context")
@click.argument("query")
@vault_option
@click.option(
    "--budget", type=int, help="Token budget of the context (default: config budget_tokens)."
)
@click.option(
    "--model", help="litellm model for the gate, e.g. openai/gpt-4o-mini (default: llm_model)."
)
@click.option("-k", "--k", "k", default=30, show_default=True, help="Candidates select proposes.")
@click.option("--no-vectors", is_flag=True, help="Lexical and graph only: never loads the model.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the request the gate would send to the model (as JSON), and send nothing.",
)
@filter_options
@json_option
def context(vault: str, dry_run: bool, as_json: bool, **options: Any) -> None:
    """The context an agent would get for QUERY: select, then trim to the token budget.

    Uses a `vaultctx serve` running for the vault when there is one, else runs in-process.
    """
    arguments = request_arguments(options)
    if dry_run:
        request = cast("ContextRequest", parse_request("context", arguments))
        with open_workspace(vault) as ws:
            emit_json(ws.gate_request(request.query, **request.arguments()))
        return
    contract = answer(vault, "context", arguments)
    if as_json:
        emit_json(contract)
        return
    from ..workspace import SessionContext  # pydantic: only to render

    render_context(SessionContext.model_validate(contract))


def render_context(session: SessionContext) -> None:
    console.print(f"[bold]context:[/] {escape(session.query)}")
    for rank, item in enumerate(session.items, start=1):
        where = escape(item.path or item.kind)
        heading = item.heading_path or item.heading
        title = f"[bold cyan]{rank}. {where}[/]" + (f" › {escape(heading)}" if heading else "")
        lines = ""
        if item.start_line is not None:
            lines = f" · lines {item.start_line}–{item.end_line}"
        subtitle = f"[dim]{item.tokens} tokens{lines} · {escape(item.reason)}[/]"
        console.print(
            Panel(
                escape(item.text.strip()),
                title=title,
                title_align="left",
                subtitle=subtitle,
                subtitle_align="left",
                expand=console.is_terminal,
            )
        )
    if not session.items:
        console.print("[dim]nothing selected for this query[/]")
    d = session.diagnostics
    gate = session.gate + (f" ({escape(session.gate_reason)})" if session.gate_reason else "")
    spent = ""
    if d.get("tokens_in") or d.get("tokens_out"):
        spent = f" · model {escape(str(d.get('model')))} {d['tokens_in']}+{d['tokens_out']} tokens"
    console.print(
        f"[dim]{session.token_count}/{session.budget} tokens · {len(session.items)} items · "
        f"gate {gate}{spent} · select {d.get('select_ms') or 0:.1f} ms · "
        f"refine {d.get('refine_ms') or 0:.1f} ms · hash {session.context_hash}[/]"
    )


@cli.command("config")
@click.argument("key", required=False)
@click.argument("value", required=False)
@click.option("--unset", "unset_key", metavar="KEY", help="Remove KEY from the config file.")
@vault_option
@json_option
def config_command(
    key: str | None, value: str | None, unset_key: str | None, vault: str, as_json: bool
) -> None:
    """Show the effective settings, or show KEY, or set KEY to VALUE in the vault's
    config file (.vaultctx/config.toml). Environment variables VAULTCTX_<KEY> override it."""
    root = Path(vault).expanduser()
    if not root.is_dir():
        raise VaultNotFound(f"vault not found: {root}")
    if key is not None and key not in Config.model_fields:
        raise ConfigError(f"unknown config key {key!r}; known: {', '.join(Config.keys())}")
    if unset_key is not None:
        save_config_values(root, {unset_key: None})
    if key is not None and value is not None:
        save_config_values(root, {key: value})
    config = load_config(root)
    sources = config_sources(root)
    settings = config.model_dump(mode="json")
    if key is not None:
        if as_json:
            emit_json({"key": key, "value": settings[key], "source": sources[key]})
        elif value is not None:
            console.print(f"set {key} = {escape(str(settings[key]))} in {config_path(root)}")
        else:
            console.print(escape(str(settings[key])))
        return
    if as_json:
        emit_json({"config_path": str(config_path(root)), "settings": settings, "sources": sources})
        return
    table = Table(title=escape(str(config_path(root))), title_justify="left")
    table.add_column("key", style="bold")
    table.add_column("value")
    table.add_column("from", style="dim")
    table.add_column("meaning", style="dim")
    for name, field in Config.model_fields.items():
        table.add_row(name, escape(str(settings[name])), sources[name], field.description or "")
    console.print(table)
