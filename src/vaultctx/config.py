"""Per-vault configuration: `<vault>/.vaultctx/config.toml`, overridden by the environment.

One flat table of settings keeps the file easy to edit by hand and by `vaultctx config`.
Precedence, lowest first: defaults, the file, `VAULTCTX_<KEY>` environment variables,
explicit arguments from the caller. The file can hold a database password, so it is
written, like everything vaultctx keeps in `.vaultctx/`, owner-only (`private_file`).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from .errors import ConfigError

CONFIG_DIRNAME = ".vaultctx"
CONFIG_FILENAME = "config.toml"
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
# the multilingual model of the `multilingual` extra (storage/e5.py): it reads every language
MULTILINGUAL_EMBEDDING_MODEL = "multilingual-e5-small"


Language = Literal[
    "da",
    "de",
    "en",
    "es",
    "fi",
    "fr",
    "hu",
    "it",
    "ja",
    "ko",
    "nl",
    "no",
    "pt",
    "ru",
    "sv",
    "tr",
    "zh",
]
"""The languages vaultctx reads notes in (`storage.language` says how)."""


class Config(BaseModel):
    """Settings of one vault. Unknown keys in the file are an error, so typos surface."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _multilingual_reads_every_language(cls, values: Any) -> Any:
        """The multilingual model's vector list counts at full weight in every language,
        unless `embedding_languages` says otherwise."""
        if (
            isinstance(values, dict)
            and "embedding_languages" not in values
            and str(values.get("embedding_model", "")).lower()
            == MULTILINGUAL_EMBEDDING_MODEL.lower()
        ):
            return {**values, "embedding_languages": ("*",)}
        return values

    @field_validator("embedding_languages", mode="before")
    @classmethod
    def _languages_from_text(cls, value: Any) -> Any:
        """`en,de` (an environment variable, `vaultctx config`) as a list."""
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    embedding_model: str = Field(
        DEFAULT_EMBEDDING_MODEL,
        description="sentence-transformers model name or path; the default ships with vaultctx,"
        f" {MULTILINGUAL_EMBEDDING_MODEL!r} (every language) comes with the multilingual extra",
    )
    embedding_backend: Literal["auto", "onnx", "torch"] = Field(
        "auto",
        description="run the model on ONNX Runtime (onnx), sentence-transformers on torch"
        " (torch, needs the torch extra), or ONNX when the model allows it (auto)",
    )
    vector_precision: Literal["int8", "float32"] = Field(
        "int8",
        description="block vectors in memory: int8 codes with a scale per vector (a quarter of"
        " the memory) or exact float32 (a few ms faster at 100k blocks on a busy CPU)",
    )
    embedding_languages: tuple[str, ...] = Field(
        ("en",),
        description="languages the embedding model reads well (ISO 639-1 codes, comma"
        " separated, or '*' for a multilingual model; '*' by default for"
        f" {MULTILINGUAL_EMBEDDING_MODEL}); in others its list counts for less",
    )
    language: Language | None = Field(
        None,
        description="the language every note is written in (ISO 639-1 code, e.g. 'de');"
        " unset: read from each note",
    )
    embed: bool = Field(True, description="compute embeddings while indexing")
    index_dir: str | None = Field(
        None, description="where the index lives; default <vault>/.vaultctx"
    )
    database_url: str | None = Field(
        None,
        description="a PostgreSQL database (postgresql://user@host/db) that `index` publishes"
        " to and every read comes from, shared by a team's servers; unset: the SQLite index",
    )
    ann_min_vectors: int = Field(
        500_000,
        ge=0,
        description="block vectors from which select's vector search first scans a sketch of"
        " them (their main directions) and scores only the vectors it ranks best exactly",
    )
    chunk_tokens: int = Field(200, ge=32, le=2048, description="max tokens per block")
    index_workers: int | None = Field(
        None,
        ge=0,
        le=64,
        description="processes that parse notes on a large index run (unset: one per spare"
        " CPU, at most 3; 0: parse in the indexing process)",
    )
    attachment_max_mb: float = Field(
        64.0,
        gt=0,
        description="PDFs and canvases larger than this many megabytes are not indexed (a"
        " warning in the index report)",
    )
    llm_model: str | None = Field(None, description="litellm model string for refine and agent")
    llm_api_base: str | None = Field(None, description="OpenAI-compatible base URL, if any")
    llm_timeout: float = Field(1.5, gt=0, description="seconds the refine gate waits")
    budget_tokens: int = Field(2000, ge=1, description="SessionContext token budget")
    rrf_k: int = Field(
        60, ge=1, description="reciprocal rank fusion constant (block order, memory recall)"
    )
    weight_lexical: float = Field(1.0, ge=0, description="fusion weight of FTS5 bm25")
    weight_vector: float = Field(2.0, ge=0, description="fusion weight of embedding search")
    weight_graph: float = Field(
        0.75,
        ge=0,
        description="how far notes linked to what you have open are lifted (share of their score)",
    )
    focus_half_life_hours: float = Field(
        24.0,
        gt=0,
        description="hours until a note you opened or touched counts half as much in select's"
        " focus (`vaultctx focus` shows it, `vaultctx focus --clear` forgets it)",
    )
    weight_memory: float = Field(0.7, ge=0, description="fusion weight of memories")
    memory_half_life_days_conversation: float = Field(
        1.0, gt=0, description="days until a conversation memory's recency halves"
    )
    memory_half_life_days_channel: float = Field(14.0, gt=0)
    memory_half_life_days_workspace: float = Field(90.0, gt=0)
    memory_half_life_days_account: float = Field(365.0, gt=0)
    agent_timeout: float = Field(
        30.0, gt=0, description="seconds one agent model call or delegation may take"
    )
    agent_processes: bool = Field(
        True,
        description="run Worker, Researcher and skills in child processes that a timeout"
        " stops (false: threads, which are only flagged)",
    )
    skills_folder: str = Field("Skills", description="vault folder whose notes are skills")
    context_window_tokens: int = Field(
        8000, ge=256, description="the agent model's context budget; longer sessions compact"
    )
    compaction_keep_turns: int = Field(
        2, ge=0, description="latest turns kept verbatim when a session is compacted"
    )

    @field_validator("database_url")
    @classmethod
    def _postgres_only(cls, value: str | None) -> str | None:
        if value is not None and value.split("://", 1)[0] not in ("postgresql", "postgres"):
            raise ValueError("must be a postgresql:// URL (unset: the SQLite index)")
        return value

    @classmethod
    def keys(cls) -> list[str]:
        return list(cls.model_fields)


