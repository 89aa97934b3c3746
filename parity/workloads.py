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
from parity.padding import conv_out_size, same_pads, valid_taps  # noqa: F401  (part of this module's surface)

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
        from parity.oracle import conv2d  # the oracle reads this module's padding rules

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
CNN_CPU = CnnSpec(global_batch=256, steps_per_epoch=3, epochs=4)  # 3 timed epochs: a median and an IQR
CNN_QUICK = CnnSpec(global_batch=64, steps_per_epoch=3, epochs=2, train_size=2048, test_size=512)


def cnn_forward_flops(padded: bool = True) -> int:
    """Forward FLOPs of one image: conv and dense multiply-adds x 2 (BatchNorm, ELU, pooling not counted);
    padded=False leaves out the multiply-adds against SAME padding's zeros (31% of conv3's on 7x7 maps)."""
    taps = {s: (s * 5 if padded else valid_taps(s, 5, 1, "SAME")) for s, _, _ in CNN_CONVS}
    flops = sum(2 * taps[s] ** 2 * i * o for s, i, o in CNN_CONVS)
    return flops + 2 * sum(a * b for a, b in zip(CNN_DENSE[:-1], CNN_DENSE[1:], strict=True))


# Float32 rounding of one CNN batch, as a model rather than a worst case. A reduction of length n
# (a sum, or the dot product inside a conv or matmul) rounded n times at unit roundoff u = 2^-24
# accumulates an error that behaves like a random walk: about sqrt(n) * u relative to its terms
# (Higham & Mary 2019, "A new approach to probabilistic rounding error analysis"; blocked and pairwise
# kernels do better, never worse). To first order the errors of successive reductions add along the
# path from the input through the loss back to a parameter, so a gradient's error is bounded by
# LAMBDA * u * sum(sqrt(n)) over that path; LAMBDA = 3 is three standard deviations of the random
# walk. The bound grows with the batch (BatchNorm statistics and weight gradients reduce over
# N x H x W) and holds for any kernel that rounds each operation once: it depends on no machine.
# Elementwise ops (exp, expm1, division) add a few ulps each, negligible beside sqrt(n) for n >= 10.
F32_UNIT_ROUNDOFF = 2.0**-24
ROUNDING_LAMBDA = 3.0


def cnn_forward_reductions(batch: int) -> list[int]:
    """Lengths of the reductions from the images to the training loss (batch statistics)."""
    out = []
    for size, cin, _ in CNN_CONVS:
        out += [batch * size * size] * 2 + [25 * cin]  # BatchNorm mean and variance, then the conv
    return out + list(CNN_DENSE[:-1]) + [CNN_DENSE[-1], batch]  # dense layers, softmax's sum, the batch mean


def cnn_backward_reductions(batch: int) -> list[int]:
    """Lengths of the reductions on the longest backward path: the loss back to the first BatchNorm's
    scale, through every layer (each conv's input gradient, each BatchNorm's two backward means)."""
    out = [CNN_DENSE[-1], CNN_DENSE[1]]  # input gradients of dense2 and dense1
    for size, _, cout in reversed(CNN_CONVS):
        out += [25 * cout] + [batch * size * size] * 2
    return out[:-1] + [batch * CNN_CONVS[0][0] ** 2]  # bn1's gamma: one sum over the batch's pixels


def rounding_bound(reductions: list[int]) -> float:
    """LAMBDA * u * sum(sqrt(n)): the modelled float32 error relative to a result's scale."""
    return ROUNDING_LAMBDA * F32_UNIT_ROUNDOFF * sum(math.sqrt(n) for n in reductions)


def cnn_loss_tolerance(batch: int, device: str = "cpu", precision: str = "highest") -> float:
    """One batch's training loss against float64: the forward path's rounding bound (float32 runs)."""
    return max(rounding_bound(cnn_forward_reductions(batch)), _reduced(device, precision, "grads"))


def cnn_grad_tolerance(batch: int, device: str = "cpu", precision: str = "highest") -> float:
    """Every gradient against float64 (max error relative to max |reference|, per parameter): the bound
    of the longest path, which covers every shorter one (3.5e-4 at batch 64). Where the device
    multiplies in TF32 or bfloat16 ('default' on GPUs and TPUs), the reduced-precision table's figure."""
    path = cnn_forward_reductions(batch) + cnn_backward_reductions(batch)
    return max(rounding_bound(path), _reduced(device, precision, "grads"))


def cnn_grad_path_sqrt(batch: int) -> float:
    """sum(sqrt(n)) over the longest path's reductions: cnn_grad_tolerance's float32 figure over LAMBDA * u."""
    return sum(math.sqrt(n) for n in cnn_forward_reductions(batch) + cnn_backward_reductions(batch))


