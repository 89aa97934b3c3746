"""What a worker prepares and times for an operation (the conv, the matmul), and the bfloat16 peak's measurement.

A case builder returns (Timer, info, finish): the timed callable with its verifier, the figures a row needs
(FLOPs, bytes, the compiler's count as `cost`), and an untimed closing step (a trained model's evaluation).
parity.engine.registry lists every workload's cases (the CNN's are parity.workloads.cnn.cases) and untimed calls.
"""

from __future__ import annotations

import math
import time
from functools import cache

import numpy as np

from parity.common.tolerances import BF16_TOLERANCE
from parity.engine.timing import Timer, output_verifier
from parity.workloads import MatmulSpec, RowKind


def variant_dtype(impl, variant: str) -> str:
    """The number format of a variant's inputs and outputs, as its implementation declares it."""
    return "bfloat16" if variant in impl.BFLOAT16_VARIANTS else "float32"


def offered(impl, variants, tuned: bool) -> list[str]:
    """The variants a run asks for: all of them, or (tuned=False) the framework out of the box only.

    Where the framework offers no out-of-the-box way (TF's multi-worker CNN: only 'loop' and 'loop+spe'), its
    first variant stands in.
    """
    return [v for v in variants if tuned or v not in impl.TUNED_VARIANTS] or list(variants[:1])


def best_known(impl, variants) -> dict[str, str]:
    """Number format -> the variant of the framework's best-known configuration among `variants` (one workload's,
    at one replica count): the first of them in the implementation's BEST_VARIANTS, its order of preference."""
    best: dict[str, str] = {}
    for v in impl.BEST_VARIANTS:
        if v in variants:
            best.setdefault(variant_dtype(impl, v), v)
    return best


def _saving(rows, save: str | None):
    """rows(), also saving what it read, for the parent's framework-vs-framework comparison."""

    def read(out, indices):
        got = rows(out, indices)
        if save:
            np.save(save, got)
        return got

    return read


@cache
def _op_inputs(spec):
    inputs = spec.inputs()
    idx = spec.oracle_indices()
    return inputs, idx, spec.oracle(inputs, idx)


def op_case(impl, devices, kind: RowKind, spec, variant: str, device: str, precision: str, save: str | None, **_):
    """One operation (the conv, the matmul) as a Timer: the implementation's prepare function on the spec's
    inputs, every call's output checked on the spec's oracle rows."""
    dtype = variant_dtype(impl, variant)
    inputs, idx, ref = _op_inputs(spec)
    p = kind.prepare(impl)(variant, *inputs, devices, **spec.op_args())
    verify = output_verifier(
        p.shape,
        _saving(p.rows, save),
        p.placement,
        spec.output_shape,
        idx,
        ref,
        kind.tolerance(device, precision, dtype),
        device,
        impl.process_info(devices)["local_replicas"],
    )
    info = {
        "flops": spec.flops(),
        "flops_unpadded": spec.flops_unpadded(),
        "flops_formula": type(spec).flops.__doc__,
        "min_bytes": spec.min_bytes(2 if dtype == "bfloat16" else None),
        "cost": p.cost,
        # this process's share of one output: a row whose peak memory is below it measured nothing real
        "output_bytes": math.prod(spec.output_shape)
        * (2 if dtype == "bfloat16" else 4)
        * impl.process_info(devices)["local_replicas"]
        // len(devices),
    }
    return Timer(p.run, impl.block, verify, impl.slowest), info, dict


def bf16_matmul_peak(impl, devices, req: dict) -> dict:
    """FLOP/s of this framework's bfloat16 n x n matrix product on one device, the best of `reps` calls, each
    checked against float64 (the CPU's measured bfloat16 peak, as NumPy's matmul measures the float32 one)."""
    variants = [v for v in impl.matmul_variants(1) if v in impl.BFLOAT16_VARIANTS]
    if not variants:
        return {"flops": None}
    spec = MatmulSpec(m=req["n"], k=req["n"], n=req["n"])
    inputs, idx, ref = _op_inputs(spec)
    p = impl.prepare_matmul(variants[0], *inputs, devices[:1], **spec.op_args())
    best = float("inf")
    for _ in range(req.get("reps", 3) + 1):  # the first call compiles
        t0 = time.perf_counter()
        out = p.run()
        impl.block(out)
        best = min(best, time.perf_counter() - t0)
        err = np.max(np.abs(p.rows(out, idx).astype(np.float64) - ref)) / np.max(np.abs(ref))
        if not err <= BF16_TOLERANCE:
            return {"flops": None, "why": f"its bfloat16 matrix product is {err:.1e} off float64: not used"}
    return {"flops": spec.flops() / best, "variant": variants[0]}
