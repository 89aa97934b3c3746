"""The float64 loss every trained model's oracle ends in: the mean sparse cross-entropy of its logits, as Keras's
SparseCategoricalCrossentropy on the softmax computes it, and its gradient with respect to the logits."""

from __future__ import annotations

import numpy as np


def cross_entropy(logits: np.ndarray, probs: np.ndarray, y) -> tuple[float, np.ndarray]:
    """The batch's mean cross-entropy of float64 `logits` (B, classes) against labels `y` (B,), and its gradient for
    the logits, (probs - one-hot(y)) / B, with `probs` the logits' softmax.

    Raises:
        ValueError: labels for another batch size than the logits'.
    """
    y = np.asarray(y).astype(np.int64)
    b = len(y)
    if logits.shape[0] != b:
        raise ValueError(f"{b} labels for a batch of {logits.shape[0]}")
    top = logits.max(-1, keepdims=True)
    lse = top[:, 0] + np.log(np.exp(logits - top).sum(-1))
    loss = float(np.mean(lse - logits[np.arange(b), y]))
    d = probs.copy()
    d[np.arange(b), y] -= 1.0
    d /= b
    return loss, d
