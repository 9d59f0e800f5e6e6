"""The CLI finding a running server for its vault and asking it (and falling back to
answering in-process when the server is gone), with the same answers either way."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from server_helpers import config_dir_fixture, server_fixture, workspace_fixture  # noqa: F401
from vaultctx import Workspace
from vaultctx.cli import cli
from vaultctx.server.client import SERVER_FILE, ServerInfo, request_server, write_server_file
from vaultctx.server.run import LocalServer

QUESTION = "varroa mites and the hive's secret plans"


def _cli_select(vault: Path, *args: str) -> dict:
    result = CliRunner().invoke(
        cli, ["select", "varroa mites", "--no-vectors", "-V", str(vault), "--json", *args]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_cli_select_uses_a_running_server_and_falls_back_without_one(
    workspace: Workspace,
) -> None:
    with LocalServer(workspace, watch=False, warm=False):
        served = _cli_select(workspace.root)
        assert served["diagnostics"]["server_pid"] == os.getpid()
    local = _cli_select(workspace.root)
    assert "server_pid" not in local["diagnostics"]
    assert [c["id"] for c in local["candidates"]] == [c["id"] for c in served["candidates"]]


def test_cli_context_uses_a_running_server_with_the_same_result(workspace: Workspace) -> None:
    def cli_context() -> dict:
        result = CliRunner().invoke(
            cli, ["context", "varroa", "-V", str(workspace.root), "--json", "--no-vectors"]
        )
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    with LocalServer(workspace, watch=False, warm=False):
        served = cli_context()
    assert served["diagnostics"]["server_pid"] == os.getpid()
    local = cli_context()
    assert "server_pid" not in local["diagnostics"]
    assert served["context_hash"] == local["context_hash"]
    assert served["items"] and served["gate"] == "deterministic"


def test_cli_falls_back_on_a_stale_server_file(workspace: Workspace) -> None:
    with LocalServer(workspace, watch=False, warm=False):
        stale = (workspace.root / SERVER_FILE).read_text()
    (workspace.root / SERVER_FILE).write_text(stale)  # the server was killed -9
    assert request_server(workspace.root, "POST", "/select", {"query": "varroa"}) is None
    assert _cli_select(workspace.root)["candidates"]


def test_cli_reports_server_side_errors_like_local_ones(server: LocalServer) -> None:
    result = CliRunner().invoke(cli, ["select", "  ", "-V", str(server.workspace.root)])
    assert result.exit_code == 8  # InvalidQuery
    assert "empty" in result.output


def test_cli_against_the_server_imports_nothing_heavy(server: LocalServer) -> None:
    """The warm path's promise: no pydantic, numpy, rich or torch in the CLI process."""
    probe = (
        "import sys, json\n"
        "sys.argv = ['vaultctx', 'select', 'varroa mites', '--json', '-V', sys.argv[1]]\n"
        "from vaultctx.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = {'pydantic', 'numpy', 'rich', 'torch', 'starlette'}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(server.workspace.root)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    answer, loaded = done.stdout.strip().splitlines()
    assert json.loads(answer)["diagnostics"]["server_pid"] == os.getpid()
    assert json.loads(loaded) == []


# --- what listens on the announced port must prove it is ours ------------------------------


class Listener:
    """A foreign program on 127.0.0.1 that records every byte sent to it. It answers each
    request with `answer` (a JSON object, as a vaultctx server would), or, given
    `upstream`, relays the bytes both ways to that port (a man in the middle)."""

    def __init__(self, answer: dict | Callable[[bytes], dict] | None = None, upstream=None):
        self.answer, self.upstream = answer, upstream
        self.received = bytearray()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            if self.upstream is not None:
                self._relay(conn)
                return
            while chunk := conn.recv(65536):
                self.received += chunk
                answer = self.answer(bytes(chunk)) if callable(self.answer) else self.answer
                body = json.dumps(answer).encode()
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                )

    def _relay(self, conn: socket.socket) -> None:
        with socket.create_connection(("127.0.0.1", self.upstream)) as up:

            def back() -> None:
                while chunk := up.recv(65536):
                    conn.sendall(chunk)

            threading.Thread(target=back, daemon=True).start()
            while chunk := conn.recv(65536):
                self.received += chunk
                up.sendall(chunk)

    def close(self) -> None:
        self._sock.close()


@pytest.fixture(name="listen")
def listen_fixture() -> Iterator[Callable[..., Listener]]:
    started: list[Listener] = []

    def listen(*args, **kwargs) -> Listener:
        started.append(Listener(*args, **kwargs))
        return started[-1]

    yield listen
    for listener in started:
        listener.close()


