"""A parity round's float64 references (the oracles' outputs and the bounds derived from them), computed in the
parent's background while the workers' untimed parity rounds run, where the run compiles ahead (Config.ahead: an
accelerator's host, whose cores are not what is timed); elsewhere each is computed where its check first asks. The
same function on the same inputs either way: a reference is found by a digest of its inputs. The background is one
thread, its jobs in order; settle() waits for all of them, so that none runs beside a timed call."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

_POOL: list[ThreadPoolExecutor] = []  # the parent's one background thread, made at the first job


def _pool() -> ThreadPoolExecutor:
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(1, thread_name_prefix="float64"))
    return _POOL[0]


def _digest(h, a: Any) -> None:
    """Fold `a` (arrays, and lists, tuples and dicts of them, or plain values) into the hash `h`."""
    if isinstance(a, np.ndarray):
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    elif isinstance(a, list | tuple):
        h.update(f"{type(a).__name__}{len(a)}".encode())
        for v in a:
            _digest(h, v)
    elif isinstance(a, dict):
        _digest(h, sorted(a.items()))
    else:
        h.update(repr(a).encode())


def _key(fn: Callable, args: tuple) -> str:
    """fn's identity (its name, and by id the function or a bound method's object: a workload's model) and a digest
    of its arguments."""
    h = hashlib.sha1(f"{getattr(fn, '__qualname__', '')}#{id(getattr(fn, '__self__', fn))}".encode())
    _digest(h, args)
    return h.hexdigest()


class References:
    """One workload's float64 references by their inputs: started in the background (`ahead`) or computed at get."""

    def __init__(self, ahead: bool):
        self.ahead = ahead
        self._jobs: dict[str, Future] = {}

    def start(self, fn: Callable, *args) -> None:
        """fn(*args) begun in the background where the run computes ahead (else nothing: get computes it)."""
        if not self.ahead:
            return
        key = _key(fn, args)
        if key not in self._jobs:
            self._jobs[key] = _pool().submit(fn, *args)

    def get(self, fn: Callable, *args) -> Any:
        """fn(*args): the background's answer where it was started (its exception raised here), else computed now."""
        job = self._jobs.get(_key(fn, args)) if self._jobs else None
        return job.result() if job is not None else fn(*args)


def settle() -> float:
    """Wait for every reference started so far (the thread takes its jobs in order); the seconds waited."""
    if not _POOL:
        return 0.0
    t0 = time.monotonic()
    _POOL[0].submit(lambda: None).result()
    return time.monotonic() - t0