def gradient_scale(batch: int, n: int, abs_sum: float, rss: float, ref: float) -> float:
    """The scale a gradient's error is judged against: max |reference| where nothing cancels, more where the
    gradient's last reduction cancels (cnn_grad_tolerance times this scale is its error bound).

    A parameter's gradient is, last of all, a sum of `n` terms t (bn1.gamma sums 50,176 products). Its error
    has two parts. The last reduction's own rounding, in Higham & Mary's model, is at most LAMBDA * u * sqrt(n)
    * sum|t|: relative to sum|t| (`abs_sum`), not to the result, which cancellation may make 10^4 times smaller.
    The terms' errors from the rest of the path (LAMBDA * u * (S - sqrt(n)) of their scale, S = the path's sum
    of sqrt(n)) are independent per term and add like a random walk: relative to sqrt(sum t^2) (`rss`), or to
    max |reference| where that is larger. Returned: the bound's scale, S * scale = sqrt(n) * abs_sum +
    (S - sqrt(n)) * max(rss, ref), so scale >= ref, and scale == ref (the earlier model) for one term. The
    figures are maxima over the parameter's elements. Independent of any machine: the float64 oracle's terms.
    """
    s, root = cnn_grad_path_sqrt(batch), math.sqrt(n)
    return (root * abs_sum + max(s - root, 0.0) * max(rss, ref)) / s


def _reduced(device: str, precision: str, what: str) -> float:
    return 0.0 if tolerance(device, precision) <= 1e-4 else CNN_TOLERANCES_REDUCED[what]


# CNN parity tolerances, float32 (CPU, or 'highest' anywhere). Forward: max error relative to max
# |reference| per block. (Gradients: cnn_grad_tolerance above.) Trajectory: the largest per-step loss
# difference relative to the largest loss, and the relative L2 distance of all parameters after the
# steps (Adam's first steps amplify float32 rounding in parameters whose gradients are near zero, so
# per-element figures would mislead). The trajectory's figures are margins over measurement, not derived (no
# bound on many Adam steps follows from the arithmetic): docs/numerics.md, "Every tolerance, justified".
# Accuracy: absolute band between the frameworks' test accuracies after training with dropout.
CNN_TOLERANCES = {"forward": 1e-4, "trajectory_loss": 5e-3, "trajectory_params": 2e-2, "accuracy_band": 0.05}
# TF32 (GPU) and bfloat16 passes (TPU) at 'default' precision: looser, as for the conv.
CNN_TOLERANCES_REDUCED = {
    "forward": 3e-2,
    "grads": 5e-2,
    "trajectory_loss": 5e-2,
    "trajectory_params": 1e-1,
    "accuracy_band": 0.05,
}


def cnn_tolerances(device: str, precision: str, dtype: str = "float32") -> dict[str, float]:
    """CNN parity thresholds for this device and precision; dtype 'bfloat16': the mixed-precision ('+bf16') runs'."""
    if dtype == "bfloat16":
        return CNN_TOLERANCES_BF16
    return CNN_TOLERANCES if tolerance(device, precision) <= 1e-4 else CNN_TOLERANCES_REDUCED


# Mixed-precision training ('+bf16': bfloat16 compute, float32 parameters, accumulation and Adam). bfloat16 keeps
# 8 significant bits: one rounding moves a value by at most u = 2^-8 (3.9e-3) of itself. Products accumulate in
# float32 (a bfloat16 conv is one rounding of its output off float64: docs/numerics.md), so the error is not the
# reductions' (as in float32) but the roundings to bfloat16 between layers,
# BF16_FORWARD_ROUNDINGS of them from the images to the loss: the images; per conv block its BatchNorm output,
# kernel, conv output, bias sum and ELU output (5 x 3); dense1's kernel, product, bias sum and ELU (4); dense2's
# kernel, product and bias sum (3). Independent roundings add like a random walk: LAMBDA * u * sqrt(R) for one
# run against exact arithmetic, sqrt(2 R) for two runs rounding differently, 8e-2 of the loss: the trajectory's
# loss tolerance. The parameters and moving statistics sum the steps' differences: twice that (the measured
# figures are in docs/numerics.md). The accuracy band is float32's: after the notebook's 1,000 steps, the test
# accuracy's spread over seeds and frameworks, not rounding, decides it.
BF16_UNIT_ROUNDOFF = 2.0**-8
BF16_FORWARD_ROUNDINGS = 1 + 5 * len(CNN_CONVS) + 4 + 3


