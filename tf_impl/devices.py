"""Device set-up for TensorFlow: logical CPU devices, GPU/TPU checks, strategies, precision."""

from __future__ import annotations

import faulthandler
import json
import logging
import os
from contextlib import nullcontext

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

from parity.api import LOCAL_HOSTS, Cluster, ClusterError, DeviceUnavailable, port_free  # noqa: E402

_KIND = {"cpu": "CPU", "gpu": "GPU", "tpu": "TPU"}
# TensorFlow's runtime is process-wide (logical devices are fixed once, one MultiWorkerMirroredStrategy per
# process), so what setup_devices decided is kept for the process too: devices, strategies, the TPU resolver.
_state: dict = {}


def setup_devices(device: str, replicas: int, cluster: Cluster | None = None) -> list[str]:
    """Make `replicas` devices of kind `device` available (0: all); return their logical names.

    On the CPU, N > 1 replicas are logical CPU devices, which must be configured before the TF
    runtime starts; call this first thing in a process. On a TPU this connects to the local TPU
    system and initialises it (TPU VM; unverified on the CI machine, which has none).

    With a `cluster`, this process is one worker of a MultiWorkerMirroredStrategy (TF_CONFIG) and
    the names returned are every worker's replicas; `replicas` must be 0 then. On CPUs TensorFlow
    gives each worker one replica whatever its logical devices; on GPUs, every local GPU.

    Raises:
        DeviceUnavailable: the device kind is absent or has fewer than `replicas` cores.
    """
    kind = _KIND[device]
    if cluster is not None:
        if replicas:
            raise ValueError(f"a multi-process run uses every process's devices: replicas must be 0, got {replicas}")
        return _join(device, cluster)
    if device == "tpu":
        _state["tpu_resolver"] = _init_tpu()
    _configure_physical(device, tf.config.list_physical_devices(kind), replicas)
    logical = tf.config.list_logical_devices(kind)
    if not logical:
        raise DeviceUnavailable(f"--device {device} asked for, but TensorFlow found only: {describe_devices()}")
    replicas = replicas or len(logical)
    if len(logical) < replicas:
        raise DeviceUnavailable(
            f"--replicas {replicas} asked for on {device}, but TensorFlow found {len(logical)}: {describe_devices()}"
        )
    names = [d.name for d in logical[:replicas]]
    _state["devices"] = names
    _state["device"] = device
    return names


def _init_tpu():
    """Connect to the local TPU system and initialise it; its resolver. Raises DeviceUnavailable without one."""
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except Exception as e:  # the resolver raises assorted types when no TPU is present
        detail = (str(e).split(". ")[0] or "no detail")[:120]
        raise DeviceUnavailable(
            f"--device tpu asked for, but TensorFlow found no TPU ({type(e).__name__}: {detail}); "
            f"it sees: {describe_devices()}"
        ) from None
    return resolver


def _configure_physical(device: str, phys: list, replicas: int) -> None:
    """Before the runtime starts: `replicas` logical devices on the CPU; memory growth on each GPU."""
    if device == "cpu" and replicas > 1:
        try:
            tf.config.set_logical_device_configuration(
                phys[0], [tf.config.LogicalDeviceConfiguration() for _ in range(replicas)]
            )
        except RuntimeError:
            pass  # runtime already up (a test session configured it): the caller checks the count
    if device == "gpu":
        for gpu in phys:
            try:  # share the card with the other framework's process instead of grabbing it all
                tf.config.experimental.set_memory_growth(gpu, True)
            except RuntimeError:
                pass


