"""The workloads, declared once: shapes, dtypes, FLOP formulas and tolerances.

Both implementations and the harness read these; nothing else hard-codes a shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from parity.api.cnn import CNN_CONVS, CNN_DENSE, CNN_IMAGE, CNN_PARAMS
from parity.common.padding import conv_out_size, valid_taps
from parity.common.tolerances import cnn_tolerances, rounding_bound, tolerance

PRECISIONS = ("default", "highest")
DEVICES = ("cpu", "gpu", "tpu")


@dataclass(frozen=True)
class ConvSpec:
    """The article's single large convolution (NHWC images, HWIO kernels)."""

    batch: int = 128
    height: int = 256
    width: int = 256
    cin: int = 3
    cout: int = 256
    kh: int = 5
    kw: int = 5
    stride: int = 2
    padding: str = "SAME"
    dtype: str = "float32"
    seed: int = 0

    @property
    def image_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.height, self.width, self.cin)

    @property
    def kernel_shape(self) -> tuple[int, int, int, int]:
        return (self.kh, self.kw, self.cin, self.cout)

    @property
    def out_hw(self) -> tuple[int, int]:
        return conv_out_size(self.height, self.kh, self.stride, self.padding), conv_out_size(
            self.width, self.kw, self.stride, self.padding
        )

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, *self.out_hw, self.cout)

    def flops(self) -> int:
        """Multiply-adds counted as 2 FLOPs: 2 * N * Ho * Wo * Cout * Kh * Kw * Cin."""
        ho, wo = self.out_hw
        return 2 * self.batch * ho * wo * self.cout * self.kh * self.kw * self.cin

    def flops_unpadded(self) -> int:
        """The same without the multiply-adds against SAME padding's zeros (what XLA's cost analysis counts)."""
        th = valid_taps(self.height, self.kh, self.stride, self.padding)
        tw = valid_taps(self.width, self.kw, self.stride, self.padding)
        return 2 * self.batch * th * tw * self.cout * self.cin

    def min_bytes(self, itemsize: int | None = None) -> int:
        """Bytes that must cross memory at least once: read images and kernels, write the output
        (`itemsize` bytes per element; default: the spec's dtype)."""
        item = itemsize or np.dtype(self.dtype).itemsize
        return item * (math.prod(self.image_shape) + math.prod(self.kernel_shape) + math.prod(self.output_shape))

    def inputs(self) -> tuple[np.ndarray, np.ndarray]:
        """Standard-normal images and kernels, the same bytes in every process for a given seed."""
        rng = np.random.default_rng(self.seed)
        images = rng.standard_normal(self.image_shape, dtype=np.float32)
        kernels = rng.standard_normal(self.kernel_shape, dtype=np.float32)
        return images.astype(self.dtype), kernels.astype(self.dtype)

    def oracle_indices(self) -> list[int]:
        """Batch rows checked against the float64 oracle: first and last, so first and last shard."""
        return sorted({0, self.batch - 1})

    def oracle(self, inputs: tuple[np.ndarray, ...], idx: list[int]) -> np.ndarray:
        """The float64 output rows `idx`."""
        from parity.common.float64 import conv2d  # the oracle reads this module's padding rules

        images, kernels = inputs
        return conv2d(images[idx], kernels, self.stride, self.padding)

    def op_args(self) -> dict:
        """The implementations' prepare_conv arguments after the inputs and devices."""
        return {"stride": self.stride, "padding": self.padding}

    def to_dict(self) -> dict:
        return asdict(self)


CONV_FULL = ConvSpec()
CONV_QUICK = ConvSpec(batch=16, height=64, width=64, cout=32)


