"""The `vaultctx` command line: a thin layer over the Python API.

Each command group lives in its own module; this one holds the root group and turns the
library's documented errors into one line on stderr and an exit code.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from typing import Any

import click

from .._version import __version__
from ..errors import InvalidQuery, VaultctxError
from .output import error

# Command modules imported only when one of their commands runs (or for --help), so a
# query answered by the warm server never imports rich, pydantic or numpy.
LAZY_COMMANDS = {
    "index": "index_cmds",
    "status": "index_cmds",
    "search": "select_cmds",
    "select": "select_cmds",
    "related": "select_cmds",
    "open": "select_cmds",
    "touch": "select_cmds",
    "focus": "select_cmds",
    "context": "context_cmds",
    "config": "context_cmds",
    "serve": "serve_cmds",
    "mcp": "serve_cmds",
    "memory": "memory_cmds",
    "ask": "agent_cmds",
    "chat": "agent_cmds",
    "sessions": "agent_cmds",
    "skills": "skills_cmds",
    "obsidian": "obsidian_cmds",
    "team": "team_cmds",
    "audit": "audit_cmds",
}


class VaultctxGroup(click.Group):
    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            module = LAZY_COMMANDS.get(cmd_name)
            if module is not None:
                importlib.import_module(f"{__name__}.{module}")
            else:
                _import_all_commands()
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """An unknown command names the one closest to it, if one is close."""
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand:
            name = args[0]
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            raise click.exceptions.NoSuchCommand(name, possibilities=close, ctx=ctx) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        _import_all_commands()
        return super().list_commands(ctx)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except VaultctxError as exc:
            error(_escape(str(exc)))
            sys.exit(exc.exit_code)
        except UnicodeEncodeError:  # an argument the terminal passed as undecodable bytes
            error("an argument is not valid UTF-8 text")
            sys.exit(InvalidQuery.exit_code)
        except KeyboardInterrupt:
            error("interrupted")
            sys.exit(130)
        except Exception as exc:
            from ..storage.db import database_error  # what storage left unmapped

            mapped = database_error(exc)
            if mapped is None:
                raise
            error(_escape(str(mapped)))
            sys.exit(mapped.exit_code)


@click.group(cls=VaultctxGroup)
@click.version_option(__version__, prog_name="vaultctx")
def cli() -> None:
    """Turn a Markdown vault into the right context for an LLM, locally."""


def main() -> None:
    cli(prog_name="vaultctx")


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _import_all_commands() -> None:
    for module in sorted(set(LAZY_COMMANDS.values())):
        importlib.import_module(f"{__name__}.{module}")
