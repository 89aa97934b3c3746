"""Device set-up for JAX: simulated CPU devices, presence checks, precision."""

from __future__ import annotations

import os
from contextlib import nullcontext

import jax
import numpy as np
from jax._src import config as jax_config  # the thread-local config contexts (no public one for the level)
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from parity.api import Cluster, Counted, DeviceUnavailable, port_free, split_address


def setup_devices(device: str, replicas: int, cluster: Cluster | None = None) -> list[jax.Device]:
    """Make `replicas` devices of kind `device` available and return them (0: all of them).

    On the CPU, N > 1 replicas are simulated devices (`jax_num_cpu_devices`), which must be set
    before JAX's backend starts; call this first thing in a process.

    With a `cluster`, this process joins JAX's multi-controller runtime (`jax.distributed`) and the
    devices returned are every process's (the global mesh); `replicas` must be 0 then. On the CPU
    each process has `cluster.local_devices` simulated devices and talks to the others through
    XLA's gloo CPU collectives.

    Raises:
        DeviceUnavailable: the device kind is absent or has fewer than `replicas` devices, or the
            other processes cannot be reached.
    """
    if cluster is not None:
        if replicas:
            raise ValueError(f"a multi-process run uses every process's devices: replicas must be 0, got {replicas}")
        return _join(device, cluster)
    if device == "cpu":
        _collective_timeout()
        try:
            jax.config.update("jax_num_cpu_devices", max(replicas, 1))
        except RuntimeError:
            pass  # backend already up (e.g. a test session configured 8): check the count below
    try:
        devs = jax.devices(device)
    except RuntimeError:
        raise DeviceUnavailable(f"--device {device} asked for, but JAX found only: {describe_devices()}") from None
    replicas = replicas or len(devs)
    if len(devs) < replicas:
        raise DeviceUnavailable(
            f"--replicas {replicas} asked for on {device}, but JAX found {len(devs)}: {describe_devices()}"
        )
    return devs[:replicas]


def _join(device: str, cluster: Cluster) -> list[jax.Device]:
    if device == "cpu":
        _collective_timeout()
        jax.config.update("jax_num_cpu_devices", max(cluster.local_devices, 1))
        jax.config.update("jax_cpu_collectives_implementation", "gloo")  # cross-process all-reduce on CPUs
    timeout = max(1, int(cluster.timeout_s))
    if cluster.process_id == 0 and cluster.jax_address():
        host, port = split_address(cluster.jax_address())
        if not port_free("", port) or not port_free(host, port):  # JAX would crash binding it, not raise
            raise DeviceUnavailable(f"JAX coordinator port {port} is already taken on this host")
    try:
        jax.distributed.initialize(
            cluster.jax_address(),
            cluster.num_processes,
            cluster.process_id,
            initialization_timeout=timeout,
            heartbeat_timeout_seconds=timeout,
        )
    except Exception as e:  # XlaRuntimeError / ValueError / RuntimeError, by cause
        detail = " ".join(str(e).split())[:300]
        raise DeviceUnavailable(
            f"JAX process {cluster.process_id} could not join the coordinator at {cluster.jax_address() or 'auto'} "
            f"within {timeout} s ({type(e).__name__}: {detail})"
        ) from None
    try:
        devs = jax.devices(device)
    except RuntimeError:
        raise DeviceUnavailable(f"--device {device} asked for, but JAX found only: {describe_devices()}") from None
    return devs


def _collective_timeout() -> None:
    flag = "--xla_cpu_collective_call_terminate_timeout_seconds"
    if flag not in os.environ.get("XLA_FLAGS", ""):
        # N simulated devices share 2 cores: one can reach an all-reduce long after the others,
        # and XLA aborts the process after 40 s of waiting by default.
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}=1200".strip()


def process_info(devices) -> dict:
    """This process's place among the run's: {'process_id', 'num_processes', 'local_replicas'}."""
    return {
        "process_id": jax.process_index(),
        "num_processes": jax.process_count(),
        "local_replicas": sum(d.process_index == jax.process_index() for d in devices),
    }


def describe_devices() -> str:
    """What JAX sees, e.g. 'cpu x8 (TFRT_CPU_0 ...)'."""
    devs = jax.devices()
    kinds = sorted({d.device_kind for d in devs})
    return f"{devs[0].platform} x{len(devs)} ({', '.join(kinds)})"


def list_devices() -> list[str]:
    """Every device JAX sees, one description each."""
    return [f"{d.platform}:{d.id} {d.device_kind}" for d in jax.devices()]


def device_kind() -> str:
    """The device kind string of the first device (e.g. 'NVIDIA H200', 'TPU v2', 'cpu')."""
    return jax.devices()[0].device_kind


def set_precision(precision: str) -> None:
    """Process default for float32 matmul/conv: 'default' (backend's choice) or 'highest' (fp32)."""
    jax.config.update("jax_default_matmul_precision", None if precision == "default" else precision)


