"""A multi-process run's settings, read from the command line and the environment, and what its rows mean
(the process's place itself, parity.api.cluster.Cluster, is part of the contract)."""

from __future__ import annotations

import os

from parity.api.cluster import ENV, Cluster, ClusterError
from parity.common import frameworks

MAX_LOCAL_DEVICES = 1024  # as --local-devices: simulated devices per process
MAX_PROCESSES = 4096  # as --num-processes


def from_settings(
    coordinator: str | None,
    num_processes: int | None,
    process_id: int | None,
    local_devices: int | None,
    timeout_s: float = 120.0,
) -> Cluster | None:
    """The cluster from flags, each falling back to its PARITY_* environment variable; None: one process.

    Raises:
        ClusterError: an incomplete or contradictory set.
    """
    env = os.environ

    def number(value, name):
        if value is not None:
            return value
        text = env.get(ENV[name])
        if text is None:
            return None
        try:
            return int(text)
        except ValueError:
            raise ClusterError(f"{ENV[name]} must be a whole number, got {text!r}") from None

    coordinator = coordinator or env.get(ENV["coordinator"])
    num_processes, process_id = number(num_processes, "num_processes"), number(process_id, "process_id")
    local_devices = number(local_devices, "local_devices")
    if coordinator is None:
        if num_processes not in (None, 1) or process_id not in (None, 0):
            raise ClusterError("a process count or id was given without a coordinator address (--coordinator)")
        if local_devices:
            raise ClusterError("--local-devices is for multi-process runs; use --replicas in a single process")
        return None
    if local_devices is not None and not 0 <= local_devices <= MAX_LOCAL_DEVICES:
        raise ClusterError(
            f"--local-devices must be 0 to {MAX_LOCAL_DEVICES} (simulated devices per process), got {local_devices}"
        )
    if num_processes is not None and not 1 <= num_processes <= MAX_PROCESSES:
        raise ClusterError(f"the process count must be 1 to {MAX_PROCESSES}, got {num_processes}")
    return Cluster(coordinator, num_processes, process_id, local_devices or 0, timeout_s=timeout_s)


def run_note(cfg) -> str:
    """What a multi-process run's rows mean (cfg: the run's parity.engine.config.Config)."""
    c = cfg.cluster
    note = (
        f"multi-process run: {c.num_processes or 'auto'} processes (coordinator {c.coordinator}); each call's "
        f"time is the slowest process's (agreed after the call, outside the timed interval), each row's output "
        f"gathered from every process and checked; repetitions fixed at --reps {cfg.reps} (every process must "
        f"make the same calls)"
    )
    if cfg.device == "cpu":
        note += (
            "; no % of peak: the processes' CPUs may be one machine's or several, and a peak measured "
            "while the others start would be wrong"
        )
        if frameworks.TF in cfg.frameworks:
            note += "; TensorFlow's MultiWorkerMirroredStrategy gives each worker one CPU replica"
    return note
