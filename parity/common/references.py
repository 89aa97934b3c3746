"""A parity round's float64 references (the oracles' outputs and the bounds derived from them), computed in the
parent's background while the workers' untimed parity rounds run, where the run compiles ahead (Config.ahead: an
accelerator's host, whose cores are not what is timed); elsewhere each is computed where its check first asks. The
same function on the same inputs either way: a reference is found by a digest of its inputs.

The background is one thread that takes its jobs in order, and only while the gate is open: a worker's timed calls
close it (pause: the job under way ends, the others wait), its next untimed round opens it again (resume), so no
reference is computed beside a timed call. A job not begun when its check asks is computed there."""

from __future__ import annotations

import hashlib
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np


class _Gated:
    """One daemon thread running queued jobs in order while the gate is open."""

    def __init__(self):
        self.jobs: deque[tuple[Future, Callable, tuple]] = deque()
        self.cv = threading.Condition()
        self.open, self.busy = True, False
        threading.Thread(target=self._serve, name="float64", daemon=True).start()

    def submit(self, fn: Callable, args: tuple) -> Future:
        fut: Future = Future()
        with self.cv:
            self.jobs.append((fut, fn, args))
            self.cv.notify_all()
        return fut

    def _serve(self) -> None:
        while True:
            with self.cv:
                self.cv.wait_for(lambda: self.open and self.jobs)
                fut, fn, args = self.jobs.popleft()
                if not fut.set_running_or_notify_cancel():  # its check took it first
                    continue
                self.busy = True
            try:
                fut.set_result(fn(*args))
            except BaseException as e:  # raised where its check asks
                fut.set_exception(e)
            with self.cv:
                self.busy = False
                self.cv.notify_all()

    def pause(self) -> float:
        """Close the gate and wait for the job under way (none begins until resume); the seconds waited."""
        t0 = time.monotonic()
        with self.cv:
            self.open = False
            self.cv.wait_for(lambda: not self.busy)
        return time.monotonic() - t0

    def resume(self) -> None:
        with self.cv:
            self.open = True
            self.cv.notify_all()


_BACKGROUND: list[_Gated] = []  # the parent's one background thread, made at the first job


def _background() -> _Gated:
    if not _BACKGROUND:
        _BACKGROUND.append(_Gated())
    return _BACKGROUND[0]


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
    """One workload's float64 references by their inputs: begun in the background (`ahead`) or computed at get."""

    def __init__(self, ahead: bool):
        self.ahead = ahead
        self._jobs: dict[str, Future] = {}

    def start(self, fn: Callable, *args) -> None:
        """fn(*args) queued for the background where the run computes ahead (else nothing: get computes it)."""
        if not self.ahead:
            return
        key = _key(fn, args)
        if key not in self._jobs:
            self._jobs[key] = _background().submit(fn, args)

    def get(self, fn: Callable, *args) -> Any:
        """fn(*args): the background's answer where it began there (its exception raised here), else computed now."""
        job = self._jobs.get(_key(fn, args)) if self._jobs else None
        if job is None or job.cancel():  # never queued, or not begun: computed here
            return fn(*args)
        return job.result()


def pause() -> float:
    """Before timed calls: no reference begins until resume(), the one under way is waited for; the seconds waited."""
    return _BACKGROUND[0].pause() if _BACKGROUND else 0.0


def resume() -> None:
    """In an untimed round: the queued references go on."""
    if _BACKGROUND:
        _BACKGROUND[0].resume()
