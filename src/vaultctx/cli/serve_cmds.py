"""`vaultctx serve` (the warm local HTTP server) and `vaultctx mcp` (MCP over stdio)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..errors import NotIndexed, VaultctxError
from . import cli
from .common import named_or_marked, open_workspace, vault_argument
from .mcp_clients import CLIENTS, client_config, install

if TYPE_CHECKING:
    from ..workspace import Workspace


@cli.command()
@vault_argument
@click.option("--port", default=8765, show_default=True, help="Port on 127.0.0.1 (0: any free).")
@click.option("--no-watch", is_flag=True, help="Do not re-index notes as they are saved.")
@click.option(
    "--no-embed", is_flag=True, help="Re-index text and links only; warm up without the model."
)
@click.option(
    "--allow-origin",
    metavar="ORIGIN",
    help="Allow browser requests from this one origin (CORS is closed by default).",
)
def serve(vault: str, port: int, no_watch: bool, no_embed: bool, allow_origin: str | None) -> None:
    """Serve VAULT's select API on 127.0.0.1, warm, re-indexing notes as they change.

    Every request but /health needs the bearer token kept in the user's config folder;
    `vaultctx select` finds the server by itself.
    """
    from ..server.auth import token_path  # Starlette and uvicorn: only for `serve`
    from ..server.run import LocalServer
    from .output import err_console

    with open_workspace(vault, create=True, embed=False if no_embed else None) as ws:
        try:
            server = LocalServer(ws, port=port, watch=not no_watch, allow_origin=allow_origin)
        except OSError as exc:
            raise click.ClickException(
                f"cannot listen on 127.0.0.1:{port}: {exc.strerror}"
            ) from exc
        err_console.print(
            f"vaultctx serving {ws.root} on {server.url} (token in {token_path()}; Ctrl-C stops)",
            markup=False,
        )
        server.run()


class _McpCommand(click.Command):
    """`vaultctx mcp`, whose help lists the tools from the server's own list."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help_text(ctx, formatter)
        from ..mcp_server import tool_catalog  # the MCP SDK: only for `mcp --help`

        with formatter.section("Tools"):
            formatter.write_dl(tool_catalog())


CLIENT_NAMES = click.Choice(sorted(CLIENTS))


@cli.command(cls=_McpCommand)
@vault_argument
@click.option("--no-vectors", is_flag=True, help="Lexical and graph only: never loads the model.")
@click.option(
    "--answers-to",
    type=click.Choice(["remote_model", "local_model", "client"]),
    default="remote_model",
    show_default=True,
    help="Where the client sends what it is answered: the read rules for that destination "
    "decide what the tools show (a desktop client's model is remote unless it runs here).",
)
@click.option(
    "--print-config",
    "print_for",
    type=CLIENT_NAMES,
    help="Print CLIENT's configuration entry for this server (absolute paths) and exit.",
)
@click.option(
    "--install",
    "install_for",
    type=CLIENT_NAMES,
    help="Add that entry to CLIENT's configuration file (a backup of the file is kept) and exit.",
)
@click.option(
    "--name",
    default="vaultctx",
    show_default=True,
    help="The server's name in the client's configuration (one per vault).",
)
def mcp(
    vault: str,
    no_vectors: bool,
    answers_to: str,
    print_for: str | None,
    install_for: str | None,
    name: str,
) -> None:
    """Expose VAULT to AI clients over MCP (stdio): search, read and related notes, context,
    memory, touch.

    `--print-config CLIENT` prints what CLIENT needs to start this server; `--install CLIENT`
    writes it into CLIENT's file: claude-desktop (its claude_desktop_config.json), claude-code
    (.mcp.json here), cursor (~/.cursor/mcp.json), vscode (.vscode/mcp.json here).
    """
    root = named_or_marked(vault)
    if print_for or install_for:
        flags = (["--no-vectors"] if no_vectors else []) + (
            ["--answers-to", answers_to] if answers_to != "remote_model" else []
        )
        _configure_client(root, name, flags, print_for, install_for)
        return
    try:
        ws = open_workspace(str(root))
    except NotIndexed:  # a client starts the server first: it indexes as `vaultctx index` does
        ws = open_workspace(str(root), create=True)
        _index_first(ws, embed=False if no_vectors else None)
    with ws:
        ws.warm_up(use_vectors=not no_vectors)  # while the MCP SDK loads and the client connects
        if not no_vectors:
            ws.switch_in_background()  # a change of model completes while the tools answer
        from ..mcp_server import create_mcp_server  # the MCP SDK: only for `mcp`

        answering = ws.answering(answers_to)
        create_mcp_server(answering, use_vectors=not no_vectors).run("stdio")


def _configure_client(
    root: Path, name: str, flags: list[str], print_for: str | None, install_for: str | None
) -> None:
    from .output import console, err_console

    if print_for and install_for:
        raise click.UsageError("give --print-config or --install, not both")
    client = CLIENTS[print_for or install_for or ""]
    if print_for:
        _print_json(client_config(client, name, root, flags))
        err_console.print(
            f"{client.label} reads this from {client.config_file()} (under"
            f" {client.servers_key!r}); `vaultctx mcp --install {client.name}` adds it there.",
            markup=False, soft_wrap=True,
        )  # fmt: skip
        return
    done = install(client, name, root, flags, client.config_file())
    kept = f" (the file as it was: {done.backup})" if done.backup else ""
    verb = "Replaced" if done.replaced is not None else "Added"
    said = f"{verb} the MCP server {name!r} in {done.path}{kept}.\nRestart {client.label}."
    console.print(said, markup=False, soft_wrap=True)
    other = done.replaced_another_vault(root)
    if other is not None:
        err_console.print(
            f"Warning: {name!r} served {other} until now; {client.label} now serves {root}"
            f" under that name instead. To keep both, install each vault under its own"
            f" name: vaultctx mcp {other} --install {client.name} --name OTHER-NAME",
            markup=False, soft_wrap=True,
        )  # fmt: skip
    if not _is_indexed(root):
        err_console.print(
            f"{root} is not indexed yet: the server indexes it when {client.label} first"
            " starts it (as `vaultctx index` does; run that now for a quicker first start).",
            markup=False, soft_wrap=True,
        )  # fmt: skip


def _is_indexed(root: Path) -> bool:
    """Whether `root` has an index to serve (an index that cannot be opened now is the
    server's to report when it starts)."""
    try:
        with open_workspace(str(root)):
            return True
    except NotIndexed:
        return False
    except VaultctxError:
        return True


def _index_first(ws: Workspace, *, embed: bool | None) -> None:
    """Index a vault the server was started on before it was ever indexed, telling it on
    stderr: stdout is the client's JSON-RPC channel."""
    from .index_cmds import index_progress, phases
    from .output import err_console

    err_console.print(
        f"vaultctx: {ws.root} has not been indexed yet; indexing it first.",
        markup=False, soft_wrap=True,
    )  # fmt: skip
    if err_console.is_terminal:
        with index_progress(err_console) as bar:
            report = ws.index(embed=embed, progress=phases(bar))
    else:
        report = ws.index(embed=embed)
    for path, message in report.warnings:
        err_console.print(f"Warning: {path}: {message}", markup=False, soft_wrap=True)
    err_console.print(
        f"vaultctx: indexed {report.added} notes in {report.elapsed_ms / 1000:.2f}s.",
        markup=False, soft_wrap=True,
    )  # fmt: skip


def _print_json(data: object) -> None:
    """Indented, for a person to paste into a file."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
