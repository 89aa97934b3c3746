"""The article's single large convolution: its spec (full size and --quick), FLOP and byte formulas, oracle and
tolerance. The implementations' modules: jax_impl/conv.py, tf_impl/conv.py (the adapter's `prepare`)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from parity.common.float64 import conv2d
from parity.common.padding import conv_out_size, valid_taps
from parity.common.tolerances import tolerance
from parity.workloads.base import RowKind, Workload
from parity.workloads.ops import op_case


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
        images, kernels = inputs
        return conv2d(images[idx], kernels, self.stride, self.padding)

    def op_args(self) -> dict:
        """The adapters' `prepare` arguments after the inputs and devices."""
        return {"stride": self.stride, "padding": self.padding}

    def to_dict(self) -> dict:
        return asdict(self)


CONV_FULL = ConvSpec()
# The CPU's default: the article's conv at a quarter of its batch, 32 images (20.1 GFLOP a call, its output 537 MB:
# still far past any cache, each image's work independent of the others'); 32, not 128, so that its rows, their
# inputs and outputs made and checked, stay a small part of the CPU's default run.
CONV_CPU = ConvSpec(batch=32)
CONV_QUICK = ConvSpec(batch=16, height=64, width=64, cout=32)


def _prepare(impl):
    return impl.adapter("conv").prepare


WORKLOAD = Workload(
    "conv", CONV_FULL, CONV_CPU, CONV_QUICK, (RowKind("conv", op_case, tolerance, prepare=_prepare),), rank=0
)
