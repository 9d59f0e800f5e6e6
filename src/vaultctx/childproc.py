"""Child processes as vaultctx starts them: a fresh Python fed pickled messages over pipes.

Not multiprocessing: its spawn re-runs the caller's `__main__` script in each child, and
fork is unsafe in a threaded app (the server, the file watcher). A fresh interpreter that
imports only the module it serves from starts in a known state from any parent. Parse
workers (`storage.reader`) and agent delegations (`agent.child`) both start this way.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import sys
from typing import IO, Any

_LENGTH = struct.Struct("<Q")
_MAX_MESSAGE = 1 << 30

# The child imports modules from exactly where this process does (a source checkout, a
# venv), so what it pickles unpickles here and the other way round.
_CHILD_CODE = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]);"
    " from {module} import {function}; {function}(*json.loads(sys.argv[2]))"
)


def python_can_start() -> bool:
    """Whether sys.executable is a Python: in a bundled or embedding app it is the app."""
    name = os.path.basename(sys.executable or "").lower()
    return not getattr(sys, "frozen", False) and name.startswith(("python", "pypy"))


def child_command(module: str, function: str, *args: object) -> list[str]:
    """The argv of a child that runs `module.function(*args)`; `args` must be JSON."""
    path = json.dumps([str(entry) for entry in sys.path])  # a Path sneaks in now and then
    code = _CHILD_CODE.format(module=module, function=function)
    return [sys.executable, "-c", code, path, json.dumps(list(args))]


def send(stream: IO[bytes], value: object) -> None:
    """One message: its length, then its pickle."""
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(payload)) + payload)
    stream.flush()


def receive(stream: IO[bytes]) -> Any:
    """The next message; `EOFError` when the other side closed its end (or died)."""
    header = _read_exactly(stream, _LENGTH.size)
    (size,) = _LENGTH.unpack(header)
    if size > _MAX_MESSAGE:
        raise ValueError(f"a {size}-byte message is not from a vaultctx process")
    return pickle.loads(_read_exactly(stream, size))


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    """`size` bytes; an unbuffered pipe may hand them over in pieces."""
    data = stream.read(size)
    while data is not None and 0 < len(data) < size:
        more = stream.read(size - len(data))
        if not more:
            break
        data += more
    if data is None or len(data) < size:
        raise EOFError("the other process closed the pipe")
    return data
