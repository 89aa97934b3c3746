"""One process of several: where the coordinator is, who this process is, which ports each engine uses.

Framework-free: the harness, the launcher and both implementations share it (part of the contract). The engines do the
work: JAX's multi-controller runtime (`jax.distributed.initialize`) and TensorFlow's
`MultiWorkerMirroredStrategy` (a `TF_CONFIG` cluster).

Ports, from the coordinator's port B: JAX worker configuration k (0: out of the box, 1: '+ynn', ...)
uses B + k for its coordinator; TensorFlow process i listens on B + TF_PORT_OFFSET + i. A
`TF_CONFIG` in the environment replaces TensorFlow's share (needed when the processes are on
different hosts).
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass, replace

ENV = {
    "coordinator": "PARITY_COORDINATOR",
    "num_processes": "PARITY_NUM_PROCESSES",
    "process_id": "PARITY_PROCESS_ID",
    "local_devices": "PARITY_LOCAL_DEVICES",
}
JAX_CONFIGS = 4  # ports B .. B+3: one JAX coordinator per worker configuration
TF_PORT_OFFSET = JAX_CONFIGS
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


class ClusterError(ValueError):
    """Multi-process settings that cannot work; the message is the one line the user sees."""


@dataclass(frozen=True)
class Cluster:
    """This process's place in a multi-process run.

    coordinator: 'host:port' of process 0, or 'auto': the engines find it themselves (JAX on Cloud
        TPU VMs, Slurm, Open MPI; TensorFlow from TF_CONFIG).
    num_processes, process_id: None with 'auto' (the engine says).
    local_devices: simulated CPU devices per process (0: the engine's default: 1 CPU device, or
        every local GPU / TPU core).
    port_offset: which configuration's JAX coordinator this worker joins (B + port_offset).
    timeout_s: how long start-up may wait for the other processes, and any collective for a peer.
    """

    coordinator: str
    num_processes: int | None = None
    process_id: int | None = None
    local_devices: int = 0
    port_offset: int = 0
    timeout_s: float = 120.0

    def __post_init__(self):
        if self.coordinator == "auto":
            return
        host, port = split_address(self.coordinator)
        if self.num_processes is None or self.process_id is None:
            raise ClusterError(f"coordinator {self.coordinator} given without the process count and this process's id")
        if self.num_processes < 1:
            raise ClusterError(f"the process count must be >= 1, got {self.num_processes}")
        if not 0 <= self.process_id < self.num_processes:
            raise ClusterError(f"process id {self.process_id} is not in 0..{self.num_processes - 1}")
        if port + TF_PORT_OFFSET + self.num_processes > 65535:
            raise ClusterError(
                f"coordinator port {port} leaves no room for the {TF_PORT_OFFSET + self.num_processes}"
                " ports a run uses from it"
            )

    @property
    def auto(self) -> bool:
        return self.coordinator == "auto"

    def jax_address(self) -> str | None:
        """The JAX coordinator this worker joins (None: JAX detects it)."""
        if self.auto:
            return None
        host, port = split_address(self.coordinator)
        return f"{host}:{port + self.port_offset}"

    def tf_config(self) -> dict:
        """TF_CONFIG for this process: the environment's own, else every worker on the coordinator's host.

        Raises:
            ClusterError: no TF_CONFIG and the coordinator is not on this host (each worker's
                address is unknown), or 'auto' without TF_CONFIG.
        """
        if os.environ.get("TF_CONFIG"):
            try:
                return json.loads(os.environ["TF_CONFIG"])
            except json.JSONDecodeError as e:
                raise ClusterError(f"TF_CONFIG is not JSON ({e})") from None
        if self.auto:
            raise ClusterError("TensorFlow multi-worker with --coordinator auto needs TF_CONFIG in the environment")
        host, port = split_address(self.coordinator)
        if host not in LOCAL_HOSTS:
            raise ClusterError(
                f"TensorFlow workers on several hosts need TF_CONFIG naming each one; without it "
                f"only a coordinator on this host (127.0.0.1) works, got {host}"
            )
        base = port + TF_PORT_OFFSET
        workers = [f"{host}:{base + i}" for i in range(self.num_processes)]
        return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": self.process_id}}

    def for_config(self, k: int) -> Cluster:
        """The same process, joining worker configuration k's JAX coordinator."""
        if k >= JAX_CONFIGS:
            raise ClusterError(f"at most {JAX_CONFIGS} JAX worker configurations in a multi-process run")
        return replace(self, port_offset=k)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Cluster:
        return cls(**json.loads(text))


def split_address(address: str) -> tuple[str, int]:
    """'host:port' -> (host, port). Raises ClusterError on anything else."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ClusterError(f"coordinator address must be HOST:PORT (e.g. 127.0.0.1:12355), got {address!r}")
    return host.strip("[]"), int(port)


def free_port(host: str = "127.0.0.1", span: int = 1) -> int:
    """A port P on `host` with P .. P+span-1 free right now (a later bind can still lose a race)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind((host, 0))
            base = s.getsockname()[1]
        if base + span <= 65535 and all(port_free(host, base + i) for i in range(1, span)):
            return base
    raise OSError(f"found no {span} consecutive free ports on {host}")


def port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True