def bf16_loss_tolerance() -> float:
    """LAMBDA * u * sqrt(2 R): two mixed-precision runs' loss, relative to its scale (7.9e-2)."""
    return ROUNDING_LAMBDA * BF16_UNIT_ROUNDOFF * math.sqrt(2 * BF16_FORWARD_ROUNDINGS)


CNN_TOLERANCES_BF16 = {
    "trajectory_loss": bf16_loss_tolerance(),
    "trajectory_params": 2 * bf16_loss_tolerance(),
    "accuracy_band": 0.05,
}


# Maximum error relative to max |oracle| that still counts as agreement, by (device, precision).
# CPU: a ceiling above float32's derived bound for the 75-deep conv (LAMBDA u sqrt(75) of its terms); TF32
# (10-bit mantissa) on GPUs and one bfloat16 pass (8-bit mantissa) on TPUs: their mantissas, with margin.
TOLERANCES = {
    ("cpu", "default"): 1e-5,
    ("cpu", "highest"): 1e-5,
    ("gpu", "default"): 5e-3,
    ("gpu", "highest"): 1e-5,
    ("tpu", "default"): 3e-2,
    ("tpu", "highest"): 1e-4,
}


# bfloat16 inputs and output, whatever the device: 8-bit mantissa, u = 3.9e-3 per rounding, about 2.6 roundings
# (inputs and output; figures in docs/numerics.md).
BF16_TOLERANCE = 1e-2
DTYPES = ("float32", "bfloat16")  # the number formats a row's inputs and outputs come in


def tolerance(device: str, precision: str, dtype: str = "float32") -> float:
    """Agreement threshold (relative to max |reference|) for outputs computed on `device` in `dtype`."""
    try:
        tol = TOLERANCES[(device, precision)]
    except KeyError:
        raise ValueError(f"no tolerance for device={device!r} precision={precision!r}") from None
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    return max(tol, BF16_TOLERANCE) if dtype == "bfloat16" else tol


# The 2018 article's own figures: a labelled reference set, never mixed with measured rows. Times
# are per conv call, or 5 epochs of the notebook's schedule for cnn_train (500 steps at batch 1024).
ARTICLE_ROWS = (
    {"workload": "conv", "device": "cpu", "device_kind": "Colab CPU (2018)", "time_s": 2.44, "invalid_reason": None},
    {"workload": "conv", "device": "gpu", "device_kind": "Tesla K80", "time_s": 0.280, "invalid_reason": None},
    {
        "workload": "conv",
        "device": "tpu",
        "device_kind": "TPU v2-8, unchanged code",
        "time_s": 2.47,
        "invalid_reason": "no TPU code path: it ran on the host CPU",
    },
    {
        "workload": "conv",
        "device": "tpu",
        "device_kind": "TPU v2-8, batch_parallel",
        "time_s": 1.22e-3,
        "invalid_reason": "measured nothing: conv_op returned no output, so the conv was pruned (80.5 GFLOP in "
        "1.22 ms would be 66 TFLOP/s)",
    },
    {
        "workload": "cnn_train",
        "device": "tpu",
        "device_kind": "TPU v2-8",
        "time_s": 40.0,
        "invalid_reason": None,
        "approx": "about",
    },
    {
        "workload": "cnn_train",
        "device": "gpu",
        "device_kind": "Tesla K80",
        "time_s": 120.0,
        "invalid_reason": None,
        "approx": "over",
    },
)


# The registry: every workload once, with its specs and the kinds of row it produces.


@dataclass(frozen=True)
class RowKind:
    """One kind of timed row: what a worker builds and times, and how the parent reads the result.

    name: the rows' 'workload' field. case: the key of the parity.cases.CASES entry that builds the timed
    case. variants: (implementation, replicas) -> its variants. prepare: for an operation (case 'op'), the
    implementation's function that places its inputs. tolerance:
    (device, precision, dtype) -> the oracle tolerance of the row's output, None when the workload's
    checks judge its numbers instead. epochs: one call is a training epoch (the first epoch apart,
    then epochs - 1 timed ones) rather than a calibrated number of calls. seeded: run once per --seeds.
    """

    name: str
    case: str
    variants: Callable[[Any, int], tuple[str, ...]]
    tolerance: Callable[[str, str, str], float | None]
    prepare: Callable[[Any], Callable] | None = None
    epochs: bool = False
    seeded: bool = False


@dataclass(frozen=True)
class Workload:
    """A workload: its specs (full size, the CPU's default, --quick), its row kinds, and the spec fields the
    command line may override (--batch, --epochs, --steps-per-epoch). A trained workload's parent side (data,
    shared initial weights, parity checks) is registered in parity.suite.SUITES."""

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
            (RowKind("matmul", "op", _matmul_variants, matmul_tolerance, prepare=_prepare_matmul),),
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
