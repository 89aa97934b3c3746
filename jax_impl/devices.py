"""Device set-up for JAX: simulated CPU devices, presence checks, precision."""

from __future__ import annotations

import os
from pathlib import Path

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from parity.api import Cluster, DeviceUnavailable, port_free, split_address

# Variants that are not the framework out of the box: bfloat16 inputs (the harness runs '+bf16' only
# where the device computes in bfloat16 natively). JAX's other tuned settings are process-wide
# XLA_FLAGS (tuned_configs below): the harness gives each a worker of its own.
TUNED_VARIANTS: tuple[str, ...] = (
    "jit+bf16",
    "jit+scan",
    "jit+pool",
    "shard_map+scan",
    "shard_map+bf16",
    "shard_map+pool",
    "jit+bf16+pool",
    "shard_map+bf16+pool",
    "predict+dots",
)
# Variants that compute in bfloat16 (an operation's inputs and outputs; the CNN's mixed precision, float32
# parameters): a row's number format, declared here, never read off its name.
BFLOAT16_VARIANTS: tuple[str, ...] = ("jit+bf16", "shard_map+bf16", "jit+bf16+pool", "shard_map+bf16+pool")
# Variants that tune only the host's dispatch (several steps in one program): under `--configs levers` the
# process-wide settings below, which act on the kernels, run without them (each lever measured on its own).
DISPATCH_VARIANTS: tuple[str, ...] = ("jit+scan", "shard_map+scan")
# The best-known configuration's variants, in order of preference (`--configs best` times, for each workload,
# replica count and number format, the first offered, under the process-wide setting of its format below): the
# CNN with the elementwise pooling gradient ('+pool', faster with every setting), its inference with YNNPACK on the
# dots alone ('+dots', so that oneDNN gets its convolutions), the operations as they are (their only lever is the
# setting). Measured on a Zen 5 only (docs/performance.md, "Which configuration the default
# times"); `--configs levers` times every lever on its own to check it elsewhere.
BEST_VARIANTS: tuple[str, ...] = (
    "jit+pool",
    "shard_map+pool",
    "jit+bf16+pool",
    "shard_map+bf16+pool",
    "jit",
    "shard_map",
    "jit+bf16",
    "shard_map+bf16",
    "predict+dots",
    "predict",
)
# Process-wide settings that make JAX faster than out of the box, by device: name -> environment.
# YNNPACK: XLA:CPU's newer kernel library. The list below replaces XLA's default one (no '+'/'-' modifiers): YNNPACK
# for dots and reductions, XLA's own convolutions (out of the box, JAX 0.12 sends float32 convolutions to YNNPACK).
# Not 'eltwise': YNNPACK's elementwise fusions take a convolution in with the bias add after it (every conv of the
# CNN), which keeps oneDNN (below) from it; alone, the list with or without 'eltwise' times the same
# (docs/performance.md, "YNNPACK's elementwise fusions took the CNN's convolutions"). Rows: '...+ynn'.
_TUNED_CONFIGS = {"cpu": {"ynn": {"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type=dot,reduce"}}}
# oneDNN: from jaxlib 0.11, XLA:CPU's oneDNN rewriter turns bfloat16 convolutions into oneDNN's own bfloat16
# kernels (the library TensorFlow's CPU kernels use). Out of the box XLA:CPU computes a bfloat16 conv as a float32
# one between two conversions, slower than float32 itself; float32 convs YNNPACK takes first. So a configuration for
# CPUs with bfloat16 hardware only (rows '...+onednn'; docs/performance.md). Float32 convolutions reach it only with
# YNNPACK's list emptied or replaced: the next setting.
ONEDNN_CONFIG = {"XLA_FLAGS": "--xla_cpu_experimental_onednn_custom_call=true"}
# Both: YNNPACK for dots and reductions, oneDNN for every convolution (float32 ones too, since YNNPACK's list no
# longer takes them) with its bias add. Offered where '+onednn' is; measured on a Zen 5 only (docs/performance.md).
YNN_ONEDNN_CONFIG = {"XLA_FLAGS": f"{_TUNED_CONFIGS['cpu']['ynn']['XLA_FLAGS']} {ONEDNN_CONFIG['XLA_FLAGS']}"}