def _join(device: str, cluster: Cluster) -> list[str]:
    if device == "tpu":
        raise DeviceUnavailable(
            "multi-process TensorFlow on TPUs is not supported here: TensorFlow drives a TPU pod slice from "
            "one process (TPUStrategy over the slice's TPUClusterResolver); run without --coordinator"
        )
    try:
        config = cluster.tf_config()
    except ClusterError as e:
        raise DeviceUnavailable(str(e)) from None
    os.environ["TF_CONFIG"] = json.dumps(config)
    if device == "gpu":
        for gpu in tf.config.list_physical_devices("GPU"):
            tf.config.experimental.set_memory_growth(gpu, True)
    elif tf.config.list_physical_devices("GPU"):
        tf.config.set_visible_devices([], "GPU")  # --device cpu: the workers' replicas are their CPUs
    workers = config["cluster"]["worker"]
    task = config["task"]["index"]
    host, port = workers[task].rsplit(":", 1)
    host = host.strip("[]")
    if host in LOCAL_HOSTS and not port_free(host, int(port)):  # one clear line, before TF tries to bind it
        raise DeviceUnavailable(f"TensorFlow worker {task}'s port {workers[task]} is already taken")
    # The strategy waits for every worker inside TF's C++ runtime, holding the GIL, with no timeout
    # of its own: faulthandler's C-level watchdog ends the process (traceback on stderr) if it hangs.
    # logged, not printed: what the watchdog's traceback follows, in the worker's log
    logging.getLogger(__name__).warning(
        "TensorFlow worker %s: joining %s (at most %g s)", task, ", ".join(workers), cluster.timeout_s
    )
    faulthandler.dump_traceback_later(cluster.timeout_s, exit=True)
    try:
        s = tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=tf.distribute.cluster_resolver.TFConfigClusterResolver(),
            communication_options=tf.distribute.experimental.CommunicationOptions(timeout_seconds=cluster.timeout_s),
        )
    except Exception as e:  # gRPC server errors, bad TF_CONFIG
        raise DeviceUnavailable(
            f"TensorFlow worker {task} could not start ({type(e).__name__}: {' '.join(str(e).split())[:200]})"
        ) from None
    finally:
        faulthandler.cancel_dump_traceback_later()
    local = list(s.extended.worker_devices)
    if not local or _KIND[device] not in local[0].upper():
        raise DeviceUnavailable(f"--device {device} asked for, but TensorFlow's worker {task} has {local}")
    names = [d.replace(f"/task:{task}/", f"/task:{t}/") for t in range(len(workers)) for d in local]
    if len(names) != s.num_replicas_in_sync:
        raise DeviceUnavailable(f"TensorFlow counts {s.num_replicas_in_sync} replicas, expected {len(names)}")
    _state.update(devices=names, device=device, multiworker=s, task=task)
    _state.setdefault("strategies", {})[tuple(names)] = s
    return names


def process_info(devices) -> dict:
    """This process's place among the run's: {'process_id', 'num_processes', 'local_replicas'}."""
    s = _state.get("multiworker")
    if s is None:
        return {"process_id": 0, "num_processes": 1, "local_replicas": len(devices)}
    return {
        "process_id": _state["task"],
        "num_processes": len(devices) // len(s.extended.worker_devices),
        "local_replicas": len(s.extended.worker_devices),
    }


def multiworker() -> tf.distribute.Strategy | None:
    """The MultiWorkerMirroredStrategy of a multi-process run, else None."""
    return _state.get("multiworker")


def slowest(seconds: float) -> float:
    """The largest of every worker's `seconds` (a collective across the run's workers; alone: itself)."""
    s = _state.get("multiworker")
    if s is None:
        return float(seconds)
    each = s.run(lambda: tf.constant([seconds], tf.float64))
    return float(tf.reduce_max(s.gather(each, axis=0)))


def gather_rows(out, idx) -> np.ndarray:
    """Global batch rows `idx` of a per-replica output, on every worker (a collective: each worker
    contributes the rows its replicas hold, zeros elsewhere, summed exactly across workers)."""
    s = _state["multiworker"]
    idx = np.asarray(idx)

    def pick(t):
        per = tf.shape(t)[0]
        local = tf.constant(idx, tf.int32) - tf.distribute.get_replica_context().replica_id_in_sync_group * per
        inside = (local >= 0) & (local < per)
        rows = tf.gather(t, tf.clip_by_value(local, 0, per - 1))
        mask = tf.reshape(inside, [-1] + [1] * (len(t.shape) - 1))
        return tf.where(mask, tf.cast(rows, tf.float32), tf.zeros_like(rows, tf.float32))

    return s.reduce(tf.distribute.ReduceOp.SUM, s.run(pick, args=(out,)), axis=None).numpy()