@dataclass(frozen=True)
class MatmulSpec:
    """A large float32 matrix product: each framework's ceiling on the machine (rows shard over replicas)."""

    m: int = 4096
    k: int = 4096
    n: int = 4096
    dtype: str = "float32"
    seed: int = 0

    @property
    def batch(self) -> int:
        return self.m

    @property
    def output_shape(self) -> tuple[int, int]:
        return (self.m, self.n)

    def flops(self) -> int:
        """Multiply-adds counted as 2 FLOPs: 2 * M * K * N."""
        return 2 * self.m * self.k * self.n

    def flops_unpadded(self) -> int:
        return self.flops()

    def min_bytes(self, itemsize: int | None = None) -> int:
        """Read both operands, write the product, once each."""
        item = itemsize or np.dtype(self.dtype).itemsize
        return item * (self.m * self.k + self.k * self.n + self.m * self.n)

    def inputs(self) -> tuple[np.ndarray, np.ndarray]:
        """Standard-normal operands, the same bytes in every process for a given seed."""
        rng = np.random.default_rng(self.seed)
        a = rng.standard_normal((self.m, self.k), dtype=np.float32)
        b = rng.standard_normal((self.k, self.n), dtype=np.float32)
        return a.astype(self.dtype), b.astype(self.dtype)

    def oracle_indices(self) -> list[int]:
        """Rows checked against float64: the first and the last, so the first and the last shard."""
        return sorted({0, self.m - 1})

    def oracle(self, inputs: tuple[np.ndarray, ...], idx: list[int]) -> np.ndarray:
        a, b = inputs
        return a[idx].astype(np.float64) @ b.astype(np.float64)

    def op_args(self) -> dict:
        return {}

    def to_dict(self) -> dict:
        return asdict(self)


MATMUL_FULL = MatmulSpec()
MATMUL_QUICK = MatmulSpec(m=256, k=256, n=256)


@dataclass(frozen=True)
class CnnSpec:
    """The notebook's Fashion-MNIST CNN training run (global batch = per-replica batch x replicas)."""

    global_batch: int = 1024
    steps_per_epoch: int = 100
    epochs: int = 10
    learning_rate: float = 1e-3
    adam_epsilon: float = 1e-7  # Keras 3's default, set on both sides (optax's is 1e-8)
    seed: int = 0
    train_size: int = 60000
    test_size: int = 10000

    @property
    def batch(self) -> int:
        return self.global_batch

    def step_flops(self, padded: bool = True) -> int:
        """Training FLOPs of one step: forward + backward = 3 x forward (the backward pass computes two
        products per layer, for the input gradient and the weight gradient; conv and dense multiply-adds x 2
        only, BatchNorm/ELU/pooling/Adam's elementwise work not counted)."""
        return 3 * self.global_batch * cnn_forward_flops(padded)

    def step_min_bytes(self) -> int:
        """A lower bound on one step's memory traffic: the batch (float32 pixels, int32 labels) read
        once, and parameters and Adam's two moments each read and written once (float32)."""
        return self.global_batch * (4 * math.prod(CNN_IMAGE) + 4) + 6 * 4 * CNN_PARAMS["trainable"]

    def infer_min_bytes(self, images: int) -> int:
        """A lower bound on inference traffic: the images, every weight once, the probabilities."""
        return images * 4 * (math.prod(CNN_IMAGE) + CNN_DENSE[-1]) + 4 * CNN_PARAMS["total"]

    def to_dict(self) -> dict:
        return asdict(self)


# The notebook's schedule (GPU/TPU default), the CPU default (shortened to finish in minutes on
# 2 cores; the output says so) and --quick.
CNN_FULL = CnnSpec()
# 5 timed epochs of 2 steps: a median, and a ratio's 95% interval needs 5 calls a side (parity.judging.stats.MIN_CALLS)
CNN_CPU = CnnSpec(global_batch=256, steps_per_epoch=2, epochs=6)
CNN_QUICK = CnnSpec(global_batch=64, steps_per_epoch=3, epochs=2, train_size=2048, test_size=512)


def cnn_forward_flops(padded: bool = True) -> int:
    """Forward FLOPs of one image: conv and dense multiply-adds x 2 (BatchNorm, ELU, pooling not counted);
    padded=False leaves out the multiply-adds against SAME padding's zeros (31% of conv3's on 7x7 maps)."""
    taps = {s: (s * 5 if padded else valid_taps(s, 5, 1, "SAME")) for s, _, _ in CNN_CONVS}
    flops = sum(2 * taps[s] ** 2 * i * o for s, i, o in CNN_CONVS)
    return flops + 2 * sum(a * b for a, b in zip(CNN_DENSE[:-1], CNN_DENSE[1:], strict=True))


# The registry: every workload once, with its specs and the kinds of row it produces.


