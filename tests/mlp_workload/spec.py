"""The test MLP's spec: its full size, the CPU's default and --quick, its weight table and its FLOP and byte formulas.
Fashion-MNIST's images (or their synthetic stand-in) flattened, one tanh hidden layer, a dense layer to the classes."""

from __future__ import annotations

from dataclasses import dataclass

from parity.api.cnn import Weight
from parity.workloads.trained.spec import TrainedSpec

PIXEL_SCALE = 1.0 / 255.0  # the model's first op: uint8 pixels to [0, 1]
FEATURES, CLASSES = 28 * 28, 10  # the trained workloads' data: Fashion-MNIST's image and classes
BLOCKS = ("dense1", "dense2", "probs")  # forward_layers' outputs, in order: the hidden layer, the logits, softmax's


@dataclass(frozen=True)
class MlpArchitecture:
    """The MLP at a width of `hidden`: what the shared trained-model checks read of an architecture (its blocks, by
    the layer that puts each out, and its weight table in Keras's order)."""

    hidden: int

    @property
    def blocks(self) -> dict[str, str]:
        return {b: b for b in BLOCKS}

    @property
    def weights(self) -> tuple[Weight, ...]:
        """Every array in Keras's get_weights() order, all trainable."""
        h = self.hidden
        return (
            Weight("dense1", "kernel", (FEATURES, h)),
            Weight("dense1", "bias", (h,)),
            Weight("dense2", "kernel", (h, CLASSES)),
            Weight("dense2", "bias", (CLASSES,)),
        )

    def forward_flops(self) -> int:
        """Forward FLOPs of one image: the two products, 2 * (FEATURES * hidden + hidden * CLASSES)."""
        return 2 * (FEATURES * self.hidden + self.hidden * CLASSES)


@dataclass(frozen=True)
class MlpSpec(TrainedSpec):
    """A training run of the two-layer MLP (global batch = per-replica batch x replicas)."""

    hidden: int = 128
    global_batch: int = 256
    steps_per_epoch: int = 20
    epochs: int = 5

    @property
    def architecture(self) -> MlpArchitecture:
        return MlpArchitecture(self.hidden)

    def step_flops(self) -> int:
        """Training FLOPs of one step: forward + backward = 3 x forward (Adam's elementwise work not counted)."""
        return 3 * self.global_batch * self.architecture.forward_flops()

    def params(self, trainable: bool = True) -> int:
        return (FEATURES + 1) * self.hidden + (self.hidden + 1) * CLASSES


MLP_FULL = MlpSpec()
MLP_CPU = MlpSpec(hidden=64, global_batch=128, steps_per_epoch=4, epochs=6, train_size=8192, test_size=1024)
MLP_QUICK = MlpSpec(hidden=16, global_batch=32, steps_per_epoch=4, epochs=3, train_size=512, test_size=128)
