"""The notebook's CNN, declared once: both implementations build it from here, and the harness derives from it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from parity.api.weights import check_table


@dataclass(frozen=True)
class ConvBlock:
    """BatchNorm, a `kernel` x `kernel` SAME convolution of stride 1 with ELU, `pool` x `pool` max pooling of stride
    `pool` (VALID: an odd last row or column is left out, 7 -> 3), dropout."""

    names: tuple[str, str, str, str]  # Keras's layer names: the BatchNorm, the conv (its ELU inside), pool, dropout
    size: int  # the input's height and width
    channels: int  # the input's channels
    filters: int
    kernel: int
    pool: int
    dropout: float  # the rate in training; adapter('cnn').build(dropout=False) keeps the layer at 0

    @property
    def size_out(self) -> int:
        return self.size // self.pool


@dataclass(frozen=True)
class DenseBlock:
    """A dense layer, ELU, dropout (the first flattens its NHWC input: Keras's order)."""

    names: tuple[str, str, str]  # Keras's layer names: the dense layer, its ELU, the dropout
    units_in: int
    units: int
    dropout: float  # the rate in training; adapter('cnn').build(dropout=False) keeps the layer at 0


@dataclass(frozen=True)
class Output:
    """The last dense layer, its logits in float32 whatever the compute dtype, then softmax (Keras's
    mixed-precision rule for a model's output)."""

    names: tuple[str, str]  # Keras's layer names: the dense layer, the softmax
    units_in: int
    units: int  # one per class


BN_FIELDS = ("gamma", "beta", "moving_mean", "moving_variance")  # the last two: statistics, not trained


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


@dataclass(frozen=True)
class Architecture:
    """The CNN block by block, what both implementations loop over to build it. Raises ValueError where a block's
    declared input is not what the block before it puts out."""

    image: tuple[int, int, int]  # height, width, channels
    convs: tuple[ConvBlock, ...]
    dense: tuple[DenseBlock, ...]
    output: Output
    bn_epsilon: float
    bn_momentum: float

    def __post_init__(self) -> None:
        size, width, channels = self.image
        if width != size:
            raise ValueError(f"image {self.image}: the blocks declare square inputs only")
        for b in self.convs:
            if (b.size, b.channels) != (size, channels):
                raise ValueError(
                    f"{b.names[0]}: declared input {b.size}x{b.size}x{b.channels}, gets {size}x{size}x{channels}"
                )
            size, channels = b.size_out, b.filters
        units = size * size * channels
        for d in (*self.dense, self.output):
            if d.units_in != units:
                raise ValueError(f"{d.names[0]}: declared {d.units_in} inputs, gets {units}")
            units = d.units

    @property
    def dropout_rates(self) -> tuple[float, ...]:
        """Each dropout layer's rate in training, in the model's order."""
        return tuple(b.dropout for b in (*self.convs, *self.dense))

    @property
    def blocks(self) -> dict[str, str]:
        """The outputs forward_layers() returns on both sides, in order, by the layer that puts each out: each conv
        block's (its dropout's: block1, ...), each dense block's (its ELU's, under the dense layer's name), the
        logits and the softmax's probabilities."""
        out = {b.names[-1]: f"block{i}" for i, b in enumerate(self.convs, 1)}
        dense, softmax = self.output.names
        return out | {d.names[1]: d.names[0] for d in self.dense} | {dense: "logits", softmax: "probs"}

    @property
    def weights(self) -> tuple[Weight, ...]:
        """Every array in Keras's get_weights() order: each conv block's BatchNorm (BN_FIELDS), kernel and bias, then
        each dense layer's kernel and bias."""
        out = []
        for b in self.convs:
            bn, conv = b.names[:2]
            out += [Weight(bn, f, (b.channels,)) for f in BN_FIELDS]
            out += [
                Weight(conv, "kernel", (b.kernel, b.kernel, b.channels, b.filters)),
                Weight(conv, "bias", (b.filters,)),
            ]
        for d in (*self.dense, self.output):
            out += [Weight(d.names[0], "kernel", (d.units_in, d.units)), Weight(d.names[0], "bias", (d.units,))]
        return tuple(out)


# The notebook's CNN, declared once. Everything else is derived: the weight table (Keras's get_weights() order, the
# exchange format of both implementations), parameter counts, FLOPs, the checks' names, the oracle's slicing.
_CONVS = (
    ConvBlock(("bn1", "conv1", "pool1", "drop1"), size=28, channels=1, filters=64, kernel=5, pool=2, dropout=0.25),
    ConvBlock(("bn2", "conv2", "pool2", "drop2"), size=14, channels=64, filters=128, kernel=5, pool=2, dropout=0.25),
    ConvBlock(("bn3", "conv3", "pool3", "drop3"), size=7, channels=128, filters=256, kernel=5, pool=2, dropout=0.25),
)
CNN_ARCHITECTURE = Architecture(
    image=(28, 28, 1),
    convs=_CONVS,
    dense=(DenseBlock(("dense1", "elu4", "drop4"), units_in=3 * 3 * 256, units=256, dropout=0.5),),
    output=Output(("dense2", "probs"), units_in=256, units=10),
    bn_epsilon=1e-3,  # Keras's default, set explicitly on both sides: Flax's is 1e-5
    bn_momentum=0.99,  # Keras's default, set explicitly on both sides
)

# What the harness reads: the image, each conv as (input size, channels in, channels out), the dense layers' widths
# (flattened 3x3x256 -> 256 -> 10).
CNN_IMAGE = CNN_ARCHITECTURE.image
CNN_CONVS = tuple((b.size, b.channels, b.filters) for b in CNN_ARCHITECTURE.convs)
_dense = (*CNN_ARCHITECTURE.dense, CNN_ARCHITECTURE.output)
CNN_DENSE = (_dense[0].units_in, *(d.units for d in _dense))
# The outputs forward_layers() returns on both sides, in order: what the layer-by-layer check compares.
CNN_BLOCKS = tuple(CNN_ARCHITECTURE.blocks.values())
# Training steps per host dispatch in the multi-step variants (TF: steps_per_execution, several steps in one
# tf.function; JAX: lax.scan over stacked batches), the same in both frameworks; an epoch's remainder is a
# shorter last dispatch. On a TPU a small model's step is dominated by the host round trip.
STEPS_PER_DISPATCH = 10

CNN_WEIGHTS = CNN_ARCHITECTURE.weights
CNN_TRAINABLE = tuple(w for w in CNN_WEIGHTS if w.trainable)  # Keras's trainable_weights order: the gradients'
_sizes = {w.name: int(np.prod(w.shape)) for w in CNN_WEIGHTS}
CNN_PARAMS = {
    "total": sum(_sizes.values()),
    "trainable": sum(_sizes[w.name] for w in CNN_TRAINABLE),
    "non_trainable": sum(_sizes[w.name] for w in CNN_WEIGHTS if not w.trainable),
}


def check_weights(weights: Sequence[np.ndarray], dtype=np.float32) -> None:
    """Raise ValueError naming the layer when a weight list does not fit CNN_WEIGHTS (length, shape, dtype), or
    holds a value that is not finite (parity.api.weights.check_table)."""
    check_table(weights, CNN_WEIGHTS, dtype, label=lambda w: f"layer {w.layer}")
