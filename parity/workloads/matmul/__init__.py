"""A large matrix product, each framework's ceiling on the machine: its spec, formulas, oracle and tolerance, and the
measurement of a CPU's bfloat16 peak that the engine asks a worker for (its `peak_call`). The implementations' modules:
jax_impl/matmul.py, tf_impl/matmul.py (the adapter's `prepare`)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np

from parity.common.tolerances import BF16_TOLERANCE, rounding_bound, tolerance
from parity.workloads.base import RowKind, Workload
from parity.workloads.ops import op_case, op_inputs


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
# The CPU's default: 2048 on a side (docs/workloads.md gives its FLOPs), still bound by the multiplies (about 340
# FLOPs a byte of its operands and output), where 4096's row minimum (parity.judging.stats.MIN_CALLS) reached the
# default's budget by itself.
MATMUL_CPU = MatmulSpec(m=2048, k=2048, n=2048)
MATMUL_QUICK = MatmulSpec(m=256, k=256, n=256)
# A GPU's or TPU's default: 8192 on a side, 1.1 TFLOP a call. At 4096 (0.14 TFLOP) a call's launch and
# synchronisation are a large part of its time on a TPU, at 8192 a few percent (docs/tpu.md, "The roofline", has the
# v5e's figures).
MATMUL_ACCELERATOR = MatmulSpec(m=8192, k=8192, n=8192)


def matmul_tolerance(device: str, precision: str, dtype: str) -> float:
    """The device's tolerance, or float32's rounding bound over the longest contraction the device runs by default
    if larger: a CPU's the full size's 4096 (which covers its default's 2048), a GPU's or TPU's 8192."""
    k = MATMUL_FULL.k if device == "cpu" else MATMUL_ACCELERATOR.k
    return max(tolerance(device, precision, dtype), rounding_bound([k]))


def _prepare(impl):
    return impl.adapter("matmul").prepare


def bf16_matmul_peak(impl, devices, req: dict) -> dict:
    """FLOP/s of this framework's bfloat16 n x n matrix product on one device, the least time of `reps` calls, each
    checked against float64 (the CPU's measured bfloat16 peak, as NumPy's matmul measures the float32 one)."""
    variants = [v.name for v in impl.variants("matmul", 1) if v.dtype == "bfloat16"]
    if not variants:
        return {"flops": None}
    spec = MatmulSpec(m=req["n"], k=req["n"], n=req["n"])
    inputs, idx, ref = op_inputs(spec)
    p = impl.adapter("matmul").prepare(variants[0], *inputs, devices[:1], **spec.op_args())
    least = float("inf")
    for _ in range(req.get("reps", 3) + 1):  # the first call compiles
        t0 = time.perf_counter()
        out = p.run()
        impl.block(out)
        least = min(least, time.perf_counter() - t0)
        err = np.max(np.abs(p.rows(out, idx).astype(np.float64) - ref)) / np.max(np.abs(ref))
        if not err <= BF16_TOLERANCE:
            return {"flops": None, "why": f"its bfloat16 matrix product is {err:.1e} off float64: not used"}
    return {"flops": spec.flops() / least, "variant": variants[0]}


WORKLOAD = Workload(
    "matmul",
    MATMUL_FULL,
    MATMUL_CPU,
    MATMUL_QUICK,
    (RowKind("matmul", op_case, matmul_tolerance, prepare=_prepare, ceiling=True),),
    calls={"bf16_peak": bf16_matmul_peak},
    peak_call="bf16_peak",
    rank=4,
    accelerator=MATMUL_ACCELERATOR,
)