def default(key: str) -> Any:
    """A setting's default: the one place it is written is its `Config` field."""
    return Config.model_fields[key].default


def validation_message(exc: ValidationError, what: str) -> str:
    """pydantic's first complaint as one line: `field.sub: message` (`what` when the whole
    value is at fault)."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or what
    return f"{where}: {first['msg'].removeprefix('Value error, ')}"


def config_path(vault: Path) -> Path:
    return vault / CONFIG_DIRNAME / CONFIG_FILENAME


def _coerce_env(key: str, raw: str) -> Any:
    """Environment values are strings; let pydantic coerce them, but map '' to None."""
    if raw == "" and key in (
        "index_dir",
        "index_workers",
        "llm_model",
        "llm_api_base",
        "database_url",
    ):
        return None
    return raw


def load_config(vault: Path, overrides: dict[str, Any] | None = None) -> Config:
    """Defaults < config file < VAULTCTX_* environment < overrides (None values ignored)."""
    values: dict[str, Any] = {}
    path = config_path(vault)
    if path.is_file():
        try:
            values.update(tomllib.loads(path.read_text(encoding="utf-8")))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    for key in Config.model_fields:
        raw = os.environ.get(f"VAULTCTX_{key.upper()}")
        if raw is not None:
            values[key] = _coerce_env(key, raw)
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        return Config(**values)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {validation_message(exc, 'config')}") from exc


def config_sources(vault: Path) -> dict[str, str]:
    """Where each effective setting comes from: "env", "file" or "default"."""
    path = config_path(vault)
    in_file: dict[str, Any] = {}
    if path.is_file():
        try:
            in_file = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return {
        key: "env"
        if os.environ.get(f"VAULTCTX_{key.upper()}") is not None
        else "file"
        if key in in_file
        else "default"
        for key in Config.model_fields
    }


def save_config_values(vault: Path, updates: dict[str, Any]) -> Config:
    """Validate and write `updates` into the vault's config file; `None` removes a key."""
    path = config_path(vault)
    current: dict[str, Any] = {}
    if path.is_file():
        current = tomllib.loads(path.read_text(encoding="utf-8"))
    for key, value in updates.items():
        if key not in Config.model_fields:
            raise ConfigError(f"unknown config key {key!r}; known: {', '.join(Config.keys())}")
        if value is None:
            current.pop(key, None)
        else:
            current[key] = value
    try:
        validated = Config(**current)
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, "config")) from exc
    dumped = validated.model_dump()
    lines = [f"{key} = {_toml_value(dumped[key])}" for key in sorted(current)]
    write_private(path, "\n".join(lines) + "\n")
    return validated


def _toml_value(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    # JSON string escaping is a subset of TOML basic strings.
    return json.dumps(str(value), ensure_ascii=False)


# --- files only their owner may read --------------------------------------------------------

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def private_dir(path: Path) -> Path:
    """Create folder `path` for the owner only (its new parents as usual), or make an
    existing one of this user so: it holds the vault's text, or a password, which other
    users must not read, whatever the umask."""
    if not path.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=PRIVATE_DIR, exist_ok=True)
    _tighten(path, PRIVATE_DIR)
    return path


def private_file(path: Path) -> Path:
    """Create `path` readable and writable by its owner only, or make an existing one so
    (and a SQLite database's -wal and -shm files, which SQLite creates with the database's
    mode), in a `private_dir`."""
    private_dir(path.parent)
    # Only a new file is opened here: closing any descriptor of a file drops every POSIX
    # lock this process holds on it, so opening a database another thread uses corrupts it.
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    for suffix in ("", "-wal", "-shm"):
        _tighten(Path(f"{path}{suffix}"), PRIVATE_FILE)
    return path


def write_private(path: Path, text: str) -> Path:
    """Replace `path` atomically with `text`, owner-only from its first byte (readers see
    the old file or the new one, never a half-written or world-readable one)."""
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, PRIVATE_FILE)
    try:
        os.fchmod(fd, PRIVATE_FILE)  # a leftover temporary file may have been looser
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        tmp.replace(path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return path


def _tighten(path: Path, mode: int) -> None:
    """Take group and other access from `path` if this user owns it (and it is no symlink)."""
    with contextlib.suppress(OSError):  # absent, or owned by someone else
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid():
            return
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(path, stat.S_IMODE(info.st_mode) & mode)
