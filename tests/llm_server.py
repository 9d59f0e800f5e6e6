"""A scripted OpenAI-compatible chat server on 127.0.0.1, for tests that call a model for real.

Requests go through litellm and an HTTP client exactly as they would to a provider; only the
answers are scripted. Each test says how the "model" behaves:

    llm_server.script(Reply(content='{"keep": []}'))              # every request
    llm_server.script([Reply(status=500), Reply(content="ok")])   # one reply per request
    llm_server.script(lambda request: Reply(content=request.last_user_text))

A reply can carry text, OpenAI-format tool calls, a delay (a slow model), an HTTP status
(500, 429 …) or a raw body. Every request body received is kept in `llm_server.requests`.

Use it from a test module with `from llm_server import llm_server_fixture  # noqa: F401`
and a test parameter named `llm_server`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")


@dataclass(frozen=True)
class ToolCallReply:
    """One tool call the scripted model makes; `arguments` is sent as a JSON string."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """What the server answers to one request."""

    content: str | None = None
    tool_calls: tuple[ToolCallReply, ...] = ()
    delay: float = 0.0
    status: int = 200
    body: dict[str, Any] | str | None = None  # sent as is, instead of a chat completion
    usage: dict[str, int] | None = None
    finish_reason: str | None = None


@dataclass(frozen=True)
class Request:
    """One request the server received."""

    path: str
    headers: dict[str, str]  # names lower-cased: HTTP header names are case-insensitive
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def text(self) -> str:
        """Every message's text content, joined: what the model was shown."""
        return "\n".join(_content_text(m.get("content")) for m in self.messages)

    @property
    def last_user_text(self) -> str:
        users = [m for m in self.messages if m.get("role") == "user"]
        return _content_text(users[-1].get("content")) if users else ""


Responder = Callable[[Request], Reply]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def completion_body(request: Request, reply: Reply, serial: int) -> dict[str, Any]:
    """A chat.completion object as OpenAI returns it."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{serial}_{i}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(call.arguments),
                },
            }
            for i, call in enumerate(reply.tool_calls)
        ]
    prompt_tokens = max(1, len(request.text.split()))
    completion_tokens = max(1, len((reply.content or "").split()))
    usage = reply.usage or {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    return {
        "id": f"chatcmpl-test-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": reply.finish_reason
                or ("tool_calls" if reply.tool_calls else "stop"),
            }
        ],
        "usage": usage,
    }


class LLMServer:
    """The server and its script. `url` is the base; litellm wants `url + "/v1"`."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._responder: Responder = lambda request: Reply(content="ok")
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def api_base(self) -> str:
        return self.url + "/v1"

    def script(self, behaviour: Reply | Iterable[Reply] | Responder) -> None:
        """Set how the model answers: one reply for every request, a sequence of replies
        (one per request, the last one repeated), or a function of the request."""
        with self._lock:
            self._queue.clear()
            if isinstance(behaviour, Reply):
                reply = behaviour
                self._responder = lambda request: reply
            elif callable(behaviour):
                self._responder = behaviour
            else:
                replies = list(behaviour)
                if not replies:
                    raise ValueError("script needs at least one reply")
                self._queue.extend(replies[:-1])
                last = replies[-1]
                self._responder = lambda request: last

    def _next_reply(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
            responder = self._responder
        return responder(request)

    def close(self) -> None:
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self
        serial = iter(range(1, 1_000_000_000))

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: tests read `requests`, not a log."""

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                path = self.path.split("?", 1)[0]
                if path not in CHAT_PATHS:
                    self._send(404, {"error": {"message": f"no route {path}"}})
                    return
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "request body is not JSON"}})
                    return
                headers = {name.lower(): value for name, value in self.headers.items()}
                request = Request(path, headers, body)
                reply = server._next_reply(request)
                if reply.delay and server._closing.wait(reply.delay):
                    return
                if reply.body is not None:
                    self._send(reply.status, reply.body)
                elif reply.status != 200:
                    kind = "rate_limit_exceeded" if reply.status == 429 else "server_error"
                    message = reply.content or f"scripted {reply.status}"
                    self._send(reply.status, {"error": {"message": message, "type": kind}})
                else:
                    self._send(200, completion_body(request, reply, next(serial)))

            def _send(self, status: int, payload: dict[str, Any] | str) -> None:
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to answer

        return Handler


@pytest.fixture(name="llm_server")
def llm_server_fixture() -> Iterator[LLMServer]:
    """A fresh scripted model server for one test; answers "ok" until scripted."""
    server = LLMServer()
    try:
        yield server
    finally:
        server.close()
