"""Model calls through litellm: one completion, structured output, and a record of each call.

litellm costs about a second to import, so it is imported on first use (or in the
background with `warm_up`), after pinning its cost map to the bundled copy: otherwise the
import itself fetches the map over the network. It is the `llm` extra, not in the default
install: without it a configured model is `LLMNotInstalled`, naming the install command.
Every error a provider or litellm raises is turned into vaultctx's own `LLMError` family
here, carrying the call's `CallRecord`.

With an audit log in the settings, each call is recorded there before it is sent and
completed after it (`storage.audit`): what the caller declares is in the request (`audit`),
the model, its endpoint and the tokens. A call whose record cannot be written is not sent.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..errors import (
    LLMError,
    LLMFailed,
    LLMNotConfigured,
    LLMNotInstalled,
    LLMRateLimited,
    LLMTimeout,
    VaultctxError,
)
from ..storage.audit import AuditLog, AuditNote

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .settings import LLMSettings

Outcome = Literal["ok", "timeout", "error", "invalid_output"]
Message = Mapping[str, Any]
ModelT = TypeVar("ModelT", bound="BaseModel")

# A retry is only worth starting if this much of the time limit is left.
MIN_RETRY_WINDOW = 0.1
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_import_lock = threading.Lock()
log = logging.getLogger(__name__)
UNDECLARED = AuditNote(purpose="unspecified")


@dataclass(frozen=True)
class CallRecord:
    """What one `complete` call cost and how it ended: the raw material of a trace.

    Token counts are the provider's; 0 when the call failed before it reported usage.
    """

    model: str
    tokens_in: int
    tokens_out: int
    latency_ms: float
    outcome: Outcome
    error: str | None
    started_at: float  # epoch seconds
    attempts: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ToolCall:
    """A tool call in provider-neutral form. `arguments` is {} when the model's JSON was not
    an object; `raw_arguments` keeps what it sent so a caller can report the mistake."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str = ""


@dataclass(frozen=True)
class Completion:
    """A model's answer: text and/or tool calls, usage as reported, and the call record."""

    content: str | None
    tool_calls: tuple[ToolCall, ...]
    usage: dict[str, Any]
    finish_reason: str | None
    record: CallRecord = field(repr=False)


def _litellm() -> Any:
    """Import litellm offline-safe and quiet; later calls return the loaded module.
    `LLMNotInstalled` when the `llm` extra is not installed."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with _import_lock:
        try:
            import litellm
        except ImportError as exc:
            raise LLMNotInstalled() from exc

        litellm.suppress_debug_info = True  # it otherwise prints help banners on errors
    return litellm


def client_installed() -> bool:
    """Whether litellm can be imported, without importing it (that takes a second)."""
    if "litellm" in sys.modules:
        return sys.modules["litellm"] is not None
    return importlib.util.find_spec("litellm") is not None


def require_client() -> None:
    """`LLMNotInstalled` before any work when a model is configured but litellm is not
    there: the caller asked for the model, so falling back without it would hide that."""
    if not client_installed():
        raise LLMNotInstalled()


def warm_up() -> threading.Thread | None:
    """Import litellm in a background thread, so the first model call does not pay for it
    (start it before work that runs anyway, e.g. select). None if it is already loaded or
    not installed (the call itself then says so)."""
    if "litellm" in sys.modules or not client_installed():
        return None
    thread = threading.Thread(target=_import_quietly, name="vaultctx-llm-import", daemon=True)
    thread.start()
    return thread


def _import_quietly() -> None:
    """`_litellm` for a background thread: a failure is the model call's to report."""
    try:
        _litellm()
    except Exception as exc:  # a broken install: the call that needs it raises it again
        log.debug("litellm did not import in the background: %s", exc)


def complete(
    messages: Sequence[Message],
    *,
    settings: LLMSettings,
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_choice: str | Mapping[str, Any] | None = None,
    timeout: float | None = None,
    max_retries: int = 0,
    response_format: Mapping[str, Any] | None = None,
    temperature: float | None = 0.0,
    max_tokens: int | None = None,
    audit: AuditNote | None = None,
) -> Completion:
    """One chat completion. `tools` are OpenAI-format function schemas; tool calls come back
    as `ToolCall`s whatever the provider. Retries (transient failures only) happen only while
    they fit inside `timeout`, which bounds the whole call, not each attempt. `audit` says
    what the request is for and which notes are in it (one row of the audit log per call,
    its attempts counted).

    Raises `LLMNotConfigured`, `LLMTimeout`, `LLMRateLimited` or `LLMFailed`.
    """
    model = _configured_model(settings)
    litellm = _litellm()
    limit = timeout if timeout is not None else settings.timeout
    kwargs = _call_kwargs(
        model,
        messages,
        settings,
        tools=tools,
        tool_choice=tool_choice,
        response_format=response_format,
        temperature=temperature,
        max_tokens=max_tokens,
    )
    call = _Call.start(model, limit)
    audited = _Audited.begin(settings, model, audit or UNDECLARED, call)
    record: CallRecord | None = None
    try:
        completion = _completion(_attempt_until_answered(litellm, kwargs, call, max_retries), call)
        record = completion.record
        return completion
    except LLMError as exc:
        record = exc.record if isinstance(exc.record, CallRecord) else None
        raise
    finally:
        if audited is not None:
            audited.finish(record, call)


