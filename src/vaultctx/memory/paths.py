"""Where memory lives. Import-light on purpose: select asks "is there any memory?" on every
cold start, and must not pay for the whole memory package to learn the answer is no."""

from __future__ import annotations

import os
from pathlib import Path

ACCOUNT_DIR_ENV = "VAULTCTX_ACCOUNT_DIR"
MEMORY_DB = "memory.db"
ACCOUNT_DB = "account-memory.db"
PEOPLE_DIRNAME = "people"  # beside the index: each team member's account-tier memory


def account_dir() -> Path:
    """The user's data directory for account-tier memory; `$VAULTCTX_ACCOUNT_DIR` wins."""
    override = os.environ.get(ACCOUNT_DIR_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("vaultctx"))


def memory_exists(index_dir: Path) -> bool:
    """Whether this vault or its user has a memory database yet."""
    return (index_dir / MEMORY_DB).exists() or (account_dir() / ACCOUNT_DB).exists()
