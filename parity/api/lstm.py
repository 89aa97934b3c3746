"""The row LSTM, declared once: Fashion-MNIST read one image row per time step (28 steps of 28 pixels), two stacked
LSTM layers (the first returning its sequence), a dense layer to the 10 classes and softmax. Every implementation
builds it from here, and the harness derives its weight table, FLOPs and checks from it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from parity.api.cnn import Weight
from parity.api.weights import check_table

# The order of the four gates in the columns of a kernel, a recurrent kernel and the bias: Keras's (input, forget,
# cell candidate, output). Flax's OptimizedLSTMCell splits i, f, g, o: the same order under another name.
GATES = ("i", "f", "c", "o")
LSTM_FIELDS = ("kernel", "recurrent_kernel", "bias")  # a Keras LSTM layer's get_weights(), in order
PIXEL_SCALE = 1.0 / 255.0  # the model's first op: uint8 pixels to [0, 1] (raw pixels would saturate the gates)


@dataclass(frozen=True)
class LstmArchitecture:
    """The row LSTM at a width of `units` per LSTM layer.

    names: Keras's layer names, in the model's order: the rows (the image reshaped to steps x features), the pixel
    scaling, the first LSTM (its whole sequence out), the second (its last hidden state out), the dense layer (the
    logits) and the softmax.
    """

    units: int
    steps: int = 28  # time steps: the image's rows
    features: int = 28  # inputs per step: a row's pixels
    classes: int = 10
    names: tuple[str, str, str, str, str, str] = ("rows", "scale", "lstm1", "lstm2", "dense", "probs")
    forget_bias: float = 1.0  # Keras's unit_forget_bias=True, set on every side (Flax starts it at 0)

    def __post_init__(self) -> None:
        if self.units < 1 or self.steps < 1 or self.features < 1:
            raise ValueError(f"an LSTM needs positive units, steps and features, got {self}")

    @property
    def image(self) -> tuple[int, int, int]:
        return (self.steps, self.features, 1)

    @property
    def lstm_layers(self) -> tuple[tuple[str, int], ...]:
        """(Keras name, inputs per step) of each LSTM layer, in order."""
        return ((self.names[2], self.features), (self.names[3], self.units))

    @property
    def blocks(self) -> dict[str, str]:
        """The outputs forward_layers() returns on every side, in order, by the layer that puts each out: the first
        LSTM's sequence (batch, steps, units), the second's last hidden state (batch, units), the logits, the
        softmax's probabilities."""
        lstm1, lstm2, dense, probs = self.names[2:]
        return {lstm1: lstm1, lstm2: lstm2, dense: "logits", probs: "probs"}

    @property
    def weights(self) -> tuple[Weight, ...]:
        """Every array in Keras's get_weights() order: each LSTM's kernel (inputs, 4U), recurrent kernel (U, 4U) and
        bias (4U,), gates in GATES order, then the dense layer's kernel and bias. All trainable."""
        u, out = self.units, []
        for name, inputs in self.lstm_layers:
            out += [Weight(name, "kernel", (inputs, 4 * u)), Weight(name, "recurrent_kernel", (u, 4 * u))]
            out.append(Weight(name, "bias", (4 * u,)))
        dense = self.names[4]
        return (*out, Weight(dense, "kernel", (u, self.classes)), Weight(dense, "bias", (self.classes,)))

    def params(self) -> int:
        return sum(int(np.prod(w.shape)) for w in self.weights)

    def forward_flops(self) -> int:
        """Forward FLOPs of one image: the gates' products, 2 * 4U * (inputs + U) per LSTM layer per step, and the
        dense layer's 2 * U * classes (the gates' elementwise work, about 10U a step, not counted, as the CNN's
        BatchNorm is not)."""
        u = self.units
        gates = sum(2 * 4 * u * (inputs + u) for _, inputs in self.lstm_layers)
        return self.steps * gates + 2 * u * self.classes


def lstm_architecture(units: int) -> LstmArchitecture:
    return LstmArchitecture(units)


def units_of(weights: Sequence[np.ndarray]) -> int:
    """The width a weight list in Keras's order was made for (its first recurrent kernel's rows). Raises ValueError
    where the list is not an LSTM's."""
    if isinstance(weights, np.ndarray | str | bytes) or not isinstance(weights, Sequence) or len(weights) < 2:
        raise ValueError(f"expected a list of {len(LstmArchitecture(1).weights)} LSTM weight arrays")
    return int(np.shape(weights[1])[0])


def check_lstm_weights(weights: Sequence[np.ndarray], units: int, dtype=np.float32) -> None:
    """Raise ValueError naming the layer when a weight list does not fit the LSTM of `units` (length, shape, dtype),
    or holds a value that is not finite."""
    check_table(weights, LstmArchitecture(units).weights, dtype)
