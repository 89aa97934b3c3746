"""Jobs side by side on threads, at most one a core: what compiles ahead on an accelerator's host (XLA compiles one
program on one core, with the GIL released), for a worker's timed rows (parity.engine.ahead) and its parity round
(parity.workloads.trained.parity_arrays)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor


def side_by_side(jobs: dict[str, Callable[[], bool]], bugs: tuple) -> tuple[dict[str, float], dict[str, str]]:
    """Each job (a case's `ahead`) on a thread of its own, at most one a core: the seconds of each that compiled
    something, and why each that failed did (a `bugs` exception is this code's and is raised)."""
    seconds: dict[str, float] = {}
    failed: dict[str, str] = {}

    def one(key: str) -> None:
        t0 = time.perf_counter()
        try:
            if jobs[key]():
                seconds[key] = time.perf_counter() - t0
        except bugs:
            raise
        except Exception as e:  # the framework refused: the case compiles at its first call, as without ahead
            failed[key] = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"

    if jobs:
        with ThreadPoolExecutor(min(len(jobs), os.cpu_count() or 1)) as pool:
            list(pool.map(one, jobs))
    return seconds, failed
