"""The benchmark scripts' timing loop and their JSON record."""

from __future__ import annotations

import json
import time
from collections.abc import Callable


def call_times(call: Callable[[], object], calls: int, warmup: int = 1) -> list[float]:
    """Seconds each of `calls` calls of `call` took, timed one by one after `warmup` untimed calls. `call` has to
    wait for its own result (block_until_ready, .numpy()) for the time to be the work's."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return times


def write_json(path: str | None, out: dict) -> None:
    """`out` into the file at `path` (indented by one), where a path was given."""
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
