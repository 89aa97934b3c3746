"""What a run is asked to do (Config), the error that ends it, and its progress lines."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from parity.common.frameworks import KEYS
from parity.engine.cluster import Cluster
from parity.workloads import WORKLOADS


class HarnessError(RuntimeError):
    """A run that cannot go on; the message is the one line the user sees."""


class WorkerBug(RuntimeError):
    """An unexpected exception inside a worker (a bug, not a bad input): the run stops with its traceback."""

    def __init__(self, message: str, traceback: str):
        super().__init__(message)
        self.traceback = traceback


@dataclass
class Config:
    device: str = "cpu"
    frameworks: tuple[str, ...] = KEYS
    workloads: tuple[str, ...] = ("conv",)
    replicas: tuple[int, ...] = ()
    precision: str = "default"
    quick: bool = False
    reps: int = 5  # the minimum; calibrated_reps() adds calls until min_time_s of timed work
    min_time_s: float = 2.0
    max_reps: int = 200
    tuned: bool = True  # also run each implementation's tuned configurations, as rows of their own
    profile: bool = False  # one more call per row, after its timed ones, under the framework's profiler
    configs: str = (
        "best"  # with tuned: 'best', 'levers' or 'all' (parity.engine.assemble.cases: which variants each times)
    )
    extra_configs: dict = field(default_factory=dict)  # framework -> {name: env}: more configurations to try
    warmup: int = 1
    timeout_s: float = 1800.0
    progress: bool = True
    data: str = "auto"
    data_dir: str | None = None
    validate: str = "auto"  # a trained workload's evaluation: 'epoch', 'end', 'none', or 'auto' (its suite decides)
    overrides: dict = field(default_factory=dict)  # spec fields from the command line (global_batch, epochs, ...)
    parity_steps: int = 20
    seeds: int = 1  # CNN training runs per variant (init, dropout and batch order seeded differently)
    cluster: Cluster | None = None  # one process of a multi-process run (parity.engine.cluster); None: the only one
    command: tuple[str, ...] = ("python", "-m", "parity.run")  # how this run was started, for advice to rerun
    exclusive: bool = False  # one owner of the device at a time (a TPU host: libtpu takes one process)
    pythons: dict = field(default_factory=dict)  # framework -> the interpreter its workers run in (default: this one)

    def spec(self, wl: str):
        """The workload's spec for this run: --quick, the device's default schedule, then overrides."""
        return WORKLOADS[wl].spec(self.quick, self.device, self.overrides)

    def replica_counts(self) -> tuple[int, ...]:
        """What was asked, else 1 and 8 simulated devices on a CPU, else every core (0).

        A multi-process run has one: every process's devices (0)."""
        if self.cluster is not None:
            return (0,)
        if self.replicas:
            return self.replicas
        return (1, 8) if self.device == "cpu" else (0,)

    def matmul_size(self) -> int:
        """The side of the square matrix products that measure a CPU's peaks."""
        return 2048 if self.quick else 4096


def log(cfg: Config, msg: str) -> None:
    if cfg.progress:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def warn(cfg: Config, lines: list[str]) -> None:
    """A boxed warning on stderr, --quiet or not, about what the run measures (process 0 only)."""
    if cfg.cluster is not None and cfg.cluster.process_id:
        return
    bar = "=" * max(len(ln) for ln in lines)
    print("\n".join([bar, *lines, bar]), file=sys.stderr, flush=True)


def gflops(x: float | None) -> str:
    """FLOP/s as GFLOP/s with one decimal, '?' when unknown."""
    return "?" if x is None else f"{x / 1e9:.1f}"
