"""`vaultctx audit`: the model requests recorded in the vault's audit log, newest first."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import click
from rich.markup import escape

from ..errors import VaultNotFound
from . import cli
from .common import json_option, vault_option
from .output import console, emit_json


@cli.command()
@vault_option
@click.option(
    "-n", "--limit", default=20, show_default=True, type=click.IntRange(min=0), help="At most."
)
@json_option
def audit(vault: str, limit: int, as_json: bool) -> None:
    """Every model request, newest first: which model where, what for, which notes and
    blocks it held, under which rule, and its tokens. The log keeps no note text."""
    from ..config import load_config
    from ..storage.audit import AuditLog
    from ..storage.vault import index_dir

    root = Path(vault).expanduser()
    if not root.is_dir():
        raise VaultNotFound(f"vault not found: {root}")
    root = root.resolve()
    entries = AuditLog.of(index_dir(root, load_config(root))).recent(limit)
    if as_json:
        emit_json([entry.to_dict() for entry in entries])
        return
    if not entries:
        console.print("[dim]no model requests recorded[/]")
        return
    for entry in entries:
        when = _dt.datetime.fromtimestamp(entry.time).astimezone().isoformat(timespec="seconds")
        where = escape(entry.model) + (f" at {escape(entry.api_base)}" if entry.api_base else "")
        console.print(
            f"[bold]{when}[/] {escape(entry.purpose)} → {where} [cyan]({entry.destination})[/]"
            f" · {entry.tokens_in} in / {entry.tokens_out} out · {entry.outcome}",
            soft_wrap=True,
        )
        for note in entry.notes:
            blocks = len(note.blocks)
            detail = [f"{blocks} block{'s' * (blocks != 1)}"] if blocks else []
            detail += [escape(note.rule)] if note.rule else []
            console.print(f"    {escape(note.path)}  [dim]{' · '.join(detail)}[/]", soft_wrap=True)
