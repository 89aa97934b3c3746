"""The GRU classifier, declared once: Fashion-MNIST read one image row per time step (28 steps of 28 pixels), one GRU
layer (Keras's reset_after form, PyTorch's too), a dense layer to the 10 classes and softmax. Every adapter builds it
from here; its weight table, FLOPs and bounds come from here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from parity.api.cnn import Weight
from parity.api.weights import check_table
from parity.workloads.trained.spec import TrainedSpec

GATES = ("z", "r", "h")  # Keras's column order in the kernels and the bias: update, reset, candidate
PIXEL_SCALE = 1.0 / 255.0  # raw pixels would saturate the gates


@dataclass(frozen=True)
class GruArchitecture:
    """The GRU at `units`. names: the layers in the model's order, as Keras names them."""

    units: int
    steps: int = 28
    features: int = 28
    classes: int = 10
    names: tuple[str, ...] = ("rows", "scale", "gru", "dense", "probs")

    def __post_init__(self) -> None:
        if not 1 <= self.units <= 4096:
            raise ValueError(f"a GRU needs 1 to 4096 units, got {self.units}")

    @property
    def image(self) -> tuple[int, int, int]:
        return (self.steps, self.features, 1)

    @property
    def blocks(self) -> dict[str, str]:
        """The outputs every adapter's forward_layers returns, by the layer that puts each out: the GRU's last hidden
        state (batch, units), the logits, the probabilities."""
        return {"gru": "gru", "dense": "logits", "probs": "probs"}

    @property
    def weights(self) -> tuple[Weight, ...]:
        """Every array in Keras's get_weights() order: the GRU's kernel (inputs, 3U), recurrent kernel (U, 3U) and
        bias (2, 3U: the input's, then the recurrent one's, reset_after), then the dense layer's kernel and bias."""
        u = self.units
        return (
            Weight("gru", "kernel", (self.features, 3 * u)),
            Weight("gru", "recurrent_kernel", (u, 3 * u)),
            Weight("gru", "bias", (2, 3 * u)),
            Weight("dense", "kernel", (u, self.classes)),
            Weight("dense", "bias", (self.classes,)),
        )

    def params(self) -> int:
        return sum(int(np.prod(w.shape)) for w in self.weights)

    def forward_flops(self) -> int:
        """Forward FLOPs of one image: the gates' products, 2 * 3U * (inputs + U) a step, and the dense layer's
        2 * U * classes (the gates' elementwise work not counted, as the LSTM's is not)."""
        u = self.units
        return self.steps * 2 * 3 * u * (self.features + u) + 2 * u * self.classes


def units_of(weights: Sequence[np.ndarray]) -> int:
    """The width a weight list in Keras's order was made for (its recurrent kernel's rows)."""
    return int(np.shape(weights[1])[0])


def check_gru_weights(weights: Sequence[np.ndarray], units: int) -> None:
    """Raise ValueError naming the array when a weight list does not fit the GRU of `units`."""
    check_table(weights, GruArchitecture(units).weights, np.float32)


@dataclass(frozen=True)
class GruSpec(TrainedSpec):
    """A training run of the GRU on Fashion-MNIST: its width, beside the schedule and data every trained workload's spec
    declares (global batch = per-replica batch x replicas; parity.workloads.trained.spec.TrainedSpec)."""

    units: int = 128

    @property
    def architecture(self) -> GruArchitecture:
        return GruArchitecture(self.units)

    def step_flops(self) -> int:
        """Training FLOPs of one step: 3 x forward (the backward pass: two products per product)."""
        return 3 * self.global_batch * self.architecture.forward_flops()


GRU_FULL = GruSpec()  # an accelerator's: the notebook's batch and schedule
GRU_CPU = GruSpec(units=64, global_batch=256, steps_per_epoch=2, epochs=6)  # an epoch in a fraction of a second
# --quick: tiny, so that the example's end-to-end test takes seconds a framework
GRU_QUICK = GruSpec(units=8, global_batch=16, steps_per_epoch=2, epochs=2, train_size=256, test_size=64)
