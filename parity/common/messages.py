"""The error that ends a run (one line for the user), a bug inside a worker, and the lines a run prints as it goes
(progress, and boxed warnings about what it measures). Shared by the engine and the workloads' parent sides; `cfg`
is the run's parity.engine.config.Config (progress, cluster)."""

from __future__ import annotations

import sys
import time


class HarnessError(RuntimeError):
    """A run that cannot go on: `line` is the one line the user sees (escaped where it is printed, since it may
    quote a path), `detail` what follows it as it was written (a dead worker's last words)."""

    def __init__(self, line: str, detail: str = ""):
        super().__init__(line + (f":\n{detail}" if detail else ""))
        self.line, self.detail = line, detail


class WorkerBug(RuntimeError):
    """An unexpected exception inside a worker (a bug, not a bad input): the run stops with its traceback."""

    def __init__(self, message: str, traceback: str):
        super().__init__(message)
        self.traceback = traceback


def log(cfg, msg: str) -> None:
    if cfg.progress:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def warn(cfg, lines: list[str]) -> None:
    """A boxed warning on stderr, --quiet or not, about what the run measures (process 0 only)."""
    if cfg.cluster is not None and cfg.cluster.process_id:
        return
    bar = "=" * max(len(ln) for ln in lines)
    print("\n".join([bar, *lines, bar]), file=sys.stderr, flush=True)
