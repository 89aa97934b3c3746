"""The test MLP's tolerances, derived from the shared rounding model (parity.common.tolerances), as the CNN's and the
row LSTM's are: each forward block's float32 bound carried element by element through the layers on the run's own
inputs, the loss's and gradients' bound along the path of reductions (each gradient judged on its terms' scale,
where its sum over the batch cancels), and the trajectory and accuracy tables the trained workloads share."""

from __future__ import annotations

import math

import numpy as np

from mlp_workload.oracle import Trace, mlp_loss_and_grads, mlp_trace
from mlp_workload.spec import CLASSES, FEATURES
from parity.common.tolerances import F32_UNIT_ROUNDOFF, ROUNDING_LAMBDA, rounding_bound, tolerance

U = F32_UNIT_ROUNDOFF
ULPS = 4  # a float32 tanh, exp or log: within a few ulps


def _forward_sd(tr: Trace) -> dict[str, np.ndarray]:
    """The sd of each block's float32 error, per element: a product's own rounding u sqrt(n) sum|terms|, its inputs'
    errors carried through the weights (in quadrature: different units'), tanh's derivative and a few ulps, and
    softmax's Jacobian plus its shift, exp, sum and division."""
    w1, b1, w2, b2 = (tr.w[k] for k in ("dense1.kernel", "dense1.bias", "dense2.kernel", "dense2.bias"))
    terms1 = np.abs(tr.x) @ np.abs(w1)
    pre1 = U * terms1 + U * math.sqrt(FEATURES + 1) * (terms1 + np.abs(b1))  # the pixels' scaling, then the sum
    h = (1 - tr.h * tr.h) * pre1 + ULPS * U * np.abs(tr.h)
    hidden = w1.shape[1]
    logits = np.sqrt((h * h) @ (w2 * w2)) + U * math.sqrt(hidden + 1) * (np.abs(tr.h) @ np.abs(w2) + np.abs(b2))
    p = tr.probs
    spread = np.abs(tr.logits - tr.logits.max(-1, keepdims=True))
    probs = p * (logits + (p * logits).sum(-1, keepdims=True)) + U * p * (spread + ULPS + math.sqrt(CLASSES) + 1)
    return {"dense1": h, "dense2": logits, "probs": probs}


def mlp_block_tolerances(weights: list[np.ndarray], x: np.ndarray, device: str, precision: str) -> dict[str, float]:
    """Each forward block's bound on these inputs, LAMBDA sd of its worst element over max |block|; at least the
    reduced-precision figure where the device multiplies in TF32 or bfloat16."""
    tr = mlp_trace(weights, x)
    ref = {"dense1": tr.h, "dense2": tr.logits, "probs": tr.probs}
    floor = _reduced(device, precision, "forward")
    return {
        k: max(ROUNDING_LAMBDA * float(np.max(sd)) / float(np.max(np.abs(ref[k]))), floor)
        for k, sd in _forward_sd(tr).items()
    }


def mlp_forward_reductions(hidden: int, batch: int) -> list[int]:
    """Lengths of the reductions from the images to the training loss: both products, softmax's sum, the mean."""
    return [FEATURES + 1, hidden + 1, CLASSES, batch]


def mlp_loss_tolerance(hidden: int, batch: int, device: str, precision: str) -> float:
    """One batch's loss against float64, relative to it: the forward path's rounding bound."""
    return max(rounding_bound(mlp_forward_reductions(hidden, batch)), _reduced(device, precision, "grads"))


def mlp_grad_tolerance(hidden: int, batch: int, device: str, precision: str) -> float:
    """Every gradient's error over its largest sum of |terms| (oracle.Backward.term_scales): the longest path's
    bound, forward and back (the logits' gradient through dense2's kernel, then the sum over the batch). Relative
    to the terms, a sum that cancels is judged on the scale its rounding is relative to."""
    path = mlp_forward_reductions(hidden, batch) + [CLASSES, batch]
    return max(rounding_bound(path), _reduced(device, precision, "grads"))


# TF32 (GPU) and bfloat16 passes (TPU) at 'default' precision: the trained workloads' reduced table, not derived.
MLP_TOLERANCES_REDUCED = {
    "forward": 3e-2,
    "grads": 5e-2,
    "trajectory_loss": 5e-2,
    "trajectory_params": 1e-1,
    "accuracy_band": 0.05,
}
# Trajectories and accuracy in float32: the margins over measurement the CNN's and the LSTM's are (no bound on many
# Adam steps follows from the arithmetic).
MLP_TOLERANCES = {"trajectory_loss": 5e-3, "trajectory_params": 2e-2, "accuracy_band": 0.05}


def _reduced(device: str, precision: str, what: str) -> float:
    return 0.0 if tolerance(device, precision) <= 1e-4 else MLP_TOLERANCES_REDUCED[what]


def mlp_bounds(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray, device: str, precision: str) -> dict:
    """The loss's bound relative to it, and each gradient's relative to its max |float64| (as the shared checks judge
    a gradient, parity.workloads.trained.model_checks): mlp_grad_tolerance on its terms' scale, which is above the
    gradient's own where its sum over the batch cancels."""
    hidden, batch = np.shape(weights[1])[0], len(y)
    back, tol = mlp_loss_and_grads(weights, x, y), mlp_grad_tolerance(hidden, batch, device, precision)
    grads = [tol * s / float(np.max(np.abs(g))) for g, s in zip(back.grads, back.term_scales, strict=True)]
    return {"loss": mlp_loss_tolerance(hidden, batch, device, precision), "grads": grads}


def mlp_tolerances(device: str, precision: str, dtype: str = "float32", spec=None) -> dict[str, float]:
    """The trajectory and accuracy thresholds for this device and precision (the fake offers no bfloat16 trainer)."""
    table = MLP_TOLERANCES_REDUCED if tolerance(device, precision) > 1e-4 else MLP_TOLERANCES
    return {k: table[k] for k in MLP_TOLERANCES}


def mlp_infer_tolerance(device: str, precision: str, dtype: str) -> float:
    """The device's agreement table: the inference case replaces it by the bound derived for its own weights and
    images (mlp_block_tolerances' 'probs'), which the row records."""
    return tolerance(device, precision, dtype)
