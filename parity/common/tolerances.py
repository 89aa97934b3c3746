"""Tolerances, derived, that every workload shares: the float32 rounding model (a reduction's error as a random
walk), bfloat16's mantissa, and the devices' agreement tables. A workload's own thresholds are derived from these in
its package (the CNN's: parity/workloads/cnn/tolerances.py); docs/numerics.md lists each with its basis."""

from __future__ import annotations

import math

import numpy as np

# Float32 rounding, as a model rather than a worst case. A reduction of length n
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
BF16_UNIT_ROUNDOFF = 2.0**-8


def rounding_bound(reductions: list[int]) -> float:
    """LAMBDA * u * sum(sqrt(n)): the modelled float32 error relative to a result's scale."""
    return ROUNDING_LAMBDA * F32_UNIT_ROUNDOFF * sum(math.sqrt(n) for n in reductions)


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


# The unit roundoff of a float32 matrix product's operands, rounded before they multiply, by (device, precision): TF32
# (11 significant bits) on GPUs and one bfloat16 pass (8) on TPUs at 'default'; 0 where they go in as float32.
TF32_UNIT_ROUNDOFF = 2.0**-11
OPERAND_ROUNDOFF = {("gpu", "default"): TF32_UNIT_ROUNDOFF, ("tpu", "default"): BF16_UNIT_ROUNDOFF}


def operand_roundoff(device: str, precision: str) -> float:
    """The unit roundoff a matrix product on `device` at `precision` rounds each float32 operand to (0: none).

    Raises:
        ValueError: a device or precision without a tolerance (TOLERANCES).
    """
    tolerance(device, precision)
    return OPERAND_ROUNDOFF.get((device, precision), 0.0)


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


GRAD_CHUNK = 8  # samples per batched product in grad_sum_bound (bounds its memory at width 768)


def grad_sum_bound(x: np.ndarray, sd_x: np.ndarray, dz: np.ndarray, sd_dz: np.ndarray) -> np.ndarray:
    """LAMBDA · sd of the float32 error of the sum over samples and positions (an LSTM's steps, a ViT's tokens) of
    x^T dz ((B, T, K) and (B, T, J) -> (K, J)): within a sample the positions' errors add linearly (they share the
    trajectory, or attention mixes them), samples in quadrature (independent), plus the last reduction's own
    rounding, u·sqrt(B·T)·Σ|x||dz|: relative to its terms, so a sum that cancels is judged on its terms' scale."""
    var = np.zeros((x.shape[2], dz.shape[2]))
    ax, adz = np.abs(x), np.abs(dz)
    for s in range(0, len(x), GRAD_CHUNK):
        c = slice(s, s + GRAD_CHUNK)
        a = np.swapaxes(sd_x[c], 1, 2) @ adz[c] + np.swapaxes(ax[c], 1, 2) @ sd_dz[c]
        var += np.sum(a * a, axis=0)
    n = x.shape[0] * x.shape[1]
    last = F32_UNIT_ROUNDOFF * math.sqrt(n) * (ax.reshape(n, -1).T @ adz.reshape(n, -1))
    return ROUNDING_LAMBDA * (np.sqrt(var) + last)