def strategy(devices: list[str]) -> tf.distribute.Strategy:
    """TPUStrategy on a TPU, MirroredStrategy over the given GPUs or logical CPUs (cached); in a
    multi-process run, the MultiWorkerMirroredStrategy made at start-up."""
    key = tuple(devices)
    if key not in _state.setdefault("strategies", {}):
        if "tpu_resolver" in _state:
            s = tf.distribute.TPUStrategy(_state["tpu_resolver"])
        elif "GPU" in devices[0]:
            s = tf.distribute.MirroredStrategy(devices)
        else:
            # NCCL is GPU-only; on CPUs the all-reduce goes through one device.
            s = tf.distribute.MirroredStrategy(devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
        _state["strategies"][key] = s
    return _state["strategies"][key]


def describe_devices() -> str:
    """What TensorFlow sees, e.g. 'CPU x8'."""
    logical = tf.config.list_logical_devices()
    counts: dict[str, int] = {}
    for d in logical:
        counts[d.device_type] = counts.get(d.device_type, 0) + 1
    return ", ".join(f"{k} x{v}" for k, v in counts.items()) or "nothing"


def list_devices() -> list[str]:
    """Every logical device TensorFlow sees."""
    return [f"{d.name} ({d.device_type})" for d in tf.config.list_logical_devices()]


def device_kind() -> str:
    """Device model where TF reports one (GPU name), else the device type."""
    gpus = tf.config.list_physical_devices("GPU")
    if _state.get("device") == "gpu" and gpus:
        return tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
    return _KIND.get(_state.get("device", "cpu"), "CPU")


def graph_flops(fn, *args) -> tuple[float | None, str]:
    """FLOPs of one call of tf.function `fn` by TF's profiler on its graph (multiplies and adds counted apart)."""
    try:
        graph = fn.get_concrete_function(*args).graph
        if any(op.type == "Einsum" for op in graph.get_operations()):
            return None, "TF profiler: not counted (it has no count for Einsum ops: the attention's projections)"
        opts = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
        opts["output"] = "none"
        return float(tf.compat.v1.profiler.profile(graph=graph, options=opts).total_float_ops) or None, "TF profiler"
    except Exception as e:  # best effort: the analytic count stays the primary figure
        return None, f"TF profiler failed ({type(e).__name__})"


def check_compiler(devices):
    """The parity programs compile as the timed ones: no setting of their own."""
    return nullcontext(), ""


def set_precision(precision: str) -> None:
    """'default': TF32 on Ampere+ GPUs, bfloat16 passes on TPU; 'highest': full float32."""
    tf.config.experimental.enable_tensor_float_32_execution(precision == "default")


def local_tensors(out) -> list[tf.Tensor]:
    """The per-device tensors of an output (a plain tensor, a PerReplica value, or a nest of them)."""
    tensors = []
    for leaf in tf.nest.flatten(out, expand_composites=False):
        if isinstance(leaf, tf.distribute.DistributedValues):
            tensors.extend(leaf.values)
        else:
            tensors.append(leaf)
    return tensors


def block(out) -> None:
    """Wait until every per-device tensor of `out` is computed (reads one element of each)."""
    for t in local_tensors(out):
        if not isinstance(t, tf.Tensor):
            continue  # already a host (NumPy) value
        if t.shape.rank:
            t[(0,) * t.shape.rank].numpy()
        else:
            t.numpy()


def placement(out) -> list[str]:
    """Devices holding the tensors of `out`, as 'platform:id' (e.g. 'cpu:3')."""
    found = set()
    for t in local_tensors(out):
        spec = tf.DeviceSpec.from_string(t.device)
        found.add(f"{spec.device_type.lower()}:{spec.device_index}")
    return sorted(found)


def graph_placement(fn, args, op_type: str) -> list[str]:
    """Devices the ops of `op_type` in the traced graph of tf.function `fn(*args)` are placed on."""
    graph = fn.get_concrete_function(*args).graph
    found = set()
    for op in graph.get_operations():
        if op.type == op_type and op.device:
            spec = tf.DeviceSpec.from_string(op.device)
            found.add(f"{spec.device_type.lower()}:{spec.device_index}")
    return sorted(found)


def memory_stats(devices: list[str]) -> list[dict] | None:
    """Per device: bytes in use and the peak since the last reset (`tf.config.experimental.get_memory_info`);
    None on the CPU (host memory is the process's) or where TensorFlow keeps no statistics. Unverified on the CI
    machine, which has no accelerator."""
    if _state.get("device", "cpu") == "cpu":
        return None
    try:
        infos = [tf.config.experimental.get_memory_info(d) for d in devices]
    except (ValueError, tf.errors.OpError):  # another worker's device, or a device without statistics
        return None
    return [{"in_use": i["current"], "peak": i["peak"]} for i in infos]


def reset_memory_peak(devices: list[str]) -> bool:
    """Reset each device's peak (`tf.config.experimental.reset_memory_stats`); False where it cannot."""
    if _state.get("device", "cpu") == "cpu":
        return False
    try:
        for d in devices:
            tf.config.experimental.reset_memory_stats(d)
    except (ValueError, tf.errors.OpError):
        return False
    return True
