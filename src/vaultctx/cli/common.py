"""Options shared by every command, how a command finds its vault, and how a command asks
one of the operations every door shares."""

from __future__ import annotations

import datetime
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import VaultNotFound

if TYPE_CHECKING:
    from ..operations import Request
    from ..workspace import Workspace

VAULT_ENV = "VAULTCTX_VAULT"
# What marks a vault's folder: vaultctx's own (config.CONFIG_DIRNAME) or Obsidian's. Spelled
# out so that finding the vault imports nothing heavy; a test checks the two agree.
VAULT_MARKERS = (".vaultctx", ".obsidian")
VAULT_HELP = (
    "The vault folder (default: $VAULTCTX_VAULT, else the nearest folder from here up that"
    " holds .vaultctx/ or .obsidian/, else the current folder)."
)


def find_vault(vault: str | None = None, *, start: Path | None = None) -> Path:
    """The vault a command works on, first found of: `vault` (-V/--vault, or a command's
    VAULT argument), $VAULTCTX_VAULT, the nearest folder from `start` (default: the current
    folder) up that holds `.vaultctx/` or `.obsidian/`, and `start` itself — where
    `vaultctx index` makes a new vault, and where the other commands say it is not indexed.
    A command run in a vault's subfolder so answers from the vault's index."""
    if vault:
        return Path(vault).expanduser()
    if named := os.environ.get(VAULT_ENV):
        return Path(named).expanduser()
    here = (start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if is_marked(folder):
            return folder
    return here


def is_marked(folder: Path) -> bool:
    """Whether `folder` holds `.vaultctx/` or `.obsidian/`: a vault's folder."""
    return any((folder / marker).is_dir() for marker in VAULT_MARKERS)


def named_or_marked(vault: str) -> Path:
    """`vault` (as `find_vault` gave it), absolute, when it was named (VAULT, -V, or
    $VAULTCTX_VAULT) or is a marked vault folder; `VaultNotFound` when it is only the
    current folder, which nothing marks as a vault: for a command that must not take any
    folder it is run in for a vault (`mcp`, whose client would serve that folder)."""
    root = Path(vault).expanduser().resolve()
    ctx = click.get_current_context(silent=True)
    given = ctx is not None and (ctx.params.get("vault") or ctx.params.get("vault_path"))
    if not (given or os.environ.get(VAULT_ENV) or is_marked(root)):
        raise VaultNotFound(
            f"no vault here: neither {root} nor a folder above it holds .vaultctx/ or"
            " .obsidian/; run it in the vault's folder, or name the vault (`vaultctx mcp PATH`)"
        )
    if not root.is_dir():
        raise VaultNotFound(f"no vault folder at {root}")
    return root


def vault_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """-V/--vault: the command's `vault` parameter, found by `find_vault`."""
    option = click.option("--vault", "-V", "vault", metavar="PATH", help=VAULT_HELP)
    return option(_finds_vault(fn, positional=False))


def vault_argument(fn: Callable[..., Any]) -> Callable[..., Any]:
    """An optional VAULT argument (`vaultctx index PATH`), or -V/--vault as every command
    takes it: the command's `vault` parameter, found by `find_vault`."""
    argument = click.argument(
        "vault_path", metavar="[VAULT]", required=False, type=click.Path(path_type=str)
    )
    option = click.option("--vault", "-V", "vault", metavar="PATH", help=VAULT_HELP)
    return option(argument(_finds_vault(fn, positional=True)))


def _finds_vault(fn: Callable[..., Any], *, positional: bool) -> Callable[..., Any]:
    @functools.wraps(fn)
    def command(*args: Any, vault: str | None = None, **kwargs: Any) -> Any:
        if positional:
            given = kwargs.pop("vault_path", None)
            if given and vault and Path(given).absolute() != Path(vault).absolute():
                raise click.UsageError(f"two vaults given: {given} and --vault {vault}")
            vault = vault or given
        return fn(*args, vault=str(find_vault(vault)), **kwargs)

    return command


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for programs.")(fn)


def open_workspace(vault: str, *, create: bool = False, **overrides: Any) -> Workspace:
    """The workspace of `vault`. Only commands that index pass `create`: any other says the
    vault is not indexed yet rather than leave an empty index behind."""
    from ..workspace import Workspace  # numpy and pydantic: only commands that open a vault

    return Workspace.open(vault, overrides or None, create=create)


# --- the operations every door shares (`vaultctx.operations`) -------------------------------


class OperationCommand(click.Command):
    """A command that asks one shared operation (`switches`: a flag that makes it ask
    another, e.g. `--clear`): its options are the operation's fields, each named as its
    field, and its help states their bounds as the request model holds them (read only
    when help is shown: a query imports no pydantic for it)."""

    def __init__(
        self, *args: Any, operation: str, switches: dict[str, str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.operation = operation
        self.switches = switches or {}

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from ..operations import OPERATIONS

        fields = OPERATIONS[self.operation].model_fields
        for param in self.params:
            if isinstance(param, click.Option) and param.name in fields and param.help:
                bounds = _bounds(fields[param.name].metadata)
                if bounds and bounds not in param.help:
                    said = param.help.rstrip(".")
                    said = f"{said[:-1]}; {bounds})" if said.endswith(")") else f"{said} ({bounds})"
                    param.help = f"{said}."
        super().format_options(ctx, formatter)


def _bounds(metadata: list[Any]) -> str:
    low = next((m.ge for m in metadata if hasattr(m, "ge")), None)
    high = next((m.le for m in metadata if hasattr(m, "le")), None)
    if low is not None and high is not None:
        return f"{low} to {high}"
    return f"at least {low}" if low is not None else ""


def request_arguments(options: dict[str, Any]) -> dict[str, Any]:
    """A command's options as its operation's request takes them in JSON: lists for repeated
    options, ISO 8601 for dates, unset ones left to the request's defaults."""
    arguments: dict[str, Any] = {}
    for name, value in options.items():
        if value is None:
            continue
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, datetime.datetime):
            value = value.isoformat()
        arguments[name] = value
    return arguments


def parse_request(operation: str, arguments: dict[str, Any]) -> Request:
    """The request of `operation` for `arguments` (`request_arguments`); an invalid value is
    a usage error naming its option, in the words every door uses."""
    from pydantic import ValidationError

    from ..operations import OPERATIONS

    try:
        return OPERATIONS[operation].model_validate(arguments)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else ""
        ctx = click.get_current_context(silent=True)
        param = next((p for p in ctx.command.params if p.name == name), None) if ctx else None
        hint = None if param else name
        raise click.BadParameter(first["msg"], ctx=ctx, param=param, param_hint=hint) from None


def answer(vault: str, operation: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The JSON answer of `operation` for `arguments` (`request_arguments`): the warm
    `vaultctx serve` of the vault's, when one runs, else worked out here. The server checks
    the request as `parse_request` does; one it refuses is checked here again, to be told
    as a usage error."""
    from ..server.client import request_server, route  # the standard library only

    answered = request_server(vault, "POST", route(operation), arguments)
    if answered is not None:
        return answered
    request = parse_request(operation, arguments)
    with open_workspace(vault) as ws:
        return request.answer(ws)
