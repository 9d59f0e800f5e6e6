"""Requests the HTTP API takes: the JSON bodies of its routes (the shared operations' are the
request models of `vaultctx.operations`; the owner's `/index` and `/ask` are here), read with
limits (size, time, depth, strict JSON, valid Unicode) so that a hostile body is a 4xx
`RequestError`, never a 500 or a server holding gigabytes."""

from __future__ import annotations

import asyncio
import json
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request

from ..operations import MODEL_CHOICES

MAX_BODY_BYTES = 1024 * 1024
MAX_JSON_DEPTH = 32  # the deepest body a route takes is 3 levels
READ_TIMEOUT_S = 10.0  # for a client to send its request's headers, and then its body
M = TypeVar("M", bound=BaseModel)


class RequestError(Exception):
    """A request the server refuses: bad JSON, too large, invalid fields."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message


# --- the owner's request bodies -------------------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AskBody(_Body):
    question: str = Field(min_length=1)
    session_id: str | None = None
    model: str | None = None


class IndexBody(_Body):
    paths: list[str] | None = None
    embed: bool | None = None


async def read_body(request: Request, model: type[M], limit: int, timeout: float) -> M:
    """The request's JSON body as `model`: 413 past `limit` bytes, 408 when it takes longer
    than `timeout` seconds to arrive, 400 if it is not strict JSON (no NaN), nests deeper
    than MAX_JSON_DEPTH or holds text that is not Unicode (a lone surrogate), 422 if the
    fields are wrong. The size is checked while reading, so a huge body is never held."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise RequestError(413, "PayloadTooLarge", f"request body exceeds {limit} bytes")
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise RequestError(
                        413, "PayloadTooLarge", f"request body exceeds {limit} bytes"
                    )
                chunks.append(chunk)
    except TimeoutError:
        raise RequestError(
            408, "RequestTimeout", f"request body not sent within {timeout:g} s"
        ) from None
    data = parse_json(b"".join(chunks) or b"{}")
    if not isinstance(data, dict):
        raise RequestError(400, "BadJSON", "request body must be a JSON object")
    return validated(model, data)


def parse_json(raw: bytes) -> Any:
    """Strict JSON of bounded depth whose strings are all valid Unicode, or a 400."""
    try:
        data = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise RequestError(400, "BadJSON", "request body nests too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(400, "BadJSON", f"request body is not valid JSON: {exc}") from exc
    if _depth(data) > MAX_JSON_DEPTH:
        raise RequestError(400, "BadJSON", f"request body nests deeper than {MAX_JSON_DEPTH}")
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise RequestError(
            400, "BadUnicode", "request body holds text that is not Unicode (a lone surrogate)"
        ) from None
    return data


def model_choices(body: BaseModel) -> list[str]:
    """The `MODEL_CHOICES` fields `body` sets, even to null: a member's request naming one is
    refused, not quietly answered with another model."""
    return sorted(MODEL_CHOICES & body.model_fields_set)


def validated(model: type[M], data: Any) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid(exc) from exc


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _depth(data: Any) -> int:
    """How deep lists and objects nest in parsed JSON, without recursion."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, level)
            if level <= MAX_JSON_DEPTH:
                stack.extend(
                    (v, level + 1) for v in (value.values() if isinstance(value, dict) else value)
                )
    return deepest


def invalid(exc: ValidationError) -> RequestError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    return RequestError(422, "ValidationError", f"{where}: {first['msg']}")


def query_params(request: Request) -> dict[str, str]:
    """A GET request's parameters, held to the rules of a JSON body's text."""
    params = dict(request.query_params)
    parse_json(json.dumps(params).encode())
    return params
