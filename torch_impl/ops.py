"""One two-operand operation (the conv, the matmul) on one device: the placing, compiling and reading both share, so
each operation's module holds only its op and its layouts; and TF's SAME padding, the conv's and the CNN's."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from parity.api import DeviceUnavailable, Prepared, check_divisible
from parity.api.variants import Variant
from torch_impl.devices import placement, to_numpy


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TF's SAME padding of one spatial axis (before, after): the output is ceil(size / stride), the extra after."""
    total = max((-(-size // stride) - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def counted_flops(fn: Callable, *args) -> tuple[float | None, str]:
    """FLOPs of one call of `fn` by PyTorch's own counter (torch.utils.flop_counter: matmuls and convolutions)."""
    try:
        with FlopCounterMode(display=False) as counter:
            fn(*args)
    except Exception as e:  # best effort: the analytic count stays the primary figure
        return None, f"torch.utils.flop_counter failed ({type(e).__name__})"
    return float(counter.get_total_flops()) or None, "torch.utils.flop_counter"


def compiled(fn: Callable, on: bool, device: torch.device | None = None) -> Callable:
    """`fn` compiled by torch.compile (Inductor, its default mode; the first calls compile), or `fn` itself. Raises
    DeviceUnavailable on a TPU: Inductor makes no XLA code (there the eager variants are XLA's graphs already)."""
    if on and device is not None and device.type == "xla":
        raise DeviceUnavailable("torch.compile's variants run on a CPU or GPU; on a TPU PyTorch's eager ones are XLA's")
    if on:
        private_compile_cache()
    return torch.compile(fn, dynamic=False) if on else fn


def private_compile_cache() -> str:
    """Inductor's cache directory for this process: a fresh one, removed at exit, unless the caller set
    TORCHINDUCTOR_CACHE_DIR (the run's notes then say so: parity.engine.environment.compilation_cache_notes).
    Inductor keeps its compiled graphs and kernels under /tmp by default, across processes and runs: on a machine
    that ran a row before, its first call loads them in a fraction of a compilation's time, and a 'first call' would
    not be a compilation (docs/pytorch.md, "What it runs")."""
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        where = tempfile.mkdtemp(prefix="parity-inductor-")
        atexit.register(shutil.rmtree, where, True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = where
    return os.environ["TORCHINDUCTOR_CACHE_DIR"]


def prepare_op(
    op: Callable, v: Variant, x: np.ndarray, w: np.ndarray, devices: Sequence[torch.device], layout: Callable
) -> Prepared:
    """`op(a, b)` on the one device, with the operands laid out beforehand by `layout(x, w, options)` (cast once to
    bfloat16 where the variant says, as the other implementations' bfloat16 variants), eager or compiled as the
    variant's options say (torch_impl.catalog.OpOptions). `op` returns the output in the operands' NumPy layout.

    Raises:
        ValueError: several devices (an op has no variant over several: torch_impl.catalog).
    """
    check_divisible(x.shape[0], len(devices))
    o = v.options
    dtype = torch.bfloat16 if o.bfloat16 else torch.float32
    a, b = layout(*(torch.from_numpy(np.ascontiguousarray(m)).to(devices[0], dtype) for m in (x, w)), o)
    return prepared(compiled(op, o.compile, devices[0]), (a, b), lambda: counted_flops(op, a, b))


def prepared(f: Callable, args: tuple, cost: Callable, kernel_path: str | None = None) -> Prepared:
    """`f(*args)` under torch.inference_mode, its operands placed already: an output tensor's shape, its rows copied to
    NumPy, its device; no compiled program text (PyTorch's profiled op names are its own, aten::...)."""

    def run():
        with torch.inference_mode():
            return f(*args)

    return Prepared(
        run,
        lambda out: tuple(out.shape),
        lambda out, idx: to_numpy(out[list(idx)]),
        placement,
        cost,
        lambda: None,
        kernel_path,
    )
