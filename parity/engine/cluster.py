"""A multi-process run's settings, read from the command line and the environment, and what its rows mean
(the process's place itself, parity.api.cluster.Cluster, is part of the contract)."""

from __future__ import annotations

import json
import os

from parity.api.cluster import ENV, Cluster, ClusterError
from parity.common import frameworks

MAX_LOCAL_DEVICES = 1024  # as --local-devices: simulated devices per process
MAX_PROCESSES = 4096  # as --num-processes


def from_flags_or_env(
    coordinator: str | None,
    num_processes: int | None,
    process_id: int | None,
    local_devices: int | None,
    timeout_s: float = 120.0,
) -> Cluster | None:
    """The cluster from parity.run's flags (--coordinator, --num-processes, --process-id, --local-devices; None where
    not given), each falling back to its PARITY_* environment variable; None: one process.

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

    if coordinator is None:
        coordinator = env.get(ENV["coordinator"])
    if coordinator is not None and not coordinator.strip():  # given, and empty: never read as "no coordinator"
        said = "--coordinator" if env.get(ENV["coordinator"]) != coordinator else ENV["coordinator"]
        raise ClusterError(f"{said} is empty: give HOST:PORT or auto, or leave it out for a one-process run")
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


def check_tf_config(cluster: Cluster, env=None) -> None:
    """TF_CONFIG as TensorFlow's workers read it (tf_impl.devices), before any starts: JSON naming the workers
    ('cluster': {'worker': ['host:port', ...]}) and this one ('task': {'type': 'worker', 'index': i}, i among
    them); required with --coordinator auto. Raises ClusterError (one line)."""
    env = os.environ if env is None else env
    text = env.get("TF_CONFIG")
    if not text:
        if cluster.auto:
            raise ClusterError("TensorFlow multi-worker with --coordinator auto needs TF_CONFIG in the environment")
        return
    try:
        config = json.loads(text)
    except ValueError as e:
        raise ClusterError(f"TF_CONFIG is not JSON ({e})") from None
    config = config if isinstance(config, dict) else {}
    named, task = config.get("cluster"), config.get("task")
    workers = named.get("worker") if isinstance(named, dict) else None
    if not isinstance(workers, list) or not workers or not all(isinstance(w, str) and ":" in w for w in workers):
        raise ClusterError(f"TF_CONFIG names no workers (a 'cluster' with a 'worker' list of HOST:PORT): {text[:80]!r}")
    index = task.get("index") if isinstance(task, dict) else None
    if not isinstance(task, dict) or task.get("type") != "worker" or type(index) is not int:
        raise ClusterError(f"TF_CONFIG's 'task' must be {{'type': 'worker', 'index': I}}, got {task!r}"[:200])
    if not 0 <= index < len(workers):
        n = len(workers)
        raise ClusterError(f"TF_CONFIG's task index {index} is not among its {n} workers (0..{n - 1})")


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
