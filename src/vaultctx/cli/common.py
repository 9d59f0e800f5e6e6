"""Options shared by every command."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..workspace import Workspace


def vault_argument(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.argument(
        "vault",
        required=False,
        default=lambda: os.environ.get("VAULTCTX_VAULT", "."),
        type=click.Path(file_okay=True, dir_okay=True, path_type=str),
    )(fn)


def vault_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--vault",
        "-V",
        default=lambda: os.environ.get("VAULTCTX_VAULT", "."),
        show_default="$VAULTCTX_VAULT or .",
        help="The vault folder.",
    )(fn)


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for programs.")(fn)


def open_workspace(vault: str, **overrides: Any) -> Workspace:
    from ..workspace import Workspace  # numpy and pydantic: only commands that open a vault

    return Workspace.open(vault, overrides or None)