def complete_structured(
    messages: Sequence[Message],
    schema: type[ModelT],
    *,
    settings: LLMSettings,
    timeout: float | None = None,
    max_retries: int = 0,
    audit: AuditNote | None = None,
) -> tuple[ModelT | None, CallRecord]:
    """Ask for JSON and validate it against `schema`. An answer that is not valid JSON of
    that shape is `(None, record)` with outcome "invalid_output"; transport failures raise
    as in `complete`."""
    completion = complete(
        messages,
        settings=settings,
        timeout=timeout,
        max_retries=max_retries,
        response_format={"type": "json_object"},
        audit=audit,
    )
    parsed, problem = parse_json_model(completion.content or "", schema)
    if parsed is None:
        return None, replace(completion.record, outcome="invalid_output", error=problem)
    return parsed, completion.record


def parse_json_model(text: str, schema: type[ModelT]) -> tuple[ModelT | None, str | None]:
    """Validate a model's JSON answer, tolerating ```json fences and prose around the
    object. Returns (model, None) or (None, why not)."""
    from pydantic import ValidationError  # not at import: an agent's child process has no use

    body = text.strip()
    fenced = _FENCE.search(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body.startswith(("{", "[")):
        start, end = body.find("{"), body.rfind("}")
        if start < 0 or end <= start:
            return None, "no JSON object in the answer"
        body = body[start : end + 1]
    try:
        return schema.model_validate_json(body), None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        return None, f"{where}: {first['msg']}"


@dataclass
class _Call:
    """One `complete` call in progress: when it started, when its time is up (for every
    attempt together) and how many attempts it has made — what its `CallRecord` says."""

    model: str
    started_at: float  # epoch seconds, for the record
    t0: float  # perf_counter, for latency and the deadline
    deadline: float
    attempts: int = 0

    @classmethod
    def start(cls, model: str, limit: float) -> _Call:
        started_at = time.time()
        t0 = time.perf_counter()
        return cls(model, started_at, t0, t0 + limit)

    def remaining(self) -> float:
        return self.deadline - time.perf_counter()

    def latency_ms(self) -> float:
        return round((time.perf_counter() - self.t0) * 1000, 3)

    def failed(self, error: LLMError) -> CallRecord:
        """The record of a call that ended in `error`: no usage was reported."""
        return CallRecord(
            model=self.model,
            tokens_in=0,
            tokens_out=0,
            latency_ms=self.latency_ms(),
            outcome="timeout" if isinstance(error, LLMTimeout) else "error",
            error=str(error),
            started_at=self.started_at,
            attempts=self.attempts,
        )


@dataclass(frozen=True)
class _Audited:
    """A call's row in the audit log, from before it is sent until it has ended."""

    log: AuditLog
    row: int

    @classmethod
    def begin(
        cls, settings: LLMSettings, model: str, audit: AuditNote, call: _Call
    ) -> _Audited | None:
        """The call's row, or None without an audit log. `LLMFailed` (and nothing sent)
        when the log cannot be written: no request leaves unrecorded."""
        if settings.audit_log is None:
            return None
        auditor = AuditLog.at(settings.audit_log)
        try:
            row = auditor.begin(model=model, api_base=settings.api_base, note=audit)
        except VaultctxError as exc:
            error = LLMFailed(f"not sent: the audit log cannot be written: {exc}")
            error.record = call.failed(error)
            raise error from exc
        return cls(auditor, row)

    def finish(self, record: CallRecord | None, call: _Call) -> None:
        """How the call ended and what it cost; a failure to say so is logged, the answer
        (already received) still returned."""
        try:
            self.log.finish(
                self.row,
                outcome=record.outcome if record is not None else "error",
                tokens_in=record.tokens_in if record is not None else 0,
                tokens_out=record.tokens_out if record is not None else 0,
                attempts=call.attempts,
                latency_ms=call.latency_ms(),
            )
        except VaultctxError as exc:
            log.warning("audit log %s: request %d not completed: %s", self.log.path, self.row, exc)


def _configured_model(settings: LLMSettings) -> str:
    """The model to call; `LLMNotConfigured` before any work when there is none."""
    if not settings.configured or settings.model is None:
        raise LLMNotConfigured(
            "no model configured: pass --model, set VAULTCTX_LLM_MODEL, or run"
            " `vaultctx config llm_model openai/gpt-4o-mini`"
        )
    return settings.model


def _call_kwargs(
    model: str,
    messages: Sequence[Message],
    settings: LLMSettings,
    *,
    tools: Sequence[Mapping[str, Any]] | None,
    tool_choice: str | Mapping[str, Any] | None,
    response_format: Mapping[str, Any] | None,
    temperature: float | None,
    max_tokens: int | None,
) -> dict[str, Any]:
    """litellm's arguments, except the per-attempt timeout. Its own retries are off: ours
    keep to the call's time limit. Options left unset are not sent, so the provider's
    defaults hold; `drop_params` drops those a provider does not take."""
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": [dict(m) for m in messages],
        "num_retries": 0,
        "max_retries": 0,
        "drop_params": True,
        **settings.litellm_kwargs(),
    }
    if tools:
        kwargs["tools"] = [dict(t) for t in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
    if response_format is not None:
        kwargs["response_format"] = dict(response_format)
    if temperature is not None:
        kwargs["temperature"] = temperature
    if max_tokens is not None:
        kwargs["max_tokens"] = max_tokens
    return kwargs


def _attempt_until_answered(
    litellm: Any, kwargs: dict[str, Any], call: _Call, max_retries: int
) -> Any:
    """litellm's response to the first attempt that succeeds. Each attempt gets the time
    left; a failure that is not retried raises as vaultctx's error, carrying the record."""
    while True:
        call.attempts += 1
        try:
            return litellm.completion(**kwargs, timeout=max(call.remaining(), 0.001))
        except Exception as exc:  # map whatever litellm or the provider raised
            error = _map_exception(exc, litellm)
            if _should_retry(error, exc, call, max_retries):
                continue
            error.record = call.failed(error)
            raise error from exc


def _should_retry(error: LLMError, exc: Exception, call: _Call, max_retries: int) -> bool:
    """Another attempt only for a transient failure, while retries are left and enough of
    the time limit remains for it to be worth starting."""
    retryable = isinstance(error, LLMFailed) and _transient(exc)
    return retryable and call.attempts <= max_retries and call.remaining() > MIN_RETRY_WINDOW


def _completion(response: Any, call: _Call) -> Completion:
    """The answer in provider-neutral form, with the record of a call that succeeded."""
    latency_ms = call.latency_ms()
    usage = _usage(response)
    choice = response.choices[0]
    message = choice.message
    record = CallRecord(
        model=call.model,
        tokens_in=int(usage.get("prompt_tokens") or 0),
        tokens_out=int(usage.get("completion_tokens") or 0),
        latency_ms=latency_ms,
        outcome="ok",
        error=None,
        started_at=call.started_at,
        attempts=call.attempts,
    )
    return Completion(
        content=getattr(message, "content", None),
        tool_calls=tuple(_tool_call(c, i) for i, c in enumerate(message.tool_calls or ())),
        usage=usage,
        finish_reason=getattr(choice, "finish_reason", None),
        record=record,
    )


def _usage(response: Any) -> dict[str, Any]:
    usage = getattr(response, "usage", None)
    if usage is None:
        return {}
    data = usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)
    return {k: v for k, v in data.items() if isinstance(v, int | float)}


