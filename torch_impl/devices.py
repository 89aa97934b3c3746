"""Device set-up for PyTorch: the CPU, a CUDA GPU and a TPU through torch_xla's PJRT runtime (both unverified here:
no GPU or TPU, and no torch_xla), threads, precision, synchronisation, memory."""

from __future__ import annotations

import importlib
import os
import sys
from contextlib import nullcontext

import numpy as np
import torch

from parity.api import Cluster, DeviceNotOffered, DeviceUnavailable

_KINDS = {"cpu": "cpu", "gpu": "cuda"}


def threads() -> int:
    """The compute threads PyTorch's CPU kernels use: the other frameworks' count (OMP_NUM_THREADS where it is set,
    else every core this process may run on), set before the first op."""
    given = os.environ.get("OMP_NUM_THREADS", "")
    return int(given) if given.isdigit() and int(given) > 0 else len(os.sched_getaffinity(0))


def xla():
    """torch_xla, PyTorch's TPU runtime (PJRT: `torch_xla.device()`, `torch_xla.sync(wait=True)`). Raises
    DeviceNotOffered where it is not installed: beside other frameworks PyTorch's rows are left out, in one line."""
    try:
        return importlib.import_module("torch_xla")
    except ImportError:
        raise DeviceNotOffered(
            "--device tpu asked for, but PyTorch reaches a TPU through torch_xla (PJRT), which is not installed here "
            "(pip install 'torch_xla[tpu]'; this path is unverified: no machine of this project's had it)"
        ) from None


def setup_devices(device: str, replicas: int, cluster: Cluster | None = None) -> list[torch.device]:
    """`replicas` handles of the one device of kind `device` (0: one). Over several the handles are the same device:
    a trainer over them runs one process a replica (DDP over gloo, torch_impl.ddp).

    Raises:
        DeviceUnavailable: a multi-process run (PyTorch takes no part in one), a device kind this PyTorch build does
            not have, a TPU where torch_xla finds none (DeviceNotOffered where torch_xla is not installed: xla()).
    """
    if cluster is not None:
        raise DeviceUnavailable("PyTorch takes no part in a multi-process run (no --coordinator for it)")
    if device == "tpu":  # one chip, eagerly: lazy tensors, each step's graph compiled by XLA (unverified)
        chips = xla().devices()
        if not chips:
            raise DeviceUnavailable("--device tpu asked for, but torch_xla found no TPU (PJRT_DEVICE=TPU)")
        return [chips[0]] * max(replicas, 1)
    if device not in _KINDS:
        raise DeviceUnavailable(f"--device {device} asked for, but PyTorch has no device of that kind here")
    if device == "gpu" and not torch.cuda.is_available():
        raise DeviceUnavailable(f"--device gpu asked for, but PyTorch found only: {describe_devices()}")
    torch.set_num_threads(threads())
    return [torch.device(_KINDS[device], 0 if device == "gpu" else None)] * max(replicas, 1)


def check_compiler(devices):
    """The parity programs compile as the timed ones: no setting of their own."""
    return nullcontext(), ""


def set_precision(precision: str) -> None:
    """'highest': float32 products in float32 (no TF32 on a GPU); 'default': PyTorch's own choice."""
    torch.backends.cuda.matmul.allow_tf32 = precision == "default"
    torch.backends.cudnn.allow_tf32 = precision == "default"
    torch.set_float32_matmul_precision("highest" if precision == "highest" else "high")


def process_info(devices) -> dict:
    """One process: {'process_id', 'num_processes', 'local_replicas'}."""
    return {"process_id": 0, "num_processes": 1, "local_replicas": len(devices)}


def describe_devices() -> str:
    """What PyTorch sees, e.g. 'cpu x1 (2 threads)', 'cuda x1 (NVIDIA H200)' or 'xla x1 (torch_xla)'."""
    if "torch_xla" in sys.modules:  # set up for a TPU (setup_devices)
        return f"xla x{len(sys.modules['torch_xla'].devices())} (torch_xla)"
    if torch.cuda.is_available():
        return f"cuda x{torch.cuda.device_count()} ({torch.cuda.get_device_name(0)})"
    return f"cpu x1 ({threads()} threads)"


def list_devices() -> list[str]:
    """Every device PyTorch sees, one description each."""
    gpus = [f"cuda:{i} {torch.cuda.get_device_name(i)}" for i in range(torch.cuda.device_count())]
    tpus = [f"{d} tpu" for d in sys.modules["torch_xla"].devices()] if "torch_xla" in sys.modules else []
    return ["cpu:0 cpu", *gpus, *tpus]


def device_kind() -> str:
    """'cpu', the first GPU's name, or 'tpu (torch_xla)' (no chip generation: no peak to read % of)."""
    if "torch_xla" in sys.modules:
        return "tpu (torch_xla)"
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def _leaves(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _leaves(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in _leaves(v)]
    return []


def placement(out) -> list[str]:
    """The devices holding the tensors of `out`, as 'cpu:0' or 'gpu:0'."""
    kinds = {"cpu": "cpu", "cuda": "gpu", "xla": "tpu"}
    return sorted(
        {"cpu:0" if t.device.type == "cpu" else f"{kinds[t.device.type]}:{t.device.index or 0}" for t in _leaves(out)}
    )


def block(out) -> None:
    """Wait until `out` is computed: a CPU op has returned when it is done; a GPU's queue is waited for; on a TPU the
    pending graph is launched and waited for (torch_xla.sync(wait=True))."""
    kinds = {t.device.type for t in _leaves(out)}
    if "cuda" in kinds:
        torch.cuda.synchronize()
    if "xla" in kinds:
        sys.modules["torch_xla"].sync(wait=True)


def step_done(device: torch.device) -> None:
    """The end of a training step: on a TPU the step's lazy graph is cut there and launched (torch_xla.sync()), so
    that an epoch is one compiled step run K times, not one graph K steps long; elsewhere nothing."""
    if device.type == "xla":
        sys.modules["torch_xla"].sync()


def slowest(seconds: float) -> float:
    """One process: its own `seconds`."""
    return float(seconds)


def memory_stats(devices) -> list[dict] | None:
    """A GPU's bytes in use and peak (`torch.cuda.memory_allocated`, `max_memory_allocated`; unverified on the CI
    machine); None on the CPU (parity reads the process's resident set instead)."""
    if devices[0].type != "cuda":
        return None
    return [{"in_use": torch.cuda.memory_allocated(), "peak": torch.cuda.max_memory_allocated()}]


def reset_memory_peak(devices) -> bool:
    """A GPU's peak is reset (`torch.cuda.reset_peak_memory_stats`); the CPU keeps none: False."""
    if devices[0].type != "cuda":
        return False
    torch.cuda.reset_peak_memory_stats()
    return True


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor's values as a float32 NumPy array (bfloat16 widened exactly)."""
    return t.detach().to("cpu", torch.float32).numpy()
