"""The GRU's bounds, from the harness's float32 rounding model (parity.common.tolerances: a reduction of n terms is
off by about LAMBDA * u * sqrt(n) of their scale, a random walk; docs/numerics.md): every block's output, the loss
and each gradient against float64, for this run's own weights and images; and the trajectory and accuracy
thresholds every trained model shares. Where the device multiplies in TF32 or bfloat16 ('default' on a GPU or TPU),
at least that device's agreement table."""

from __future__ import annotations

import math

import numpy as np

from parity.common.tolerances import F32_UNIT_ROUNDOFF, ROUNDING_LAMBDA, tolerance
from parity_gru import oracle
from parity_gru.spec import GruArchitecture, units_of

ULPS = 4  # a float32 sigmoid, tanh, exp or log: within a few ulps in every framework's kernels


def _floor(device: str, precision: str) -> float:
    """The device's agreement table where it multiplies in fewer bits than float32, else nothing."""
    t = tolerance(device, precision)
    return t if t > 1e-4 else 0.0


def _step_walk(arch: GruArchitecture) -> float:
    """A state's float32 error over its steps, relative to its scale: each step's products (inputs + units terms)
    and its elementwise ops, random over the steps."""
    return math.sqrt(arch.steps) * (math.sqrt(arch.features + arch.units) + ULPS)


def block_tolerances(weights: list[np.ndarray], x: np.ndarray, device: str, precision: str) -> dict[str, float]:
    """Each block's bound (max error relative to max |float64|): the state's walk, then the dense layer's product."""
    arch, floor = GruArchitecture(units_of(weights)), _floor(device, precision)
    state = ROUNDING_LAMBDA * F32_UNIT_ROUNDOFF * _step_walk(arch)
    logits = state + ROUNDING_LAMBDA * F32_UNIT_ROUNDOFF * math.sqrt(arch.units)
    return {"gru": max(state, floor), "logits": max(logits, floor), "probs": max(logits + 2 * ULPS * 1e-7, floor)}


def bounds(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray, device: str, precision: str) -> dict:
    """The loss's bound relative to it, and each gradient's relative to its max |float64|: its terms' scale (the
    sums of absolute values it adds up) times the walk of the forward and backward passes through time plus its own
    sum over the batch and steps."""
    arch, floor = GruArchitecture(units_of(weights)), _floor(device, precision)
    loss, grads, terms = oracle.backward(weights, x, y)
    u = ROUNDING_LAMBDA * F32_UNIT_ROUNDOFF
    walk = 2 * _step_walk(arch) + math.sqrt(len(y) * arch.steps)
    out = []
    for g, t in zip(grads, terms, strict=True):
        peak = float(np.max(np.abs(g)))
        out.append(max(u * walk * float(np.max(t)) / peak if peak > 0 else math.inf, floor))
    logits = block_tolerances(weights, x, device, precision)["logits"]
    return {"forward": logits, "loss": max(logits * (1 + 1 / max(abs(loss), 1e-3)), floor), "grads": out}


# Trajectories (20 Adam steps) and accuracy: the CNN's and the LSTM's figures on their basis (docs/numerics.md, "Every
# tolerance, justified"): no bound on Adam's first steps follows from the arithmetic, so a margin over measurement;
# the accuracy band between frameworks is statistical.
TOLERANCES = {"trajectory_loss": 5e-3, "trajectory_params": 2e-2, "accuracy_band": 0.05}
REDUCED = {"trajectory_loss": 5e-2, "trajectory_params": 1e-1, "accuracy_band": 0.05}


def tolerances(device: str, precision: str, dtype: str = "float32", spec=None) -> dict[str, float]:
    """The trajectory and accuracy thresholds (this example offers no bfloat16 variant)."""
    return dict(REDUCED if _floor(device, precision) else TOLERANCES)