@dataclass(frozen=True)
class RowKind:
    """One kind of timed row: what a worker builds and times, and how the parent reads the result.

    name: the rows' 'workload' field. case: the key of the parity.engine.registry.CASES entry that builds the timed
    case. variants: (implementation, replicas) -> its variants. prepare: for an operation (case 'op'), the
    implementation's function that places its inputs. tolerance:
    (device, precision, dtype) -> the oracle tolerance of the row's output, None when the workload's
    checks judge its numbers instead. epochs: one call is a training epoch (the first epoch apart,
    then epochs - 1 timed ones) rather than a calibrated number of calls. seeded: run once per --seeds.
    ceiling: its rows measure the device's ceiling (the matmul): a CPU's bfloat16 peak counts their fastest calls.
    """

    name: str
    case: str
    variants: Callable[[Any, int], tuple[str, ...]]
    tolerance: Callable[[str, str, str], float | None]
    prepare: Callable[[Any], Callable] | None = None
    epochs: bool = False
    seeded: bool = False
    ceiling: bool = False


@dataclass(frozen=True)
class Workload:
    """A workload: its specs (full size, the CPU's default, --quick), its row kinds, and the spec fields the
    command line may override (--batch, --epochs, --steps-per-epoch). A trained workload's parent side (data,
    shared initial weights, parity checks) is registered in parity.engine.registry.SUITES."""

    name: str
    full: Any
    cpu: Any
    quick: Any
    kinds: tuple[RowKind, ...]
    options: tuple[str, ...] = ()

    def spec(self, quick: bool, device: str, overrides: dict | None = None):
        """This run's spec: --quick, else the device's default schedule, then the command line's overrides."""
        base = self.quick if quick else (self.cpu if device == "cpu" else self.full)
        return replace(base, **{k: v for k, v in (overrides or {}).items() if k in self.options})


def judged_by_checks(device: str, precision: str, dtype: str) -> None:
    """No oracle tolerance: a training row is checked for finite losses and placement, its numbers by the checks."""
    return None


def cnn_forward_tolerance(device: str, precision: str, dtype: str) -> float:
    return cnn_tolerances(device, precision)["forward"]


def matmul_tolerance(device: str, precision: str, dtype: str) -> float:
    """The device's tolerance, or float32's rounding bound over the 4096-long contraction if larger."""
    return max(tolerance(device, precision, dtype), rounding_bound([MATMUL_FULL.k]))


# What each row kind asks of an implementation (parity.api.FrameworkImpl), by attribute, never by name.
def _conv_variants(impl, replicas: int) -> tuple[str, ...]:
    return impl.conv_variants(replicas)


def _matmul_variants(impl, replicas: int) -> tuple[str, ...]:
    return impl.matmul_variants(replicas)


def _cnn_variants(impl, replicas: int) -> tuple[str, ...]:
    return impl.cnn_variants(replicas)


def _infer_variants(impl, replicas: int) -> tuple[str, ...]:
    return impl.infer_variants(replicas)


def _prepare_conv(impl) -> Callable:
    return impl.prepare_conv


def _prepare_matmul(impl) -> Callable:
    return impl.prepare_matmul


WORKLOADS = {
    w.name: w
    for w in (
        Workload(
            "conv",
            CONV_FULL,
            CONV_FULL,
            CONV_QUICK,
            (RowKind("conv", "op", _conv_variants, tolerance, prepare=_prepare_conv),),
        ),
        Workload(
            "cnn",
            CNN_FULL,
            CNN_CPU,
            CNN_QUICK,
            (
                RowKind("cnn_train", "cnn_train", _cnn_variants, judged_by_checks, epochs=True, seeded=True),
                RowKind("cnn_infer", "cnn_infer", _infer_variants, cnn_forward_tolerance),
            ),
            options=("global_batch", "epochs", "steps_per_epoch"),
        ),
        Workload(
            "matmul",
            MATMUL_FULL,
            MATMUL_FULL,
            MATMUL_QUICK,
            (RowKind("matmul", "op", _matmul_variants, matmul_tolerance, prepare=_prepare_matmul, ceiling=True),),
        ),
    )
}


def row_kind(name: str) -> tuple[Workload, RowKind]:
    """The workload and row kind named `name` ('conv', 'cnn_train', ...). Raises KeyError."""
    for w in WORKLOADS.values():
        for k in w.kinds:
            if k.name == name:
                return w, k
    raise KeyError(f"no row kind {name!r}; have {[k.name for w in WORKLOADS.values() for k in w.kinds]}")


def trained(name: str) -> bool:
    """Whether rows of the kind named `name` time training epochs (the first apart) rather than calls."""
    return row_kind(name)[1].epochs
