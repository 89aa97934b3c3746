"""A model of the tests' own with a LayerNorm and an exact GELU, for the float64 oracle's tests
(tests/test_float64_oracle.py): Fashion-MNIST's images flattened, a dense layer, LayerNorm, GELU, a dense layer to the
10 classes. Its adapters (jax_impl.py, torch_impl.py) bring float64(model), and no NumPy oracle: its reference is
their float64 run (parity.workloads.trained.float64). Here its weight table and each block's derived bound."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from parity.api.cnn import Weight
from parity.common.tolerances import F32_UNIT_ROUNDOFF, ROUNDING_LAMBDA
from parity.workloads.trained.model import TrainedModel

WORKLOAD, TRAIN, INFER = "ln", "ln_train", "ln_infer"
PIXEL_SCALE = 1.0 / 255.0
FEATURES, CLASSES = 28 * 28, 10
EPSILON = 1e-5  # the model's LayerNorm epsilon, as declared (PyTorch's default; Keras's is 1e-3, Flax's 1e-6)
ULPS = 4  # a float32 exp, erf or rsqrt: within a few ulps


@dataclass(frozen=True)
class LnArchitecture:
    hidden: int

    @property
    def blocks(self) -> dict[str, str]:
        return {b: b for b in ("dense1", "norm", "logits", "probs")}

    @property
    def weights(self) -> tuple[Weight, ...]:
        h = self.hidden
        return (
            Weight("dense1", "kernel", (FEATURES, h)),
            Weight("dense1", "bias", (h,)),
            Weight("norm", "gamma", (h,)),
            Weight("norm", "beta", (h,)),
            Weight("dense2", "kernel", (h, CLASSES)),
            Weight("dense2", "bias", (CLASSES,)),
        )


def initial(hidden: int, seed: int) -> list[np.ndarray]:
    """Weights in Keras's order, float32: a normal kernel, a gamma near 1 and a beta near 0 (set, so not trivial)."""
    rng = np.random.default_rng(seed)
    shapes = [w.shape for w in LnArchitecture(hidden).weights]
    w = [rng.normal(0.0, 1.0 / math.sqrt(s[0]) if len(s) == 2 else 0.1, s) for s in shapes]
    w[2] += 1.0
    return [a.astype(np.float32) for a in w]


def block_tolerances(weights: list, x, device: str, precision: str) -> dict[str, float]:
    """Each block's bound relative to its max |float64| (parity.common.tolerances' rounding model): the first
    product's 784 terms; LayerNorm's mean and variance over the hidden units, and its few elementwise ops; the second
    product's hidden terms, through GELU's few ulps; softmax's."""
    u, h = ROUNDING_LAMBDA * F32_UNIT_ROUNDOFF, np.shape(weights[1])[0]
    dense1 = u * math.sqrt(FEATURES)
    norm = dense1 * 2 + u * (2 * math.sqrt(h) + ULPS)  # (h - mean) / sd: the product's error, twice through the sd
    logits = norm + u * (math.sqrt(h) + ULPS)
    return {"dense1": dense1, "norm": norm, "logits": logits, "probs": logits + 2 * ULPS * F32_UNIT_ROUNDOFF}


def _unused(*args, **kwargs):
    raise AssertionError("not called by the float64 oracle's tests")


def model(oracle) -> TrainedModel:
    """The TrainedModel the shared checks read (parity.workloads.trained.model_checks), judged by `oracle` (a
    FrameworkOracle): its forward checks need only the blocks, their bounds and the architecture."""
    return TrainedModel(
        name=WORKLOAD, full=None, fields=_unused, warm={}, sizes=_unused, weights_tag=_unused, reading=_unused,
        size=_unused, full_why="", block_tolerances=block_tolerances, bounds=_unused, tolerances=_unused,
        architecture=lambda w: LnArchitecture(np.shape(w[1])[0]), grads_check="gradients", float64=oracle,
    )  # fmt: skip
