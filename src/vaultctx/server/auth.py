"""The per-install bearer token every request to the local server must carry, and the
proof a server gives that it holds it.

Binding to 127.0.0.1 keeps other machines out; the token keeps out other local users and
any web page the user visits (a browser cannot read a 0600 file). It is generated once,
with `secrets`, and kept in the user's config folder, the one place a client reads it from.
Before a client sends the token anywhere, the server on the announced port proves it holds
the token (`proofs`): a listener that only read `server.json` cannot.

Standard library only (platformdirs lazily): the CLI's client imports this module.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import stat
from pathlib import Path

TOKEN_FILENAME = "token"
# A client's challenge: what `GET /health?challenge=` accepts.
CHALLENGE_MAX_CHARS = 128


def config_dir() -> Path:
    """`$VAULTCTX_CONFIG_DIR`, else the platform's user config folder for vaultctx."""
    override = os.environ.get("VAULTCTX_CONFIG_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("vaultctx"))


def token_path() -> Path:
    return config_dir() / TOKEN_FILENAME


def read_token(path: Path | None = None) -> str | None:
    """The token, if `path` (the install's token file) is one a client may trust: a regular
    file, not a symlink, owned by this user and readable by no one else. None otherwise."""
    path = path or token_path()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or not _owner_only(info):
            return None
        text = fh.read(4096).decode("utf-8", errors="replace").strip()
    return text or None


def _owner_only(info: os.stat_result) -> bool:
    if not hasattr(os, "getuid"):  # Windows: the folder's ACL guards it
        return True
    return info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) == 0o600


def load_or_create_token(path: Path | None = None) -> str:
    """Read the install's token, creating it (mode 0600, in a 0700 folder) on first use; a
    looser existing file of this user is made 0600 (clients trust no other)."""
    import secrets

    from ..config import private_dir

    path = path or token_path()
    private_dir(path.parent)
    with contextlib.suppress(OSError):
        if not path.is_symlink() and path.is_file():
            os.chmod(path, 0o600)
    token = read_token(path)
    if token:
        return token
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another server created it first, or it is empty or untrusted
        existing = read_token(path)
        if existing:
            return existing
        path.unlink()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
    os.chmod(path, 0o600)
    return token


def authorized(header: bytes | None, token: str) -> bool:
    """Constant-time check of an `Authorization: Bearer …` header value."""
    expected = f"Bearer {token}".encode()
    return hmac.compare_digest(header or b"", expected)


def proofs(token: str, challenge: str, port: int, vault: str) -> dict[str, str]:
    """What a server answers to `challenge` on `port`: `server`, that it holds `token`;
    `vault`, that it also serves `vault`. HMAC-SHA256, keyed by the token, over the
    client's fresh challenge and the port it asked on (so a listener on another port cannot
    relay the real server's answer)."""
    said = f"{challenge}\n{port}"
    return {"server": _hmac(token, said), "vault": _hmac(token, f"{said}\n{vault}")}


def _hmac(token: str, message: str) -> str:
    return hmac.new(token.encode(), message.encode(), "sha256").hexdigest()
