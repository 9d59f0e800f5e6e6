"""`vaultctx select`, `vaultctx open`, `vaultctx touch` and `vaultctx focus`."""

from __future__ import annotations

import contextlib
import copy
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from ..errors import InvalidQuery, NoteNotFound
from . import cli, output
from .common import (
    OperationCommand,
    answer,
    json_option,
    open_workspace,
    parse_request,
    request_arguments,
    vault_option,
)
from .output import emit_json

if TYPE_CHECKING:
    from rich.text import Text

    from ..workspace import Selection, Workspace

# rich, pydantic and numpy are imported inside the functions that need them: a `--json`
# query answered by a warm server must not pay for them.


def filter_options(fn):
    """--path/--tag/--field/--since/--until/--kind, shared by select and context: the
    request's filter fields (`operations.FilterFields`)."""
    options = [
        click.option("--path", help="Folder or glob over note paths."),
        click.option("--tag", "tags", multiple=True, help="Only notes with this tag (repeat)."),
        click.option(
            "--field",
            "fields",
            multiple=True,
            metavar="KEY=VALUE",
            callback=lambda ctx, param, value: parse_fields(value),
            help="Frontmatter field.",
        ),
        click.option("--since", type=click.DateTime(), help="Modified on or after this date."),
        click.option("--until", type=click.DateTime(), help="Modified before this date."),
        click.option(
            "--kind",
            "kinds",
            multiple=True,
            type=click.Choice(["block", "note", "memory"]),
            help="Candidate kinds to keep.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def parse_fields(fields: tuple[str, ...]) -> dict[str, str]:
    """--field KEY=VALUE options as a dict."""
    frontmatter = {}
    for field in fields:
        key, sep, value = field.partition("=")
        if not sep or not key.strip():
            raise InvalidQuery(f"--field expects KEY=VALUE, got {field!r}")
        frontmatter[key.strip()] = value.strip()
    return frontmatter


@cli.command(cls=OperationCommand, operation="select")
@click.argument("query")
@vault_option
@click.option("-k", "--k", "k", default=10, show_default=True, help="Candidates to return.")
@click.option("--no-vectors", is_flag=True, help="Lexical and graph only: never loads the model.")
@click.option("--explain", is_flag=True, help="Show the FTS query, graph seeds and ranks.")
@filter_options
@json_option
def select(vault: str, as_json: bool, **options: Any) -> None:
    """Rank the vault's blocks for QUERY (FTS5 + vectors + link graph, fused).

    Uses a `vaultctx serve` running for the vault when there is one, else answers in-process.
    """
    contract = answer(vault, "select", request_arguments(options))
    if as_json:
        emit_json(contract)
        return
    from ..workspace import Selection  # pydantic: only to render

    selection = Selection.model_validate(contract)
    name = click.get_current_context().info_name
    render_selection(
        selection,
        title=f"{name}: {selection.query}",
        empty=f"No results for {options['query']!r}.",
    )


# The name people reach for: the same command (callback, options, output) under a second name.
search = copy.copy(select)
search.name = "search"
search.short_help = "Search the vault for QUERY: the same command as `select`."
cli.add_command(search)


@cli.command(cls=OperationCommand, operation="related")
@click.argument("note")
@vault_option
@click.option("-k", "--k", "k", default=10, show_default=True, help="Notes to return.")
@click.option("--no-vectors", is_flag=True, help="Lexical and graph only: never loads the model.")
@click.option("--explain", is_flag=True, help="Show the FTS query, graph seeds and ranks.")
@click.option("--touch", is_flag=True, help="Record NOTE as open first, as an editor does.")
@json_option
def related(vault: str, as_json: bool, **options: Any) -> None:
    """The notes that matter for NOTE (a path, file name, title or alias): its words, its
    meaning and its links as the query, NOTE itself left out; one passage per note.

    Uses a `vaultctx serve` running for the vault when there is one, else answers in-process.
    """
    with suggesting_notes(vault, options["note"]):
        contract = answer(vault, "related", request_arguments(options))
    if as_json:
        emit_json(contract)
        return
    from ..workspace import Selection  # pydantic: only to render

    selection = Selection.model_validate(contract)
    render_selection(
        selection,
        title=f"related to {selection.query}",
        empty=f"No notes related to {selection.query}.",
    )


@contextlib.contextmanager
def suggesting_notes(vault: str, note: str) -> Iterator[None]:
    """A `NoteNotFound` in the block, naming the notes closest to `note` that the reader
    may see (`Workspace.graph` holds those alone: a hidden note is never suggested)."""
    try:
        yield
    except NoteNotFound as exc:
        with open_workspace(vault) as ws:
            close = close_notes(ws, note)
        if not close:
            raise
        raise NoteNotFound(f"{exc}; did you mean {output.either(close)}?") from None


def close_notes(ws: Workspace, note: str, n: int = 3) -> list[str]:
    """Up to `n` names of notes like `note` (by title, file name or path, any case): each
    by its title if no other note has it, else by its path."""
    notes = ws.graph().titles
    titles = Counter(_fold(title) for title in notes.values() if title)
    names: dict[str, str] = {}
    for path, title in notes.items():
        stem = path.removesuffix(".md")
        shown = title if title and titles[_fold(title)] == 1 else stem
        for name in (title, stem.rsplit("/", 1)[-1], stem):
            if name:
                names.setdefault(_fold(name), shown)
    from ..pipeline.suggest import closest

    found = closest(note.strip().removesuffix(".md"), names, n * 3)
    return list(dict.fromkeys(names[name] for name in found))[:n]


def render_selection(selection: Selection, *, title: str, empty: str) -> None:
    """The candidates as a table under `title` (`empty`, said in words, if there are none),
    then what the select took; its explanation if asked for."""
    from rich.markup import escape
    from rich.table import Table

    console = output.console
    words = highlight_words(selection.query)
    if not selection.candidates:
        console.print(escape(output.empty_answer(empty, selection.diagnostics)), soft_wrap=True)
    else:
        if selection.no_good_match:
            console.print(f"[bold yellow]{escape(selection.verdict())}[/]", soft_wrap=True)
        title = f"{title} · confidence {selection.confidence:.2f}"
        table = Table(title=escape(title), title_justify="left", expand=console.is_terminal)
        notes = [candidate.path or candidate.kind for candidate in selection.candidates]
        # As wide as the longest run a path cannot break at (a space or after a '/'), up
        # to a quarter of the width; a path then wraps only there.
        note_width = min(
            max(map(len, notes)),
            max(max(len(run) for p in notes for run in path_runs(p)), console.width // 4),
        )
        table.add_column("#", justify="right", style="dim", no_wrap=True)
        table.add_column("note", style="bold cyan", overflow="fold", width=note_width)
        table.add_column("heading", overflow="fold", ratio=2)
        table.add_column("snippet", ratio=5)
        table.add_column("found by", no_wrap=True)
        rows = zip(selection.candidates, notes, strict=True)
        for rank, (candidate, note) in enumerate(rows, start=1):
            found = " ".join(
                f"{name[:1].upper()}{source.rank}"  # each retriever by its initial
                for name, source in sorted(candidate.sources.items())
            )
            table.add_row(
                str(rank),
                escape(wrap_path(note, note_width)),
                escape(candidate.heading_path or candidate.heading),
                snippet(markdown_as_text(candidate.text), words),
                found,
            )
        console.print(table)
    d = selection.diagnostics
    console.print(
        f"[dim]{d['select_ms']:.1f} ms · path {d['retrieval_path']} · "
        + " · ".join(
            f"{name} {d[f'{name}_hits']} hits/{d[f'{name}_ms']:.1f} ms" for name in d["retrievers"]
        )
        + f" · {d['store_size']} blocks[/]"
    )
    window = d.get("time_window")
    if window:
        console.print(
            f"[dim]time: {escape(', '.join(window['words']))} → {window['from'][:10]}"
            f" up to {window['until'][:10]} · {window['notes']} notes dated in it"
            f" ({window['as']}) · searched: {escape(window['searched'])}[/]"
        )
    focus = d.get("focus")
    if focus:
        console.print(f"[dim]{escape(output.focus_line(focus))}[/]", soft_wrap=True)
    if selection.explain:
        explain = selection.explain
        lexical = explain.get("lexical") or {}
        console.print(f"[bold]FTS query:[/] {escape(str(lexical.get('fts_query')))}")
        if lexical.get("dropped"):
            dropped = ", ".join(f"{w} ({why})" for w, why in lexical["dropped"].items())
            console.print(f"[bold]dropped:[/] {escape(dropped)}")
        graph = explain.get("graph") or {}
        context = ", ".join(f"{c['path']} ({c['weight']:g})" for c in graph.get("context", []))
        console.print(
            f"[bold]context:[/] {escape(context or 'nothing opened or touched lately')}"
            f" · {graph.get('near', 0)} notes linked · lift up to {graph.get('lift', 0):g}×"
        )
        console.print(f"[bold]weights:[/] {explain.get('weights')}")
        pointers = ", ".join(f"{p['from']} → {p['to']}" for p in explain.get("pointers", []))
        if pointers:
            console.print(f"[bold]pointed to:[/] {escape(pointers)}")
        vector = explain.get("vector")
        if vector:
            console.print(
                f"[bold]length correction:[/] best cosine − {vector['length_correction']:g}"
                f" × σ·√(2 ln blocks), σ = {vector['spread']:g}"
            )


def _fold(text: str) -> str:
    return "".join(
        c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c)
    )


def highlight_words(query: str) -> list[str]:
    """Query words worth highlighting, as folded prefixes (so 'mites' lights up 'mite')."""
    from ..workspace import STOP_WORDS  # with the results it highlights

    words = [_fold(w) for w in re.findall(r"[^\W_]+", query)]
    return [w[: max(4, len(w) - 2)] for w in words if w not in STOP_WORDS and len(w) > 2]


def snippet(text: str, words: list[str], width: int = 220) -> Text:
    from rich.text import Text

    flat = " ".join(text.split())
    folded = _fold(flat)
    start = 0
    positions = [folded.find(w) for w in words if folded.find(w) >= 0]
    if positions and len(folded) == len(flat):
        start = max(0, min(positions) - width // 4)
    piece = flat[start : start + width]
    out = Text(("…" if start else "") + piece + ("…" if start + width < len(flat) else ""))
    if len(folded) == len(flat):
        offset = 1 if start else 0
        folded_piece = folded[start : start + width]
        for word in words:
            for m in re.finditer(r"\b" + re.escape(word) + r"\w*", folded_piece):
                out.stylize("bold yellow", m.start() + offset, m.end() + offset)
    return out


def path_runs(path: str) -> list[str]:
    """The pieces of `path` a line may end after: at spaces, and after each '/'."""
    return [run for run in re.split(r"(?<=/)| ", path) if run]


def wrap_path(path: str, width: int) -> str:
    """`path` in lines of at most `width`, broken only at a space or after a '/' (a run
    longer than the width is left for the table to fold)."""
    lines: list[str] = []
    line = ""
    for piece in re.split(r"(?<=/)|(?<= )", path):
        if line and len(line.rstrip()) + len(piece.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        line += piece
    return "\n".join([*lines, line.rstrip()])


# Markdown as it reads: what a snippet shows of a block in the human output (--json keeps
# the block's text as it is).
_WIKI_LINK = re.compile(r"!?\[\[([^\]|#^]*)(?:[#^][^\]|]*)?(?:\\?\|([^\]]*))?\]\]")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_INLINE = (
    (re.compile(r"%%.*?%%"), ""),  # comments
    (re.compile(r"\[\^[^\]]*\]"), ""),  # footnote references
    (re.compile(r"</?[A-Za-z][^>]*>"), " "),  # HTML tags
    (re.compile(r"`([^`]*)`"), r"\1"),
    (re.compile(r"(\*\*|__|~~|==)(?=\S)(.+?)(?<=\S)\1"), r"\2"),
    (re.compile(r"(?<![\w*])\*(?=\S)(.+?)(?<=\S)\*(?![\w*])"), r"\1"),
    (re.compile(r"(?<![\w_])_(?=\S)(.+?)(?<=\S)_(?![\w_])"), r"\1"),
)
_LINE_START = re.compile(
    r"^\s*(?:>\s*)*(?:\[![^\]]*\][+-]?\s*)?(?:#{1,6}\s+|(?:[-*+]|\d+[.)])\s+(?:\[.\]\s+)?)?"
)
_TABLE_RULE = re.compile(r"^\s*\|?[\s:|-]*-[\s:|-]*\|?\s*$")
_RULE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")


def markdown_as_text(markdown: str) -> str:
    """`markdown` as plain text on one line: markup, link targets and fences gone, a
    table's rows as "a · b · c" joined by "; ", a link [[x|y]] as y."""
    lines: list[str] = []
    rows: list[str] = []
    for raw in markdown.splitlines():
        if raw.lstrip().startswith(("```", "~~~")) or _RULE.match(raw):
            continue
        line = _WIKI_LINK.sub(lambda m: m[2] or m[1], raw)
        line = _LINK.sub(r"\1", line)
        for pattern, replacement in _INLINE:
            line = pattern.sub(replacement, line)
        if line.lstrip().startswith("|"):
            if not _TABLE_RULE.match(line):
                cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
                rows.append(" · ".join(cell for cell in cells if cell))
            continue
        if rows:
            lines.append("; ".join(rows))
            rows = []
        lines.append(_LINE_START.sub("", line))
    if rows:
        lines.append("; ".join(rows))
    return " ".join(" ".join(lines).split())


@cli.command("open")
@click.argument("note")
@vault_option
@click.option("--path-only", is_flag=True, help="Print only the note's path.")
@json_option
def open_note(note: str, vault: str, path_only: bool, as_json: bool) -> None:
    """Print NOTE (a path, file name, title or alias) and remember it as being worked on."""
    from rich.markup import escape

    console = output.console
    with suggesting_notes(vault, note), open_workspace(vault) as ws:
        note_text = ws.read_note(note)
        path, content = ws.touch(note_text.path, kind="open"), note_text.content
    if as_json:
        emit_json({"path": path, "content": content})
    elif path_only or not console.is_terminal:
        console.print(escape(path), soft_wrap=True)
        if not path_only:
            console.print(escape(content), soft_wrap=True)
    else:
        console.rule(escape(path))
        console.print(escape(content), soft_wrap=True)


@cli.command(cls=OperationCommand, operation="touch")
@click.argument("note", required=False)
@vault_option
@click.option(
    "--kind",
    type=click.Choice(["touch", "open"]),
    default="touch",
    show_default=True,
    help="open: shown in an editor; touch: worked on.",
)
@click.option("--clear", is_flag=True, help="Forget every note opened or touched instead.")
@json_option
def touch(vault: str, clear: bool, as_json: bool, **options: Any) -> None:
    """Record that you are working on NOTE: it seeds graph retrieval for later selects.

    With --clear (and no NOTE), forget every note opened or touched: as `vaultctx focus --clear`.
    """
    from rich.markup import escape

    if clear == (options["note"] is not None):
        raise InvalidQuery("touch takes a NOTE, or --clear without one")
    if clear:
        show_focus(vault, clear=True, as_json=as_json)
        return
    request = parse_request("touch", request_arguments(options))
    with suggesting_notes(vault, options["note"]), open_workspace(vault) as ws:
        touched = request.answer(ws)
    if as_json:
        emit_json(touched)
    else:
        output.console.print(f"touched {escape(touched['path'])}")


@cli.command(cls=OperationCommand, operation="focus", switches={"clear": "clear_focus"})
@vault_option
@click.option("--clear", is_flag=True, help="Forget every note opened or touched.")
@json_option
def focus(vault: str, clear: bool, as_json: bool) -> None:
    """Show the notes later selects lean towards (opened, touched, edited lately), each
    with its weight now; it halves every `focus_half_life_hours` (config, default 24)."""
    show_focus(vault, clear=clear, as_json=as_json)


def show_focus(vault: str, *, clear: bool, as_json: bool) -> None:
    from rich.markup import escape

    from ..operations import ClearFocusRequest, FocusRequest

    request = ClearFocusRequest() if clear else FocusRequest()
    with open_workspace(vault) as ws:
        found = request.run(ws)
    if as_json:
        emit_json(request.respond(found))
        return
    console = output.console
    if found.cleared is not None:
        console.print(f"forgot {found.cleared} opened note{'s' * (found.cleared != 1)}")
    if not found.notes:
        console.print("nothing in focus: selects rank by what the question matches alone")
    for note in found.notes:
        console.print(
            f"{note.weight:6.3f}  {escape(note.path)}  [dim]{note.how} {escape(note.at)}[/]"
        )
    console.print(
        f"[dim]weights halve every {found.half_life_hours:g} h"
        " (config focus_half_life_hours); `vaultctx focus --clear` forgets what was opened[/]"
    )