def _tool_call(call: Any, index: int) -> ToolCall:
    function = getattr(call, "function", None)
    raw = getattr(function, "arguments", None) or ""
    try:
        arguments = json.loads(raw) if isinstance(raw, str) and raw else raw or {}
    except json.JSONDecodeError:
        arguments = {}
    return ToolCall(
        id=getattr(call, "id", None) or f"call_{index}",
        name=getattr(function, "name", None) or "",
        arguments=arguments if isinstance(arguments, dict) else {},
        raw_arguments=raw if isinstance(raw, str) else json.dumps(raw),
    )


def _map_exception(exc: Exception, litellm: Any) -> LLMError:
    """litellm's and the provider's exceptions, as vaultctx's own."""
    status = getattr(exc, "status_code", None)
    message = " ".join(str(getattr(exc, "message", None) or exc).split())
    if isinstance(exc, litellm.Timeout):
        return LLMTimeout(f"the model did not answer in time: {message}")
    if isinstance(exc, litellm.RateLimitError) or status == 429:
        return LLMRateLimited(f"rate limited (429): {message}")
    if status:
        return LLMFailed(f"{status} {message}")
    return LLMFailed(f"{type(exc).__name__}: {message}")


def _transient(exc: Exception) -> bool:
    """Worth another attempt: rate limits, server errors and dropped connections."""
    status = getattr(exc, "status_code", None)
    if status is None:
        return type(exc).__name__ in ("APIConnectionError", "ServiceUnavailableError")
    return status == 429 or status >= 500
