"""`vaultctx memory list|search|add|forget|export|import`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table

from ..errors import ConfigError
from . import cli
from .common import (
    OperationCommand,
    json_option,
    open_workspace,
    parse_request,
    request_arguments,
    vault_option,
)
from .output import console, emit_json, warn

if TYPE_CHECKING:
    from ..workspace import Memory

TIERS = click.Choice(["conversation", "channel", "workspace", "account"])
KINDS = click.Choice(["semantic", "episodic", "procedural"])


def tier_options(fn):
    fn = click.option("--scope", help="Session, channel, vault or user id (default: this one).")(fn)
    return click.option("--tier", type=TIERS, help="Only this tier.")(fn)


@cli.group()
def memory() -> None:
    """Inspect and edit the tiered memory of a vault and its user."""


@memory.command("list")
@vault_option
@tier_options
@click.option("--kind", type=KINDS, help="Only this kind.")
@click.option("-n", "--limit", default=50, show_default=True, help="At most this many.")
@json_option
def list_(vault: str, tier: str | None, scope: str | None, kind: str | None, limit: int,
          as_json: bool) -> None:  # fmt: skip
    """List memories, newest first."""
    with open_workspace(vault) as ws:
        memories = ws.memory.list(tier=tier, scope=scope, kind=kind, limit=limit)
    if as_json:
        emit_json([m.to_dict() for m in memories])
    else:
        render(memories, title="memories")


@memory.command(cls=OperationCommand, operation="memory_search")
@click.argument("query")
@vault_option
@tier_options
@click.option("-k", "--k", "k", default=10, show_default=True, help="Memories to return.")
@click.option("--session", help="Also see this conversation's memories.")
@click.option("--channel", help="Also see this channel's memories.")
@json_option
def search(vault: str, as_json: bool, **options: Any) -> None:
    """Rank memories for QUERY: token recall + embeddings, importance, recency."""
    request = parse_request("memory_search", request_arguments(options))
    with open_workspace(vault) as ws:
        memories = request.run(ws)
    if as_json:
        emit_json(request.respond(memories))
    else:
        render(memories, title=f"memory search: {options['query']}", scores=True)


@memory.command(cls=OperationCommand, operation="memory_add")
@click.argument("text")
@vault_option
@click.option(
    "--tier", type=TIERS, default="workspace", show_default=True, help="The tier it is kept in."
)
@click.option("--scope", help="Session or channel id (needed for those tiers).")
@click.option("--kind", type=KINDS, help="Default: semantic (episodic for a turn).")
@click.option("--importance", type=float, help="Default: a heuristic.")
@click.option("--speaker", help="TEXT is a turn this person said in a conversation.")
@click.option("--session", help="The conversation session the turn belongs to.")
@click.option("--turn", help="The turn's id in its session.")
@click.option("--at", "created_at", help="When it was said or learnt (ISO 8601; default now).")
@json_option
def add(vault: str, as_json: bool, **options: Any) -> None:
    """Remember TEXT (merged into an existing memory if it says the same). With --speaker
    or --session, TEXT is a conversation turn: its facts, the exchange with the turn before
    it and the session's arc are remembered too, as for a chat turn."""
    request = parse_request("memory_add", request_arguments(options))
    with open_workspace(vault, create=True) as ws:
        mem = request.run(ws)
    if as_json:
        emit_json(request.respond(mem))
    else:
        console.print(f"remembered [bold]{mem.id}[/] ({mem.tier.value}, {mem.kind.value})")


@memory.command()
@click.argument("ids", nargs=-1, required=True)
@vault_option
@click.option("--soft", is_flag=True, help="Only hide them; default erases them for good.")
@json_option
def forget(ids: tuple[str, ...], vault: str, soft: bool, as_json: bool) -> None:
    """Forget memories by id: the row, its indexed text and its vector are erased."""
    with open_workspace(vault) as ws:
        count = ws.memory.forget(ids, soft=soft)
    if as_json:
        emit_json({"forgotten": count, "soft": soft})
    else:
        console.print(f"forgot {count} of {len(ids)} memories")


@memory.command()
@vault_option
@tier_options
@click.option(
    "-o",
    "--output",
    type=click.File("w", encoding="utf-8"),
    default="-",
    help="The file to write (default: standard output).",
)
def export(vault: str, tier: str | None, scope: str | None, output) -> None:
    """Write memories as JSON lines (oldest first), for backup or another machine."""
    with open_workspace(vault) as ws:
        records = ws.memory.export(tier=tier, scope=scope)
    for record in records:
        output.write(json.dumps(record, ensure_ascii=False) + "\n")


@memory.command("import")
@click.argument("source", type=click.File("rb"), default="-")
@vault_option
@json_option
def import_(source, vault: str, as_json: bool) -> None:
    """Read memories from JSON lines (as `export` writes); existing ids are updated.

    A line that is not a valid memory is reported (one warning each, by line number) and
    left out; the others are imported. Fails only when lines were given and none could be
    imported."""
    numbers, records, skipped = [], [], []
    for number, raw in enumerate(source, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            skipped.append((number, f"not UTF-8 at byte {exc.start}"))
        except json.JSONDecodeError as exc:
            skipped.append((number, f"not JSON: {exc.msg} at character {exc.pos + 1}"))
        except RecursionError:
            skipped.append((number, "not JSON: nested too deeply"))
        else:
            numbers.append(number)
            records.append(record)
    report = None
    if records:
        with open_workspace(vault, create=True) as ws:
            report = ws.memory.import_(records)
        skipped += [(numbers[i - 1], why) for i, why in report.rejected]
        skipped.sort()
    imported = report.imported if report else 0
    for number, why in skipped:
        warn(f"line {number}: {escape(why)}; not imported")
    if skipped and not imported:
        raise ConfigError(f"no memory imported: every one of {len(skipped)} lines was invalid")
    if as_json:
        emit_json({"imported": imported, "skipped": [{"line": n, "error": w} for n, w in skipped]})
    else:
        also = f", {len(skipped)} lines skipped" if skipped else ""
        console.print(f"imported {imported} memories{also}")


def render(memories: list[Memory], *, title: str, scores: bool = False) -> None:
    table = Table(title=escape(title), title_justify="left", expand=console.is_terminal)
    table.add_column("id", style="dim", no_wrap=True)
    table.add_column("tier", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("created", no_wrap=True)
    table.add_column("text", ratio=5, overflow="fold")
    if scores:
        table.add_column("score", justify="right", no_wrap=True)
    for m in memories:
        row = [m.id, m.tier.value, m.kind.value, m.to_dict()["created_at"][:10], escape(m.text)]
        if scores:
            row.append(f"{m.score:.3f}")
        table.add_row(*row)
    console.print(table)
