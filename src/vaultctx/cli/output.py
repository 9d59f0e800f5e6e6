"""The CLI's one way to print: rich consoles for people, plain JSON for programs."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


def emit_json(data: Any) -> None:
    """One JSON document on stdout, UTF-8, no colour or wrapping."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def error(message: str) -> None:
    err_console.print(f"[bold red]Error:[/] {message}", soft_wrap=True, markup=True)


def warn(message: str) -> None:
    err_console.print(f"[yellow]Warning:[/] {message}", soft_wrap=True)


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
