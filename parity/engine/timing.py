"""The one timing core for both frameworks.

Every timed call is synchronised (the framework's `block` on every output) and its output is
verified afterwards (shape, placement, values against the float64 oracle on a few rows), outside the timed
interval; the release of the output is timed, as a user's loop pays it, and so is the work the framework's own
threads go on doing after that (`busy_after`: a standalone JAX bfloat16 conv's execution thread went on computing
after its call had returned; docs/statistics.md), which would otherwise land in the next row's time. A call
that fails verification invalidates the whole measurement: its row is never printed as a result.
Compile (first call) time is kept apart from the steady-state repetitions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from parity.workloads.base import Invalid, Verifier


@dataclass
class Measurement:
    """Times of one computation: first call apart, then the steady-state repetitions."""

    compile_s: float | None = None
    times: list[float] = field(default_factory=list)
    errors: dict[str, float] = field(default_factory=dict)
    invalid: str | None = None
    last: dict[str, float] = field(default_factory=dict)  # the last call's verification figures
    after: list[float] = field(default_factory=list)  # of each timed call: its busy_after part (in `times`)
    last_after: float = 0.0

    @property
    def verified(self) -> bool:
        return self.invalid is None and self.compile_s is not None and bool(self.times)

    def stats(self) -> dict[str, float | int | None]:
        """median, IQR (and its quartiles), min and count of the steady-state times (None when not verified)."""
        if not self.verified:
            return {"median_s": None, "iqr_s": None, "q1_s": None, "q3_s": None, "min_s": None, "reps": len(self.times)}
        q1, med, q3 = (float(q) for q in np.percentile(self.times, [25, 50, 75]))
        return {
            "busy_after_s": float(np.median(self.after)) if self.after else None,
            "median_s": med,
            "iqr_s": q3 - q1,
            "q1_s": q1,
            "q3_s": q3,
            "min_s": min(self.times),
            "reps": len(self.times),
        }


# busy_after: this process counts as busy while its threads use more than this fraction of one core
IDLE_SHARE = 0.2


def busy_after(poll_s: float = 0.0005, limit_s: float = 2.0, clock=None, cpu=None, sleep=None) -> float:
    """How long this process's threads go on computing after a call has returned: polls the process's CPU time
    every `poll_s` until a poll finds it idle (under IDLE_SHARE of one core) and returns the time to the end of
    the last busy poll (0 if the first is idle; at most `poll_s` above the work's end otherwise). At most about
    `limit_s` (polls are counted, so a frozen clock cannot hold it). clock, cpu, sleep: time's by default."""
    clock, cpu, sleep = clock or time.perf_counter, cpu or time.process_time, sleep or time.sleep
    start = last = clock()
    used = cpu()
    for _ in range(max(1, round(limit_s / poll_s))):
        sleep(poll_s)
        now, then = clock(), used
        used = cpu()
        if used - then < IDLE_SHARE * max(now - last, poll_s):
            break
        last = now
    return last - start


class Timer:
    """Times calls of `run`, synchronising with `block` and checking each output with `verify`.

    Use `first()` once (compile + first execution), then `rep()` as often as wanted; a harness
    can interleave `rep()` calls of several Timers (or processes) so drift hits them all.
    """

    def __init__(
        self,
        run: Callable[[], Any],
        block: Callable[[Any], None],
        verify: Verifier,
        agree: Callable[[float], float] = float,
    ):
        """agree: the time every process of a multi-process run records for a call (the implementations'
        `slowest`, a small collective made after the timed interval); in one process, the time itself."""
        self.run, self.block, self.verify, self.agree = run, block, verify, agree
        self.m = Measurement()
        self.memory = None  # a parity.engine.memory.RowMemory: read around each call, outside the timed interval
        self.program: Callable[[], str | None] | None = None  # the case's compiled program's text (--profile)
        self.busy_after: Callable[[], float] = busy_after  # the framework's work once the output is ready
        self.ahead_s = 0.0  # the seconds its first call's program took to compile ahead (parity.engine.ahead)

    def warm(self) -> float | None:
        """One synchronised, verified call that is not recorded; returns its time: the call, its synchronisation
        and the release of its output, never the verification between them."""
        if self.m.invalid is not None:
            return None
        if self.memory:
            self.memory.before_call()
        t0 = time.perf_counter()
        out = self.run()
        self.block(out)
        dt = time.perf_counter() - t0
        if self.memory:
            self.memory.after_call()
        try:
            errs = self.verify(out)
        except Invalid as e:
            self.m.invalid = str(e)
            errs = None
        finally:
            # A user's loop releases every call's output; where a framework frees it at once (XLA:CPU unmaps a
            # large output), that is part of the call's cost (docs/statistics.md has the conv's figures).
            t1 = time.perf_counter()
            del out
            dt += time.perf_counter() - t1
            # and whatever the framework's threads still compute once the output is gone (work that ended during
            # the verification is not seen: its cost lands there, outside every timed interval)
            after = self.busy_after()
        dt = self.agree(dt + after)  # every process takes part, whatever its own verdict
        if errs is None:
            return None
        self.m.last, self.m.last_after = errs, after
        for k, v in errs.items():
            if k.startswith("max_"):
                self.m.errors[k] = max(self.m.errors.get(k, 0.0), v)
        return dt

    def untimed(self) -> float:
        """One call outside the row's figures (the profiled one): its time as warm() takes it (the call, its
        synchronisation, the release of its output, the framework's work after), unverified and unrecorded."""
        t0 = time.perf_counter()
        out = self.run()
        self.block(out)
        del out
        return time.perf_counter() - t0 + self.busy_after()

    def first(self) -> float | None:
        """Compile and run once; returns the first-call time (None if the output is invalid), with the seconds its
        program took to compile ahead where it was (ahead_s)."""
        t = self.warm()
        self.m.compile_s = None if t is None else t + self.ahead_s
        return self.m.compile_s

    def rep(self) -> float | None:
        """One synchronised, verified steady-state call; returns its time (None if invalid)."""
        if self.m.compile_s is None and self.m.invalid is None:
            raise RuntimeError("call first() before rep()")
        dt = self.warm()
        if dt is not None:
            self.m.times.append(dt)
            self.m.after.append(self.m.last_after)
        return dt


def measure(run, block, verify: Verifier, warmup: int = 1, reps: int = 5) -> Measurement:
    """First call, `warmup` untimed calls, then `reps` timed calls, all in this process."""
    t = Timer(run, block, verify)
    t.first()
    for _ in range(warmup):
        t.warm()
    for _ in range(reps):
        t.rep()
    return t.m
