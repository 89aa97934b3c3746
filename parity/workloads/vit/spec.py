"""The small ViT's spec: its full size, the CPU's default and --quick, and its FLOP and byte formulas (the
architecture itself is parity.api.vit, which every implementation builds from). Why each size:
docs/workloads.md, "The vision transformer"."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from parity.api.vit import VitArchitecture


@dataclass(frozen=True)
class VitSpec:
    """A training run of the ViT on Fashion-MNIST (global batch = per-replica batch x replicas), with the CNN's
    optimiser (Adam), loss (cross-entropy) and schedule."""

    dim: int = 192  # ViT-Tiny's width and heads (Touvron et al., 2021), at half its depth
    depth: int = 6
    heads: int = 3
    mlp: int = 768  # 4 x dim, as every ViT
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

    @property
    def architecture(self) -> VitArchitecture:
        return VitArchitecture(self.dim, self.depth, self.heads, self.mlp)

    def step_flops(self) -> int:
        """Training FLOPs of one step: forward + backward = 3 x forward (the backward pass computes two products
        per product, for the input gradient and the weight gradient; LayerNorm, softmax, GELU and Adam's
        elementwise work not counted)."""
        return 3 * self.global_batch * self.architecture.forward_flops()

    def step_min_bytes(self) -> int:
        """A lower bound on one step's memory traffic: the batch (float32 pixels, int32 labels) read once, and
        parameters and Adam's two moments each read and written once (float32)."""
        a = self.architecture
        return self.global_batch * (4 * a.image_size**2 + 4) + 6 * 4 * a.params()

    def infer_min_bytes(self, images: int) -> int:
        """A lower bound on inference traffic: the images, every weight once, the probabilities."""
        a = self.architecture
        return images * 4 * (a.image_size**2 + a.classes) + 4 * a.params()

    def to_dict(self) -> dict:
        return asdict(self)


# The full size (GPU/TPU default): ViT-Tiny's width at 6 blocks, the CNN notebook's batch and schedule.
VIT_FULL = VitSpec()
# The CPU's default: width 64 in 4 heads of 16, 2 blocks, so that a step's products (49 tokens x 256 images = 12544
# rows by 64 to 256 columns) keep 2 cores busy while a row ends in seconds: 8.4 GFLOP a step, about the LSTM's; 5
# timed epochs of 2 steps, as the CNN's (parity.judging.stats.MIN_CALLS). Two blocks, not four: compiling (TF's
# tracing, XLA, Inductor) grows with the blocks and took most of the ViT's share of the default run at four.
VIT_CPU = VitSpec(dim=64, depth=2, heads=4, mlp=256, global_batch=256, steps_per_epoch=2, epochs=6)
VIT_QUICK = VitSpec(
    dim=32, depth=2, heads=2, mlp=64, global_batch=32, steps_per_epoch=2, epochs=2, train_size=2048, test_size=512
)
