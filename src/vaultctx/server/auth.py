"""The per-install bearer token every request to the local server must carry.

Binding to 127.0.0.1 keeps other machines out; the token keeps out other local users and
any web page the user visits (a browser cannot read a 0600 file). It is generated once,
with `secrets`, and kept in the user's config folder.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

TOKEN_FILENAME = "token"


def config_dir() -> Path:
    """`$VAULTCTX_CONFIG_DIR`, else the platform's user config folder for vaultctx."""
    override = os.environ.get("VAULTCTX_CONFIG_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("vaultctx"))


def token_path() -> Path:
    return config_dir() / TOKEN_FILENAME


def load_or_create_token(path: Path | None = None) -> str:
    """Read the install's token, creating it (mode 0600) on first use."""
    path = path or token_path()
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = ""
    if token:
        return token
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another server created it first, or it was empty: reuse
        existing = path.read_text(encoding="utf-8").strip()
        if existing:
            return existing
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
    os.chmod(path, 0o600)
    return token


def authorized(header: bytes | None, token: str) -> bool:
    """Constant-time check of an `Authorization: Bearer …` header value."""
    expected = f"Bearer {token}".encode()
    return hmac.compare_digest(header or b"", expected)
