"""What a result file records about the machine and the run, so it can be read on another machine."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from parity.common.frameworks import TABLE, TORCH, on_jax
from parity.common.host import this_host
from parity.record.schema import SCHEMA_VERSION

# What each framework reads from the environment that changes what its rows measure, recorded with every run (env's
# env_flags, each worker's in its hello), by name or by prefix: its row's env_read and env_prefixes in the frameworks
# table. Variables that would make a row's label false are refused before work instead (REFUSED, its row's
# env_refused; parity.cli.argtypes.check_environment).
COMMON_FLAGS = (
    "OMP_NUM_THREADS",  # PyTorch's compute threads (torch_impl.devices.threads); OpenMP's in every oneDNN build
    "MKL_NUM_THREADS",
    "GLIBC_TUNABLES",  # malloc's behaviour in every process (JAX's '+heap' setting appends to it)
    "PARITY_LOCK_DIR",  # where --exclusive's device locks live, when not the fixed default (engine.devicelock)
)
FRAMEWORK_FLAGS = {k: f.env_read for k, f in TABLE.items()}
FRAMEWORK_PREFIXES = {k: f.env_prefixes for k, f in TABLE.items() if f.env_prefixes}
REFUSED = {k: dict(f.env_refused) for k, f in TABLE.items() if f.env_refused}
ENV_FLAGS = tuple(dict.fromkeys([*COMMON_FLAGS, *(k for names in FRAMEWORK_FLAGS.values() for k in names)]))


def env_flags(fws, env=None) -> dict[str, str]:
    """The variables of ENV_FLAGS and FRAMEWORK_PREFIXES set in `env` (default: this process's) that the frameworks
    `fws` read, by name."""
    env = os.environ if env is None else env
    names = [*COMMON_FLAGS, *(k for fw in fws for k in FRAMEWORK_FLAGS.get(fw, ()))]
    prefixes = tuple(p for fw in fws for p in FRAMEWORK_PREFIXES.get(fw, ()))
    found = {k: env[k] for k in dict.fromkeys(names) if k in env}
    found.update({k: v for k, v in sorted(env.items()) if prefixes and k.startswith(prefixes)})
    return found


def refused(fws, env=None) -> str | None:
    """One line for the first variable of REFUSED set (to anything but off) for one of `fws`, else None."""
    env = os.environ if env is None else env
    for fw in fws:
        for k, why in REFUSED.get(fw, {}).items():
            if env.get(k, "").strip().lower() not in ("", "0", "false", "no", "off"):
                return f"{k}={env[k]} in the environment: {why}; unset it"
    return None


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
        "env_flags": env_flags(cfg.frameworks),
        # each worker's own interpreter (--python may give a framework an environment of its own)
        "frameworks": {
            fw: {k: h.get(k) for k in ("versions", "device_kind", "devices", "env_flags", "python", "executable")}
            for fw, h in hello.items()
        },
        "pythons": dict(cfg.pythons),  # --python as given
        "one_owner_at_a_time": cfg.exclusive,
        "skipped": skipped,
    }
