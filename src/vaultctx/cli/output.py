"""The CLI's one way to print: rich consoles for people, plain JSON for programs."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    console: Console
    err_console: Console


# The width of output that goes to a file or a pipe: no line is cut into lines of a width
# no one chose, and tables take the width their cells need.
PIPED_WIDTH = 4096
# What pads a line out to the table's or the console's width, before the line's end.
_TRAILING_SPACES = re.compile(r" +(?=\n)")


def __getattr__(name: str) -> Any:
    """`console` and `err_console` are created on first use: importing rich costs tens of
    milliseconds that a `--json` answer from the warm server should not pay."""
    if name not in ("console", "err_console"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console, ConsoleDimensions
    from rich.segment import Segment

    class _Console(Console):
        """A terminal's width on a terminal (or $COLUMNS when set), else `PIPED_WIDTH`; off
        a terminal, lines end at their last character, unpadded."""

        @property
        def size(self) -> ConsoleDimensions:
            size = super().size
            if self.is_terminal or self._width is not None or "COLUMNS" in self._environ:
                return size
            return ConsoleDimensions(PIPED_WIDTH, size.height)

        @size.setter
        def size(self, new_size: tuple[int, int]) -> None:
            self._width, self._height = new_size

        def _render_buffer(self, buffer: Iterable[Segment]) -> str:
            rendered = super()._render_buffer(buffer)
            return rendered if self.is_terminal else _TRAILING_SPACES.sub("", rendered)

    value = _Console(highlight=False, stderr=name == "err_console")
    globals()[name] = value
    return value


def emit_json(data: Any) -> None:
    """One JSON document on stdout, UTF-8, no colour or wrapping."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def _stderr() -> Console:
    return globals().get("err_console") or __getattr__("err_console")


def error(message: str) -> None:
    _stderr().print(f"[bold red]Error:[/] {message}", soft_wrap=True, markup=True)


def warn(message: str) -> None:
    _stderr().print(f"[yellow]Warning:[/] {message}", soft_wrap=True)


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def focus_line(focus: dict[str, Any]) -> str:
    """An answer's `focus` diagnostics in words: the note asked about (`related`), which
    counts for this answer alone, apart from the notes opened, touched or edited, which
    `vaultctx focus` shows and `--clear` forgets."""
    asked = [n for n in focus["notes"] if n.get("asked")]
    stored = [n for n in focus["notes"] if not n.get("asked")]
    parts = [f"graph seeded by {n['path']}, the note asked about (this answer only)" for n in asked]
    if stored:
        parts.append("focus: " + ", ".join(f"{n['path']} ({n['weight']:g})" for n in stored))
    lifted = ", ".join(f"{n['path']} {n['from']}→{n['to']}" for n in focus["lifted"])
    parts.append(f"lifted {lifted}" if lifted else "moved nothing")
    if stored:
        parts.append("`vaultctx focus --clear` forgets it")
    return " · ".join(parts)


def either(names: list[str]) -> str:
    """'a', 'a' or 'b', 'a', 'b' or 'c': the names to choose from, quoted."""
    quoted = [repr(name) for name in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


_NO_NOTE = {
    "tag": "no note has the tag {value!r}",
    "path": "no note is at or under {value!r}",
    "field": "no note has the field {value!r}",
}


def empty_answer(empty: str, diagnostics: dict[str, Any]) -> str:
    """`empty` ("No results for …"), and when filters left nothing to find, how: each tag,
    path or field that matches no note, with what it may have meant (diagnostics
    `filters`)."""
    report = diagnostics.get("filters")
    if not report:
        return empty
    left = report["notes_left"]
    if left:
        return f"{empty} The filters left {left} note{'s' * (left != 1)}, none of which matches."
    lines = [f"{empty} The filters left no note to search:"]
    for miss in report["unmatched"]:
        said = _NO_NOTE[miss["filter"]].format(value=miss["value"])
        lines.append(
            f"  {said}" + (f"; did you mean {either(miss['closest'])}?" if miss["closest"] else ".")
        )
    if not report["unmatched"]:
        lines.append("  no note matches all of them at once.")
    return "\n".join(lines)
