"""What every trained workload's spec shares: a training run's schedule and data, the fields the engine reads
(docs/your-workload-full.md, "The spec and its architecture"), and the byte bounds every trained model's rows take.
Each workload's spec adds its own size fields, its `architecture` and its `step_flops` (whose docstring is the row's
FLOP formula)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from parity.api.light import CLASSES, IMAGE


@dataclass(frozen=True, kw_only=True)
class TrainedSpec:
    """A training run on Fashion-MNIST (global batch = per-replica batch x replicas). Its fields are keyword-only, so
    that a workload's own size fields come first and a worker rebuilds it as `type(full)(**spec.to_dict())`."""

    global_batch: int = 1024  # the CNN notebook's
    steps_per_epoch: int = 100
    epochs: int = 10
    learning_rate: float = 1e-3
    adam_epsilon: float = 1e-7  # Keras 3's default, set on every side (optax's is 1e-8, PyTorch's 1e-8)
    seed: int = 0
    train_size: int = 60000
    test_size: int = 10000

    @property
    def batch(self) -> int:
        return self.global_batch

    def params(self, trainable: bool = True) -> int:
        """The model's parameters: those Adam updates (`trainable`), else every weight inference reads."""
        return self.architecture.params()

    def step_min_bytes(self) -> int:
        """A lower bound on one step's memory traffic: the batch (float32 pixels, int32 labels) read once, and
        parameters and Adam's two moments each read and written once (float32)."""
        return self.global_batch * (4 * math.prod(IMAGE) + 4) + 6 * 4 * self.params()

    def infer_min_bytes(self, images: int) -> int:
        """A lower bound on inference traffic: the images, every weight once, the probabilities."""
        return images * 4 * (math.prod(IMAGE) + CLASSES) + 4 * self.params(trainable=False)

    def to_dict(self) -> dict:
        return asdict(self)
