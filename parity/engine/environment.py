"""What a result file records about the machine and the run, so it can be read on another machine."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from parity.common.frameworks import TORCH, on_jax
from parity.common.host import this_host
from parity.record.schema import SCHEMA_VERSION

ENV_FLAGS = (
    "XLA_FLAGS",
    "JAX_DEFAULT_MATMUL_PRECISION",
    "TF_ENABLE_ONEDNN_OPTS",
    "KERAS_BACKEND",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "OMP_NUM_THREADS",
    "GLIBC_TUNABLES",
    "JAX_COMPILATION_CACHE_DIR",
    "TORCHINDUCTOR_CACHE_DIR",
    "PARITY_LOCK_DIR",  # where --exclusive's device locks live, when not the fixed default (engine.devicelock)
)
THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


REPORTED = Path("/sys/module/page_reporting/parameters/reported_kib")


def free_page_reporting(reported: Path = REPORTED) -> bool | None:
    """Whether this (virtual) machine hands memory its kernel has kept free back to the host (virtio-balloon's free
    page reporting: some memory reported so far). Memory so handed back is slow to touch again, so a framework that
    maps its large buffers afresh (JAX on a CPU) pays more when other processes ran in between (docs/statistics.md).
    None where the kernel has no page reporting."""
    try:
        return int(reported.read_text().split()[0]) > 0
    except (OSError, ValueError, IndexError):
        return None


def transparent_hugepages(mode_file: Path = THP_MODE) -> str | None:
    """The kernel's transparent-huge-page mode ('always', 'madvise' or 'never'): whether a large buffer that an
    allocator maps afresh gets 2 MB pages decides much of XLA:CPU's time on a large conv (docs/tuning.md)."""
    try:
        text = mode_file.read_text()
    except OSError:
        return None
    return text[text.find("[") + 1 : text.find("]")] if "[" in text else None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def compilation_cache_notes(frameworks) -> list[str]:
    """A compilation cache the caller set: JAX's (JAX_COMPILATION_CACHE_DIR) or Inductor's (TORCHINDUCTOR_CACHE_DIR,
    which PyTorch's worker otherwise makes fresh: torch_impl.ops.private_compile_cache). First calls may then load
    their programs from it, and their times are a loading time, not a compilation."""
    notes = []
    where = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if where and any(on_jax(f) for f in frameworks):
        notes.append(
            f"JAX_COMPILATION_CACHE_DIR is set ({where}): a JAX or Keras-on-JAX first call may load its program "
            "from that cache, so its 'first call' time may be a loading time, not a compilation"
        )
    where = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if where and TORCH in frameworks:
        notes.append(
            f"TORCHINDUCTOR_CACHE_DIR is set ({where}): a PyTorch compiled first call may load its graphs and "
            "kernels from that cache, so its 'first call' time may be a loading time, not a compilation"
        )
    return notes


def environment(cfg, hello: dict, skipped: list[dict], argv: list[str]) -> dict:
    """Everything needed to read a result file from another machine."""
    return {
        "schema_version": SCHEMA_VERSION,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": argv,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "host_cpu": cpu_model(),
        "host_cores": os.cpu_count(),
        "host": this_host(),  # what tells this CPU from another's (parity.common.host.Host)
        "transparent_hugepages": transparent_hugepages(),
        "free_page_reporting": free_page_reporting(),
        "device": cfg.device,
        "precision": cfg.precision,
        "quick": cfg.quick,
        "reps": cfg.reps,
        "budget_s": cfg.budget_s,
        "max_reps": cfg.max_reps,
        "warmup": cfg.warmup,
        "cluster": None
        if cfg.cluster is None
        else {
            "coordinator": cfg.cluster.coordinator,
            "num_processes": cfg.cluster.num_processes,
            "local_devices": cfg.cluster.local_devices,
        },
        "git_commit": git_commit(),
        "env_flags": {k: os.environ[k] for k in ENV_FLAGS if k in os.environ},
        # each worker's own interpreter (--python may give a framework an environment of its own)
        "frameworks": {
            fw: {k: h.get(k) for k in ("versions", "device_kind", "devices", "env_flags", "python", "executable")}
            for fw, h in hello.items()
        },
        "pythons": dict(cfg.pythons),  # --python as given
        "one_owner_at_a_time": cfg.exclusive,
        "skipped": skipped,
    }
