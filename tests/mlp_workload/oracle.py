"""The test MLP's float64 oracle: the forward pass and its gradients written out by hand, with what the tolerances
read of each step (the magnitudes each reduction sums)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlp_workload.spec import PIXEL_SCALE
from parity.workloads.trained.loss import cross_entropy


def named(weights: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Keras-order arrays by name ('dense1.kernel', ...), in float64."""
    if len(weights) != 4:
        raise ValueError(f"expected 4 weight arrays (Keras order), got {len(weights)}")
    keys = ("dense1.kernel", "dense1.bias", "dense2.kernel", "dense2.bias")
    return {k: np.asarray(w, np.float64) for k, w in zip(keys, weights, strict=True)}


@dataclass
class Trace:
    """The forward pass in float64: the flattened, scaled inputs, the hidden layer, the logits, the probabilities."""

    w: dict[str, np.ndarray]
    x: np.ndarray
    h: np.ndarray
    logits: np.ndarray
    probs: np.ndarray


def mlp_trace(weights: list[np.ndarray], x: np.ndarray) -> Trace:
    """(B, 28, 28, 1) raw pixels through the MLP, every intermediate kept."""
    w = named(weights)
    xs = np.asarray(x, np.float64).reshape(len(x), -1) * PIXEL_SCALE
    h = np.tanh(xs @ w["dense1.kernel"] + w["dense1.bias"])
    logits = h @ w["dense2.kernel"] + w["dense2.bias"]
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return Trace(w, xs, h, logits, e / e.sum(-1, keepdims=True))


def mlp_forward(weights: list[np.ndarray], x: np.ndarray) -> dict[str, np.ndarray]:
    """Every block of the forward pass by name (spec.BLOCKS), float64."""
    tr = mlp_trace(weights, x)
    return {"dense1": tr.h, "dense2": tr.logits, "probs": tr.probs}


@dataclass
class Backward:
    """One batch's mean cross-entropy, the 4 gradients (Keras order), and for each gradient the largest sum of
    |terms| of its reductions (dense2's over the batch; dense1's through dense2's kernel, then over the batch): the
    scale its rounding is relative to, larger than the gradient where a sum cancels."""

    loss: float
    grads: list[np.ndarray]
    term_scales: list[float]


def mlp_loss_and_grads(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> Backward:
    """Float64 loss and gradients of one batch (no framework code)."""
    tr = mlp_trace(weights, x)
    b = len(y)
    loss, d2 = cross_entropy(tr.logits, tr.probs, y)
    d1 = (d2 @ tr.w["dense2.kernel"].T) * (1 - tr.h * tr.h)
    grads = [tr.x.T @ d1, d1.sum(0), tr.h.T @ d2, d2.sum(0)]
    ones, d1_terms = np.ones((b, 1)), (np.abs(d2) @ np.abs(tr.w["dense2.kernel"]).T) * (1 - tr.h * tr.h)
    pairs = ((tr.x, d1_terms), (ones, d1_terms), (tr.h, d2), (ones, d2))
    scales = [float(np.max(np.abs(a).T @ np.abs(d))) for a, d in pairs]
    return Backward(loss, grads, scales)