def on_host():
    """Where a model is built: on an accelerator, the host's CPU, where each initialiser compiles in milliseconds (a
    TPU compiles each for seconds); the trainer, inference and the parity functions run on their devices, where
    they place the arrays (or JAX moves the uncommitted ones). A CPU run (or JAX_PLATFORMS without the CPU) builds
    where it runs."""
    if jax.default_backend() == "cpu":
        return nullcontext()
    try:
        return jax.default_device(jax.local_devices(backend="cpu")[0])
    except RuntimeError:  # JAX_PLATFORMS names no CPU
        return nullcontext()


# The parity programs' compiler effort on an accelerator: XLA's optimization level O1, where the timed programs keep
# JAX's default. The checks judge the same traced program (the same operations, precisions and batch); O1 runs fewer
# of XLA's optimisation passes, which changes how fast it runs and which operations fuse, so at most the order of the
# floating-point operations, which the derived bounds allow for. Its compile time on a TPU: docs/tpu.md.
CHECK_LEVEL = "O1"


def check_compiler(devices):
    """How the untimed parity programs compile: at CHECK_LEVEL on an accelerator, as the timed ones on a CPU. The
    context sets it for the thread that enters it: a thread that compiles a parity program enters one of its own."""
    if all(d.platform == "cpu" for d in devices):
        return nullcontext(), ""
    said = f"JAX's optimization level {CHECK_LEVEL}, the timed programs at its default"
    return _optimization_level(CHECK_LEVEL), said


def _optimization_level(level: str):
    """JAX's optimization level for this thread only (its config's thread-local value): a worker compiles its rows'
    programs on other threads while its parity round runs (parity.engine.ahead), and they keep the default."""
    return jax_config.optimization_level(level)


def lowered_flops(fn, *args, devices: int = 1, text: bool = True) -> Counted:
    """FLOPs of one call of jitted/pmapped `fn` by XLA's cost analysis (per device, times `devices`), with one device's
    compiled program's text beside them (Counted.program: the program compiled for the call, which JAX keeps; not
    with `text` False, where `fn` is not what the call ran)."""
    try:
        lowered = fn.lower(*args)
        ca = lowered.cost_analysis()
    except Exception as e:  # best effort: the analytic count stays the primary figure
        return Counted(None, f"XLA cost analysis failed ({type(e).__name__})")
    ca = ca[0] if isinstance(ca, (list, tuple)) and ca else ca
    flops = ca.get("flops") if isinstance(ca, dict) else None
    return Counted(flops * devices if flops else None, "XLA cost analysis", compiled_text(lowered) if text else None)


def compiled_text(lowered) -> str | None:
    """The compiled program's text of `lowered` (XLA's HLO after optimisation), or None where it cannot be had."""
    try:
        return lowered.compile().as_text()
    except Exception:  # best effort, as the FLOP count
        return None


def put_global(a, sharding):
    """Host array `a` (the same on every process) placed with `sharding`: each process copies only
    the blocks its own devices hold (in one process: every block)."""
    a = np.asarray(a)
    return jax.make_array_from_callback(a.shape, sharding, lambda idx: a[idx])


def local_device(devices):
    """This process's first device among `devices`."""
    return next(d for d in devices if d.process_index == jax.process_index())


def gather_rows(out, lead) -> np.ndarray:
    """Rows `lead` (an index tuple) of a sharded array, on every process (a collective across processes)."""
    mesh = out.sharding.mesh
    got = jax.jit(lambda o: o.at[lead].get(out_sharding=NamedSharding(mesh, P())))(out)
    return np.asarray(got.addressable_data(0), np.float32)


def slowest(seconds: float) -> float:
    """The largest of every process's `seconds` (a collective across the run's processes; alone: itself)."""
    if jax.process_count() == 1:
        return float(seconds)
    return float(np.max(multihost_utils.process_allgather(np.array([seconds], np.float64))))


def block(out) -> None:
    """Wait until every leaf of `out` is computed."""
    jax.block_until_ready(out)


def placement(out) -> list[str]:
    """Devices of this process holding the leaves of `out`, as 'platform:id' (all of them in one process)."""
    devs = {s.device for leaf in jax.tree.leaves(out) for s in leaf.addressable_shards}
    return sorted(f"{d.platform}:{d.id}" for d in devs)


def memory_stats(devices) -> list[dict] | None:
    """Per device of this process: bytes in use and the peak (`Device.memory_stats()`); None where the backend
    keeps no statistics (the CPU). Unverified on the CI machine, which has no accelerator."""
    out = []
    for d in devices:
        if d.process_index != jax.process_index():
            continue
        s = d.memory_stats()
        if not s or "bytes_in_use" not in s:
            return None
        out.append({"in_use": s["bytes_in_use"], "peak": s.get("peak_bytes_in_use", s["bytes_in_use"])})
    return out or None


def reset_memory_peak(devices) -> bool:
    """JAX offers no reset of peak_bytes_in_use: False (parity.engine.memory then trusts only a peak that rises)."""
    return False
