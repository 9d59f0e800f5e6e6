"""Running a Researcher or Worker in its own worker thread, under a wall-clock limit.

Whatever happens inside — an exception, a hang, a model failure — the caller gets a value:
the function's result, or a structured error naming the agent. Time a person spends
answering a permission question does not count against the limit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from ..errors import VaultctxError

POLL_SECONDS = 0.05


def run_isolated(
    fn: Callable[[], dict[str, Any]],
    *,
    agent: str,
    timeout: float,
    cancelled: threading.Event,
    waiting_seconds: Callable[[], float] = lambda: 0.0,
) -> dict[str, Any]:
    """`fn()` in a fresh worker thread; `{"error": "<agent>_timeout" | "<agent>_failed",
    "message": …}` instead of raising. On timeout `cancelled` is set so the abandoned run
    stops acting at its next tool call."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"vaultctx-{agent}")
    started = time.monotonic()
    try:
        future = pool.submit(fn)
        while True:
            try:
                return future.result(timeout=POLL_SECONDS)
            except FutureTimeout:
                if time.monotonic() - started - waiting_seconds() > timeout:
                    cancelled.set()
                    return {
                        "error": f"{agent}_timeout",
                        "message": f"the {agent} did not finish within {timeout:g} s",
                    }
            except VaultctxError as exc:
                return {"error": f"{agent}_failed", "message": str(exc)}
            except Exception as exc:  # the point of isolation: nothing escapes into the turn
                return {"error": f"{agent}_failed", "message": f"{type(exc).__name__}: {exc}"}
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
