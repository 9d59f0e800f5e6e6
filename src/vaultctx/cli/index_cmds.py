"""`vaultctx index` and `vaultctx status`."""

from __future__ import annotations

from collections.abc import Callable

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from ..errors import NotIndexed
from ..storage.vault import IndexStatus
from . import cli
from .common import json_option, open_workspace, vault_argument
from .output import console, emit_json, err_console, human_bytes, warn

# Each phase of an index run the bar shows: its label and what it counts.
PHASES = {
    "parse": ("Reading notes", "notes"),
    "embed": ("Embedding blocks", "blocks"),
    "reembed": ("Embedding for the new model", "blocks"),
}


class RateColumn(ProgressColumn):
    """Items per second of a phase (`unit` per second), once rich has measured it."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        if speed is None:
            return Text("")
        return Text(f"{speed:,.1f} {task.fields.get('unit', '')}/s", style="progress.data.speed")


def index_progress(console: Console, get_time: Callable[[], float] | None = None) -> Progress:
    """The bar of `vaultctx index`: per phase, done of total, its rate, time spent and left."""
    return Progress(
        TextColumn("{task.description:<18}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        get_time=get_time,
    )


def phases(bar: Progress) -> Callable[[str, int, int], None]:
    """The indexer's `progress(phase, done, total)`, drawn on `bar`."""
    tasks: dict[str, TaskID] = {}

    def progress(phase: str, done: int, total: int) -> None:
        if phase not in PHASES:
            return
        if phase not in tasks:
            label, unit = PHASES[phase]
            tasks[phase] = bar.add_task(label, total=total, unit=unit)
        bar.update(tasks[phase], completed=done, total=total)

    return progress


@cli.command()
@vault_argument
@click.option("--no-embed", is_flag=True, help="Index text and links only, no embeddings.")
@click.option(
    "--from-database",
    is_flag=True,
    help="First replace the local SQLite index with the database's (database_url), vectors"
    " included: the way back from PostgreSQL.",
)
@json_option
def index(vault: str, no_embed: bool, from_database: bool, as_json: bool) -> None:
    """Index VAULT (default: the vault the current folder is in, else the current folder);
    only changed notes are re-read. With `database_url` set, what changed is then published
    to that PostgreSQL database."""
    with open_workspace(vault, create=True) as ws:
        if from_database:
            restored = ws.restore_from_database()
            if not as_json:
                console.print(f"Restored {restored} notes from the database.")
        show_progress = not as_json and err_console.is_terminal
        if show_progress:
            with index_progress(err_console) as bar:
                report = ws.index(embed=False if no_embed else None, progress=phases(bar))
        else:
            report = ws.index(embed=False if no_embed else None)
        status = ws.status()
    if as_json:
        emit_json({**report.to_dict(), "status": status.to_dict()})
        return
    for path, reason in report.skipped:
        warn(f"skipped {escape(path)}: {escape(reason)}")
    for path, message in report.warnings:
        warn(f"{escape(path)}: {escape(message)}")
    if report.embed_error:
        warn(f"embeddings not computed: {escape(report.embed_error)}")
    if not status.notes:
        console.print(
            f"No notes found in {escape(status.vault)}: vaultctx indexes the Markdown (.md)"
            " files of a folder and its subfolders.",
            soft_wrap=True,
        )
        return
    console.print(
        f"Indexed [bold]{status.notes}[/] notes in {report.elapsed_ms / 1000:.2f}s: "
        f"{report.added} added, {report.updated} updated, {report.renamed} renamed, "
        f"{report.deleted} deleted, {report.unchanged} unchanged; "
        f"{report.blocks_written} blocks written, {report.embedded} embedded."
    )
    if report.switched_to:
        console.print(
            f"Switched to {escape(report.switched_to)}: {report.reembedded} blocks embedded"
            " for it, its vectors answer from now on."
        )
    elif status.pending_model:
        console.print(switch_line(status))
    if report.published is not None:
        published = report.published
        console.print(
            f"Published to the database{' (everything)' if published['full'] else ''}:"
            f" {published['notes_written']} notes written, {published['notes_deleted']} deleted,"
            f" {published['vectors']} vectors copied in {published['elapsed_ms'] / 1000:.2f}s;"
            f" {published['memories']} memories shared"
            f"{f', {moved} sessions moved in' if (moved := published['sessions']) else ''}."
        )
    console.print(
        f"{status.blocks} blocks, {status.links} links ({status.dangling_links} dangling), "
        f"{status.tags} tags, {status.vectors} vectors · {human_bytes(status.index_bytes)}"
    )
    if status.model_suggestion:
        console.print(f"Suggestion: {escape(status.model_suggestion)}", soft_wrap=True)


@cli.command()
@vault_argument
@json_option
def status(vault: str, as_json: bool) -> None:
    """Show what the index of VAULT holds."""
    try:
        with open_workspace(vault) as ws:
            st = ws.status()
    except NotIndexed:
        st = IndexStatus.never_indexed(vault)
    if as_json:
        emit_json(st.to_dict())
        return
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("vault", st.vault),
        ("index", st.index_path),
        ("notes", str(st.notes)),
        ("blocks", str(st.blocks)),
        ("links", str(st.links)),
        ("dangling links", str(st.dangling_links)),
        ("tags", str(st.tags)),
        ("aliases", str(st.aliases)),
        ("vectors", str(st.vectors)),
        ("model", st.model or "—"),
        *((("switching to", switch_line(st)),) if st.pending_model else ()),
        ("index size", human_bytes(st.index_bytes)),
        ("last indexed", st.last_indexed or "never"),
        ("notes with problems", str(st.notes_with_problems)),
        *(("", line) for line in problem_lines(st)),
        (
            "languages",
            ", ".join(f"{lang or 'too short to tell'} {n}" for lang, n in st.languages.items())
            or "—",
        ),
    ]
    if st.model_suggestion:
        rows.append(("suggestion", st.model_suggestion))
    if st.watch_error:
        rows.append(("watcher error", f"{st.watch_error_at}: {st.watch_error}"))
    for key, value in rows:
        table.add_row(key, escape(value))
    console.print(table)


def switch_line(st: IndexStatus) -> str:
    """How far the index is in switching to its pending model."""
    share = st.pending_vectors / st.blocks if st.blocks else 0.0
    return (
        f"{st.pending_model}: {st.pending_vectors} of {st.blocks} blocks embedded"
        f" ({share:.0%}); {st.model} answers until then"
    )


def problem_lines(st: IndexStatus) -> list[str]:
    """Each note with problems that `st` names, as "path: its first problem", then how many
    more there are."""
    lines = []
    for note in st.problem_notes:
        first, *others = note["problems"] or ["?"]
        lines.append(f"{note['path']}: {first}" + (f" (+{len(others)} more)" if others else ""))
    if st.notes_with_problems > len(st.problem_notes):
        lines.append(f"… and {st.notes_with_problems - len(st.problem_notes)} more notes")
    return lines
