"""`vaultctx team add|revoke|list|log`: the people a server over PostgreSQL answers."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from ..errors import ConfigError
from . import cli
from .common import json_option, open_workspace, vault_option
from .output import console, emit_json


@cli.group()
def team() -> None:
    """The people a server over PostgreSQL answers: a token each, notes hidden from each."""


@team.command()
@click.argument("name")
@click.option("--deny", multiple=True, help="Vault paths (gitignore globs) hidden from them.")
@vault_option
@json_option
def add(name: str, deny: tuple[str, ...], vault: str, as_json: bool) -> None:
    """Add NAME and print their token: it is shown this once."""
    with open_workspace(vault) as ws:
        token = ws.team.add(name, deny)
    if as_json:
        emit_json({"name": name, "token": token, "deny": list(deny)})
        return
    console.print(f"Added {escape(name)}. Their token (shown only now):")
    console.print(token, soft_wrap=True, highlight=False)


@team.command()
@click.argument("name")
@click.option(
    "--forget",
    is_flag=True,
    help="Also erase NAME's own memories: from the database and this host's copy at once,"
    " from other servers' copies as they next start.",
)
@vault_option
@json_option
def revoke(name: str, forget: bool, vault: str, as_json: bool) -> None:
    """Stop NAME's token at once."""
    with open_workspace(vault) as ws:
        revoked = ws.team.revoke(name, forget=forget)
        if forget:
            ws.forget_departed()
    if not revoked:
        raise ConfigError(f"{name} holds no token to revoke" + (" nor memories" if forget else ""))
    if as_json:
        emit_json({"name": name, "revoked": True, "forgotten": forget})
    else:
        erased = " and erased their memories" if forget else ""
        console.print(f"Revoked {escape(name)}'s token{erased}.")


@team.command("list")
@vault_option
@json_option
def list_(vault: str, as_json: bool) -> None:
    """Everyone on the team, with what is hidden from them."""
    with open_workspace(vault) as ws:
        people = ws.team.people()
    if as_json:
        emit_json([vars(p) | {"deny": list(p.deny)} for p in people])
        return
    table = Table("name", "hidden from them", "added", "revoked")
    for p in people:
        table.add_row(escape(p.name), escape(", ".join(p.deny)), p.created_at, p.revoked_at or "")
    console.print(table)


@team.command()
@click.option("--person", help="Only their requests.")
@click.option("-n", "--limit", default=50, show_default=True, help="At most this many.")
@vault_option
@json_option
def log(person: str | None, limit: int, vault: str, as_json: bool) -> None:
    """The latest requests the team's servers answered, and who made each. Anyone can send
    a request: its text is shown with control characters escaped (`\\x1b`), never run."""
    with open_workspace(vault) as ws:
        rows = ws.team.requests(limit, person)
    if as_json:
        emit_json(rows)
        return
    table = Table("at", "who", "request", "status", "ms", "server")
    for r in rows:
        table.add_row(
            r["at"], escape(r["person"]), escape(f"{r['method']} {r['path']}"),
            str(r["status"]), f"{r['ms']:.1f}", escape(r["server"]),
        )  # fmt: skip
    console.print(table)
