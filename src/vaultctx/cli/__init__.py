"""The `vaultctx` command line: a thin layer over the Python API.

Each command group lives in its own module; this one holds the root group and turns the
library's documented errors into one line on stderr and an exit code.
"""

from __future__ import annotations

import sqlite3
import sys
from typing import Any

import click
from rich.markup import escape

from .. import __version__
from ..errors import VaultctxError
from .output import error


class VaultctxGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except VaultctxError as exc:
            error(escape(str(exc)))
            sys.exit(exc.exit_code)
        except sqlite3.Error as exc:
            error(f"index database error: {escape(str(exc))}")
            sys.exit(1)
        except KeyboardInterrupt:
            error("interrupted")
            sys.exit(130)


@click.group(cls=VaultctxGroup)
@click.version_option(__version__, prog_name="vaultctx")
def cli() -> None:
    """Turn a Markdown vault into the right context for an LLM, locally."""


def main() -> None:
    cli(prog_name="vaultctx")


from . import index_cmds, select_cmds  # noqa: E402,F401  (registers commands on import)