# Transparent huge pages for XLA:CPU's buffers. XLA:CPU takes each large buffer (the conv's 2.1 GB output) from a
# fresh mapping and unmaps it when freed, so each call faults its memory in 4 KB at a time; glibc 2.35+ asks the
# kernel for 2 MB pages for such mappings with this tunable (madvise), which a kernel whose THP mode is 'madvise'
# grants ('always' grants them out of the box, 'never' refuses: no configuration then). TensorFlow's allocator
# keeps its buffers between calls and gains nothing. Rows run with it are named '...+thp' (docs/performance.md,
# "Huge pages for XLA:CPU's buffers").
THP_CONFIG = {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")
# Huge pages, and malloc keeping freed memory for the next buffer, as TensorFlow's allocator does: with mmap off
# (mmap_max=0) a large buffer comes from the heap, and a trim threshold of 1 TiB never gives the heap's top back,
# so a call's 2.1 GB output lands on pages the last call's already faulted in (the kernel zeroes no page again).
# The process holds the freed memory: its rows' peak memory is a lower bound (parity.engine.memory).
# Rows '...+thp+heap'.
# Not in BEST_CONFIGS: in one default run some of its calls took 2-8x the others (why was not established), so it
# is a lever `levers` measures (docs/performance.md, "Malloc's heap").
HEAP_TUNABLES = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1099511627776"
HEAP_CONFIG = {"GLIBC_TUNABLES": f"{THP_CONFIG['GLIBC_TUNABLES']}:{HEAP_TUNABLES}"}


# The number formats `--configs best` and `levers` run each configuration with, by its mechanism: YNNPACK's
# fusions are float32 dots and reductions; oneDNN's rewriter takes bfloat16 convolutions and dots, and with
# YNNPACK's list float32 convolutions too; huge pages and the heap act on every buffer, and run with the kernels'
# settings (huge pages alone, 'thp', only under `--configs all`, as every combination).
TUNED_CONFIG_FORMATS: dict[str, tuple[str, ...]] = {
    "ynn": ("float32",),
    "onednn": ("bfloat16",),
    "thp": (),
    "ynn+thp": ("float32",),
    "onednn+thp": ("bfloat16",),
    "ynn+onednn": ("float32", "bfloat16"),
    "ynn+onednn+thp": ("float32", "bfloat16"),
    "ynn+onednn+thp+heap": ("float32", "bfloat16"),
}
# Which of them `--configs best` runs: for each number format, the first offered that acts on it (levers: all).
BEST_CONFIGS: tuple[str, ...] = ("ynn+onednn+thp", "ynn+thp", "onednn+thp", "ynn+onednn", "ynn", "onednn")


def tuned_configs(device: str, native_bf16: bool = False) -> dict[str, dict[str, str]]:
    """Process-wide settings worth a worker of their own on `device` ({name: environment variables});
    native_bf16: the device multiplies bfloat16 in hardware (the caller knows: parity.judging.roofline.native_bf16).
    Where huge pages can be asked for, each configuration runs with them ('ynn+thp'), and they alone ('thp'); both
    libraries' setting with the heap kept too ('ynn+onednn+thp+heap')."""
    configs = dict(_TUNED_CONFIGS.get(device, {}))
    if device == "cpu" and _version(jax.__version__) >= (0, 11) and native_bf16:
        configs["onednn"] = ONEDNN_CONFIG
        configs["ynn+onednn"] = YNN_ONEDNN_CONFIG
    if device == "cpu" and huge_pages_on_request():
        configs = {"thp": THP_CONFIG, **{f"{k}+thp": {**env, **THP_CONFIG} for k, env in configs.items()}}
        if "ynn+onednn+thp" in configs:
            configs["ynn+onednn+thp+heap"] = {**YNN_ONEDNN_CONFIG, **HEAP_CONFIG}
    return configs


def huge_pages_on_request(mode_file: Path = THP_MODE) -> bool:
    """Whether glibc's hugetlb tunable changes anything here: glibc 2.35 or later, and a kernel that grants
    transparent huge pages to the mappings that ask ('madvise')."""
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""  # 'glibc 2.36'; absent on other C libraries
        mode = mode_file.read_text()  # 'always [madvise] never'
    except (AttributeError, ValueError, OSError):
        return False
    name, _, version = libc.partition(" ")
    return name == "glibc" and _version(version) >= (2, 35) and "[madvise]" in mode


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(".")[:2] if p.isdigit())


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


def lowered_flops(fn, *args, devices: int = 1) -> tuple[float | None, str]:
    """FLOPs of one call of jitted/pmapped `fn` by XLA's cost analysis (per device, times `devices`)."""
    try:
        ca = fn.lower(*args).cost_analysis()
    except Exception as e:  # best effort: the analytic count stays the primary figure
        return None, f"XLA cost analysis failed ({type(e).__name__})"
    ca = ca[0] if isinstance(ca, (list, tuple)) and ca else ca
    flops = ca.get("flops") if isinstance(ca, dict) else None
    return (flops * devices if flops else None), "XLA cost analysis"


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