def _announce(vault: Path, port: int, token_path: Path) -> None:
    """server.json naming `port` and `token_path`, as a synced or planted copy would."""
    write_server_file(vault, ServerInfo(port, os.getpid(), str(vault), str(token_path)))


def test_a_foreign_listener_named_in_server_json_gets_neither_a_file_nor_the_token_nor_the_query(
    workspace: Workspace, config_dir: Path, tmp_path: Path, listen: Callable[..., Listener]
) -> None:
    from vaultctx.server.auth import load_or_create_token

    token = load_or_create_token()
    credentials = tmp_path / "credentials"
    credentials.write_text("aws_secret_access_key=wJalrXUtnFEMI\n")
    root = str(workspace.root)
    # It claims to be this vault's server, as an authenticated /health would.
    foreign = listen({"ok": True, "vault": root, "pid": os.getpid(), "version": "9.9.9"})
    _announce(workspace.root, foreign.port, credentials)

    assert request_server(workspace.root, "POST", "/select", {"query": QUESTION}) is None
    answered = _cli_select(workspace.root)  # in-process, silently
    assert "server_pid" not in answered["diagnostics"] and answered["candidates"]

    heard = bytes(foreign.received)
    assert heard.startswith(b"GET /health?challenge=")  # it was asked, and only that
    for secret in ("wJalrXUtnFEMI", token, "varroa", "Authorization", root):
        assert secret.encode() not in heard, secret


def test_a_listener_relaying_to_the_real_server_cannot_pass_its_proof_on(
    server: LocalServer, listen: Callable[..., Listener]
) -> None:
    relay = listen(upstream=server.port)
    _announce(server.workspace.root, relay.port, Path("/dev/null"))
    assert request_server(server.workspace.root, "POST", "/select", {"query": QUESTION}) is None
    assert relay.received.startswith(b"GET /health?challenge=")
    assert server.token.encode() not in relay.received and b"varroa" not in relay.received


def test_a_listener_answering_with_a_made_up_proof_is_no_server(
    workspace: Workspace, config_dir: Path, listen: Callable[..., Listener]
) -> None:
    from vaultctx.server.auth import load_or_create_token, proofs

    load_or_create_token()

    # It knows everything but the token: it signs with a token of its own.
    def answer(request: bytes) -> dict:
        challenge = request.split(b"challenge=", 1)[1].split(b" ", 1)[0].decode()
        return {"ok": True, "proof": proofs("guess", challenge, foreign.port, str(workspace.root))}

    foreign = listen(answer)
    _announce(workspace.root, foreign.port, config_dir / "token")
    assert request_server(workspace.root, "POST", "/select", {"query": QUESTION}) is None
    assert b"Authorization" not in foreign.received and b"varroa" not in foreign.received


def test_a_server_of_another_vault_with_the_same_token_is_not_asked(
    workspace: Workspace, make_vault: Callable[..., Path], config_dir: Path
) -> None:
    other = Workspace.open(make_vault({"Other.md": "# Other\n"}), {"embed": False})
    with other, LocalServer(other, watch=False, warm=False) as elsewhere:
        _announce(workspace.root, elsewhere.port, config_dir / "token")
        assert request_server(workspace.root, "POST", "/select", {"query": "varroa"}) is None


def _untrusted(kind: str, token_file: Path, tmp_path: Path) -> None:
    """Make the install's token file one a client must not read."""
    if kind == "readable by others":
        token_file.chmod(0o644)
    elif kind == "a symlink":
        copy = tmp_path / "token-copy"
        copy.write_text(token_file.read_text())
        copy.chmod(0o600)
        token_file.unlink()
        token_file.symlink_to(copy)
    else:  # owned by another user (the tests may run as root, who can hand it over)
        if os.getuid() != 0:
            pytest.skip("only root can give a file to another user")
        os.chown(token_file, 65534, 65534)


@pytest.mark.parametrize("kind", ["readable by others", "a symlink", "owned by another user"])
def test_a_token_file_that_is_not_private_is_never_sent(
    server: LocalServer,
    config_dir: Path,
    tmp_path: Path,
    listen: Callable[..., Listener],
    kind: str,
) -> None:
    assert request_server(server.workspace.root, "GET", "/status") is not None
    relay = listen(upstream=server.port)  # to see what the client sends
    _announce(server.workspace.root, relay.port, config_dir / "token")
    _untrusted(kind, config_dir / "token", tmp_path)
    assert request_server(server.workspace.root, "GET", "/status") is None
    assert relay.received == b""  # it did not even ask: it has no token to check a proof with
