"""The notebook's CNN, declared once: both implementations build it from here, and the harness derives from it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# The notebook's CNN, declared once. Its 5x5 SAME convs as (input size, channels in, channels out),
# each followed by 2x2 max pooling, and its dense layers' widths (flattened 3x3x256 -> 256 -> 10).
# Everything else is derived: the weight table (Keras's get_weights() order, the exchange format
# of both implementations), parameter counts, FLOPs, the checks' names, the oracle's slicing.
CNN_IMAGE = (28, 28, 1)
CNN_CONVS = ((28, 1, 64), (14, 64, 128), (7, 128, 256))
CNN_DENSE = (2304, 256, 10)
BN_FIELDS = ("gamma", "beta", "moving_mean", "moving_variance")  # the last two: statistics, not trained
# The outputs forward_layers() returns on both sides, in order: what the layer-by-layer check compares.
CNN_BLOCKS = ("block1", "block2", "block3", "dense1", "logits", "probs")
# Training steps per host dispatch in the multi-step variants (TF: steps_per_execution, several steps in one
# tf.function; JAX: lax.scan over stacked batches), the same in both frameworks; an epoch's remainder is a
# shorter last dispatch. On a TPU a small model's step is dominated by the host round trip.
STEPS_PER_DISPATCH = 10


@dataclass(frozen=True)
class Weight:
    """One array of the CNN in Keras's order: its layer, its field (Keras's name) and its shape."""

    layer: str
    field: str
    shape: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.layer}.{self.field}"

    @property
    def trainable(self) -> bool:
        return not self.field.startswith("moving_")


def _cnn_weights() -> tuple[Weight, ...]:
    out = []
    for i, (_, cin, cout) in enumerate(CNN_CONVS, 1):
        out += [Weight(f"bn{i}", f, (cin,)) for f in BN_FIELDS]
        out += [Weight(f"conv{i}", "kernel", (5, 5, cin, cout)), Weight(f"conv{i}", "bias", (cout,))]
    for i, (fan_in, fan_out) in enumerate(zip(CNN_DENSE[:-1], CNN_DENSE[1:], strict=True), 1):
        out += [Weight(f"dense{i}", "kernel", (fan_in, fan_out)), Weight(f"dense{i}", "bias", (fan_out,))]
    return tuple(out)


CNN_WEIGHTS = _cnn_weights()
CNN_TRAINABLE = tuple(w for w in CNN_WEIGHTS if w.trainable)  # Keras's trainable_weights order: the gradients'
_sizes = {w.name: int(np.prod(w.shape)) for w in CNN_WEIGHTS}
CNN_PARAMS = {
    "total": sum(_sizes.values()),
    "trainable": sum(_sizes[w.name] for w in CNN_TRAINABLE),
    "non_trainable": sum(_sizes[w.name] for w in CNN_WEIGHTS if not w.trainable),
}


def check_weights(weights: Sequence[np.ndarray], dtype=np.float32) -> None:
    """Raise ValueError naming the layer when a weight list does not fit CNN_WEIGHTS (length, shape, dtype), or
    holds a value that is not finite."""
    if len(weights) != len(CNN_WEIGHTS):
        raise ValueError(f"expected {len(CNN_WEIGHTS)} weight arrays (Keras get_weights() order), got {len(weights)}")
    for i, (a, w) in enumerate(zip(weights, CNN_WEIGHTS, strict=True)):
        a = np.asarray(a)
        if tuple(a.shape) != w.shape:
            raise ValueError(f"weight {i} (layer {w.layer}): shape {tuple(a.shape)}, expected {w.shape}")
        if a.dtype != dtype:
            raise ValueError(f"weight {i} (layer {w.layer}): dtype {a.dtype}, expected {np.dtype(dtype)}")
        if not np.all(np.isfinite(a)):  # a NaN or an infinity would only come back as NaN from the forward pass
            bad = int(np.size(a) - np.count_nonzero(np.isfinite(a)))
            raise ValueError(f"weight {i} (layer {w.layer}): {bad} value(s) not finite (NaN or infinity); refused")
