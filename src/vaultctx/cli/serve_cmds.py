"""`vaultctx serve` (the warm local HTTP server) and `vaultctx mcp` (MCP over stdio)."""

from __future__ import annotations

import click

from . import cli
from .common import open_workspace, vault_argument


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


@cli.command()
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
def mcp(vault: str, no_vectors: bool, answers_to: str) -> None:
    """Expose VAULT to AI clients over MCP (stdio): search, read and related notes, context,
    memory, touch."""
    with open_workspace(vault) as ws:
        ws.warm_up(use_vectors=not no_vectors)  # while the MCP SDK loads and the client connects
        from ..mcp_server import create_mcp_server  # the MCP SDK: only for `mcp`

        answering = ws.answering(answers_to)
        create_mcp_server(answering, use_vectors=not no_vectors).run("stdio")
